"""The blocks ``mxu synth`` can take out of context, beyond the MXU, PE and MAC: the HBM controller
and each of its parts.

Each entry builds one Amaranth component from an :class:`~hw.hbm.config.HBMConfig`; the Verilog
module carries the block's name with ``-`` as ``_``.
"""

from __future__ import annotations

from collections.abc import Callable

__all__ = ["HBM_BLOCKS", "hbm_block"]

#: block name -> (what it is, for --help and the report)
HBM_BLOCKS: dict[str, str] = {
    "hbm": "HBM controller: AXI4 port, one pseudo-channel controller per pseudo-channel",
    "hbm-channel": "one HBM2 pseudo-channel controller (queue, bank timing, refresh, scheduler, data paths)",
    "hbm-queue": "the pseudo-channel controller's request queue (age and hazard matrices, readiness)",
    "hbm-bank-timing": "the pseudo-channel controller's bank state and timing counters",
    "hbm-scheduler": "the pseudo-channel controller's command choice (FR-FCFS, refresh)",
    "hbm-refresh": "the pseudo-channel controller's refresh timer",
    "hbm-read-path": "the pseudo-channel controller's read response path",
    "hbm-write-path": "the pseudo-channel controller's write data path",
}


def hbm_block(name: str, config) -> Callable[[], object]:
    """A factory of the HBM block ``name`` (a key of :data:`HBM_BLOCKS`) for ``config``.

    Raises:
        ValueError: unknown block name.
    """
    from hw.hbm.axi import HBMController
    from hw.hbm.bank_timing import BankTiming
    from hw.hbm.controller import PseudoChannelController
    from hw.hbm.read_path import ReadResponsePath
    from hw.hbm.refresh import RefreshTimer
    from hw.hbm.request_queue import RequestQueue
    from hw.hbm.scheduler import CommandScheduler
    from hw.hbm.write_path import WriteDataPath

    classes = {
        "hbm": HBMController, "hbm-channel": PseudoChannelController, "hbm-queue": RequestQueue,
        "hbm-bank-timing": BankTiming, "hbm-scheduler": CommandScheduler, "hbm-refresh": RefreshTimer,
        "hbm-read-path": ReadResponsePath, "hbm-write-path": WriteDataPath,
    }
    if name not in classes:
        raise ValueError(f"block must be one of {', '.join(classes)}; got {name!r}")
    cls = classes[name]
    return lambda: cls(config)
