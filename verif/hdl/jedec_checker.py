"""The JEDEC timing checker in HDL, generated from the rule table of :mod:`verif.jedec_checker`.

One table of rules (:data:`verif.jedec_checker.RULES`), two back ends: the Python checker steps the
table command by command; :class:`JedecCheckerHDL` is built from the same table as counters in the
simulated netlist, so a GEMM simulation checks every DRAM command without leaving the simulator.

How the table becomes hardware, for one pseudo-channel:

* For every previous command ``p`` a rule names, a saturating counter per scope instance holds the
  distance in cycles since the latest ``p`` that touched it: per bank, per bank group, per
  pseudo-channel (any ``p``) and "effective" per pseudo-channel (a ``p`` that touched some bank; a PRE
  of a closed bank touches none). REF touches every bank; PREA touches the banks that were open. This
  is the Python checker's rule for which earlier command can bind (only the latest can).
* A command violates rule ``r`` when a counter of one of ``r.prev`` in ``r.scope`` of the command's
  targets is below the rule's distance (the sum of timing fields of ``r.formula``).
* The checks outside the table follow :data:`verif.jedec_checker.OTHER_RULES`: the tFAW window (the
  distances of the last four ACTs), the data bus (a bitmap of future data cycles), the bank-state
  prerequisites (an open-row register per bank), the refresh gap (a counter since the last REF), the
  refresh rate (checked when ``finish`` is strobed) and the address range. CMD_BUS_ROW/COL and
  CYCLE_ORDER cannot be violated at the pins (one row and one column command per cycle, time moves
  forward). Two device rules join them: write data exactly at WR + CWL (WRITE_DATA_MISSING /
  WRITE_DATA_UNEXPECTED).
* A row and a column command in the same cycle are checked in that order, the column command seeing
  the row command's effect (as the cocotb bench feeds the Python checker).

The first violation is latched: ``violation`` rises and stays high, and the ``v_*`` outputs hold the
rule (an index into :data:`CHECKS`), the cycle, the command and its address, the previous command's
kind and the distance. :func:`describe` turns them into the Python checker's kind of message. The
netlist also prints one line (``$write``) when it latches.
"""

from __future__ import annotations

from amaranth.hdl import Array, Cat, Const, Format, Module, Mux, Print, Signal, Value
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from hw.hbm.config import HBMConfig
from hw.hbm.interface import ColCmd, RowCmd

from ..jedec_checker import COL_CMDS, RULES, Cmd, Scope

__all__ = ["CHECKS", "CMD_CODE", "JedecCheckerHDL", "describe"]

#: Every check, in the order the Python checker reports them for one command (the first wins).
CHECKS: tuple[str, ...] = ("ADDRESS_RANGE", "REFRESH_GAP", "ACT_BANK_OPEN", "RDWR_BANK_CLOSED", "RDWR_ROW_MISS",
                           "REF_BANK_OPEN", *(r.name for r in RULES), "tFAW", "DATA_BUS", "REFRESH_RATE",
                           "WRITE_DATA_MISSING", "WRITE_DATA_UNEXPECTED")
#: Command kinds on the ``v_cmd`` / ``v_prev`` outputs (0: none).
CMD_CODE = {Cmd.ACT: 1, Cmd.PRE: 2, Cmd.PREA: 3, Cmd.REF: 4, Cmd.RD: 5, Cmd.WR: 6}
_ROW_KIND = {RowCmd.ACT: Cmd.ACT, RowCmd.PRE: Cmd.PRE, RowCmd.PREA: Cmd.PREA, RowCmd.REF: Cmd.REF}
_COL_KIND = {ColCmd.RD: Cmd.RD, ColCmd.WR: Cmd.WR}
CYCLE_BITS = 48


def describe(fields: dict, pc: int, config: HBMConfig) -> str:
    """The message of a latched violation: ``fields`` maps the checker's ``v_*`` output names (without
    ``v_``) to integers. Names the rule, both commands and their cycles, the pseudo-channel, bank group
    and bank."""
    rule, cycle = CHECKS[fields["rule"]], fields["cycle"]
    kinds = {v: k.value for k, v in CMD_CODE.items()}
    cmd = kinds.get(fields["cmd"], "none")
    where = f"pc{pc} bg{fields['bg']} b{fields['bank']}"
    if cmd in ("RD", "WR", "ACT"):
        where += f" row{fields['row']}" + (f" col{fields['col']}" if cmd != "ACT" else "")
    what = f"{cmd}({where}) at cycle {cycle}" if cmd != "none" else f"pc{pc} at cycle {cycle}"
    if fields["prev"]:
        prev = kinds[fields["prev"]]
        d = fields["distance"]
        table = {r.name: r for r in RULES}
        bound = f" < {table[rule].formula} = {table[rule].distance(config.timing)}" if rule in table else ""
        return f"{rule} violated: {prev} at cycle {cycle - d} -> {what}: distance {d}{bound}"
    return f"{rule} violated: {what}"


class JedecCheckerHDL(wiring.Component):
    """Checks one pseudo-channel's DRAM command pins against the JEDEC rules (simulation only).

    Ports:
        row_cmd, row_bg, row_bank, row_row, col_cmd, col_bg, col_bank, col_row, col_column,
            wdata_valid: In, the pins of :func:`hw.hbm.controller.dram_signature` (as the device sees
            them).
        finish: In(1), strobe at the end of a run: checks the refresh rate (REFRESH_RATE).
        violation: Out(1), high from the cycle after the first violation on.
        v_rule: Out, index into :data:`CHECKS`; v_cycle: Out(48), its cycle (0 = the first cycle
            after reset); v_cmd, v_prev: Out(3), :data:`CMD_CODE` of the command and of the earlier
            command it is too close to (0 for checks without one); v_bg, v_bank, v_row, v_col: its
            address; v_distance: Out, cycles between the two commands.
        refreshes: Out(32), REFs seen; cycle: Out(48), the current cycle.

    Args:
        config: the :class:`~hw.hbm.config.HBMConfig` (geometry, timing set, refresh postponement).
        pc: the pseudo-channel's index (for the printed message only).
    """

    def __init__(self, config: HBMConfig, pc: int = 0):
        self.config, self.pc = config, pc
        b = config.field_bits
        self._dmax = max([r.distance(config.timing) for r in RULES] + [config.timing.tFAW]) + 1
        super().__init__({
            "row_cmd": In(RowCmd), "row_bg": In(max(1, b["bank_group"])), "row_bank": In(max(1, b["bank"])),
            "row_row": In(max(1, b["row"])), "col_cmd": In(ColCmd), "col_bg": In(max(1, b["bank_group"])),
            "col_bank": In(max(1, b["bank"])), "col_row": In(max(1, b["row"])),
            "col_column": In(max(1, b["column"])), "wdata_valid": In(1), "finish": In(1),
            "violation": Out(1), "v_rule": Out(range(len(CHECKS))), "v_cycle": Out(CYCLE_BITS), "v_cmd": Out(3),
            "v_prev": Out(3), "v_bg": Out(max(1, b["bank_group"])), "v_bank": Out(max(1, b["bank"])),
            "v_row": Out(max(1, b["row"])), "v_col": Out(max(1, b["column"])), "v_distance": Out(range(self._dmax + 1)),
            "refreshes": Out(32), "cycle": Out(CYCLE_BITS)})

    def elaborate(self, platform):
        m = Module()
        cfg, t = self.config, self.config.timing
        nbg, nb = cfg.bank_groups, cfg.banks_per_group
        banks = [(g, b) for g in range(nbg) for b in range(nb)]
        dmax = self._dmax
        m.d.sync += self.cycle.eq(self.cycle + 1)

        def counter(name):  # cycles since the latest touch, saturating; "never" reads as dmax
            return Signal(range(dmax + 1), name=name, init=dmax)

        # ---- state -------------------------------------------------------------------------------
        open_v = [Signal(name=f"open_{g}_{b}") for g, b in banks]
        open_row = [Signal(len(self.row_row), name=f"open_row_{g}_{b}") for g, b in banks]
        prevs = sorted({p for r in RULES for p in r.prev}, key=lambda c: CMD_CODE[c])
        c_bank = {p: [counter(f"d_{p.value}_{g}_{b}") for g, b in banks] for p in prevs}
        c_bg = {p: [counter(f"d_{p.value}_bg{g}") for g in range(nbg)] for p in prevs}
        c_pc = {p: counter(f"d_{p.value}_pc") for p in prevs}
        c_eff = {p: counter(f"d_{p.value}_eff") for p in prevs}
        acts = [counter(f"act_age{i}") for i in range(4)]  # distances of the last four ACTs
        n_acts = Signal(range(5))
        span = max(t.CL, t.CWL) + t.burst_cycles
        busy = Signal(span + 1)  # bit i: the data bus is busy i cycles from now
        gap_limit = (cfg.max_refresh_postpone + 1) * t.tREFI
        since_ref = Signal(range(gap_limit + 2))
        refi_phase = Signal(range(t.tREFI))
        refi_periods = Signal(32)
        wr_pipe = Signal(t.CWL)

        # ---- the two commands of this cycle ------------------------------------------------------
        row_idx, col_idx = Signal(range(len(banks))), Signal(range(len(banks)))
        m.d.comb += [row_idx.eq(self.row_bg * nb + self.row_bank), col_idx.eq(self.col_bg * nb + self.col_bank)]
        is_row = {k: self.row_cmd == rc for rc, k in _ROW_KIND.items()}
        is_col = {k: self.col_cmd == cc for cc, k in _COL_KIND.items()}
        issued = {**is_row, **is_col}
        # banks each command touches (targets), and the open state after the row command
        row_t = [Signal(name=f"row_t_{g}_{b}") for g, b in banks]
        col_t = [Signal(name=f"col_t_{g}_{b}") for g, b in banks]
        open_after = [Signal(name=f"open_after_{g}_{b}") for g, b in banks]
        for i in range(len(banks)):
            here = row_idx == i
            m.d.comb += [
                row_t[i].eq((is_row[Cmd.ACT] & here) | (is_row[Cmd.PRE] & here & open_v[i])
                            | (is_row[Cmd.PREA] & open_v[i]) | is_row[Cmd.REF]),
                col_t[i].eq((self.col_cmd != ColCmd.NOP) & (col_idx == i)),
                open_after[i].eq(Mux(is_row[Cmd.ACT] & here, 1,
                                      Mux((is_row[Cmd.PRE] & here) | is_row[Cmd.PREA], 0, open_v[i]))),
            ]

        def touched(p, i):  # did this cycle's command of kind p touch bank i
            return (row_t[i] if p not in COL_CMDS else col_t[i]) & issued[p]

        # ---- checks: one (fire, prev, distance) per CHECKS entry, row command then column command --
        fires = {name: [] for name in CHECKS}  # name -> [(fire, prev code, distance, from the column command)]

        bg_hit = [Cat(*(row_t[j] for j, (g, _) in enumerate(banks) if g == gg)).any() for gg in range(nbg)]

        def cand(p, level, at, same_cycle):
            """Distance to the latest p in this scope (``at``: a bank or bank-group index, an int or a
            Value); for the column command, 0 when this cycle's row command was that p and touched it."""
            pick = (lambda xs: xs[at]) if isinstance(at, int) else (lambda xs: Array(xs)[at])
            reg = {"bank": lambda: pick(c_bank[p]), "bg": lambda: pick(c_bg[p]), "pc": lambda: c_pc[p],
                   "eff": lambda: c_eff[p]}[level]()
            if not same_cycle or p in COL_CMDS:
                return reg
            hit = {"bank": lambda: pick(row_t), "eff": lambda: Cat(*row_t).any(), "pc": lambda: Const(1),
                   "bg": lambda: pick(bg_hit)}[level]()
            return Mux(issued[p] & hit, 0, reg)

        for col in (False, True):
            kinds = _COL_KIND.values() if col else _ROW_KIND.values()
            idx = col_idx if col else row_idx
            for rule in RULES:
                dist = rule.distance(t)
                for k in (k for k in kinds if k in rule.next):
                    for p in sorted(rule.prev, key=lambda c: CMD_CODE[c]):
                        for sel, d in self._candidates(rule, k, p, banks, col, open_v, cand):
                            fires[rule.name].append((issued[k] & sel & (d < dist), CMD_CODE[p], d, col))
            if not col:
                here = [idx == i for i in range(len(banks))]
                any_open = Cat(*open_v).any()
                fires["ACT_BANK_OPEN"].append((is_row[Cmd.ACT] & Cat(*(h & o for h, o in zip(here, open_v))).any(),
                                               0, 0, False))
                fires["REF_BANK_OPEN"].append((is_row[Cmd.REF] & any_open, 0, 0, False))
                fires["tFAW"].append((is_row[Cmd.ACT] & (n_acts == 4) & (acts[3] < t.tFAW), CMD_CODE[Cmd.ACT],
                                      acts[3], False))
            else:
                any_col = self.col_cmd != ColCmd.NOP
                here_open = Cat(*(open_after[i] & (idx == i) for i in range(len(banks)))).any()
                row_after = [Mux(is_row[Cmd.ACT] & (row_idx == i), self.row_row, open_row[i])
                             for i in range(len(banks))]
                row_match = Cat(*((row_after[i] == self.col_row) & (idx == i) for i in range(len(banks)))).any()
                fires["RDWR_BANK_CLOSED"].append((any_col & ~here_open, 0, 0, True))
                fires["RDWR_ROW_MISS"].append((any_col & here_open & ~row_match, 0, 0, True))
                lat = Mux(is_col[Cmd.RD], t.CL, t.CWL)
                window = (busy >> lat) & ((1 << t.burst_cycles) - 1)
                fires["DATA_BUS"].append((any_col & window.any(), 0, 0, True))
        for sig, size, col in ((self.row_bg, nbg, False), (self.row_bank, nb, False), (self.row_row, cfg.rows, False),
                               (self.col_bg, nbg, True), (self.col_bank, nb, True), (self.col_row, cfg.rows, True),
                               (self.col_column, cfg.columns, True)):
            cmd_on = (self.col_cmd != ColCmd.NOP) if col else (self.row_cmd != RowCmd.NOP)
            fires["ADDRESS_RANGE"].append((cmd_on & (sig >= size), 0, 0, col))
        fires["REFRESH_GAP"].append((since_ref > gap_limit, 0, 0, False))
        fires["REFRESH_RATE"].append((self.finish & (self.refreshes + cfg.max_refresh_postpone < refi_periods),
                                      0, 0, False))
        fires["WRITE_DATA_MISSING"].append((wr_pipe[-1] & ~self.wdata_valid, 0, 0, True))
        fires["WRITE_DATA_UNEXPECTED"].append((~wr_pipe[-1] & self.wdata_valid, 0, 0, True))

        # ---- latch the first violation (row command's checks before the column command's) --------
        # A priority one-hot over every check in order, then each field as an OR over the one-hot:
        # the same choice as an if/elif chain of some 300 conditions, which Verilator's merge_cond
        # pass took 3.6 s of a device model's 5.7 s to verilate.
        order = [(n, f) for col in (False, True) for n in CHECKS for f in fires[n] if f[3] == col]
        fire = Signal(len(order), name="fire")
        first = Signal(len(order), name="fire_first")  # the lowest set bit of fire
        m.d.comb += [fire.eq(Cat(*(f[0] for _, f in order))), first.eq(fire & (~fire + 1)[:len(order)])]

        def any_of(pred):
            return Cat(*(first[i] for i, (n, f) in enumerate(order) if pred(n, f))).any()

        rule_hit = {name: any_of(lambda n, f, name=name: n == name) for name in CHECKS}
        by_col = any_of(lambda n, f: f[3])
        no_cmd = rule_hit["REFRESH_GAP"] | rule_hit["REFRESH_RATE"]
        cmd = Mux(by_col, Mux(is_col[Cmd.RD], CMD_CODE[Cmd.RD], CMD_CODE[Cmd.WR]),
                  self.row_cmd.as_value())  # RowCmd codes equal CMD_CODE for row commands
        rule_code = Cat(*(Cat(*(rule_hit[nm] for j, nm in enumerate(CHECKS) if j >> k & 1)).any()
                          for k in range(len(self.v_rule))))
        prev_code = Cat(*(any_of(lambda n, f, k=k: f[1] >> k & 1) for k in range(len(self.v_prev))))
        dist = Signal.like(self.v_distance, name="fire_distance")
        dists = [(first[i], Value.cast(f[2])) for i, (_, f) in enumerate(order)]
        m.d.comb += dist.eq(Cat(*(Cat(*(hit & d[k] for hit, d in dists if k < len(d))).any()
                                  for k in range(len(dist)))))
        with m.If(~self.violation & fire.any()):
            m.d.sync += [self.violation.eq(1), self.v_rule.eq(rule_code), self.v_cycle.eq(self.cycle),
                         self.v_cmd.eq(Mux(no_cmd, 0, cmd)), self.v_prev.eq(prev_code), self.v_distance.eq(dist),
                         self.v_bg.eq(Mux(by_col, self.col_bg, self.row_bg)),
                         self.v_bank.eq(Mux(by_col, self.col_bank, self.row_bank)),
                         self.v_row.eq(Mux(by_col, self.col_row, self.row_row)), self.v_col.eq(self.col_column)]
        for name in CHECKS:
            with m.If(~self.violation & rule_hit[name]):
                m.d.sync += Print(Format(f"JEDEC {name} violated on pc{self.pc} at cycle {{}}", self.cycle))

        # ---- update the state ----------------------------------------------------------------------
        def step(c, hit):
            m.d.sync += c.eq(Mux(hit, 1, Mux(c < dmax, c + 1, c)))

        for p in prevs:
            for i in range(len(banks)):
                step(c_bank[p][i], touched(p, i))
            for g in range(nbg):
                step(c_bg[p][g], Cat(*(touched(p, i) for i, (gg, _) in enumerate(banks) if gg == g)).any())
            step(c_pc[p], issued[p])
            step(c_eff[p], Cat(*(touched(p, i) for i in range(len(banks)))).any())
        for i in range(len(banks)):
            m.d.sync += [open_v[i].eq(open_after[i])]
            with m.If(is_row[Cmd.ACT] & (row_idx == i)):
                m.d.sync += open_row[i].eq(self.row_row)
        with m.If(is_row[Cmd.ACT]):
            m.d.sync += [acts[0].eq(1), n_acts.eq(Mux(n_acts < 4, n_acts + 1, 4))]
            for i in range(1, 4):
                m.d.sync += acts[i].eq(Mux(acts[i - 1] < dmax, acts[i - 1] + 1, dmax))
        with m.Else():
            for a in acts:
                m.d.sync += a.eq(Mux(a < dmax, a + 1, a))
        new = Signal.like(busy)
        lat = Mux(is_col[Cmd.RD], t.CL, t.CWL)
        m.d.comb += new.eq(Mux(self.col_cmd != ColCmd.NOP, ((1 << t.burst_cycles) - 1) << lat, 0))
        m.d.sync += busy.eq((busy | new) >> 1)
        m.d.sync += [since_ref.eq(Mux(is_row[Cmd.REF], 1, Mux(since_ref <= gap_limit, since_ref + 1, since_ref))),
                     refi_phase.eq(Mux(refi_phase == t.tREFI - 1, 0, refi_phase + 1)),
                     wr_pipe.eq(Cat(is_col[Cmd.WR], wr_pipe[:-1]))]
        with m.If(refi_phase == t.tREFI - 1):
            m.d.sync += refi_periods.eq(refi_periods + 1)
        with m.If(is_row[Cmd.REF]):
            m.d.sync += self.refreshes.eq(self.refreshes + 1)
        return m

    def _candidates(self, rule, k, p, banks, col, open_v, cand):
        """(selected, distance) pairs: the earlier commands of kind ``p`` that can bind ``rule`` for a
        command of kind ``k`` (the Python checker's ``_candidates``: only the latest can bind)."""
        if rule.scope is Scope.PSEUDO_CHANNEL:
            return [(Const(1), cand(p, "pc", None, col))]
        if k is Cmd.REF:
            return [(Const(1), cand(p, "eff", None, col))]
        level = "bank" if rule.scope is Scope.BANK else "bg"
        if k is Cmd.PREA:  # every bank that is open
            return [(open_v[i], cand(p, level, i if level == "bank" else g, col)) for i, (g, _) in enumerate(banks)]
        bg, bank = (self.col_bg, self.col_bank) if col else (self.row_bg, self.row_bank)
        idx = bg * self.config.banks_per_group + bank
        sel = Array(open_v)[idx] if k is Cmd.PRE else Const(1)  # a PRE of a closed bank touches none
        return [(sel, cand(p, level, idx if level == "bank" else bg, col))]
