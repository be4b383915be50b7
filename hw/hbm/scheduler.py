"""Command choice of one HBM2 pseudo-channel controller: FR-FCFS with an age cap, and refresh."""

from __future__ import annotations

from amaranth.hdl import Cat, Const, Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from .config import HBMConfig
from .interface import bank_status_signature, issue_layout, queue_view_signature

__all__ = ["CommandScheduler"]


class CommandScheduler(wiring.Component):
    """Chooses this cycle's row and column commands (combinational).

    FR-FCFS (Rixner et al., "Memory Access Scheduling", ISCA 2000) with a starvation bound:

    * Column bus: RD/WR of the oldest slot whose row is open (a row hit), whose older same-address
      hazards have left the queue, and whose timing allows it (bank tRCD, bank group and
      pseudo-channel counters; a RD also needs a response-buffer credit).
    * Row bus, by priority: REF (draining, all banks closed, tRP met), PREA (draining, every open
      bank may be precharged), ACT for the oldest slot whose bank is closed, PRE of the lowest bank
      whose open row no queued request hits while one needs another row (open page) or that no
      queued request hits (closed page).
    * Age cap: while any slot is ``aged``, only the oldest slot may issue commands, and PRE only goes
      to the oldest slot's bank if it misses there.
    * While draining for a refresh, or within tRFC of a REF, no ACT, PRE, RD or WR is chosen.

    Ports:
        queue: ``In(queue_view_signature(config))`` -- the request slots.
        banks: ``In(bank_status_signature(config))`` -- bank state and timing.
        draining: ``In(1)`` -- a refresh is pending (:class:`~hw.hbm.refresh.RefreshTimer`).
        rd_credit: ``In(1)`` -- the read-response buffer has room for one more burst.
        issue: ``Out(issue_layout(config))`` -- the chosen commands.

    Args:
        config: :class:`~hw.hbm.config.HBMConfig` (``queue_depth``, ``page_policy``, geometry).

    Raises:
        TypeError: ``config`` is not an :class:`HBMConfig`.
    """

    def __init__(self, config: HBMConfig):
        if not isinstance(config, HBMConfig):
            raise TypeError(f"config must be an HBMConfig; got {config!r}")
        self.config = config
        super().__init__({
            "queue": In(queue_view_signature(config)),
            "banks": In(bank_status_signature(config)),
            "draining": In(1),
            "rd_credit": In(1),
            "issue": Out(issue_layout(config)),
        })

    def elaborate(self, platform):
        cfg = self.config
        m = Module()
        n, nb, n_bpg = cfg.queue_depth, cfg.banks, cfg.banks_per_group
        bank_bg = [b // n_bpg for b in range(nb)]
        q, st, iss = self.queue, self.banks, self.issue
        draining = self.draining

        strict = Signal(name="strict_order")
        m.d.comb += strict.eq(q.aged.any())
        allow = Signal(n, name="q_allow")
        m.d.comb += allow.eq(Mux(strict, q.oldest, q.valid))
        bank_of = [[Signal(name=f"q{i}_is_b{b}") for b in range(nb)] for i in range(n)]
        for i in range(n):
            for b in range(nb):
                m.d.comb += bank_of[i][b].eq(q.bank[i] == b)

        def by_bank(i, sigs):
            """1-bit per-bank signal ``sigs[b]`` selected by slot i's bank."""
            return Cat(*(bank_of[i][b] & sigs[b] for b in range(nb))).any()

        def by_bg(i, sigs):
            return Cat(*(bank_of[i][b] & sigs[bank_bg[b]] for b in range(nb))).any()

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

        def lowest_index(bits_sig, count, out):
            """Index of the lowest set bit of ``bits_sig`` (0 when none is set)."""
            expr = Const(0, out.shape())
            for i in reversed(range(count)):
                expr = Mux(bits_sig[i], i, expr)
            m.d.comb += out.eq(expr)

        # ---------------------------------------------------------------- column command
        col_blocked = draining | ~st.rfc_ok
        col_cand = Signal(n, name="col_cand")
        for i in range(n):
            rd_ok = st.ch_rd_ok & by_bg(i, st.bg_rd_ok) & self.rd_credit
            wr_ok = st.ch_wr_ok & by_bg(i, st.bg_wr_ok)
            m.d.comb += col_cand[i].eq(
                allow[i] & q.hit[i] & q.deps_clear[i] & by_bank(i, st.col_ok)
                & Mux(q.write[i], wr_ok, rd_ok) & ~col_blocked)
        col_oh = pick_oldest(col_cand, "col_grant")
        col_is_wr = Signal(name="col_is_wr")
        onehot_mux(col_oh, q.write, col_is_wr)
        onehot_mux(col_oh, q.bank, iss.col_bank)
        onehot_mux(col_oh, q.row, iss.col_row)
        onehot_mux(col_oh, q.col, iss.col_col)
        onehot_mux(col_oh, q.tag, iss.col_tag)
        lowest_index(col_oh, n, iss.col_slot)
        m.d.comb += iss.col_grant.eq(col_oh)

        # ---------------------------------------------------------------- row command
        act_global = st.ch_act_ok & st.rfc_ok & ~draining
        act_cand = Signal(n, name="act_cand")
        for i in range(n):
            m.d.comb += act_cand[i].eq(
                allow[i] & ~by_bank(i, st.bank_open) & by_bank(i, st.act_ok) & by_bg(i, st.bg_act_ok)
                & act_global)
        act_oh = pick_oldest(act_cand, "act_grant")
        onehot_mux(act_oh, q.bank, iss.act_bank)
        onehot_mux(act_oh, q.row, iss.act_row)

        has_hit = Signal(nb, name="bank_has_hit")
        has_miss = Signal(nb, name="bank_has_miss")
        oldest_miss_bank = Signal(nb, name="oldest_miss_bank")
        for b in range(nb):
            m.d.comb += [
                has_hit[b].eq(Cat(*(q.valid[i] & q.hit[i] & bank_of[i][b] for i in range(n))).any()),
                has_miss[b].eq(Cat(*(q.valid[i] & ~q.hit[i] & bank_of[i][b] for i in range(n))).any()),
                oldest_miss_bank[b].eq(Cat(*(q.oldest[i] & ~q.hit[i] & bank_of[i][b] for i in range(n))).any()),
            ]
        pre_cand = Signal(nb, name="pre_cand")
        for b in range(nb):
            normal = ~has_hit[b] & (Const(1) if cfg.page_policy == "closed" else has_miss[b])
            m.d.comb += pre_cand[b].eq(
                st.bank_open[b] & st.pre_ok[b] & st.rfc_ok & ~draining & Mux(strict, oldest_miss_bank[b], normal))
        lowest_index(pre_cand, nb, iss.pre_bank)

        # refresh: PREA when every open bank may be precharged, REF when all closed and tRP met
        all_pre_ok = (~st.bank_open | st.pre_ok).all()
        prea_go = draining & st.bank_open.any() & all_pre_ok & st.rfc_ok
        ref_go = draining & ~st.bank_open.any() & st.act_ok.all() & st.rfc_ok
        act_go, pre_go = act_cand.any(), pre_cand.any()
        m.d.comb += [
            iss.ref.eq(ref_go),
            iss.prea.eq(prea_go & ~ref_go),
            iss.act.eq(act_go & ~prea_go & ~ref_go),
            iss.pre.eq(pre_go & ~act_go & ~prea_go & ~ref_go),
        ]
        # A column command never targets the bank being precharged in the same cycle (it would have
        # no hit there), but guard it anyway so the two buses can never disagree.
        col_pre_clash = iss.pre & (iss.col_bank == iss.pre_bank)
        col_go = col_cand.any()
        m.d.comb += [
            iss.rd.eq(col_go & ~col_is_wr & ~col_pre_clash),
            iss.wr.eq(col_go & col_is_wr & ~col_pre_clash),
        ]
        return m
