"""Golden GEMM: the sequential fp32 chain over k that the systolic array computes.

Each output element is one chain ``acc <- RNE_fp32(acc + a[m,k]*b[k,n])`` for k = 0..K-1, starting
from ``c[m,n]`` (or +0). Because the MXU continues the same chain across K tiles (the accumulator
re-enters the top of the column), this is the result for every array shape and tiling.
``np.matmul`` is *not* this: it reorders and rounds differently.
"""

from __future__ import annotations

import numpy as np

from .numerics import _check_subnormals, dtype_of, fp8_to_bf16, int8_mac, mac

__all__ = ["matmul"]


def matmul(a, b, c=None, *, fmt: str = "bf16", subnormals: str = "ftz") -> np.ndarray:
    """Bit-exact golden matrix product of the MXU.

    Args:
        a: (M, K) array in the input format (ml_dtypes.bfloat16, float8_e4m3fn, float8_e5m2 or
            numpy int8, matching ``fmt``). Convert host data first with :func:`to_format`.
        b: (K, N) array in the same format.
        c: optional (M, N) initial accumulator, float32 (int32 for int8); default +0.
        fmt: "bf16", "fp8_e4m3fn", "fp8_e5m2" or "int8". fp8 is decoded exactly to bf16 first.
        subnormals: "ftz" or "ieee" (ignored for int8).

    Returns:
        (M, N) float32 (int32 for int8). NaN results are the canonical 0x7FC00000.

    Raises:
        ValueError: unknown fmt/subnormals, wrong dtype for fmt, non-2-D inputs, or K/M/N mismatch.
    """
    dtype = dtype_of(fmt)
    _check_subnormals(subnormals)
    a = np.asarray(a)
    b = np.asarray(b)
    if a.ndim != 2 or b.ndim != 2:
        raise ValueError(f"a and b must be 2-D; got shapes {a.shape} and {b.shape}")
    if a.shape[1] != b.shape[0]:
        raise ValueError(f"inner dimensions differ: a is {a.shape[0]}x{a.shape[1]}, b is {b.shape[0]}x{b.shape[1]}")
    for name, x in (("a", a), ("b", b)):
        if x.dtype != dtype:
            raise ValueError(f"{name} must have dtype {np.dtype(dtype).name} for fmt={fmt}; got {x.dtype}")
    m, k = a.shape
    n = b.shape[1]
    acc_dtype = np.int32 if fmt == "int8" else np.float32
    if c is None:
        acc = np.zeros((m, n), dtype=acc_dtype)
    else:
        c = np.asarray(c)
        if c.shape != (m, n):
            raise ValueError(f"c must have shape ({m}, {n}); got {c.shape}")
        if c.dtype != acc_dtype:
            raise ValueError(f"c must have dtype {np.dtype(acc_dtype).name} for fmt={fmt}; got {c.dtype}")
        acc = c.copy()
    if fmt == "int8":
        for kk in range(k):
            acc = int8_mac(acc, a[:, kk:kk + 1], b[kk:kk + 1, :])
        return acc
    if fmt != "bf16":
        a, b = fp8_to_bf16(a), fp8_to_bf16(b)
    for kk in range(k):
        acc = mac(acc, a[:, kk:kk + 1], b[kk:kk + 1, :], subnormals=subnormals)
    return acc
