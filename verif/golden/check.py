"""Checking a GEMM's results against the golden model, bit for bit.

One place for what ``mxu matmul``, ``mxu board matmul``, the demo, the benchmarks and the tests
compare: the golden result bit patterns of a GEMM (:func:`expected_bits`), the hardware's results
as unsigned bit patterns (:func:`result_bits`) and the indices where they differ
(:func:`compare_bits`).
"""

from __future__ import annotations

import numpy as np

from .matmul import matmul
from .numerics import fp32_to_bf16_bits

__all__ = ["expected_bits", "result_bits", "compare_bits"]


def expected_bits(a, b, c=None, *, fmt: str, subnormals: str, out: str = "fp32") -> np.ndarray:
    """Golden result bit patterns of ``C = c + a @ b`` (:func:`verif.golden.matmul`: one sequential
    fp32 chain over k per element).

    Args:
        a, b: (M, K) and (K, N) arrays in the format's dtype (``verif.golden.to_format``).
        c: optional (M, N) float32 (int32 for int8) initial accumulator.
        fmt, subnormals: the numerics ("bf16" | "fp8_e4m3fn" | "fp8_e5m2" | "int8"; "ftz" | "ieee").
        out: "fp32" (int32 results for int8) or "bf16" (fp32 rounded once, RNE).

    Returns:
        (M, N) uint32 (fp32 / int32 results) or uint16 (bf16 output); NaN as the canonical pattern
        the hardware emits (0x7FC00000, 0x7FC0).
    """
    ref = matmul(a, b, c, fmt=fmt, subnormals=subnormals)
    if out == "bf16":
        return fp32_to_bf16_bits(ref)
    return np.ascontiguousarray(ref).view(np.uint32)


def result_bits(bits, out: str) -> np.ndarray:
    """The hardware's results as unsigned bit patterns: uint32, or uint16 for bf16 output.

    Args:
        bits: the results as the simulation or the board returned them: any 4-byte (2-byte for bf16
            output) array is reinterpreted; a wider or narrower integer array is reduced modulo
            2**32 (2**16).

    Raises:
        ValueError: a float array of another width (no bit pattern to take).
    """
    bits = np.ascontiguousarray(np.asarray(bits))
    width, unsigned = (2, np.uint16) if out == "bf16" else (4, np.uint32)
    if bits.dtype.itemsize == width:
        return bits.view(unsigned)
    if bits.dtype.kind in "iu":
        return bits.astype(np.int64).astype(unsigned)
    raise ValueError(f"results of dtype {bits.dtype} hold no {8 * width}-bit patterns")


def compare_bits(rtl, golden) -> list[tuple[int, ...]]:
    """Indices where two bit-pattern arrays differ (row-major order); a shape mismatch is reported
    as every index of the golden array."""
    if rtl.shape != golden.shape:
        return [tuple(int(i) for i in ix) for ix in np.ndindex(*golden.shape)]
    return [tuple(int(i) for i in ix) for ix in np.argwhere(rtl != golden)]
