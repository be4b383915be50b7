"""Cycle-by-cycle harness for one pseudo-channel controller, shared by the Amaranth and cocotb tests.

Per clock cycle the simulator glue reads the controller's outputs (:class:`Pins`) and calls
:meth:`PCHarness.step`, which returns the inputs to drive in the same cycle (:class:`Drive`). The
harness

* passes every command to the :class:`~verif.hbm_device.HBMDevice` (which checks every JEDEC rule
  and fails the test at once on a violation), delivers write data at WR + CWL and returns read data
  at RD + CL;
* offers the request list in order on ``req`` (with random pauses when given a generator) and takes
  responses on ``rsp`` (with random back-pressure);
* keeps a shadow memory: a read must return the bytes of every write accepted before it and of no
  write accepted after it (the controller's ordering contract), compared at the response;
* checks ``queue_empty`` in every cycle where the glue samples it: 1 exactly when every accepted
  request's column command is on the pins or behind it;
* records per-request latency ``(kind, refresh_blocked, write, cycles, addr)`` (accept -> response
  transfer for reads, accept -> WR on the pins for writes,
  classified by the bank state the request found: row hit, closed bank, row conflict, and whether a
  refresh was in progress), data-bus busy cycles, and refresh statistics.

Everything fails with ``AssertionError`` (the checker's :class:`TimingViolation` is one).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

import numpy as np

from hw.hbm.config import HBMConfig
from hw.hbm.interface import ColCmd, RowCmd

from . import checked
from .hbm_device import HBMDevice
from .jedec_checker import Cmd

__all__ = ["Drive", "Pins", "PCHarness", "Request", "build_traffic", "device_cycle", "sequential", "random_traffic",
           "row_conflicts"]


@dataclass(frozen=True)
class Request:
    """One burst request: byte ``addr`` (burst aligned), ``write``, ``data`` (burst_bytes bytes) and
    ``mask`` (bit i = write byte i) for writes."""

    write: bool
    addr: int
    data: bytes = b""
    mask: int = 0


@dataclass
class Pins:
    """Controller outputs sampled in one cycle (integers)."""

    row_cmd: int
    row_bg: int
    row_bank: int
    row_row: int
    col_cmd: int
    col_bg: int
    col_bank: int
    col_row: int
    col_column: int
    wdata: int
    wmask: int
    wdata_valid: int
    req_ready: int
    rsp_valid: int
    rsp_tag: int
    rsp_rdata: int
    refresh_owed: int = 0
    #: the controller's ``queue_empty`` output, checked when given (None: not sampled)
    queue_empty: int | None = None


@dataclass
class Drive:
    """Controller inputs for one cycle."""

    req_valid: int = 0
    req_write: int = 0
    req_addr: int = 0
    req_tag: int = 0
    req_wdata: int = 0
    req_wmask: int = 0
    rsp_ready: int = 1
    rdata_valid: int = 0
    rdata: int = 0


_ROW = {RowCmd.ACT.value: Cmd.ACT, RowCmd.PRE.value: Cmd.PRE, RowCmd.PREA.value: Cmd.PREA,
        RowCmd.REF.value: Cmd.REF}
_COL = {ColCmd.RD.value: Cmd.RD, ColCmd.WR.value: Cmd.WR}


@dataclass
class _Pending:
    req: Request
    tag: int
    accept_cycle: int
    kind: str  # "hit", "closed", "conflict"
    expected: bytes | None = None
    refresh_blocked: bool = False


@dataclass
class PCHarness:
    """Drives one pseudo-channel (``pc``) of ``config`` with ``requests``.

    Args:
        config: the :class:`HBMConfig` the controller was built with.
        requests: issued in order on ``req``.
        rng: with a generator, ``req.valid`` is withheld with probability ``gap_p`` and ``rsp.ready``
            is low with probability ``stall_p`` in each cycle; without, both are always on.
        pc: which pseudo-channel of the device model the controller talks to.
        max_outstanding: offer a request only while fewer than this many are outstanding (reads
            without response, writes not yet on the pins); 1 measures unloaded latency. ``None``:
            no limit but the tags.
    """

    config: HBMConfig
    requests: list[Request]
    rng: np.random.Generator | None = None
    gap_p: float = 0.2
    stall_p: float = 0.2
    pc: int = 0
    max_outstanding: int | None = None
    device: HBMDevice | None = None
    shadow: dict[int, bytearray] = field(default_factory=dict)
    latencies: list[tuple[str, bool, bool, int, int]] = field(default_factory=list)
    data_busy_cycles: int = 0
    #: bytes compared with the shadow memory: every read response, and the memory at :meth:`finish`
    bytes_checked: int = 0
    #: accepted requests whose column command has not been on the pins yet
    waiting: int = 0
    column_commands: list[tuple[int, Cmd]] = field(default_factory=list)  # (cycle, RD/WR) on the pins
    #: every command on the pins: (cycle, row command, bank group, bank, row, column command, bank group,
    #: bank, column); its digest in :meth:`finish` tells two controllers' command streams apart
    commands: list[tuple[int, ...]] = field(default_factory=list)
    first_cycle: int | None = None
    last_data_cycle: int = 0
    cycle: int = 0
    accepted: int = 0
    responses: int = 0
    max_owed: int = 0
    _next: int = 0
    _free_tags: list[int] = field(default_factory=list)
    _reads: dict[int, _Pending] = field(default_factory=dict)
    _writes: list[_Pending] = field(default_factory=list)
    _offer: tuple[int, int] | None = None  # (index, tag) held on req until taken
    _refreshing_until: int = -1

    def __post_init__(self):
        if self.device is None:
            self.device = HBMDevice(self.config)
        self._free_tags = list(range(1 << self.config.tag_bits))
        self._bytes = self.config.burst_bytes

    # ------------------------------------------------------------------------------------------
    @property
    def done(self) -> bool:
        return self._next >= len(self.requests) and not self._reads and not self._writes

    def step(self, pins: Pins) -> Drive:
        """Process one cycle's outputs and return this cycle's inputs."""
        c, cfg, dev, t = self.cycle, self.config, self.device, self.config.timing
        drive = Drive()
        self.max_owed = max(self.max_owed, pins.refresh_owed)

        # ---- the device: every command checked, write data taken, read data returned
        drive.rdata_valid, drive.rdata = device_cycle(dev, c, {self.pc: pins})[self.pc]

        # ---- bookkeeping of the commands on the pins
        if pins.row_cmd or pins.col_cmd:
            self.commands.append((c, pins.row_cmd, pins.row_bg, pins.row_bank, pins.row_row,
                                  pins.col_cmd, pins.col_bg, pins.col_bank, pins.col_column))
        if pins.row_cmd:
            cmd = _ROW[pins.row_cmd]
            if cmd in (Cmd.REF, Cmd.PREA):
                self._refreshing_until = max(self._refreshing_until, c + (t.tRFC if cmd is Cmd.REF else t.tRP))
                for p in [*self._reads.values(), *self._writes]:
                    p.refresh_blocked = True
        if not pins.col_cmd:  # a quiet column bus: no address without a RD/WR
            idle = (pins.col_bg, pins.col_bank, pins.col_row, pins.col_column)
            assert idle == (0, 0, 0, 0), f"cycle {c}: column address {idle} on the pins without a RD/WR"
        if pins.col_cmd:
            cmd = _COL[pins.col_cmd]
            self.waiting -= 1
            self.column_commands.append((c, cmd))
            self.data_busy_cycles += t.burst_cycles
            start = c + (t.CL if cmd is Cmd.RD else t.CWL)
            self.last_data_cycle = max(self.last_data_cycle, start + t.burst_cycles)
            if cmd is Cmd.WR:
                addr = cfg.encode(self.pc, pins.col_bg, pins.col_bank, pins.col_row, pins.col_column)
                for k, p in enumerate(self._writes):  # oldest write to that address issues first
                    if p.req.addr == addr:
                        self.latencies.append((p.kind, p.refresh_blocked, True, c - p.accept_cycle, p.req.addr))
                        del self._writes[k]
                        break
                else:
                    raise AssertionError(f"cycle {c}: WR to address {addr:#x} that no queued write targets")

        # ---- queue_empty: its slot left the queue when the command was decided, a cycle before the pins
        if pins.queue_empty is not None and pins.queue_empty != int(self.waiting == 0):
            raise AssertionError(f"cycle {c}: queue_empty is {pins.queue_empty} with {self.waiting} accepted "
                                 "requests waiting for their column command")

        # ---- responses
        drive.rsp_ready = int(self.rng is None or self.rng.random() >= self.stall_p)
        if pins.rsp_valid and drive.rsp_ready:
            p = self._reads.pop(pins.rsp_tag, None)
            if p is None:
                raise AssertionError(f"cycle {c}: response with tag {pins.rsp_tag} that no read holds")
            got = pins.rsp_rdata.to_bytes(self._bytes, "little")
            if got != p.expected:
                raise AssertionError(
                    f"cycle {c}: read of {p.req.addr:#x} (tag {p.tag}, accepted at cycle {p.accept_cycle}) "
                    f"returned {got.hex()} but the shadow memory holds {p.expected.hex()}")
            self.bytes_checked += len(got)
            self.latencies.append((p.kind, p.refresh_blocked, False, c - p.accept_cycle, p.req.addr))
            self._free_tags.append(p.tag)
            self.responses += 1

        # ---- requests
        room = self.max_outstanding is None or len(self._reads) + len(self._writes) < self.max_outstanding
        if self._offer is None and self._next < len(self.requests) and self._free_tags and room:
            if self.rng is None or self.rng.random() >= self.gap_p:
                self._offer = (self._next, self._free_tags.pop(0))
                self._next += 1
        if self._offer is not None:
            k, tag = self._offer
            r = self.requests[k]
            drive.req_valid, drive.req_write, drive.req_addr, drive.req_tag = 1, int(r.write), r.addr, tag
            if r.write:
                drive.req_wdata, drive.req_wmask = int.from_bytes(r.data, "little"), r.mask
            if pins.req_ready:
                self._accept(r, tag, c)
                self._offer = None
        self.cycle += 1
        return drive

    def _accept(self, r: Request, tag: int, c: int) -> None:
        if self.first_cycle is None:
            self.first_cycle = c
        ch, bg, bank, row, col = self.config.decode(r.addr)
        open_row = self.device.checker.open_row(self.pc, bg, bank)
        kind = "closed" if open_row is None else ("hit" if open_row == row else "conflict")
        p = _Pending(r, tag, c, kind, refresh_blocked=c < self._refreshing_until)
        old = self.shadow.setdefault(r.addr, bytearray(self.device.fill))
        if r.write:
            for i in range(self._bytes):
                if r.mask >> i & 1:
                    old[i] = r.data[i]
            self._writes.append(p)
            self._free_tags.append(tag)
        else:
            p.expected = bytes(old)
            self._reads[tag] = p
        self.accepted += 1
        self.waiting += 1  # in the queue from the next cycle

    def finish(self) -> dict:
        """Final checks (memory contents equal the shadow memory, refresh cadence) and statistics."""
        assert self.done, (f"{len(self.requests) - self._next} requests not offered, {len(self._reads)} reads "
                           f"and {len(self._writes)} writes outstanding at cycle {self.cycle}")
        refresh = self.device.finish(self.cycle)
        for addr, want in self.shadow.items():
            got = self.device.read_address(addr)
            assert got == bytes(want), f"memory at {addr:#x} holds {got.hex()}, shadow {bytes(want).hex()}"
            self.bytes_checked += len(want)
        checked.count(self.bytes_checked, "bytes")
        start = self.first_cycle or 0
        span = max(1, self.last_data_cycle - start)
        by_kind: dict[str, list[int]] = {}
        for kind, blocked, _write, lat, _ in self.latencies:
            by_kind.setdefault("refresh_blocked" if blocked else kind, []).append(lat)
        lat = {k: {"count": len(v), "p50": float(np.percentile(v, 50)), "p99": float(np.percentile(v, 99)),
                   "max": int(max(v))} for k, v in sorted(by_kind.items())}
        kinds = [k for k, *_ in self.latencies]
        return {
            "requests": len(self.requests),
            "cycles": self.cycle,
            "data_busy_cycles": self.data_busy_cycles,
            "span_cycles": span,
            "efficiency": self.data_busy_cycles / span,
            "row_hit_rate": kinds.count("hit") / max(1, len(kinds)),
            "latency_cycles": lat,
            "refreshes": refresh["refreshes"][self.pc],
            "worst_refresh_gap_cycles": refresh["worst_gap_cycles"][self.pc],
            "max_refresh_owed": self.max_owed,
            # the whole command stream and every request's latency, as one value to compare
            "trace_digest": hashlib.sha256(repr((self.commands, self.latencies)).encode()).hexdigest()[:16],
        }


# ---- traffic generators ---------------------------------------------------------------------

def _data(rng: np.random.Generator, n: int) -> bytes:
    return rng.integers(0, 256, n, dtype=np.uint8).tobytes()


def sequential(config: HBMConfig, count: int, write: bool, rng: np.random.Generator, start: int = 0,
               pc: int = 0) -> list[Request]:
    """``count`` bursts at consecutive addresses of pseudo-channel ``pc`` (in address-mapping order)."""
    out, b = [], config.burst_bytes
    addr, full = start, (1 << config.burst_bytes) - 1
    while len(out) < count:
        if config.decode(addr)[0] == pc:
            out.append(Request(write, addr, _data(rng, b) if write else b"", full if write else 0))
        addr = (addr + b) % config.capacity_bytes
    return out


def random_traffic(config: HBMConfig, count: int, rng: np.random.Generator, write_p: float = 0.5,
                   span_bursts: int | None = None, pc: int = 0, partial_p: float = 0.2,
                   bursts: int = 1) -> list[Request]:
    """``count`` random accesses of pseudo-channel ``pc``, each ``bursts`` consecutive bursts of one
    row (``bursts = 2``: random 64 B accesses), so ``count * bursts`` requests. ``span_bursts`` limits
    the distinct addresses (small spans give many same-address hazards); writes get a random byte
    mask with probability ``partial_p``.

    Raises:
        ValueError: ``bursts`` not in 1..columns.
    """
    b, full = config.burst_bytes, (1 << config.burst_bytes) - 1
    f = config.field_sizes
    if not 1 <= bursts <= config.columns:
        raise ValueError(f"bursts must be from 1 to columns = {config.columns}; got {bursts}")

    def pick():
        col = int(rng.integers(0, f["column"] // bursts)) * bursts
        return pc, *(int(rng.integers(0, f[k])) for k in ("bank_group", "bank", "row")), col

    out = []
    pool = [pick() for _ in range(span_bursts)] if span_bursts is not None else None
    for _ in range(count):
        ch, bg, bank, row, col = pool[int(rng.integers(0, len(pool)))] if pool is not None else pick()
        write = rng.random() < write_p
        for k in range(bursts):
            addr = config.encode(ch, bg, bank, row, col + k)
            if write:
                mask = int(rng.integers(0, full + 1)) if rng.random() < partial_p else full
                out.append(Request(True, addr, _data(rng, b), mask))
            else:
                out.append(Request(False, addr))
    return out


def row_conflicts(config: HBMConfig, count: int, rng: np.random.Generator, write_p: float = 0.0,
                  pc: int = 0) -> list[Request]:
    """Every request to bank group 0 bank 0, each to a different row than the previous one (all rows
    distinct while ``count <= rows``)."""
    b, full = config.burst_bytes, (1 << config.burst_bytes) - 1
    out, row = [], 0
    distinct = rng.permutation(config.rows) if count <= config.rows else None
    for k in range(count):
        if distinct is not None:
            row = int(distinct[k])
        else:
            row = (row + 1 + int(rng.integers(0, max(1, config.rows - 1)))) % config.rows
        addr = config.encode(pc, 0, 0, row, int(rng.integers(0, config.columns)))
        if rng.random() < write_p:
            out.append(Request(True, addr, _data(rng, b), full))
        else:
            out.append(Request(False, addr))
    return out


def bank_sweep(config: HBMConfig, rng: np.random.Generator, fill: int = 24, write_p: float = 0.3,
               pc: int = 0) -> list[Request]:
    """A burst of one request to every bank, then every bank in turn (a random order), each in the
    situations its own copy of the controller's per-bank logic decides: a closed bank (ACT), a row
    miss arriving while the bank is open and idle (PRE at once), a hit arriving while its row is open
    and no other request to the bank waits, a read, a write and a read to one address (both hazards;
    with back-pressure on the responses a read waits for credit while a younger write could go), and
    a conflict behind them. ``fill`` row hits to another bank keep the queue busy between the first
    request and the miss, so the bank is idle and its timing met when the miss arrives; writes among
    the fill with probability ``write_p``."""
    b, full = config.burst_bytes, (1 << config.burst_bytes) - 1
    nbg, nb = config.field_sizes["bank_group"], config.field_sizes["bank"]
    rows, cols = config.field_sizes["row"], config.field_sizes["column"]
    out: list[Request] = []

    def at(flat, row, col):
        return config.encode(pc, flat // nb, flat % nb, row, col)

    # first one request to every bank on a random row: a burst of ACTs (tRRD, every tFAW window)
    out += [Request(False, at(int(f), int(rng.integers(0, rows)), int(rng.integers(0, cols))))
            for f in rng.permutation(nbg * nb)]
    for flat in rng.permutation(nbg * nb):
        flat = int(flat)
        other = int((flat + 1 + rng.integers(0, nbg * nb - 1)) % (nbg * nb))
        r0, r1 = (int(x) for x in rng.choice(rows, 2, replace=False))
        out.append(Request(False, at(flat, r0, 0)))
        for k in range(fill):
            a = at(other, r0, k % cols)
            out.append(Request(True, a, _data(rng, b), full) if rng.random() < write_p else Request(False, a))
        hazard = at(flat, r1, 2 % cols)
        out += [Request(False, at(flat, r1, 1)), Request(False, hazard),
                Request(True, hazard, _data(rng, b), int(rng.integers(1, full + 1))), Request(False, hazard),
                Request(False, at(flat, r0, 3 % cols))]
    return out


def act_windows(config: HBMConfig, rng: np.random.Generator, rounds: int = 24, pc: int = 0) -> list[Request]:
    """``rounds`` rounds that each put a pause inside a tFAW window: one request to a bank (an ACT),
    0 to 6 row hits behind it to the same row (column commands, no ACT: a pause of about two cycles
    each before the next ACT), then one request to each of five other banks on a random row (a burst
    of ACTs, each behind its PRE where the bank is open on another row; a bank already open on that
    row takes no ACT). Every window slot meets a window whose first
    ACT came early and whose last four came at tRRD: the fifth ACT waits for the window of the
    first, the sixth for that of the second, not for its tRRD behind the fifth. A continuous ACT
    burst (after a refresh, or :func:`bank_sweep`'s) never tells those apart."""
    nbg, nb = config.field_sizes["bank_group"], config.field_sizes["bank"]
    rows, cols = config.field_sizes["row"], config.field_sizes["column"]
    out: list[Request] = []

    def at(flat, row, col):
        return config.encode(pc, flat // nb, flat % nb, row, col)

    for _ in range(rounds):
        banks = [int(x) for x in rng.choice(nbg * nb, 6, replace=False)]
        row = int(rng.integers(0, rows))
        out += [Request(False, at(banks[0], row, k % cols)) for k in range(1 + int(rng.integers(0, 7)))]
        out += [Request(False, at(f, int(rng.integers(0, rows)), int(rng.integers(0, cols)))) for f in banks[1:]]
    return out


def build_traffic(config: HBMConfig, segments: list[dict], rng: np.random.Generator):
    """Concatenate traffic segments. ``sequential``: ``count``, ``write`` (bool), ``start`` (byte
    address); ``random``: ``count``, ``write_p``, ``span_bursts``, ``partial_p``, ``bursts``; ``conflicts``:
    ``count``, ``write_p``; ``bank_sweep``: ``count`` rounds of :func:`bank_sweep`, ``fill``, ``write_p``."""
    reqs: list[Request] = []
    for seg in segments:
        kind, n = seg["kind"], int(seg["count"])
        if kind == "sequential":
            reqs += sequential(config, n, bool(seg.get("write", False)), rng, int(seg.get("start", 0)))
        elif kind == "random":
            reqs += random_traffic(config, n, rng, float(seg.get("write_p", 0.5)), seg.get("span_bursts"),
                                   partial_p=float(seg.get("partial_p", 0.2)), bursts=int(seg.get("bursts", 1)))
        elif kind == "conflicts":
            reqs += row_conflicts(config, n, rng, float(seg.get("write_p", 0.0)))
        elif kind == "bank_sweep":
            for _ in range(n):
                reqs += bank_sweep(config, rng, int(seg.get("fill", 24)), float(seg.get("write_p", 0.3)))
        elif kind == "act_windows":
            reqs += act_windows(config, rng, n)
        else:
            raise ValueError(f"traffic kind must be sequential, random, conflicts, bank_sweep or act_windows; "
                             f"got {kind!r}")
    return reqs


def device_cycle(device: HBMDevice, cycle: int, pins_by_pc: dict[int, Pins]) -> dict[int, tuple[int, int]]:
    """One cycle of the device model for several pseudo-channels: apply each channel's row and
    column command and write data (``Pins`` fields ``row_*``, ``col_*``, ``wdata*``), then return
    ``{pc: (rdata_valid, rdata)}`` for this cycle. Raises the checker's
    :class:`~verif.jedec_checker.TimingViolation` on any rule broken."""
    bb = device.config.burst_bytes
    for pc, p in pins_by_pc.items():
        if p.row_cmd:
            device.command(cycle, pc, _ROW[p.row_cmd], p.row_bg, p.row_bank, p.row_row, 0)
        if p.col_cmd:
            device.command(cycle, pc, _COL[p.col_cmd], p.col_bg, p.col_bank, p.col_row, p.col_column)
        if p.wdata_valid:
            device.write_data(cycle, pc, p.wdata.to_bytes(bb, "little"), p.wmask)
    out = {pc: (0, 0) for pc in pins_by_pc}
    for rd in device.tick(cycle):
        out[rd.pc] = (1, int.from_bytes(rd.data, "little"))
    return out
