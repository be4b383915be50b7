"""The blocks ``mxu synth`` can take out of context, beyond the MXU, PE and MAC: the HBM controller
and each of its parts; the GEMM engine, each of its parts, the GEMM top and the board top; the ICI
link and its transmitter and receiver.

Each HBM entry builds one Amaranth component from an :class:`~hw.hbm.config.HBMConfig`, each engine
entry one from an :class:`~hw.engine.EngineConfig` (the board top from a
:class:`~hw.board.BoardConfig` around it); the Verilog module carries the block's name with ``-`` as
``_``.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable

__all__ = ["ENGINE_BLOCKS", "HBM_BLOCKS", "ICI_BLOCKS", "POD_BLOCKS", "engine_block", "hbm_block", "ici_block",
           "pod_block"]

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


#: block name -> (module:callable, what it is for --help). The callable takes the engine configuration
#: (``hw.generate`` functions also the module name and return Verilog text: the designs with an MXU,
#: whose PE and row modules they add).
ENGINE_BLOCKS: dict[str, tuple[str, str]] = {
    "engine": ("hw.generate:engine_verilog", "GEMM engine: registers, loaders, MXU, accumulators, write-back"),
    "gemm-top": ("hw.generate:gemm_top_verilog", "GEMM top: the engine on the HBM controller"),
    "board": ("hw.generate:board_top_verilog", "board top: engine, controller, block-RAM memory, UART bridge"),
    "engine-descriptor": ("hw.engine.descriptor:DescriptorUnit", "the engine's descriptor latch and checks (FSM)"),
    "engine-sequencer": ("hw.engine.sequencer:BlockSequencer", "the engine's m-block sequencer (10 loop ports)"),
    "engine-a-loader": ("hw.engine.a_loader:ALoader", "the engine's A loader with its two A banks"),
    "engine-weight-loader": ("hw.engine.weight_loader:WeightLoader", "the engine's weight loader and FIFO"),
    "engine-c0-loader": ("hw.engine.c0_loader:C0Loader", "the engine's initial-C loader"),
    "engine-accumulator": ("hw.engine.accumulator:Accumulator", "the engine's accumulator banks and collector"),
    "engine-feeder": ("hw.engine.feeder:Feeder", "the engine's activation feeder"),
    "engine-write-address": ("hw.engine.write_address:WriteAddress", "the engine's write-back address side"),
    "engine-write-data": ("hw.engine.write_data:WriteData", "the engine's write-back data side (bf16 RNE)"),
    "engine-perf": ("hw.engine.perf:PerfCounters", "the engine's performance counters"),
}


def engine_block(name: str, config, module_name: str | None = None) -> Callable[[], object]:
    """A factory of the engine block ``name`` (a key of :data:`ENGINE_BLOCKS`) for ``config`` (an
    :class:`~hw.engine.EngineConfig`; for ``board`` a :class:`~hw.board.BoardConfig`), whose Verilog
    module is ``module_name`` (default: the block name with ``-`` as ``_``).

    Raises:
        ValueError: unknown block name.
    """
    if name not in ENGINE_BLOCKS:
        raise ValueError(f"block must be one of {', '.join(ENGINE_BLOCKS)}; got {name!r}")
    module, attr = ENGINE_BLOCKS[name][0].split(":")
    make = getattr(importlib.import_module(module), attr)
    module_name = module_name or name.replace("-", "_")
    if module == "hw.generate":
        return lambda: make(config, module_name)
    if name == "engine-sequencer":
        return lambda: make(config, 10)
    if name == "engine-perf":
        return make
    return lambda: make(config)


#: block name -> (class under hw.ici, what it is for --help): one direction of an inter-chip link
ICI_BLOCKS: dict[str, tuple[str, str]] = {
    "ici-channel": ("ICIChannel", "one direction of an ICI link: transmitter, wire (latency registers), receiver"),
    "ici-transmitter": ("ICITransmitter", "the ICI link's transmitter (packets, CRC-32, replay buffer, credits)"),
    "ici-receiver": ("ICIReceiver", "the ICI link's receiver (CRC check, ACK/NAK, receive buffer)"),
}


def ici_block(name: str, config) -> Callable[[], object]:
    """A factory of the ICI block ``name`` (a key of :data:`ICI_BLOCKS`) for ``config`` (an
    :class:`~hw.ici.ICIConfig`).

    Raises:
        ValueError: unknown block name.
    """
    if name not in ICI_BLOCKS:
        raise ValueError(f"block must be one of {', '.join(ICI_BLOCKS)}; got {name!r}")
    component = getattr(importlib.import_module("hw.ici"), ICI_BLOCKS[name][0])
    return lambda: component(config)


#: block name -> (what it builds from a :class:`~hw.pod.config.PodConfig`, what it is for --help)
POD_BLOCKS: dict[str, str] = {
    "pod-collective": "a pod node's collective engine (ring schedule, row walkers, combiner lanes of fp32 "
                      "adders, both ring directions) on its AXI4 ports and ICI messages",
    "pod-node": "one pod node: GEMM engine, collective engine, their registers and the five-port HBM "
                "controller, its ICI ports out",
}


def pod_block(name: str, config) -> Callable[[], object]:
    """A factory of the pod block ``name`` (a key of :data:`POD_BLOCKS`) for ``config`` (a
    :class:`~hw.pod.config.PodConfig`; the ring size sets the collective engine's rank widths).

    Raises:
        ValueError: unknown block name.
    """
    if name == "pod-collective":
        from hw.pod.collective import CollectiveEngine

        return lambda: CollectiveEngine(config.collective)
    if name == "pod-node":
        from hw.pod.node import PodNode

        return lambda: PodNode(config, memory="hbm")
    raise ValueError(f"block must be one of {', '.join(POD_BLOCKS)}; got {name!r}")
