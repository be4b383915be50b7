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
    Every phase is cut into slices of at most ``slice_hbm_beats`` HBM beats so no message outgrows
    what the receiver holds: a grid of column slices (a row wider than a slice is cut into
    ``nsc = ceil(row_beats / slice_hbm_beats)`` pieces, widths as even as ``numpy.array_split``
    makes them) and row slices (the direction's largest part cut into ``nsr`` pieces of at most
    ``slice_hbm_beats // widest`` rows, heights as even). Even slices matter: an all-gather's last
    phase of one slice drains beside the next slice's first phase, and the link idles by their
    difference. Slices are the outer loop (rows, then columns), so each slice runs the whole ring
    schedule; a slice empty for a chunk (a part shorter than the largest) is skipped on every node
    alike. One node, or no rows: nothing. Set-up takes six 16-cycle serial divisions.

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
        n_nodes, rank, sbh = d.nodes, d.rank, cfg.slice_hbm_beats
        row_beats = Signal(12)
        m.d.comb += row_beats.eq((d.row_bytes + HBM_BEAT_BYTES - 1) >> 5)
        # set-up, one serial division each: the chunks, then the slice grid
        q, rem = Signal(16), Signal(16)             # rows = q * nodes + rem
        nsc, cb, ce = Signal(12), Signal(12), Signal(12)   # column slices: widths cb + (j < ce)
        nr = Signal(16)                             # rows that fit a slice of the widest columns
        nsr, rb, re = Signal(16), Signal(16), Signal(16)   # row slices: heights rb + (j < re)
        n_max = Signal(16)                          # rows of this direction's largest part
        p = Signal(range(2 * cfg.max_nodes))
        jr, jc = Signal(16), Signal(12)
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
        first, part = Signal(17), Signal(17)
        half = (c_cnt + 1) >> 1
        if self.ccw:
            m.d.comb += [first.eq(c_start + half), part.eq(c_cnt - half)]
        else:
            m.d.comb += [first.eq(c_start), part.eq(Mux(d.bidirectional, half, c_cnt))]
        height = rb + (jr < re)
        width = cb + (jc < ce)
        rows_left = part - r_off
        t_rows = Mux(rows_left > height, height, rows_left)[:16]
        cmd = Signal(command_layout(cfg))
        sent = Signal(3)
        outs = (self.comb, self.read, self.write)
        want = Cat(1, cmd.local, cmd.hbm)
        for o in outs:
            m.d.comb += o.payload.eq(cmd)

        def divide(num, den):
            m.d.comb += [div.start.eq(1), div.dividend.eq(num), div.divisor.eq(den)]

        with m.FSM(name="sched"):
            with m.State("IDLE"):
                with m.If(self.start):
                    divide(d.rows, n_nodes)
                    m.next = "CHUNKS"
            with m.State("CHUNKS"):
                with m.If(div.done):
                    m.d.sync += [q.eq(div.quotient), rem.eq(div.remainder)]
                    divide(row_beats + sbh - 1, sbh)
                    m.next = "COL_SLICES"
            with m.State("COL_SLICES"):
                with m.If(div.done):
                    m.d.sync += nsc.eq(div.quotient)
                    divide(row_beats, div.quotient)
                    m.next = "COL_WIDTH"
            with m.State("COL_WIDTH"):
                with m.If(div.done):
                    m.d.sync += [cb.eq(div.quotient), ce.eq(div.remainder)]
                    divide(sbh, div.quotient + (div.remainder != 0))
                    big = q + (rem != 0)
                    m.d.sync += n_max.eq(big if not self.ccw else big >> 1)
                    if not self.ccw:
                        with m.If(d.bidirectional):
                            m.d.sync += n_max.eq((big + 1) >> 1)
                    m.next = "ROW_FIT"
            with m.State("ROW_FIT"):
                with m.If(div.done):
                    m.d.sync += nr.eq(div.quotient)
                    divide(n_max + div.quotient - 1, div.quotient)
                    m.next = "ROW_SLICES"
            with m.State("ROW_SLICES"):
                with m.If(div.done):
                    m.d.sync += nsr.eq(div.quotient)
                    divide(n_max, div.quotient)
                    m.next = "ROW_HEIGHT"
            with m.State("ROW_HEIGHT"):
                with m.If(div.done):
                    m.d.sync += [rb.eq(div.quotient), re.eq(div.remainder), p.eq(0), jr.eq(0), jc.eq(0),
                                 r_off.eq(0), o_off.eq(0)]
                    skip = (n_nodes <= 1) | (n_max == 0) | (~d.bidirectional if self.ccw else 0)
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
                             cmd.hbm_beats.eq(width), cmd.row_end.eq(o_off + width == row_beats),
                             cmd.beats.eq(t_rows * width * cfg.words),
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
                    with m.If(jc + 1 != nsc):
                        m.d.sync += [jc.eq(jc + 1), o_off.eq(o_off + width)]
                        m.next = "CHUNK"
                    with m.Elif(jr + 1 != nsr):
                        m.d.sync += [jc.eq(0), o_off.eq(0), jr.eq(jr + 1), r_off.eq(r_off + height)]
                        m.next = "CHUNK"
                    with m.Else():
                        m.next = "DONE"
            with m.State("DONE"):
                m.d.comb += self.done.eq(1)
                with m.If(self.start):
                    divide(d.rows, n_nodes)
                    m.next = "CHUNKS"
        return m
