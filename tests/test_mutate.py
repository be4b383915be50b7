"""``mxu mutate`` (``sim.mutate``, ``sim.formal``): the mutation list, the one-build selector, the
verdicts (killed, timeout, equivalent, survived), resuming, and a smoke run of the MAC's campaign.

The full campaigns (200+ mutants per block) are a benchmark: ``bench/mutation.py``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from sim import formal, mutate, mutate_targets
from sim.mutate_targets import BLOCKS, target

ROOT = Path(__file__).resolve().parents[1]


def test_parse_mutations_keeps_the_command_and_the_python_line():
    text = (
        "mutate -mode cnot0 -module mac -cell $326 -port Y -portbit 17 -ctrlbit 11 -wire align_x -wirebit 20 "
        f"-src {ROOT}/hw/arith/bits.py:18 -src {ROOT}/hw/arith/fp32_add.py:90\n"
        "mutate -mode const1 -module mac -cell $procmux$49 -port Y -portbit 9\n"
    )
    a, b = mutate.parse_mutations(text, ROOT)
    assert (a.index, a.mode, a.cell, a.port, a.portbit, a.wire) == (1, "cnot0", "$326", "Y", 17, "align_x")
    assert a.sources == ("hw/arith/bits.py:18", "hw/arith/fp32_add.py:90")
    assert a.source == "hw/arith/fp32_add.py:90"  # the cell's line: Yosys gives the wire's first
    assert a.command.startswith("-mode cnot0 -module mac -cell $326 ")
    assert (b.index, b.mode, b.wire, b.sources, b.source) == (2, "const1", None, (), None)


def test_selector_becomes_a_register_set_from_the_command_line():
    text = (
        "module mac(a, y, mutsel);\n  input [1:0] a;\n  wire [1:0] a;\n  output y;\n  wire y;\n"
        "  input [2:0] mutsel;\n  wire [2:0] mutsel;\n  assign y = mutsel == 3'h1 ? a[0] : a[1];\nendmodule\n"
    )
    out = mutate._selector_from_plusarg(text, "mac", 3)
    assert out == (
        "module mac(a, y);\n  input [1:0] a;\n  wire [1:0] a;\n  output y;\n  wire y;\n"
        "  reg [2:0] mutsel;\n  initial begin\n"
        '    if (!$value$plusargs("mutsel=%d", mutsel)) mutsel = 0;\n  end\n'
        "  assign y = mutsel == 3'h1 ? a[0] : a[1];\nendmodule\n"
    )
    with pytest.raises(RuntimeError, match="no mutsel input port"):
        mutate._selector_from_plusarg(text.replace("mutsel", "other"), "mac", 3)


def test_selector_keeps_escaped_port_names_apart_from_their_commas():
    """A module inside a hierarchy (an engine component) has a name with dots and ports like
    ``\\port$1$0``: an escaped identifier ends at white space, so the comma after it needs its space
    (without it, ``\\port$1$0,`` swallowed the next port and Verilator saw every port twice)."""
    text = (
        "module \\top.engine.feeder (\\port$1$0 , a, mutsel);\n  output \\port$1$0 ;\n  wire \\port$1$0 ;\n"
        "  input a;\n  wire a;\n  input mutsel;\n  wire mutsel;\n  assign \\port$1$0  = mutsel ? a : ~a;\nendmodule\n"
    )
    out = mutate._selector_from_plusarg(text, "top.engine.feeder", 1)
    assert out.startswith("module \\top.engine.feeder (\\port$1$0 , a);\n")
    assert "  reg mutsel;\n  initial begin\n" in out and "input mutsel" not in out and "wire mutsel" not in out


def test_engine_components_are_blocks_and_leave_their_module_out_of_the_context():
    assert [b for b in BLOCKS if b.startswith("engine")] == ["engine"] + [
        f"engine-{c.replace('_', '-')}" for c in mutate_targets.ENGINE_COMPONENTS
    ]
    text = "module a(x);\nendmodule\nmodule \\top.engine.feeder (y);\n  wire y;\nendmodule\nmodule b(z);\nendmodule\n"
    assert (
        mutate_targets._without_module(text, "top.engine.feeder")
        == "module a(x);\nendmodule\n\nmodule b(z);\nendmodule\n"
    )
    with pytest.raises(ValueError, match="defines module top.engine.csr 0 times, not once"):
        mutate_targets._without_module(text, "top.engine.csr")


def test_gemm_check_names_the_first_difference(tmp_path):
    """The engine blocks' check: a mutant's GEMM results against the original design's, field by field."""
    import hashlib

    bits = np.arange(6, dtype=np.uint32).reshape(2, 3)
    want = [{"status": 2, "cycles": 100, "perf": {"perf_feed": 7}, "bits": hashlib.sha256(bits.tobytes()).hexdigest()}]
    (tmp_path / "expect.json").write_text(json.dumps(want))
    env = {"MXU_MUTATE_EXPECT": str(tmp_path / "expect.json")}

    def out(d, cycles=100, feed=7, **more):
        np.savez(
            tmp_path / "out.npz", d0=d, status0=np.array(2), cycles0=np.array(cycles), perf_feed0=np.array(feed), **more
        )
        return mutate_targets.check_gemms(env, tmp_path)

    assert out(bits) is None
    assert out(bits ^ 1) == "GEMM 0: bits differ"
    assert out(bits, cycles=101) == "GEMM 0: cycles 101 instead of 100"
    assert out(bits, feed=8) == "GEMM 0: perf {'perf_feed': 8} instead of {'perf_feed': 7}"
    # a register job's read-back of the register map
    want[0]["readback"] = [1, 2, 3]
    (tmp_path / "expect.json").write_text(json.dumps(want))
    assert out(bits, readback0=np.array([1, 2, 3], dtype=np.uint32)) is None
    assert out(bits, readback0=np.array([1, 2, 4], dtype=np.uint32)) == "GEMM 0: readback differ"
    # a register job reads no D: the original's bits are None and the bench writes no d<j>
    want = [{"status": 0x12, "cycles": 2, "perf": {"perf_feed": 0}, "bits": None, "readback": None}]
    (tmp_path / "expect.json").write_text(json.dumps(want))
    np.savez(tmp_path / "out.npz", status0=np.array(0x12), cycles0=np.array(2), perf_feed0=np.array(0))
    assert mutate_targets.check_gemms(env, tmp_path) is None


def test_engine_rounding_job_holds_every_corner_in_its_initial_c():
    """The rounding job's C starts with the corner patterns, A is zero, the result is bf16, and the
    golden model's bf16 of a tie to even, a tie to odd and the largest float that overflows are RNE's."""
    from verif.golden import expected_bits

    job = mutate_targets.engine_rounding_job("bf16", 3)
    c = job.c.view(np.uint32).ravel()
    assert job.c.shape == (8, 64) and job.out == "bf16" and not np.any(job.a.astype(np.float32))
    assert list(c[: len(mutate_targets.ROUNDING_C0)]) == list(mutate_targets.ROUNDING_C0)
    want = expected_bits(job.a, job.b, job.c, fmt="bf16", subnormals="ftz", out="bf16").ravel()
    assert [int(want[i]) for i in range(4)] == [0x3F80, 0x3F82, 0xBF80, 0xBF82]
    assert int(want[mutate_targets.ROUNDING_C0.index(0x7F7FFFFF)]) == 0x7F80


def test_engine_register_jobs_change_the_descriptor_in_one_place_each():
    """The engine regression's register jobs: replaying each job's writes on the registers the jobs
    before left gives the base descriptor changed only as the job's name says, so each check decides
    alone; every ERROR code but FORMAT (no bf16 result on int8 here) is met, both ways."""
    from collections import Counter

    from hw.engine import REG

    cfg = mutate_targets.engine_stress_config()
    jobs = mutate_targets.engine_register_jobs(cfg)
    assert Counter(code for *_, code in jobs) == {0: 12, 1: 4, 2: 7, 4: 40, 5: 4, 6: 7}
    name_of = {r.offset: n for n, r in REG.items()}
    regs, states = {}, {}
    for name, writes, readback, _ in jobs:
        for w in writes:
            off, value, size = (*w, 4) if len(w) == 2 else w
            word = off & ~3
            shift = 8 * (off - word)
            mask = ((1 << 8 * size) - 1) << shift
            regs[name_of[word]] = (regs.get(name_of[word], 0) & ~mask) | (value << shift & mask)
        states[name] = dict(regs)
        assert readback == (name in ("M_byte_1", "K_byte_2", "N_bytes_2_3"))
    base = states["base"]
    assert (base["M"], base["K"], base["N"], base["FLAGS"]) == (3, 16, 16, 1)
    assert {k: v for k, v in states["zero_K"].items() if base[k] != v} == {"K": 0}
    assert {k: v for k, v in states["B_STRIDE_bit_3"].items() if base[k] != v} == {"B_STRIDE": base["B_STRIDE"] + 8}
    cap = cfg.hbm.capacity_bytes
    d_end = states["D_at_end"]
    assert d_end["D_BASE"] + 2 * d_end["D_STRIDE"] + 4 * 16 == cap
    assert states["D_past_end"]["D_BASE"] == d_end["D_BASE"] + 32
    assert states["M_byte_1"] == base
    assert states["K_byte_2"] == dict(base, K=0x10010)
    assert states["N_bytes_2_3"] == dict(base, N=0x01000010)


def test_selector_width():
    assert [mutate.selector_width(n) for n in (1, 2, 3, 200, 255, 256)] == [1, 2, 2, 8, 8, 9]


@pytest.fixture(scope="module")
def absorb(tmp_path_factory) -> Path:
    """A small flattened design, y = a | (a & b) registered (= a: the AND is redundant), as RTLIL."""
    from amaranth.hdl import Module, Signal
    from amaranth.lib import wiring
    from amaranth.lib.wiring import In, Out

    class Absorb(wiring.Component):
        def __init__(self):
            super().__init__({"a": In(4), "b": In(4), "y": Out(4)})

        def elaborate(self, platform):
            m = Module()
            t = Signal(4)
            m.d.comb += t.eq(self.a & self.b)
            m.d.sync += self.y.eq(self.a | t)
            return m

    work = tmp_path_factory.mktemp("absorb")
    tgt = mutate.Target("absorb", "absorb", lambda: ("rtlil", _rtlil_text(Absorb())), ())
    return mutate.prepare(tgt, work)


def _rtlil_text(component, name: str = "absorb") -> str:
    from amaranth.back import rtlil

    os.environ.setdefault("AMARANTH_USE_YOSYS", "builtin")
    return rtlil.convert(component, name=name, emit_src=True)


def _cell(prepped: Path, kind: str) -> str:
    """The name of the one cell of type ``kind`` in the design (a register's reset mux aside)."""
    text = prepped.read_text()
    names = [
        line.split()[2]
        for line in text.splitlines()
        if line.strip().startswith(f"cell {kind} ") and "procmux" not in line
    ]  # not a reset's mux
    assert len(names) == 1, names
    return names[0]


def test_equivalence_proves_a_masked_mutant_and_refutes_a_real_one(absorb, tmp_path):
    masked = f"-mode const0 -module absorb -cell {_cell(absorb, '$and')} -port Y -portbit 2"
    eq, how = formal.equivalent(absorb, "absorb", masked, 4, tmp_path / "masked")
    assert eq is True and "proven equivalent" in how
    real = f"-mode const0 -module absorb -cell {_cell(absorb, '$or')} -port Y -portbit 2"
    eq, how = formal.equivalent(absorb, "absorb", real, 4, tmp_path / "real")
    assert eq is False and "tells it apart within 4 cycles" in how
    # no bounded check asked for: an unproven mutant stays undecided
    eq, how = formal.equivalent(absorb, "absorb", real, 0, tmp_path / "real0")
    assert eq is None


def test_equivalence_verdicts_are_kept_per_netlist_mutation_and_depth(absorb, tmp_path, monkeypatch):
    """A verdict is checked once and then read back for the same netlist, mutation and depth, also
    for the netlist of another clone of the sources; another mutation or depth is checked again."""
    monkeypatch.setenv("MXU_BUILD_DIR", str(tmp_path / "build"))
    calls = []
    real_check = formal.equivalent

    def counted(*args):
        calls.append(args[2:4])
        return real_check(*args)

    monkeypatch.setattr(formal, "equivalent", counted)
    masked = f"-mode const0 -module absorb -cell {_cell(absorb, '$and')} -port Y -portbit 2"
    real = f"-mode const0 -module absorb -cell {_cell(absorb, '$or')} -port Y -portbit 2"
    first = mutate.equivalence_verdict(absorb, "absorb", masked, 4, tmp_path / "a")
    assert first[0] is True and "kept" not in first[1]
    # the same sources in another clone: the netlist's src attributes name that clone's files
    clone = tmp_path / "clone"
    text = absorb.read_text()
    here = f"{mutate.repo_root()}/tests/"
    assert here in text
    copy = clone / "design.il"
    copy.parent.mkdir()
    copy.write_text(text.replace(here, f"{clone}/tests/"))
    monkeypatch.setattr(mutate, "repo_root", lambda: clone)
    again = mutate.equivalence_verdict(copy, "absorb", masked, 4, tmp_path / "b")
    assert again == (True, first[1] + " [verdict kept from an earlier check of this netlist]")
    assert mutate.equivalence_verdict(absorb, "absorb", real, 4, tmp_path / "c")[0] is False
    assert mutate.equivalence_verdict(absorb, "absorb", real, 0, tmp_path / "d")[0] is None
    assert mutate.equivalence_verdict(absorb, "absorb", real, 0, tmp_path / "e")[0] is None
    assert calls == [(masked, 4), (real, 4), (real, 0)]
    assert len(list((tmp_path / "build" / "cache" / "equivalence").rglob("*.json"))) == 3
    # a tool's failure is checked again; a bounded check out of time is kept
    for why in (
        "the bounded check to 4 cycles ended ERROR",
        "the miter did not build (see m.log)",
        "the bounded check to 4 cycles ended TIMEOUT",
    ):
        how = f"not proven equivalent; {why}"  # sim.formal.equivalent's words
        undecided = f"-mode const1 -module absorb -cell {_cell(absorb, '$or')} -port Y -portbit 1 # {why}"
        monkeypatch.setattr(formal, "equivalent", lambda *a, how=how: (calls.append(a[2:4]), (None, how))[1])
        calls.clear()
        for _ in range(2):
            mutate.equivalence_verdict(absorb, "absorb", undecided, 4, tmp_path / "f")
        assert len(calls) == (1 if how.endswith("TIMEOUT") else 2), how


@pytest.fixture(scope="module")
def mem_stream(tmp_path_factory) -> Path:
    """A stream whose payload is a memory's read register (Amaranth gives it no initial value) while
    valid, and other logic (an XOR) while not valid; valid is high from the first cycle."""
    from amaranth.hdl import Module, Mux, Signal
    from amaranth.lib import stream, wiring
    from amaranth.lib.memory import Memory
    from amaranth.lib.wiring import In, Out

    class MemStream(wiring.Component):
        def __init__(self):
            super().__init__({"addr": In(2), "hide": In(1), "o": Out(stream.Signature(8))})

        def elaborate(self, platform):
            m = Module()
            m.submodules.mem = mem = Memory(shape=8, depth=4, init=[1, 2, 3, 4])
            rd = mem.read_port()
            valid = Signal(init=1)
            m.d.sync += valid.eq(~self.hide)
            m.d.comb += [
                rd.addr.eq(self.addr),
                self.o.valid.eq(valid),
                self.o.payload.eq(Mux(valid, rd.data, self.addr + self.hide)),
            ]
            return m

    work = tmp_path_factory.mktemp("mem_stream")
    tgt = mutate.Target("mem_stream", "mem_stream", lambda: ("rtlil", _rtlil_text(MemStream(), "mem_stream")), ())
    return mutate.prepare(tgt, work)


def test_equivalence_starts_both_copies_alike_and_ignores_payload_without_valid(mem_stream, tmp_path):
    """Regression: the bounded check gave the two copies' memory read registers independent initial
    values and compared payloads while valid was low, so it 'refuted' mutants that change nothing
    a testbench can see (e.g. a constant bit forced to its own value in the 8x8 MXU)."""
    hidden = f"-mode const1 -module mem_stream -cell {_cell(mem_stream, '$add')} -port Y -portbit 0"
    eq, how = formal.equivalent(mem_stream, "mem_stream", hidden, 6, tmp_path / "hidden")
    assert eq is True, how
    shown = f"-mode const1 -module mem_stream -cell {_cell(mem_stream, '$mux')} -port Y -portbit 0"
    eq, how = formal.equivalent(mem_stream, "mem_stream", shown, 6, tmp_path / "shown")
    assert eq is False and "tells it apart" in how, how


def test_each_mutation_list_gets_its_own_build_and_each_design_its_own_work(absorb):
    """A second campaign in the same folder with more mutations must not reuse the first one's
    build (its mutants would run as the original design and survive), nor a changed configuration
    the first one's netlist."""
    tgt = mutate.Target("absorb", "absorb", None, ())
    two = mutate.build_mutants(tgt, absorb, mutate.list_mutations(absorb, 2, 1), "mutants-2-1.v")
    three = mutate.build_mutants(tgt, absorb, mutate.list_mutations(absorb, 3, 1), "mutants-3-1.v")
    assert two != three
    assert "mutsel == 2'h2" in two.read_text() and "mutsel == 2'h3" not in two.read_text()
    assert "mutsel == 2'h3" in three.read_text()
    assert mutate.design_key(target("mac", {}, 1)) != mutate.design_key(target("mac", {"fmt": "int8"}, 1))
    assert mutate.design_key(target("mac", {}, 1)) == mutate.design_key(target("mac", {}, 2))  # test seed


def test_a_campaign_key_equals_its_own_record():
    """The resume rule compares a campaign's key with the one in its ``mutate.json``: a configuration
    holding tuples (the engine's GEMMs, one with its back-pressure rates) must compare equal after
    the JSON round trip, or every interrupted engine campaign starts again from its first mutant."""
    tgt = mutate.Target(
        "absorb",
        "absorb",
        lambda: ("rtlil", ""),
        (),
        config={"shapes": [(9, 8, 40, False, False, (0, 192, 0))], "mapping": ("row", "bank")},
    )
    key = mutate.campaign_key(tgt, count=4, seed=1, simulator="verilator", test_seed=1, depth=20)
    assert json.loads(json.dumps(key)) == key
    assert key["config"]["shapes"] == [[9, 8, 40, False, False, [0, 192, 0]]]
    assert key != mutate.campaign_key(tgt, count=4, seed=2, simulator="verilator", test_seed=1, depth=20)


def test_unknown_block_and_options_are_refused():
    with pytest.raises(ValueError, match="block must be one of mac"):
        target("alu", {}, 1)
    with pytest.raises(ValueError, match="rows does not apply to block mac"):
        target("mac", {"rows": 4}, 1)
    with pytest.raises(ValueError):
        target("mac", {"stages": 12}, 1)
    assert {"mac", "mxu", "hbm-channel"} <= set(BLOCKS)


def _mxu(*args, env=None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "sim.cli", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={**os.environ, "MXU_PROGRESS": "0", **(env or {})},
        check=False,
    )


@pytest.mark.parametrize(
    "args, message",
    [
        (["--block", "alu"], "argument --block: invalid choice: 'alu'"),
        (["--block", "mac", "--count", "0"], "argument --count: must be a positive integer, not '0'"),
        (["--block", "mac", "--rows", "4"], "rows does not apply to block mac"),
        (["--block", "mac", "--timeout", "0"], "argument --timeout: must be a number of seconds above 0"),
    ],
)
def test_cli_bad_input_is_one_line_and_exit_2(args, message, tmp_path):
    out = tmp_path / "out"
    r = _mxu("mutate", *args, "-o", str(out))
    assert r.returncode == 2, r.stderr
    assert message in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert not out.exists()


def test_cli_output_folder_that_is_a_file(tmp_path):
    out = tmp_path / "out"
    out.write_text("x")
    r = _mxu("mutate", "--block", "mac", "-o", str(out))
    assert r.returncode == 2 and r.stderr.strip() == f"mxu: error: --out {out} exists and is not a folder"
    assert out.read_text() == "x"


@pytest.mark.cocotb
def test_smoke_mac_campaign_kills_times_out_and_resumes(tmp_path):
    """Four mutants of the bf16 MAC through ``mxu mutate`` (the tool keeps working): every one
    killed by the corner-case test; started again it re-runs nothing; a mutant whose verdict is lost
    (an interrupt) is the only one judged again; and a limit shorter than a run is a timeout."""
    out = tmp_path / "mac"
    r = _mxu("mutate", "--block", "mac", "--count", "4", "--seed", "1", "--depth", "0", "-o", str(out), "--json")
    assert r.returncode == 0, r.stderr
    record = json.loads(r.stdout)
    print(f"mutants: {[(m['index'], m['status'], m['source']) for m in record['mutants']]}, wall {record['wall_s']} s")
    assert record["summary"] == {
        "killed": 4,
        "timeout": 0,
        "survived": 0,
        "equivalent": 0,
        "error": 0,
        "mutants": 4,
        "score_pct": 100.0,
    }
    assert [m["test"] for m in record["mutants"]] == ["corner_cases"] * 4
    assert all(m["detail"].startswith("corner_cases: corner: ") for m in record["mutants"])
    assert json.loads((out / "mutate.json").read_text())["mutants"] == record["mutants"]

    # resumed: nothing to do, the same verdicts
    r2 = _mxu("mutate", "--block", "mac", "--count", "4", "--seed", "1", "--depth", "0", "-o", str(out), "--json")
    again = json.loads(r2.stdout)
    assert again["mutants"] == record["mutants"] and again["baseline_s"] == record["baseline_s"]

    # an interrupted campaign: mutant 3 has no verdict yet and is the only one run
    saved = json.loads((out / "mutate.json").read_text())
    for key in ("status", "test", "seconds", "detail"):
        saved["mutants"][2].pop(key)
    (out / "mutate.json").write_text(json.dumps(saved))
    r3 = _mxu("mutate", "--block", "mac", "--count", "4", "--seed", "1", "--depth", "0", "-o", str(out), "--json")
    resumed = json.loads(r3.stdout)
    assert [m["status"] for m in resumed["mutants"]] == ["killed"] * 4
    assert [m["seconds"] for i, m in enumerate(resumed["mutants"]) if i != 2] == [
        m["seconds"] for i, m in enumerate(record["mutants"]) if i != 2
    ]

    # the time limit: a regression cut short counts as killed by timeout
    tgt = target("mac", {}, 1)
    build = out / "work" / mutate.design_key(tgt) / "mutants-4-1.v"
    res = mutate.run_mutant(tgt, build, 1, simulator="verilator", seed=1, timeout_s=0.2)
    assert (res.status, res.test) == ("timeout", "corner_cases")


def test_a_mutant_of_one_pe_is_proven_on_the_pe_alone(tmp_path):
    """The MXU's survivors sit mostly in one of its R x C PEs, where the whole array is too big for
    the equivalence proof: the mutation is carried over to the PE alone (same cell, same Amaranth
    line), where it is proven. Here a constant bit of the exponent sum (254 = 0b11111110) forced to
    its own value: equivalent, and proven so in one PE."""
    tgt = target("mxu", {"rows": 2, "cols": 2}, 1)
    prepped = mutate.prepare(tgt, tmp_path / "mxu")
    pattern, _, pe_design = tgt.parts[0]
    part = mutate.prepare(mutate.Target("mxu", "pe", pe_design, ()), tmp_path / "pe")
    lines = part.read_text().splitlines()
    sub = next(
        line.split()[2]
        for i, line in enumerate(lines)
        if line.strip().startswith("cell $sub ") and any("8'11111110" in x for x in lines[i : i + 9])
    )
    whole = f"-mode const0 -module mxu -cell $flatten\\row_1.\\pe_0.{sub} -port B -portbit 0"
    local = mutate.part_command(prepped, "mxu", pattern, part, "pe", whole)
    assert local == f"-mode const0 -module pe -cell {sub} -port B -portbit 0"
    eq, how = formal.equivalent(part, "pe", local, 4, tmp_path / "eq")
    assert eq is True, how
    # a cell outside the PEs, or one Yosys numbered itself, is not carried over
    assert (
        mutate.part_command(
            prepped, "mxu", pattern, part, "pe", "-mode const0 -module mxu -cell $12 -port A -portbit 0"
        )
        is None
    )


def test_an_interrupted_check_takes_its_solver_down(tmp_path, monkeypatch):
    """SymbiYosys runs in its own session (so a time limit can kill its whole process group), which
    Ctrl-C does not reach: an interrupt of the check must take the group down itself. Once, a
    stopped campaign left a yices-smt2 running at full speed for an hour. Here a stand-in for sby
    starts a grandchild and waits; an interrupt arrives while the check waits; the grandchild must
    be gone."""
    import signal
    import time

    pidfile = tmp_path / "grandchild.pid"
    fake = tmp_path / "fake-sby"
    fake.write_text(f"#!/bin/sh\nsleep 60 &\necho $! > {pidfile}\nwait\n")
    fake.chmod(0o755)
    monkeypatch.setattr(formal.toolchain, "tool_executable", lambda name: str(fake))

    def interrupt(signum, frame):
        raise KeyboardInterrupt

    old = signal.signal(signal.SIGALRM, interrupt)
    signal.setitimer(signal.ITIMER_REAL, 1.0)
    try:
        with pytest.raises(KeyboardInterrupt):
            formal.run_sby(tmp_path / "w", "bmc", "[options]\nmode bmc\n", {}, timeout_s=30)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)
    pid = int(pidfile.read_text())
    for _ in range(50):  # SIGKILL is asynchronous
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            break
        time.sleep(0.05)
    else:
        os.kill(pid, signal.SIGKILL)
        raise AssertionError("the solver's process group outlived the interrupt")


def test_a_clock_mutation_is_not_judged_equivalent():
    """The equivalence check steps every register on one clock: an inverted clock port looked
    unchanged to it (a sequencer table register, ``inv CLK[0]``, came out "equivalent"). Such a
    mutation is never sent to the check; one on a data port is."""
    (clk,) = mutate.parse_mutations("mutate -mode inv -module seq -cell $dff1 -port CLK -portbit 0 -src a.py:1\n")
    (data,) = mutate.parse_mutations("mutate -mode inv -module seq -cell $dff1 -port D -portbit 0 -src a.py:1\n")
    assert "clock" in mutate.equivalence_blind_spot(clk)
    assert mutate.equivalence_blind_spot(data) is None
