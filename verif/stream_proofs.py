"""The stream-rule proofs of the design: which components, in which configuration, under which
contract with their environment (:class:`verif.hdl.stream_rules.StreamRules`; run by
:func:`sim.formal.prove`, listed in the manual's testing page).

Each entry: the component, and the conditions its neighbours in the engine or controller keep, each
with its reason. Without them the environment is free: every input, reset included, takes any
value in any cycle, and the stream inputs keep the stream rules.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from verif.hdl.stream_rules import read_port_holds

__all__ = ["PROOFS", "StreamProof"]


@dataclass(frozen=True)
class StreamProof:
    """``make()`` builds the component; ``assume(m, dut)`` its environment's contract (or None);
    ``why``: the reason for each assumption; ``depth``: the induction depth in cycles."""

    make: Callable[[], object]
    assume: Callable | None = None
    why: str = ""
    depth: int = 12


def _engine(module: str, cls: str):
    def make():
        import importlib

        from hw.engine import EngineConfig

        cfg = EngineConfig.from_options(rows=4, cols=4, fmt="int8", pseudo_channels=1)
        return getattr(importlib.import_module(f"hw.engine.{module}"), cls)(cfg)

    return make


def _hbm(module: str, cls: str):
    def make():
        import importlib

        from hw.hbm.config import HBMConfig

        return getattr(importlib.import_module(f"hw.hbm.{module}"), cls)(HBMConfig(pseudo_channels=1, queue_depth=4))

    return make


def _skid_buffer():
    from hw.skid_buffer import SkidBuffer

    return SkidBuffer(4)


def _mxu():
    from hw.mxu import MXU, MXUConfig

    return MXU(MXUConfig(2, 2))


_GO_WHEN_IDLE = ("a job's go strobe comes only when this side is idle: the descriptor unit ends a job "
                 "(all_done) only with the write sides idle, and the next go follows a new start")
_BRAM = "the bank read data changes only in the cycle after a read (a block-RAM read port with enable)"

#: proof name -> what is proven under which contract
PROOFS: dict[str, StreamProof] = {
    "mxu-2x2-bf16": StreamProof(_mxu),
    "engine-a-loader": StreamProof(_engine("a_loader", "ALoader")),
    "engine-weight-loader": StreamProof(_engine("weight_loader", "WeightLoader")),
    "engine-c0-loader": StreamProof(_engine("c0_loader", "C0Loader")),
    "engine-feeder": StreamProof(
        _engine("feeder", "Feeder"),
        lambda m, d: [read_port_holds(m, d.acc_rd_en, d.acc_rd_data, "acc"),
                      read_port_holds(m, d.a_rd_en, d.a_rd_data, "a")], _BRAM),
    "engine-write-address": StreamProof(_engine("write_address", "WriteAddress")),
    "engine-write-data": StreamProof(_engine("write_data", "WriteData"), lambda m, d: [~d.go | d.idle], _GO_WHEN_IDLE),
    "hbm-channel": StreamProof(_hbm("controller", "PseudoChannelController")),
    "hbm-read-path": StreamProof(_hbm("read_path", "ReadResponsePath")),
    "skid-buffer": StreamProof(_skid_buffer),
}
