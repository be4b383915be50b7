"""Bank state and timing counters of one HBM2 pseudo-channel.

One saturating down-counter per timing constraint and scope: per bank tRCD (ACT to RD/WR), tRC/tRP
(to the next ACT), tRAS/tRTP/write recovery (to PRE); per bank group tRRD_L, tCCD_L and tWTR_L; per
pseudo-channel tRRD_S, tCCD_S, tWTR_S, tRTW, the burst length on the data bus, tRFC, and four
counters for the rolling tFAW window (JESD235 timing parameters; the same distances the checker
``verif/jedec_checker.py`` enforces). A command issued at cycle t with a minimum distance d to a later
command loads ``d - 1`` into the counter (keeping the larger pending wait); the later command is
allowed when the counter reads 0, so at t + d at the earliest.
"""

from __future__ import annotations

from amaranth.hdl import Cat, Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from .config import HBMConfig
from .interface import bank_status_signature, issue_layout

__all__ = ["BankTiming"]


class _Counter:
    """Saturating down-counter; ``load(cond, distance)`` makes the next command wait ``distance``
    cycles after this one (keeps the larger of the pending and the new wait)."""

    def __init__(self, name: str, limit: int):
        self.width = max(1, limit.bit_length())
        self.value = Signal(self.width, name=name)
        self.loads: list[tuple] = []

    @property
    def ok(self):
        return self.value == 0

    def load(self, cond, distance: int) -> None:
        if distance > 1:
            self.loads.append((cond, distance - 1))

    def elaborate(self, m: Module) -> None:
        nxt = Mux(self.value == 0, 0, self.value - 1)
        for cond, value in self.loads:
            nxt = Mux(cond & (nxt < value), value, nxt)
        m.d.sync += self.value.eq(nxt)


class BankTiming(wiring.Component):
    """Open rows and timing counters of one pseudo-channel's banks.

    Ports:
        issue: ``In(issue_layout(config))`` -- the commands issued this cycle; they take effect on
            ``status`` from the next cycle.
        status: ``Out(bank_status_signature(config))`` -- open rows and which commands each bank,
            bank group and the pseudo-channel allow this cycle.

    Args:
        config: :class:`~hw.hbm.config.HBMConfig` (geometry and timing set; cycles of tCK).

    Raises:
        TypeError: ``config`` is not an :class:`HBMConfig`.
    """

    def __init__(self, config: HBMConfig):
        if not isinstance(config, HBMConfig):
            raise TypeError(f"config must be an HBMConfig; got {config!r}")
        self.config = config
        super().__init__({"issue": In(issue_layout(config)), "status": Out(bank_status_signature(config))})

    def elaborate(self, platform):
        cfg, t = self.config, self.config.timing
        m = Module()
        nb, n_bg, n_bpg = cfg.banks, cfg.bank_groups, cfg.banks_per_group
        bank_bg = [b // n_bpg for b in range(nb)]
        bc = t.burst_cycles
        cnt_act = [_Counter(f"b{b}_act_wait", max(t.tRC, t.tRP)) for b in range(nb)]
        cnt_col = [_Counter(f"b{b}_col_wait", t.tRCD) for b in range(nb)]
        cnt_pre = [_Counter(f"b{b}_pre_wait", max(t.tRAS, t.tRTP, t.CWL + bc + t.tWR)) for b in range(nb)]
        bg_act = [_Counter(f"bg{g}_act_wait", t.tRRD_L) for g in range(n_bg)]
        bg_rd = [_Counter(f"bg{g}_rd_wait", max(t.tCCD_L, t.CWL + bc + t.tWTR_L)) for g in range(n_bg)]
        bg_wr = [_Counter(f"bg{g}_wr_wait", t.tCCD_L) for g in range(n_bg)]
        ch_act = _Counter("ch_act_wait", t.tRRD_S)
        ch_rd = _Counter("ch_rd_wait", max(t.tCCD_S, bc, t.CWL + bc + t.tWTR_S))
        ch_wr = _Counter("ch_wr_wait", max(t.tCCD_S, bc, t.tRTW))
        ch_rfc = _Counter("ch_rfc_wait", t.tRFC)
        faw = [_Counter(f"faw{k}_wait", t.tFAW) for k in range(4)]
        faw_ptr = Signal(2, name="faw_ptr")

        i, st = self.issue, self.status
        for b in range(nb):
            act_b = i.act & (i.act_bank == b)
            pre_b = (i.pre & (i.pre_bank == b)) | i.prea
            rd_b = i.rd & (i.col_bank == b)
            wr_b = i.wr & (i.col_bank == b)
            cnt_act[b].load(act_b, t.tRC)
            cnt_act[b].load(pre_b, t.tRP)
            cnt_col[b].load(act_b, t.tRCD)
            cnt_pre[b].load(act_b, t.tRAS)
            cnt_pre[b].load(rd_b, t.tRTP)
            cnt_pre[b].load(wr_b, t.CWL + bc + t.tWR)
            with m.If(act_b):
                m.d.sync += [st.bank_open[b].eq(1), st.open_row[b].eq(i.act_row)]
            with m.Elif(pre_b):
                m.d.sync += st.bank_open[b].eq(0)
        for g in range(n_bg):
            bank_in_g = [b for b in range(nb) if bank_bg[b] == g]
            act_g = i.act & Cat(*(i.act_bank == b for b in bank_in_g)).any()
            col_g = Cat(*(i.col_bank == b for b in bank_in_g)).any()
            bg_act[g].load(act_g, t.tRRD_L)
            bg_rd[g].load(i.rd & col_g, t.tCCD_L)
            bg_rd[g].load(i.wr & col_g, t.CWL + bc + t.tWTR_L)
            bg_wr[g].load(i.wr & col_g, t.tCCD_L)
        ch_act.load(i.act, t.tRRD_S)
        ch_rd.load(i.rd, max(t.tCCD_S, bc))
        ch_rd.load(i.wr, t.CWL + bc + t.tWTR_S)
        ch_wr.load(i.wr, max(t.tCCD_S, bc))
        ch_wr.load(i.rd, t.tRTW)
        ch_rfc.load(i.ref, t.tRFC)
        for k in range(4):
            faw[k].load(i.act & (faw_ptr == k), t.tFAW)
        for c in [*cnt_act, *cnt_col, *cnt_pre, *bg_act, *bg_rd, *bg_wr, ch_act, ch_rd, ch_wr, ch_rfc, *faw]:
            c.elaborate(m)
        with m.If(i.act):
            m.d.sync += faw_ptr.eq(faw_ptr + 1)

        faw_ok = Cat(*((faw_ptr == k) & faw[k].ok for k in range(4))).any()
        m.d.comb += [
            st.act_ok.eq(Cat(*(c.ok for c in cnt_act))),
            st.col_ok.eq(Cat(*(c.ok for c in cnt_col))),
            st.pre_ok.eq(Cat(*(c.ok for c in cnt_pre))),
            st.bg_act_ok.eq(Cat(*(c.ok for c in bg_act))),
            st.bg_rd_ok.eq(Cat(*(c.ok for c in bg_rd))),
            st.bg_wr_ok.eq(Cat(*(c.ok for c in bg_wr))),
            st.ch_act_ok.eq(ch_act.ok & faw_ok),
            st.ch_rd_ok.eq(ch_rd.ok),
            st.ch_wr_ok.eq(ch_wr.ok),
            st.rfc_ok.eq(ch_rfc.ok),
        ]
        return m
