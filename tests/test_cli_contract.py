"""Every ``mxu`` command validates all of its inputs before any expensive work.

Table-driven: each command with each bad input exits 2 with one line ``mxu: error: ...`` on stderr,
writes nothing, returns in under a few seconds, and never reaches the expensive steps (Verilog
generation, a simulator build or run, training, synthesis, place and route): those are replaced by
functions that fail the test. The first rows are the inputs of the hardening report (K above MAX_K,
an unwritable ``mxu demo -o``, a 0-d array, a 1000 x 1000 array).
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from sim.cli import UsageError, main
from sim.cli.files import progress_enabled as _progress_enabled

ROOT = Path(__file__).resolve().parents[1]
UNWRITABLE = "/proc/mxu-no-such-folder"
POD = ["pod", "matmul", "a.npy", "b.npy", "-o", "c.npy"]  # no file can be created under /proc, not even by root


@pytest.fixture
def work(tmp_path, monkeypatch):
    """Input files in the test's working folder, and every expensive step replaced by a failure."""
    import sim.board
    import sim.demo_mlp
    import sim.gemm
    import sim.pod
    import sim.pod_demo
    import sim.runner
    import sim.sweep
    import sim.synth
    import verif.pod_sim

    def expensive(name):
        def fail(*a, **k):
            raise AssertionError(f"{name} started for bad input")

        return fail

    for module, name in (
        (sim.runner, "generate_verilog"),
        (sim.runner, "run_cocotb"),
        (sim.gemm, "run_gemms"),
        (sim.synth, "run_flow"),
        (sim.demo_mlp, "run"),
        (sim.demo_mlp, "train"),
        (sim.board, "build_bitstream"),
        (sim.sweep, "run_sweep"),
        (verif.pod_sim, "run_pod_amaranth"),
        (sim.pod, "run_pod"),
        (sim.pod_demo, "run"),
    ):
        monkeypatch.setattr(module, name, expensive(f"{module.__name__}.{name}"))
    monkeypatch.chdir(tmp_path)
    np.save("a.npy", np.ones((4, 8), np.float32))
    np.save("b.npy", np.ones((8, 3), np.float32))
    np.save("kA.npy", np.ones((1, 16385), np.float32))  # the report's input: K = MAX_K + 1
    np.save("kB.npy", np.ones((16385, 1), np.float32))
    np.save("k8A.npy", np.ones((1, 32769), np.int8))  # int8: MAX_K = 32768
    np.save("k8B.npy", np.ones((32769, 1), np.int8))
    np.save("scalar.npy", np.float32(3.0))  # 0-d
    for name, text in SPECS.items():
        Path(name).write_text(text)
    np.save("a16.npy", np.ones((4, 8), np.float16))
    np.save("oned.npy", np.ones(8, np.float32))
    for name in ("big_a.npy", "big_b.npy"):  # 64 MiB each, sparse: only the header is read
        np.lib.format.open_memmap(name, mode="w+", dtype=np.float32, shape=(4096, 4096)).flush()
    Path("file.txt").write_text("not a folder\n")
    Path("bad.toml").write_text('rows = "eight"\n')
    os.symlink("/nonexistent/folder", "dang")  # a broken symbolic link
    os.symlink("loop", "loop")  # a looping one
    os.mkfifo("fifo.npy")  # opening it would block
    return tmp_path


# (arguments, environment, the message's text). Every row must fail with exit 2 before any work.
BAD = [
    # mxu matmul: the hardware's limits on the host
    (
        ["matmul", "kA.npy", "kB.npy", "-o", "k.npy"],
        {},
        "K = 16385 is larger than the engine's MAX_K = 16384 (one row of A must fit an A bank of "
        "a_buffer_bytes = 32768 bytes, 2 byte(s) per bf16 element)",
    ),
    (
        ["matmul", "k8A.npy", "k8B.npy", "--fmt", "int8", "-o", "k.npy"],
        {},
        "K = 32769 is larger than the engine's MAX_K = 32768",
    ),
    (["matmul", "scalar.npy", "b.npy", "-o", "k.npy"], {}, "A scalar.npy must be a 2-D matrix; got shape ()"),
    (["matmul", "a.npy", "scalar.npy", "-o", "k.npy"], {}, "B scalar.npy must be a 2-D matrix; got shape ()"),
    (
        ["matmul", "a.npy", "b.npy", "--rows", "32", "--cols", "32", "-o", "k.npy"],
        {},
        "a 32x32 GEMM engine (1,024 PEs) is above the simulation limit of 256 PEs (16x16)",
    ),
    (["matmul", "a.npy", "b.npy", "-o", f"{UNWRITABLE}/C.npy"], {}, "is not writable"),
    (["matmul", "a.npy", "b.npy", "-o", "file.txt/C.npy"], {}, "file.txt is not a folder"),
    (["matmul", "a.npy", "b.npy", "--waves", f"{UNWRITABLE}/w.fst", "-o", "k.npy"], {}, "--waves"),
    (
        ["matmul", "a.npy", "b.npy", "-o", "k.npy"],
        {"MXU_PROGRESS": "maybe"},
        "MXU_PROGRESS must be one of 1, true, yes, on, 0, false, no, off; got 'maybe'",
    ),
    # mxu demo: the report folder before training, the build and the simulation
    (["demo", "-o", UNWRITABLE], {}, f"--out {UNWRITABLE}: folder /proc is not writable"),
    (["demo", "-o", "file.txt"], {}, "--out file.txt exists and is not a folder"),
    (["demo", "-o", "file.txt/report"], {}, "file.txt is not a folder"),
    (["demo", "--rows", "32", "--cols", "16"], {}, "a 32x16 GEMM engine (512 PEs) is above the simulation limit"),
    # mxu generate / synth: size estimate and output folder before generation
    (
        ["generate", "--rows", "1000", "--cols", "1000", "-o", "g"],
        {},
        "a 1000x1000 MXU needs an estimated 32.8 GiB of memory",
    ),
    (["generate", "--rows", "4", "-o", UNWRITABLE], {}, "folder /proc is not writable"),
    (["generate", "--rows", "4", "-o", "file.txt/g"], {}, "file.txt is not a folder"),
    (["generate", "--config", "bad.toml", "-o", "g"], {}, "rows must be an integer from 1 to 1024; got 'eight'"),
    # wide arrays: Amaranth's 65,535-bit signal limit (a traceback from 1,366 columns), and the
    # estimate of a long row is that of the square of its side
    (["generate", "--rows", "1", "--cols", "1366", "-o", "g"], {}, "cols must be an integer from 1 to 1024; got 1366"),
    (["generate", "--rows", "1", "--cols", "1024", "-o", "g"], {}, "a 1x1024 MXU needs an estimated"),
    (
        ["synth", "--target", "ecp5-85k", "--rows", "1000", "--cols", "1000", "-o", "s"],
        {},
        "pass --no-size-limit to generate it anyway",
    ),
    (["synth", "--target", "ecp5-85k", "--rows", "2", "--cols", "2", "-o", UNWRITABLE], {}, "is not writable"),
    # found by a new-user check: paths that pass a writability probe but cannot be created, inputs
    # that block or never end, an unchecked option, names the tools reject, a device as output
    (["generate", "--rows", "2", "-o", "dang"], {}, "--out dang: dang is a broken or looping symbolic link"),
    (["generate", "--rows", "2", "-o", "loop/x"], {}, "loop is a broken or looping symbolic link"),
    (["generate", "--rows", "2", "-o", "d/" + "x" * 300], {}, "a name longer than 255 bytes"),
    (["matmul", "a.npy", "b.npy", "-o", "dang/C.npy"], {}, "dang is a broken or looping symbolic link"),
    (["matmul", "a.npy", "b.npy", "-o", "/dev/null"], {}, "--out /dev/null exists and is not a regular file"),
    (["matmul", "fifo.npy", "b.npy", "-o", "k.npy"], {}, "A fifo.npy: is not a regular file"),
    (["generate", "--config", "fifo.npy", "-o", "g"], {}, "--config fifo.npy: is not a regular file"),
    (["generate", "--config", "/dev/zero", "-o", "g"], {}, "--config /dev/zero: is not a regular file"),
    (["demo", "-o", "dang"], {}, "dang is a broken or looping symbolic link"),
    (
        ["demo", "--mac", "--vectors", "99999999999999999999"],
        {},
        "argument --vectors: must be a positive integer up to 10,000,000",
    ),
    (
        ["generate", "--rows", "2", "-o", "g"],
        {"MXU_BUILD_DIR": "/proc/nope"},
        "MXU_BUILD_DIR /proc/nope: folder /proc is not writable",
    ),
    (["matmul", "a.npy", "b.npy", "-o", "k.npy"], {"MXU_BUILD_DIR": "/proc/nope"}, "MXU_BUILD_DIR /proc/nope"),
    (["generate", "--name", "module", "-o", "g"], {}, "--name 'module' is a Verilog keyword"),
    (
        ["synth", "--target", "ice40-up5k", "--block", "mac", "--name", "SB_MAC16", "-o", "s"],
        {},
        "--name 'SB_MAC16' is the name of an FPGA primitive cell",
    ),
    (["generate", "--config", "no\nne.toml", "-o", "g"], {}, "--config no\\nne.toml: no such file"),
    (["board", "build", "--stages", "0", "-o", "bb"], {}, "stages must be an integer from 1 to 9; got 0"),
    (["generate", "--rows", "4_0", "-o", "g"], {}, "argument --rows: must be a positive integer, not '4_0'"),
    (["matmul", "a.npy", "b.npy", "--rows", "\uff18", "-o", "k.npy"], {}, "argument --rows: must be a power of two"),
    (
        ["matmul", "big_a.npy", "big_b.npy", "-o", "k.npy"],
        {},
        "a 4096x4096x4096 GEMM on the 8x8 engine takes at least 1,073,",
    ),
    (
        ["board", "matmul", "oned.npy", "b.npy", "--port", "loop://", "-o", "k.npy"],
        {},
        "A oned.npy must be a 2-D matrix; got shape (8,)",
    ),
    # mxu board build: the output folder before synthesis
    (["board", "build", "-o", UNWRITABLE], {}, "folder /proc is not writable"),
    (["board", "build", "-o", "file.txt"], {}, "--out file.txt exists and is not a folder"),
    # mxu mutate: the block, its options and the output folder before any generation or build
    (["mutate", "--block", "mac", "-o", "file.txt"], {}, "--out file.txt exists and is not a folder"),
    (["mutate", "--block", "mac", "-o", UNWRITABLE], {}, "folder /proc is not writable"),
    (["mutate", "--block", "mac", "--stages", "12", "-o", "m"], {}, "stages must be an integer from 0 to 9; got 12"),
    (["mutate", "--block", "hbm-channel", "--fmt", "int8", "-o", "m"], {}, "fmt does not apply to block hbm-channel"),
    (["mutate", "--block", "mxu", "--count", "-3", "-o", "m"], {}, "argument --count: must be a positive integer"),
    # mxu sweep: the whole grid is checked before Ray starts (every point as mxu synth checks it)
    (["sweep", "nope.toml", "-o", "s"], {}, "nope.toml: no such file"),
    (["sweep", "ok.toml", "-o", "file.txt"], {}, "--out file.txt exists and is not a folder"),
    (["sweep", "not_toml.toml", "-o", "s"], {}, "not_toml.toml: not TOML: "),
    (["sweep", "colour.toml", "-o", "s"], {}, "unknown key 'colour' at the top level (allowed: "),
    (["sweep", "empty.toml", "-o", "s"], {}, "rows has no values: the grid would be empty"),
    (["sweep", "xc7.toml", "-o", "s"], {}, "argument --target: invalid choice: 'xc7'"),
    (["sweep", "no_target.toml", "-o", "s"], {}, "the following arguments are required: --target"),
    (["sweep", "mac_rows.toml", "-o", "s"], {}, "rows does not apply to block mac"),
    (["sweep", "gemm.toml", "-o", "s"], {}, "gemm must be 'MxKxN' with positive sizes; got '3x4'"),
    (["sweep", "point_list.toml", "-o", "s"], {}, "rows in point 1 must be one value"),
    (["sweep", "big.toml", "-o", "s"], {}, "stages must be an integer from 1 to 9; got 12"),
    # mxu report: the configuration and the output folder before the simulation
    (["report", "--stages", "0", "-o", "r"], {}, "stages must be an integer from 1 to 9; got 0"),
    (["report", "--rows", "16", "--cols", "16", "-o", "r"], {}, "a 16x16 array has 256 PEs; mxu report simulates"),
    (["report", "--preset", "nope", "-o", "r"], {}, "unknown --preset 'nope'"),
    (["report", "-o", "file.txt"], {}, "--out file.txt exists and is not a folder"),
    (["report", "--target", "xc7", "-o", "r"], {}, "argument --target: invalid choice: 'xc7'"),
    (
        ["report", "--hbm-scale", "0", "-o", "r"],
        {},
        "--hbm-scale: must be a fraction of the full traffic, above 0 and at most 1, not '0'",
    ),
    (
        ["report", "--hbm-scale", "x", "-o", "r"],
        {},
        "--hbm-scale: must be a fraction of the full traffic, above 0 and at most 1, not 'x'",
    ),
    (["report", "--sim", "xsim", "-o", "r"], {}, "argument --sim: invalid choice: 'xsim'"),
    ([*POD, "--devices", "0", "--sharding", "dp"], {}, "argument --devices: must be"),
    ([*POD, "--devices", "5", "--sharding", "dp"], {}, "--devices 5 is more than M = 4, the dimension dp shards"),
    ([*POD, "--devices", "9", "--sharding", "tp-k"], {}, "--devices 9 is more than K = 8, the dimension tp-k shards"),
    ([*POD, "--devices", "2", "--sharding", "pp"], {}, "argument --sharding: invalid choice: 'pp'"),
    ([*POD, "--devices", "17", "--sharding", "dp"], {}, "--devices 17: a pod has at most 16 slots"),
    (
        [*POD, "--devices", "4", "--absent", "4", "--sharding", "tp"],
        {},
        "--absent 4: no such slot; --devices 4 gives slots 0 .. 3",
    ),
    ([*POD, "--devices", "2", "--absent", "0,1", "--sharding", "tp"], {}, "--absent 0,1 leaves no node of the 2 slots"),
    ([*POD, "--devices", "2", "--absent", "x", "--sharding", "tp"], {}, "must be slot numbers separated by commas"),
    ([*POD, "--devices", "2", "--sharding", "tp", "--link-bytes", "64"], {}, "argument --link-bytes: invalid choice"),
    (["pod", "matmul", "a.npy", "nob.npy", "-o", "c.npy", "--devices", "2", "--sharding", "tp"], {}, "nob.npy"),
    # mxu pod demo: the pod, the training and the report folder before training, the build and the runs
    (["pod", "demo", "--devices", "0"], {}, "argument --devices: must be a positive integer, not '0'"),
    (["pod", "demo", "--devices", "33"], {}, "--devices 33: a pod has at most 16 slots"),
    (["pod", "demo", "--devices", "8", "--batch", "4"], {}, "--devices 8 is more than the minibatch of 4 images"),
    (["pod", "demo", "--batch", "1438"], {}, "--batch must be 1 .. 1437 (the training images); got 1438"),
    (["pod", "demo", "--steps", "-1"], {}, "argument --steps: must be an integer >= 0, not '-1'"),
    (["pod", "demo", "--lr", "nan"], {}, "argument --lr: must be a learning rate, above 0 and at most 10, not 'nan'"),
    (["pod", "demo", "--sim", "amaranth"], {}, "argument --sim: invalid choice: 'amaranth'"),
    (["pod", "demo", "--fmt", "int8"], {}, "the MLP runs float formats (bf16, fp8_e4m3fn, fp8_e5m2), not int8"),
    (["pod", "demo", "--devices", "4", "--absent", "0,1,2,3"], {}, "--absent 0,1,2,3 leaves no node of the 4 slots"),
    (
        ["pod", "demo", "--devices", "2", "--absent", "-1"],
        {},
        "--absent -1: no such slot; --devices 2 gives slots 0 .. 1",
    ),
    (["pod", "demo", "-o", UNWRITABLE], {}, f"--out {UNWRITABLE}: folder /proc is not writable"),
    (["pod", "demo", "-o", "file.txt"], {}, "--out file.txt exists and is not a folder"),
    (["pod", "demo"], {"MXU_BUILD_DIR": "/proc/nope"}, "--out /proc/nope/pod-demo: folder /proc is not writable"),
]

#: sweep specifications of the table above (written by the fixture)
SPECS = {
    "ok.toml": 'target = "ecp5-25k"\n',
    "not_toml.toml": "= =\n",
    "colour.toml": 'target = "ecp5-25k"\ncolour = 1\n',
    "empty.toml": 'target = "ecp5-25k"\nrows = []\n',
    "xc7.toml": 'target = ["ecp5-25k", "xc7"]\n',
    "no_target.toml": 'block = "mac"\n',
    "mac_rows.toml": 'target = "ecp5-25k"\n[[point]]\nblock = "mxu"\n[[point]]\nblock = "mac"\nrows = 4\n',
    "gemm.toml": 'target = "ecp5-25k"\ngemm = "3x4"\n',
    "point_list.toml": 'target = "ecp5-25k"\n[[point]]\nrows = [1, 2]\n',
    "big.toml": 'target = "ecp5-25k"\nstages = [2, 12]\n',
}


@pytest.mark.parametrize("args,env,message", BAD, ids=[" ".join(a)[:60] for a, _, _ in BAD])
def test_bad_input_exits_2_before_any_work(work, capsys, monkeypatch, args, env, message):
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    before = sorted(p.name for p in work.iterdir())
    t0 = time.perf_counter()
    rc = main(args)
    seconds = time.perf_counter() - t0
    out, err = capsys.readouterr()
    assert rc == 2, err
    assert err.startswith("mxu: error: ") and err.count("\n") == 1 and message in err, err
    assert out == ""
    assert sorted(p.name for p in work.iterdir()) == before  # nothing written, no folder made
    assert seconds < 5, f"{seconds:.1f} s: some work started before the check"


def test_k_above_max_k_in_a_fresh_process_returns_at_once(tmp_path):
    """The report's command as a user runs it: it looped for 10 minutes and grew to 4.9 GB; now one
    line and exit 2 in about a second (the import time), nothing written."""
    np.save(tmp_path / "kA.npy", np.ones((1, 16385), np.float32))
    np.save(tmp_path / "kB.npy", np.ones((16385, 1), np.float32))
    t0 = time.perf_counter()
    r = subprocess.run(
        [sys.executable, "-m", "sim.cli", "matmul", "kA.npy", "kB.npy", "-o", "k.npy"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin", "MXU_PROGRESS": "1"},
    )
    assert time.perf_counter() - t0 < 30
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr.startswith("mxu: error: K = 16385 is larger than the engine's MAX_K = 16384")
    assert r.stderr.count("\n") == 1 and "\r" not in r.stderr
    assert not (tmp_path / "k.npy").exists()


def test_shapes_are_checked_from_the_header_before_the_data_is_read(work, capsys):
    """A 1 GiB B (sparse on disk) with K = 16385: the K check came after the whole file was read
    (8 s, 2.6 GB); the header alone decides it now."""
    np.lib.format.open_memmap("bigB.npy", mode="w+", dtype=np.float32, shape=(16385, 16384)).flush()
    t0 = time.perf_counter()
    assert main(["matmul", "kA.npy", "bigB.npy", "-o", "k.npy"]) == 2
    assert time.perf_counter() - t0 < 2
    assert "K = 16385 is larger than the engine's MAX_K = 16384" in capsys.readouterr().err


def test_outputs_appear_together_or_not_at_all(work, capsys, monkeypatch):
    """When the second file cannot be put in place, the first is not replaced either (an immutable
    mxu.json left a new mxu.v beside the old mxu.json)."""
    from sim.cli import files

    (work / "g").mkdir()
    (work / "g" / "a.txt").write_text("old a\n")
    (work / "g" / "b.txt").write_text("old b\n")
    real = os.replace

    def replace(src, dst):  # b.txt is immutable (chattr +i): it can be neither moved nor replaced
        if work / "g" / "b.txt" in (Path(src), Path(dst)):
            raise PermissionError(1, "Operation not permitted")
        return real(src, dst)

    monkeypatch.setattr(files.os, "replace", replace)
    with pytest.raises(UsageError, match="cannot write: Operation not permitted"):
        files.write_outputs(work / "g", {"a.txt": "new a\n", "b.txt": "new b\n"})
    assert (work / "g" / "a.txt").read_text() == "old a\n" and (work / "g" / "b.txt").read_text() == "old b\n"
    assert sorted(p.name for p in (work / "g").iterdir()) == ["a.txt", "b.txt"]
    monkeypatch.setattr(files.os, "replace", real)
    files.write_outputs(work / "nested" / "new", {"a.txt": "x"})
    assert (work / "nested" / "new" / "a.txt").read_text() == "x"


def test_mxu_progress_values(monkeypatch):
    """MXU_PROGRESS=0 turned the bar on (any non-empty value counted); now 0/false/no/off force it
    off even on a terminal, 1/true/yes/on force it on, unset or empty follow the terminal."""
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True)
    for value in ("0", "false", "No", " off "):
        monkeypatch.setenv("MXU_PROGRESS", value)
        assert _progress_enabled() is False, value
    monkeypatch.setattr(sys.stderr, "isatty", lambda: False)
    for value in ("1", "TRUE", "yes", "on"):
        monkeypatch.setenv("MXU_PROGRESS", value)
        assert _progress_enabled() is True, value
    monkeypatch.setenv("MXU_PROGRESS", "")
    assert _progress_enabled() is False
    monkeypatch.delenv("MXU_PROGRESS")
    assert _progress_enabled() is False
    monkeypatch.setenv("MXU_PROGRESS", "2")
    with pytest.raises(UsageError, match="^MXU_PROGRESS must be one of"):
        _progress_enabled()


def test_float16_inputs_are_documented_and_accepted(work, capsys, monkeypatch):
    """float16 operands pass the input checks (the run itself is replaced here): the help says so."""
    from sim.cli.files import load_npy, operand

    a = operand(load_npy(Path("a16.npy"), "A"), "A", Path("a16.npy"), "bf16", False)
    assert a.dtype.name == "bfloat16" and a.shape == (4, 8)
    with pytest.raises(SystemExit):
        main(["matmul", "--help"])
    assert "float16 and float32 values are rounded to nearest even" in capsys.readouterr().out


def test_no_size_limit_lets_a_large_generation_through(work, capsys):
    """--no-size-limit skips the estimate: the command goes on to generation (here the replaced
    generate_verilog, which fails the run), so the limit is what stopped it before."""
    with pytest.raises(AssertionError, match="generate_verilog started"):
        main(["generate", "--rows", "1000", "--cols", "1000", "--no-size-limit", "-o", "g"])
    assert not (work / "g").exists()


def test_size_estimates_follow_the_measured_table():
    """The estimate reproduces the measured points it is built on (bench/results/mxu_scale.json)
    and grows linearly beyond them."""
    import json

    from sim import size

    measured = json.loads((ROOT / "bench" / "results" / "mxu_scale.json").read_text())["generation"]
    assert [(r["size"], r["generate_s"], r["peak_rss_mib"]) for r in measured] == list(size.GENERATION_MEASURED)
    for r in measured:
        est = size.generation_estimate(r["size"], r["size"])
        assert (est.seconds, est.mib) == pytest.approx((r["generate_s"], r["peak_rss_mib"]))
    e256, e512 = size.generation_estimate(256, 256), size.generation_estimate(512, 512)
    assert e256.mib == pytest.approx(181.4 + 5 * (593.7 - 181.4)) and e512.mib > 8192 > e256.mib
    assert size.check_generation_size(256, 256) == e256  # the tpu-v1-int8-256x256 preset stays allowed
    with pytest.raises(ValueError, match="^a 512x512 MXU"):
        size.check_generation_size(512, 512)
