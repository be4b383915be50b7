"""Golden numerics: host conversions into the input formats and the fused bf16 MAC.

Everything here is vectorized numpy and bit-exact with the RTL. The rules (docs/numerics.md, the
bit-exact contract):

* A MAC is ``acc <- RNE_fp32(acc + a*b)``: the product of two bf16 values is exact (8 x 8-bit
  significands, 16 bits, exponent range [-266, 255], held exactly in float64) and the sum is rounded
  once to fp32 with roundTiesToEven (IEEE 754-2019 §4.3.1).
* ``subnormals="ieee"``: gradual underflow (IEEE 754-2019 §7.5), as numpy float32 does.
* ``subnormals="ftz"``: subnormal inputs (a, b and the incoming accumulator) are read as zero of the
  same sign (DAZ); a result is *tiny* when its value rounded to 24-bit precision with an unbounded
  exponent is below 2**-126 in magnitude (tininess detected after rounding, IEEE 754-2019 §7.5), and a
  tiny result is flushed to a zero of its sign (FTZ), as the TPU and Intel AMX do.
* NaN: any NaN input, inf*0 and inf-inf give NaN; the result is always the canonical 0x7FC00000, which
  is what the hardware emits, so results compare bit for bit.
* Overflow rounds to +-inf (never saturates). An exact zero sum is +0 unless both addends are -0
  (IEEE 754-2019 §6.3).

How one rounding is obtained in numpy: the exact sum ``acc + p`` of an fp32 and an exact product is
computed in float64 with TwoSum (Knuth), whose error term tells whether the float64 sum was exact;
the float64 sum is then moved to *round-to-odd* (if inexact and its last bit is even, step one ulp
toward the exact value). Rounding a round-to-odd value with p >= 2q + 2 bits to q bits with RNE equals
rounding the exact value once (Boldo & Melquiond, "Emulation of FMA and correctly rounded sums: proved
algorithms using rounding to odd", IEEE TC 2008); 53 >= 2*24 + 2. The same trick rounds float64 host
data once into bf16 and fp8 (24 >= 2*8 + 2).

Formats are ml_dtypes dtypes: ``bfloat16``, ``float8_e4m3fn`` (no infinity, NaN = S.1111.111),
``float8_e5m2`` (IEEE-like), and numpy ``int8`` for the integer mode (int32 two's-complement
accumulation).
"""

from __future__ import annotations

import ml_dtypes
import numpy as np

__all__ = [
    "FORMATS", "SUBNORMAL_MODES", "CANONICAL_NAN_BITS", "CANONICAL_BF16_NAN_BITS", "fp32_to_bf16_bits", "dtype_of",
    "to_format", "round_to_odd_f32",
    "fp8_to_bf16", "mac", "mac_bits", "int8_mac", "check_no_process_ftz",
]

#: Input formats the MXU accepts, with their ml_dtypes / numpy dtype.
FORMATS = {
    "bf16": ml_dtypes.bfloat16,
    "fp8_e4m3fn": ml_dtypes.float8_e4m3fn,
    "fp8_e5m2": ml_dtypes.float8_e5m2,
    "int8": np.int8,
}
#: Subnormal handling modes: "ftz" (flush-to-zero + denormals-are-zero) or "ieee" (gradual underflow).
SUBNORMAL_MODES = ("ftz", "ieee")
#: The fp32 NaN the hardware emits for every NaN result (quiet, positive, payload 0).
CANONICAL_NAN_BITS = 0x7FC00000

_F32_MIN_NORMAL = np.float32(2.0**-126)
_RAW_DTYPES = {"bf16": np.uint16, "fp8_e4m3fn": np.uint8, "fp8_e5m2": np.uint8}


def check_no_process_ftz() -> None:
    """Raise RuntimeError if float32 subnormals do not survive arithmetic in this process.

    Some native libraries (compiled with ``-ffast-math``) switch the x86 FTZ/DAZ bits on for the whole
    process; then numpy flushes subnormals and every golden result in ``ieee`` mode would be wrong.
    """
    tiny = np.array([2.0**-149], dtype=np.float32)
    with np.errstate(all="ignore"):
        twice = tiny * np.float32(2.0)
        back = np.array([2.0**-140]).astype(np.float32)
    if tiny[0] == 0 or twice[0] != np.float32(2.0**-148) or back[0] == 0:
        raise RuntimeError(
            "float32 subnormals are flushed in this process (FTZ/DAZ switched on by a native library, "
            "e.g. one built with -ffast-math); the golden model cannot run bit-exactly. Import "
            "verif.golden before that library, or run it in another process."
        )


check_no_process_ftz()


def dtype_of(fmt: str):
    """Return the numpy/ml_dtypes dtype of input format ``fmt``.

    Raises ValueError naming the allowed values for an unknown format.
    """
    try:
        return FORMATS[fmt]
    except KeyError:
        raise ValueError(f"fmt must be one of {', '.join(FORMATS)}; got {fmt!r}") from None


def _check_subnormals(subnormals: str) -> None:
    if subnormals not in SUBNORMAL_MODES:
        raise ValueError(f"subnormals must be one of ftz, ieee; got {subnormals!r}")


def round_to_odd_f32(x: np.ndarray) -> np.ndarray:
    """Round float64 values to float32 with round-to-odd (sticky in the last bit).

    Returns float32 values y such that y == x when x is representable, else y is the neighbour of x
    (in the direction of x) whose last significand bit is 1. Values beyond the float32 range become
    +-float32 max (odd), so a following RNE to a narrower format still overflows correctly. NaN and
    inf pass through.
    """
    x = np.asarray(x, dtype=np.float64)
    with np.errstate(over="ignore", invalid="ignore"):
        y = x.astype(np.float32)
    finite = np.isfinite(x)
    inexact = finite & (y.astype(np.float64) != x)
    # Overflowed finite values: clamp to max magnitude (odd significand).
    fmax = np.finfo(np.float32).max
    y = np.where(finite & np.isinf(y), np.copysign(fmax, x).astype(np.float32), y)
    even = (y.view(np.uint32) & 1) == 0
    with np.errstate(over="ignore", invalid="ignore"):
        toward = np.nextafter(y, np.where(x > y, np.inf, -np.inf).astype(np.float32))
    return np.where(inexact & even, toward, y).astype(np.float32)


def _fp8_saturate(y: np.ndarray, x: np.ndarray, dtype) -> np.ndarray:
    """Clamp finite overflow and +-inf to +-max finite of the fp8 ``dtype`` (NaN stays NaN)."""
    fmax = float(ml_dtypes.finfo(dtype).max)
    with np.errstate(invalid="ignore", over="ignore"):
        xf = np.asarray(x, dtype=np.float64)
        over = ~np.isnan(xf) & (np.abs(xf) > fmax)
        return np.where(over, np.copysign(fmax, xf).astype(dtype), y).astype(dtype)


def relu(h: np.ndarray) -> np.ndarray:
    """ReLU of float32 data on the host: numpy ``maximum(h, +0)`` elementwise (NaN stays NaN, -0 gives
    +0). The one ReLU of the golden path, the demo and chained GEMMs (``sim.gemm.GemmJob.a_from``)."""
    return np.maximum(h, np.float32(0))


def to_format(x, fmt: str, *, saturate: bool = False) -> np.ndarray:
    """Convert host data into input format ``fmt`` the way the hardware's user expects.

    Args:
        x: array-like. float32 is rounded to nearest, ties to even (via ml_dtypes), and so is float16
            (widened to float32 exactly first); float64 is rounded
            **once** (ml_dtypes 0.6 goes through float32 and double-rounds, e.g. 1 + 2**-8 + 2**-40
            would give bf16 0x3F80 instead of 0x3F81); uint16 (bf16) or uint8 (fp8) are raw bit
            patterns taken as they are; arrays already in the format pass unchanged. For int8, any
            integer array whose values fit in [-128, 127].
        fmt: "bf16", "fp8_e4m3fn", "fp8_e5m2" or "int8".
        saturate: fp8 only. False (default): overflow gives NaN for e4m3fn (it has no infinity) and
            +-inf for e5m2. True: finite overflow and +-inf clamp to +-max finite (448 for e4m3fn,
            57344 for e5m2), as in the OCP 8-bit floating point spec's saturating mode. NaN stays NaN.

    Returns:
        numpy array of dtype ``dtype_of(fmt)`` with the shape of ``x``.

    Raises:
        ValueError: unknown ``fmt``; an int8 value out of range; a dtype the format does not accept.
    """
    dtype = dtype_of(fmt)
    x = np.asarray(x)
    if fmt == "int8":
        if x.dtype == np.int8:
            return x
        if not np.issubdtype(x.dtype, np.integer):
            raise ValueError(f"int8 format takes an integer array; got dtype {x.dtype}")
        if x.size and (x.min() < -128 or x.max() > 127):
            raise ValueError("int8 values must lie in [-128, 127]")
        return x.astype(np.int8)
    if x.dtype == dtype:
        return x
    if x.dtype == _RAW_DTYPES[fmt]:
        return x.view(dtype)
    if x.dtype == np.float64:
        x32 = round_to_odd_f32(x)
    elif x.dtype == np.float32:
        x32 = x
    elif x.dtype in (ml_dtypes.bfloat16, ml_dtypes.float8_e4m3fn, ml_dtypes.float8_e5m2, np.float16):
        x32 = x.astype(np.float32)  # exact widening
    else:
        raise ValueError(
            f"cannot convert dtype {x.dtype} to {fmt}: give float32, float64, "
            f"{np.dtype(_RAW_DTYPES[fmt]).name} bit patterns or {np.dtype(dtype).name}"
        )
    with np.errstate(invalid="ignore", over="ignore"):
        y = x32.astype(dtype)
    # A signalling NaN must stay NaN (ml_dtypes quiets it, but never let truncation make it inf).
    y = np.where(np.isnan(x32), np.array(np.nan, dtype=dtype), y).astype(dtype)
    if saturate and fmt != "bf16":
        y = _fp8_saturate(y, x32, dtype)
    return y


def fp8_to_bf16(x: np.ndarray) -> np.ndarray:
    """Decode fp8 (e4m3fn or e5m2) exactly to bf16; every fp8 value, subnormals included, is a normal
    bf16 value. NaNs become bf16 NaN; e5m2 infinities stay infinite."""
    x = np.asarray(x)
    return x.astype(np.float32).astype(ml_dtypes.bfloat16)


CANONICAL_BF16_NAN_BITS = 0x7FC0


def fp32_to_bf16_bits(c) -> np.ndarray:
    """The engine's bf16 output: fp32 results rounded **once** to bf16, RNE (IEEE 754-2019 §4.3.1),
    overflow to +-inf, subnormals rounded gradually (in ftz mode the fp32 results are never
    subnormal, so nothing is flushed here), NaN -> canonical 0x7FC0.

    Args:
        c: float32 array (the fp32 results).
    Returns:
        uint16 array of bf16 bit patterns, same shape.
    """
    x = np.asarray(c, dtype=np.float32).view(np.uint32).astype(np.uint64)
    rounded = ((x + 0x7FFF + ((x >> 16) & 1)) >> 16).astype(np.uint16)
    return np.where(np.isnan(np.asarray(c, dtype=np.float32)), np.uint16(CANONICAL_BF16_NAN_BITS),
                    rounded).astype(np.uint16)


def _daz(x: np.ndarray) -> np.ndarray:
    """Subnormals to zero of the same sign (float64 view of bf16/fp32 values)."""
    return np.where((x != 0) & (np.abs(x) < 2.0**-126), np.copysign(0.0, x), x)


def mac(acc, a, b, *, subnormals: str = "ftz") -> np.ndarray:
    """Elementwise fused multiply-add ``RNE_fp32(acc + a*b)`` with one rounding, as one PE does.

    Args:
        acc: float32 array, the incoming partial sum (any shape broadcastable with a and b).
        a, b: ml_dtypes.bfloat16 arrays (float32 arrays holding bf16 values are accepted too).
        subnormals: "ftz" or "ieee" (see module docstring).

    Returns:
        float32 array; every NaN result is the canonical 0x7FC00000.

    Raises:
        ValueError: unknown ``subnormals``.
    """
    _check_subnormals(subnormals)
    with np.errstate(invalid="ignore"):
        acc64 = np.asarray(acc, dtype=np.float32).astype(np.float64)
        a64 = np.asarray(a).astype(np.float32).astype(np.float64)
        b64 = np.asarray(b).astype(np.float32).astype(np.float64)
    if subnormals == "ftz":
        acc64, a64, b64 = _daz(acc64), _daz(a64), _daz(b64)
    with np.errstate(all="ignore"):
        p = a64 * b64  # exact: 16-bit significand, exponent >= -266
    return _round_sum(acc64, p, subnormals)


def add(x, y, *, subnormals: str = "ftz") -> np.ndarray:
    """Elementwise ``RNE_fp32(x + y)`` of two fp32 arrays with one rounding, in the subnormal mode of
    :func:`mac` (``"ftz"``: subnormal inputs read as zero of their sign, results below 2**-126 after
    rounding flushed; IEEE 754-2019 §4.3.1, §7.5): the collectives' reduction step.

    Returns:
        float32 array; every NaN result is the canonical 0x7FC00000.

    Raises:
        ValueError: unknown ``subnormals``.
    """
    _check_subnormals(subnormals)
    x64 = np.asarray(x, dtype=np.float32).astype(np.float64)
    y64 = np.asarray(y, dtype=np.float32).astype(np.float64)
    if subnormals == "ftz":
        x64, y64 = _daz(x64), _daz(y64)
    return _round_sum(x64, y64, subnormals)


def _round_sum(acc64: np.ndarray, p: np.ndarray, subnormals: str) -> np.ndarray:
    """``RNE_fp32(acc64 + p)`` of two float64 arrays that hold fp32 values or exact products."""
    with np.errstate(all="ignore"):
        s = acc64 + p
        # TwoSum error term: exact when no overflow (|s| < 2**1023 always here).
        bb = s - acc64
        err = (acc64 - (s - bb)) + (p - bb)
        finite = np.isfinite(s)
        inexact = finite & (err != 0)
        even = (s.view(np.uint64) & 1) == 0
        direction = np.where(err > 0, np.inf, -np.inf)
        s_odd = np.where(inexact & even, np.nextafter(s, direction), s)
        if subnormals == "ieee":
            out = s_odd.astype(np.float32)
        else:
            # Tininess after rounding: round to 24 bits with an unbounded exponent by scaling up.
            tiny_region = finite & (np.abs(s_odd) < 2.0**-126)
            scaled = (s_odd * 2.0**200).astype(np.float32).astype(np.float64)
            rounds_to_min = np.abs(scaled) >= 2.0 ** (-126 + 200)
            out = s_odd.astype(np.float32)
            flushed = np.where(rounds_to_min, np.copysign(_F32_MIN_NORMAL, s_odd), np.copysign(0.0, s_odd))
            out = np.where(tiny_region, flushed.astype(np.float32), out).astype(np.float32)
    out = np.asarray(out, dtype=np.float32)
    nan = np.isnan(out)
    if nan.any():
        out = out.copy()
        out.view(np.uint32)[nan] = CANONICAL_NAN_BITS
    return out


def mac_bits(acc_bits, a_bits, b_bits, *, subnormals: str = "ftz") -> np.ndarray:
    """:func:`mac` on raw bit patterns: acc uint32 (fp32), a and b uint16 (bf16); returns uint32."""
    acc = np.asarray(acc_bits, dtype=np.uint32).view(np.float32)
    a = np.asarray(a_bits, dtype=np.uint16).view(ml_dtypes.bfloat16)
    b = np.asarray(b_bits, dtype=np.uint16).view(ml_dtypes.bfloat16)
    return mac(acc, a, b, subnormals=subnormals).view(np.uint32)


def int8_mac(acc, a, b) -> np.ndarray:
    """Elementwise ``wrap32(acc + a*b)``: int32 acc, int8 a and b, two's-complement wrap-around."""
    s = np.asarray(acc, dtype=np.int64) + np.asarray(a, dtype=np.int64) * np.asarray(b, dtype=np.int64)
    return ((s + 2**31) % 2**32 - 2**31).astype(np.int32)
