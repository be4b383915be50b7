"""Request queue of one HBM2 pseudo-channel controller: slots, age and hazard matrices, row hits
and the per-slot readiness flags the command choice reads."""

from __future__ import annotations

from amaranth.hdl import Cat, Const, Module, Mux, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from .config import HBMConfig
from .interface import bank_status_signature, check_config, issue_layout, queue_view_signature, request_layout

__all__ = ["RequestQueue"]


class RequestQueue(wiring.Component):
    """``queue_depth`` request slots that the command choice reads in parallel.

    Data never moves between slots: an **age matrix** orders them (``older[i]`` bit j: slot j entered
    before slot i), a **hazard matrix** records, when a request enters, the queued requests to the
    same address it must not overtake (read-after-write, write-after-read, write-after-write), and a
    per-slot **row-hit** bit tracks whether the slot's row is open in its bank, updated by every
    ACT/PRE/PREA on the pins. A slot leaves the queue at the end of the cycle in which its column
    command is decided (``retire``); a write's data waits in a ``queue_depth``-entry memory and is
    read out when its WR is on the pins.

    Readiness is computed one cycle ahead and registered, so the command choice starts from flip-flops:
    ``col_ready`` / ``act_ready`` of the next cycle come from the slot's next state and the banks'
    ``next`` timing (:class:`~hw.hbm.bank_timing.BankTiming`); ``col_ready`` is the AND of three
    registers (the timing and hazard terms, the row hit, the entering request's same-address
    hazard). They do not see the decision of this cycle (the scheduler masks it in the next cycle),
    and a hazard or a per-bank hit on a request that is leaving this cycle still counts for one
    cycle: conservative, never optimistic.

    Ports:
        req: ``In(stream.Signature(request_layout(config)))`` -- ``ready`` while a slot is free; the
            request is decoded into flat bank, row and column.
        issue: ``In(issue_layout(config))`` -- the commands on the pins this cycle (row-hit updates,
            the WR whose data is read out).
        retire: ``In(queue_depth)`` -- one-hot: the slot whose RD/WR is decided this cycle.
        banks / banks_next: ``In(bank_status_signature(config))`` -- bank state this cycle (for the
            entering request's row hit) and next cycle (for the readiness flags).
        view: ``Out(queue_view_signature(config))`` -- the slots as the command choice reads them.
        wdata / wmask: ``Out`` -- data (``burst_bytes * 8`` bits) and byte mask (``burst_bytes`` bits,
            1 = write) of the WR on the pins in the previous cycle.

    Args:
        config: :class:`~hw.hbm.config.HBMConfig` (``queue_depth``, ``age_cap_cycles``, address map).

    Raises:
        TypeError: ``config`` is not an :class:`HBMConfig`.
    """

    def __init__(self, config: HBMConfig):
        self.config = check_config(config)
        super().__init__({
            "req": In(stream.Signature(request_layout(config))),
            "issue": In(issue_layout(config)),
            "retire": In(config.queue_depth),
            "banks": In(bank_status_signature(config)),
            "banks_next": In(bank_status_signature(config)),
            "view": Out(queue_view_signature(config)),
            "wdata": Out(config.burst_bytes * 8),
            "wmask": Out(config.burst_bytes),
        })

    def elaborate(self, platform):
        cfg = self.config
        m = Module()
        n, nb, n_bpg = cfg.queue_depth, cfg.banks, cfg.banks_per_group
        bits, shifts = cfg.field_bits, cfg.field_shifts
        req, iss, q, nx = self.req.payload, self.issue, self.view, self.banks_next
        valid, older = q.valid, q.older

        def field(name):  # zero-width when the field has one value
            return req.addr[shifts[name]:shifts[name] + bits[name]]

        in_row, in_col = field("row"), field("column")
        in_bank = Signal(range(nb), name="in_bank")  # flat bank index bg * banks_per_group + bank
        m.d.comb += in_bank.eq(Cat(field("bank"), field("bank_group")))

        age = [Signal(cfg.age_cap_cycles.bit_length(), name=f"q{i}_age") for i in range(n)]
        dep = [Signal(n, name=f"q{i}_dep") for i in range(n)]  # dep[i][j]: i waits for j
        for i in range(n):
            m.d.comb += q.oldest[i].eq(valid[i] & ~(older[i] & valid).any())

        # ---------------------------------------------------------------- allocation
        # the lowest free slot, one-hot straight from the valid bits (no encode and decode)
        lowest_free = Signal(n, name="q_lowest_free")
        for i in range(n):
            m.d.comb += lowest_free[i].eq(~valid[i] & valid[:i].all() if i else ~valid[0])
        alloc_slot = Signal(range(max(2, n)), name="alloc_slot")
        m.d.comb += [
            alloc_slot.eq(Cat(*(Cat(*(lowest_free[i] for i in range(n) if i >> k & 1)).any()
                                for k in range(len(alloc_slot))))),
            self.req.ready.eq(~valid.all()),
        ]
        accept = Signal(name="accept")
        m.d.comb += accept.eq(self.req.valid & self.req.ready)
        alloc = Signal(n, name="q_alloc")
        m.d.comb += alloc.eq(lowest_free & accept.replicate(n))

        # the banks that the PRE/PREA on the pins this cycle closes
        closes = Signal(nb, name="closing_by_bank")
        for b in range(nb):
            m.d.comb += closes[b].eq(iss.prea | (iss.pre & (iss.pre_bank == b)))

        # With tRCD >= 3 the row hits an ACT on the pins gives (queued slots and the entering
        # request) are added a cycle late (``act_hit``, registered from the row compare). A decision
        # in the next cycle reaches the pins 2 cycles after the ACT, where neither a RD/WR (tRCD)
        # nor a PRE of that bank (tRAS >= tRCD) is allowed, so the hit is not needed earlier; with
        # tRCD = 2 it is (a missing hit there lets PRE close the row its ACT just opened, forever).
        # Closing stays immediate. The compare then ends at a flip-flop, not in the readiness logic.
        late = cfg.timing.tRCD >= 3
        act_hit = Signal(n, name="q_act_hit")  # stays 0 unless late

        # row hit of the entering request in each bank, with the PRE/PREA (and unless late, the ACT)
        # on the pins this cycle
        in_hit_b = Signal(nb, name="in_hit_by_bank")
        act_row_match = Signal(name="in_act_row_match")
        m.d.comb += act_row_match.eq(iss.act_row == in_row)
        for b in range(nb):
            kept = ~closes[b] & self.banks.bank_open[b] & (self.banks.open_row[b] == in_row)
            m.d.comb += in_hit_b[b].eq(kept if late else Mux(iss.act & (iss.act_bank == b), act_row_match, kept))
        in_hit = Signal(name="in_hit")
        m.d.comb += in_hit.eq(in_hit_b.bit_select(in_bank, 1))

        remaining = Signal(n, name="q_remaining")  # occupied after this cycle's column decision
        m.d.comb += remaining.eq(valid & ~self.retire)
        same = Signal(n, name="in_same_addr")  # a queued request to the entering address, one a write
        for j in range(n):
            m.d.comb += same[j].eq((q.bank[j] == in_bank) & (q.row[j] == in_row) & (q.col[j] == in_col)
                                   & (q.write[j] | req.write))

        # ---------------------------------------------------------------- slot update
        hit_kept = Signal(n, name="q_hit_kept")  # queued slots' row hits after the pins' command
        hit_next = Signal(n, name="q_hit_next")
        in_act_hit = iss.act & (iss.act_bank == in_bank) & act_row_match
        for i in range(n):
            act_here = iss.act & (iss.act_bank == q.bank[i])
            closing = iss.prea | (iss.pre & (iss.pre_bank == q.bank[i]))
            if late:
                # a slot free in this cycle may be refilled: its entering request's own compare
                m.d.sync += act_hit[i].eq(Mux(alloc[i], in_act_hit, act_here & (iss.act_row == q.row[i]) & valid[i]))
                m.d.comb += hit_kept[i].eq((q.hit[i] & ~closing) | act_hit[i])
            else:
                m.d.comb += hit_kept[i].eq(Mux(act_here, iss.act_row == q.row[i], q.hit[i] & ~closing))
            m.d.comb += hit_next[i].eq(Mux(alloc[i], in_hit, hit_kept[i]))
            with m.If(alloc[i]):
                m.d.sync += [
                    q.write[i].eq(req.write), q.bank[i].eq(in_bank), q.row[i].eq(in_row),
                    q.col[i].eq(in_col), q.tag[i].eq(req.tag), age[i].eq(0),
                    older[i].eq(remaining), dep[i].eq(same & remaining),
                ]
            with m.Else():
                with m.If(valid[i] & (age[i] != cfg.age_cap_cycles)):
                    m.d.sync += age[i].eq(age[i] + 1)
                # retire finished slots from the matrices (column-wise clear)
                m.d.sync += [older[i].eq(older[i] & remaining), dep[i].eq(dep[i] & remaining)]
        m.d.sync += [valid.eq(remaining | alloc), q.hit.eq(hit_next)]

        # ---------------------------------------------------------------- readiness, one cycle ahead
        # Each queued slot from its own (registered) bank, the entering request once from its
        # address; the allocation only picks between the two at the end.
        def ready(is_b, deps, write):
            def by_bank(sigs):
                return Cat(*(is_b[b] & sigs[b] for b in range(nb))).any()

            def by_bg(sigs):
                return Cat(*(is_b[b] & sigs[b // n_bpg] for b in range(nb))).any()

            rd_ok = by_bg(nx.bg_rd_ok) & nx.ch_rd_ok
            wr_ok = by_bg(nx.bg_wr_ok) & nx.ch_wr_ok
            col = ~deps & by_bank(nx.col_ok) & nx.rfc_ok & Mux(write, wr_ok, rd_ok)
            act = ~by_bank(nx.bank_open) & by_bank(nx.act_ok) & by_bg(nx.bg_act_ok) & nx.ch_act_ok & nx.rfc_ok
            return col, act

        slot_is = [[Signal(name=f"q{i}_is_b{b}") for b in range(nb)] for i in range(n)]
        in_is = [Signal(name=f"in_is_b{b}") for b in range(nb)]
        for b in range(nb):
            m.d.comb += in_is[b].eq(in_bank == b)
            for i in range(n):
                m.d.comb += slot_is[i][b].eq(q.bank[i] == b)
        # Two terms of the column readiness are flip-flops of their own, ANDed after the registers
        # (the scheduler's AND has room for them): the row hit (``q.hit`` is exactly the hit after
        # this cycle's commands, for a queued slot and for the entering request) and the entering
        # request's hazard (a same-address compare against every slot, then an OR over the slots).
        # Both were the longest paths from the request register and the pins into the readiness.
        in_col, in_act = Signal(name="in_col_ready"), Signal(name="in_act_ready")
        m.d.comb += Cat(in_col, in_act).eq(Cat(*ready(in_is, Const(0, 1), req.write)))
        col_ready = Signal(n, name="q_col_ready_nohit")
        blocked = Signal(n, name="q_in_blocked")  # entered last cycle behind a queued hazard
        m.d.comb += q.col_ready.eq(col_ready & q.hit & ~blocked)
        m.d.sync += blocked.eq(alloc & (same & valid).any().replicate(n))
        for i in range(n):
            col, act = ready(slot_is[i], (dep[i] & valid).any(), q.write[i])
            m.d.sync += [
                col_ready[i].eq(Mux(alloc[i], in_col, col)),
                q.act_ready[i].eq(Mux(alloc[i], in_act, act)),
            ]
        # Per bank: queued slots (a slot leaving this cycle still counts) and the entering request,
        # each from its own bank decode, so the entering request's address is a short path. The
        # queued slots' hits are this cycle's, less the PRE/PREA on the pins: an ACT on the pins
        # adds its row hits one cycle late, which only PRE reads, and tRAS holds PRE of that bank
        # off longer than that (its counter is pending, ``pre_ok`` is 0 in the next cycle).
        fast = self.config.timing.tRAS >= 3
        for b in range(nb):
            is_b = Signal(n, name=f"q_is_b{b}")  # the slots addressed to bank b
            hit_b = Signal(n, name=f"q_hit_b{b}")  # their row hits after this cycle's PRE/PREA
            m.d.comb += [
                is_b.eq(Cat(*(slot_is[i][b] for i in range(n)))),
                hit_b.eq(((q.hit | act_hit) & ~closes[b].replicate(n)) if fast else hit_kept),
            ]
            here = valid & is_b
            in_here = accept & in_is[b]
            m.d.sync += [
                q.has_hit[b].eq((here & hit_b).any() | (in_here & in_hit_b[b])),
                q.has_miss[b].eq((here & ~hit_b).any() | (in_here & ~in_hit_b[b])),
                q.oldest_miss[b].eq((q.oldest & ~hit_b & is_b).any()),
            ]
        aged = Cat(*(valid[i] & (age[i] == cfg.age_cap_cycles) for i in range(n))).any()
        m.d.sync += [q.strict.eq(aged), q.allow.eq(Mux(aged, q.oldest, Const((1 << n) - 1, n)))]

        # ---------------------------------------------------------------- write data memory
        m.submodules.wdata_mem = mem = Memory(shape=cfg.burst_bytes * 9, depth=n, init=[])
        w_port, r_port = mem.write_port(), mem.read_port()  # read: synchronous, not transparent
        m.d.comb += [
            w_port.addr.eq(alloc_slot),
            w_port.data.eq(Cat(req.wdata, req.wmask)),
            w_port.en.eq(accept & req.write),
            r_port.addr.eq(iss.col_slot),
            r_port.en.eq(iss.wr),
            self.wdata.eq(r_port.data[:cfg.burst_bytes * 8]),
            self.wmask.eq(r_port.data[cfg.burst_bytes * 8:]),
        ]
        return m
