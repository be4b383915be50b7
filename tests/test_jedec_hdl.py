"""The HDL JEDEC checker against the Python one: same rule table, same verdicts.

Every self-test trace (each rule of the table violated one cycle early, and met at exactly its
minimum distance; the tFAW and data-bus checks the same way) goes through both back ends on every
timing preset; the first violation (rule and cycle), or none, must be identical. Plus the checks
outside the table that only the netlist has at the pins (write data at WR + CWL) and the refresh
cadence, and the message a latched violation turns into.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from amaranth.hdl import ClockDomain, Elaboratable, Module, Signal, Value
from amaranth.sim import Simulator

from hw.hbm.config import TIMING_PRESETS, HBMConfig
from hw.hbm.controller import ColCmd, RowCmd
from verif.amaranth_tb import set_together
from verif.hdl.jedec_checker import CHECKS, JedecCheckerHDL, describe
from verif.jedec_checker import JedecChecker, TimingViolation
from verif.jedec_selftest import boundary_traces, python_verdict

ROW = {"ACT": RowCmd.ACT, "PRE": RowCmd.PRE, "PREA": RowCmd.PREA, "REF": RowCmd.REF}
COL = {"RD": ColCmd.RD, "WR": ColCmd.WR}
FIELDS = ("rule", "cycle", "cmd", "prev", "bg", "bank", "row", "col", "distance")


def small(timing, **kw) -> HBMConfig:
    """A small geometry (4 bank groups of 2 banks, 8 rows, 4 columns): the traces use bank groups 0-3,
    banks 0-1, rows 5-6 and columns 0-1; the timing constants are what the checker is built from."""
    return HBMConfig(pseudo_channels=1, bank_groups=4, banks_per_group=2, rows=8, columns=4, timing=timing, **kw)


class _Harness(Elaboratable):
    """The checker in a sync domain whose reset the testbench drives (``clear``): one simulation runs
    many traces, each from the reset state."""

    def __init__(self, checker):
        self.checker, self.clear = checker, Signal()

    def elaborate(self, platform):
        m = Module()
        m.domains.sync = cd = ClockDomain()
        m.d.comb += cd.rst.eq(self.clear)
        m.submodules.chk = self.checker
        return m


def hdl_verdicts(config: HBMConfig, traces, *, finish_at=None) -> list[dict | None]:
    """Run each trace (``[(cycle, cmd, (bg, bank), row, col)]``) through the HDL checker from reset;
    return the latched violation's fields of each (None: no violation)."""
    dut = JedecCheckerHDL(config)
    h = _Harness(dut)
    sim = Simulator(h)
    sim.add_clock(1e-6)
    out = []

    # All inputs in one ctx.set per cycle (verif.amaranth_tb.set_together), and a stretch of idle
    # cycles in one tick. The address pins keep their last value under NOP, as the controller's do.
    pins = (
        "row_cmd",
        "row_bg",
        "row_bank",
        "row_row",
        "col_cmd",
        "col_bg",
        "col_bank",
        "col_row",
        "col_column",
        "wdata_valid",
        "finish",
    )

    def drive(ctx, v):
        set_together(ctx, [(getattr(dut, p), v[p]) for p in pins])

    async def bench(ctx):
        for trace in traces:
            ctx.set(h.clear, 1)
            await ctx.tick()
            ctx.set(h.clear, 0)
            by_cycle = {}
            for cycle, cmd, (bg, bank), row, col in trace:
                by_cycle.setdefault(cycle, []).append((cmd, bg, bank, row, col))
            last = max(by_cycle) if by_cycle else 0
            end = max(last, finish_at or 0)
            cwl = config.timing.CWL
            writes = {c + cwl for c, cmds in by_cycle.items() for x in cmds if x[0] == "WR"}
            events = sorted({*by_cycle, *writes, *([finish_at] if finish_at is not None else [])})
            v = {name: ctx.get(Value.cast(getattr(dut, name))) for name in pins}
            c = 0
            for e in [*(x for x in events if x <= end), end + 1]:
                v.update(row_cmd=RowCmd.NOP.value, col_cmd=ColCmd.NOP.value, wdata_valid=0, finish=0)
                if e > c:  # cycles c .. e - 1: no command, no write data
                    drive(ctx, v)
                    await ctx.tick().repeat(e - c)
                    c = e
                if e > end:
                    break
                v["wdata_valid"] = int(c in writes)  # the data of each WR, as the controller sends it
                for cmd, bg, bank, row, col in by_cycle.get(c, []):
                    if cmd in ROW:
                        v.update(row_cmd=ROW[cmd].value, row_bg=bg, row_bank=bank, row_row=row)
                    else:
                        v.update(col_cmd=COL[cmd].value, col_bg=bg, col_bank=bank, col_row=row, col_column=col)
                v["finish"] = int(finish_at is not None and c == finish_at)
                drive(ctx, v)
                await ctx.tick()
                c += 1
            v.update(row_cmd=RowCmd.NOP.value, col_cmd=ColCmd.NOP.value, wdata_valid=0, finish=0)
            drive(ctx, v)
            if ctx.get(dut.violation):
                out.append({f: ctx.get(getattr(dut, f"v_{f}")) for f in FIELDS})
            else:
                out.append(None)

    sim.add_testbench(bench)
    sim.run()
    return out


def verilog_verdicts(simulator: str, config: HBMConfig, traces, report) -> list[dict | None]:
    """Run each trace through the checker's generated Verilog (``verif.tb.jedec_tb``) on ``simulator``;
    return the latched violation's fields of each (None: no violation)."""
    import json

    from sim.runner import generate_verilog, run_cocotb

    verilog = generate_verilog(lambda: JedecCheckerHDL(config), name="jedec_checker", key=config)
    rows = [[[c, cmd, bg, bank, row, col] for c, cmd, (bg, bank), row, col in trace] for trace in traces]
    traces_file = Path(report).with_suffix(".traces.json")
    traces_file.write_text(json.dumps(rows))
    conf = {"traces": str(traces_file), "cwl": config.timing.CWL, "report": str(report)}
    res = run_cocotb(
        [verilog], "jedec_checker", "verif.tb.jedec_tb", simulator=simulator, env={"JEDEC_TB_CONFIG": json.dumps(conf)}
    )
    assert res.failed == 0 and res.passed == 1, res.log_tail()
    return json.loads(Path(report).read_text())


def _group_by_timing(preset):
    groups = {}
    for name, timing, trace, expected in boundary_traces(TIMING_PRESETS[preset]):
        groups.setdefault(timing, []).append((name, trace, expected))
    return groups


@pytest.mark.parametrize("preset", list(TIMING_PRESETS))
def test_self_test_traces_give_the_python_verdicts(preset):
    """Each rule one cycle early fires that rule at that cycle in both back ends; at the minimum
    distance neither fires."""
    n = 0
    for timing, cases in _group_by_timing(preset).items():
        config = small(timing)
        got = hdl_verdicts(config, [trace for _, trace, _ in cases])
        for (name, trace, expected), hdl in zip(cases, got):
            want = python_verdict(config, trace)
            if expected is not None:
                assert want is not None and want[1] == trace[-1][0], (name, want)
            else:
                assert want is None, (name, want)
            seen = None if hdl is None else (CHECKS[hdl["rule"]], hdl["cycle"])
            assert seen == want, f"{preset} {name}: HDL {seen}, Python {want} on {trace}"
            n += 1
    assert n >= 2 * 20


def test_message_names_rule_commands_bank_and_cycle():
    t = TIMING_PRESETS["dramsim3_hbm2"]
    config = small(t)
    trace = [(0, "ACT", (1, 1), 5, 0), (t.tRCD - 1, "RD", (1, 1), 5, 2)]
    (fields,) = hdl_verdicts(config, [trace])
    assert fields["prev"] == 1 and fields["distance"] == t.tRCD - 1
    assert describe(fields, 0, config) == (
        f"tRCD_RD violated: ACT at cycle 0 -> RD(pc0 bg1 b1 row5 col2) at cycle {t.tRCD - 1}: "
        f"distance {t.tRCD - 1} < tRCD = {t.tRCD}"
    )


def test_prerequisites_and_bank_state():
    t = TIMING_PRESETS["dramsim3_hbm2"]
    config = small(t)
    late = t.tRAS + t.tRP + 10
    traces = {
        "RDWR_BANK_CLOSED": [(0, "RD", (0, 0), 5, 0)],
        "RDWR_ROW_MISS": [(0, "ACT", (0, 0), 5, 0), (t.tRCD, "RD", (0, 0), 6, 0)],
        "ACT_BANK_OPEN": [(0, "ACT", (0, 0), 5, 0), (late, "ACT", (0, 0), 6, 0)],
        "REF_BANK_OPEN": [(0, "ACT", (0, 0), 5, 0), (late, "REF", (0, 0), 0, 0)],
    }
    got = hdl_verdicts(config, list(traces.values()))
    for (name, trace), hdl in zip(traces.items(), got):
        assert python_verdict(config, trace) == (name, trace[-1][0])
        assert (CHECKS[hdl["rule"]], hdl["cycle"]) == (name, trace[-1][0])


def test_same_cycle_row_then_column_command():
    """An ACT and a RD to its bank in the same cycle: the RD sees the ACT (tRCD at distance 0)."""
    t = TIMING_PRESETS["ramulator2_hbm2"]
    config = small(t)
    trace = [(3, "ACT", (2, 1), 5, 0), (3, "RD", (2, 1), 5, 0)]
    (hdl,) = hdl_verdicts(config, [trace])
    assert python_verdict(config, trace) == ("tRCD_RD", 3)
    assert (CHECKS[hdl["rule"]], hdl["cycle"], hdl["distance"]) == ("tRCD_RD", 3, 0)


def test_refresh_gap_and_rate():
    """No REF for (postpone + 1) * tREFI cycles fires REFRESH_GAP one cycle later; with postponement 0
    and a short tREFI, the end-of-run check fires REFRESH_RATE when a REF is missing."""
    from dataclasses import replace

    t = replace(TIMING_PRESETS["compressed_refresh"], tREFI=40, tRFC=10)
    config = small(t, max_refresh_postpone=1)
    limit = 2 * t.tREFI
    gap, ok = hdl_verdicts(config, [[(limit + 1, "REF", (0, 0), 0, 0)], [(limit, "REF", (0, 0), 0, 0)]])
    assert python_verdict(config, [(limit + 1, "REF", (0, 0), 0, 0)]) == ("REFRESH_GAP", limit + 1)
    assert (CHECKS[gap["rule"]], gap["cycle"]) == ("REFRESH_GAP", limit + 1)
    assert ok is None
    # one REF by cycle 159 where floor(159 / 40) - 1 = 2 are due: the gap (80) is still legal
    trace = [(2 * t.tREFI - 1, "REF", (0, 0), 0, 0)]
    end = 4 * t.tREFI - 1
    chk = JedecChecker(config)
    chk.command(trace[0][0], 0, "REF")
    with pytest.raises(TimingViolation) as exc:
        chk.finish(end)
    assert exc.value.rule == "REFRESH_RATE"
    (rate,) = hdl_verdicts(config, [trace], finish_at=end)
    assert (CHECKS[rate["rule"]], rate["cycle"]) == ("REFRESH_RATE", end)
    (fine,) = hdl_verdicts(config, [trace], finish_at=3 * t.tREFI - 1)  # floor(119 / 40) - 1 = 1 due
    chk = JedecChecker(config)
    chk.command(trace[0][0], 0, "REF")
    chk.finish(3 * t.tREFI - 1)
    assert fine is None


def test_every_check_is_named_once():
    assert len(CHECKS) == len(set(CHECKS))


@pytest.mark.cocotb
def test_generated_verilog_gives_the_python_verdicts(simulator, tmp_path):
    """The checker's Verilog on Verilator and Icarus: every self-test trace of the DRAMsim3 preset
    (tweaked timings included) gives the Python checker's first violation, rule and cycle."""

    n = 0
    for i, (timing, cases) in enumerate(_group_by_timing("dramsim3_hbm2").items()):
        config = small(timing)
        got = verilog_verdicts(simulator, config, [trace for _, trace, _ in cases], tmp_path / f"verdicts{i}.json")
        for (name, trace, _), hdl in zip(cases, got):
            seen = None if hdl is None else (CHECKS[hdl["rule"]], hdl["cycle"])
            assert seen == python_verdict(config, trace), f"{simulator} {name}: {seen} on {trace}"
            n += 1
    assert n >= 40


@pytest.mark.cocotb
@pytest.mark.parametrize("simulator", ["verilator"], indirect=True)
def test_recorded_gemm_trace_gives_the_python_verdicts(simulator, tmp_path, seed):
    """A real GEMM's DRAM commands (8x8 engine, 64x64x64 bf16, recorded on the pins of the HDL memory
    system, the build the other 8x8 tests use: over 4,000 cycles, so refreshes are in it) through both
    back ends (the Python checker and the HDL checker's Verilog on the simulator that recorded it): no
    violation in either; then mutants of it (a command 1 to 3 cycles early, a PRE or REF left out):
    the same first violation, rule and cycle, or none, in both."""
    import numpy as np

    from hw.engine import EngineConfig
    from sim.gemm import GemmJob, run_gemms
    from verif.golden import to_format
    from verif.jedec_selftest import mutants, recorded_trace

    rng = np.random.default_rng(seed)
    a = to_format(rng.standard_normal((64, 64)).astype(np.float32), "bf16")
    b = to_format(rng.standard_normal((64, 64)).astype(np.float32), "bf16")
    cfg = EngineConfig()
    path = tmp_path / "trace.npz"
    (r,), _ = run_gemms([GemmJob(a, b)], cfg, sim=simulator, progress=False, trace=str(path), memory="hdl")
    assert r.status == 0b10
    t = np.load(path)
    trace = recorded_trace(t["cmds"], t["addrs"], pc=0)
    names = {cmd for _, cmd, *_ in trace}
    assert {"ACT", "RD", "WR", "REF"} <= names, names
    cases = [("recorded", trace), *mutants(trace, rng, 10)]
    got = verilog_verdicts(simulator, cfg.hbm, [tr for _, tr in cases], tmp_path / "verdicts.json")
    fired = 0
    for (name, tr), hdl in zip(cases, got):
        seen = None if hdl is None else (CHECKS[hdl["rule"]], hdl["cycle"])
        want = python_verdict(cfg.hbm, tr)
        assert seen == want, f"{name}: HDL {seen}, Python {want}"
        fired += want is not None
    assert got[0] is None
    print(f"{len(trace)} commands, {trace[-1][0]} cycles; {fired} of 10 mutants violate a rule")
    assert fired >= 3
