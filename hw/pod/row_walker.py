"""Turn a slice command into AXI4 bursts: one transfer per row, split at 4 KiB and 256 beats."""

from __future__ import annotations

from amaranth.hdl import Module, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from hw.engine.dma import BurstSplitter

from .config import HBM_BEAT_BYTES, CollectiveConfig, command_layout

__all__ = ["RowWalker"]


class RowWalker(wiring.Component):
    """For each command, ``rows`` transfers of ``hbm_beats`` beats, the first at ``addr``, each next
    one ``stride`` bytes on, as AXI4 INCR bursts (:class:`~hw.engine.dma.BurstSplitter`): the
    reader's AR channel or the writer's AW channel.

    Ports:
        cmd: In(stream of command_layout); stride: In(address_bits), held.
        ax: Out(stream ``{addr, len}``): bursts (AxLEN = beats - 1), in order.
        busy: Out(1): a command is taken and not all its bursts have left.

    Args:
        config: :class:`CollectiveConfig`.
    """

    def __init__(self, config: CollectiveConfig):
        self.config = config
        aw = config.address_bits
        super().__init__({"cmd": In(stream.Signature(command_layout(config))), "stride": In(aw),
                          "ax": Out(stream.Signature(data.StructLayout({"addr": aw, "len": 8}))),
                          "busy": Out(1)})

    def elaborate(self, platform):
        m = Module()
        cfg = self.config
        m.submodules.split = sp = BurstSplitter(cfg.address_bits, HBM_BEAT_BYTES, beat_bits=12)
        addr = Signal(cfg.address_bits)
        rows = Signal(16)                   # rows still to request; 0: take the next command
        beats = Signal(12)
        m.d.comb += [self.cmd.ready.eq(rows == 0),
                     sp.cmd.valid.eq(rows != 0), sp.cmd.payload.addr.eq(addr), sp.cmd.payload.beats.eq(beats)]
        with m.If(self.cmd.valid & self.cmd.ready):
            m.d.sync += [addr.eq(self.cmd.payload.addr), rows.eq(self.cmd.payload.rows),
                         beats.eq(self.cmd.payload.hbm_beats)]
        with m.If(sp.cmd.valid & sp.cmd.ready):
            m.d.sync += [addr.eq(addr + self.stride), rows.eq(rows - 1)]
        wiring.connect(m, sp.ax, wiring.flipped(self.ax))
        m.d.comb += self.busy.eq((rows != 0) | sp.busy)
        return m
