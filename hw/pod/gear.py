"""Link beats into whole HBM beats on the collective engine's memory side."""

from __future__ import annotations

from amaranth.hdl import Array, Cat, Const, Module, Mux, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from .config import HBM_BEAT_BYTES, CollectiveConfig, hbm_beat_layout

__all__ = ["Gear"]


class Gear(wiring.Component):
    """Link beats into HBM beats (the first in the low bytes), with the row's WSTRB.

    Ports:
        word: In(link.beat_bytes * 8), beat_end: In(1) (the word ends an HBM beat), tail: In(1) (that
            HBM beat ends a row), valid: In(1), ready: Out(1): one link beat a cycle.
        row_bytes: In(16), held: the row length; a row's last HBM beat has WSTRB on its
            ``((row_bytes - 1) % 32) + 1`` low bytes only.
        out: Out(stream of :func:`~hw.pod.config.hbm_beat_layout`). empty: Out(1): no word held.

    Args:
        cfg: :class:`~hw.pod.config.CollectiveConfig` (``words`` link beats per HBM beat).
    """

    def __init__(self, cfg: CollectiveConfig):
        self.cfg = cfg
        super().__init__({"word": In(cfg.link.beat_bytes * 8), "beat_end": In(1), "tail": In(1), "row_bytes": In(16),
                          "valid": In(1), "ready": Out(1), "out": Out(stream.Signature(hbm_beat_layout())),
                          "empty": Out(1)})

    def elaborate(self, platform):
        m = Module()
        W, L = self.cfg.words, self.cfg.link.beat_bytes * 8
        asm = Signal(max(1, (W - 1) * L))  # the beat's earlier words
        idx = Signal(range(W))
        full = Signal()
        m.d.comb += [self.ready.eq(~self.beat_end | ~full | self.out.ready), self.out.valid.eq(full),
                     self.empty.eq(~full & (idx == 0))]
        with m.If(self.out.valid & self.out.ready):
            m.d.sync += full.eq(0)
        tail = Signal(range(HBM_BEAT_BYTES + 1))   # bytes of the row in its last beat, 1 .. 32
        m.d.comb += tail.eq(((self.row_bytes - 1) & (HBM_BEAT_BYTES - 1)) + 1)
        strb = Mux(self.tail, (Const(1, HBM_BEAT_BYTES + 1) << tail) - 1, (1 << HBM_BEAT_BYTES) - 1)
        with m.If(self.valid & self.ready):
            if W > 1:
                m.d.sync += Array(asm[k * L:(k + 1) * L] for k in range(W - 1))[idx].eq(self.word)
            with m.If(self.beat_end):
                whole = Cat(asm, self.word) if W > 1 else self.word
                m.d.sync += [full.eq(1), idx.eq(0), self.out.payload.data.eq(whole), self.out.payload.strb.eq(strb)]
            with m.Else():
                m.d.sync += idx.eq(idx + 1)
        return m
