"""Host conversions (verif.golden.to_format) against hand values and the exact reference (tests/exact_ref.py).

Results are compared as raw bit patterns (uint16 for bf16, uint8 for fp8); a NaN is accepted as any NaN
pattern of the target format. Randomized tests print their seed (MXU_SEED=<n> reproduces a run).
"""

from __future__ import annotations

from fractions import Fraction

import ml_dtypes
import numpy as np
import pytest
from exact_ref import (
    BF16,
    E4M3FN,
    E5M2,
    FP32,
    FP64,
    convert,
    decode,
    encode_value,
    ilog2,
    is_nan,
    max_bits,
    pow2,
    round_to,
)

import verif.golden as golden

DTYPES = {
    "bf16": (ml_dtypes.bfloat16, np.uint16, BF16),
    "fp8_e4m3fn": (ml_dtypes.float8_e4m3fn, np.uint8, E4M3FN),
    "fp8_e5m2": (ml_dtypes.float8_e5m2, np.uint8, E5M2),
}
SRC = {"float32": (np.float32, np.uint32, FP32), "float64": (np.float64, np.uint64, FP64)}


def to_bits(x, fmt, *, saturate=False, **kw):
    """Call golden.to_format and return the result as raw bits (checks the dtype)."""
    dt, ut, _ = DTYPES[fmt]
    if fmt == "bf16" and not saturate:
        out = golden.to_format(x, fmt, **kw)
    else:
        out = golden.to_format(x, fmt, saturate=saturate, **kw)
    out = np.asarray(out)
    assert out.dtype == np.dtype(dt), f"to_format(..., {fmt!r}) returned {out.dtype}"
    assert out.shape == np.shape(x)
    return out.view(ut)


def src_array(values_or_bits, src, *, bits=False):
    ft, ut, _ = SRC[src]
    if bits:
        return np.asarray(values_or_bits, dtype=ut).view(ft)
    return np.asarray(values_or_bits, dtype=ft)


# ---------------------------------------------------------------------------------------- single cases
def test_float64_rounded_once_to_bf16():
    x = np.array([1 + 2.0**-8 + 2.0**-40], dtype=np.float64)
    # via float32 this would double-round: 1 + 2^-8 + 2^-40 -> 1 + 2^-8 (a bf16 tie) -> 1.0 (0x3F80)
    assert to_bits(x, "bf16")[0] == 0x3F81
    assert to_bits(-x, "bf16")[0] == 0xBF81


def test_float64_rounded_once_to_fp8():
    # e4m3fn: 1 + 2^-4 is a tie (ulp 2^-3); + 2^-40 is above the tie -> 1.125 (0x39); via float32 -> 1.0
    assert to_bits(np.array([1 + 2.0**-4 + 2.0**-40]), "fp8_e4m3fn")[0] == 0x39
    # e5m2: 1 + 2^-3 is a tie (ulp 2^-2); + 2^-40 -> 1.25 (0x3D)
    assert to_bits(np.array([1 + 2.0**-3 + 2.0**-40]), "fp8_e5m2")[0] == 0x3D


def test_fp32_carry_into_exponent():
    assert to_bits(src_array([0x7EFFFF8B], "float32", bits=True), "bf16")[0] == 0x7F00


def test_fp32_ties_to_even():
    x = src_array([0x3F828000, 0x3F838000, 0xBF828000, 0x3F828001, 0x3F827FFF], "float32", bits=True)
    assert to_bits(x, "bf16").tolist() == [0x3F82, 0x3F84, 0xBF82, 0x3F83, 0x3F82]


def test_fp32_to_bf16_overflow_to_inf():
    # (2 - 2^-8) * 2^127 is the tie between bf16 max and 2^128: rounds to inf; one ulp below stays max
    x = src_array([0x7F7F8000, 0x7F7F7FFF, 0xFF7F8000], "float32", bits=True)
    assert to_bits(x, "bf16").tolist() == [0x7F80, 0x7F7F, 0xFF80]


def test_fp32_subnormals_to_bf16():
    x = src_array([0x00000001, 0x00008000, 0x00008001, 0x00018000, 0x007FFFFF, 0x80008000], "float32", bits=True)
    assert to_bits(x, "bf16").tolist() == [0x0000, 0x0000, 0x0001, 0x0002, 0x0080, 0x8000]


SNAN32 = [0x7F800001, 0xFF800001, 0x7F80FFFF, 0x7FBFFFFF, 0x7FC00000, 0xFFFFFFFF]
SNAN64 = [0x7FF0000000000001, 0xFFF0000000000001, 0x7FF00000FFFFFFFF, 0x7FF8000000000000]


@pytest.mark.parametrize(
    "fmt, saturate",
    [("bf16", False), ("fp8_e4m3fn", False), ("fp8_e4m3fn", True), ("fp8_e5m2", False), ("fp8_e5m2", True)],
)
def test_nan_stays_nan(fmt, saturate):
    """Signalling NaNs (whose payload truncates to zero) become a NaN of the target, never inf."""
    for src, pats in (("float32", SNAN32), ("float64", SNAN64)):
        out = to_bits(src_array(pats, src, bits=True), fmt, saturate=saturate)
        for p, o in zip(pats, out.tolist()):
            assert is_nan(o, DTYPES[fmt][2]), f"{src} {p:#x} -> {fmt} {o:#x} is not NaN"


E4M3_CASES = [
    # (value, saturate, expected e4m3fn bits or "nan")
    (465.0, False, "nan"),
    (464.0, False, 0x7E),  # tie between 448 and (virtual) 480 -> even 448
    (448.0, False, 0x7E),
    (480.0, False, "nan"),
    (-465.0, False, "nan"),
    (-464.0, False, 0xFE),
    (float("inf"), False, "nan"),
    (float("-inf"), False, "nan"),
    (465.0, True, 0x7E),
    (-1e6, True, 0xFE),
    (1e30, True, 0x7E),
    (float("inf"), True, 0x7E),
    (float("-inf"), True, 0xFE),
    (464.0, True, 0x7E),
    (-0.0, False, 0x80),
    (2.0**-10, False, 0x00),  # half of the min subnormal 2^-9: tie to even -> 0
    (3 * 2.0**-11, False, 0x01),
    (-(2.0**-10), True, 0x80),
]


@pytest.mark.parametrize("src", list(SRC))
@pytest.mark.parametrize("value, saturate, want", E4M3_CASES, ids=[f"{v}-sat{s}" for v, s, _ in E4M3_CASES])
def test_e4m3fn_overflow_and_saturation(src, value, saturate, want):
    got = int(to_bits(src_array([value], src), "fp8_e4m3fn", saturate=saturate)[0])
    if want == "nan":
        assert is_nan(got, E4M3FN), f"{value} -> {got:#04x}, want NaN"
    else:
        assert got == want, f"{value} (saturate={saturate}) -> {got:#04x}, want {want:#04x}"


E5M2_CASES = [
    (57344.0, False, 0x7B),
    (61439.0, False, 0x7B),
    (61440.0, False, 0x7C),  # tie between 57344 and 65536 -> even 65536 -> overflow -> inf
    (1e6, False, 0x7C),
    (-1e6, False, 0xFC),
    (float("inf"), False, 0x7C),
    (float("-inf"), False, 0xFC),
    (61440.0, True, 0x7B),
    (1e6, True, 0x7B),
    (-1e6, True, 0xFB),
    (float("inf"), True, 0x7B),
    (float("-inf"), True, 0xFB),
    (2.0**-17, False, 0x00),  # half of the min subnormal 2^-16
    (3 * 2.0**-18, False, 0x01),
]


@pytest.mark.parametrize("src", list(SRC))
@pytest.mark.parametrize("value, saturate, want", E5M2_CASES, ids=[f"{v}-sat{s}" for v, s, _ in E5M2_CASES])
def test_e5m2_overflow_and_saturation(src, value, saturate, want):
    got = int(to_bits(src_array([value], src), "fp8_e5m2", saturate=saturate)[0])
    assert got == want, f"{value} (saturate={saturate}) -> {got:#04x}, want {want:#04x}"


def test_raw_bf16_patterns_pass_through():
    pats = np.arange(65536, dtype=np.uint32).astype(np.uint16)
    out = to_bits(pats, "bf16")
    assert np.array_equal(out, pats), f"first difference at {int(np.argmax(out != pats)):#06x}"


@pytest.mark.parametrize("fmt", ["fp8_e4m3fn", "fp8_e5m2"])
def test_raw_fp8_patterns_pass_through(fmt):
    pats = np.arange(256, dtype=np.uint16).astype(np.uint8)
    out = to_bits(pats, fmt)
    assert np.array_equal(out, pats), f"first difference at {int(np.argmax(out != pats)):#04x}"


def test_int8_passes_through():
    x = np.arange(-128, 128, dtype=np.int16).astype(np.int8)
    out = np.asarray(golden.to_format(x, "int8"))
    assert out.dtype == np.int8
    assert np.array_equal(out, x)


def test_exact_values_round_trip():
    """Every finite value of each format, given as float64 and float32, converts to itself."""
    for fmt, (_, _, f) in DTYPES.items():
        finite = [b for b in range(1 << f.nbits) if decode(b, f).kind == "finite"]
        for src, (_, _, sf) in SRC.items():
            srcbits = [encode_value(sf, decode(b, f).sign, decode(b, f).mag) for b in finite]
            out = to_bits(src_array(srcbits, src, bits=True), fmt).tolist()
            bad = [(b, o) for b, o in zip(finite, out) if b != o]
            assert not bad, f"{src}->{fmt}: " + ", ".join(f"{b:#x}->{o:#x}" for b, o in bad[:10])


# --------------------------------------------------------------------------------- randomized boundaries
def _boundary_values(rnd, dst, src, n):
    """Exact magnitudes near rounding boundaries of dst, rounded once into src (so each is a src value)."""
    top = max_bits(dst)
    out = []
    while len(out) < n:
        r = rnd.random()
        if r < 0.1:
            bits = rnd.randrange(0, 1 << dst.mbits)  # subnormal region
        elif r < 0.15:
            bits = rnd.randrange(max(top - 4, 0), top + 1)  # near overflow
        elif r < 0.2:
            bits = rnd.randrange(1 << dst.mbits, 3 << dst.mbits)  # lowest normals
        else:
            bits = rnd.randrange(0, top + 1)
        t = decode(bits, dst).mag
        if bits == top:  # virtual next value with unbounded exponent range
            nxt = t + pow2(max(ilog2(t), dst.emin) - dst.mbits)
        else:
            nxt = decode(bits + 1, dst).mag
        mid = (t + nxt) / 2
        half = (nxt - t) / 2
        src_ulp = pow2(max(ilog2(mid), src.emin) - src.mbits)
        k = rnd.random()
        if k < 0.25:
            mag = mid  # exact tie
        elif k < 0.45:
            mag = mid + rnd.choice([-1, 1]) * src_ulp  # one src ulp off the tie
        elif k < 0.75:
            mag = mid + rnd.choice([-1, 1]) * half * pow2(-rnd.randint(1, 64))  # tiny offset (maybe rounded away)
        elif k < 0.85:
            mag = t
        elif k < 0.9 and bits >= top - 4:
            mag = t * (1 + Fraction(rnd.randrange(1 << 20), 1 << 18))  # beyond max
        else:
            mag = t + (nxt - t) * Fraction(rnd.randrange(1 << 30), 1 << 30)
        out.append(round_to(src, rnd.getrandbits(1), mag, subnormals="ieee"))
    return out


def _uniform_src(rnd, src, dst, n):
    out = []
    for _ in range(n):
        r = rnd.random()
        if r < 0.5:
            out.append(rnd.getrandbits(src.nbits))
        else:  # exponent within the destination's range (+- a few), random significand bits
            e = rnd.randint(dst.emin - dst.mbits - 3, dst.emax + 2)
            field = min(max(e + src.bias, 0), (1 << src.ebits) - 2)
            out.append((rnd.getrandbits(1) << (src.nbits - 1)) | (field << src.mbits) | rnd.getrandbits(src.mbits))
    return out


CONV_PARAMS = [(d, s, sat) for d in DTYPES for s in SRC for sat in ((False,) if d == "bf16" else (False, True))]


@pytest.mark.parametrize("dst, src, saturate", CONV_PARAMS, ids=[f"{s}->{d}-sat{sat}" for d, s, sat in CONV_PARAMS])
def test_random_against_reference(pyrng, dst, src, saturate):
    rnd = pyrng
    dfmt, sfmt = DTYPES[dst][2], SRC[src][2]
    pats = _boundary_values(rnd, dfmt, sfmt, 3000) + _uniform_src(rnd, sfmt, dfmt, 1500)
    out = to_bits(src_array(pats, src, bits=True), dst, saturate=saturate).tolist()
    bad = []
    for p, o in zip(pats, out):
        want = convert(p, sfmt, dfmt, saturate=saturate)
        if is_nan(want, dfmt):
            ok = is_nan(o, dfmt)
        else:
            ok = o == want
        if not ok:
            bad.append(f"{src} {p:#x} -> {dst} (saturate={saturate}): golden {o:#x}, ref {want:#x}")
    assert not bad, f"{len(bad)}/{len(pats)} mismatches:\n" + "\n".join(bad[:25])
