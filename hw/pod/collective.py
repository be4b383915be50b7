"""A node's collective engine: ring all-gather, reduce-scatter and all-reduce between its memory and
its two ICI directions."""

from __future__ import annotations

from amaranth.hdl import Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from hw.hbm.axi import axi4_signature
from hw.ici.config import message_signature

from .config import HBM_BEAT_BYTES, CollectiveConfig, CollectiveOp, descriptor_layout
from .ring_unit import RingUnit

__all__ = ["CollectiveEngine", "ERRORS"]

#: ``error`` codes: the descriptor is refused at ``start`` and nothing moves
ERRORS = {1: "base or stride not a multiple of 32 bytes", 2: "row_bytes 0, or not a multiple of 4 for a reduction",
          3: "stride smaller than row_bytes", 4: "nodes 0 or above max_nodes, or rank >= nodes"}


class CollectiveEngine(wiring.Component):
    """Ring collectives (:class:`~hw.pod.config.CollectiveOp`) on one node of a pod: a clockwise
    :class:`~hw.pod.ring_unit.RingUnit` (sends to rank + 1) and a counter-clockwise one (sends to
    rank - 1, used with ``bidirectional``), each with its own AXI4 master port. Every node of the
    ring is given the same descriptor but its own ``rank`` and started; no other synchronisation is
    needed (the links' credits hold a node that runs ahead).

    The reduction order and chunking are :mod:`verif.golden.collectives`' (chunk c's partial sum
    starts on node c + 1 and ends on node c; one rounding per addition), so every node's result is
    bit-identical to the golden model.

    Ports:
        desc: In(descriptor_layout): sampled at ``start``. start: In(1) strobe.
        busy: Out(1). done: Out(1): the last collective finished (until the next start).
        error: Out(3): 0, or the :data:`ERRORS` code of a refused descriptor (with ``done``).
        framing_error, write_error: Out(1): either direction's (sticky).
        cycles: Out(32): cycles from ``start`` to done of the last collective.
        axi_cw, axi_ccw: AXI4 masters. axi_cw_drain, axi_ccw_drain: AXI4 masters that only read (the
            drains' local slices, see :class:`~hw.pod.combiner.Combiner`).
        tx_cw, rx_cw, tx_ccw, rx_ccw: the links' message ports
            (``tx_cw`` to rank + 1, ``rx_cw`` from rank - 1, ``tx_ccw`` to rank - 1, ``rx_ccw`` from
            rank + 1).

    Args:
        config: :class:`CollectiveConfig`.

    Raises:
        TypeError: ``config`` is not a CollectiveConfig.
    """

    def __init__(self, config: CollectiveConfig | None = None):
        config = CollectiveConfig() if config is None else config
        if not isinstance(config, CollectiveConfig):
            self._MustUse__silence = True
            raise TypeError(f"config must be a CollectiveConfig; got {config!r}")
        self.config = config
        msg = message_signature(config.link)
        axi = axi4_signature(config.address_bits, HBM_BEAT_BYTES * 8, 1)
        super().__init__({"desc": In(descriptor_layout(config)), "start": In(1),
                          "busy": Out(1), "done": Out(1), "error": Out(3),
                          "framing_error": Out(1), "write_error": Out(1), "cycles": Out(32),
                          "axi_cw": In(axi), "axi_ccw": In(axi), "axi_cw_drain": In(axi), "axi_ccw_drain": In(axi),
                          "tx_cw": Out(msg), "rx_cw": In(msg), "tx_ccw": Out(msg), "rx_ccw": In(msg)})

    def elaborate(self, platform):
        m = Module()
        cfg = self.config
        d = Signal(descriptor_layout(cfg))
        i = self.desc
        code = Mux((i.base[:5] != 0) | (i.stride[:5] != 0), 1,
                   Mux((i.row_bytes == 0) | ((i.op != CollectiveOp.ALL_GATHER) & (i.row_bytes[:2] != 0)), 2,
                       Mux(i.stride < i.row_bytes, 3,
                           Mux((i.nodes == 0) | (i.nodes > cfg.max_nodes) | (i.rank >= i.nodes), 4, 0))))
        go = Signal()                      # the units start a cycle after the descriptor is taken
        m.d.sync += go.eq(0)
        with m.If(self.start & ~self.busy):
            m.d.sync += [d.eq(i), self.error.eq(code), self.cycles.eq(0), self.done.eq(code != 0),
                         go.eq(code == 0), self.busy.eq(code == 0)]
        units = []
        for name, ccw in (("cw", False), ("ccw", True)):
            u = RingUnit(cfg, ccw=ccw)
            m.submodules[name] = u
            units.append(u)
            m.d.comb += [u.desc.eq(d), u.start.eq(go)]
            wiring.connect(m, wiring.flipped(getattr(self, f"axi_{name}")), u.axi)
            wiring.connect(m, wiring.flipped(getattr(self, f"axi_{name}_drain")), u.axi_drain)
            wiring.connect(m, u.tx, wiring.flipped(getattr(self, f"tx_{name}")))
            wiring.connect(m, wiring.flipped(getattr(self, f"rx_{name}")), u.rx)
        with m.If(self.busy & ~go):
            m.d.sync += self.cycles.eq(self.cycles + 1)
            with m.If(units[0].done & units[1].done):
                m.d.sync += [self.busy.eq(0), self.done.eq(1)]
        m.d.comb += [self.framing_error.eq(units[0].framing_error | units[1].framing_error),
                     self.write_error.eq(units[0].write_error | units[1].write_error)]
        return m
