"""``mxu matmul`` and the GEMM engine end to end.

Bad input: one line ``mxu: error: ...`` on stderr, exit status 2, no output file, and the simulator
never started (``run_gemms`` is replaced by a function that fails the test).

End to end (marker ``cocotb``): GEMMs through :func:`sim.gemm.run_gemms` (several per call, so one
simulator process per test) checked bit for bit against the golden model with the same functions
the command uses, hand-made special values checked against literal bit patterns, the same GEMM on
several array shapes, and the command itself on Verilator and Icarus.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

from hw.engine import EngineConfig
from sim.cli import main
from verif.gemm_host import engine_error
from verif.golden import compare_bits, result_bits
from verif.golden import expected_bits as golden_bits


def expected_bits(job, fmt, subnormals):
    """The golden bits of a sim.gemm.GemmJob."""
    return golden_bits(job.a, job.b, job.c, fmt=fmt, subnormals=subnormals, out=job.out)


ROOT = Path(__file__).resolve().parents[1]


# ---- helpers -----------------------------------------------------------------------------------


def save(path: Path, array) -> str:
    np.save(path, array, allow_pickle=True)
    return str(path)


def bad_call(args, capsys, monkeypatch):
    """Run ``mxu`` in-process; the simulator must never start."""
    import sim.gemm

    def no_sim(*a, **k):
        raise AssertionError("run_gemms called for bad input")

    monkeypatch.setattr(sim.gemm, "run_gemms", no_sim)
    rc = main(args)
    captured = capsys.readouterr()
    return rc, captured.out, captured.err


# ---- bad input ---------------------------------------------------------------------------------


@pytest.fixture
def files(tmp_path, monkeypatch):
    """Input files in tmp_path (the working folder of the test)."""
    monkeypatch.chdir(tmp_path)
    r = np.random.default_rng(0)
    save(tmp_path / "a.npy", r.standard_normal((7, 13)).astype(np.float32))
    save(tmp_path / "b.npy", r.standard_normal((13, 21)).astype(np.float32))
    save(tmp_path / "b12.npy", r.standard_normal((12, 21)).astype(np.float32))
    save(tmp_path / "c.npy", r.standard_normal((7, 21)).astype(np.float32))
    save(tmp_path / "c_wrong.npy", r.standard_normal((7, 20)).astype(np.float32))
    save(tmp_path / "c_int.npy", np.ones((7, 21), np.int32))
    save(tmp_path / "a_u16.npy", np.ones((7, 13), np.uint16))
    save(tmp_path / "a_u8.npy", np.ones((7, 13), np.uint8))
    save(tmp_path / "a_i8.npy", np.ones((7, 13), np.int8))
    save(tmp_path / "b_i8.npy", np.ones((13, 21), np.int8))
    save(tmp_path / "a_i16_big.npy", np.full((7, 13), 300, np.int16))
    save(tmp_path / "a_int.npy", np.ones((7, 13), np.int64))
    save(tmp_path / "a_bf16.npy", np.ones((7, 13), ml_dtypes.bfloat16))
    save(tmp_path / "a_c64.npy", np.ones((7, 13), np.complex64))
    save(tmp_path / "a_obj.npy", np.array([[1, "x"]], dtype=object))
    save(tmp_path / "a_3d.npy", np.ones((2, 7, 13), np.float32))
    save(tmp_path / "a_1d.npy", np.ones(13, np.float32))
    save(tmp_path / "a_empty.npy", np.ones((0, 13), np.float32))
    save(tmp_path / "b_empty.npy", np.ones((13, 0), np.float32))
    (tmp_path / "a.txt").write_text("1 2 3\n4 5 6\n")
    whole = (tmp_path / "a.npy").read_bytes()
    (tmp_path / "a_trunc.npy").write_bytes(whole[: len(whole) // 2])
    (tmp_path / "a_header.npy").write_bytes(b"\x93NUMPY\x01\x00\x10\x00{'descr': <f4   \n")
    np.savez(tmp_path / "a.npz", a=np.ones((2, 2)))
    (tmp_path / "folder").mkdir()
    return tmp_path


BAD = [
    (["missing.npy", "b.npy"], "A missing.npy: no such file"),
    (["a.npy", "missing.npy"], "B missing.npy: no such file"),
    (["folder", "b.npy"], "A folder: is a folder"),
    (["a.txt", "b.npy"], "A a.txt: not a .npy file"),
    (["a.npz", "b.npy"], "A a.npz: not a .npy file"),
    (["a_trunc.npy", "b.npy"], "A a_trunc.npy: corrupt or truncated .npy file"),
    (["a_header.npy", "b.npy"], "A a_header.npy: corrupt or truncated .npy file"),
    (["a_obj.npy", "b.npy"], "A a_obj.npy: holds Python objects"),
    (["a_3d.npy", "b.npy"], "A a_3d.npy must be a 2-D matrix; got shape (2, 7, 13)"),
    (["a_1d.npy", "b.npy"], "A a_1d.npy must be a 2-D matrix; got shape (13,)"),
    (["a_empty.npy", "b.npy"], "A a_empty.npy is 0x13: empty dimension"),
    (["a.npy", "b_empty.npy"], "B b_empty.npy is 13x0: empty dimension"),
    (["a.npy", "b12.npy"], "A is 7x13 but B is 12x21: inner dimensions (K) differ"),
    (["a_u16.npy", "b.npy"], "A a_u16.npy is uint16: pass --bits"),
    (["a_u8.npy", "b.npy", "--fmt", "fp8_e4m3fn"], "A a_u8.npy is uint8: pass --bits"),
    (["a.npy", "b.npy", "--bits"], "with --bits, --fmt bf16 takes uint16 bit patterns"),
    (["a_u8.npy", "b.npy", "--bits"], "A a_u8.npy has dtype uint8; with --bits, --fmt bf16 takes uint16"),
    (["a_u16.npy", "b.npy", "--bits", "--fmt", "fp8_e5m2"], "--fmt fp8_e5m2 takes uint8 bit patterns"),
    (["a_int.npy", "b.npy"], "A a_int.npy has dtype int64; --fmt bf16 takes float16, float32 or float64"),
    (["a_c64.npy", "b.npy"], "has dtype complex64"),
    (["a_bf16.npy", "b.npy"], "(raw bytes, e.g. an ml_dtypes array)"),
    (["a.npy", "b_i8.npy", "--fmt", "int8"], "A a.npy has dtype float32; --fmt int8 takes integer arrays"),
    (["a_u8.npy", "b_i8.npy", "--fmt", "int8"], "A a_u8.npy is uint8: pass --bits"),
    (["a_i16_big.npy", "b_i8.npy", "--fmt", "int8"], "int8 values must lie in -128..127; got 300..300"),
    (["a_i8.npy", "b_i8.npy", "--fmt", "int8", "--out-fmt", "bf16"], "--out-fmt bf16 does not apply to --fmt int8"),
    (["a_i8.npy", "b_i8.npy", "--fmt", "int8", "--c", "c.npy"], "with --fmt int8 the accumulator is int32"),
    (["a.npy", "b.npy", "--c", "c_wrong.npy"], "--c c_wrong.npy is 7x20 but the result is 7x21"),
    (["a.npy", "b.npy", "--c", "c_int.npy"], "--c c_int.npy has dtype int32; the accumulator is fp32"),
    (["a.npy", "b.npy", "--c", "missing.npy"], "--c missing.npy: no such file"),
    (["a.npy", "b.npy", "--rows", "3"], "argument --rows: must be a power of two for the GEMM engine (1, 2, 4, 8"),
    (["a.npy", "b.npy", "--cols", "12"], "argument --cols: must be a power of two for the GEMM engine"),
    (["a.npy", "b.npy", "--rows", "0"], "argument --rows: must be a power of two"),
    (["a.npy", "b.npy", "--preset", "nope"], "unknown --preset 'nope'; choose from"),
    (["a.npy", "b.npy", "--stages", "0"], "argument --stages: must be 1..9 for the GEMM engine; got 0"),
    (["a.npy", "b.npy", "--stages", "x"], "argument --stages: must be an integer"),
    (["a.npy", "b.npy", "--fmt", "fp16"], "argument --fmt: invalid choice: 'fp16'"),
    (["a.npy", "b.npy", "--subnormals", "daz"], "argument --subnormals: invalid choice: 'daz'"),
    (["a.npy", "b.npy", "--out-fmt", "fp16"], "argument --out-fmt: invalid choice: 'fp16'"),
    (["a.npy", "b.npy", "--sim", "modelsim"], "argument --sim: invalid choice: 'modelsim'"),
    (["a.npy", "b.npy", "--pseudo-channels", "3"], "argument --pseudo-channels: invalid choice: 3"),
    (["a.npy", "b.npy", "--waves", "w.txt"], "argument --waves: must end in .fst or .vcd"),
    (["a.npy", "b.npy", "--bogus"], "unrecognized arguments: --bogus"),
    (["a.npy"], "the following arguments are required: B.npy"),
]


@pytest.mark.parametrize("args,message", BAD, ids=[m[:40] for _, m in BAD])
def test_bad_input_one_line_exit_2_no_output(files, capsys, monkeypatch, args, message):
    rc, out, err = bad_call(["matmul", *args, "-o", "out/C.npy"], capsys, monkeypatch)
    assert rc == 2, err
    assert err.startswith("mxu: error: ") and err.count("\n") == 1 and message in err, err
    assert out == ""
    assert not (files / "out").exists()


def test_bad_output_paths(files, capsys, monkeypatch):
    rc, _, err = bad_call(["matmul", "a.npy", "b.npy", "-o", "folder"], capsys, monkeypatch)
    assert rc == 2 and "--out folder is a folder" in err and err.count("\n") == 1
    rc, _, err = bad_call(["matmul", "a.npy", "b.npy", "-o", "a.txt/C.npy"], capsys, monkeypatch)
    assert rc == 2 and "a.txt is not a folder" in err and err.count("\n") == 1
    rc, _, err = bad_call(["matmul", "a.npy", "b.npy"], capsys, monkeypatch)
    assert rc == 2 and "the following arguments are required: -o/--out" in err
    # numpy.save would write C.txt.npy: the file named must be the file written
    rc, _, err = bad_call(["matmul", "a.npy", "b.npy", "-o", "C.txt"], capsys, monkeypatch)
    assert rc == 2 and err == "mxu: error: --out C.txt must end in .npy\n"


def test_bad_input_in_a_fresh_process_has_no_traceback(files):
    """The console path (no pytest capture): one line, status 2, nothing written."""
    r = subprocess.run(
        [sys.executable, "-m", "sim.cli", "matmul", "a.npy", "b12.npy", "-o", "C.npy"],
        cwd=files,
        capture_output=True,
        text=True,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
    )
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr == "mxu: error: A is 7x13 but B is 12x21: inner dimensions (K) differ\n"
    assert not (files / "C.npy").exists()


def test_help_documents_the_contract(capsys):
    with pytest.raises(SystemExit) as e:
        main(["matmul", "--help"])
    assert e.value.code == 0
    text = capsys.readouterr().out
    for words in ("--bits", "--out-fmt", "predicted_cycles", "utilization", "still written", "atomically"):
        assert words in text


def test_preset_gives_engine_parameters(files, capsys, monkeypatch):
    """--preset fills rows, cols, fmt, subnormals and stages; explicit options win (no simulator:
    the run stops at the int8 input check, which needs the preset's fmt)."""
    rc, _, err = bad_call(
        ["matmul", "a.npy", "b.npy", "--preset", "tpu-v1-int8-8x8", "-o", "C.npy"], capsys, monkeypatch
    )
    assert rc == 2 and "--fmt int8 takes integer arrays" in err
    rc, _, err = bad_call(
        [
            "matmul",
            "a.npy",
            "b.npy",
            "--preset",
            "tpu-v1-int8-8x8",
            "--fmt",
            "bf16",
            "--out-fmt",
            "bf16",
            "--stages",
            "10",
            "-o",
            "C.npy",
        ],
        capsys,
        monkeypatch,
    )
    assert rc == 2 and "--stages: must be 1..9" in err


# ---- the command's checking and output, with a stand-in for the RTL ----------------------------------


def fake_engine(monkeypatch, *, flip=None, status=2):
    """Replace run_gemms by the golden model (status 2 = STATUS.DONE, as the testbench returns it);
    ``flip`` = (i, j) flips the last bit of that result."""
    import sim.gemm
    from verif.golden import fp32_to_bf16_bits, matmul

    def run(jobs, params, **kwargs):
        out = []
        for job in jobs:
            ref = matmul(job.a, job.b, job.c, fmt=params.mxu.fmt, subnormals=params.mxu.subnormals)
            bits = fp32_to_bf16_bits(ref) if job.out == "bf16" else ref.view(np.uint32).copy()
            if flip is not None:
                bits[flip] ^= 1
            out.append(sim.gemm.GemmResult(bits.view(np.float32) if job.out == "fp32" else bits, bits, 1234, status))
        return out, {"sim_cycles": 1300, "wall_s": 1.0, "build_s": 0.5, "cycles_per_s": 1300.0}

    monkeypatch.setattr(sim.gemm, "run_gemms", run)


def test_mismatch_exit_1_file_written_first_mismatch_on_stderr(files, capsys, monkeypatch):
    fake_engine(monkeypatch, flip=(2, 3))
    rc = main(["matmul", "a.npy", "b.npy", "-o", "out/C.npy"])
    captured = capsys.readouterr()
    assert rc == 1
    report = json.loads(captured.out)
    assert report["bitexact"] is False and report["mismatches"] == 1 and report["output"] == "out/C.npy"
    lines = captured.err.splitlines()
    assert lines[0].startswith("mxu: mismatch at C[2, 3]: rtl 0x") and ", golden 0x" in lines[0]
    assert lines[1] == "mxu: 1 of 147 results differ from the golden model; out/C.npy holds the RTL's results"
    assert (files / "out" / "C.npy").is_file()


def test_engine_error_exit_1_nothing_written(files, capsys, monkeypatch):
    fake_engine(monkeypatch, status=0x12)  # DONE with ERROR code 1
    rc = main(["matmul", "a.npy", "b.npy", "-o", "C.npy"])
    captured = capsys.readouterr()
    assert rc == 1 and json.loads(captured.out)["engine_error"].startswith("STATUS 0x12: ERROR 1")
    assert captured.err.startswith("mxu: failed: the engine reported STATUS 0x12") and not (files / "C.npy").exists()


def test_report_fields_and_outputs(files, capsys, monkeypatch):
    """With the stand-in: the JSON fields, the cycle models, the output dtypes (int32 for int8, bf16
    widened to float32), and no temporary file left."""
    from verif.cycles import gemm_cycles
    from verif.golden import fp32_to_bf16_bits, matmul, to_format

    fake_engine(monkeypatch)
    assert main(["matmul", "a.npy", "b.npy", "--c", "c.npy", "--rows", "16", "--cols", "4", "-o", "C.npy"]) == 0
    report = json.loads(capsys.readouterr().out)
    for key in (
        "m",
        "k",
        "n",
        "rows",
        "cols",
        "fmt",
        "subnormals",
        "sim",
        "cycles",
        "predicted_cycles",
        "engine_model_cycles",
        "ideal_cycles",
        "scalesim_cycles",
        "utilization",
        "bitexact",
        "mismatches",
        "wall_s",
        "status",
        "engine_error",
        "pseudo_channels",
        "out_fmt",
        "stages",
        "perf",
    ):
        assert key in report
    assert (report["rows"], report["cols"], report["cycles"], report["status"]) == (16, 4, 1234, 2)
    assert report["predicted_cycles"] == gemm_cycles(7, 13, 21, 16, 4, 2)
    assert report["scalesim_cycles"] == 1 * 6 * (32 + 4 + 7 - 2)
    assert report["utilization"] == round(7 * 13 * 21 / 64 / 1234, 4)
    a, b, c = np.load("a.npy"), np.load("b.npy"), np.load("c.npy")
    want = matmul(to_format(a, "bf16"), to_format(b, "bf16"), c, fmt="bf16", subnormals="ftz")
    assert np.array_equal(np.load("C.npy").view(np.uint32), want.view(np.uint32))
    assert main(["matmul", "a.npy", "b.npy", "--out-fmt", "bf16", "-o", "C16.npy"]) == 0
    got = np.load("C16.npy")
    assert got.dtype == np.float32
    want = fp32_to_bf16_bits(matmul(to_format(a, "bf16"), to_format(b, "bf16"), fmt="bf16", subnormals="ftz"))
    assert np.array_equal(got.view(np.uint32) >> 16, want) and not (got.view(np.uint32) & 0xFFFF).any()
    capsys.readouterr()
    assert main(["matmul", "a_i8.npy", "b_i8.npy", "--preset", "tpu-v1-int8-8x8", "-o", "Ci.npy"]) == 0
    assert np.load("Ci.npy").dtype == np.int32 and (np.load("Ci.npy") == 13).all()
    assert json.loads(capsys.readouterr().out)["out_fmt"] == "int32"  # int8 results are int32, not fp32
    assert not [p for p in files.iterdir() if p.name.startswith(".")]


# ---- golden helpers of the command (no RTL) --------------------------------------------------------


def test_expected_bits_canonical_nan_and_bf16_output():
    from sim.gemm import GemmJob
    from verif.golden import to_format

    a = to_format(np.array([[np.nan, 1.0], [np.inf, 1.0], [1.0, 1.0]], np.float32), "bf16")
    b = to_format(np.array([[0.0], [1.0 + 2**-8]], np.float32), "bf16")  # 1 + 2^-8 is not a bf16: 1.0
    fp32 = expected_bits(GemmJob(a, b), "bf16", "ftz")
    assert fp32.dtype == np.uint32 and fp32[:, 0].tolist() == [0x7FC00000, 0x7FC00000, 0x3F800000]
    bf16 = expected_bits(GemmJob(a, b, out="bf16"), "bf16", "ftz")
    assert bf16.dtype == np.uint16 and bf16[:, 0].tolist() == [0x7FC0, 0x7FC0, 0x3F80]


# ---- end to end --------------------------------------------------------------------------------

SPECIAL_BF16 = np.array(
    [0x0000, 0x8000, 0x0001, 0x8070, 0x7F80, 0xFF80, 0x7FC0, 0xFFC1, 0x7F7F, 0x0080, 0x3F80, 0xBF80], np.uint16
)
SPECIAL_F32 = np.array(
    [0x00000000, 0x80000000, 0x00000001, 0x807FFFFF, 0x7F800000, 0xFF800000, 0x7FC00000, 0x7F7FFFFF, 0x00800000],
    np.uint32,
)


def random_operand(rng, fmt: str, shape, specials: float = 0.03) -> np.ndarray:
    """Moderate values with varied exponents, some raw random patterns, and special values
    (NaN, inf, subnormals, signed zeros, extremes) at rate ``specials``."""
    from verif.golden import to_format

    if fmt == "int8":
        return rng.integers(-128, 128, shape).astype(np.int8)
    x = (rng.standard_normal(shape) * 2.0 ** rng.integers(-4, 5, shape)).astype(np.float32)
    if fmt == "bf16":
        bits = to_format(x, fmt).view(np.uint16)
        bits = np.where(rng.random(shape) < 0.05, rng.integers(0, 1 << 16, shape), bits)
        bits = np.where(rng.random(shape) < specials, rng.choice(SPECIAL_BF16, shape), bits).astype(np.uint16)
        return bits.view(ml_dtypes.bfloat16)
    bits = to_format(x, fmt).view(np.uint8)
    bits = np.where(rng.random(shape) < max(specials, 0.05), rng.integers(0, 256, shape), bits).astype(np.uint8)
    return to_format(bits, fmt)


def random_acc(rng, fmt: str, shape, specials: float = 0.03) -> np.ndarray:
    if fmt == "int8":
        return rng.integers(-(2**31), 2**31, shape).astype(np.int32)
    x = (rng.standard_normal(shape) * 8).astype(np.float32).view(np.uint32)
    return np.where(rng.random(shape) < specials, rng.choice(SPECIAL_F32, shape), x).astype(np.uint32).view(np.float32)


def random_job(rng, fmt, m, k, n, *, c=False, out="fp32", specials=0.03):
    from sim.gemm import GemmJob

    return GemmJob(
        random_operand(rng, fmt, (m, k), specials),
        random_operand(rng, fmt, (k, n), specials),
        random_acc(rng, fmt, (m, n), specials) if c else None,
        out,
    )


def check_run(jobs, params, simulator):
    """Run ``jobs`` in one simulator process; every result bit-exact with the golden model."""
    from sim.gemm import run_gemms
    from verif import checked

    results, info = run_gemms(jobs, params, sim=simulator, progress=False)
    print(
        f"{simulator} {params}: {len(jobs)} GEMMs, {info.get('sim_cycles')} cycles, "
        f"build {info.get('build_s')} s, wall {info.get('wall_s')} s"
    )
    assert len(results) == len(jobs)
    for i, (job, res) in enumerate(zip(jobs, results)):
        shape = f"{job.a.shape[0]}x{job.a.shape[1]}x{job.b.shape[1]}"
        assert engine_error(res.status) is None, f"job {i} ({shape}): {engine_error(res.status)}"
        rtl = result_bits(res.bits, job.out)
        gold = expected_bits(job, params.mxu.fmt, params.mxu.subnormals)
        assert rtl.shape == gold.shape, f"job {i} ({shape}): result shape {rtl.shape}"
        bad = compare_bits(rtl, gold)
        checked.count(gold.size)
        assert not bad, (
            f"job {i} ({shape}, {params.mxu.fmt}, {params.mxu.subnormals}, out {job.out}): {len(bad)} "
            f"mismatches; first at {bad[0]}: rtl 0x{int(rtl[bad[0]]):x}, golden 0x{int(gold[bad[0]]):x}"
        )
    return results


def bf16(bits) -> np.ndarray:
    return np.array(bits, np.uint16).view(ml_dtypes.bfloat16)


def special_jobs():
    """Hand-made bf16 GEMMs whose results are known bit patterns (independent of the golden model).

    Returns (job, expected uint32 bits for subnormals="ftz", for "ieee")."""
    from sim.gemm import GemmJob

    one, m_one, inf, m_inf, nan, zero, m_zero = 0x3F80, 0xBF80, 0x7F80, 0xFF80, 0x7FC0, 0x0000, 0x8000
    big, sub = 0x7F7F, 0x0001  # bf16 max finite; smallest bf16 subnormal (2^-133)
    tiny = 0x1F80  # 2^-64: tiny * tiny = 2^-128, an fp32 subnormal
    # Each row of A against B = [[1], [1]] (K = 2): one chain acc = 0 + a0*1 + a1*1 per row.
    a = bf16([[nan, one], [inf, m_inf], [inf, one], [big, big], [m_zero, m_zero], [one, m_one], [sub, zero]])
    b = bf16([[one], [one]])
    ftz = [0x7FC00000, 0x7FC00000, 0x7F800000, 0x7F800000, 0x00000000, 0x00000000, 0x00000000]
    ieee = [0x7FC00000, 0x7FC00000, 0x7F800000, 0x7F800000, 0x00000000, 0x00000000, 0x00010000]
    jobs = [(GemmJob(a, b), ftz, ieee)]
    # Row 0: inf*0 + tiny*tiny = NaN. Row 1: tiny*0 + 0*tiny = +0.
    a2 = bf16([[inf, tiny], [tiny, zero]])
    b2 = bf16([[zero], [tiny]])
    jobs.append((GemmJob(a2, b2), [0x7FC00000, 0x00000000], [0x7FC00000, 0x00000000]))
    a3 = bf16([[tiny], [m_zero]])
    b3 = bf16([[tiny]])
    # tiny*tiny = 2^-128: ftz flushes it (+0); ieee keeps the subnormal 0x00200000. -0 * tiny = -0,
    # and with the initial C = -0: (-0) + (-0) = -0.
    c3 = np.array([[0.0], [-0.0]], np.float32)
    jobs.append((GemmJob(a3, b3, c3), [0x00000000, 0x80000000], [0x00200000, 0x80000000]))
    # Initial C with NaN / inf / -0 and a zero product; +0 initial (no C) with a -0 product gives +0.
    c4 = np.array([[np.nan], [-np.inf], [-0.0]], np.float32)
    jobs.append(
        (
            GemmJob(bf16([[zero], [one], [m_zero]]), bf16([[one]]), c4),
            [0x7FC00000, 0xFF800000, 0x80000000],
            [0x7FC00000, 0xFF800000, 0x80000000],
        )
    )
    jobs.append((GemmJob(bf16([[m_zero]]), bf16([[one]])), [0x00000000], [0x00000000]))
    return jobs


def shape_jobs(rng, fmt, rows, cols, *, big=True):
    """GEMMs of every kind of shape for an R x C array: 1x1x1, 1xKx1 with K several times R,
    7x13x21, exact multiples of the array, an initial C, bf16 output; ``big`` adds larger ones
    (Verilator: Icarus simulates the bf16 8x8 engine at 200-300 cycles/s, bench/results/sim_speed.json)."""
    shapes = [(1, 1, 1), (1, 3 * rows + 1, 1), (7, 13, 21), (rows, rows, cols)]
    if big:
        shapes += [(2 * rows, 4 * rows, 2 * cols), (3, 5 * rows, 2), (33, 65, 17)]
    jobs = [random_job(rng, fmt, *s) for s in shapes]
    jobs.append(random_job(rng, fmt, 9, 2 * rows + 3, cols + 1, c=True))
    if fmt != "int8":
        jobs.append(random_job(rng, fmt, 5, rows + 3, 3, c=True, out="bf16"))
    return jobs


@pytest.mark.cocotb
def test_engine_shapes_and_specials(simulator, seed):
    """The default engine (bf16, ftz, 8x8): shapes from 1x1x1 to 33x65x17 (Icarus: the small ones),
    random special values, and hand-made specials checked against literal bit patterns."""

    rng = np.random.default_rng(seed)
    params = EngineConfig()
    assert (params.mxu.rows, params.mxu.cols, params.mxu.fmt, params.mxu.subnormals) == (8, 8, "bf16", "ftz")
    jobs = shape_jobs(rng, "bf16", 8, 8, big=simulator == "verilator")
    specials = special_jobs()
    results = check_run(jobs + [j for j, _, _ in specials], params, simulator)
    for (_job, ftz, _), res in zip(specials, results[len(jobs) :]):
        assert result_bits(res.bits, "fp32")[:, 0].tolist() == ftz


# A Verilator build of a 4x4 engine with its memory system takes about 45 s (Verilog translation and
# C++), while Icarus builds it in seconds and runs these small GEMMs in seconds (a 4x4 bf16 engine
# at about 190 cycles/s with the array busy: python -m bench.sim_speed --sims icarus --memories hdl
# --array 4x4 --shapes 32x64x32): the configurations other than the default run on Icarus, and on
# Verilator too under --soak.
ICARUS_FIRST = [pytest.param("icarus"), pytest.param("verilator", marks=pytest.mark.soak)]


@pytest.mark.cocotb
@pytest.mark.parametrize("simulator", ICARUS_FIRST, indirect=True)
@pytest.mark.parametrize(
    "fmt,subnormals",
    [
        ("bf16", "ieee"),
        ("fp8_e4m3fn", "ftz"),
        ("fp8_e5m2", "ieee"),
        ("int8", "ftz"),
        pytest.param("fp8_e4m3fn", "ieee", marks=pytest.mark.soak),
        pytest.param("fp8_e5m2", "ftz", marks=pytest.mark.soak),
    ],
)
def test_engine_formats(fmt, subnormals, simulator, seed):
    """Every input format and both subnormal modes (bf16 ftz is the default engine above) on a 4x4
    engine: random GEMMs with special values, an initial C, bf16 output; the hand-made bf16
    specials with their ieee bit patterns; int32 wrap-around for int8."""
    from sim.gemm import GemmJob

    rng = np.random.default_rng(seed)
    params = EngineConfig.from_options(rows=4, cols=4, fmt=fmt, subnormals=subnormals)
    jobs = shape_jobs(rng, fmt, 4, 4, big=False)
    if fmt == "int8":  # INT32_MAX + 100*100 and INT32_MIN - 100*100 wrap
        jobs.append(
            GemmJob(
                np.array([[100]], np.int8),
                np.array([[100, -100]], np.int8),
                np.array([[2**31 - 1, -(2**31)]], np.int32),
            )
        )
    specials = special_jobs() if fmt == "bf16" else []
    results = check_run(jobs + [j for j, _, _ in specials], params, simulator)
    for (_job, ftz, ieee), res in zip(specials, results[len(jobs) :]):
        assert result_bits(res.bits, "fp32")[:, 0].tolist() == (ieee if subnormals == "ieee" else ftz)
    if fmt == "int8":
        assert result_bits(results[len(jobs) - 1].bits, "fp32").tolist() == [[0x8000270F, 0x7FFFD8F0]]


@pytest.mark.cocotb
@pytest.mark.parametrize("simulator", ICARUS_FIRST, indirect=True)
def test_same_gemm_on_different_arrays(simulator, seed, soak):
    """One GEMM (special values, an initial C, K and N multiples of no array) on 4x4, 8x8 and 4x8
    engines (and 16x8 under --soak): bit-identical results, equal to the golden model."""

    rng = np.random.default_rng(seed)
    jobs = [random_job(rng, "bf16", 11, 37, 19, c=True), random_job(rng, "bf16", 2, 21, 9)]
    outs = []
    for rows, cols in ((4, 4), (8, 8), (4, 8)) + (((16, 8),) if soak else ()):
        results = check_run(jobs, EngineConfig.from_options(rows=rows, cols=cols), simulator)
        outs.append([result_bits(r.bits, "fp32") for r in results])
    for other in outs[1:]:
        for x, y in zip(outs[0], other):
            assert np.array_equal(x, y)


@pytest.mark.cocotb
def test_matmul_command_end_to_end(simulator, seed, tmp_path, monkeypatch, capsys):
    """``mxu matmul`` itself: float64 inputs rounded once, NaN / inf / -0 inputs, an initial C, exit 0,
    the JSON report, and C.npy bit-exact; then raw bits with bf16 output (Verilator)."""
    from verif.golden import fp32_to_bf16_bits, matmul, to_format

    monkeypatch.chdir(tmp_path)
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((7, 13))  # float64: rounded once into bf16
    b = rng.standard_normal((13, 21)).astype(np.float32)
    c = rng.standard_normal((7, 21)).astype(np.float32)
    a[0, 0], b[1, 1], c[2, 2] = np.nan, -np.inf, -0.0
    save(tmp_path / "a.npy", a)
    save(tmp_path / "b.npy", b)
    save(tmp_path / "c.npy", c)
    rc = main(["matmul", "a.npy", "b.npy", "--c", "c.npy", "--sim", simulator, "-o", "out/C.npy"])
    captured = capsys.readouterr()
    assert rc == 0, captured.err
    report = json.loads(captured.out)
    golden = matmul(to_format(a, "bf16"), to_format(b, "bf16"), c, fmt="bf16", subnormals="ftz")
    got = np.load(tmp_path / "out" / "C.npy")
    assert got.dtype == np.float32 and np.array_equal(got.view(np.uint32), golden.view(np.uint32))
    assert got.view(np.uint32)[0, 0] == 0x7FC00000
    assert report["bitexact"] is True and report["mismatches"] == 0 and report["engine_error"] is None
    assert (report["m"], report["k"], report["n"], report["rows"], report["cols"]) == (7, 13, 21, 8, 8)
    assert report["sim"] == simulator and report["fmt"] == "bf16" and report["subnormals"] == "ftz"
    assert report["cycles"] >= report["engine_model_cycles"] >= report["predicted_cycles"] > 0
    assert report["scalesim_cycles"] == 2 * 3 * (16 + 8 + 7 - 2)
    assert report["utilization"] == round(7 * 13 * 21 / 64 / report["cycles"], 4)
    perf = report["perf"]  # the engine's counters: one FEED per beat, the rest inside CYCLES
    assert perf["perf_feed"] == 7 * 2 * 3 and 0 < report["cycles"] - sum(perf.values()) <= 64, perf
    assert not list(tmp_path.glob("out/.*"))  # no temporary file left behind
    if simulator != "verilator":
        return
    abits = to_format(a, "bf16").view(np.uint16)
    save(tmp_path / "ab.npy", abits)
    save(tmp_path / "bb.npy", to_format(b, "bf16").view(np.uint16))
    rc = main(["matmul", "ab.npy", "bb.npy", "--bits", "--out-fmt", "bf16", "-o", "C16.npy"])
    captured = capsys.readouterr()
    assert rc == 0, captured.err
    report = json.loads(captured.out)
    assert report["out_fmt"] == "bf16" and report["bitexact"] and report["mismatches"] == 0
    got = np.load(tmp_path / "C16.npy")
    golden = matmul(to_format(a, "bf16"), to_format(b, "bf16"), fmt="bf16", subnormals="ftz")
    assert got.dtype == np.float32 and np.array_equal(got.view(np.uint32) >> 16, fp32_to_bf16_bits(golden))
    assert not (got.view(np.uint32) & 0xFFFF).any()


@pytest.mark.parametrize("subnormals", ["ftz", "ieee"])
def test_hand_made_specials_agree_with_golden(subnormals):
    """The literal bit patterns of :func:`special_jobs` are what the golden model says (no RTL)."""
    for job, ftz, ieee in special_jobs():
        want = ieee if subnormals == "ieee" else ftz
        assert expected_bits(job, "bf16", subnormals)[:, 0].tolist() == want
