"""The blocks ``mxu synth`` can take out of context, beyond the MXU, PE and MAC: the HBM controller
and each of its parts.

Each entry builds one Amaranth component from an :class:`~hw.hbm.config.HBMConfig`; the Verilog
module carries the block's name with ``-`` as ``_``.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable

__all__ = ["HBM_BLOCKS", "hbm_block"]

#: block name -> (module:class under hw.hbm, what it is for --help). The classes are imported only
#: when a block is built, so the command line starts without Amaranth.
HBM_BLOCKS: dict[str, tuple[str, str]] = {
    "hbm": ("axi:HBMController", "HBM controller: AXI4 port, one pseudo-channel controller per pseudo-channel"),
    "hbm-channel": ("controller:PseudoChannelController",
                    "one HBM2 pseudo-channel controller (queue, bank timing, refresh, scheduler, data paths)"),
    "hbm-queue": ("request_queue:RequestQueue",
                  "the pseudo-channel controller's request queue (age and hazard matrices, readiness)"),
    "hbm-bank-timing": ("bank_timing:BankTiming",
                        "the pseudo-channel controller's bank state and timing counters"),
    "hbm-scheduler": ("scheduler:CommandScheduler",
                      "the pseudo-channel controller's command choice (FR-FCFS, refresh)"),
    "hbm-refresh": ("refresh:RefreshTimer", "the pseudo-channel controller's refresh timer"),
    "hbm-read-path": ("read_path:ReadResponsePath", "the pseudo-channel controller's read response path"),
    "hbm-write-path": ("write_path:WriteDataPath", "the pseudo-channel controller's write data path"),
}


def hbm_block(name: str, config) -> Callable[[], object]:
    """A factory of the HBM block ``name`` (a key of :data:`HBM_BLOCKS`) for ``config``.

    Raises:
        ValueError: unknown block name.
    """
    if name not in HBM_BLOCKS:
        raise ValueError(f"block must be one of {', '.join(HBM_BLOCKS)}; got {name!r}")
    module, cls = HBM_BLOCKS[name][0].split(":")
    component = getattr(importlib.import_module(f"hw.hbm.{module}"), cls)
    return lambda: component(config)
