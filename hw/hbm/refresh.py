"""Refresh scheduling of one HBM2 pseudo-channel (all-bank REF, JESD235 tREFI / postponement)."""

from __future__ import annotations

from amaranth.hdl import Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from .config import HBMConfig
from .interface import check_config

__all__ = ["RefreshTimer"]


class RefreshTimer(wiring.Component):
    """Counts tREFI intervals and says when the pseudo-channel must drain for a REF.

    One REF falls due every tREFI cycles (``owed`` counts the due REFs not yet issued). The
    controller enters ``draining`` when ``max(1, max_refresh_postpone)`` REFs are owed, or when one
    is owed and the request queue is empty; while draining it issues no ACT/RD/WR, precharges every
    bank and issues the REF, which ends the drain. So at most ``max_refresh_postpone`` REFs are owed
    at any time (JESD235 allows up to 8 postponed REFs).

    Ports:
        ref_issued: ``In(1)`` -- a REF is decided this cycle.
        queue_empty: ``In(1)`` -- the request queue holds no request.
        draining: ``Out(1)`` -- registered: stop ACT/RD/WR, PREA then REF.
        owed: ``Out(4)`` -- registered count of due REFs not yet issued.

    Args:
        config: :class:`~hw.hbm.config.HBMConfig` (``timing.tREFI`` in cycles, ``max_refresh_postpone``).

    Raises:
        TypeError: ``config`` is not an :class:`HBMConfig`.
    """

    def __init__(self, config: HBMConfig):
        self.config = check_config(config)
        super().__init__({"ref_issued": In(1), "queue_empty": In(1), "draining": Out(1), "owed": Out(4)})

    def elaborate(self, platform):
        t = self.config.timing
        m = Module()
        refi = Signal(range(t.tREFI), name="refi_count")
        force_at = max(1, self.config.max_refresh_postpone)
        tick = refi == t.tREFI - 1
        m.d.sync += [
            refi.eq(Mux(tick, 0, refi + 1)),
            self.owed.eq(self.owed + tick - self.ref_issued),
        ]
        with m.If(~self.draining):
            with m.If((self.owed >= force_at) | ((self.owed != 0) & self.queue_empty)):
                m.d.sync += self.draining.eq(1)
        with m.Elif(self.ref_issued):
            m.d.sync += self.draining.eq(0)
        return m
