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

Parts (one component each): :class:`~hw.hbm.request_queue.RequestQueue` (slots, age and hazard
matrices, row hits, write data), :class:`~hw.hbm.bank_timing.BankTiming` (open rows, timing
counters), :class:`~hw.hbm.refresh.RefreshTimer`, :class:`~hw.hbm.scheduler.CommandScheduler` (the
command choice), :class:`~hw.hbm.write_path.WriteDataPath` and
:class:`~hw.hbm.read_path.ReadResponsePath`.

Timing of the back end: command outputs are registered. A RD on the pins at cycle T expects
``rdata_valid`` with the whole burst at T + CL; a WR at T drives ``wdata``/``wmask``/``wdata_valid``
at T + CWL (the PHY serializes the burst into ``burst_length`` beats; ``wmask`` bit i = 1 writes
byte i, the opposite polarity of the DRAM DM pin).
"""

from __future__ import annotations

from amaranth.hdl import Module, Mux, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from .bank_timing import BankTiming
from .config import HBMConfig
from .interface import ColCmd, RowCmd, check_config, dram_signature, issue_layout, request_layout, response_layout
from .read_path import ReadResponsePath, response_fifo_depth
from .refresh import RefreshTimer
from .request_queue import RequestQueue
from .scheduler import CommandScheduler
from .write_path import WriteDataPath

__all__ = ["ColCmd", "PseudoChannelController", "RowCmd", "dram_signature", "request_layout",
           "response_fifo_depth", "response_layout"]


class PseudoChannelController(wiring.Component):
    """Controller for one HBM2 pseudo-channel.

    Ports:
        req: ``In(stream.Signature(request_layout(config)))`` -- reads and posted writes, one burst
            (``burst_bytes`` bytes) each; ``ready`` is high while a queue slot is free.
        rsp: ``Out(stream.Signature(response_layout(config)))`` -- read data with the request's tag,
            in the order the reads were issued to the DRAM (not request order: FR-FCFS reorders).
        dram: :func:`dram_signature` -- to the PHY / device model.
        refresh_owed: ``Out(4)`` -- REFs currently due and not issued (for statistics).
        queue_empty: ``Out(1)`` -- no accepted request waits for its command: every write accepted
            (posted) so far has its WR on the pins or behind it (its data follows CWL later).

    Args:
        config: :class:`~hw.hbm.config.HBMConfig`; its timing set is built into the counters.

    Raises:
        TypeError: ``config`` is not an :class:`HBMConfig`.
    """

    def __init__(self, config: HBMConfig):
        self.config = check_config(config)
        super().__init__({
            "req": In(stream.Signature(request_layout(config))),
            "rsp": Out(stream.Signature(response_layout(config))),
            "dram": Out(dram_signature(config)),
            "refresh_owed": Out(4),
            "queue_empty": Out(1),
        })

    def elaborate(self, platform):
        cfg = self.config
        m = Module()
        m.submodules.queue = queue = RequestQueue(cfg)
        m.submodules.banks = banks = BankTiming(cfg)
        m.submodules.refresh = refresh = RefreshTimer(cfg)
        m.submodules.scheduler = sched = CommandScheduler(cfg)
        m.submodules.write_path = wpath = WriteDataPath(cfg)
        m.submodules.read_path = rpath = ReadResponsePath(cfg)
        decision = sched.issue
        pins = Signal(issue_layout(cfg), name="pins")  # the decision, one cycle later: the command pins
        m.d.sync += pins.eq(decision)

        wiring.connect(m, wiring.flipped(self.req), queue.req)
        wiring.connect(m, rpath.rsp, wiring.flipped(self.rsp))
        wiring.connect(m, queue.view, sched.queue)
        wiring.connect(m, banks.status, queue.banks, sched.banks)
        wiring.connect(m, banks.next, queue.banks_next)
        m.d.comb += [
            queue.retire.eq(decision.col_grant),
            queue.issue.eq(pins),
            banks.issue.eq(pins),
            sched.pins.eq(pins),
            refresh.ref_issued.eq(decision.ref),
            self.queue_empty.eq(~queue.view.valid.any()),
            refresh.queue_empty.eq(self.queue_empty),
            sched.draining.eq(refresh.draining),
            sched.rd_credit.eq(rpath.rd_credit),
            self.refresh_owed.eq(refresh.owed),
            wpath.wr.eq(pins.wr),
            wpath.wdata.eq(queue.wdata),
            wpath.wmask.eq(queue.wmask),
            self.dram.wdata.eq(wpath.dram_wdata),
            self.dram.wmask.eq(wpath.dram_wmask),
            self.dram.wdata_valid.eq(wpath.dram_wdata_valid),
            rpath.rd.eq(pins.rd),
            rpath.wr.eq(pins.wr),
            rpath.tag.eq(pins.col_tag),
            rpath.rdata.eq(self.dram.rdata),
            rpath.rdata_valid.eq(self.dram.rdata_valid),
        ]

        # ---------------------------------------------------------------- command pins
        bkw, bgw = cfg.field_bits["bank"], cfg.field_bits["bank_group"]

        def bg_of(bank):
            return bank[bkw:bkw + bgw] if bgw else 0

        def bk_of(bank):
            return bank[:bkw] if bkw else 0

        row_cmd = Mux(pins.ref, RowCmd.REF, Mux(pins.prea, RowCmd.PREA,
                  Mux(pins.act, RowCmd.ACT, Mux(pins.pre, RowCmd.PRE, RowCmd.NOP))))
        row_bank = Mux(pins.act, pins.act_bank, pins.pre_bank)
        p_col = pins.rd | pins.wr
        m.d.comb += [
            self.dram.row_cmd.as_value().eq(row_cmd),
            self.dram.row_bg.eq(bg_of(row_bank)),
            self.dram.row_bank.eq(bk_of(row_bank)),
            self.dram.row_row.eq(Mux(pins.act, pins.act_row, 0)),
            self.dram.col_cmd.as_value().eq(Mux(pins.rd, ColCmd.RD, Mux(pins.wr, ColCmd.WR, ColCmd.NOP))),
            # the scheduler leaves the oldest candidate's address on col_* without RD/WR
            self.dram.col_bg.eq(Mux(p_col, bg_of(pins.col_bank), 0)),
            self.dram.col_bank.eq(Mux(p_col, bk_of(pins.col_bank), 0)),
            self.dram.col_row.eq(Mux(p_col, pins.col_row, 0)),
            self.dram.col_column.eq(Mux(p_col, pins.col_col, 0)),
        ]
        return m
