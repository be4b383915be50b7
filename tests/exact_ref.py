"""Exact, independent reference for the MXU numerics contract (docs/numerics.md).

Everything here is written from the IEEE 754 rules with ``fractions.Fraction`` and Python integers.
No numpy float arithmetic or casting is used, so the reference shares no code path with the golden model
(``verif.golden``) or with ml_dtypes. All values travel as raw bit patterns (Python ``int``).

Formats: fp64, fp32, bf16 (IEEE-style, with inf and NaN), fp8 e5m2 (IEEE-style), fp8 e4m3fn
("fn": no inf, only S.1111.111 is NaN, max finite 448).

Main entry points:

* ``decode(bits, fmt) -> Value``: kind ("finite" | "inf" | "nan"), sign (0/1), exact magnitude (Fraction).
* ``round_to(fmt, sign, mag, subnormals=..., saturate=...) -> bits``: one RNE rounding of an exact value.
* ``convert(bits, src, dst, saturate=...)``: host conversion (e.g. float64 -> bf16, rounded once).
* ``ref_mac(acc_bits, a_bits, b_bits, subnormals) -> fp32 bits``: fused ``RNE_fp32(acc + a*b)``.
* ``ref_matmul(a_bits, b_bits, c_bits, fmt, subnormals)``: sequential chain of ``ref_mac`` per output.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from functools import lru_cache
from typing import NamedTuple

__all__ = [
    "Fmt",
    "FP64",
    "FP32",
    "BF16",
    "E4M3FN",
    "E5M2",
    "FORMATS",
    "Value",
    "decode",
    "round_magnitude",
    "round_to",
    "encode_value",
    "convert",
    "is_nan",
    "nan_bits",
    "inf_bits",
    "zero_bits",
    "max_bits",
    "ref_mac",
    "ref_matmul",
    "fp8_to_bf16_bits",
    "CANONICAL_NAN32",
    "pow2",
    "wrap32",
    "ilog2",
    "is_subnormal",
    "rne_int",
]

CANONICAL_NAN32 = 0x7FC00000


def pow2(e: int) -> Fraction:
    """Exact 2**e for any integer e."""
    return Fraction(1 << e) if e >= 0 else Fraction(1, 1 << -e)


def ilog2(x: Fraction) -> int:
    """floor(log2(x)) for a Fraction x > 0, exactly."""
    n, d = x.numerator, x.denominator
    if n <= 0:
        raise ValueError("ilog2 needs a positive value")
    e = n.bit_length() - d.bit_length()
    # now 2**(e-1) < n/d < 2**(e+1); decide between e-1 and e
    if e >= 0:
        if n < (d << e):
            e -= 1
    else:
        if (n << -e) < d:
            e -= 1
    return e


def rne_int(x: Fraction) -> int:
    """Round a non-negative Fraction to the nearest integer, ties to even."""
    q, r = divmod(x.numerator, x.denominator)
    twice = 2 * r
    if twice > x.denominator or (twice == x.denominator and (q & 1)):
        q += 1
    return q


@dataclass(frozen=True)
class Fmt:
    name: str
    ebits: int
    mbits: int
    fn: bool = False  # True: e4m3fn style (no inf, NaN only with all-ones exponent and mantissa)

    @property
    def nbits(self) -> int:
        return 1 + self.ebits + self.mbits

    @property
    def bias(self) -> int:
        return (1 << (self.ebits - 1)) - 1

    @property
    def emin(self) -> int:
        return 1 - self.bias

    @property
    def emax(self) -> int:
        top = (1 << self.ebits) - 1
        return (top if self.fn else top - 1) - self.bias

    @property
    def has_inf(self) -> bool:
        return not self.fn

    @property
    def max_finite(self) -> Fraction:
        # largest significand: all ones, except in fn formats where all-ones (with max exponent) is NaN
        top_mant = (1 << self.mbits) - (2 if self.fn else 1)
        return Fraction((1 << self.mbits) + top_mant) * pow2(self.emax - self.mbits)

    @property
    def min_normal(self) -> Fraction:
        return pow2(self.emin)

    @property
    def sign_bit(self) -> int:
        return 1 << (self.nbits - 1)


FP64 = Fmt("fp64", 11, 52)
FP32 = Fmt("fp32", 8, 23)
BF16 = Fmt("bf16", 8, 7)
E5M2 = Fmt("fp8_e5m2", 5, 2)
E4M3FN = Fmt("fp8_e4m3fn", 4, 3, fn=True)
FORMATS = {f.name: f for f in (FP64, FP32, BF16, E5M2, E4M3FN)}


def _fmt(f) -> Fmt:
    return f if isinstance(f, Fmt) else FORMATS[f]


class Value(NamedTuple):
    kind: str  # "finite", "inf", "nan"
    sign: int  # 0 or 1 (NaN keeps its sign bit here, but it carries no meaning)
    mag: Fraction  # exact magnitude for finite values (0 for zeros), 0 otherwise

    @property
    def is_zero(self) -> bool:
        return self.kind == "finite" and self.mag == 0

    @property
    def signed(self) -> Fraction:
        return -self.mag if self.sign else self.mag


def decode(bits: int, fmt) -> Value:
    """Decode a raw bit pattern of format fmt exactly."""
    return _decode(int(bits), _fmt(fmt))


@lru_cache(maxsize=1 << 17)
def _decode(bits: int, f: Fmt) -> Value:
    if not 0 <= bits < (1 << f.nbits):
        raise ValueError(f"{bits:#x} is not a {f.name} bit pattern")
    sign = bits >> (f.nbits - 1)
    exp = (bits >> f.mbits) & ((1 << f.ebits) - 1)
    mant = bits & ((1 << f.mbits) - 1)
    top = (1 << f.ebits) - 1
    if f.fn:
        if exp == top and mant == (1 << f.mbits) - 1:
            return Value("nan", sign, Fraction(0))
    elif exp == top:
        return Value("nan" if mant else "inf", sign, Fraction(0))
    if exp == 0:  # zero or subnormal
        return Value("finite", sign, Fraction(mant) * pow2(f.emin - f.mbits))
    return Value("finite", sign, Fraction((1 << f.mbits) | mant) * pow2(exp - f.bias - f.mbits))


def is_nan(bits: int, fmt) -> bool:
    return decode(bits, fmt).kind == "nan"


def is_subnormal(bits: int, fmt) -> bool:
    v = decode(bits, fmt)
    return v.kind == "finite" and 0 < v.mag < _fmt(fmt).min_normal


def nan_bits(fmt) -> int:
    """Canonical (positive, quiet) NaN."""
    f = _fmt(fmt)
    if f.fn:
        return (1 << (f.nbits - 1)) - 1  # 0x7F for e4m3fn
    return (((1 << f.ebits) - 1) << f.mbits) | (1 << (f.mbits - 1))


def inf_bits(fmt, sign: int = 0) -> int:
    f = _fmt(fmt)
    if not f.has_inf:
        raise ValueError(f"{f.name} has no infinity")
    return (sign * f.sign_bit) | (((1 << f.ebits) - 1) << f.mbits)


def zero_bits(fmt, sign: int = 0) -> int:
    return sign * _fmt(fmt).sign_bit


def max_bits(fmt, sign: int = 0) -> int:
    return encode_value(fmt, sign, _fmt(fmt).max_finite)


def encode_value(fmt, sign: int, mag: Fraction) -> int:
    """Bit pattern of an exactly representable finite magnitude (raises if not representable)."""
    f = _fmt(fmt)
    s = sign * f.sign_bit
    if mag == 0:
        return s
    e = ilog2(mag)
    if e < f.emin:  # subnormal
        m = mag / pow2(f.emin - f.mbits)
        if m.denominator != 1 or m.numerator >= (1 << f.mbits):
            raise ValueError(f"{mag} is not representable in {f.name}")
        return s | m.numerator
    m = mag / pow2(e - f.mbits)
    if m.denominator != 1 or e > f.emax or mag > f.max_finite:
        raise ValueError(f"{mag} is not representable in {f.name}")
    return s | ((e + f.bias) << f.mbits) | (m.numerator - (1 << f.mbits))


def round_magnitude(mag: Fraction, fmt, *, unbounded: bool = False) -> Fraction:
    """RNE-round a magnitude to fmt's precision.

    unbounded=False: IEEE gradual underflow (quantum never below the subnormal quantum).
    unbounded=True:  precision p at every exponent (unbounded exponent range), as used to decide
                     tininess *after* rounding. No overflow handling either way.
    """
    f = _fmt(fmt)
    if mag == 0:
        return Fraction(0)
    e = ilog2(mag)
    if not unbounded:
        e = max(e, f.emin)
    quantum = pow2(e - f.mbits)
    return rne_int(mag / quantum) * quantum


def round_to(fmt, sign: int, mag: Fraction, *, subnormals: str = "ieee", saturate: bool = False) -> int:
    """Round the exact value (-1)**sign * mag (mag >= 0, finite) to fmt, once, RNE.

    subnormals="ieee": gradual underflow; a result that rounds to zero keeps the sign.
    subnormals="ftz":  round with unbounded exponent range; if the rounded magnitude is below the minimum
                       normal, the result is a zero carrying the sign of the exact value.
    Overflow (rounded with unbounded exponent range, magnitude > max finite): inf if the format has one,
    else NaN; with saturate=True: +-max finite.
    """
    f = _fmt(fmt)
    if mag < 0:
        raise ValueError("mag must be non-negative")
    if subnormals == "ftz":
        r = round_magnitude(mag, f, unbounded=True)
        if r < f.min_normal:
            return zero_bits(f, sign)
    elif subnormals == "ieee":
        r = round_magnitude(mag, f)
    else:
        raise ValueError(f"bad subnormals mode {subnormals!r}")
    if r > f.max_finite:
        if saturate:
            return max_bits(f, sign)
        return inf_bits(f, sign) if f.has_inf else nan_bits(f)
    return encode_value(f, sign, r)


def convert(bits: int, src, dst, *, saturate: bool = False) -> int:
    """Host-side conversion of one src bit pattern to dst, rounded once (RNE, gradual underflow).

    NaN -> canonical NaN of dst. inf -> inf (dst with inf, not saturating), NaN (e4m3fn, not saturating),
    +-max finite (saturating).
    """
    src, dst = _fmt(src), _fmt(dst)
    v = decode(bits, src)
    if v.kind == "nan":
        return nan_bits(dst)
    if v.kind == "inf":
        if saturate:
            return max_bits(dst, v.sign)
        return inf_bits(dst, v.sign) if dst.has_inf else nan_bits(dst)
    return round_to(dst, v.sign, v.mag, subnormals="ieee", saturate=saturate)


def fp8_to_bf16_bits(bits: int, fmt) -> int:
    """Exact decode of an fp8 pattern to bf16 (every fp8 value is a bf16 normal, zero, inf or NaN)."""
    v = decode(bits, fmt)
    if v.kind == "nan":
        return nan_bits(BF16)
    if v.kind == "inf":
        return inf_bits(BF16, v.sign)
    out = encode_value(BF16, v.sign, v.mag)  # raises if not exact
    return out


def _flush_input(v: Value, fmt: Fmt, subnormals: str) -> Value:
    if subnormals == "ftz" and v.kind == "finite" and 0 < v.mag < fmt.min_normal:
        return Value("finite", v.sign, Fraction(0))
    return v


def ref_mac(acc_bits: int, a_bits: int, b_bits: int, subnormals: str = "ftz") -> int:
    """Fused multiply-add of the PE: fp32 bits of RNE_fp32(acc + a*b), one rounding, exact product.

    acc: fp32 bits; a, b: bf16 bits. NaN results are the canonical 0x7FC00000.
    """
    if subnormals not in ("ftz", "ieee"):
        raise ValueError(f"bad subnormals mode {subnormals!r}")
    acc = _flush_input(decode(acc_bits, FP32), FP32, subnormals)
    a = _flush_input(decode(a_bits, BF16), BF16, subnormals)
    b = _flush_input(decode(b_bits, BF16), BF16, subnormals)
    if "nan" in (acc.kind, a.kind, b.kind):
        return CANONICAL_NAN32
    psign = a.sign ^ b.sign
    # product
    if a.kind == "inf" or b.kind == "inf":
        if a.is_zero or b.is_zero:
            return CANONICAL_NAN32  # inf * 0
        pkind = "inf"
        pmag = Fraction(0)
    else:
        pkind = "finite"
        pmag = a.mag * b.mag  # exact
    # sum
    if pkind == "inf" and acc.kind == "inf":
        return CANONICAL_NAN32 if psign != acc.sign else inf_bits(FP32, psign)
    if pkind == "inf":
        return inf_bits(FP32, psign)
    if acc.kind == "inf":
        return inf_bits(FP32, acc.sign)
    s = acc.signed + (-pmag if psign else pmag)
    if s == 0:
        # IEEE 754 6.3: exact zero sum is +0 under RNE unless both addends are -0 (then -0).
        # Both addends zero with sign 1 <=> both signs 1 (a nonzero cancellation has opposite signs).
        return zero_bits(FP32, acc.sign & psign)
    return round_to(FP32, 1 if s < 0 else 0, abs(s), subnormals=subnormals)


def wrap32(x: int) -> int:
    x &= 0xFFFFFFFF
    return x - (1 << 32) if x & 0x80000000 else x


def _as_lists(x):
    if x is None:
        return None
    if hasattr(x, "tolist"):
        x = x.tolist()
    return [[int(v) for v in row] for row in x]


def ref_matmul(a_bits, b_bits, c_bits=None, *, fmt: str = "bf16", subnormals: str = "ftz"):
    """Reference matmul: out[m][n] = chain of ref_mac over k = 0..K-1 starting from c[m][n].

    a_bits (M,K), b_bits (K,N): bit patterns of fmt (ints), or signed int8 values for fmt="int8".
    c_bits (M,N): fp32 bit patterns (default +0.0), or signed int32 values for fmt="int8" (default 0).
    Returns a list of lists: fp32 bit patterns, or signed int32 values for int8.
    """
    a, b, c = _as_lists(a_bits), _as_lists(b_bits), _as_lists(c_bits)
    M, K = len(a), (len(a[0]) if a else 0)
    if len(b) != K:
        raise ValueError("inner dimensions differ")
    N = len(b[0]) if b else 0
    if fmt == "int8":

        def step(acc, x, y):
            return wrap32(acc + x * y)
    elif fmt in ("bf16", "fp8_e4m3fn", "fp8_e5m2"):
        if fmt != "bf16":
            a = [[fp8_to_bf16_bits(v, fmt) for v in row] for row in a]
            b = [[fp8_to_bf16_bits(v, fmt) for v in row] for row in b]

        def step(acc, x, y):
            return ref_mac(acc, x, y, subnormals)
    else:
        raise ValueError(f"bad fmt {fmt!r}")
    out = []
    for m in range(M):
        row = []
        for n in range(N):
            acc = c[m][n] if c is not None else 0
            for k in range(K):
                acc = step(acc, a[m][k], b[k][n])
            row.append(acc)
        out.append(row)
    return out
