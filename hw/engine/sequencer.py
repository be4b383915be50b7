"""The m-block sequencer: the engine's blocking rule, computed once per GEMM, ahead of the loops."""

from __future__ import annotations

from amaranth.hdl import Array, Cat, Const, Module, Mux, Signal
from amaranth.lib.wiring import In

from .config import EngineConfig
from .interface import EnginePart, Geometry, check_engine_config, descriptor_layout, mux_min, seq_port_signature

__all__ = ["BlockSequencer"]


class BlockSequencer(EnginePart):
    """Cut M into m-blocks, two cycles per block, into a table of ``SEQ_DEPTH`` (8) blocks that the
    engine's loops read by their own block index.

    The rule (:func:`verif.cycles.engine_blocking` is the same rule in Python): at most ``cap`` rows
    per block, no block shorter than MINM = 2R + C - 1 rows when that can be avoided (shorter tiles
    cannot run back to back). ``cap`` is the first block's rows (``m_first``) for block 0; then
    ``mbmax``, or with ``ramp`` (little compute per A beat) the first block's cap again and 1.5 times
    per block (+ max(1, cap / 2) rows), so each block's A load fits under the previous block's compute.
    The last block is cut to TAIL rows when both parts stay >= MINM (only the last block's write-back
    runs after the array is done). Look-ahead (cap == mbmax < 2 MINM): when the rows after a full
    block would be too many for one block and too few for two of MINM, this block takes
    rem - 2 MINM rows and two MINM-row blocks follow.

    Each entry holds the block's rows ``mb``, its group size ``gb`` and ``last``. ``gb`` is the
    descriptor's ``g`` (n-blocks per group) for a ``small`` block (mb < DEP_BEATS / 8 rows), else the
    smaller of ``g`` and ``need``, the fewest n-blocks whose rows cover the K-chain distance
    DEP_BEATS (at most 8): computed here once per block, so the loops' cursors only look it up. Block j is
    written only when every counted loop has left block j - SEQ_DEPTH; a loop reads ``ok`` while its
    block is in the table. Each port looks up the entries at its ``idx`` and ``idx + 1``.

    Ports:
        desc: In(:func:`~hw.engine.interface.descriptor_layout`): uses ``m``, ``mbmax``, ``ramp``, ``g``.
        prep: In(1), one-cycle strobe: start a new GEMM's table (the cycle before the group size is
            computed, so block 0's rows are known when it is; block 0 is in the table when the loops
            start).
        g_final: In(1): the descriptor's ``g`` is final (no entry is written before).
        port0 .. port<ports-1>: In(:func:`~hw.engine.interface.seq_port_signature`): one per loop.

    Args:
        config: :class:`~hw.engine.config.EngineConfig`.
        ports: number of loops reading the table (>= 1).

    Raises:
        TypeError: ``config`` not an EngineConfig; ValueError: ``ports`` < 1.
    """

    def __init__(self, config: EngineConfig, ports: int):
        check_engine_config(config)
        if not isinstance(ports, int) or ports < 1:
            raise ValueError(f"ports must be an integer >= 1; got {ports!r}")
        self.ports = ports
        super().__init__(config)

    def members(self, g: Geometry) -> dict:
        members = {"desc": In(descriptor_layout(g)), "prep": In(1), "g_final": In(1)}
        members.update({f"port{j}": In(seq_port_signature(g)) for j in range(self.ports)})
        return members

    def elaborate(self, platform):
        m = Module()
        g, d = self.geom, self.desc
        MINM, TAIL, DEP, SQB, mbits = g.MINM, g.TAIL, g.DEP_BEATS, g.SQB, range(g.m_block + 1)
        t_mb = Array(Signal(mbits, name=f"seq{j}_mb") for j in range(g.SEQ_DEPTH))
        t_gb = Array(Signal(range(g.ACCD + 1), name=f"seq{j}_gb") for j in range(g.SEQ_DEPTH))
        t_last = Array(Signal(name=f"seq{j}_last") for j in range(g.SEQ_DEPTH))
        cnt = Signal(SQB)                  # blocks written
        rem = Signal(g.D)                  # rows after the blocks written
        cap = Signal(mbits)
        first = Signal()                   # the next block is block 0
        mb = Signal(mbits)
        ph = Signal()                      # 0: compute the size, 1: write it
        done = Signal()
        free = Signal()                    # no counted loop is SEQ_DEPTH blocks behind
        mbmax = d.mbmax

        look = (cap == mbmax) & (rem > (cap << 1)) & (rem < cap + 2 * MINM) & (rem >= 3 * MINM)
        mb_p = Mux(rem <= cap, rem,
                   Mux(rem >= cap + MINM, Mux(look, rem - 2 * MINM, cap),
                       Mux(rem <= mbmax, rem,
                           Mux(rem >= 2 * MINM, rem - MINM, mux_min((rem + 1) >> 1, cap)))))
        mb_v = Mux((mb_p == rem) & (rem >= TAIL + MINM), rem - TAIL, mb_p)
        # need = 1 + #{j in 1..7: mb * j < DEP}, and mb * j < DEP is mb < ceil(DEP / j) (constants, no
        # multiplier); min(g, need) counts only the j < g, so the group size is one sum, no compare of
        # g with need after it
        gb_v = Const(1, range(g.ACCD + 1))
        for j in range(1, 8):
            gb_v = gb_v + ((mb < -(-DEP // j)) & (d.g > j))
        gb_v = Mux(mb < -(-DEP // 8), d.g, gb_v)
        grown = cap + Mux((cap >> 1) == 0, 1, cap >> 1)
        with m.If(self.prep):
            m.d.sync += [cnt.eq(0), rem.eq(d.m), cap.eq(mux_min(g.MFIRST, mbmax)), first.eq(1), ph.eq(0),
                         done.eq(0)]
        with m.Elif(~done & ~ph):
            m.d.sync += [mb.eq(mb_v), ph.eq(1)]
        with m.Elif(~done & free & self.g_final):
            j = cnt[:SQB - 1]
            m.d.sync += [
                t_mb[j].eq(mb), t_gb[j].eq(gb_v), t_last[j].eq(mb == rem),
                cnt.eq(cnt + 1), rem.eq(rem - mb), first.eq(0), ph.eq(0), done.eq(mb == rem),
                # with ramp the second block keeps the first block's cap
                cap.eq(Mux(d.ramp, Mux(~first, mux_min(grown, mbmax), cap), mbmax)),
            ]
        ports = [getattr(self, f"port{j}") for j in range(self.ports)]
        for p in ports:
            j = p.idx[:SQB - 1]
            nxt = Signal(SQB)
            m.d.comb += [p.mb.eq(t_mb[j]), p.gb.eq(t_gb[j]), p.last.eq(t_last[j]), p.ok.eq(p.idx != cnt),
                         nxt.eq(p.idx + 1)]
            jn = nxt[:SQB - 1]
            m.d.comb += [p.n_mb.eq(t_mb[jn]), p.n_gb.eq(t_gb[jn]), p.n_last.eq(t_last[jn]),
                         p.n_ok.eq((p.idx != cnt) & (nxt != cnt))]
        # block cnt may be written when every counted loop is past block cnt - SEQ_DEPTH
        m.d.comb += free.eq(Cat(*(~p.counted | ~(cnt - p.idx)[SQB - 1] for p in ports)).all())
        return m
