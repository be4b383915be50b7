"""The descriptor unit: latches a GEMM's registers at START, checks them and derives its blocking."""

from __future__ import annotations

from amaranth.hdl import Cat, Const, Module, Mux, Signal
from amaranth.lib.wiring import In, Out

from .csr import CSRBlock
from .interface import EnginePart, Geometry, descriptor_layout, lg, mux_min, result_bytes

__all__ = ["DescriptorUnit"]


class DescriptorUnit(EnginePart):
    """START to DONE: latch the registers, check them (:data:`~hw.engine.config.ERRORS`, the first
    failing check is reported), compute the blocking, run the loops until they are all done.

    States (``m.FSM``, named in waveforms): IDLE; CHK1 (zero, too large, format, alignment, stride
    checks; k-blocks, n-blocks, beats per A row); CHK2 (A words per row, ramp); RANGE (each matrix in
    use ends inside the memory: two cycles per matrix, the product registered before the compare);
    MB (``mbmax`` = min(m_block, M, floor(ABUF_DEPTH / wpr)), a restoring division, one quotient bit
    per cycle; ``prep`` with the last bit); G (``g``: the fewest n-blocks whose rows of the first
    block cover DEP_BEATS, at most NB and floor(ACCD / mbmax), one per cycle; ``go`` with the last);
    GO (the loops reset); RUN (until ``all_done``).

    Ports:
        reg_<NAME>: In(32) for each RW register of :class:`~hw.engine.csr.CSRBlock`.
        start, done_clear: In(1), strobes from the register block.
        all_done: In(1): every loop has finished and the last write response is in.
        bus_error: In(1): a SLVERR response this cycle (sets STATUS.BUS_ERROR until the next START).
        desc: Out(:func:`~hw.engine.interface.descriptor_layout`), valid from ``prep`` to DONE.
        prep, go: Out(1), one-cycle strobes (sequencer start; loops reset); run: Out(1), the loops run.
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
            "desc": Out(descriptor_layout(g)), "prep": Out(1), "go": Out(1), "run": Out(1), "started": Out(1),
            "counting": Out(1), "status": Out(32), "cycles": Out(32),
        })
        return members

    def elaborate(self, platform):  # noqa: C901 (one FSM, written out)
        m = Module()
        cfg, g = self.config, self.geom
        R, C, ob, D, A32 = g.R, g.C, g.ob, g.D, g.A32
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
        rng_i = Signal(2)
        rng_ph = Signal()                  # RANGE phase: 0 = register product and offset, 1 = compare
        rng_prod = Signal(A32 + D + 2)     # (rows - 1) * stride of matrix rng_i
        rng_off = Signal(A32 + D + 2)      # base + row bytes of matrix rng_i
        loop_n = Signal(range(max(cfg.m_block, g.ACCD) + 2))
        loop_p = Signal(D + 2)
        loop_s = Signal(D + 2)
        QB = g.ABUF_DEPTH.bit_length()     # quotient bits of ABUF_DEPTH / wpr
        div_q, div_r, div_b = Signal(QB), Signal(QB + 1), Signal(range(QB))
        m_too, m_zero = Signal(), Signal()

        with m.If(busy & ~done):
            m.d.sync += cycles.eq(cycles + 1)
        with m.If(self.done_clear):
            m.d.sync += done.eq(0)
        m.d.sync += [go.eq(0), prep.eq(0)]

        def fail(code):
            return [err.eq(code), busy.eq(0), done.eq(1)]

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
                    rng_i.eq(0), rng_ph.eq(0),
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
                # end = base + (rows - 1) * stride + row_bytes <= capacity, one matrix per two cycles
                rows = [d.m, d.k, d.m, d.m]
                rowb = [d.k * ob, d.n * ob, d.n << 2, result_bytes(d.n, d.out_bf16)]
                sel_rows, sel_stride, sel_base, sel_rowb = Const(0, D), Const(0, 32), Const(0, A32), Const(0, D + 3)
                for j, x in enumerate("abcd"):
                    hit = rng_i == j
                    sel_rows = Mux(hit, rows[j], sel_rows)
                    sel_stride = Mux(hit, stride[x], sel_stride)
                    sel_base = Mux(hit, base[x], sel_base)
                    sel_rowb = Mux(hit, rowb[j], sel_rowb)
                use = (rng_i != 2) | d.load_c
                with m.If(~rng_ph):
                    m.d.sync += [rng_prod.eq((sel_rows - 1) * sel_stride), rng_off.eq(sel_base + sel_rowb),
                                 rng_ph.eq(1)]
                with m.Else():
                    m.d.sync += rng_ph.eq(0)
                    with m.If(use & (rng_prod + rng_off > g.capacity)):
                        m.d.sync += fail(6)
                        m.next = "IDLE"
                    with m.Elif(rng_i == 3):
                        m.d.sync += [div_q.eq(0), div_r.eq(g.ABUF_DEPTH), div_b.eq(QB - 1)]
                        m.next = "MB"
                    with m.Else():
                        m.d.sync += rng_i.eq(rng_i + 1)
            with m.State("MB"):
                trial = d.wpr << div_b
                with m.If(trial <= div_r):
                    m.d.sync += [div_r.eq(div_r - trial), div_q.eq(div_q | (1 << div_b))]
                with m.If(div_b == 0):
                    q_fin = Mux(trial <= div_r, div_q | 1, div_q)
                    m.d.sync += [d.mbmax.eq(mux_min(mux_min(q_fin, d.m), cfg.m_block)), loop_n.eq(0), loop_p.eq(0),
                                 loop_s.eq(0), prep.eq(1)]
                    m.next = "G"
                with m.Else():
                    m.d.sync += div_b.eq(div_b - 1)
            with m.State("G"):
                # few n-blocks per group keep the exposed write-back of the last group short
                with m.If((loop_n < d.nb) & (loop_p + d.mbmax <= g.ACCD) & (loop_s < g.DEP_BEATS)):
                    m.d.sync += [loop_n.eq(loop_n + 1), loop_p.eq(loop_p + d.mbmax),
                                 loop_s.eq(loop_s + mux_min(g.MFIRST, d.mbmax))]
                with m.Else():
                    m.d.sync += [d.g.eq(loop_n), go.eq(1)]
                    m.next = "GO"
            with m.State("GO"):      # the loops reset in this cycle
                m.d.sync += run.eq(1)
                m.next = "RUN"
            with m.State("RUN"):
                with m.If(self.all_done):
                    m.d.sync += [run.eq(0), busy.eq(0), done.eq(1)]
                    m.next = "IDLE"
        with m.If(self.bus_error):
            m.d.sync += bus_err.eq(1)
        return m
