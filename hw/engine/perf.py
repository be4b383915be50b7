"""The engine's performance counters: where every cycle of a run went."""

from __future__ import annotations

from amaranth.hdl import Module, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from .csr import PERF_COUNTERS
from .interface import Why

__all__ = ["PerfCounters"]

#: counter of each reason for an empty cycle
_WHY = {Why.A: "PERF_WAIT_A", Why.ACC: "PERF_WAIT_ACC", Why.DEP: "PERF_WAIT_DEP", Why.DRAIN: "PERF_DRAIN"}


class PerfCounters(wiring.Component):
    """Each cycle of a run (``counting``) is one of: a beat taken (PERF_FEED), the beat offered but its
    tile's weights not committed (PERF_WAIT_W), or no beat offered, counted by the feeder's registered
    reason (:class:`~hw.engine.interface.Why`): A not stored, no accumulator bank, K-chain
    dependency, or the feeder finished (drain); set-up cycles are in no counter.

    Ports:
        started: In(1), strobe: clear every counter (a START was taken).
        counting: In(1): BUSY and not DONE.
        act_valid, act_ready: In(1): the MXU's activation handshake.
        why: In(Why): the feeder's reason.
        <name>: Out(32) for each name in :data:`~hw.engine.csr.PERF_COUNTERS` (lower case).
    """

    def __init__(self):
        members = {"started": In(1), "counting": In(1), "act_valid": In(1), "act_ready": In(1), "why": In(Why)}
        members.update({name.lower(): Out(32) for name in PERF_COUNTERS})
        super().__init__(members)

    def elaborate(self, platform):
        m = Module()
        count = {name: Signal(32, name=name.lower()) for name in PERF_COUNTERS}
        for name in PERF_COUNTERS:
            m.d.comb += getattr(self, name.lower()).eq(count[name])

        def inc(name):
            return count[name].eq(count[name] + 1)

        with m.If(self.started):
            m.d.sync += [v.eq(0) for v in count.values()]
        with m.Elif(self.counting):
            with m.If(self.act_valid & self.act_ready):
                m.d.sync += inc("PERF_FEED")
            with m.Elif(self.act_valid):
                m.d.sync += inc("PERF_WAIT_W")
            with m.Else():
                for why, name in _WHY.items():
                    with m.If(self.why == why):
                        m.d.sync += inc(name)
        return m
