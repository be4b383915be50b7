"""The JEDEC checker's self-test traces: every rule of the table violated one cycle early and met at
exactly its minimum distance.

Shared by the two back ends of the checker (:mod:`verif.jedec_checker` in Python,
:mod:`verif.hdl.jedec_checker` in HDL) so both are fed the same command streams and must give the
same verdicts. A scenario builds ``(setup, ref_cycle, next_cmd)`` from a timing set: ``setup`` is
``[(cycle, cmd, (bank_group, bank), row, column)]``; the next command is issued at ``ref_cycle + d``
(legal) and ``ref_cycle + d - 1`` (must violate the rule), ``d`` the rule's distance. Where a preset
makes a rule unreachable because another rule is stricter (tCCD_S = 1 < burst_cycles, tRC =
tRAS + tRP), ``tweak`` raises that rule's figure just enough to make it the binding one.
"""

from __future__ import annotations

import dataclasses

from hw.hbm.config import HBMConfig, HBMTiming

from .jedec_checker import RULES, JedecChecker, TimingViolation

__all__ = ["SCENARIOS", "EXTRA", "RULE_BY_NAME", "boundary_traces", "python_verdict", "recorded_trace", "mutants"]

B0 = (0, 0)  # bank group 0, bank 0
B1 = (0, 1)  # same bank group, other bank
G1 = (1, 0)  # other bank group


# ---- scenarios: (rule, tweak(t) -> t, build(t) -> (setup, ref_cycle, next_cmd)) ----------------
# setup: [(cycle, cmd, (bg, bank), row, column)]; the next command is issued at ref_cycle + d
# (must pass) and ref_cycle + d - 1 (must raise naming the rule), d = the rule's distance.


def _s(cycle, cmd, bank=B0, row=5, col=0):
    return (cycle, cmd, bank, row, col)


def sc_trcd_rd(t):
    return [_s(0, "ACT")], 0, ("RD", B0, 5, 0)


def sc_trcd_wr(t):
    return [_s(0, "ACT")], 0, ("WR", B0, 5, 0)


def sc_tras(t):
    return [_s(0, "ACT")], 0, ("PRE", B0, 0, 0)


def sc_tras_prea(t):
    return [_s(0, "ACT")], 0, ("PREA", B0, 0, 0)


def sc_trc(t):
    return [_s(0, "ACT"), _s(t.tRAS, "PRE")], 0, ("ACT", B0, 6, 0)


def sc_trp(t):
    return [_s(0, "ACT"), _s(t.tRAS, "PRE")], t.tRAS, ("ACT", B0, 6, 0)


def sc_trp_ref(t):
    return [_s(0, "ACT"), _s(t.tRAS, "PRE")], t.tRAS, ("REF", B0, 0, 0)


def sc_trp_prea_ref(t):
    p = t.tRRD_S + t.tRAS
    return [_s(0, "ACT"), _s(t.tRRD_S, "ACT", G1), _s(p, "PREA")], p, ("REF", B0, 0, 0)


def sc_trtp(t):
    return [_s(0, "ACT"), _s(t.tRAS, "RD")], t.tRAS, ("PRE", B0, 0, 0)


def sc_twr(t):
    return [_s(0, "ACT"), _s(t.tRAS, "WR")], t.tRAS, ("PRE", B0, 0, 0)


def sc_twr_prea(t):
    return [_s(0, "ACT"), _s(t.tRAS, "WR")], t.tRAS, ("PREA", B0, 0, 0)


def sc_trrd_l(t):
    return [_s(0, "ACT")], 0, ("ACT", B1, 5, 0)


def _two_banks(t):  # two open banks of one bank group: proves the bank_group scope
    return [_s(0, "ACT"), _s(t.tRRD_L, "ACT", B1)], t.tRRD_L + t.tRCD


def sc_tccd_l_rd(t):
    setup, p = _two_banks(t)
    return setup + [_s(p, "RD")], p, ("RD", B1, 5, 1)


def sc_tccd_l_wr(t):
    setup, p = _two_banks(t)
    return setup + [_s(p, "WR")], p, ("WR", B1, 5, 1)


def sc_twtr_l(t):
    setup, p = _two_banks(t)
    return setup + [_s(p, "WR")], p, ("RD", B1, 5, 1)


def _two_groups(t):
    return [_s(0, "ACT"), _s(t.tRRD_S, "ACT", G1)], t.tRRD_S + t.tRCD


def sc_trrd_s(t):
    return [_s(0, "ACT")], 0, ("ACT", G1, 5, 0)


def sc_tccd_s_rd(t):
    setup, p = _two_groups(t)
    return setup + [_s(p, "RD")], p, ("RD", G1, 5, 0)


def sc_tccd_s_wr(t):
    setup, p = _two_groups(t)
    return setup + [_s(p, "WR")], p, ("WR", G1, 5, 0)


def sc_twtr_s(t):
    setup, p = _two_groups(t)
    return setup + [_s(p, "WR")], p, ("RD", G1, 5, 0)


def sc_trtw(t):
    setup, p = _two_groups(t)
    return setup + [_s(p, "RD")], p, ("WR", G1, 5, 0)


def sc_trfc_act(t):
    return [_s(0, "REF")], 0, ("ACT", B0, 5, 0)


def sc_trfc_ref(t):
    return [_s(0, "REF")], 0, ("REF", B0, 0, 0)


def sc_trfc_pre(t):
    return [_s(0, "REF")], 0, ("PRE", B0, 0, 0)


def sc_tfaw(t):
    s = t.tRRD_S
    setup = [_s(i * s, "ACT", (i, 0)) for i in range(4)]
    return setup, 0, ("ACT", (0, 1), 5, 0)


def _binding_ccd_s(t):
    ccd_s = t.burst_cycles + 1
    return dataclasses.replace(t, tCCD_S=ccd_s, tCCD_L=max(t.tCCD_L, ccd_s))


def _no_tweak(t):
    return t


# rule name -> (scenario, tweak, distance override for non-table rules)
SCENARIOS = {
    "tRCD_RD": [(sc_trcd_rd, _no_tweak)],
    "tRCD_WR": [(sc_trcd_wr, _no_tweak)],
    "tRAS": [(sc_tras, _no_tweak), (sc_tras_prea, _no_tweak)],
    "tRC": [(sc_trc, lambda t: dataclasses.replace(t, tRC=t.tRAS + t.tRP + 3))],
    "tRP": [(sc_trp, _no_tweak), (sc_trp_ref, _no_tweak), (sc_trp_prea_ref, _no_tweak)],
    "tRTP": [(sc_trtp, _no_tweak)],
    "tWR": [(sc_twr, _no_tweak), (sc_twr_prea, _no_tweak)],
    "tRRD_L": [(sc_trrd_l, _no_tweak)],
    "tCCD_L_RD": [(sc_tccd_l_rd, _no_tweak)],
    "tCCD_L_WR": [(sc_tccd_l_wr, _no_tweak)],
    "tWTR_L": [(sc_twtr_l, _no_tweak)],
    "tRRD_S": [(sc_trrd_s, _no_tweak)],
    "tCCD_S_RD": [(sc_tccd_s_rd, _binding_ccd_s)],
    "tCCD_S_WR": [(sc_tccd_s_wr, _binding_ccd_s)],
    "tWTR_S": [(sc_twtr_s, _no_tweak)],
    "tRTW": [(sc_trtw, _no_tweak)],
    "tRFC": [(sc_trfc_act, _no_tweak), (sc_trfc_ref, _no_tweak), (sc_trfc_pre, _no_tweak)],
}
EXTRA = {  # non-table rules tested at a boundary: name -> (scenario, tweak, distance(t))
    # the tCCD_S scenarios with tCCD_S = 1 < burst_cycles: the data bus is what binds
    "DATA_BUS": [
        (sc_tccd_s_rd, lambda t: dataclasses.replace(t, tCCD_S=1), lambda t: t.burst_cycles),
        (sc_tccd_s_wr, lambda t: dataclasses.replace(t, tCCD_S=1), lambda t: t.burst_cycles),
    ],
    "tFAW": [(sc_tfaw, _no_tweak, lambda t: t.tFAW)],
}
RULE_BY_NAME = {r.name: r for r in RULES}



def boundary_traces(timing: HBMTiming):
    """Every self-test trace for ``timing``: ``(name, tweaked timing, trace, expected)`` with ``trace``
    a list of ``(cycle, cmd, (bank_group, bank), row, column)`` and ``expected`` the rule that must
    fire at the trace's last cycle, or None for the legal trace at the minimum distance."""
    out = []
    cases = [(n, sc, tw, RULE_BY_NAME[n].distance) for n, lst in SCENARIOS.items() for sc, tw in lst]
    cases += [(n, sc, tw, dist) for n, lst in EXTRA.items() for sc, tw, dist in lst]
    for name, scenario, tweak, distance in cases:
        t = tweak(timing)
        setup, ref, (cmd, bank, row, col) = scenario(t)
        d = distance(t)
        for early in (False, True):
            at = ref + d - (1 if early else 0)
            out.append((name, t, [*setup, (at, cmd, bank, row, col)], name if early else None))
    return out


def python_verdict(config: HBMConfig, trace) -> tuple[str, int] | None:
    """The Python checker's first violation on ``trace`` (pseudo-channel 0): (rule, cycle), or None."""
    chk = JedecChecker(config)
    for cycle, cmd, (bg, bank), row, col in trace:
        try:
            chk.command(cycle, 0, cmd, bg, bank, row, col)
        except TimingViolation as e:
            return e.rule, cycle
    return None


def recorded_trace(cmds, addrs, pc: int) -> list:
    """Pseudo-channel ``pc``'s commands of a recorded GEMM run (``run_gemms(trace=...)``: the
    ``cmds`` and ``addrs`` arrays) as a checker trace ``[(cycle, cmd, (bg, bank), row, col)]``,
    the row command of a cycle before its column command (the order the device model saw them)."""
    from hw.hbm.controller import ColCmd, RowCmd

    out = []
    for (cycle, k, row, col), (rbg, rbank, rrow, cbg, cbank, crow, ccol) in zip(cmds.tolist(), addrs.tolist()):
        if k != pc:
            continue
        if row:
            out.append((cycle, RowCmd(row).name, (rbg, rbank), rrow, 0))
        if col:
            out.append((cycle, ColCmd(col).name, (cbg, cbank), crow, ccol))
    return out


def mutants(trace: list, rng, count: int) -> list[tuple[str, list]]:
    """``count`` variants of a legal ``trace``, each with one change a buggy controller could make:
    a command issued 1 to 3 cycles early (where its slot is free), or a PRE / REF left out. Returns
    ``[(description, trace)]``; the two checker back ends must agree on each."""
    out = []
    slot = {(c, cmd in ("RD", "WR")) for c, cmd, *_ in trace}
    while len(out) < count:
        i = int(rng.integers(len(trace)))
        cycle, cmd, bank, row, col = trace[i]
        if rng.random() < 0.7:
            early = int(rng.integers(1, 4))
            at = cycle - early
            if at < 0 or (at, cmd in ("RD", "WR")) in slot:
                continue
            t = [*trace[:i], *trace[i + 1:], (at, cmd, bank, row, col)]
            t.sort(key=lambda e: (e[0], e[1] in ("RD", "WR")))
            out.append((f"{cmd} of cycle {cycle} issued {early} early", t))
        elif cmd in ("PRE", "REF"):
            out.append((f"{cmd} of cycle {cycle} left out", [*trace[:i], *trace[i + 1:]]))
    return out
