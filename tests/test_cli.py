"""The ``mxu`` command: generated files and manifests, and the bad-input contract (one line on
stderr, exit status 2, no output file)."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from sim.cli import main

MXU = [sys.executable, "-m", "sim.cli"]
ROOT = Path(__file__).resolve().parents[1]


def run(args, cwd):
    return subprocess.run(
        MXU + args, cwd=cwd, capture_output=True, text=True, env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"}
    )


def test_help_lists_commands(capsys):
    with pytest.raises(SystemExit) as e:
        main(["--help"])
    assert e.value.code == 0
    out = capsys.readouterr().out
    assert "generate" in out and "demo" in out and "matmul" in out


def test_generate_mxu_files_and_manifest(tmp_path):
    r = run(["generate", "--rows", "3", "--cols", "2", "--fmt", "int8", "--stages", "1", "-o", "out"], tmp_path)
    assert r.returncode == 0, r.stderr
    info = json.loads((tmp_path / "out" / "mxu.json").read_text())
    assert info["parameters"] == {
        "rows": 3,
        "cols": 2,
        "fmt": "int8",
        "subnormals": "ftz",
        "stages": 1,
        "backpressure": True,
        "multiplier": "generic",
    }
    assert info["latency_cycles"] == 3 * 1 + 2 - 1
    ports = {p["name"]: p for p in info["ports"]}
    assert ports["act__payload"]["width_bits"] == 3 * 8 + 2 * 32 + 1
    assert ports["wgt__payload"]["width_bits"] == 2 * 8
    assert ports["out__payload"]["width_bits"] == 2 * 32
    assert ports["out__valid"]["direction"] == "output" and ports["act__valid"]["direction"] == "input"
    assert all(p["meaning"] for p in info["ports"])
    assert info["modules"] == ["mxu_pe", "mxu_row", "mxu"]
    text = (tmp_path / "out" / "mxu.v").read_text()
    assert text.count("\nmodule mxu_pe(") + text.startswith("module mxu_pe(") == 1
    assert text.count("mxu_pe pe_") == 2  # one row module with C = 2 PE instances
    assert text.count("mxu_row row_") == 3  # R = 3 row instances
    assert "verilator" in json.dumps(info["tools"]) and info["project"]["name"] == "open-mxu"


def test_generate_preset_and_toml_override(tmp_path):
    (tmp_path / "c.toml").write_text("preset_ignored = 1\n")
    r = run(["generate", "--config", "c.toml", "-o", "x"], tmp_path)
    assert r.returncode == 2 and "unknown keys preset_ignored" in r.stderr and not (tmp_path / "x").exists()
    (tmp_path / "c.toml").write_text('rows = 2\ncols = 5\nfmt = "fp8_e4m3fn"\n')
    r = run(["generate", "--config", "c.toml", "--cols", "3", "-o", "x"], tmp_path)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["parameters"] == {
        "rows": 2,
        "cols": 3,
        "fmt": "fp8_e4m3fn",
        "subnormals": "ftz",
        "stages": 2,
        "backpressure": True,
        "multiplier": "generic",
    }
    r = run(["generate", "--preset", "tpu-v1-int8-8x8", "-o", "y"], tmp_path)
    assert r.returncode == 0 and json.loads(r.stdout)["parameters"]["fmt"] == "int8"


@pytest.mark.parametrize(
    "args,message",
    [
        (["generate", "--rows", "0", "-o", "o"], "argument --rows: must be a positive integer, not '0'"),
        (["generate", "--cols", "-1", "-o", "o"], "argument --cols: must be a positive integer, not '-1'"),
        (["generate", "--fmt", "fp16", "-o", "o"], "argument --fmt: invalid choice: 'fp16'"),
        (["generate", "--stages", "0", "-o", "o"], "stages must be an integer from 1 to 9; got 0"),
        (["generate", "--stages", "10", "--block", "mac", "-o", "o"], "stages must be an integer from 0 to 9; got 10"),
        (["generate", "--preset", "nope", "-o", "o"], "unknown --preset 'nope'"),
        (["generate", "--config", "missing.toml", "-o", "o"], "--config missing.toml: no such file"),
        (["generate", "--block", "mac", "--rows", "4", "-o", "o"], "rows does not apply to block mac"),
        (["generate", "--preset", "bf16-8x8", "--block", "mac", "-o", "o"], "rows does not apply to block mac"),
        (["generate", "--name", "9x", "-o", "o"], "--name '9x' is not a Verilog identifier"),
        (["generate", "-o", ""], "must name a folder"),
        (["generate", "--bogus", "-o", "o"], "unrecognized arguments: --bogus"),
        (["demo", "--seed", "-3"], "argument --seed: must be an integer from 0 to"),
        (["demo", "--vectors", "0"], "argument --vectors: must be a positive integer"),
        (["demo", "--sim", "modelsim"], "argument --sim: invalid choice: 'modelsim'"),
        (["demo", "--mac", "--vectors", "0"], "argument --vectors: must be a positive integer"),
        (["demo", "--vectors", "10"], "--vectors applies to the MAC demo only (mxu demo --mac --vectors N)"),
        (["demo", "--mac", "--rows", "4"], "--rows does not apply to the MAC demo (--mac)"),
        (["demo", "--mac", "-o", "o"], "--out does not apply to the MAC demo (--mac)"),
        (["demo", "--fmt", "int8"], "the MLP demo runs float formats"),
        (["demo", "--rows", "6"], "argument --rows: must be a power of two for the GEMM engine"),
        (["demo", "--stages", "0"], "argument --stages: must be 1..9 for the GEMM engine; got 0"),
        ([], "the following arguments are required: COMMAND"),
    ],
)
def test_bad_input_one_line_exit_2_no_output(tmp_path, args, message):
    r = run(args, tmp_path)
    assert r.returncode == 2
    assert r.stderr.count("\n") == 1 and r.stderr.startswith("mxu: error: ") and message in r.stderr, r.stderr
    assert "Traceback" not in r.stderr
    assert not (tmp_path / "o").exists()


def test_no_partial_output_when_a_target_is_a_folder(tmp_path):
    (tmp_path / "o" / "mxu.json").mkdir(parents=True)
    r = run(["generate", "--rows", "2", "--cols", "2", "-o", "o"], tmp_path)
    assert r.returncode == 2 and "mxu.json exists there and is a folder" in r.stderr
    assert not (tmp_path / "o" / "mxu.v").exists()


def test_generate_without_backpressure(tmp_path):
    """--no-backpressure: the manifest says so and out__ready is documented as ignored; the option is
    refused for a MAC (exit 2, one line)."""
    r = run(["generate", "--rows", "2", "--cols", "2", "--no-backpressure", "-o", "nb"], tmp_path)
    assert r.returncode == 0, r.stderr
    info = json.loads((tmp_path / "nb" / "mxu.json").read_text())
    assert info["parameters"]["backpressure"] is False
    ready = [p for p in info["ports"] if p["name"] == "out__ready"]
    assert ready and ready[0]["meaning"].startswith("ignored")
    r = run(["generate", "--block", "mac", "--no-backpressure", "-o", "m"], tmp_path)
    assert r.returncode == 2
    assert r.stderr.strip() == (
        "mxu: error: backpressure does not apply to block mac (from --no-backpressure, --preset or --config)"
    )
    assert not (tmp_path / "m").exists()


def test_generate_with_the_ecp5_dsp_primitive(tmp_path):
    """--multiplier ecp5: the PE module instantiates MULT18X18Ds with their output registers on CLK0 and the
    manifest says so; where the product is not registered right after the multiplier (bf16 with 2
    stages), for a MAC, and for a non-ECP5 synthesis target: one line, exit 2, nothing written."""
    r = run(["generate", "--rows", "2", "--cols", "2", "--fmt", "int8", "--multiplier", "ecp5", "-o", "d"], tmp_path)
    assert r.returncode == 0, r.stderr
    text = (tmp_path / "d" / "mxu.v").read_text()
    # one per product in the shared PE module: a * w_next, and a * shadow, a * active for the first PE
    # (which has no look-ahead); synthesis keeps those each PE uses
    assert text.count("MULT18X18D #(") == 3 and text.count('.REG_OUTPUT_CLK("CLK0")') == 3
    assert json.loads((tmp_path / "d" / "mxu.json").read_text())["parameters"]["multiplier"] == "ecp5"
    bad = {
        "generate --multiplier ecp5 -o x": "mxu: error: multiplier='ecp5' makes the DSP block's output register the "
        "product register: it needs int8 with stages >= 1 or bf16 with stages >= 8; got fmt='bf16', stages=2",
        "generate --block mac --multiplier ecp5 -o x": "mxu: error: multiplier does not apply to block mac (from "
        "--multiplier, --preset or --config)",
        "synth --target ice40-up5k --block pe --fmt int8 --multiplier ecp5 -o x": "mxu: error: --multiplier ecp5 "
        "instantiates the ECP5 DSP primitive: it needs an ECP5 target (ecp5-25k, ecp5-85k); got ice40-up5k",
        "synth --target ecp5-85k --block pe --fmt int8 --multiplier ecp5 --no-dsp -o x": "mxu: error: --multiplier "
        "ecp5 instantiates DSP blocks; --no-dsp builds the multipliers from LUTs: give one of them",
        "synth --target ecp5-85k --block engine --multiplier ecp5 -o x": "mxu: error: --multiplier applies to blocks "
        "mxu and pe only, not engine",
    }
    for args, line in bad.items():
        r = run(args.split(), tmp_path)
        assert (r.returncode, r.stderr.strip()) == (2, line), args
        assert not (tmp_path / "x").exists()


def test_demo_summary_with_a_golden_stand_in_for_the_rtl(tmp_path, monkeypatch, capsys):
    """`mxu demo` end to end but for the simulator (run_gemms replaced by the golden model): the
    summary prints, summary.json holds the flat engine fields and the whole configuration. The
    failing input: `mxu demo` with the defaults crashed with KeyError 'fmt' after both simulations
    when the summary's config became the nested EngineConfig."""
    import numpy as np

    import sim.gemm
    from verif.golden import matmul, relu, to_format

    def run(jobs, params, **kwargs):
        out = []
        for job in jobs:
            a = job.a if job.a_from is None else to_format(relu(out[job.a_from].result), params.mxu.fmt)
            ref = matmul(a, job.b, job.c, fmt=params.mxu.fmt, subnormals=params.mxu.subnormals)
            out.append(sim.gemm.GemmResult(ref, ref.view(np.uint32).copy(), 1000, 2))
        return out, {"sim_cycles": 2000, "wall_s": 1.0, "build_s": 0.0, "sim_wall_s": 1.0, "cycles_per_s": 2000.0}

    monkeypatch.setattr(sim.gemm, "run_gemms", run)
    monkeypatch.setenv("MXU_PROGRESS", "0")
    assert main(["demo", "-o", str(tmp_path / "demo")]) == 0
    out = capsys.readouterr().out
    assert (
        "  engine        8x8 MXU, bf16 x bf16 -> fp32 accumulate, subnormals=ftz, stages=2, 2 HBM pseudo-channels"
    ) in out
    assert "  result        PASS: bit-exact" in out
    summary = json.loads((tmp_path / "demo" / "summary.json").read_text())
    c = summary["config"]
    assert (c["rows"], c["cols"], c["fmt"], c["subnormals"], c["stages"], c["pseudo_channels"]) == (
        8,
        8,
        "bf16",
        "ftz",
        2,
        2,
    )
    assert c["engine"]["mxu"]["rows"] == 8 and c["engine"]["hbm"]["pseudo_channels"] == 2
    assert (tmp_path / "demo" / "digits.png").stat().st_size > 0
