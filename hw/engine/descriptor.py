"""The descriptor unit: latches a GEMM's registers at START, checks them and derives its blocking."""

from __future__ import annotations

from amaranth.hdl import Cat, Const, Module, Mux, Signal, signed
from amaranth.lib.wiring import In, Out

from .csr import CSRBlock
from .interface import EnginePart, Geometry, descriptor_layout, lg, mux_min, result_bytes

__all__ = ["DescriptorUnit"]


class _RangeRegs:
    """The RANGE pipeline's registers (see :meth:`DescriptorUnit._range_check`)."""

    def __init__(self, g: Geometry):
        W = g.A32 + g.D + 2
        self.n = Signal(3)                  # matrices entered (0..4)
        self.v = Signal(3)                  # stage 1..3 holds a matrix
        self.i = [Signal(2, name=f"rng_i{s}") for s in range(3)]
        self.use = [Signal(name=f"rng_use{s}") for s in range(3)]
        self.rm1 = Signal(g.D)              # rows - 1
        self.stride = Signal(32)
        self.off = Signal(g.A32 + 2)        # base + row bytes
        self.p = [Signal(34, name=f"rng_p{j}") for j in range(4)]  # 17-bit partial products
        self.lim = Signal(signed(g.A32 + 3))  # capacity - off
        self.lim2 = Signal(signed(g.A32 + 3))
        self.sum_a = Signal(W)
        self.sum_b = Signal(W)


class DescriptorUnit(EnginePart):
    """START to DONE: latch the registers, check them (:data:`~hw.engine.config.ERRORS`, the first
    failing check is reported), compute the blocking, run the loops until they are all done.

    States (``m.FSM``, named in waveforms): IDLE; CHK1 (zero, too large, format, alignment, stride
    checks; k-blocks, n-blocks, beats per A row); CHK2 (A words per row, ramp); RANGE (each matrix in
    use ends inside the memory: a four-stage pipeline, one matrix entering per cycle, seven cycles in
    all; see :meth:`_range_check`); MB (until floor(ABUF_DEPTH / wpr) is known: a restoring division,
    one quotient bit per cycle, started in RANGE's first cycle; then ``mbmax`` = min(m_block, M, that
    quotient) and ``prep``); G (``g``: the fewest n-blocks whose rows of the first block cover
    DEP_BEATS, at most NB and floor(ACCD / mbmax), one per cycle; ``go`` with the last);
    GO (the loops reset); RUN (until ``all_done``).

    Ports:
        reg_<NAME>: In(32) for each RW register of :class:`~hw.engine.csr.CSRBlock`.
        start, done_clear: In(1), strobes from the register block.
        all_done: In(1): every loop has finished and the last write response is in.
        bus_error: In(1): a SLVERR response this cycle (sets STATUS.BUS_ERROR until the next START).
        desc: Out(:func:`~hw.engine.interface.descriptor_layout`), valid from ``prep`` to DONE.
        prep, go: Out(1), one-cycle strobes (sequencer start; loops reset); run: Out(1), the loops run.
        g_final: Out(1): ``desc.g`` has its final value (from G's last cycle, the cycle before ``go``,
            to DONE; the sequencer's table entries carry the group size derived from it).
        started: Out(1), strobe: a START was taken (the performance counters clear).
        counting: Out(1): BUSY and not DONE (the cycles of CYCLES).
        status: Out(32), the STATUS register value; cycles: Out(32), CYCLES.

    Raises:
        TypeError: ``config`` is not an EngineConfig.
    """

    def members(self, g: Geometry) -> dict:
        members = {f"reg_{name}": In(32) for name in CSRBlock.RW}
        members.update({
            "start": In(1), "done_clear": In(1), "all_done": In(1), "bus_error": In(1),
            "desc": Out(descriptor_layout(g)), "prep": Out(1), "go": Out(1), "g_final": Out(1), "run": Out(1),
            "started": Out(1),
            "counting": Out(1), "status": Out(32), "cycles": Out(32),
        })
        return members

    def elaborate(self, platform):  # noqa: C901 (one FSM, written out)
        m = Module()
        cfg, g = self.config, self.geom
        R, C, ob, D = g.R, g.C, g.ob, g.D
        d = Signal(descriptor_layout(g))
        busy, done, bus_err = Signal(), Signal(), Signal()
        err = Signal(4)
        cycles = Signal(32)
        run, go, prep = Signal(), Signal(), Signal()
        m.d.comb += [self.desc.eq(d), self.run.eq(run), self.go.eq(go), self.prep.eq(prep),
                     self.counting.eq(busy & ~done), self.cycles.eq(cycles),
                     self.status.eq(Cat(busy, done, Const(0, 2), err, bus_err))]
        base = {x: getattr(d, f"{x}_base") for x in "abcd"}
        stride = {x: getattr(d, f"{x}_stride") for x in "abcd"}
        regs = {n: getattr(self, f"reg_{n}") for n in CSRBlock.RW}
        rng = _RangeRegs(g)
        loop_p = Signal(D + 2)
        loop_s = Signal(D + 2)
        QB = g.ABUF_DEPTH.bit_length()     # quotient bits of ABUF_DEPTH / wpr
        div_q, div_r, div_b = Signal(QB), Signal(QB + 1), Signal(range(QB))
        div_t = Signal(len(d.wpr) + QB)    # wpr << div_b
        div_busy = Signal()
        m_too, m_zero = Signal(), Signal()
        # G's loop condition, registered an iteration ahead (from the values the registers take at
        # the edge): g_final is this flip-flop, not a compare in front of the sequencer's table write
        g_fin = Signal()
        m.d.comb += self.g_final.eq(g_fin)

        def g_more(g_, p_, s_):
            return (g_ < d.nb) & (p_ + d.mbmax <= g.ACCD) & (s_ < g.DEP_BEATS)

        with m.If(busy & ~done):
            m.d.sync += cycles.eq(cycles + 1)
        with m.If(self.done_clear):
            m.d.sync += done.eq(0)
        m.d.sync += [go.eq(0), prep.eq(0)]

        def fail(code):
            return [err.eq(code), busy.eq(0), done.eq(1)]

        # floor(ABUF_DEPTH / wpr), a restoring division, one quotient bit per cycle, started in
        # RANGE's first cycle (wpr is set by CHK2) and running beside it; div_t = wpr << div_b is a
        # register shifted once per cycle (a shifter by div_b in front of the compare was this
        # unit's critical path)
        div_start = Signal()
        with m.If(div_start):
            m.d.sync += [div_q.eq(0), div_r.eq(g.ABUF_DEPTH), div_b.eq(QB - 1), div_t.eq(d.wpr << (QB - 1)),
                         div_busy.eq(1)]
        with m.Elif(div_busy):
            with m.If(div_t <= div_r):
                m.d.sync += [div_r.eq(div_r - div_t), div_q.eq(div_q | (1 << div_b))]
            m.d.sync += [div_t.eq(div_t >> 1), div_b.eq(div_b - 1), div_busy.eq(div_b != 0)]

        with m.FSM():
            with m.State("IDLE"):
                m.d.comb += self.started.eq(self.start)
                with m.If(self.start):
                    m.d.sync += [
                        busy.eq(1), done.eq(0), err.eq(0), bus_err.eq(0), cycles.eq(1),
                        d.m.eq(regs["M"]), d.k.eq(regs["K"]), d.n.eq(regs["N"]),
                        m_zero.eq((regs["M"] == 0) | (regs["K"] == 0) | (regs["N"] == 0)),
                        m_too.eq((regs["M"] >> D).any() | (regs["K"] >> D).any() | (regs["N"] >> D).any()
                                 | (regs["K"] > cfg.max_k)),
                        d.load_c.eq(regs["FLAGS"][0]), d.out_bf16.eq(regs["FLAGS"][1]),
                        *(base[x].eq(regs[f"{x.upper()}_BASE"]) for x in "abcd"),
                        *(stride[x].eq(regs[f"{x.upper()}_STRIDE"]) for x in "abcd"),
                    ]
                    m.next = "CHK1"
            with m.State("CHK1"):
                misaligned = Const(0)
                for x, used in (("a", 1), ("b", 1), ("c", d.load_c), ("d", 1)):
                    misaligned = misaligned | (used & ((base[x][:5] != 0) | (stride[x][:5] != 0)))
                short = ((stride["a"] < d.k * ob) | (stride["b"] < d.n * ob)
                         | (d.load_c & (stride["c"] < (d.n << 2))) | (stride["d"] < result_bytes(d.n, d.out_bf16)))
                code = Mux(m_zero, 1, Mux(m_too, 2, Mux(d.out_bf16 & g.is_int8, 3, Mux(misaligned, 4,
                                                                                      Mux(short, 5, 0)))))
                m.d.sync += [
                    d.kb.eq((d.k + R - 1) >> lg(R)), d.nb.eq((d.n + C - 1) >> lg(C)),
                    d.rb.eq((d.k + g.E - 1) >> lg(g.E)),
                    d.ldb_r.eq(stride["b"] << lg(R)), d.ldb_r1.eq((stride["b"] << lg(R)) - stride["b"]),
                    rng.n.eq(0), rng.v.eq(0),
                ]
                with m.If(code != 0):
                    m.d.sync += fail(code)
                    m.next = "IDLE"
                with m.Else():
                    m.next = "CHK2"
            with m.State("CHK2"):
                # ramp when an A beat feeds fewer than 4 tile beats (NB * CPW / NSUB < 4: the A load
                # is as long as the compute)
                m.d.sync += [d.wpr.eq((d.kb + g.CPW - 1) >> lg(g.CPW)),
                             d.ramp.eq((d.nb << lg(g.CPW)) < (4 << lg(g.NSUB)))]
                m.next = "RANGE"
            with m.State("RANGE"):
                m.d.comb += div_start.eq(rng.n == 0)
                bad, passed = self._range_check(m, d, rng)
                with m.If(bad):
                    m.d.sync += fail(6)
                    m.next = "IDLE"
                with m.Elif(passed):
                    m.next = "MB"
            with m.State("MB"):
                with m.If(~div_busy):
                    # (G's first iteration always runs: N >= 1 passed CHK1, mbmax <= m_block <=
                    # acc_entries by the configuration, DEP_BEATS >= 16)
                    m.d.sync += [d.mbmax.eq(mux_min(mux_min(div_q, d.m), cfg.m_block)), d.g.eq(0),
                                 loop_p.eq(0), loop_s.eq(0), prep.eq(1), g_fin.eq(0)]
                    m.next = "G"
            with m.State("G"):
                # few n-blocks per group keep the exposed write-back of the last group short
                # (g counts in place: the sequencer derives each block's group size from it)
                with m.If(~g_fin):
                    step = mux_min(g.MFIRST, d.mbmax)
                    m.d.sync += [d.g.eq(d.g + 1), loop_p.eq(loop_p + d.mbmax), loop_s.eq(loop_s + step),
                                 g_fin.eq(~g_more(d.g + 1, loop_p + d.mbmax, loop_s + step))]
                with m.Else():
                    # g is final in this cycle (g_final): the sequencer may write its table
                    m.d.sync += go.eq(1)
                    m.next = "GO"
            with m.State("GO"):      # the loops reset in this cycle
                m.d.sync += run.eq(1)
                m.next = "RUN"
            with m.State("RUN"):
                with m.If(self.all_done):
                    m.d.sync += [run.eq(0), busy.eq(0), done.eq(1), g_fin.eq(0)]
                    m.next = "IDLE"
        with m.If(self.bus_error):
            m.d.sync += bus_err.eq(1)
        return m

    def _range_check(self, m, d, rng: _RangeRegs):
        """RANGE: base + (rows - 1) * stride + row bytes <= capacity for each matrix in use (A, B,
        C when FLAGS.LOAD_C, D), the first failing one reported (ERR 6).

        A pipeline, so no stage holds more than one 17x17-bit product or one adder: stage 1 selects
        the matrix's operands into registers; stage 2 forms the four 17-bit partial products of the
        20 x 32-bit product (one MULT18X18D each on ECP5) and ``capacity - (base + row bytes)``;
        stage 3 adds them in pairs; stage 4 compares. Matrix j enters in RANGE's cycle j and is
        judged in cycle j + 3, so RANGE takes 7 cycles. The product through a DSP cascade and its
        adders in one cycle was the unit's critical path (77.9 MHz on ECP5-85k).

        Returns ``(bad, passed)``, one-bit values for this cycle: a matrix in use ends beyond the
        memory; the last matrix is judged and every one passed."""
        g = self.geom
        base = [getattr(d, f"{x}_base") for x in "abcd"]
        stride = [getattr(d, f"{x}_stride") for x in "abcd"]
        rows = [d.m, d.k, d.m, d.m]
        rowb = [d.k * g.ob, d.n * g.ob, d.n << 2, result_bytes(d.n, d.out_bf16)]
        uses = [1, 1, d.load_c, 1]
        sel = [Const(0, 1), Const(0, g.D), Const(0, 32), Const(0, g.A32 + 2)]
        for j in range(4):
            hit = rng.n == j
            for k, value in enumerate((uses[j], rows[j] - 1, stride[j], base[j] + rowb[j])):
                sel[k] = Mux(hit, value, sel[k])
        r, s = rng.rm1, rng.stride
        m.d.sync += [
            # stage 1: operands
            rng.n.eq(Mux(rng.n == 4, 4, rng.n + 1)), rng.v.eq(Cat(rng.n != 4, rng.v[:2])),
            rng.i[0].eq(rng.n), rng.use[0].eq(sel[0]), rng.rm1.eq(sel[1]), rng.stride.eq(sel[2]),
            rng.off.eq(sel[3]),
            # stage 2: partial products and the room left after the last row
            rng.i[1].eq(rng.i[0]), rng.use[1].eq(rng.use[0]),
            rng.p[0].eq(r[:17] * s[:17]), rng.p[1].eq(r[:17] * s[17:]),
            rng.p[2].eq(r[17:] * s[:17]), rng.p[3].eq(r[17:] * s[17:]),
            rng.lim.eq(g.capacity - rng.off),
            # stage 3: two sums
            rng.i[2].eq(rng.i[1]), rng.use[2].eq(rng.use[1]), rng.lim2.eq(rng.lim),
            rng.sum_a.eq(rng.p[0] + (rng.p[1] << 17)), rng.sum_b.eq((rng.p[2] << 17) + (rng.p[3] << 34)),
        ]
        # stage 4: the verdict
        bad = rng.v[2] & rng.use[2] & (rng.sum_a + rng.sum_b > rng.lim2)
        return bad, rng.v[2] & (rng.i[2] == 3)
