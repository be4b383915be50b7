"""The weight loader: each tile's R rows of B from memory, assembled into rows for the MXU."""

from __future__ import annotations

from amaranth.hdl import Cat, Const, Module, Mux, Signal, Value
from amaranth.lib import stream, wiring
from amaranth.lib.fifo import SyncFIFOBuffered
from amaranth.lib.wiring import In, Out

from .config import BEAT_BYTES
from .cursor import attach_cursor
from .dma import BurstSplitter
from .interface import EnginePart, Geometry, LoopEnd, ar_signature, lg, loop_control, r_signature, seq_port_signature

__all__ = ["WeightLoader"]


class WeightLoader(EnginePart):
    """Read each tile's R rows of B (row R-1 first, the order the MXU's weight chain wants), C columns
    each, and offer them as weight rows to the MXU.

    Tiles come in the engine's order: for each m-block, for each group, for each k-block kb, for each
    n-block of the group, the tile ``B[kb*R:(kb+1)*R, nb*C:(nb+1)*C]``. A row segment is ``WS`` beats
    (C * ob >= 32) or a part of one beat (``WPART`` rows per beat); rows with k >= K (padding) are not
    read and enter as +0, columns >= N are masked to +0. The rows queue in a FIFO of max(16, 4R) rows
    (four tiles: a refresh of the pseudo-channel holding B, tRFC + tRP, must not starve the array).

    Ports:
        desc: In(descriptor_layout); run, go, prep: In(1).
        seq_read, seq_rows: Out(seq_port_signature): the read and assembly sides' m-block lookups.
        ar: Out(ar_signature): read bursts (``mem_w``); r: In(r_signature): read data in AR order.
        wgt: Out(stream.Signature(C * w)): weight rows, column c in bits [c*w, (c+1)*w).

    Raises:
        TypeError: ``config`` is not an EngineConfig.
    """

    def members(self, g: Geometry) -> dict:
        return {
            **loop_control(g),
            "seq_read": Out(seq_port_signature(g)), "seq_rows": Out(seq_port_signature(g)),
            "ar": Out(ar_signature(g)), "r": In(r_signature()), "wgt": Out(stream.Signature(g.C * g.w)),
        }

    def elaborate(self, platform):
        m = Module()
        g, d = self.geom, self.desc
        R, C, w, ob, D, WS, WPART = g.R, g.C, g.w, g.ob, g.D, g.WS, g.WPART
        BB, WB, lgC = BEAT_BYTES, BEAT_BYTES * 8, lg(g.C)


        def row_geometry(nbC):
            """(byte offset of the row segment in its row, beats to read, real columns)."""
            rem = d.n - nbC
            cols_real = Signal(range(C + 1))
            m.d.comb += cols_real.eq(Mux(rem < C, rem, C))
            if WS > 1:
                return nbC * ob, (cols_real * ob + BB - 1) >> lg(BB), cols_real
            return ((nbC * ob) >> lg(BB)) << lg(BB), Const(1, 2), cols_real

        def geometry_ahead(p, cur, nbC, used):
            """:func:`row_geometry` of the next tile's columns for each step ("tile", "kb", "group"),
            from registers loaded every cycle, so the cursor's values, the n-block adders and the
            row-geometry arithmetic are not in front of the step's registers. A register is new a
            cycle after its inputs change; a loop steps once per R row events, at most one per
            cycle, so with R >= 2 a step reads values at least a cycle old. With R == 1 the
            geometry is combinational. ``used`` names the fields the loop reads ("off", "beats",
            "cols"); only those are registered. Returns {step: (new nbC, (offset, beats, real
            columns))}, an unused field None."""
            cands = {"tile": nbC + C, "kb": cur.nb0 << lgC,
                     "group": Mux(cur.last_group, 0, (cur.nb0 + cur.gc) << lgC)}
            out = {}
            for step, col in cands.items():
                geo = row_geometry(col)
                regs = []
                for v, f in zip(geo, ("off", "beats", "cols")):
                    if f not in used:
                        v = None
                    elif R >= 2:
                        r = Signal(Value.cast(v).shape(), name=f"{p}_{step}_{f}")
                        m.d.sync += r.eq(v)
                        v = r
                    regs.append(v)
                out[step] = (col, tuple(regs))
            return out

        def loop_ends(p, cur, kb, gi):
            """(g_last, kb_last, the flags' statements for each step of :func:`tile_step`): the
            tile's group and k-block loop ends from registers (:class:`LoopEnd`), so no adder is in
            front of the cursor's step."""
            g_end, kb_end = LoopEnd(gi, cur.gc, f"{p}_g", cur.gc_one), LoopEnd(kb, d.kb, f"{p}_kb")
            with m.If(self.go):
                m.d.sync += [*g_end.restart(), *kb_end.restart()]
            step = {"tile": g_end.step(), "kb": [*g_end.restart(), *kb_end.step()],
                    "group": [*g_end.restart(), *kb_end.restart()]}
            return g_end.last, kb_end.last, step

        def tile_step(cur, kb, k0, gi, nbC, ends, ahead, then):
            """Advance (k-block, n-block of the group) after a tile (emitted under the current If);
            ``ends`` from :func:`loop_ends`, ``ahead`` from :func:`geometry_ahead`; ``then(step, new
            k0, the new columns' geometry)`` adds the statements of the step "tile", "kb" or
            "group"."""
            g_last, kb_last, flags = ends
            with m.If(~g_last):
                m.d.sync += [gi.eq(gi + 1), nbC.eq(ahead["tile"][0]), *flags["tile"],
                             *then("tile", k0, ahead["tile"][1])]
            with m.Elif(~kb_last):
                m.d.sync += [gi.eq(0), kb.eq(kb + 1), k0.eq(k0 + R), nbC.eq(ahead["kb"][0]), *flags["kb"],
                             *then("kb", k0 + R, ahead["kb"][1])]
            with m.Else():
                m.d.sync += [gi.eq(0), kb.eq(0), k0.eq(0), nbC.eq(ahead["group"][0]), *flags["group"],
                             *then("group", 0, ahead["group"][1])]
                m.d.comb += cur.next_group.eq(1)

        def counters(p):
            return (Signal(range(g.KB_MAX), name=f"{p}_kb"), Signal(D + 9, name=f"{p}_k0"),
                    Signal(range(g.ACCD), name=f"{p}_g"),
                    Signal(D + 9, name=f"{p}_nbC"), Signal(range(R), name=f"{p}_r"))

        # ---- read side: one transfer per row segment (padding rows are skipped)
        wi = attach_cursor(m, "read_cursor", self, self.seq_read)
        m.submodules.split = sp = BurstSplitter(g.A32, BB)
        wiring.connect(m, wiring.flipped(self.ar), sp.ax)
        wi_kb, wi_k0, wi_g, wi_nbC, wi_r = counters("wi")
        wi_ends = loop_ends("wi", wi, wi_kb, wi_g)
        wi_ahead = geometry_ahead("wi", wi, wi_nbC, ("off", "beats"))
        wi_kbase = Signal(g.A32 + D + 9)
        # (2R - 1) * B_STRIDE, the next k-block's last row from this one's base: one adder in the
        # loop instead of two (the descriptor is latched long before go)
        ldb_2r1 = Signal(g.A32 + 9)
        m.d.sync += ldb_2r1.eq(d.ldb_r + d.ldb_r1)
        # the request (address of the row segment, beats, and whether row k0 + r exists) is kept in
        # registers, loaded with the values of the row that is read next, so the descriptor compares,
        # the row-geometry arithmetic and the address adder are not in front of the splitter
        wi_addr = Signal(g.A32 + D + 9)
        wi_beats = Signal(range(g.WS + 2))
        wi_real = Signal()

        def wi_request(row, geo, k0, r):
            off, beats, _ = geo
            return [wi_addr.eq(row + off), wi_beats.eq(beats), wi_real.eq((k0 + r) < d.k)]

        with m.If(self.go):
            m.d.sync += [wi_kb.eq(0), wi_k0.eq(0), wi_g.eq(0), wi_nbC.eq(0), wi_r.eq(R - 1),
                         wi_kbase.eq(d.b_base), *wi_request(d.b_base + d.ldb_r1, row_geometry(0), 0, R - 1)]
        wi_active = self.run & wi.ok & ~wi.fin
        m.d.comb += [sp.cmd.valid.eq(wi_active & wi_real), sp.cmd.payload.addr.eq(wi_addr),
                     sp.cmd.payload.beats.eq(wi_beats)]

        def wi_next_tile(step, k0, geo):
            """The next tile's last row: same k-block ("tile"), the next one ("kb"), or the group's
            first ("group")."""
            row = {"tile": wi_kbase + d.ldb_r1, "kb": wi_kbase + ldb_2r1, "group": d.b_base + d.ldb_r1}[step]
            base = {"kb": [wi_kbase.eq(wi_kbase + d.ldb_r)], "group": [wi_kbase.eq(d.b_base)]}.get(step, [])
            return [*wi_request(row, geo, k0, R - 1), *base]

        with m.If(wi_active & (~wi_real | sp.cmd.ready)):
            with m.If(wi_r != 0):
                m.d.sync += [wi_r.eq(wi_r - 1), wi_addr.eq(wi_addr - d.b_stride),
                             wi_real.eq((wi_k0 + wi_r - 1) < d.k)]
            with m.Else():
                m.d.sync += wi_r.eq(R - 1)
                tile_step(wi, wi_kb, wi_k0, wi_g, wi_nbC, wi_ends, wi_ahead, wi_next_tile)

        # ---- assembly: beats -> weight rows -> FIFO
        wa = attach_cursor(m, "rows_cursor", self, self.seq_rows)
        wa_kb, wa_k0, wa_g, wa_nbC, wa_r = counters("wa")
        wa_ends = loop_ends("wa", wa, wa_kb, wa_g)
        wa_ahead = geometry_ahead("wa", wa, wa_nbC, ("beats", "cols"))
        wa_q = Signal(range(WS + 1))
        wa_data = Signal(C * w)              # lanes of the beats before the row's last one
        # the row's beats, real columns and whether it exists are registers, loaded for the next
        # row (as the read side's request): the descriptor compares and the row-geometry arithmetic
        # are not in front of R's ready, the FIFO's write and the loop's step
        wa_beats, wa_cols, wa_real = Signal(range(WS + 2)), Signal(range(C + 1)), Signal()

        def wa_row(geo, k0, r):
            _, beats, cols = geo
            return [wa_beats.eq(beats), wa_cols.eq(cols), wa_real.eq((k0 + r) < d.k)]

        with m.If(self.go):
            m.d.sync += [wa_kb.eq(0), wa_k0.eq(0), wa_g.eq(0), wa_nbC.eq(0), wa_r.eq(R - 1), wa_q.eq(0),
                         *wa_row(row_geometry(0), 0, R - 1)]
        wa_active = self.run & wa.ok & ~wa.fin
        m.submodules.fifo = fifo = SyncFIFOBuffered(width=C * w, depth=max(16, 4 * R))
        last_beat = wa_q + 1 == wa_beats
        # a row goes into the FIFO in the cycle its last beat arrives (or at once for a padding row)
        m.d.comb += self.r.ready.eq(wa_active & wa_real & (~last_beat | fifo.w_rdy))
        beat = self.r.valid & self.r.ready
        rdata = self.r.payload.data
        if WS > 1:
            row_now = Signal(C * w)
            m.d.comb += row_now.eq(Cat(*(Mux(wa_q == q, rdata, wa_data[q * WB:(q + 1) * WB]) for q in range(WS))))
            with m.If(beat):
                m.d.sync += wa_data.eq(row_now)
        else:
            part = (wa_nbC >> lgC)[:max(1, lg(WPART))] if WPART > 1 else Const(0, 1)
            row_now = Const(0, C * w)
            for p_ in range(WPART):
                row_now = Mux(part == p_, rdata[p_ * C * w:(p_ + 1) * C * w], row_now)
        with m.If(beat):
            m.d.sync += wa_q.eq(Mux(last_beat, 0, wa_q + 1))
        push = Signal()
        m.d.comb += push.eq(wa_active & fifo.w_rdy & Mux(wa_real, self.r.valid & last_beat, 1))
        # columns >= N and whole padding rows are +0
        cols_eff = Mux(wa_real, wa_cols, 0)
        masked = Cat(*(Mux(c < cols_eff, row_now[c * w:(c + 1) * w], 0) for c in range(C)))
        m.d.comb += [fifo.w_data.eq(masked), fifo.w_en.eq(push)]
        with m.If(push):
            with m.If(wa_r != 0):
                m.d.sync += [wa_r.eq(wa_r - 1), wa_real.eq((wa_k0 + wa_r - 1) < d.k)]
            with m.Else():
                m.d.sync += wa_r.eq(R - 1)
                tile_step(wa, wa_kb, wa_k0, wa_g, wa_nbC, wa_ends, wa_ahead,
                          lambda step, k0, geo: wa_row(geo, k0, R - 1))
        m.d.comb += [self.wgt.valid.eq(fifo.r_rdy), self.wgt.payload.eq(fifo.r_data), fifo.r_en.eq(self.wgt.ready)]
        return m
