"""The feeder: activation beats {a, c, swap} from the A banks and the accumulator to the MXU."""

from __future__ import annotations

from amaranth.hdl import Cat, Const, Module, Mux, Signal
from amaranth.lib import data, stream
from amaranth.lib.wiring import In, Out

from .config import BEAT_BYTES
from .cursor import attach_cursor
from .interface import AccState, EnginePart, Geometry, LoopEnd, Why, lg, loop_control, seq_port_signature

__all__ = ["Feeder", "a_bank_connections"]


class Feeder(EnginePart):
    """Offer the MXU one activation beat per cycle: for each m-block, group, k-block kb, n-block of the
    group and row i, the row's chunk of A (k in [kb*R, kb*R + R), elements with k >= K fed as -0 for
    floats, 0 for int8) and the partial sums it continues (the accumulator entry, or +0 in k-block 0
    without C0), with ``swap`` on the tile's first row.

    A beat waits until its A chunk is stored (the bank ``full``, or the bank being stored has
    ``progress`` past the chunk's beats), its accumulator bank is READY (or, in k-block 0 while the
    bank's C0 loads, the C0 row is stored) and the C0 loader has started the group (a bank stays READY
    for its old group until the collector writes that group's last output beat, which can be after the
    feeder has finished the next, short group in the other bank) and, for kb >= 1, the output it
    continues has been written back (``wcount``). Two stages: the position with the accumulator read
    (address registered in the memory), then the beat. The A bank is read a cycle ahead, so the chunk
    is at the memory's output (or in a holding register) while its position is decided and is taken
    into a register with the position (the A operands reach the MXU's first multipliers from
    flip-flops, not through the block RAM's clock-to-out); the read address comes from registers only,
    not from the issue decision (see ``_a_read``). The A loader's ``full`` / ``progress`` are seen a
    cycle late for it, so a chunk stored at a clock edge is not read at that same edge.

    Ports:
        desc: In(descriptor_layout); run, go, prep: In(1).
        seq: Out(seq_port_signature): the feeder's m-block lookup.
        a_full: In(2), a_store_bank: In(1), a_progress: In(range(RB_MAX + 1)): from the A loader.
        a_rd_addr: Out(lg(ABUF_DEPTH) + 1), a_rd_en: Out(1), a_rd_data: In(NSUB * 256): A bank read.
        acc_state: In(ArrayLayout(AccState, 2)), wcount: In(ArrayLayout(range(GROUP_BEATS + 1), 2)): the banks;
        acc_wr: In(2): the collector writes bank b in this cycle (its ``wcount`` is one higher after
            the edge);
        c0_bank: In(1): the bank the C0 loader's store side is at; c0_row_next: In(range(m_block + 1)):
            its row after this clock edge (the rows before it are stored); c0_start: In(1): the C0
            loader starts a group (strobe).
        acc_rd_addr: Out(range(ACCD)), acc_rd_en: Out(1), acc_rd_data: In(ArrayLayout(32 * C, 2)):
            accumulator read.
        act: Out(stream.Signature(R * w + 32 * C + 1)): the beat ``Cat(a, c, swap)`` (the MXU's
            activation stream).
        free: Out(1), free_bank: Out(1): the feeder is done with an A bank (strobe).
        why: Out(:class:`~hw.engine.interface.Why`): why no beat was offered, registered with the beat.

    Raises:
        TypeError: ``config`` is not an EngineConfig.
    """

    def members(self, g: Geometry) -> dict:
        entry = 32 * g.C
        return {
            **loop_control(g),
            "seq": Out(seq_port_signature(g)),
            "a_full": In(2), "a_store_bank": In(1), "a_progress": In(range(g.RB_MAX + 1)),
            "a_rd_addr": Out(lg(g.ABUF_DEPTH) + 1), "a_rd_en": Out(1), "a_rd_data": In(g.NSUB * BEAT_BYTES * 8),
            "acc_state": In(data.ArrayLayout(AccState, 2)), "wcount": In(data.ArrayLayout(range(g.GROUP_BEATS + 1), 2)),
            "acc_wr": In(2),
            "c0_bank": In(1), "c0_row_next": In(range(g.m_block + 1)), "c0_start": In(1),
            "acc_rd_addr": Out(range(g.ACCD)), "acc_rd_en": Out(1), "acc_rd_data": In(data.ArrayLayout(entry, 2)),
            "act": Out(stream.Signature(g.R * g.w + entry + 1)),
            "free": Out(1), "free_bank": Out(1), "why": Out(Why),
        }

    def elaborate(self, platform):
        m = Module()
        g, d = self.geom, self.desc
        R, w, NSUB, CPW = g.R, g.w, g.NSUB, g.CPW
        lgNSUB, lgCPW = lg(NSUB), lg(CPW)
        fd = attach_cursor(m, "cursor", self, self.seq)
        f_kb = Signal(range(g.KB_MAX))
        f_rem = Signal(range(g.K_MAX + 1))          # K - kb * R: elements of K from this k-block on
        f_g = Signal(range(g.ACCD))
        f_i = Signal(range(g.m_block))              # row of the m-block, < mb
        f_word = Signal(range(g.ABUF_DEPTH))       # i * wpr + kb / CPW: the A bank word (its read drops no bit)
        f_caddr = Signal(range(g.ACCD))             # g * mb + i: the group's entries fit a bank
        f_q1 = Signal(range(g.GROUP_BEATS))         # beats issued in this group after k-block 0
        f_abank = Signal()
        f_cbank = Signal()
        with m.If(self.go):
            m.d.sync += [f_rem.eq(d.k), f_g.eq(0), f_i.eq(0), f_caddr.eq(0), f_q1.eq(0), f_cbank.eq(0)]
        # loop ends from registers (LoopEnd: at count 0 the limit's own compare with 1, the cursor's
        # mb and gc being registers stable while the loop is in the block, after it a flag loaded with
        # each increment), so no adder and carry chain is in front of the next position; the
        # first-count flags are also row 0 (swap) and k-block 0 (no K chain; C0 or +0)
        i_end, g_end = LoopEnd(f_i, fd.mb, "f_i", fd.mb_one), LoopEnd(f_g, fd.gc, "f_g", fd.gc_one)
        kb_end = LoopEnd(f_kb, d.kb, "f_kb")
        f_kb0 = kb_end.first

        # A ready: the bank is full, or (read in passes) every row's beats up to the ones holding
        # k-block kb have been stored. Registered for the position the next cycle holds, from the
        # A loader's state of this cycle (so a chunk is seen stored a cycle after its write, see
        # above): computed for each position the feeder can move to, from registers, `ok` only
        # selecting one, so the compare is not between `ok` and the A bank's address
        def a_stored(kb, bank):
            need = ((kb >> lgCPW) << lgNSUB) + NSUB
            return self.a_full.bit_select(bank, 1) | ((self.a_store_bank == bank) & (self.a_progress >= need))
        a_ok = Signal()
        n_aok = Signal()
        m.d.sync += a_ok.eq(n_aok)
        # accumulator ready: loaded, or (k-block 0 of a group loading its C0, rows in order) the
        # C0 rows up to f_i stored, so a group starts after its first C0 row, not all of them
        # (each bank's flags from its own registers, the feeder's bank choosing at the end: the bank's
        # state and write-back count are not multiplexed in front of the compares). The C0 row check
        # is registered a cycle ahead, from the store row after the edge, against each row f_i can
        # move to (the same, the next, row 0); the fire of that cycle chooses, so the compare's
        # carry chain is not in front of the issue decision and every cycle is as with the compare
        c0_same, c0_inc, c0_zero = Signal(), Signal(), Signal()
        fi_inc, fi_zero = Signal(), Signal()    # f_i stepped / restarted at the last edge
        m.d.sync += [c0_same.eq(self.c0_row_next > f_i), c0_inc.eq(self.c0_row_next > f_i + 1),
                     c0_zero.eq(self.c0_row_next != 0)]
        c0_ok = Mux(fi_inc, c0_inc, Mux(fi_zero, c0_zero, c0_same))
        acc_ok_b = [(self.acc_state[b] == AccState.READY)
                    | (f_kb0 & (self.acc_state[b] == AccState.LOADING) & (self.c0_bank == b) & c0_ok)
                    for b in range(2)]
        # groups the C0 loader has started and the feeder not finished (0, 1 or 2: two banks)
        f_started = Signal(2)
        acc_ok = Mux(f_cbank, acc_ok_b[1], acc_ok_b[0]) & (f_started != 0)
        # k-block >= 1 continues an output: it must have been written back (K-chain dependency)
        # (from registers: the compare of this cycle's count with f_q1 and with f_q1 + 1, made a
        # cycle ahead from the count after the edge; the fire of that cycle chooses. Exact while it
        # matters (k-block >= 1): the bank is the group's, which the write-back cannot free before
        # the group is fed, and f_q1 changes only by the fire's increment. The compare's carry chain
        # was in front of the issue decision, the engine's critical path.)
        dep_same, dep_inc, q1_inc = Signal(), Signal(), Signal()
        w_next = [self.wcount[b] + self.acc_wr[b] for b in range(2)]
        m.d.sync += [dep_same.eq(Mux(f_cbank, w_next[1] > f_q1, w_next[0] > f_q1)),
                     dep_inc.eq(Mux(f_cbank, w_next[1] > f_q1 + 1, w_next[0] > f_q1 + 1))]
        dep_ok = f_kb0 | Mux(q1_inc, dep_inc, dep_same)
        ok = Signal()
        m.d.comb += ok.eq(self.run & fd.ok & ~fd.fin & a_ok & acc_ok & dep_ok)

        # stage 1: the beat being offered
        s1_valid = Signal()
        s1_swap = Signal()
        s1_zero_c = Signal()
        s1_cbank = Signal()
        s1_a = Signal(R * w)                    # the chunk of A, padded
        s1_why = Signal(Why)
        load = Signal()
        m.d.comb += load.eq(~s1_valid | self.act.ready)
        with m.If(load):
            m.d.sync += s1_valid.eq(ok)
        m.d.comb += [self.acc_rd_addr.eq(f_caddr), self.acc_rd_en.eq(load)]
        i_last, g_last, kb_last = i_end.last, g_end.last, kb_end.last
        with m.If(self.go):
            m.d.sync += [*i_end.restart(), *g_end.restart()]
        group_end = i_last & g_last & kb_last
        fire = load & ok
        # the A position (word, k-block, bank) the next cycle holds and whether its chunk is stored:
        # the positions it can move to are computed from registers beside `ok`, which only selects one
        n_word = Signal.like(f_word)
        n_kb = Signal.like(f_kb)
        n_abank = Signal()
        aok_same = Signal()                     # the A chunk of this position is stored,
        aok_kb1 = Signal()                      # of the next k-block,
        aok_other = Signal()                    # of k-block 0 in the other bank
        m.d.comb += [aok_same.eq(a_stored(f_kb, f_abank)), aok_kb1.eq(a_stored(f_kb + 1, f_abank)),
                     aok_other.eq(a_stored(0, ~f_abank))]
        m.d.comb += [n_word.eq(f_word), n_kb.eq(f_kb), n_abank.eq(f_abank), n_aok.eq(aok_same)]
        m.d.sync += [f_word.eq(n_word), f_kb.eq(n_kb), f_abank.eq(n_abank)]
        with m.If(self.go):
            # (the loader's banks are cleared at go: nothing is stored yet)
            m.d.comb += [n_word.eq(0), n_kb.eq(0), n_abank.eq(0), n_aok.eq(0)]
            m.d.sync += kb_end.restart()
        word_row = Signal.like(f_word)          # the next row, same k-block
        word_kb = Signal.like(f_word)           # row 0, same k-block (next n-block of the group)
        word_kb1 = Signal.like(f_word)          # row 0, next k-block
        m.d.comb += [word_row.eq(f_word + d.wpr), word_kb.eq(f_kb >> lgCPW), word_kb1.eq((f_kb + 1) >> lgCPW)]
        a_cur = self._a_read(m, f_word, f_kb, f_abank, word_row, word_kb, word_kb1, ~i_last, ~g_last, ~kb_last,
                             fd.last_group, a_ok, fire)
        m.d.sync += [q1_inc.eq(fire & ~f_kb0), fi_inc.eq(fire & ~i_last), fi_zero.eq((fire & i_last) | self.go)]
        with m.If(fire):
            m.d.sync += [s1_swap.eq(i_end.first), s1_zero_c.eq(f_kb0 & ~d.load_c), s1_cbank.eq(f_cbank),
                         s1_a.eq(self._a_pad(a_cur, Mux(f_rem < R, f_rem[:lg(R) + 1], R)))]  # (below R: its low bits)
            with m.If(~f_kb0):
                m.d.sync += f_q1.eq(f_q1 + 1)
            with m.If(~i_last):
                m.d.sync += [f_i.eq(f_i + 1), f_caddr.eq(f_caddr + 1), *i_end.step()]
                m.d.comb += n_word.eq(word_row)
            with m.Else():
                m.d.sync += [f_i.eq(0), *i_end.restart()]
                with m.If(~g_last):
                    m.d.sync += [f_g.eq(f_g + 1), f_caddr.eq(f_caddr + 1), *g_end.step()]
                    m.d.comb += n_word.eq(word_kb)
                with m.Elif(~kb_last):
                    m.d.sync += [f_g.eq(0), *g_end.restart(), f_rem.eq(f_rem - R), f_caddr.eq(0)]
                    m.d.comb += [n_kb.eq(f_kb + 1), n_word.eq(word_kb1), n_aok.eq(aok_kb1)]
                    m.d.sync += kb_end.step()
                with m.Else():
                    m.d.sync += [f_g.eq(0), *g_end.restart(), f_rem.eq(d.k), f_caddr.eq(0), f_q1.eq(0),
                                 f_cbank.eq(~f_cbank)]
                    # the next group of this m-block starts at k-block 0 of this bank, which the
                    # group just fed has read for every row: stored (a bank's progress only grows
                    # until the block's last group frees it)
                    m.d.comb += [n_kb.eq(0), n_word.eq(0), fd.next_group.eq(1), n_aok.eq(1)]
                    m.d.sync += kb_end.restart()
                    with m.If(fd.last_group):
                        m.d.comb += [n_abank.eq(~f_abank), n_aok.eq(aok_other)]
        m.d.comb += [self.free.eq(fire & group_end & fd.last_group), self.free_bank.eq(f_abank)]
        m.d.sync += f_started.eq(f_started + self.c0_start - (fire & group_end))
        with m.If(self.go):
            m.d.sync += f_started.eq(0)

        # the reason for an empty cycle, registered with the stage (so it lines up with the cycle)
        why = Mux(~self.run, Why.SETUP, Mux(fd.fin, Why.DRAIN, Mux(~a_ok, Why.A, Mux(~acc_ok, Why.ACC, Why.DEP))))
        with m.If(load):
            m.d.sync += s1_why.eq(why)
        m.d.comb += self.why.eq(s1_why)

        # the beat: the chunk of A, the partial sums (or +0)
        c_vec = Mux(s1_zero_c, 0, Mux(s1_cbank, self.acc_rd_data[1], self.acc_rd_data[0]))
        m.d.comb += [self.act.valid.eq(s1_valid), self.act.payload.eq(Cat(s1_a, c_vec, s1_swap))]
        return m

    def _a_read(self, m, f_word, f_kb, f_abank, word_row, word_kb, word_kb1, more_rows, more_groups, more_kb,
                last_group, a_ok, fire):
        """Drive the A bank's read address from registers only; returns the R * w bit chunk of the
        position being decided.

        The issue decision (``fire``) is the end of the engine's longest paths (the cursor, the
        accumulator state, the write-back count), so it does not reach the block RAM's address: once the
        position's chunk is at the memory's output (``a_ok``, a register), the address is the position
        the next fire moves to and the chunk is kept in ``held`` until that fire; before, the address
        is the position itself, read again every cycle until the A loader has stored it. The chunk is
        the same in every cycle as with the address chosen by ``fire``: no cycle count changes.
        """
        g, go = self.geom, self.go
        R, w, CPW = g.R, g.w, g.CPW
        # the position the next fire moves to (the same choice as the fire branch, without `fire`)
        succ_word = Signal.like(f_word)
        succ_bank = Signal()
        with m.If(more_rows):
            m.d.comb += [succ_word.eq(word_row), succ_bank.eq(f_abank)]
        with m.Elif(more_groups):
            m.d.comb += [succ_word.eq(word_kb), succ_bank.eq(f_abank)]
        with m.Elif(more_kb):
            m.d.comb += [succ_word.eq(word_kb1), succ_bank.eq(f_abank)]
        with m.Else():
            m.d.comb += [succ_word.eq(0), succ_bank.eq(f_abank ^ last_group)]
        ahead = Signal()                        # the address of this cycle is the successor's
        m.d.comb += ahead.eq(a_ok & ~go)
        rd_word = Mux(ahead, succ_word, f_word)
        rd_bank = Mux(ahead, succ_bank, f_abank)
        m.d.comb += [self.a_rd_addr.eq(Cat(rd_word[:lg(g.ABUF_DEPTH)], rd_bank)), self.a_rd_en.eq(1)]
        # the memory's output is this position's chunk unless last cycle read ahead without a fire
        use_held = Signal()
        m.d.sync += use_held.eq(ahead & ~fire)
        a_raw = self.a_rd_data
        if CPW > 1:
            a_mem = Const(0, R * w)
            for p_ in range(CPW):
                a_mem = Mux(f_kb[:lg(CPW)] == p_, a_raw[p_ * R * w:(p_ + 1) * R * w], a_mem)
        else:
            a_mem = a_raw[:R * w]
        held = Signal(R * w)
        a_cur = Signal(R * w)
        m.d.comb += a_cur.eq(Mux(use_held, held, a_mem))
        m.d.sync += held.eq(a_cur)
        return a_cur

    def _a_pad(self, a_chunk, lim):
        """The R operands of ``a_chunk``, the ones at or past ``lim`` (k >= K) replaced by -0 (floats)
        or 0 (int8)."""
        g = self.geom
        R, w = g.R, g.w
        a_pad = 0 if g.is_int8 else (1 << (w - 1))   # -0
        return Cat(*(Mux(r < lim, a_chunk[r * w:(r + 1) * w], a_pad) for r in range(R)))


def a_bank_connections(loader, feeder) -> list:
    """The statements that join an :class:`~hw.engine.a_loader.ALoader`'s two A banks to a
    :class:`Feeder` (the loader's store state to the feeder, the feeder's read port and bank release
    to the loader), for ``m.d.comb``."""
    return [
        feeder.a_full.eq(loader.full), feeder.a_store_bank.eq(loader.store_bank),
        feeder.a_progress.eq(loader.progress), loader.rd_addr.eq(feeder.a_rd_addr),
        loader.rd_en.eq(feeder.a_rd_en), feeder.a_rd_data.eq(loader.rd_data),
        loader.free.eq(feeder.free), loader.free_bank.eq(feeder.free_bank),
    ]
