"""Request queue of one HBM2 pseudo-channel controller: slots, age and hazard matrices, row hits."""

from __future__ import annotations

from amaranth.hdl import Cat, Const, Module, Mux, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from .config import HBMConfig
from .interface import bank_status_signature, issue_layout, queue_view_signature, request_layout

__all__ = ["RequestQueue"]


class RequestQueue(wiring.Component):
    """``queue_depth`` request slots that the command choice reads in parallel.

    Data never moves between slots: an **age matrix** orders them (``older[i]`` bit j: slot j entered
    before slot i), a **hazard matrix** records, when a request enters, the queued requests to the
    same address it must not overtake (``dep``: read-after-write, write-after-read, write-after-write),
    and a per-slot **row-hit** bit tracks whether the slot's row is open in its bank, updated by every
    ACT/PRE/PREA. A slot leaves the queue in the cycle its column command (RD/WR) is issued; a write's
    data waits in a ``queue_depth``-entry memory and is read out when its WR is issued.

    Ports:
        req: ``In(stream.Signature(request_layout(config)))`` -- ``ready`` while a slot is free; the
            request is decoded into flat bank, row and column.
        issue: ``In(issue_layout(config))`` -- this cycle's commands: the RD/WR's slot leaves; ACT,
            PRE and PREA update the row-hit bits (of queued and of entering requests).
        banks: ``In(bank_status_signature(config))`` -- bank state (``bank_open``, ``open_row``), for
            the entering request's row hit.
        view: ``Out(queue_view_signature(config))`` -- the slots as the command choice reads them.
        wdata / wmask: ``Out`` -- the data (``burst_bytes * 8`` bits) and byte mask (``burst_bytes``
            bits, 1 = write) of the write issued in the previous cycle.

    Args:
        config: :class:`~hw.hbm.config.HBMConfig` (``queue_depth``, ``age_cap_cycles``, address map).

    Raises:
        TypeError: ``config`` is not an :class:`HBMConfig`.
    """

    def __init__(self, config: HBMConfig):
        if not isinstance(config, HBMConfig):
            raise TypeError(f"config must be an HBMConfig; got {config!r}")
        self.config = config
        super().__init__({
            "req": In(stream.Signature(request_layout(config))),
            "issue": In(issue_layout(config)),
            "banks": In(bank_status_signature(config)),
            "view": Out(queue_view_signature(config)),
            "wdata": Out(config.burst_bytes * 8),
            "wmask": Out(config.burst_bytes),
        })

    def elaborate(self, platform):
        cfg = self.config
        m = Module()
        n, nb = cfg.queue_depth, cfg.banks
        bits, shifts = cfg.field_bits, cfg.field_shifts
        bw = cfg.burst_bytes * 8
        req, iss = self.req.payload, self.issue
        q = self.view
        valid, older = q.valid, q.older

        def field(name):  # zero-width when the field has one value
            return req.addr[shifts[name]:shifts[name] + bits[name]]

        in_row, in_col = field("row"), field("column")
        in_bank = Signal(range(nb), name="in_bank")  # flat bank index bg * banks_per_group + bank
        m.d.comb += in_bank.eq(Cat(field("bank"), field("bank_group")))

        age = [Signal(cfg.age_cap_cycles.bit_length(), name=f"q{i}_age") for i in range(n)]
        dep = [Signal(n, name=f"q{i}_dep") for i in range(n)]  # dep[i][j]: i waits for j
        for i in range(n):
            m.d.comb += [
                q.oldest[i].eq(valid[i] & ~(older[i] & valid).any()),
                q.aged[i].eq(valid[i] & (age[i] == cfg.age_cap_cycles)),
                q.deps_clear[i].eq(~(dep[i] & valid).any()),
            ]

        # ---------------------------------------------------------------- allocation
        free = Signal(n, name="q_free")
        m.d.comb += free.eq(~valid)
        alloc_slot = Signal(range(max(2, n)), name="alloc_slot")  # lowest free slot
        expr = Const(0, alloc_slot.shape())
        for i in reversed(range(n)):
            expr = Mux(free[i], i, expr)
        m.d.comb += alloc_slot.eq(expr)
        m.d.comb += self.req.ready.eq(free.any())
        accept = self.req.valid & self.req.ready
        alloc = Signal(n, name="q_alloc")
        m.d.comb += alloc.eq(Mux(accept, 1 << alloc_slot, 0))

        # row hit of the entering request, seeing this cycle's ACT/PRE/PREA
        in_open = self.banks.bank_open.bit_select(in_bank, 1)
        in_open_row_hit = Cat(*((in_bank == b) & (self.banks.open_row[b] == in_row) for b in range(nb))).any()
        in_hit = Signal(name="in_hit")
        m.d.comb += in_hit.eq(Mux(iss.act & (iss.act_bank == in_bank), iss.act_row == in_row,
                                  ~(iss.prea | (iss.pre & (iss.pre_bank == in_bank)))
                                  & in_open & in_open_row_hit))

        remaining = Signal(n, name="q_remaining")  # occupied after this cycle's column command
        m.d.comb += remaining.eq(valid & ~Mux(iss.rd | iss.wr, iss.col_grant, 0))
        in_dep = Signal(n, name="in_dep")
        for j in range(n):
            same = (q.bank[j] == in_bank) & (q.row[j] == in_row) & (q.col[j] == in_col)
            m.d.comb += in_dep[j].eq(remaining[j] & same & (q.write[j] | req.write))

        # ---------------------------------------------------------------- slot update
        for i in range(n):
            with m.If(alloc[i]):
                m.d.sync += [
                    q.write[i].eq(req.write), q.bank[i].eq(in_bank), q.row[i].eq(in_row),
                    q.col[i].eq(in_col), q.tag[i].eq(req.tag), age[i].eq(0),
                    older[i].eq(remaining), dep[i].eq(in_dep), q.hit[i].eq(in_hit),
                ]
            with m.Else():
                with m.If(valid[i] & (age[i] != cfg.age_cap_cycles)):
                    m.d.sync += age[i].eq(age[i] + 1)
                with m.If(iss.act & (iss.act_bank == q.bank[i])):
                    m.d.sync += q.hit[i].eq(iss.act_row == q.row[i])
                with m.Elif(iss.prea | (iss.pre & (iss.pre_bank == q.bank[i]))):
                    m.d.sync += q.hit[i].eq(0)
                # retire finished slots from the matrices (column-wise clear)
                m.d.sync += [older[i].eq(older[i] & remaining), dep[i].eq(dep[i] & remaining)]
        m.d.sync += valid.eq(remaining | alloc)

        # ---------------------------------------------------------------- write data memory
        m.submodules.wdata_mem = mem = Memory(shape=bw + cfg.burst_bytes, depth=n, init=[])
        w_port, r_port = mem.write_port(), mem.read_port()  # read: synchronous, not transparent
        m.d.comb += [
            w_port.addr.eq(alloc_slot),
            w_port.data.eq(Cat(req.wdata, req.wmask)),
            w_port.en.eq(accept & req.write),
            r_port.addr.eq(iss.col_slot),
            r_port.en.eq(iss.wr),
            self.wdata.eq(r_port.data[:bw]),
            self.wmask.eq(r_port.data[bw:]),
        ]
        return m
