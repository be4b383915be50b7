"""The ring schedule of one direction of a node's collective engine: which slice of which chunk
to read, add, send and write in each phase."""

from __future__ import annotations

from amaranth.hdl import Cat, Module, Mux, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from .config import HBM_BEAT_BYTES, CollectiveConfig, CollectiveOp, command_layout, descriptor_layout
from .divider import SerialDivider

__all__ = ["RingSchedule"]


class RingSchedule(wiring.Component):
    """Emit the commands (:func:`~hw.pod.config.command_layout`) of one collective for one direction.

    Chunk c is rows ``c * q + min(c, rem)`` on, ``q + (c < rem)`` of them (``q, rem = divmod(rows,
    nodes)``: ``numpy.array_split``); its clockwise part is the whole chunk, or with ``bidirectional``
    its first ``ceil(rows / 2)`` rows, the counter-clockwise part the rest. Phases, for rank r and
    N nodes (clockwise; counter-clockwise the chunk indices run the other way, ``r + 1 + p`` and
    ``r + p``):

    * reduce-scatter phase p = 0 .. N-1: chunk ``r - 1 - p``; read the local part, add the
      neighbour's (p > 0), send on (p < N - 1), write it (p = N - 1, the finished chunk r);
    * all-gather phase p = 0 .. N-1: chunk ``r - p``; read it (p = 0) or take it (p > 0), send on
      (p < N - 1), write it (p > 0);
    * all-reduce: the reduce-scatter, its last phase also sending, then all-gather phases 1 .. N-1.

    So chunk c's partial sum starts on node c + 1 and ends on node c (the golden model's order).
    Every phase is cut into slices of at most ``slice_hbm_beats`` HBM beats (``rows`` whole rows of
    ``hbm_beats`` beats, or part of one long row) so no message outgrows what the receiver holds;
    slices are the outer loop, so each slice runs the ring schedule as if it were the whole array.
    Empty slices (a chunk shorter than another) are skipped on every node alike. One node: nothing.

    Ports:
        desc: In(descriptor_layout), held while running; start: In(1) strobe.
        comb, read, write: Out(stream of command_layout): every command to the combiner; those with
            ``local`` to the reader; those with ``hbm`` to the writer.
        done: Out(1): every command has been taken (until the next ``start``).

    Args:
        config: :class:`CollectiveConfig`.
        ccw: the counter-clockwise direction (idle unless ``bidirectional``).
    """

    def __init__(self, config: CollectiveConfig, ccw: bool = False):
        self.config, self.ccw = config, ccw
        cmd = stream.Signature(command_layout(config))
        super().__init__({"desc": In(descriptor_layout(config)), "start": In(1),
                          "comb": Out(cmd), "read": Out(cmd), "write": Out(cmd), "done": Out(1)})

    def elaborate(self, platform):
        m = Module()
        cfg, d = self.config, self.desc
        m.submodules.div = div = SerialDivider(16)
        n_nodes, rank = d.nodes, d.rank
        row_beats = Signal(12)
        m.d.comb += row_beats.eq((d.row_bytes + HBM_BEAT_BYTES - 1) >> 5)
        q, rem, nb, nr = Signal(16), Signal(16), Signal(12), Signal(16)
        p = Signal(range(2 * cfg.max_nodes))
        r_off, o_off = Signal(17), Signal(13)
        ar = d.op == CollectiveOp.ALL_REDUCE
        phases = Mux(ar, 2 * n_nodes - 1, n_nodes)
        rs = (d.op == CollectiveOp.REDUCE_SCATTER) | (ar & (p < n_nodes))
        pa = Mux(ar, p - n_nodes + 1, p)[:len(p)]          # the all-gather phase
        step = Mux(rs, p + 1, pa)                          # chunk = rank -+ step (mod N)
        raw = Signal(range(-2 * cfg.max_nodes, 2 * cfg.max_nodes))
        m.d.comb += raw.eq(rank + step if self.ccw else rank - step)
        chunk = Signal(range(cfg.max_nodes))
        m.d.comb += chunk.eq(Mux(raw < 0, raw + n_nodes, Mux(raw >= n_nodes, raw - n_nodes, raw)))
        flags = Signal(4)                                  # local, remote, tx, hbm
        last_p = p == n_nodes - 1
        m.d.comb += flags.eq(Mux(rs, Cat(1, p != 0, ~last_p | ar, last_p),
                                 Cat(pa == 0, pa != 0, pa != n_nodes - 1, pa != 0)))
        # the chunk's rows, registered (one multiplier: chunk * q)
        c_start, c_cnt, c_flags = Signal(17), Signal(17), Signal(4)
        half = (c_cnt + 1) >> 1
        first = Signal(17)
        part = Signal(17)
        if self.ccw:
            m.d.comb += [first.eq(c_start + half), part.eq(c_cnt - half)]
        else:
            m.d.comb += [first.eq(c_start), part.eq(Mux(d.bidirectional, half, c_cnt))]
        rows_left = part - r_off
        t_rows = Mux(rows_left > nr, nr, rows_left)[:16]
        t_beats = Mux(row_beats - o_off > nb, nb, row_beats - o_off)[:12]
        cmd = Signal(command_layout(cfg))
        sent = Signal(3)
        outs = (self.comb, self.read, self.write)
        want = Cat(1, cmd.local, cmd.hbm)
        for o in outs:
            m.d.comb += o.payload.eq(cmd)
        with m.FSM(name="sched"):
            with m.State("IDLE"):
                with m.If(self.start):
                    m.d.comb += [div.start.eq(1), div.dividend.eq(d.rows), div.divisor.eq(n_nodes)]
                    m.next = "SPLIT"
            with m.State("SPLIT"):                        # q, rem = divmod(rows, nodes)
                with m.If(div.done):
                    width = Mux(row_beats > cfg.slice_hbm_beats, cfg.slice_hbm_beats, row_beats)
                    m.d.sync += [q.eq(div.quotient), rem.eq(div.remainder), nb.eq(width)]
                    m.d.comb += [div.start.eq(1), div.dividend.eq(cfg.slice_hbm_beats), div.divisor.eq(width)]
                    m.next = "SLICE"
            with m.State("SLICE"):                        # rows per slice
                with m.If(div.done):
                    m.d.sync += [nr.eq(div.quotient), p.eq(0), r_off.eq(0), o_off.eq(0)]
                    skip = (n_nodes <= 1) | (d.rows == 0) | (~d.bidirectional if self.ccw else 0)
                    m.next = "CHUNK"
                    with m.If(skip):
                        m.next = "DONE"
            with m.State("CHUNK"):
                m.d.sync += [c_start.eq(chunk * q + Mux(chunk < rem, chunk, rem)),
                             c_cnt.eq(q + (chunk < rem)), c_flags.eq(flags)]
                m.next = "TILE"
            with m.State("TILE"):
                r0 = first + r_off
                m.d.sync += [cmd.addr.eq(d.base + r0 * d.stride + (o_off << 5)), cmd.rows.eq(t_rows),
                             cmd.hbm_beats.eq(t_beats), cmd.row_end.eq(o_off + t_beats == row_beats),
                             cmd.beats.eq(t_rows * t_beats * cfg.words),
                             Cat(cmd.local, cmd.remote, cmd.tx, cmd.hbm).eq(c_flags), sent.eq(0)]
                m.next = "EMIT"
                with m.If(part <= r_off):
                    m.next = "NEXT"
            with m.State("EMIT"):
                for k, o in enumerate(outs):
                    m.d.comb += o.valid.eq(want[k] & ~sent[k])
                taken = Cat(*(o.valid & o.ready for o in outs))
                m.d.sync += sent.eq(sent | taken)
                with m.If(((sent | taken) | ~want) == 0b111):
                    m.next = "NEXT"
            with m.State("NEXT"):
                with m.If(p + 1 != phases):
                    m.d.sync += p.eq(p + 1)
                    m.next = "CHUNK"
                with m.Else():
                    m.d.sync += p.eq(0)
                    with m.If(o_off + nb < row_beats):
                        m.d.sync += o_off.eq(o_off + nb)
                        m.next = "CHUNK"
                    with m.Elif(r_off + nr <= q):         # no part has more than q + 1 rows
                        m.d.sync += [o_off.eq(0), r_off.eq(r_off + nr)]
                        m.next = "CHUNK"
                    with m.Else():
                        m.next = "DONE"
            with m.State("DONE"):
                m.d.comb += self.done.eq(1)
                with m.If(self.start):
                    m.d.comb += [div.start.eq(1), div.dividend.eq(d.rows), div.divisor.eq(n_nodes)]
                    m.next = "SPLIT"
        return m
