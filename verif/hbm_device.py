"""Cycle-accurate HBM2 pseudo-channel device model (pure Python, deterministic, no cocotb).

Every command goes through a :class:`~verif.jedec_checker.JedecChecker` first, so any JEDEC violation
raises :class:`~verif.jedec_checker.TimingViolation` before the model changes state.

Data conventions (the cocotb wrapper maps these onto the controller's pins):

* Storage is sparse: one ``burst_bytes`` entry per (pc, bank_group, bank, row, column) that was ever
  written; unwritten bursts read as ``fill`` bytes (default 0x00).
* **Reads**: a RD issued at cycle t reads the array at t and its burst is returned by
  ``tick(t + CL)`` -- exactly at t + CL, the cycle of the first data beat on the bus (the burst then
  occupies t + CL .. t + CL + burst_cycles - 1). ``tick`` must be called for every cycle at which
  read data is due (calling it for every cycle is always right); skipping a due cycle is an error.
* **Writes**: a WR issued at cycle t has its data sampled at t + CWL (first data beat). Either pass
  ``data`` / ``mask`` with the WR command (the model holds them and commits them at t + CWL), or pass
  none and call :meth:`HBMDevice.write_data` at exactly cycle t + CWL (what a pin-level wrapper does).
  The write is visible to a RD issued at or after t + CWL; the tWTR / tRTW rules make every legal
  read-after-write / write-after-read ordering see the right data.
* ``mask`` is an integer with one bit per byte of the burst, bit i = byte i is written (1 = write,
  the opposite of the DRAM DM pin polarity); default all ones.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

from hw.hbm.config import HBMConfig

from .jedec_checker import Cmd, JedecChecker, TimingViolation

__all__ = ["HBMDevice", "ReadData"]


@dataclass(frozen=True)
class ReadData:
    """One read burst: ``cycle`` = data cycle (``issue_cycle + CL``)."""

    cycle: int
    issue_cycle: int
    pc: int
    bank_group: int
    bank: int
    row: int
    column: int
    data: bytes


class HBMDevice:
    """Device model of every pseudo-channel of ``config``.

    Args:
        config: the :class:`HBMConfig`.
        fill: byte value of never-written memory (0..255).
    """

    def __init__(self, config: HBMConfig, fill: int = 0):
        self.config = config
        self.checker = JedecChecker(config)
        self.fill = bytes([fill]) * config.burst_bytes
        self._store: dict[tuple[int, int, int, int, int], bytes] = {}
        self._reads: deque[ReadData] = deque()  # ordered by data cycle (CL is constant)
        self._writes: dict[tuple[int, int], list] = {}  # (pc, data cycle) -> [key, data, mask]
        self._now = 0
        self.reads = 0
        self.writes = 0

    # ---- backdoor ---------------------------------------------------------------------------
    def peek(self, pc: int, bank_group: int, bank: int, row: int, column: int) -> bytes:
        return self._store.get((pc, bank_group, bank, row, column), self.fill)

    def poke(self, pc: int, bank_group: int, bank: int, row: int, column: int, data: bytes) -> None:
        self._store[(pc, bank_group, bank, row, column)] = bytes(self._check_data(data))

    def read_address(self, address: int) -> bytes:
        return self.peek(*self.config.decode(address))

    # ---- commands ---------------------------------------------------------------------------
    def command(self, cycle: int, pc: int, cmd: Cmd | str, bank_group: int = 0, bank: int = 0,
                row: int = 0, column: int = 0, data: bytes | None = None, mask: int | None = None) -> None:
        """Issue one command at ``cycle`` (checked first; see the module docstring for data)."""
        cmd = Cmd(cmd)
        if cmd is not Cmd.WR and (data is not None or mask is not None):
            raise ValueError(f"data and mask go with WR only; got them with {cmd.value}")
        if cmd is Cmd.WR and data is not None:
            data = self._check_data(data)
            mask = self._check_mask(mask)
        elif mask is not None:
            raise ValueError("mask needs data (or pass both to write_data)")
        self._settle(cycle)
        self.checker.command(cycle, pc, cmd, bank_group, bank, row, column)
        self._now = cycle
        key = (pc, bank_group, bank, row, column)
        t = self.config.timing
        if cmd is Cmd.RD:
            self.reads += 1
            self._reads.append(ReadData(cycle + t.CL, cycle, pc, bank_group, bank, row, column,
                                        self.peek(*key)))
        elif cmd is Cmd.WR:
            self.writes += 1
            due = cycle + t.CWL
            self._writes[(pc, due)] = [key, data, mask]
            self._settle(cycle)  # CWL >= 1, so nothing commits yet; kept for symmetry

    def write_data(self, cycle: int, pc: int, data: bytes, mask: int | None = None) -> None:
        """Deliver the data of a WR issued at ``cycle - CWL`` on pseudo-channel ``pc``."""
        data, mask = self._check_data(data), self._check_mask(mask)
        pending = self._writes.get((pc, cycle))
        if pending is None or pending[1] is not None:
            raise TimingViolation([("WRITE_DATA_UNEXPECTED", f"WRITE_DATA_UNEXPECTED: write data on pc{pc} "
                                    f"at cycle {cycle} but no WR without data was issued at cycle "
                                    f"{cycle - self.config.timing.CWL} (data is due at WR + CWL)")])
        pending[1], pending[2] = data, mask
        self._settle(cycle)

    def tick(self, cycle: int) -> list[ReadData]:
        """Advance to ``cycle``; return the read bursts whose data cycle is exactly ``cycle``."""
        self._settle(cycle)
        self.checker.advance(cycle)
        self._now = cycle
        out = []
        while self._reads and self._reads[0].cycle == cycle:
            out.append(self._reads.popleft())
        return out

    @property
    def idle(self) -> bool:
        """No read data to return and no write data awaited."""
        return not self._reads and not self._writes

    def finish(self, cycle: int) -> dict:
        """End of run: no read or write data may be outstanding; checks the refresh cadence."""
        self._settle(cycle)
        if self._reads:
            r = self._reads[0]
            raise RuntimeError(f"read data of RD at cycle {r.issue_cycle} (due {r.cycle}) never collected")
        if self._writes:
            (pc, due), _ = next(iter(self._writes.items()))
            raise TimingViolation([("WRITE_DATA_MISSING", f"WRITE_DATA_MISSING: WR on pc{pc} at cycle "
                                    f"{due - self.config.timing.CWL} still waits for its data (due at {due})")])
        return self.checker.finish(cycle)

    # ---- internals --------------------------------------------------------------------------
    def _settle(self, cycle: int) -> None:
        """Commit the writes whose data cycle is <= ``cycle``; fail on missed data or reads."""
        if self._reads and self._reads[0].cycle < cycle:
            r = self._reads[0]
            raise RuntimeError(f"read data of RD at cycle {r.issue_cycle} was due at cycle {r.cycle} and "
                               f"never collected: call tick() at every cycle with read data due")
        for (pc, due) in sorted(k for k in self._writes if k[1] <= cycle):
            key, data, mask = self._writes[(pc, due)]
            if data is None:
                if due < cycle:
                    raise TimingViolation([("WRITE_DATA_MISSING", f"WRITE_DATA_MISSING: WR on pc{pc} at cycle "
                                            f"{due - self.config.timing.CWL} got no data at cycle {due} "
                                            f"(WR + CWL)")])
                continue
            old = self.peek(*key)
            self._store[key] = bytes(data[i] if mask >> i & 1 else old[i] for i in range(len(old)))
            del self._writes[(pc, due)]

    def _check_data(self, data) -> bytes:
        n = self.config.burst_bytes
        if not isinstance(data, (bytes, bytearray, memoryview)) or len(data) != n:
            raise ValueError(f"data must be {n} bytes; got {data!r}")
        return bytes(data)

    def _check_mask(self, mask) -> int:
        n = self.config.burst_bytes
        if mask is None:
            return (1 << n) - 1
        if isinstance(mask, bool) or not isinstance(mask, int) or not 0 <= mask < 1 << n:
            raise ValueError(f"mask must be an integer from 0 to {(1 << n) - 1}; got {mask!r}")
        return mask
