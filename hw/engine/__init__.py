"""GEMM engine: AXI4-Lite registers, DMA over AXI4, MXU feeding, accumulators, write-back."""

from .csr import ENGINE_ID, PERF_COUNTERS, REG, REGISTERS, register_table_markdown
from .engine import DIM_BITS, ENGINE_ADDRESS_MAPPING, ERRORS, EngineConfig, GEMMEngine

__all__ = ["PERF_COUNTERS", "REGISTERS", "REG", "ENGINE_ID", "register_table_markdown", "DIM_BITS",
           "ENGINE_ADDRESS_MAPPING", "ERRORS", "EngineConfig", "GEMMEngine"]
