"""Golden models: bit-exact numerics (:mod:`.numerics`), the sequential GEMM (:mod:`.matmul`) and
the pod's collectives and sharded GEMM (:mod:`.collectives`).

Public API used by the tests, the CLI and later blocks::

    to_format(x, fmt, *, saturate=False)             host data -> input format
    mac(acc, a, b, *, subnormals="ftz")              fused RNE_fp32(acc + a*b), elementwise
    add(x, y, *, subnormals="ftz")                   RNE_fp32(x + y), elementwise (the collectives)
    matmul(a, b, c=None, *, fmt="bf16", subnormals="ftz")
    expected_bits(a, b, c=None, *, fmt, subnormals, out="fp32")   golden GEMM result bits
    result_bits(bits, out), compare_bits(rtl, golden)              the hardware's side, the diff
"""

from .check import compare_bits, expected_bits, result_bits
from .matmul import matmul
from .numerics import (
                       CANONICAL_BF16_NAN_BITS,
                       CANONICAL_NAN_BITS,
                       FORMATS,
                       SUBNORMAL_MODES,
                       add,
                       check_no_process_ftz,
                       dtype_of,
                       fp8_to_bf16,
                       fp32_to_bf16_bits,
                       int8_mac,
                       mac,
                       mac_bits,
                       relu,
                       round_to_odd_f32,
                       to_format,
)

__all__ = ["CANONICAL_BF16_NAN_BITS", "CANONICAL_NAN_BITS", "fp32_to_bf16_bits", "FORMATS", "SUBNORMAL_MODES",
           "add", "check_no_process_ftz", "dtype_of", "fp8_to_bf16", "int8_mac", "mac", "mac_bits", "matmul",
           "relu", "round_to_odd_f32", "to_format", "expected_bits", "result_bits", "compare_bits"]
