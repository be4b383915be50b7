"""HBM2-style pseudo-channel DRAM controller (one pseudo-channel per instance).

Front end: a native request stream (``req``: read or posted write of one burst, byte mask, tag) and a
read-response stream (``rsp``: tag + burst data). Back end: the command/data interface of one HBM2
pseudo-channel (:func:`dram_signature`), the interface the device model ``verif/hbm_device.py`` and the
checker ``verif/jedec_checker.py`` sit on.

Scheduling (FR-FCFS with an age cap, the policy of Rixner et al., "Memory Access Scheduling", ISCA
2000, with the starvation bound real controllers add):

* The request queue has ``queue_depth`` slots. An **age matrix** (``older[i][j]`` = slot j is older
  than slot i) orders them without moving data; every choice below takes the oldest eligible slot.
* Per cycle at most one **column command** (RD/WR) and one **row command** (ACT/PRE/PREA/REF) are
  issued: the HBM2 pseudo-channel has separate row and column command buses.
* Column: the oldest request whose row is open (a row hit) and whose timing allows it. Row: ACT for
  the oldest request whose bank is closed; otherwise PRE of a bank whose open row no queued request
  hits while some queued request needs another row (open-page policy), or that no queued request hits
  (closed-page policy).
* Ordering: a request may not issue its column command while an older request to the **same
  address** with at least one of the two a write is still queued (read-after-write, write-after-read
  and write-after-write hazards); the dependency is recorded in a matrix when the request enters.
  Writes are posted: once accepted, a write is visible to every later request.
* Age cap: a request that waited ``age_cap_cycles`` switches the pseudo-channel to strict
  oldest-first (only the oldest request may issue commands) until it is served, so no request waits
  forever behind a stream of row hits.
* Refresh (all-bank REF): one REF falls due every tREFI cycles. Due REFs are issued when the queue is
  empty, or forced once ``max(1, max_refresh_postpone)`` are owed: the controller then stops issuing
  ACT/RD/WR, precharges every bank (PREA) when tRAS/tRTP/tWR allow, waits tRP and issues REF, then
  nothing for tRFC. At most ``max_refresh_postpone`` REFs are owed at any time, so the gap between
  two REFs stays under ``(max_refresh_postpone + 1) * tREFI`` plus the drain (checked by the
  checker's REFRESH_GAP/REFRESH_RATE rules).
* Timing: one saturating down-counter per constraint and scope (bank: tRCD, tRAS/tRTP/tWR, tRP/tRC;
  bank group: tRRD_L, tCCD_L, tWTR_L; pseudo-channel: tRRD_S, tCCD_S, tWTR_S, tRTW, burst length on
  the data bus, tRFC; four counters for the tFAW window). A command at cycle t with minimum distance
  d loads ``d - 1`` into the counter (keeping the larger value); the command is allowed at 0.

Timing of the back end: command outputs are registered. A RD on the pins at cycle T expects
``rdata_valid`` with the whole burst at T + CL; a WR at T drives ``wdata``/``wmask``/``wdata_valid``
at T + CWL (the PHY serializes the burst into ``burst_length`` beats; ``wmask`` bit i = 1 writes
byte i, the opposite polarity of the DRAM DM pin).
"""

from __future__ import annotations

from amaranth.hdl import Cat, Const, Module, Mux, Signal
from amaranth.lib import data, enum, fifo, stream, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from .config import HBMConfig

__all__ = ["ColCmd", "PseudoChannelController", "RowCmd", "dram_signature", "request_layout",
           "response_layout"]


class RowCmd(enum.Enum, shape=3):
    """Row command bus of a pseudo-channel (JESD235 row commands; NOP = no command)."""

    NOP = 0
    ACT = 1
    PRE = 2
    PREA = 3
    REF = 4


class ColCmd(enum.Enum, shape=2):
    """Column command bus of a pseudo-channel (NOP = no command)."""

    NOP = 0
    RD = 1
    WR = 2


def request_layout(config: HBMConfig) -> data.StructLayout:
    """Native request: ``write`` (1 bit), byte ``addr`` (``address_bits``, burst aligned; the channel
    field is ignored by a pseudo-channel controller), ``tag`` (``tag_bits``), ``wdata``
    (``burst_bytes * 8`` bits, byte i in bits 8i..8i+7), ``wmask`` (``burst_bytes`` bits, 1 = write)."""
    return data.StructLayout({
        "write": 1,
        "addr": config.address_bits,
        "tag": config.tag_bits,
        "wdata": config.burst_bytes * 8,
        "wmask": config.burst_bytes,
    })


def response_layout(config: HBMConfig) -> data.StructLayout:
    """Read response: ``tag`` (``tag_bits``) and ``rdata`` (``burst_bytes * 8`` bits)."""
    return data.StructLayout({"tag": config.tag_bits, "rdata": config.burst_bytes * 8})


def dram_signature(config: HBMConfig) -> wiring.Signature:
    """Controller-side view of one pseudo-channel's command and data interface.

    ``row_*``: row command bus (``row_cmd`` a :class:`RowCmd`, bank group, bank, row address).
    ``col_*``: column command bus (``col_cmd`` a :class:`ColCmd`, bank group, bank, column in bursts;
    ``col_row`` is the open row the command targets, for the checker, not a DRAM pin).
    ``wdata``/``wmask``/``wdata_valid``: one write burst at WR + CWL. ``rdata``/``rdata_valid`` (in):
    one read burst at RD + CL.
    """
    bits = config.field_bits
    w = config.burst_bytes * 8
    return wiring.Signature({
        "row_cmd": Out(RowCmd),
        "row_bg": Out(max(1, bits["bank_group"])),
        "row_bank": Out(max(1, bits["bank"])),
        "row_row": Out(max(1, bits["row"])),
        "col_cmd": Out(ColCmd),
        "col_bg": Out(max(1, bits["bank_group"])),
        "col_bank": Out(max(1, bits["bank"])),
        "col_row": Out(max(1, bits["row"])),
        "col_column": Out(max(1, bits["column"])),
        "wdata": Out(w),
        "wmask": Out(config.burst_bytes),
        "wdata_valid": Out(1),
        "rdata": In(w),
        "rdata_valid": In(1),
    })


def response_fifo_depth(config: HBMConfig) -> int:
    """Read-response buffer entries: enough for back-to-back reads over one CL round trip."""
    t = config.timing
    return max(4, -(-(t.CL + 3) // t.burst_cycles) + 2)


class _Counter:
    """Saturating down-counter; ``load(m, cond, distance)`` makes the next command wait
    ``distance`` cycles after this one (keeps the larger of the pending and the new wait)."""

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


class PseudoChannelController(wiring.Component):
    """Controller for one HBM2 pseudo-channel.

    Ports:
        req: ``In(stream.Signature(request_layout(config)))`` -- reads and posted writes, one burst
            (``burst_bytes`` bytes) each; ``ready`` is high while a queue slot is free.
        rsp: ``Out(stream.Signature(response_layout(config)))`` -- read data with the request's tag,
            in the order the reads were issued to the DRAM (not request order: FR-FCFS reorders).
        dram: :func:`dram_signature` -- to the PHY / device model.
        refresh_owed: ``Out(4)`` -- REFs currently due and not issued (for statistics).

    Args:
        config: :class:`~hw.hbm.config.HBMConfig`; its timing set is built into the counters.

    Raises:
        TypeError: ``config`` is not an :class:`HBMConfig`.
    """

    def __init__(self, config: HBMConfig):
        if not isinstance(config, HBMConfig):
            raise TypeError(f"config must be an HBMConfig; got {config!r}")
        self.config = config
        super().__init__({
            "req": In(stream.Signature(request_layout(config))),
            "rsp": Out(stream.Signature(response_layout(config))),
            "dram": Out(dram_signature(config)),
            "refresh_owed": Out(4),
        })

    def elaborate(self, platform):
        cfg, t = self.config, self.config.timing
        m = Module()
        n = cfg.queue_depth
        bits, shifts = cfg.field_bits, cfg.field_shifts
        n_bg, n_bpg = cfg.bank_groups, cfg.banks_per_group
        nb = cfg.banks
        bgw, bkw = bits["bank_group"], bits["bank"]
        roww, colw = max(1, bits["row"]), max(1, bits["column"])
        bw = cfg.burst_bytes * 8
        closed_policy = cfg.page_policy == "closed"

        # ---------------------------------------------------------------- request decode
        req = self.req.payload
        addr = req.addr

        def field(name):  # zero-width when the field has one value
            return addr[shifts[name]:shifts[name] + bits[name]]

        in_bg, in_bk, in_row, in_col = field("bank_group"), field("bank"), field("row"), field("column")
        in_bank = Signal(range(nb), name="in_bank")  # flat bank index bg * banks_per_group + bank
        m.d.comb += in_bank.eq(Cat(in_bk, in_bg))

        # ---------------------------------------------------------------- queue state
        valid = Signal(n, name="q_valid")
        q_write = [Signal(name=f"q{i}_write") for i in range(n)]
        q_bank = [Signal(range(nb), name=f"q{i}_bank") for i in range(n)]
        q_row = [Signal(roww, name=f"q{i}_row") for i in range(n)]
        q_col = [Signal(colw, name=f"q{i}_col") for i in range(n)]
        q_tag = [Signal(cfg.tag_bits, name=f"q{i}_tag") for i in range(n)]
        q_hit = Signal(n, name="q_hit")
        age_w = cfg.age_cap_cycles.bit_length()
        q_age = [Signal(age_w, name=f"q{i}_age") for i in range(n)]
        older = [Signal(n, name=f"q{i}_older") for i in range(n)]  # older[i][j]: j older than i
        dep = [Signal(n, name=f"q{i}_dep") for i in range(n)]      # dep[i][j]: i waits for j

        m.submodules.wdata_mem = wdata_mem = Memory(shape=bw + cfg.burst_bytes, depth=n, init=[])
        wmem_w = wdata_mem.write_port()
        wmem_r = wdata_mem.read_port()  # synchronous, not transparent

        # ---------------------------------------------------------------- bank state
        bank_open = Signal(nb, name="bank_open")
        open_row = [Signal(roww, name=f"open_row{b}") for b in range(nb)]
        bank_bg = [b // n_bpg for b in range(nb)]
        cnt_act = [_Counter(f"b{b}_act_wait", max(t.tRC, t.tRP)) for b in range(nb)]
        cnt_col = [_Counter(f"b{b}_col_wait", t.tRCD) for b in range(nb)]
        cnt_pre = [_Counter(f"b{b}_pre_wait", max(t.tRAS, t.tRTP, t.CWL + t.burst_cycles + t.tWR))
                   for b in range(nb)]
        bg_act = [_Counter(f"bg{g}_act_wait", t.tRRD_L) for g in range(n_bg)]
        bg_rd = [_Counter(f"bg{g}_rd_wait", max(t.tCCD_L, t.CWL + t.burst_cycles + t.tWTR_L))
                 for g in range(n_bg)]
        bg_wr = [_Counter(f"bg{g}_wr_wait", t.tCCD_L) for g in range(n_bg)]
        ch_act = _Counter("ch_act_wait", t.tRRD_S)
        ch_rd = _Counter("ch_rd_wait", max(t.tCCD_S, t.burst_cycles, t.CWL + t.burst_cycles + t.tWTR_S))
        ch_wr = _Counter("ch_wr_wait", max(t.tCCD_S, t.burst_cycles, t.tRTW))
        ch_rfc = _Counter("ch_rfc_wait", t.tRFC)
        faw = [_Counter(f"faw{k}_wait", t.tFAW) for k in range(4)]
        faw_ptr = Signal(2, name="faw_ptr")
        counters = [*cnt_act, *cnt_col, *cnt_pre, *bg_act, *bg_rd, *bg_wr, ch_act, ch_rd, ch_wr,
                    ch_rfc, *faw]

        # ---------------------------------------------------------------- read response path
        rsp_depth = response_fifo_depth(cfg)
        m.submodules.tag_fifo = tag_fifo = fifo.SyncFIFO(width=cfg.tag_bits, depth=rsp_depth)
        m.submodules.rsp_fifo = rsp_fifo = fifo.SyncFIFOBuffered(width=cfg.tag_bits + bw, depth=rsp_depth)
        inflight = Signal(range(rsp_depth + 1), name="reads_inflight")
        rd_credit = Signal(name="rd_credit")
        m.d.comb += rd_credit.eq(inflight + rsp_fifo.level < rsp_depth)

        # ---------------------------------------------------------------- refresh state
        refi = Signal(range(t.tREFI), name="refi_count")
        owed = Signal(4, name="refresh_owed_count")
        force_at = max(1, cfg.max_refresh_postpone)
        draining = Signal(name="refresh_draining")
        m.d.comb += self.refresh_owed.eq(owed)

        # ---------------------------------------------------------------- derived per-slot terms
        any_valid = valid.any()
        oldest = Signal(n, name="q_oldest")  # one-hot oldest valid slot
        for i in range(n):
            m.d.comb += oldest[i].eq(valid[i] & ~(older[i] & valid).any())
        aged = Signal(n, name="q_aged")
        for i in range(n):
            m.d.comb += aged[i].eq(valid[i] & (q_age[i] == cfg.age_cap_cycles))
        strict = Signal(name="strict_order")
        m.d.comb += strict.eq(aged.any())
        allow = Signal(n, name="q_allow")
        m.d.comb += allow.eq(Mux(strict, oldest, valid))

        bank_of = [[Signal(name=f"q{i}_is_b{b}") for b in range(nb)] for i in range(n)]
        for i in range(n):
            for b in range(nb):
                m.d.comb += bank_of[i][b].eq(q_bank[i] == b)

        def by_bank(i, sigs):
            """1-bit per-bank signal ``sigs[b]`` selected by slot i's bank."""
            return Cat(*(bank_of[i][b] & sigs[b] for b in range(nb))).any()

        def by_bg(i, sigs):
            return Cat(*(bank_of[i][b] & sigs[bank_bg[b]] for b in range(nb))).any()

        def pick_oldest(cand, name):
            """One-hot of the oldest set bit of ``cand`` (an n-bit signal)."""
            oh = Signal(n, name=name)
            for i in range(n):
                m.d.comb += oh[i].eq(cand[i] & ~(older[i] & cand).any())
            return oh

        # Combinational choices are written as expressions (no comb ``m.If``): Yosys then emits
        # ``assign`` statements, which every simulator evaluates at time 0 (an ``always @*`` block
        # whose inputs never change after time 0 stays X in Icarus).
        def onehot_mux(oh, values, width):
            out = Signal(width)
            terms = [Mux(oh[i], values[i], 0) for i in range(n)]
            acc = terms[0]
            for term in terms[1:]:
                acc = acc | term
            m.d.comb += out.eq(acc)
            return out

        def lowest_index(bits_sig, count, width_range, name):
            """Index of the lowest set bit of ``bits_sig`` (0 when none is set)."""
            out = Signal(width_range, name=name)
            expr = Const(0, out.shape())
            for i in reversed(range(count)):
                expr = Mux(bits_sig[i], i, expr)
            m.d.comb += out.eq(expr)
            return out

        col_blocked = draining | ~ch_rfc.ok
        deps_clear = Signal(n, name="q_deps_clear")
        for i in range(n):
            m.d.comb += deps_clear[i].eq(~(dep[i] & valid).any())

        # ---------------------------------------------------------------- column command choice
        col_cand = Signal(n, name="col_cand")
        for i in range(n):
            rd_ok = ch_rd.ok & by_bg(i, [c.ok for c in bg_rd]) & rd_credit
            wr_ok = ch_wr.ok & by_bg(i, [c.ok for c in bg_wr])
            m.d.comb += col_cand[i].eq(
                allow[i] & q_hit[i] & deps_clear[i] & by_bank(i, [c.ok for c in cnt_col])
                & Mux(q_write[i], wr_ok, rd_ok) & ~col_blocked)
        col_oh = pick_oldest(col_cand, "col_grant")
        col_go = col_cand.any()
        col_is_wr = onehot_mux(col_oh, q_write, 1)
        col_bank = onehot_mux(col_oh, q_bank, max(1, (nb - 1).bit_length()))
        col_row = onehot_mux(col_oh, q_row, roww)
        col_col = onehot_mux(col_oh, q_col, colw)
        col_tag = onehot_mux(col_oh, q_tag, cfg.tag_bits)
        col_slot = lowest_index(col_oh, n, range(max(2, n)), "col_slot")

        # ---------------------------------------------------------------- row command choice
        faw_ok = Cat(*((faw_ptr == k) & faw[k].ok for k in range(4))).any()
        act_global = ch_act.ok & faw_ok & ch_rfc.ok & ~draining
        act_cand = Signal(n, name="act_cand")
        for i in range(n):
            m.d.comb += act_cand[i].eq(
                allow[i] & ~by_bank(i, bank_open) & by_bank(i, [c.ok for c in cnt_act])
                & by_bg(i, [c.ok for c in bg_act]) & act_global)
        act_oh = pick_oldest(act_cand, "act_grant")
        act_go = act_cand.any()
        act_bank = onehot_mux(act_oh, q_bank, max(1, (nb - 1).bit_length()))
        act_row = onehot_mux(act_oh, q_row, roww)

        has_hit = Signal(nb, name="bank_has_hit")
        has_miss = Signal(nb, name="bank_has_miss")
        oldest_miss_bank = Signal(nb, name="oldest_miss_bank")
        for b in range(nb):
            m.d.comb += [
                has_hit[b].eq(Cat(*(valid[i] & q_hit[i] & bank_of[i][b] for i in range(n))).any()),
                has_miss[b].eq(Cat(*(valid[i] & ~q_hit[i] & bank_of[i][b] for i in range(n))).any()),
                oldest_miss_bank[b].eq(Cat(*(oldest[i] & ~q_hit[i] & bank_of[i][b]
                                             for i in range(n))).any()),
            ]
        pre_cand = Signal(nb, name="pre_cand")
        for b in range(nb):
            normal = ~has_hit[b] & (Const(1) if closed_policy else has_miss[b])
            m.d.comb += pre_cand[b].eq(
                bank_open[b] & cnt_pre[b].ok & ch_rfc.ok & ~draining
                & Mux(strict, oldest_miss_bank[b], normal))
        pre_go = pre_cand.any()
        pre_bank = lowest_index(pre_cand, nb, range(nb), "pre_bank")

        # refresh: PREA when every open bank may be precharged, REF when all closed and tRP met
        all_pre_ok = Cat(*(~bank_open[b] | cnt_pre[b].ok for b in range(nb))).all()
        all_act_ok = Cat(*(c.ok for c in cnt_act)).all()
        prea_go = draining & bank_open.any() & all_pre_ok & ch_rfc.ok
        ref_go = draining & ~bank_open.any() & all_act_ok & ch_rfc.ok

        do_act = Signal(name="do_act")
        do_pre = Signal(name="do_pre")
        do_prea = Signal(name="do_prea")
        do_ref = Signal(name="do_ref")
        do_rd = Signal(name="do_rd")
        do_wr = Signal(name="do_wr")
        m.d.comb += [
            do_ref.eq(ref_go),
            do_prea.eq(prea_go & ~ref_go),
            do_act.eq(act_go & ~prea_go & ~ref_go),
            do_pre.eq(pre_go & ~act_go & ~prea_go & ~ref_go),
        ]
        # A column command never targets the bank being precharged in the same cycle (it would have
        # no hit there), but guard it anyway so the two buses can never disagree.
        col_pre_clash = do_pre & (col_bank == pre_bank)
        m.d.comb += [
            do_rd.eq(col_go & ~col_is_wr & ~col_pre_clash),
            do_wr.eq(col_go & col_is_wr & ~col_pre_clash),
        ]
        col_issue = Signal(n, name="col_issue")
        m.d.comb += col_issue.eq(Mux(do_rd | do_wr, col_oh, 0))

        # ---------------------------------------------------------------- timing counter loads
        bc = t.burst_cycles
        for b in range(nb):
            act_b = do_act & (act_bank == b)
            pre_b = (do_pre & (pre_bank == b)) | do_prea
            rd_b = do_rd & (col_bank == b)
            wr_b = do_wr & (col_bank == b)
            cnt_act[b].load(act_b, t.tRC)
            cnt_act[b].load(pre_b, t.tRP)
            cnt_col[b].load(act_b, t.tRCD)
            cnt_pre[b].load(act_b, t.tRAS)
            cnt_pre[b].load(rd_b, t.tRTP)
            cnt_pre[b].load(wr_b, t.CWL + bc + t.tWR)
        for g in range(n_bg):
            bank_in_g = [b for b in range(nb) if bank_bg[b] == g]
            act_g = do_act & Cat(*(act_bank == b for b in bank_in_g)).any()
            col_g = Cat(*(col_bank == b for b in bank_in_g)).any()
            bg_act[g].load(act_g, t.tRRD_L)
            bg_rd[g].load(do_rd & col_g, t.tCCD_L)
            bg_rd[g].load(do_wr & col_g, t.CWL + bc + t.tWTR_L)
            bg_wr[g].load(do_wr & col_g, t.tCCD_L)
        ch_act.load(do_act, t.tRRD_S)
        ch_rd.load(do_rd, max(t.tCCD_S, bc))
        ch_rd.load(do_wr, t.CWL + bc + t.tWTR_S)
        ch_wr.load(do_wr, max(t.tCCD_S, bc))
        ch_wr.load(do_rd, t.tRTW)
        ch_rfc.load(do_ref, t.tRFC)
        for k in range(4):
            faw[k].load(do_act & (faw_ptr == k), t.tFAW)
        for c in counters:
            c.elaborate(m)
        with m.If(do_act):
            m.d.sync += faw_ptr.eq(faw_ptr + 1)

        # ---------------------------------------------------------------- bank state update
        for b in range(nb):
            with m.If(do_act & (act_bank == b)):
                m.d.sync += [bank_open[b].eq(1), open_row[b].eq(act_row)]
            with m.Elif((do_pre & (pre_bank == b)) | do_prea):
                m.d.sync += bank_open[b].eq(0)

        # ---------------------------------------------------------------- queue update
        free = Signal(n, name="q_free")
        m.d.comb += free.eq(~valid)
        alloc_slot = lowest_index(free, n, range(max(2, n)), "alloc_slot")
        m.d.comb += self.req.ready.eq(free.any())
        accept = self.req.valid & self.req.ready
        alloc = Signal(n, name="q_alloc")
        m.d.comb += alloc.eq(Mux(accept, 1 << alloc_slot, 0))

        # hit of the incoming request, seeing this cycle's ACT/PRE/PREA
        in_open = Signal(name="in_bank_open")
        m.d.comb += in_open.eq(bank_open.bit_select(in_bank, 1))
        in_open_row_hit = Cat(*((in_bank == b) & (open_row[b] == in_row) for b in range(nb))).any()
        in_hit = Signal(name="in_hit")
        m.d.comb += in_hit.eq(Mux(do_act & (act_bank == in_bank), act_row == in_row,
                                  ~(do_prea | (do_pre & (pre_bank == in_bank)))
                                  & in_open & in_open_row_hit))

        remaining = Signal(n, name="q_remaining")  # valid after this cycle's column issue
        m.d.comb += remaining.eq(valid & ~col_issue)
        in_write = req.write
        in_dep = Signal(n, name="in_dep")
        for j in range(n):
            same = (q_bank[j] == in_bank) & (q_row[j] == in_row) & (q_col[j] == in_col)
            m.d.comb += in_dep[j].eq(remaining[j] & same & (q_write[j] | in_write))

        for i in range(n):
            with m.If(alloc[i]):
                m.d.sync += [
                    q_write[i].eq(in_write), q_bank[i].eq(in_bank), q_row[i].eq(in_row),
                    q_col[i].eq(in_col), q_tag[i].eq(req.tag), q_age[i].eq(0),
                    older[i].eq(remaining), dep[i].eq(in_dep), q_hit[i].eq(in_hit),
                ]
            with m.Else():
                with m.If(valid[i] & (q_age[i] != cfg.age_cap_cycles)):
                    m.d.sync += q_age[i].eq(q_age[i] + 1)
                # hit bookkeeping for queued requests
                with m.If(do_act & (act_bank == q_bank[i])):
                    m.d.sync += q_hit[i].eq(act_row == q_row[i])
                with m.Elif(do_prea | (do_pre & (pre_bank == q_bank[i]))):
                    m.d.sync += q_hit[i].eq(0)
                # retire finished slots from the matrices (column-wise clear)
                m.d.sync += [older[i].eq(older[i] & remaining), dep[i].eq(dep[i] & remaining)]
        m.d.sync += valid.eq(remaining | alloc)
        m.d.comb += [
            wmem_w.addr.eq(alloc_slot),
            wmem_w.data.eq(Cat(req.wdata, req.wmask)),
            wmem_w.en.eq(accept & in_write),
        ]

        # ---------------------------------------------------------------- write data path
        # Decision at cycle t: the slot's data is read from the queue memory (ready at t + 1) into a
        # small in-flight FIFO, so the queue slot is free at once; the WR reaches the pins at t + 1
        # and its data leaves the FIFO at t + 1 + CWL. Writes are >= burst_cycles apart, so at most
        # (CWL + 1) // burst_cycles + 1 are in flight.
        m.d.comb += [wmem_r.addr.eq(col_slot), wmem_r.en.eq(do_wr)]
        inflight_w = (t.CWL + 1) // t.burst_cycles + 2
        m.submodules.wdata_fifo = wfifo = fifo.SyncFIFO(width=bw + cfg.burst_bytes, depth=inflight_w)
        wr_strobe = [Signal(name=f"wr_issue_d{k + 1}") for k in range(t.CWL + 1)]
        m.d.sync += wr_strobe[0].eq(do_wr)
        for k in range(1, t.CWL + 1):
            m.d.sync += wr_strobe[k].eq(wr_strobe[k - 1])
        m.d.comb += [
            wfifo.w_data.eq(wmem_r.data),
            wfifo.w_en.eq(wr_strobe[0]),
            wfifo.r_en.eq(wr_strobe[-1]),
            self.dram.wdata.eq(wfifo.r_data[:bw]),
            self.dram.wmask.eq(wfifo.r_data[bw:]),
            self.dram.wdata_valid.eq(wr_strobe[-1]),
        ]

        # ---------------------------------------------------------------- read data path
        m.d.comb += [
            tag_fifo.w_data.eq(col_tag),
            tag_fifo.w_en.eq(do_rd),
            tag_fifo.r_en.eq(self.dram.rdata_valid),
            rsp_fifo.w_data.eq(Cat(tag_fifo.r_data, self.dram.rdata)),
            rsp_fifo.w_en.eq(self.dram.rdata_valid),
            self.rsp.valid.eq(rsp_fifo.r_rdy),
            self.rsp.payload.tag.eq(rsp_fifo.r_data[:cfg.tag_bits]),
            self.rsp.payload.rdata.eq(rsp_fifo.r_data[cfg.tag_bits:]),
            rsp_fifo.r_en.eq(self.rsp.ready),
        ]
        m.d.sync += inflight.eq(inflight + do_rd - self.dram.rdata_valid)

        # ---------------------------------------------------------------- refresh
        tick_refi = refi == t.tREFI - 1
        m.d.sync += refi.eq(Mux(tick_refi, 0, refi + 1))
        m.d.sync += owed.eq(owed + tick_refi - do_ref)
        with m.If(~draining):
            with m.If((owed >= force_at) | ((owed != 0) & ~any_valid)):
                m.d.sync += draining.eq(1)
        with m.Elif(do_ref):
            m.d.sync += draining.eq(0)

        # ---------------------------------------------------------------- registered command pins
        def bg_of(bank):
            return bank[bkw:bkw + bgw] if bgw else 0

        def bk_of(bank):
            return bank[:bkw] if bkw else 0

        row_cmd = Mux(do_ref, RowCmd.REF, Mux(do_prea, RowCmd.PREA,
                  Mux(do_act, RowCmd.ACT, Mux(do_pre, RowCmd.PRE, RowCmd.NOP))))
        row_bank = Mux(do_act, act_bank, pre_bank)
        m.d.sync += [
            self.dram.row_cmd.as_value().eq(row_cmd),
            self.dram.row_bg.eq(bg_of(row_bank)),
            self.dram.row_bank.eq(bk_of(row_bank)),
            self.dram.row_row.eq(Mux(do_act, act_row, 0)),
            self.dram.col_cmd.as_value().eq(Mux(do_rd, ColCmd.RD, Mux(do_wr, ColCmd.WR, ColCmd.NOP))),
            self.dram.col_bg.eq(bg_of(col_bank)),
            self.dram.col_bank.eq(bk_of(col_bank)),
            self.dram.col_row.eq(col_row),
            self.dram.col_column.eq(col_col),
        ]
        return m
