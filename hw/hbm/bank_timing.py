"""Bank state and timing counters of one HBM2 pseudo-channel.

One saturating down-counter per timing constraint and scope: per bank tRCD (ACT to RD/WR), tRP (to
the next ACT; tRC as well where it exceeds tRAS + tRP), tRAS/tRTP/write recovery (to PRE); per bank
group tRRD_L, tCCD_L and tWTR_L; per pseudo-channel tRRD_S, tCCD_S, tWTR_S, tRTW, the burst length
on the data bus, tRFC, and four counters for the rolling tFAW window (JESD235 timing parameters; the
same distances the checker ``verif/jedec_checker.py`` enforces).

Counting from the pins: a command on the pins at cycle P with a minimum distance d to a later
command loads ``d - 2`` (keeping the larger pending wait) at the end of cycle P. A later command is
*decided* one cycle before it reaches the pins, at D >= P + d - 1, which is when the counter has
counted down to 0; for D = P itself (the earlier command still on the pins) the scheduler masks
every command with d >= 2 (:class:`~hw.hbm.scheduler.CommandScheduler`). So the counters only ever
see registered commands, and every ``ok`` bit is a flip-flop.
"""

from __future__ import annotations

from amaranth.hdl import Cat, Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from .config import HBMConfig
from .interface import bank_status_signature, check_config, issue_layout

__all__ = ["BankTiming"]


class _Counter:
    """Saturating down-counter with a registered ``ok`` (value is 0) and a ``ok_next`` (value
    will be 0 next cycle). ``load(cond, distance)`` makes a decision wait until ``distance`` cycles
    after the command on the pins (loads ``distance - 2``, keeping the larger pending wait)."""

    def __init__(self, name: str, limit: int):
        self.width = max(1, (limit - 2).bit_length())
        self.value = Signal(self.width, name=name)
        self.ok = Signal(name=f"{name}_ok", init=1)
        self.ok_next = Signal(name=f"{name}_ok_next")
        self.loads: list[tuple] = []

    def load(self, cond, distance: int) -> None:
        if distance > 2:
            self.loads.append((cond, distance - 2))

    def elaborate(self, m: Module) -> None:
        top = (1 << self.width) - 1  # compares against the largest value are left out (always true)
        nxt = Mux(self.value == 0, 0, self.value - 1)
        for cond, value in self.loads:  # at most one load per cycle: one command per bus and bank
            nxt = Mux(cond & (self.value <= value) if value < top else cond, value, nxt)
        m.d.sync += self.value.eq(nxt)
        # not from nxt: from the register and the load conditions, to keep the path short
        pending = Cat(*(cond for cond, _ in self.loads)).any() if self.loads else 0
        low = (self.value <= 1) if top > 1 else 1
        m.d.comb += self.ok_next.eq(low & ~pending)
        m.d.sync += self.ok.eq(self.ok_next)


class BankTiming(wiring.Component):
    """Open rows and timing counters of one pseudo-channel's banks.

    Ports:
        issue: ``In(issue_layout(config))`` -- the commands on the pins this cycle (registered).
        status: ``Out(bank_status_signature(config))`` -- registered: the banks' state and timing
            with every command on the pins up to the previous cycle.
        next: ``Out(bank_status_signature(config))`` -- the same one cycle ahead: with the command
            on the pins this cycle (``status`` of the next cycle; for per-slot readiness flags).

    Args:
        config: :class:`~hw.hbm.config.HBMConfig` (geometry and timing set; cycles of tCK).

    Raises:
        TypeError: ``config`` is not an :class:`HBMConfig`.
    """

    def __init__(self, config: HBMConfig):
        self.config = check_config(config)
        super().__init__({
            "issue": In(issue_layout(config)),
            "status": Out(bank_status_signature(config)),
            "next": Out(bank_status_signature(config)),
        })

    def elaborate(self, platform):
        cfg, t = self.config, self.config.timing
        m = Module()
        nb, n_bg, n_bpg = cfg.banks, cfg.bank_groups, cfg.banks_per_group
        bank_bg = [b // n_bpg for b in range(nb)]
        bc = t.burst_cycles
        # tRC (ACT to ACT) follows from tRAS (ACT to PRE) and tRP (PRE to ACT) when it is their sum, as
        # in every JEDEC HBM2 set: then the counter waits for tRP only (3 bits instead of 5 per bank),
        # and no counter state exists that could differ without a JEDEC-visible effect.
        rc_needed = t.tRC > t.tRAS + t.tRP
        cnt_act = [_Counter(f"b{b}_act_wait", max(t.tRC if rc_needed else 0, t.tRP)) for b in range(nb)]
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

        i, st, nx = self.issue, self.status, self.next
        for b in range(nb):
            act_b = i.act_banks[b]
            pre_b = i.pre_banks[b] | i.prea
            rd_b = i.rd & i.col_banks[b]
            wr_b = i.wr & i.col_banks[b]
            if rc_needed:
                cnt_act[b].load(act_b, t.tRC)
            cnt_act[b].load(pre_b, t.tRP)
            cnt_col[b].load(act_b, t.tRCD)
            cnt_pre[b].load(act_b, t.tRAS)
            cnt_pre[b].load(rd_b, t.tRTP)
            cnt_pre[b].load(wr_b, t.CWL + bc + t.tWR)
            m.d.comb += [
                nx.bank_open[b].eq(Mux(act_b, 1, Mux(pre_b, 0, st.bank_open[b]))),
                nx.open_row[b].eq(Mux(act_b, i.act_row, st.open_row[b])),
            ]
        m.d.sync += [st.bank_open.eq(nx.bank_open), st.open_row.eq(nx.open_row)]
        for g in range(n_bg):
            bank_in_g = [b for b in range(nb) if bank_bg[b] == g]
            act_g = Cat(*(i.act_banks[b] for b in bank_in_g)).any()
            col_g = Cat(*(i.col_banks[b] for b in bank_in_g)).any()
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
        faw_ptr_next = Mux(i.act, faw_ptr + 1, faw_ptr)
        m.d.sync += faw_ptr.eq(faw_ptr_next)

        def oks(counters, attr):
            return Cat(*(getattr(c, attr) for c in counters))

        for port, attr in ((st, "ok"), (nx, "ok_next")):
            m.d.comb += [
                port.act_ok.eq(oks(cnt_act, attr)),
                port.col_ok.eq(oks(cnt_col, attr)),
                port.pre_ok.eq(oks(cnt_pre, attr)),
                port.bg_act_ok.eq(oks(bg_act, attr)),
                port.bg_rd_ok.eq(oks(bg_rd, attr)),
                port.bg_wr_ok.eq(oks(bg_wr, attr)),
                port.ch_rd_ok.eq(getattr(ch_rd, attr)),
                port.ch_wr_ok.eq(getattr(ch_wr, attr)),
                port.rfc_ok.eq(getattr(ch_rfc, attr)),
            ]
        # tFAW: the window counter the next ACT will use (faw_ptr after this cycle's ACT)
        faw_ok_next = Cat(*((faw_ptr_next == k) & faw[k].ok_next for k in range(4))).any()
        faw_ok = Signal(name="faw_ok", init=1)
        m.d.sync += faw_ok.eq(faw_ok_next)
        m.d.comb += [
            nx.ch_act_ok.eq(ch_act.ok_next & faw_ok_next),
            st.ch_act_ok.eq(ch_act.ok & faw_ok),
        ]
        return m
