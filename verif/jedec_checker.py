"""Fatal JEDEC timing checker for the HBM2-style pseudo-channel command interface.

The checker is a **table of rules** (:data:`RULES`): each rule names a previous command set, a next
command set, a scope and a minimum distance in cycles given as a sum of :class:`HBMTiming` fields.
On top of the table: the four-activate window (tFAW), data-bus occupancy, command-bus slots,
prerequisites on bank state and the refresh cadence. Every violation raises :class:`TimingViolation`
at once (it subclasses ``AssertionError``, so pytest and cocotb count it as a failure); nothing is
ever only printed.

Conventions (documented choices, the RTL controller must follow them):

* Cycles are integers of the controller clock (tCK). Commands must be given in non-decreasing cycle
  order. Per pseudo-channel HBM2 has a row command bus (ACT, PRE, PREA, REF) and a column command bus
  (RD, WR): one row and one column command may share a cycle, two of the same kind may not.
* Distances: a rule with distance ``d`` requires ``next_cycle - prev_cycle >= d``.
* Scope compares the targets of the two commands inside one pseudo-channel: ``bank`` = same bank,
  ``bank_group`` = same bank group (any bank), ``pseudo_channel`` = any bank. REF targets every bank.
  PREA targets the banks it actually closes (the banks open at that moment).
* PRE to a bank that is already closed is **allowed** and is a no-op (JEDEC treats a precharge of an
  idle bank as a NOP); it does not restart tRP. PREA with no bank open is likewise a no-op (but
  still subject to tRFC and the command bus).
* RD / WR carry the row they expect to be open; the checker fails if the bank is closed
  (``RDWR_BANK_CLOSED``) or holds another row (``RDWR_ROW_MISS``). ACT needs a closed bank
  (``ACT_BANK_OPEN``). REF needs every bank of the pseudo-channel closed (``REF_BANK_OPEN``);
  nothing but NOP may follow a REF within tRFC (rule ``tRFC``).
* Data bus: a RD at t occupies data cycles [t + CL, t + CL + burst_cycles), a WR at t occupies
  [t + CWL, t + CWL + burst_cycles); two bursts of one pseudo-channel may not overlap
  (``DATA_BUS``). That is how the burst length limits RD->RD and WR->WR when tCCD_S < burst_cycles.
* Refresh (per pseudo-channel, all-bank REF): with P = max_refresh_postpone, no gap (from cycle 0 to
  the first REF, between REFs, from the last REF to the current cycle) may exceed (P + 1) * tREFI
  (``REFRESH_GAP``, checked on every command and in :meth:`JedecChecker.finish`); at ``finish(T)``
  the average interval, counting the at most P refreshes still legally owed, must be at most tREFI:
  ``n_REF + P >= floor(T / tREFI)`` (``REFRESH_RATE``). Refreshes pulled in early are not limited.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from enum import Enum

from hw.hbm.config import HBMConfig, HBMTiming

__all__ = ["Cmd", "JedecChecker", "Rule", "RULES", "Scope", "TimingViolation", "OTHER_RULES"]


class Cmd(Enum):
    ACT = "ACT"
    RD = "RD"
    WR = "WR"
    PRE = "PRE"
    PREA = "PREA"
    REF = "REF"


ROW_CMDS = frozenset({Cmd.ACT, Cmd.PRE, Cmd.PREA, Cmd.REF})
COL_CMDS = frozenset({Cmd.RD, Cmd.WR})
ALL_CMDS = frozenset(Cmd)


class Scope(Enum):
    BANK = "bank"
    BANK_GROUP = "bank_group"
    PSEUDO_CHANNEL = "pseudo_channel"


class TimingViolation(AssertionError):
    """A JEDEC rule was broken. ``rules`` lists every rule the offending command broke (the first one
    is ``rule``); the message names each rule, the two commands and their cycles."""

    def __init__(self, violations: list[tuple[str, str]]):
        self.rules = tuple(name for name, _ in violations)
        self.rule = self.rules[0]
        super().__init__("; ".join(msg for _, msg in violations))


@dataclass(frozen=True)
class Rule:
    """``next`` may not follow ``prev`` within ``distance(timing)`` cycles in ``scope``.

    ``formula`` is a sum of :class:`HBMTiming` field names, e.g. ``"CWL + burst_cycles + tWR"``."""

    name: str
    prev: frozenset
    next: frozenset
    scope: Scope
    formula: str

    def distance(self, timing: HBMTiming) -> int:
        return sum(getattr(timing, term.strip()) for term in self.formula.split("+"))


def _r(name, prev, nxt, scope, formula):
    return Rule(name, frozenset(prev), frozenset(nxt), Scope(scope), formula)


A, R, W, P, PA, F = Cmd.ACT, Cmd.RD, Cmd.WR, Cmd.PRE, Cmd.PREA, Cmd.REF

RULES: tuple[Rule, ...] = (
    # ---- same bank ----
    _r("tRCD_RD", {A}, {R}, "bank", "tRCD"),
    _r("tRCD_WR", {A}, {W}, "bank", "tRCD"),
    _r("tRAS", {A}, {P, PA}, "bank", "tRAS"),
    _r("tRC", {A}, {A}, "bank", "tRC"),
    _r("tRP", {P, PA}, {A, F}, "bank", "tRP"),
    _r("tRTP", {R}, {P, PA}, "bank", "tRTP"),
    _r("tWR", {W}, {P, PA}, "bank", "CWL + burst_cycles + tWR"),
    # ---- same bank group ----
    _r("tRRD_L", {A}, {A}, "bank_group", "tRRD_L"),
    _r("tCCD_L_RD", {R}, {R}, "bank_group", "tCCD_L"),
    _r("tCCD_L_WR", {W}, {W}, "bank_group", "tCCD_L"),
    _r("tWTR_L", {W}, {R}, "bank_group", "CWL + burst_cycles + tWTR_L"),
    # ---- same pseudo-channel ----
    _r("tRRD_S", {A}, {A}, "pseudo_channel", "tRRD_S"),
    _r("tCCD_S_RD", {R}, {R}, "pseudo_channel", "tCCD_S"),
    _r("tCCD_S_WR", {W}, {W}, "pseudo_channel", "tCCD_S"),
    _r("tWTR_S", {W}, {R}, "pseudo_channel", "CWL + burst_cycles + tWTR_S"),
    _r("tRTW", {R}, {W}, "pseudo_channel", "tRTW"),
    _r("tRFC", {F}, ALL_CMDS, "pseudo_channel", "tRFC"),
)
"""The rule table. The tFAW window and the checks in :data:`OTHER_RULES` come on top."""

OTHER_RULES: dict[str, str] = {
    "tFAW": "at most 4 ACT per pseudo-channel in any tFAW window: ACT n+4 - ACT n >= tFAW",
    "DATA_BUS": "RD data [t+CL, t+CL+burst_cycles) and WR data [t+CWL, t+CWL+burst_cycles) never overlap",
    "CMD_BUS_ROW": "one row command (ACT/PRE/PREA/REF) per pseudo-channel per cycle",
    "CMD_BUS_COL": "one column command (RD/WR) per pseudo-channel per cycle",
    "CYCLE_ORDER": "commands in non-decreasing cycle order",
    "ADDRESS_RANGE": "pc, bank_group, bank, row, column within the configuration",
    "RDWR_BANK_CLOSED": "RD/WR need an open row in the bank",
    "RDWR_ROW_MISS": "RD/WR must address the open row",
    "ACT_BANK_OPEN": "ACT needs the bank closed",
    "REF_BANK_OPEN": "REF needs every bank of the pseudo-channel closed",
    "REFRESH_GAP": "gap between REFs (and from cycle 0 / to now) <= (max_refresh_postpone + 1) * tREFI",
    "REFRESH_RATE": "at finish(T): n_REF + max_refresh_postpone >= floor(T / tREFI)",
}


@dataclass
class _Entry:
    cycle: int
    cmd: Cmd
    targets: frozenset | None  # set of (bank_group, bank); None = every bank (REF)
    label: str


class _PCState:
    def __init__(self, config: HBMConfig):
        self.open_rows: dict[tuple[int, int], int] = {}
        # latest command of each kind, per level: ("bank", cmd, (bg, b)), ("bg", cmd, bg),
        # ("pc", cmd) over every command, ("pc_eff", cmd) over commands that touched a bank, and
        # ("all", cmd) for all-bank commands (REF). Only the latest can be the binding one.
        self.last: dict[tuple, _Entry] = {}
        self.acts: deque[_Entry] = deque(maxlen=4)
        self.bursts: deque[tuple[int, int, _Entry]] = deque()
        self.last_row_cycle = -1
        self.last_col_cycle = -1
        self.refs: list[int] = []


def _fmt_target(pc: int, cmd: Cmd, bg: int, bank: int, row: int, column: int) -> str:
    if cmd in (Cmd.REF, Cmd.PREA):
        return f"{cmd.value}(pc{pc})"
    if cmd is Cmd.PRE:
        return f"PRE(pc{pc} bg{bg} b{bank})"
    if cmd is Cmd.ACT:
        return f"ACT(pc{pc} bg{bg} b{bank} row{row})"
    return f"{cmd.value}(pc{pc} bg{bg} b{bank} row{row} col{column})"


class JedecChecker:
    """Checks a command stream against the JEDEC rules for ``config`` (see the module docstring).

    Args:
        config: the :class:`HBMConfig` (geometry, timing set, max_refresh_postpone).
    """

    def __init__(self, config: HBMConfig):
        self.config = config
        self.timing = config.timing
        t = config.timing
        self._rules_by_next: dict[Cmd, list[tuple[Rule, int]]] = {c: [] for c in Cmd}
        for rule in RULES:
            for c in rule.next:
                self._rules_by_next[c].append((rule, rule.distance(t)))
        self._pcs = [_PCState(config) for _ in range(config.pseudo_channels)]
        self._now = 0
        self.commands = 0

    # ---- state queries (used by the device model) --------------------------------------------
    def open_row(self, pc: int, bank_group: int, bank: int) -> int | None:
        return self._pcs[pc].open_rows.get((bank_group, bank))

    def refresh_cycles(self, pc: int) -> list[int]:
        return list(self._pcs[pc].refs)

    @property
    def now(self) -> int:
        return self._now

    # ---- the check ------------------------------------------------------------------------------
    def command(self, cycle: int, pc: int, cmd: Cmd | str, bank_group: int = 0, bank: int = 0,
                row: int = 0, column: int = 0) -> None:
        """Check one command at ``cycle`` and apply it; raise :class:`TimingViolation` on any
        violation (the state is then left as before the command)."""
        cmd = Cmd(cmd)
        cfg = self.config
        v: list[tuple[str, str]] = []
        label = _fmt_target(pc, cmd, bank_group, bank, row, column)
        if isinstance(cycle, bool) or not isinstance(cycle, int) or cycle < self._now:
            raise TimingViolation([("CYCLE_ORDER", f"CYCLE_ORDER violated: {label} at cycle {cycle!r} "
                                    f"after a command or tick at cycle {self._now}")])
        for name, value, size in (("pc", pc, cfg.pseudo_channels), ("bank_group", bank_group, cfg.bank_groups),
                                  ("bank", bank, cfg.banks_per_group), ("row", row, cfg.rows),
                                  ("column", column, cfg.columns)):
            if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < size:
                raise TimingViolation([("ADDRESS_RANGE", f"ADDRESS_RANGE violated: {cmd.value} at cycle "
                                        f"{cycle}: {name} must be an integer from 0 to {size - 1}; got {value!r}")])
        self._check_refresh_gaps(cycle, v)
        st = self._pcs[pc]
        t = self.timing
        key = (bank_group, bank)

        # command bus slots
        if cmd in ROW_CMDS and st.last_row_cycle == cycle:
            v.append(("CMD_BUS_ROW", f"CMD_BUS_ROW violated: {label} at cycle {cycle}: a row command "
                      f"was already issued to pc{pc} at cycle {cycle}"))
        if cmd in COL_CMDS and st.last_col_cycle == cycle:
            v.append(("CMD_BUS_COL", f"CMD_BUS_COL violated: {label} at cycle {cycle}: a column command "
                      f"was already issued to pc{pc} at cycle {cycle}"))

        # prerequisites and the targets of this command
        if cmd is Cmd.ACT:
            if key in st.open_rows:
                v.append(("ACT_BANK_OPEN", f"ACT_BANK_OPEN violated: {label} at cycle {cycle}: bank holds "
                          f"open row {st.open_rows[key]} (PRE it first)"))
            targets = frozenset({key})
        elif cmd in COL_CMDS:
            if key not in st.open_rows:
                v.append(("RDWR_BANK_CLOSED", f"RDWR_BANK_CLOSED violated: {label} at cycle {cycle}: "
                          f"bank is closed (ACT it first)"))
            elif st.open_rows[key] != row:
                v.append(("RDWR_ROW_MISS", f"RDWR_ROW_MISS violated: {label} at cycle {cycle}: bank holds "
                          f"open row {st.open_rows[key]}, not row {row}"))
            targets = frozenset({key})
        elif cmd is Cmd.PRE:
            targets = frozenset({key}) if key in st.open_rows else frozenset()
        elif cmd is Cmd.PREA:
            targets = frozenset(st.open_rows)
        else:  # REF
            if st.open_rows:
                banks = ", ".join(f"bg{g} b{b} row{r}" for (g, b), r in sorted(st.open_rows.items()))
                v.append(("REF_BANK_OPEN", f"REF_BANK_OPEN violated: {label} at cycle {cycle}: "
                          f"open banks: {banks} (precharge all first)"))
            targets = None

        # the rule table
        for rule, dist in self._rules_by_next[cmd]:
            for e in self._candidates(st, rule, targets):
                if cycle - e.cycle < dist:
                    v.append((rule.name, f"{rule.name} violated: {e.label} at cycle {e.cycle} -> {label} "
                              f"at cycle {cycle}: distance {cycle - e.cycle} < {rule.formula} = {dist} "
                              f"({rule.scope.value} scope)"))
                    break

        # four-activate window
        if cmd is Cmd.ACT and len(st.acts) == 4 and cycle - st.acts[0].cycle < t.tFAW:
            e = st.acts[0]
            v.append(("tFAW", f"tFAW violated: {e.label} at cycle {e.cycle} -> {label} at cycle {cycle}: "
                      f"fifth ACT within tFAW = {t.tFAW} (distance {cycle - e.cycle}; ACTs at "
                      f"{', '.join(str(a.cycle) for a in st.acts)})"))

        # data bus
        burst = None
        if cmd in COL_CMDS:
            start = cycle + (t.CL if cmd is Cmd.RD else t.CWL)
            burst = (start, start + t.burst_cycles)
            for s, end, e in st.bursts:
                if s < burst[1] and burst[0] < end:
                    v.append(("DATA_BUS", f"DATA_BUS violated: {e.label} at cycle {e.cycle} -> {label} at "
                              f"cycle {cycle}: data cycles [{burst[0]}, {burst[1]}) overlap [{s}, {end})"))
                    break

        if v:
            raise TimingViolation(v)

        # ---- apply -------------------------------------------------------------------------------
        self._now = cycle
        self.commands += 1
        entry = _Entry(cycle, cmd, targets, label)
        st.last[("pc", cmd)] = entry
        if targets is None:
            st.last[("all", cmd)] = entry
            st.last[("pc_eff", cmd)] = entry
        elif targets:
            st.last[("pc_eff", cmd)] = entry
            for g, b in targets:
                st.last[("bank", cmd, (g, b))] = entry
                st.last[("bg", cmd, g)] = entry
        if cmd in ROW_CMDS:
            st.last_row_cycle = cycle
        else:
            st.last_col_cycle = cycle
        if cmd is Cmd.ACT:
            st.open_rows[key] = row
            st.acts.append(entry)
        elif cmd is Cmd.PRE:
            st.open_rows.pop(key, None)
        elif cmd is Cmd.PREA:
            st.open_rows.clear()
        elif cmd is Cmd.REF:
            st.refs.append(cycle)
        if burst is not None:
            st.bursts.append((burst[0], burst[1], entry))
            while st.bursts and st.bursts[0][1] <= cycle:
                st.bursts.popleft()

    @staticmethod
    def _candidates(st: _PCState, rule: Rule, targets: frozenset | None) -> list[_Entry]:
        """The latest previous commands of ``rule.prev`` within ``rule.scope`` of ``targets`` (only
        the latest can bind). A no-op precharge (empty target set) has no bank-level effect."""
        out = []
        if targets == frozenset() and rule.scope is not Scope.PSEUDO_CHANNEL:
            return out
        for pcmd in rule.prev:
            if rule.scope is Scope.PSEUDO_CHANNEL:
                keys = [("pc", pcmd)]
            elif targets is None:
                keys = [("pc_eff", pcmd)]
            elif rule.scope is Scope.BANK:
                keys = [("all", pcmd), *(("bank", pcmd, k) for k in targets)]
            else:
                keys = [("all", pcmd), *(("bg", pcmd, g) for g in {g for g, _ in targets})]
            out.extend(st.last[k] for k in keys if k in st.last)
        out.sort(key=lambda e: (-e.cycle, e.label))  # deterministic, latest first
        return out

    def advance(self, cycle: int) -> None:
        """Move time to ``cycle`` without a command (checks refresh gaps)."""
        if isinstance(cycle, bool) or not isinstance(cycle, int) or cycle < self._now:
            raise TimingViolation([("CYCLE_ORDER", f"CYCLE_ORDER violated: advance to cycle {cycle!r} "
                                    f"after cycle {self._now}")])
        v: list[tuple[str, str]] = []
        self._check_refresh_gaps(cycle, v)
        if v:
            raise TimingViolation(v)
        self._now = cycle

    def _gap_limit(self) -> int:
        return (self.config.max_refresh_postpone + 1) * self.timing.tREFI

    def _check_refresh_gaps(self, cycle: int, v: list) -> None:
        limit = self._gap_limit()
        for pc, st in enumerate(self._pcs):
            last = st.refs[-1] if st.refs else 0
            if cycle - last > limit:
                since = f"REF at cycle {last}" if st.refs else "start at cycle 0"
                v.append(("REFRESH_GAP", f"REFRESH_GAP violated on pc{pc}: {since} -> no REF by cycle "
                          f"{cycle}: gap {cycle - last} > (max_refresh_postpone + 1) * tREFI = {limit}"))

    def finish(self, cycle: int) -> dict:
        """End of run at ``cycle``: check the refresh cadence of every pseudo-channel; return a summary
        ``{"refreshes": [...], "worst_gap_cycles": [...]}`` per pseudo-channel."""
        if isinstance(cycle, bool) or not isinstance(cycle, int) or cycle < self._now:
            raise TimingViolation([("CYCLE_ORDER", f"CYCLE_ORDER violated: finish at cycle {cycle!r} "
                                    f"after cycle {self._now}")])
        v: list[tuple[str, str]] = []
        self._check_refresh_gaps(cycle, v)
        t, postpone = self.timing, self.config.max_refresh_postpone
        summary = {"refreshes": [], "worst_gap_cycles": []}
        for pc, st in enumerate(self._pcs):
            points = [0, *st.refs, cycle]
            worst = max(b - a for a, b in zip(points, points[1:]))
            summary["refreshes"].append(len(st.refs))
            summary["worst_gap_cycles"].append(worst)
            need = cycle // t.tREFI - postpone
            if len(st.refs) < need:
                v.append(("REFRESH_RATE", f"REFRESH_RATE violated on pc{pc}: {len(st.refs)} REFs by cycle "
                          f"{cycle} (last REF at cycle {st.refs[-1] if st.refs else None}); need at least "
                          f"floor({cycle} / tREFI = {t.tREFI}) - max_refresh_postpone = {need}"))
        if v:
            raise TimingViolation(v)
        self._now = cycle
        return summary
