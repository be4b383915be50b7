"""HBM2-style pseudo-channel memory controller: configuration (geometry + timing sets)."""

from .config import (
    COMPRESSED_REFRESH,
    DRAMSIM3_HBM2,
    RAMULATOR2_HBM2,
    TIMING_PRESETS,
    ADDRESS_FIELDS,
    HBMConfig,
    HBMTiming,
    PagePolicy,
)

__all__ = [
    "ADDRESS_FIELDS",
    "COMPRESSED_REFRESH",
    "DRAMSIM3_HBM2",
    "HBMConfig",
    "HBMTiming",
    "PagePolicy",
    "RAMULATOR2_HBM2",
    "TIMING_PRESETS",
]
