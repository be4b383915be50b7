"""Stimulus for the MAC: corner cases and random operand triples from several distributions.

Every generator returns raw bit patterns ``(a, b, c)``: ``a``/``b`` as uint16 (bf16) or uint8 (fp8 and
int8 two's complement), ``c`` as uint32 (fp32 or int32). Random generators take a
``numpy.random.Generator`` so a seed reproduces a run.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np

__all__ = [
    "DISTRIBUTIONS",
    "random_vectors",
    "corner_vectors",
    "special_operands",
    "special_accumulators",
    "expected_bits",
    "pack_inputs",
]

_F32_SPECIALS = [
    0x00000000,
    0x80000000,  # +-0
    0x00000001,
    0x80000001,  # smallest subnormals
    0x007FFFFF,
    0x807FFFFF,  # largest subnormals
    0x00800000,
    0x80800000,  # smallest normals
    0x00800001,
    0x00FFFFFF,
    0x7F7FFFFF,
    0xFF7FFFFF,  # largest normals
    0x7F800000,
    0xFF800000,  # +-inf
    0x7FC00000,
    0xFFC00000,  # quiet NaN
    0x7F800001,
    0x7FA00000,  # signalling NaN
    0x3F800000,
    0xBF800000,  # +-1
    0x3F800001,
    0x3F7FFFFF,
    0x33800000,
    0x34000000,
    0x4B800000,
    0xCB800000,
]
_BF16_SPECIALS = [
    0x0000,
    0x8000,
    0x0001,
    0x8001,
    0x007F,
    0x807F,
    0x0080,
    0x8080,
    0x0081,
    0x00FF,
    0x7F7F,
    0xFF7F,
    0x7F80,
    0xFF80,
    0x7FC0,
    0xFFC0,
    0x7F81,
    0x7FA0,
    0x3F80,
    0xBF80,
    0x3F81,
    0x3FFF,
    0x4000,
    0x3F00,
    0x3F01,
    0x3B80,
    0x3400,
    0x1F80,
    0x2000,
    0x5F80,
]


def _fp32_bits(x) -> np.ndarray:
    return np.asarray(x, dtype=np.float32).view(np.uint32)


def _bf16_rand_exp(rng, n, exps):
    """bf16 patterns with random sign and mantissa, biased exponent drawn from ``exps``."""
    e = rng.choice(np.asarray(exps, dtype=np.uint16), n)
    sign = rng.integers(0, 2, n, dtype=np.uint16) << 15
    return (sign | (e << 7) | rng.integers(0, 128, n, dtype=np.uint16)).astype(np.uint16)


def _fp32_rand_exp(rng, n, exps):
    e = rng.choice(np.asarray(exps, dtype=np.uint32), n)
    return (
        (rng.integers(0, 2, n, dtype=np.uint32) << 31) | (e << 23) | rng.integers(0, 1 << 23, n, dtype=np.uint32)
    ).astype(np.uint32)


def _near_cancel(rng, n):
    """a*b close to -c: c is -(a*b) rounded to fp32, moved by a few ulps; exercises massive
    cancellation, ties and sticky bits."""
    a = _bf16_rand_exp(rng, n, np.arange(100, 160))
    b = _bf16_rand_exp(rng, n, np.arange(100, 160))
    p = a.view(ml_dtypes.bfloat16).astype(np.float64) * b.view(ml_dtypes.bfloat16).astype(np.float64)
    c = _fp32_bits((-p).astype(np.float32))
    step = rng.integers(-3, 4, n).astype(np.int64)
    c = (c.astype(np.int64) + step).astype(np.uint32)
    return a, b, c


def _tiny(rng, n):
    """Products and sums near the fp32 normal/subnormal boundary 2**-126 (both modes' hard cases)."""
    # Biased exponents e_a + e_b - 127 near 1 (the fp32 minimum): e_a + e_b in [100, 140].
    ea = rng.integers(40, 100, n)
    eb = np.clip(rng.integers(100, 145, n) - ea, 0, 254)
    a = ((rng.integers(0, 2, n) << 15) | (ea << 7) | rng.integers(0, 128, n)).astype(np.uint16)
    b = ((rng.integers(0, 2, n) << 15) | (eb << 7) | rng.integers(0, 128, n)).astype(np.uint16)
    c = _fp32_rand_exp(rng, n, [0, 0, 1, 1, 2, 3, 24, 25])
    return a, b, c


def _exp_boundaries(rng, n):
    """Exponents at the ends of the range: zero/subnormal, smallest normals, around 1.0, largest
    normals, inf/NaN."""
    exps16 = [0, 0, 1, 2, 63, 64, 65, 126, 127, 128, 189, 190, 191, 253, 254, 255]
    exps32 = [0, 1, 2, 126, 127, 128, 200, 253, 254, 255]
    return _bf16_rand_exp(rng, n, exps16), _bf16_rand_exp(rng, n, exps16), _fp32_rand_exp(rng, n, exps32)


def _uniform(rng, n):
    return (
        rng.integers(0, 1 << 16, n, dtype=np.uint16),
        rng.integers(0, 1 << 16, n, dtype=np.uint16),
        rng.integers(0, 1 << 32, n, dtype=np.uint32),
    )


def _near_magnitude(rng, n):
    """|a*b| and |c| within a few binades of each other (aligned adds with real rounding)."""
    a = _bf16_rand_exp(rng, n, np.arange(110, 145))
    b = _bf16_rand_exp(rng, n, np.arange(110, 145))
    p = np.abs(a.view(ml_dtypes.bfloat16).astype(np.float64) * b.view(ml_dtypes.bfloat16).astype(np.float64))
    scale = 2.0 ** rng.integers(-30, 30, n)
    c = _fp32_bits((p * scale * rng.choice([-1.0, 1.0], n)).astype(np.float32))
    c ^= rng.integers(0, 1 << 16, n, dtype=np.uint32)  # random low mantissa bits: sticky patterns
    return a, b, c


#: Float MAC distributions by name (each ``fn(rng, n) -> (a_bf16_bits, b_bf16_bits, c_fp32_bits)``).
DISTRIBUTIONS = {
    "uniform": _uniform,
    "exp_boundaries": _exp_boundaries,
    "near_cancel": _near_cancel,
    "near_magnitude": _near_magnitude,
    "tiny": _tiny,
}


def _bf16_to_fp8_bits(a16: np.ndarray, fmt: str, rng) -> np.ndarray:
    """Map bf16 stimulus onto fp8 patterns: uniform fp8 codes mixed with converted values."""
    dtype = {"fp8_e4m3fn": ml_dtypes.float8_e4m3fn, "fp8_e5m2": ml_dtypes.float8_e5m2}[fmt]
    with np.errstate(all="ignore"):
        conv = a16.view(ml_dtypes.bfloat16).astype(np.float32).astype(dtype).view(np.uint8)
    uni = rng.integers(0, 256, a16.shape[0], dtype=np.uint8)
    return np.where(rng.integers(0, 2, a16.shape[0]) == 1, conv, uni).astype(np.uint8)


def random_vectors(fmt: str, n: int, rng: np.random.Generator, distribution: str | None = None):
    """``n`` random operand triples for format ``fmt``, drawn evenly from every distribution (or one).

    fp8 operands are drawn from uniform codes and from the bf16 distributions converted to fp8; int8
    operands and int32 accumulators are uniform plus values near the wrap-around points.
    Returns ``(a, b, c)`` bit-pattern arrays (see module docstring).
    """
    if fmt == "int8":
        a = rng.integers(0, 256, n, dtype=np.uint16).astype(np.uint8)
        b = rng.integers(0, 256, n, dtype=np.uint16).astype(np.uint8)
        edge = np.array([0x7FFFFFFF, 0x80000000, 0x7FFF8000, 0x80007FFF, 0, 0xFFFFFFFF], dtype=np.uint32)
        c = np.where(
            rng.integers(0, 2, n) == 1,
            rng.choice(edge, n) + rng.integers(0, 1 << 14, n, dtype=np.uint32),
            rng.integers(0, 1 << 32, n, dtype=np.uint32),
        ).astype(np.uint32)
        return a, b, c
    names = [distribution] if distribution else list(DISTRIBUTIONS)
    parts = []
    counts = [n // len(names) + (1 if i < n % len(names) else 0) for i in range(len(names))]
    for name, cnt in zip(names, counts):
        parts.append(DISTRIBUTIONS[name](rng, cnt))
    a = np.concatenate([p[0] for p in parts]).astype(np.uint16)
    b = np.concatenate([p[1] for p in parts]).astype(np.uint16)
    c = np.concatenate([p[2] for p in parts]).astype(np.uint32)
    if fmt != "bf16":
        a, b = _bf16_to_fp8_bits(a, fmt, rng), _bf16_to_fp8_bits(b, fmt, rng)
    return a, b, c


#: the encodings of 1.0 and the mantissa widths of the float input formats
_ONE = {"bf16": (0x3F80, 7), "fp8_e4m3fn": (0x38, 3), "fp8_e5m2": (0x3C, 2)}


def _nan_payloads(fmt: str):
    """NaNs whose mantissa has a single bit set, each bit once: an accumulator NaN times 1 * 1, and
    (where the format has NaN payloads) an operand NaN times 1 + 0. A NaN test that misses one
    mantissa bit reads such a NaN as infinity; the special values alone (quiet and signalling NaN,
    with their top or bottom bit set) do not catch it (a mutant of the accumulator's NaN test
    survived the regression without these)."""
    one, man = _ONE[fmt]
    dtype = np.uint16 if fmt == "bf16" else np.uint8
    c_nans = [0x7F800000 | 1 << i for i in range(23)]
    a = [one] * len(c_nans)
    b = [one] * len(c_nans)
    c = list(c_nans)
    if fmt != "fp8_e4m3fn":  # E4M3FN has one NaN per sign, S.1111.111: no payload
        exp_ones = ((1 << (8 if fmt == "bf16" else 5)) - 1) << man
        for i in range(man):
            nan = exp_ones | 1 << i
            a += [nan, one]
            b += [one, nan]
            c += [0, 0]
    return np.array(a, dtype=dtype), np.array(b, dtype=dtype), np.array(c, dtype=np.uint32)


_INT8_SPECIALS = [0, 1, 0x7F, 0x80, 0x81, 0xFF, 2, 0xFE]
_INT32_SPECIALS = [0, 1, 0x7FFFFFFF, 0x80000000, 0xFFFFFFFF, 0x7FFFC000, 0x80003FFF]
_FP8_SPECIALS = [
    0x00,
    0x80,
    0x01,
    0x81,
    0x07,
    0x08,
    0x38,
    0xB8,
    0x7E,
    0xFE,
    0x7F,
    0xFF,
    0x7C,
    0xFC,
    0x7D,
    0x3C,
    0x04,
    0x03,
]


def special_operands(fmt: str) -> np.ndarray:
    """The special multiplier operands of ``fmt`` (bit patterns: uint16 bf16, uint8 otherwise): +-0,
    subnormals, min/max normal, +-inf, quiet and signalling NaN, values around 1.0 (int8: 0, +-1,
    the extremes)."""
    if fmt == "int8":
        return np.array(_INT8_SPECIALS, dtype=np.uint8)
    if fmt == "bf16":
        return np.array(_BF16_SPECIALS, dtype=np.uint16)
    return np.array(_FP8_SPECIALS, dtype=np.uint8)


def nan_operands(fmt: str) -> np.ndarray:
    """NaN operands with a single mantissa bit set, each bit once (none for fp8 E4M3FN, whose NaN has
    no payload; none for int8): a NaN test that misses one mantissa bit reads such a NaN as
    infinity."""
    if fmt in ("int8", "fp8_e4m3fn"):
        return np.zeros(0, dtype=np.uint8)
    one, man = _ONE[fmt]
    exp_ones = ((1 << (8 if fmt == "bf16" else 5)) - 1) << man
    return np.array([exp_ones | 1 << i for i in range(man)], dtype=np.uint16 if fmt == "bf16" else np.uint8)


def special_accumulators(fmt: str) -> np.ndarray:
    """The special accumulator values (uint32 bit patterns of fp32, or int32 for int8)."""
    return np.array(_INT32_SPECIALS if fmt == "int8" else _F32_SPECIALS, dtype=np.uint32)


def corner_vectors(fmt: str):
    """Every pairing of the special operand values (a x b x c), plus fixed hard cases.

    Covers +-0, subnormal inputs and results, min/max normal, +-inf, quiet and signalling NaN, NaNs
    with each single mantissa bit, inf*0, inf-inf, ties to even both ways, sticky bits, massive
    cancellation, product overflow and underflow, and results at the normal/subnormal boundary.
    """
    ops, accs = special_operands(fmt), special_accumulators(fmt)
    if fmt == "int8":
        a, b, c = np.meshgrid(ops, ops, accs, indexing="ij")
        return a.ravel(), b.ravel(), c.ravel()
    a, b, c = np.meshgrid(ops, ops, accs, indexing="ij")
    a, b, c = a.ravel(), b.ravel(), c.ravel()
    a, b, c = (np.concatenate(x) for x in zip((a, b, c), _nan_payloads(fmt)))
    if fmt != "bf16":
        return a, b, c
    fixed = [
        # (a, b, c): named hard cases
        (0x3F80, 0x3F80, 0x33800000),  # 1 + 2**-24: exact tie, stays 1.0 (even)
        (0x3F80, 0x3F80, 0x33800001),  # tie + sticky: rounds up
        (0x3F80, 0x3F80, 0x34000000),  # 1 + 2**-23 exact
        (0x3F80, 0x3F81, 0x33C00000),  # 1.0078125 + 0.75 ulp of 1.0: rounds up
        (0x3FC0, 0x3FC0, 0xC0100000),  # 2.25 - 2.25 = +0 (exact cancellation)
        (0xBF80, 0x3F80, 0x3F800000),  # -1 + 1 = +0
        (0x8000, 0x3F80, 0x80000000),  # -0 + -0 = -0
        (0x0000, 0x3F80, 0x80000000),  # +0 + -0 = +0
        (0x3F81, 0x3F81, 0xBF820000),  # near cancellation: 2**-14 residue
        (0x7F7F, 0x7F7F, 0x00000000),  # product overflow -> inf
        (0x7F7F, 0x4000, 0xFF7FFFFF),  # huge product minus max: finite
        (0x0080, 0x0080, 0x00000000),  # product underflow 2**-252
        (0x1F80, 0x2000, 0x00000000),  # product 2**-127: subnormal (ieee) / flushed (ftz)
        (0x1FFF, 0x2000, 0x00000000),  # 2**-127 * 1.99...: tiny in both modes (ftz: +0; ieee: subnormal)
        (0x1980, 0x9A00, 0x00800000),  # 2**-126 - 2**-151: rounds up to 2**-126, not tiny (ftz keeps it)
        (0x1A00, 0x9A80, 0x00800000),  # 2**-126 - 2**-149: tiny after rounding (ftz +0, ieee 0x007FFFFF)
        (0x2000, 0x2000, 0x80800000),  # 2**-126 - 2**-126 -> +0
        (0x3F80, 0x0080, 0x80000001),  # 2**-126 - 2**-149: largest subnormal (ieee) / flushed (ftz)
        (0x1F80, 0x3F80, 0x00400000),  # 2**-127 + subnormal acc
        (0x7F80, 0x0000, 0x3F800000),  # inf * 0 -> NaN
        (0x7F80, 0x3F80, 0xFF800000),  # inf - inf -> NaN
        (0x7F80, 0x3F80, 0x7F800000),  # inf + inf -> inf
        (0x7F81, 0x3F80, 0x00000000),  # sNaN input
    ]
    fa, fb, fc = (np.array(x, dtype=t) for x, t in zip(zip(*fixed), (np.uint16, np.uint16, np.uint32)))
    return np.concatenate([a, fa]), np.concatenate([b, fb]), np.concatenate([c, fc])


def expected_bits(fmt: str, subnormals: str, a, b, c) -> np.ndarray:
    """Golden result bits (uint32) for operand bit patterns, via :mod:`verif.golden`."""
    from verif.golden import fp8_to_bf16, int8_mac, mac

    if fmt == "int8":
        return int8_mac(
            np.asarray(c, np.uint32).view(np.int32),
            np.asarray(a, np.uint8).view(np.int8),
            np.asarray(b, np.uint8).view(np.int8),
        ).view(np.uint32)
    if fmt == "bf16":
        av = np.asarray(a, np.uint16).view(ml_dtypes.bfloat16)
        bv = np.asarray(b, np.uint16).view(ml_dtypes.bfloat16)
    else:
        dtype = {"fp8_e4m3fn": ml_dtypes.float8_e4m3fn, "fp8_e5m2": ml_dtypes.float8_e5m2}[fmt]
        av = fp8_to_bf16(np.asarray(a, np.uint8).view(dtype))
        bv = fp8_to_bf16(np.asarray(b, np.uint8).view(dtype))
    return mac(np.asarray(c, np.uint32).view(np.float32), av, bv, subnormals=subnormals).view(np.uint32)


def pack_inputs(fmt: str, a, b, c) -> list[int]:
    """Input-stream payload integers ``a | b << w | c << 2w`` (w = operand width) for each triple."""
    w = 16 if fmt == "bf16" else 8
    return [int(x) | (int(y) << w) | (int(z) << (2 * w)) for x, y, z in zip(a, b, c)]
