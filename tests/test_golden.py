"""Golden model (verif.golden.mac / matmul) against the independent exact reference (tests/exact_ref.py).

Bit-exact: results are compared as fp32 bit patterns; the golden model's NaN must be the canonical
0x7FC00000. Randomized tests print their seed (MXU_SEED=<n> reproduces a run).
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
from exact_ref import (
    BF16,
    CANONICAL_NAN32,
    FP32,
    decode,
    encode_value,
    ilog2,
    pow2,
    ref_mac,
    ref_matmul,
    round_to,
    wrap32,
)

import verif.golden as golden

MODES = ("ieee", "ftz")
NAN = CANONICAL_NAN32
N_RANDOM = 8000  # per distribution per mode (the Fraction reference costs ~35 us per MAC)


# ----------------------------------------------------------------------------------------------- helpers


def f32_arr(bits):
    return np.asarray(bits, dtype=np.uint32).view(np.float32)


def bf16_arr(bits):
    return np.asarray(bits, dtype=np.uint16).view(ml_dtypes.bfloat16)


def golden_mac_bits(acc, a, b, mode):
    out = golden.mac(f32_arr(acc), bf16_arr(a), bf16_arr(b), subnormals=mode)
    out = np.asarray(out)
    assert out.dtype == np.float32, f"mac must return float32, got {out.dtype}"
    return out.view(np.uint32)


def check_mac(cases, mode, what=""):
    """cases: list of (acc_bits, a_bits, b_bits). Compare golden to ref bit-exactly."""
    acc = [c[0] for c in cases]
    a = [c[1] for c in cases]
    b = [c[2] for c in cases]
    got = golden_mac_bits(acc, a, b, mode)
    assert got.shape == (len(cases),)
    bad = []
    for i, (x, y, z) in enumerate(cases):
        want = ref_mac(x, y, z, mode)
        if int(got[i]) != want:
            bad.append(
                f"mac(acc={x:#010x}, a={y:#06x}, b={z:#06x}, {mode}): golden {int(got[i]):#010x}, ref {want:#010x}"
            )
    assert not bad, f"{what} {len(bad)}/{len(cases)} mismatches:\n" + "\n".join(bad[:25])


# --------------------------------------------------------------------------------- hand-written corner cases
# (name, acc fp32 bits, a bf16 bits, b bf16 bits, expected fp32 bits: int for both modes or (ieee, ftz))
CORNER = [
    # signed zeros (IEEE 754-2019 6.3, roundTiesToEven)
    ("+0 + +0*+0", 0x00000000, 0x0000, 0x0000, 0x00000000),
    ("+0 + -0*+0", 0x00000000, 0x8000, 0x0000, 0x00000000),
    ("-0 + +0*+0", 0x80000000, 0x0000, 0x0000, 0x00000000),
    ("-0 + -0*+0", 0x80000000, 0x8000, 0x0000, 0x80000000),
    ("-0 + -1*+0", 0x80000000, 0xBF80, 0x0000, 0x80000000),
    ("-0 + -1*-0", 0x80000000, 0xBF80, 0x8000, 0x00000000),
    ("+0 + -1*+0", 0x00000000, 0xBF80, 0x0000, 0x00000000),
    ("-1 + 1*1 = +0", 0xBF800000, 0x3F80, 0x3F80, 0x00000000),
    ("1 + -1*1 = +0", 0x3F800000, 0xBF80, 0x3F80, 0x00000000),
    ("-0 + 1*1", 0x80000000, 0x3F80, 0x3F80, 0x3F800000),
    ("-1 + -1*1", 0xBF800000, 0xBF80, 0x3F80, 0xC0000000),
    ("1 + 1*-0", 0x3F800000, 0x3F80, 0x8000, 0x3F800000),
    # subnormal inputs
    ("-sub acc + +0", 0x80000001, 0x0000, 0x3F80, (0x80000001, 0x00000000)),
    ("-sub acc + -0", 0x80000001, 0x8000, 0x3F80, (0x80000001, 0x80000000)),
    ("-0 + -sub_bf16*1", 0x80000000, 0x8001, 0x3F80, (0x80010000, 0x80000000)),
    ("-0 + +sub_bf16*1", 0x80000000, 0x0001, 0x3F80, (0x00010000, 0x00000000)),
    ("sub_bf16 * 2^100 (normal product)", 0x00000000, 0x0001, 0x7180, (0x2F000000, 0x00000000)),
    ("2^100 * sub_bf16", 0x00000000, 0x7180, 0x0001, (0x2F000000, 0x00000000)),
    ("sub acc kept/flushed", 0x00000001, 0x3F80, 0x0000, (0x00000001, 0x00000000)),
    ("sub acc + 2^-149", 0x00000001, 0x1A00, 0x1A80, (0x00000002, 0x00000000)),
    ("max sub acc + 0", 0x007FFFFF, 0x0000, 0x0000, (0x007FFFFF, 0x00000000)),
    ("max sub acc + 2^-149 = min normal", 0x007FFFFF, 0x1A00, 0x1A80, (0x00800000, 0x00000000)),
    ("2^-127 bf16 sub", 0x00000000, 0x0040, 0x3F80, (0x00400000, 0x00000000)),
    ("sub acc + normal", 0x00000001, 0x3F80, 0x3F80, 0x3F800000),
    # subnormal / underflowing results
    ("2^-70*2^-70", 0x00000000, 0x1C80, 0x1C80, (0x00000200, 0x00000000)),
    ("-0 + 2^-70*2^-70 (flush keeps + sign)", 0x80000000, 0x1C80, 0x1C80, (0x00000200, 0x00000000)),
    ("-2^-70*2^-70", 0x00000000, 0x9C80, 0x1C80, (0x80000200, 0x80000000)),
    ("2^-150 ties to 0", 0x00000000, 0x1A00, 0x1A00, 0x00000000),
    ("-2^-150 ties to -0", 0x00000000, 0x9A00, 0x1A00, 0x80000000),
    ("2^-150*(1+2^-7) rounds up to min sub", 0x00000000, 0x1A01, 0x1A00, (0x00000001, 0x00000000)),
    ("1.5 sub ulp ties to 2", 0x00000000, 0x1A40, 0x1A80, (0x00000002, 0x00000000)),
    ("2.5 sub ulp ties to 2", 0x00000000, 0x1B20, 0x1A00, (0x00000002, 0x00000000)),
    ("2^-200 vanishes", 0x00000000, 0x0D80, 0x0D80, 0x00000000),
    # normal/subnormal boundary
    (
        "2^-126 - 2^-150: ieee rounds up, ftz exact tiny -> flushed",
        0x00800000,
        0x1A00,
        0x9A00,
        (0x00800000, 0x00000000),
    ),
    ("2^-126 - 2^-151 rounds up to 2^-126, not flushed", 0x00800000, 0x1A00, 0x9980, 0x00800000),
    ("2^-126 - 2^-151(1+) ftz rounds down -> flushed", 0x00800000, 0x1A01, 0x9981, (0x00800000, 0x00000000)),
    ("2^-126 - 2^-149", 0x00800000, 0x1A00, 0x9A80, (0x007FFFFF, 0x00000000)),
    ("-(2^-126 - 2^-150)", 0x80800000, 0x1A00, 0x1A00, (0x80800000, 0x80000000)),
    ("-(2^-126 - 2^-151)", 0x80800000, 0x1A00, 0x1980, 0x80800000),
    ("2^-126 - 2^-127", 0x00800000, 0x2000, 0x9F80, (0x00400000, 0x00000000)),
    ("2^-125 - 2^-127 (tiny product, normal sum: fused)", 0x01000000, 0x2000, 0x9F80, 0x00C00000),
    ("2^-126 - 1.5*2^-126 -> -2^-127", 0x00800000, 0xA040, 0x2000, (0x80400000, 0x80000000)),
    ("2^-63*2^-63 = min normal", 0x00000000, 0x2000, 0x2000, 0x00800000),
    ("bf16 min normal * 1", 0x00000000, 0x0080, 0x3F80, 0x00800000),
    ("2^-126 + 2^-150 tie to even", 0x00800000, 0x1A00, 0x1A00, 0x00800000),
    ("2^-126 + 1.5*2^-150", 0x00800000, 0x1A40, 0x1A00, 0x00800001),
    # overflow
    ("max + 1", 0x7F7FFFFF, 0x3F80, 0x3F80, 0x7F7FFFFF),
    ("max + 2^103 ties to inf", 0x7F7FFFFF, 0x5980, 0x5900, 0x7F800000),
    ("max + 2^103 - 2^95 stays max", 0x7F7FFFFF, 0x72FF, 0x3F80, 0x7F7FFFFF),
    ("-max - 2^103 -> -inf", 0xFF7FFFFF, 0xD980, 0x5900, 0xFF800000),
    ("-max + 2^128 (product beyond fp32) = 2^104", 0xFF7FFFFF, 0x7F00, 0x4000, 0x73800000),
    ("product overflow", 0x00000000, 0x7F7F, 0x4000, 0x7F800000),
    ("2^127*2 = inf", 0x00000000, 0x7F00, 0x4000, 0x7F800000),
    ("max bf16 * 1", 0x00000000, 0x7F7F, 0x3F80, 0x7F7F0000),
    ("-max_bf16*max_bf16", 0x00000000, 0xFF7F, 0x7F7F, 0xFF800000),
    ("max + max", 0x7F7FFFFF, 0x7F7F, 0x3F80, 0x7F800000),
    # product underflow next to a normal accumulator
    ("1 + 2^-200", 0x3F800000, 0x0D80, 0x0D80, 0x3F800000),
    ("-1 + 2^-200", 0xBF800000, 0x0D80, 0x0D80, 0xBF800000),
    # ties and sticky bits
    ("1 + 2^-24 tie down to even", 0x3F800000, 0x3380, 0x3F80, 0x3F800000),
    ("(1+2^-23) + 2^-24 tie up to even", 0x3F800001, 0x3380, 0x3F80, 0x3F800002),
    ("(1+2^-23) - 2^-24 tie down to even", 0x3F800001, 0xB380, 0x3F80, 0x3F800000),
    ("-1 - 2^-24", 0xBF800000, 0xB380, 0x3F80, 0xBF800000),
    ("-(1+2^-23) - 2^-24", 0xBF800001, 0xB380, 0x3F80, 0xBF800002),
    ("1 + 2^-24 + 2^-31 above tie", 0x3F800000, 0x3381, 0x3F80, 0x3F800001),
    ("1 + (2^-24 + 2^-47) sticky far below", 0x33800001, 0x3F80, 0x3F80, 0x3F800001),
    ("1 + (2^-24 - 2^-48) below tie", 0x337FFFFF, 0x3F80, 0x3F80, 0x3F800000),
    ("2^24 + 1 tie to even", 0x4B800000, 0x3F80, 0x3F80, 0x4B800000),
    ("2^24 + 3 tie to even", 0x4B800001, 0x3F80, 0x3F80, 0x4B800002),
    ("1 - 2^-25 tie up to 1", 0x3F800000, 0xB300, 0x3F80, 0x3F800000),
    ("1 - 2^-25(1+2^-7) rounds down", 0x3F800000, 0xB301, 0x3F80, 0x3F7FFFFF),
    # cancellation
    ("(1+2^-23) - 1", 0x3F800001, 0xBF80, 0x3F80, 0x34000000),
    ("-(1+2^-6) + (1+2^-7)^2 = 2^-14", 0xBF820000, 0x3F81, 0x3F81, 0x38800000),
    ("-(1+2^-6+2^-14) + (1+2^-7)^2 = +0", 0xBF820200, 0x3F81, 0x3F81, 0x00000000),
    ("(1+2^-6+2^-14) - (1+2^-7)^2 = +0", 0x3F820200, 0xBF81, 0x3F81, 0x00000000),
    ("-2^-120 + 2^-120(1+2^-7) = 2^-127", 0x83800000, 0x2180, 0x2181, (0x00400000, 0x00000000)),
    ("-2^100(1+2^-6) + 2^100(1+2^-7)^2 = 2^86", 0xF1820000, 0x7181, 0x3F81, 0x6A800000),
    # inf and NaN
    ("inf + 1", 0x7F800000, 0x3F80, 0x3F80, 0x7F800000),
    ("-inf + inf*1", 0xFF800000, 0x7F80, 0x3F80, NAN),
    ("inf + inf*0", 0x7F800000, 0x7F80, 0x0000, NAN),
    ("1 + inf*-0", 0x3F800000, 0x7F80, 0x8000, NAN),
    ("0*inf", 0x3F800000, 0x0000, 0xFF80, NAN),
    ("inf*sub: ieee inf, ftz inf*0", 0x00000000, 0x7F80, 0x0001, (0x7F800000, NAN)),
    ("-inf + sub*inf", 0xFF800000, 0x0001, 0x7F80, NAN),
    ("inf + inf*1", 0x7F800000, 0x7F80, 0x3F80, 0x7F800000),
    ("-inf + -inf*1", 0xFF800000, 0xFF80, 0x3F80, 0xFF800000),
    ("1 + inf*-2", 0x3F800000, 0x7F80, 0xC000, 0xFF800000),
    ("-inf + huge finite product", 0xFF800000, 0x7F7F, 0x7F7F, 0xFF800000),
    ("inf + -huge finite product", 0x7F800000, 0xFF7F, 0x7F7F, 0x7F800000),
    ("-sub + inf*1", 0x80000001, 0x7F80, 0x3F80, 0x7F800000),
    ("qNaN acc", 0x7FC00000, 0x3F80, 0x3F80, NAN),
    ("sNaN acc", 0x7F800001, 0x0000, 0x0000, NAN),
    ("negative NaN acc -> canonical", 0xFFC00000, 0x3F80, 0x3F80, NAN),
    ("NaN acc payload", 0x7FBFFFFF, 0x3F80, 0x3F80, NAN),
    ("sNaN a", 0x00000000, 0x7F81, 0x3F80, NAN),
    ("qNaN a * 0", 0x00000000, 0x7FC0, 0x0000, NAN),
    ("inf + NaN*1", 0x7F800000, 0x3F80, 0x7FC0, NAN),
    ("negative NaN b", 0x3F800000, 0x3F80, 0xFFFF, NAN),
    ("NaN acc + inf*0", 0x7FC00000, 0x7F80, 0x0000, NAN),
]


def _expected(exp, mode):
    return exp[MODES.index(mode)] if isinstance(exp, tuple) else exp


@pytest.mark.parametrize("mode", MODES)
def test_reference_hand_values(mode):
    """The exact reference reproduces the hand-computed expectations (checks the reference itself)."""
    bad = []
    for name, acc, a, b, exp in CORNER:
        want = _expected(exp, mode)
        got = ref_mac(acc, a, b, mode)
        if got != want:
            bad.append(f"{name}: ref {got:#010x}, hand {want:#010x}")
    assert not bad, "\n".join(bad)


@pytest.mark.parametrize("mode", MODES)
def test_mac_corner_cases(mode):
    acc = [c[1] for c in CORNER]
    a = [c[2] for c in CORNER]
    b = [c[3] for c in CORNER]
    got = golden_mac_bits(acc, a, b, mode)
    bad = []
    for i, (name, x, y, z, exp) in enumerate(CORNER):
        want = _expected(exp, mode)
        assert ref_mac(x, y, z, mode) == want
        if int(got[i]) != want:
            bad.append(
                f"{name}: mac(acc={x:#010x}, a={y:#06x}, b={z:#06x}, {mode}) golden {int(got[i]):#010x}, "
                f"expected {want:#010x}"
            )
    assert not bad, f"{len(bad)}/{len(CORNER)} corner cases differ:\n" + "\n".join(bad)


@pytest.mark.parametrize("mode", MODES)
def test_mac_corner_cases_commuted(mode):
    """a*b == b*a, and one-element calls agree with the vector call."""
    cases = [(c[1], c[3], c[2]) for c in CORNER]
    check_mac(cases, mode, "commuted corner cases:")
    for name, acc, a, b, exp in CORNER[::7]:
        got = golden_mac_bits([acc], [a], [b], mode)
        assert int(got[0]) == _expected(exp, mode), name


@pytest.mark.parametrize("mode", MODES)
def test_mac_broadcast(mode):
    accs = [0x00000000, 0x80000000, 0x3F800000, 0x00800000, 0x7F800000, 0x007FFFFF]
    a = 0x1A00
    bs = [0x9A00, 0x3F80, 0x0001, 0x8000]
    acc_arr = f32_arr(accs).reshape(-1, 1)
    out = np.asarray(golden.mac(acc_arr, bf16_arr([a]), bf16_arr(bs).reshape(1, -1), subnormals=mode))
    assert out.dtype == np.float32 and out.shape == (len(accs), len(bs))
    got = out.view(np.uint32)
    for i, x in enumerate(accs):
        for j, z in enumerate(bs):
            assert int(got[i, j]) == ref_mac(x, a, z, mode), (hex(x), hex(a), hex(z))


# ------------------------------------------------------------------------------------ random distributions
def _rand_bf16(rnd, field=None, sign=None):
    s = rnd.getrandbits(1) if sign is None else sign
    e = rnd.randrange(256) if field is None else field
    return (s << 15) | (e << 7) | rnd.getrandbits(7)


def _rand_f32_near(rnd, exp):
    """Random fp32 with unbiased exponent `exp` (clamped into the subnormal field 0 / max 254)."""
    field = min(max(exp + 127, 0), 254)
    r = rnd.random()
    if r < 0.15:
        mant = (1 << 23) - 1 - rnd.getrandbits(3)  # near carry
    elif r < 0.3:
        mant = rnd.getrandbits(3)
    else:
        mant = rnd.getrandbits(23)
    return (rnd.getrandbits(1) << 31) | (field << 23) | mant


F32_SPECIAL = [
    0x00000000,
    0x80000000,
    0x7F800000,
    0xFF800000,
    0x7FC00000,
    0x7F800001,
    0xFFC00000,
    0x00800000,
    0x80800000,
    0x007FFFFF,
    0x00000001,
    0x80000001,
    0x7F7FFFFF,
    0xFF7FFFFF,
    0x3F800000,
    0x00400000,
]
BF16_SPECIAL = [
    0x0000,
    0x8000,
    0x7F80,
    0xFF80,
    0x7FC0,
    0x7F81,
    0xFFC1,
    0x0080,
    0x8080,
    0x007F,
    0x0001,
    0x8001,
    0x7F7F,
    0xFF7F,
    0x3F80,
    0xBF80,
    0x0040,
]


def gen_uniform(rnd, n):
    return [(rnd.getrandbits(32), rnd.getrandbits(16), rnd.getrandbits(16)) for _ in range(n)]


def gen_boundary(rnd, n):
    """Products and sums whose exponents sit near the subnormal boundary, the bottom of the subnormals,
    or overflow; sprinkled with subnormal inputs and special values."""
    out = []
    for _ in range(n):
        t = rnd.choice(
            [rnd.randint(-153, -120), rnd.randint(-153, -120), rnd.randint(120, 129), rnd.randint(-140, 129)]
        )
        lo, hi = max(-126, t - 127), min(127, t + 126)
        ea = rnd.randint(lo, hi)
        eb = t - ea
        a = _rand_bf16(rnd, ea + 127)
        b = _rand_bf16(rnd, min(max(eb + 127, 1), 254))
        r = rnd.random()
        if r < 0.08:
            a = _rand_bf16(rnd, 0)  # subnormal (or zero) bf16
        elif r < 0.12:
            b = rnd.choice(BF16_SPECIAL)
        r = rnd.random()
        if r < 0.15:
            # sums within a few 2^-150 of +-2^-126: tininess after rounding, rounding up into min normal
            t = rnd.randint(-154, -147)
            ea = rnd.randint(-126, t + 126)
            a, b = _rand_bf16(rnd, ea + 127), _rand_bf16(rnd, t - ea + 127)
            sign = rnd.getrandbits(1)
            acc = (sign << 31) | (0x00800000 + rnd.randint(-4, 4))
            out.append((acc, a, b))
            continue
        if r < 0.2:
            acc = _rand_f32_near(rnd, -127)  # subnormal accumulator
        elif r < 0.23:
            acc = rnd.choice(F32_SPECIAL)
        elif r < 0.3:
            acc = 0x80000000 * rnd.getrandbits(1)
        else:
            acc = _rand_f32_near(rnd, t + rnd.randint(-3, 3))
        out.append((acc, a, b) if rnd.getrandbits(1) else (acc, b, a))
    return out


def gen_cancel(rnd, n):
    """acc ~= -a*b: exact cancellation, a few ulps off, or a relative perturbation far below the ulp."""
    out = []
    while len(out) < n:
        pe = rnd.choice([rnd.randint(-150, -100), rnd.randint(-40, 40), rnd.randint(100, 127)])
        ea = rnd.randint(max(-126, pe - 127), min(127, pe + 126))
        a = _rand_bf16(rnd, ea + 127)
        b = _rand_bf16(rnd, min(max(pe - ea + 127, 1), 254))
        if rnd.random() < 0.05:
            a = _rand_bf16(rnd, 0)
        va, vb = decode(a, BF16), decode(b, BF16)
        if va.kind != "finite" or vb.kind != "finite" or va.mag == 0 or vb.mag == 0:
            continue
        p = va.signed * vb.signed
        e = max(ilog2(abs(p)), -126)
        ulp = pow2(e - 23)
        r = rnd.random()
        if r < 0.4:
            target = -p + rnd.randint(-4, 4) * ulp
        elif r < 0.7:
            target = -p * (1 + rnd.choice([1, -1]) * pow2(-rnd.randint(1, 40)))
        else:
            target = -p + rnd.randint(-(1 << 10), 1 << 10) * ulp * pow2(-rnd.randint(0, 12))
        acc = round_to(FP32, 1 if target < 0 else 0, abs(target), subnormals="ieee")
        out.append((acc, a, b))
    return out


GENERATORS = {"uniform": gen_uniform, "boundary": gen_boundary, "cancel": gen_cancel}


@pytest.mark.parametrize("dist", list(GENERATORS))
@pytest.mark.parametrize("mode", MODES)
def test_mac_random(pyrng, mode, dist):
    rnd = pyrng
    cases = GENERATORS[dist](rnd, N_RANDOM)
    check_mac(cases, mode, f"random {dist}:")


# --------------------------------------------- the reference against numpy where numpy is provably exact
def _numpy_mac_when_exact(acc_bits, a_bits, b_bits, mode):
    """float64 evaluation; returns (fp32 bits array, mask where the float64 sum was exact)."""
    with np.errstate(all="ignore"):
        acc = f32_arr(acc_bits).astype(np.float64)
        a = bf16_arr(a_bits).astype(np.float64)
        b = bf16_arr(b_bits).astype(np.float64)
        if mode == "ftz":
            acc = np.where(np.abs(acc) < 2.0**-126, np.copysign(0.0, acc), acc)
            a = np.where(np.abs(a) < 2.0**-126, np.copysign(0.0, a), a)
            b = np.where(np.abs(b) < 2.0**-126, np.copysign(0.0, b), b)
        p = a * b  # exact: 16 significant bits, exponent within float64 range
        s = acc + p
        bb = s - acc
        err = (acc - (s - bb)) + (p - bb)  # TwoSum error of acc + p
        exact = (err == 0) | ~np.isfinite(s)
        r = s.astype(np.float32)
        if mode == "ftz":
            tiny = np.isfinite(s) & (np.abs(s) < 2.0**-126)
            scaled = np.abs((s * 2.0**200).astype(np.float32).astype(np.float64))  # unbounded-exponent rounding
            up = scaled >= 2.0**74  # rounded up to 2^-126
            r = np.where(tiny, np.where(up, np.copysign(np.float32(2.0**-126), s), np.copysign(np.float32(0), s)), r)
            r = r.astype(np.float32)
    return r, exact


@pytest.mark.parametrize("mode", MODES)
def test_reference_vs_numpy_when_exact(pyrng, mode):
    rnd = pyrng
    cases = gen_boundary(rnd, 1500) + gen_cancel(rnd, 1500) + gen_uniform(rnd, 1000) + [c[1:4] for c in CORNER]
    r, exact = _numpy_mac_when_exact([c[0] for c in cases], [c[1] for c in cases], [c[2] for c in cases], mode)
    n_checked = 0
    for i, (x, y, z) in enumerate(cases):
        if not exact[i]:
            continue
        n_checked += 1
        want = ref_mac(x, y, z, mode)
        got = int(r.view(np.uint32)[i])
        if np.isnan(r[i]):
            assert want == NAN, (hex(x), hex(y), hex(z))
        else:
            assert got == want, (
                f"mac(acc={x:#010x}, a={y:#06x}, b={z:#06x}, {mode}) numpy {got:#010x}, ref {want:#010x}"
            )
    assert n_checked > 2000


# ---------------------------------------------------------------------------------------------- matmul
FMT_DTYPES = {
    "bf16": (ml_dtypes.bfloat16, np.uint16),
    "fp8_e4m3fn": (ml_dtypes.float8_e4m3fn, np.uint8),
    "fp8_e5m2": (ml_dtypes.float8_e5m2, np.uint8),
}


def _rand_input(rnd, fmt, specials):
    if fmt == "bf16":
        r = rnd.random()
        if specials and r < 0.06:
            return rnd.choice(BF16_SPECIAL)
        if r < 0.2:
            return rnd.getrandbits(16)
        if r < 0.3:
            return _rand_bf16(rnd, rnd.choice([0, 1, 2, 60, 61, 62, 63, 64]))  # tiny: products near 2^-126
        return _rand_bf16(rnd, 127 + rnd.randint(-8, 8))
    bits = rnd.getrandbits(8)
    if not specials:
        while decode(bits, fmt).kind != "finite":
            bits = rnd.getrandbits(8)
    return bits


def _rand_c(rnd, specials):
    r = rnd.random()
    if specials and r < 0.15:
        return rnd.choice(F32_SPECIAL)
    if r < 0.25:
        return _rand_f32_near(rnd, rnd.choice([-127, -126, -125]))
    return _rand_f32_near(rnd, rnd.randint(-10, 10))


def golden_matmul_bits(a_bits, b_bits, c_bits, fmt, mode):
    dt, ut = FMT_DTYPES[fmt]
    a = np.asarray(a_bits, dtype=ut).view(dt)
    b = np.asarray(b_bits, dtype=ut).view(dt)
    c = None if c_bits is None else f32_arr(c_bits)
    out = np.asarray(golden.matmul(a, b, c, fmt=fmt, subnormals=mode))
    assert out.dtype == np.float32, f"matmul({fmt}) must return float32, got {out.dtype}"
    assert out.shape == (len(a_bits), len(b_bits[0]))
    return out.view(np.uint32)


@pytest.mark.parametrize("fmt", list(FMT_DTYPES))
@pytest.mark.parametrize("mode", MODES)
def test_matmul_random(pyrng, fmt, mode):
    rnd = pyrng
    bad = []
    for trial in range(40):
        specials = trial % 2 == 1
        M, K, N = rnd.randint(1, 4), rnd.randint(1, 8), rnd.randint(1, 4)
        a = [[_rand_input(rnd, fmt, specials) for _ in range(K)] for _ in range(M)]
        b = [[_rand_input(rnd, fmt, specials) for _ in range(N)] for _ in range(K)]
        c = None if trial % 5 == 0 else [[_rand_c(rnd, specials) for _ in range(N)] for _ in range(M)]
        got = golden_matmul_bits(a, b, c, fmt, mode)
        want = ref_matmul(a, b, c, fmt=fmt, subnormals=mode)
        for m in range(M):
            for n in range(N):
                if int(got[m, n]) != want[m][n]:
                    bad.append(
                        f"trial {trial} ({M}x{K}x{N}) [{m},{n}]: golden {int(got[m, n]):#010x}, "
                        f"ref {want[m][n]:#010x};"
                        f" c={'None' if c is None else hex(c[m][n])} a_row={[hex(v) for v in a[m]]}"
                        f" b_col={[hex(b[k][n]) for k in range(K)]}"
                    )
    assert not bad, f"{len(bad)} mismatches ({fmt}, {mode}):\n" + "\n".join(bad[:15])


@pytest.mark.parametrize("fmt", ["fp8_e4m3fn", "fp8_e5m2"])
@pytest.mark.parametrize("mode", MODES)
def test_matmul_fp8_all_values(fmt, mode):
    """Every fp8 value (subnormals included: never flushed, they are bf16 normals) times 1 and times a set of
    edge values (zeros, subnormals, max, NaN/inf patterns), from accumulators -0, 1, 2^-126 and -448."""
    one = encode_value(fmt, 0, 1)
    vals = list(range(256))
    a = [[v] for v in vals]  # (256, 1)
    cols = [one, 0x00, 0x80, 0x01, 0x81, 0x07, 0x03, 0x7B, 0xFB, 0x7C, 0xFC, 0x7E, 0xFE, 0x7F, 0xFF, 0x40, 0xC1, 0x08]
    b = [cols]  # (1, len(cols))
    for c0 in (0x80000000, 0x3F800000, 0x00800000, 0xC3E00000):
        c = [[c0] * len(cols) for _ in range(256)]
        got = golden_matmul_bits(a, b, c, fmt, mode)
        want = ref_matmul(a, b, c, fmt=fmt, subnormals=mode)
        mism = [(i, j) for i in range(256) for j in range(len(cols)) if int(got[i, j]) != want[i][j]]
        assert not mism, [
            f"c={c0:#x} a={a[i][0]:#04x} b={b[0][j]:#04x}: golden {int(got[i, j]):#010x} ref {want[i][j]:#010x}"
            for i, j in mism[:15]
        ]


@pytest.mark.parametrize("mode", MODES)
def test_matmul_fp8_subnormals_not_flushed(mode):
    # e4m3fn 0x01 = 2^-9, e5m2 0x01 = 2^-16: subnormal in fp8, normal in bf16
    got = golden_matmul_bits([[0x01]], [[0x01]], None, "fp8_e4m3fn", mode)
    assert int(got[0, 0]) == 0x36800000  # 2^-18
    got = golden_matmul_bits([[0x01]], [[0x01]], None, "fp8_e5m2", mode)
    assert int(got[0, 0]) == 0x2F800000  # 2^-32


@pytest.mark.parametrize("mode", MODES)
def test_matmul_signed_zero_and_default_c(mode):
    a = [[0x8000, 0x8000]]  # -0, -0
    b = [[0x3F80], [0x3F80]]
    # default c is +0: +0 + -0 + -0 = +0
    assert int(golden_matmul_bits(a, b, None, "bf16", mode)[0, 0]) == 0x00000000
    assert ref_matmul(a, b, None, fmt="bf16", subnormals=mode) == [[0x00000000]]
    # c = -0: -0 + -0 + -0 = -0
    assert int(golden_matmul_bits(a, b, [[0x80000000]], "bf16", mode)[0, 0]) == 0x80000000
    # c = -sub: ftz treats it as -0
    want = {"ieee": 0x80000001, "ftz": 0x80000000}[mode]
    assert int(golden_matmul_bits(a, b, [[0x80000001]], "bf16", mode)[0, 0]) == want
    assert ref_matmul(a, b, [[0x80000001]], fmt="bf16", subnormals=mode) == [[want]]


@pytest.mark.parametrize("mode", MODES)
def test_matmul_nan_inf_propagation(mode):
    # rows of a: NaN, 0 (times inf in column 1), inf then -inf, plain inf, subnormal (times inf in column 1)
    a = [[0x7FC0, 0x3F80], [0x0000, 0x7F80], [0x7F80, 0xFF80], [0x7F80, 0x3F80], [0x0001, 0x3F80]]
    b = [[0x3F80, 0x7F80], [0x3F80, 0x3F80]]
    c = [[0x3F800000, 0x00000000]] * 5
    # rows of a with a (2,2) b: each output is a 2-long chain
    got = golden_matmul_bits(a, b, c, "bf16", mode)
    want = ref_matmul(a, b, c, fmt="bf16", subnormals=mode)
    assert got.tolist() == want
    assert want[0] == [NAN, NAN]
    assert want[2][0] == NAN  # inf + -inf
    assert want[1][1] == NAN  # 0 * inf
    assert want[3] == [0x7F800000, 0x7F800000]
    assert want[4][1] == {"ieee": 0x7F800000, "ftz": NAN}[mode]  # subnormal * inf


def _bf16_bits_of(x: float) -> int:
    return np.asarray([x], dtype=np.float32).astype(ml_dtypes.bfloat16).view(np.uint16).item()


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(
    "avals, c0, seq, differs_from_np",
    [
        # 1 + 2^-24 ties to 1 at every step; the exact (float64) sum is 1 + 2^-22
        ([1.0, 2.0**-24, 2.0**-24, 2.0**-24, 2.0**-24], None, 0x3F800000, True),
        # 1 + 2^30 rounds to 2^30, then cancels to +0; the exact sum (and the reversed chain) is 1
        ([1.0, 2.0**30, -(2.0**30)], None, 0x00000000, True),
        # k ascending: 2^-24 + 2^-24 first, then + 1 is exact; reversed order would give 1.0
        ([2.0**-24, 2.0**-24, 1.0], None, 0x3F800001, False),
        # c is the start of the chain: (1 + 2^-24) + 2^-24 == 1; adding c last would give 1 + 2^-23
        ([2.0**-24, 2.0**-24], 0x3F800000, 0x3F800000, True),
    ],
)
def test_matmul_is_sequential(mode, avals, c0, seq, differs_from_np):
    a_bits = [[_bf16_bits_of(v) for v in avals]]
    b_bits = [[0x3F80] for _ in avals]
    c_bits = None if c0 is None else [[c0]]
    got = int(golden_matmul_bits(a_bits, b_bits, c_bits, "bf16", mode)[0, 0])
    want = ref_matmul(a_bits, b_bits, c_bits, fmt="bf16", subnormals=mode)[0][0]
    assert want == seq
    assert got == seq
    a64 = bf16_arr(a_bits).astype(np.float64)
    b64 = bf16_arr(b_bits).astype(np.float64)
    np_res = np.matmul(a64, b64)
    if c0 is not None:
        np_res = np_res + f32_arr([[c0]]).astype(np.float64)
    np_bits = int(np_res.astype(np.float32).view(np.uint32)[0, 0])
    if differs_from_np:
        assert np_bits != got, "this case must distinguish the sequential fp32 chain from np.matmul"
    # the reversed k order gives a different answer, so the order is observable
    rev_a = [row[::-1] for row in a_bits]
    rev = ref_matmul(rev_a, b_bits[::-1], c_bits, fmt="bf16", subnormals=mode)[0][0]
    if c0 is None:
        assert rev != seq
    assert int(golden_matmul_bits(rev_a, b_bits[::-1], c_bits, "bf16", mode)[0, 0]) == rev


# ---------------------------------------------------------------------------------------------- int8
def golden_matmul_int8(a, b, c):
    out = golden.matmul(
        np.asarray(a, dtype=np.int8),
        np.asarray(b, dtype=np.int8),
        None if c is None else np.asarray(c, dtype=np.int32),
        fmt="int8",
    )
    out = np.asarray(out)
    assert out.dtype == np.int32, f"int8 matmul must return int32, got {out.dtype}"
    return out


def test_matmul_int8_wraparound():
    a = [[127] * 4, [-128] * 4, [-128, 127, -128, 127]]
    b = [[127], [127], [127], [127]]
    c = [[2**31 - 100], [-(2**31) + 5], [0]]
    got = golden_matmul_int8(a, b, c)
    want = ref_matmul(a, b, c, fmt="int8")
    assert got.tolist() == want
    assert want[0][0] == wrap32(2**31 - 100 + 4 * 127 * 127) < 0  # wrapped past +max
    assert want[1][0] == wrap32(-(2**31) + 5 - 4 * 128 * 127) > 0  # wrapped past -max
    # (-128)*(-128) = 16384: K=8 from int32 max
    a2 = [[-128] * 8]
    b2 = [[-128]] * 8
    got2 = golden_matmul_int8(a2, b2, [[2**31 - 1]])
    assert got2.tolist() == [[wrap32(2**31 - 1 + 8 * 16384)]] == ref_matmul(a2, b2, [[2**31 - 1]], fmt="int8")
    # default c = 0
    assert golden_matmul_int8([[-128, -128]], [[-128], [-128]], None).tolist() == [[32768]]


def test_matmul_int8_random(pyrng):
    rnd = pyrng
    for trial in range(40):
        M, K, N = rnd.randint(1, 5), rnd.randint(1, 16), rnd.randint(1, 5)
        a = [[rnd.randint(-128, 127) for _ in range(K)] for _ in range(M)]
        b = [[rnd.randint(-128, 127) for _ in range(N)] for _ in range(K)]

        def acc():
            return rnd.choice(
                [rnd.randint(-(2**31), 2**31 - 1), 2**31 - 1 - rnd.randint(0, 2**16), -(2**31) + rnd.randint(0, 2**16)]
            )

        c = None if trial % 4 == 0 else [[acc() for _ in range(N)] for _ in range(M)]
        got = golden_matmul_int8(a, b, c)
        want = ref_matmul(a, b, c, fmt="int8")
        assert got.tolist() == want, (trial, a, b, c)
