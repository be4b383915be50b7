"""Formal harness: the MXU's weight double buffer never mixes two tiles.

Two properties of the weight-stationary array (``hw/mxu.py``, ``hw/pe.py``): a swap never mixes two
tiles' weights in one column (every PE of a column multiplies one activation beat by weights of the
same tile), and the commit of tile t + 1 never overwrites a weight that tile t still uses. Both say
that every activation beat of tile t meets exactly tile t's weights, in every PE.

:class:`WeightTiles` checks that on an int8 array with tagged data (the array's control never looks
at its data, so tags stand for any data: data independence). The free environment offers weight and
activation beats when it likes, keeping the stream rules; the data is fixed by the harness:

* every lane of every weight beat of the k-th weight tile (R beats each) is ``(k mod 4) + 1``;
* every activation is 1, the activation beat that carries ``swap`` starts the next activation tile
  (the first beat the array takes must carry it), and beat of activation tile k has partial-sum
  inputs ``-R * ((k mod 4) + 1)``.

A column's output is its partial-sum input plus the sum over the R rows of activation times weight.
It is 0 for every output beat exactly when each beat met its own tile's weights in all R PEs: a
weight of tile k' != k in one PE changes the sum by ``k' - k`` (mod 4 tags: -3..3, never 0).
Asserted: every output beat is all zeros.
"""

from __future__ import annotations

from amaranth.hdl import Assert, Assume, Cover, Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In

__all__ = ["WeightTiles"]


class WeightTiles(wiring.Component):
    """The tagged-tile harness around an int8 :class:`hw.mxu.MXU` (see the module docstring).

    Ports: ``act_valid``, ``act_swap``, ``wgt_valid``, ``out_ready`` (1 bit each, free inputs: when the
    environment offers beats, where tiles start, when it takes results).

    Raises:
        ValueError: the MXU's format is not int8 (the tags are exact only in integer arithmetic).
    """

    def __init__(self, mxu):
        if mxu.config.fmt != "int8":
            raise ValueError(f"the weight-tile harness needs an int8 MXU; got fmt {mxu.config.fmt!r}")
        self._mxu = mxu
        super().__init__({"act_valid": In(1), "act_swap": In(1), "wgt_valid": In(1), "out_ready": In(1)})

    def elaborate(self, platform):
        m = Module()
        m.submodules.mxu = mxu = self._mxu
        R, C = mxu.config.rows, mxu.config.cols
        wgt_beats = Signal(range(4 * R), name="wgt_beats")  # weight beats taken, mod 4 tiles
        act_tile = Signal(2, name="act_tile")  # tag of the activation tile in progress
        started = Signal(name="started")  # a swap beat was taken
        w_tag = Signal(2, name="w_tag")
        m.d.comb += w_tag.eq(wgt_beats // R)
        # the tag of the beat offered now: a swap beat opens the next tile
        offered_tag = Signal(2, name="offered_tag")
        m.d.comb += offered_tag.eq(act_tile + (self.act_swap & started))
        m.d.comb += [
            mxu.wgt.valid.eq(self.wgt_valid),
            mxu.act.valid.eq(self.act_valid),
            mxu.act.payload.swap.eq(self.act_swap),
            mxu.out.ready.eq(self.out_ready),
        ]
        for c in range(C):
            m.d.comb += mxu.wgt.payload[c].eq(w_tag + 1)
            m.d.comb += mxu.act.payload.c[c].eq(-(R * (offered_tag + 1)))
        for r in range(R):
            m.d.comb += mxu.act.payload.a[r].eq(1)
        with m.If(mxu.wgt.valid & mxu.wgt.ready):
            m.d.sync += wgt_beats.eq(_next_mod(wgt_beats, 4 * R))
        with m.If(mxu.act.valid & mxu.act.ready):
            m.d.sync += act_tile.eq(offered_tag)
            with m.If(self.act_swap):
                m.d.sync += started.eq(1)
        # the environment keeps the stream rules on the two input streams, and starts with a swap
        w_stalled, a_stalled = Signal(name="wgt_stalled"), Signal(name="act_stalled")
        a_swap_held = Signal(name="act_swap_held")
        m.d.sync += [
            w_stalled.eq(mxu.wgt.valid & ~mxu.wgt.ready),
            a_stalled.eq(mxu.act.valid & ~mxu.act.ready),
            a_swap_held.eq(self.act_swap),
        ]
        with m.If(w_stalled):
            m.d.comb += Assume(self.wgt_valid)
        with m.If(a_stalled):
            m.d.comb += Assume(self.act_valid & (self.act_swap == a_swap_held))
        with m.If(~started):
            m.d.comb += Assume(~self.act_valid | self.act_swap)
        with m.If(mxu.out.valid):
            for c in range(C):
                m.d.comb += Assert(mxu.out.payload[c] == 0, f"column {c}: a beat met another tile's weights")
        # not vacuous: outputs of a second tile after a swap, while the third tile's weights load
        out_tiles = Signal(3, name="out_beats_seen")
        with m.If(mxu.out.valid & mxu.out.ready & (out_tiles != 7)):
            m.d.sync += out_tiles.eq(out_tiles + 1)
        m.d.comb += Cover((out_tiles == 7) & (wgt_beats >= 2 * R))
        return m


def _next_mod(value, modulus: int):
    """``(value + 1) mod modulus`` for a counter of ``range(modulus)``."""
    return Mux(value == modulus - 1, 0, value + 1)
