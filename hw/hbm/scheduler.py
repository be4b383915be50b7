"""Command choice of one HBM2 pseudo-channel controller: FR-FCFS with an age cap, and refresh."""

from __future__ import annotations

from amaranth.hdl import Cat, Const, Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from .config import HBMConfig
from .interface import bank_status_signature, check_config, issue_layout, queue_view_signature

__all__ = ["CommandScheduler"]


class CommandScheduler(wiring.Component):
    """Chooses the row and column commands for the next cycle (from registers).

    FR-FCFS (Rixner et al., "Memory Access Scheduling", ISCA 2000) with a starvation bound:

    * Column bus: RD/WR of the oldest slot that is ``col_ready`` (row hit, no older same-address
      hazard, timing met: :class:`~hw.hbm.request_queue.RequestQueue`); a RD also needs a
      response-buffer credit.
    * Row bus, by priority: REF (draining, all banks closed, tRP met), PREA (draining, every open
      bank may be precharged), ACT for the oldest ``act_ready`` slot, PRE of the lowest bank whose
      open row no queued request hits while one needs another row (open page) or that no queued
      request hits (closed page).
    * Age cap: while ``strict``, only the oldest slot may issue commands, and PRE only goes to the
      bank where the oldest request misses.
    * While draining for a refresh, or within tRFC of a REF, no ACT, PRE, RD or WR is chosen.

    The decision reaches the pins one cycle later (the controller registers it), so it is checked
    against the command on the pins now (``pins``), which the timing counters do not count yet:
    after a RD or WR no column command, after an ACT no ACT, after a REF or PREA nothing but
    what tRFC / tRP allow, after a PRE no RD/WR/PRE to that bank, after a RD/WR no PRE of its bank
    and no PREA. Every one of these distances is at least 2 cycles in the timing sets (with BL2
    and tCCD_S = 1 two column commands could go back to back; this controller spaces them by 2).

    One register inside: whether the command chosen this cycle forbids a column command in the next
    (a RD/WR, REF or PREA on the pins); ``pins`` must be this component's ``issue`` of the
    previous cycle.

    Ports:
        queue: ``In(queue_view_signature(config))`` -- the request slots (registers).
        banks: ``In(bank_status_signature(config))`` -- bank state and timing (registers).
        pins: ``In(issue_layout(config))`` -- the commands on the pins this cycle.
        draining: ``In(1)`` -- a refresh is pending (:class:`~hw.hbm.refresh.RefreshTimer`).
        rd_credit: ``In(1)`` -- the read-response buffer has room for one more burst.
        issue: ``Out(issue_layout(config))`` -- the chosen commands.

    Args:
        config: :class:`~hw.hbm.config.HBMConfig` (``queue_depth``, ``page_policy``, geometry).

    Raises:
        TypeError: ``config`` is not an :class:`HBMConfig`.
    """

    def __init__(self, config: HBMConfig):
        self.config = check_config(config)
        super().__init__({
            "queue": In(queue_view_signature(config)),
            "banks": In(bank_status_signature(config)),
            "pins": In(issue_layout(config)),
            "draining": In(1),
            "rd_credit": In(1),
            "issue": Out(issue_layout(config)),
        })

    def elaborate(self, platform):
        cfg = self.config
        m = Module()
        n, nb = cfg.queue_depth, cfg.banks
        q, st, p, iss = self.queue, self.banks, self.pins, self.issue
        draining = self.draining

        def pick_oldest(cand, name):
            """One-hot of the oldest set bit of ``cand`` (an n-bit signal)."""
            oh = Signal(n, name=name)
            for i in range(n):
                m.d.comb += oh[i].eq(cand[i] & ~(q.older[i] & cand).any())
            return oh

        # Choices are expressions (no comb ``m.If``): Yosys then emits ``assign`` statements, which
        # every simulator evaluates at time 0 (an ``always @*`` block whose inputs never change
        # after time 0 stays X in Icarus).
        def onehot_mux(oh, values, out):
            acc = Mux(oh[0], values[0], 0)
            for i in range(1, n):
                acc = acc | Mux(oh[i], values[i], 0)
            m.d.comb += out.eq(acc)

        def onehot_index(oh, out):
            """Index of the set bit of the one-hot ``oh`` (an OR per index bit)."""
            m.d.comb += out.eq(Cat(*(Cat(*(oh[i] for i in range(n) if i >> k & 1)).any()
                                      for k in range(len(out)))))

        def lowest_index(bits_sig, count, out):
            """Index of the lowest set bit of ``bits_sig`` (0 when none is set)."""
            expr = Const(0, out.shape())
            for i in reversed(range(count)):
                expr = Mux(bits_sig[i], i, expr)
            m.d.comb += out.eq(expr)

        p_col = p.rd | p.wr
        p_any = p.act | p.pre | p.prea | p.ref

        # ---------------------------------------------------------------- column command
        # The command on the pins that forbids any column command (RD/WR, REF, PREA) is known one
        # cycle earlier, as this cycle's choice: register it, to keep the choice's inputs flip-flops.
        pins_block_col = Signal(name="pins_block_col")
        m.d.sync += pins_block_col.eq(iss.rd | iss.wr | iss.ref | iss.prea)
        # The blocking terms common to every slot (draining, the pins) gate the decision after the
        # oldest-first pick, as for ACT: the pick and the row / column multiplexers start from the
        # queue's flip-flops. While blocked, col_row / col_col / col_bank carry the oldest
        # candidate's; nothing reads them without ``rd`` / ``wr`` (the DRAM pins are gated).
        col_block = draining | pins_block_col
        col_cand = Signal(n, name="col_cand")
        for i in range(n):
            m.d.comb += col_cand[i].eq(
                q.valid[i] & q.allow[i] & q.col_ready[i] & (q.write[i] | self.rd_credit)
                & ~(p.pre & (p.pre_bank == q.bank[i])))
        col_oh = pick_oldest(col_cand, "col_pick")
        col_is_wr = Signal(name="col_is_wr")
        onehot_mux(col_oh, q.write, col_is_wr)
        onehot_mux(col_oh, q.bank, iss.col_bank)
        onehot_mux(col_oh, q.row, iss.col_row)
        onehot_mux(col_oh, q.col, iss.col_col)
        onehot_mux(col_oh, q.tag, iss.col_tag)
        onehot_index(col_oh, iss.col_slot)
        slot_is = [[q.bank[i] == b for b in range(nb)] for i in range(n)]

        def banks_of(oh):
            """One-hot bank of the one-hot slot ``oh``."""
            return Cat(*(Cat(*(oh[i] & slot_is[i][b] for i in range(n))).any() for b in range(nb)))

        m.d.comb += iss.col_banks.eq(banks_of(col_oh))
        col_go = col_cand.any() & ~col_block
        m.d.comb += [
            iss.col_grant.eq(col_oh & ~col_block.replicate(n)),
            iss.rd.eq(col_go & ~col_is_wr),
            iss.wr.eq(col_go & col_is_wr),
        ]

        # ---------------------------------------------------------------- row command
        # The blocking terms are the same for every slot, so they gate the decision (act_go) after
        # the oldest-first pick, not each candidate before it: the pick and the row / bank
        # multiplexers start from the queue's flip-flops. While blocked, act_row / act_bank carry
        # the oldest candidate's, which nothing reads without ``act``.
        act_cand = Signal(n, name="act_cand")
        act_block = draining | p.act | p.ref | p.prea
        m.d.comb += act_cand.eq(q.valid & q.allow & q.act_ready)
        act_oh = pick_oldest(act_cand, "act_grant")
        onehot_mux(act_oh, q.bank, iss.act_bank)
        onehot_mux(act_oh, q.row, iss.act_row)

        pre_cand = Signal(nb, name="pre_cand")
        pre_block = draining | ~st.rfc_ok | p.ref | p.prea
        for b in range(nb):
            normal = ~q.has_hit[b] & (Const(1) if cfg.page_policy == "closed" else q.has_miss[b])
            m.d.comb += pre_cand[b].eq(
                st.bank_open[b] & st.pre_ok[b] & ~pre_block
                & ~(p.pre & (p.pre_bank == b)) & ~(p_col & (p.col_bank == b))
                & Mux(q.strict, q.oldest_miss[b], normal))
        lowest_index(pre_cand, nb, iss.pre_bank)
        pre_first = Signal(nb, name="pre_first")  # the lowest candidate bank, one-hot
        for b in range(nb):
            m.d.comb += pre_first[b].eq(pre_cand[b] & ~pre_cand[:b].any() if b else pre_cand[0])

        # refresh: PREA when every open bank may be precharged, REF when all closed and tRP met
        all_pre_ok = (~st.bank_open | st.pre_ok).all()
        prea_go = draining & st.bank_open.any() & all_pre_ok & st.rfc_ok & ~p_col & ~p.act & ~p.prea & ~p.ref
        ref_go = draining & ~st.bank_open.any() & st.act_ok.all() & st.rfc_ok & ~p_any
        # Priority REF > PREA > ACT > PRE; ACT and PRE candidates exist only while not draining,
        # REF and PREA only while draining, so only PREA/REF and ACT/PRE need a priority term.
        act_go, pre_go = act_cand.any() & ~act_block, pre_cand.any()
        m.d.comb += [
            iss.ref.eq(ref_go),
            iss.prea.eq(prea_go & ~ref_go),
            iss.act.eq(act_go),
            iss.pre.eq(pre_go & ~act_go),
            iss.act_banks.eq(Mux(act_go, banks_of(act_oh), 0)),
            iss.pre_banks.eq(pre_first & ~act_go.replicate(nb)),
        ]
        return m
