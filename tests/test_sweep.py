"""``mxu sweep``: a grid of ``mxu synth`` configurations on Ray, records cached by hash, Pareto plots.

The bad specifications (exit 2, nothing started) are in ``tests/test_cli_contract.py``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from sim import sweep
from sim.cli.sweep import resolve_point

ROOT = Path(__file__).resolve().parents[1]

#: two small points: a 1x2 int8 MXU placed on the ULX3S 25F (DSP timing: Fmax and the throughput
#: from the exact cycle model) and a 4x4 int8 MXU that does not fit the iCE40UP5K (16 SB_MAC16 of 8)
TWO_POINTS = """\
block = "mxu"
fmt = "int8"
freq = 100
gemm = "64x32x16"
[[point]]
target = "ecp5-25k"
rows = 1
cols = 2
[[point]]
target = "ice40-up5k"
rows = 4
cols = 4
"""


def test_pareto_front_keeps_the_points_no_other_beats():
    recs = [
        {"lut4": 10, "mhz": 100},
        {"lut4": 20, "mhz": 90},
        {"lut4": 20, "mhz": 150},
        {"lut4": 30, "mhz": 150},
        {"lut4": 5, "mhz": 50},
        {"lut4": None, "mhz": 300},
        {"lut4": 40, "mhz": 200},
    ]
    # 1 is beaten by 0 (fewer LUT4, more MHz), 3 by 2 (same MHz, fewer LUT4); 5 has no LUT4
    assert sweep.pareto(recs, "lut4", "mhz") == [4, 0, 2, 6]


def test_grid_expands_axes_around_each_point(tmp_path):
    spec = tmp_path / "g.toml"
    spec.write_text(
        'target = "ecp5-85k"\nfmt = ["bf16", "int8"]\nseed = [1, 2]\n[[point]]\nrows = 2\ncols = 2\n'
        '[[point]]\nblock = "mac"\nstages = 3\n'
    )
    points = sweep.load_spec(spec, resolve_point)
    assert [(p.options["block"], p.options["fmt"], p.options["seed"]) for p in points] == [
        ("mxu", "bf16", 1),
        ("mxu", "bf16", 2),
        ("mxu", "int8", 1),
        ("mxu", "int8", 2),
        ("mac", "bf16", 1),
        ("mac", "bf16", 2),
        ("mac", "int8", 1),
        ("mac", "int8", 2),
    ]
    assert points[0].argv == (
        "--block",
        "mxu",
        "--cols",
        "2",
        "--fmt",
        "bf16",
        "--rows",
        "2",
        "--seed",
        "1",
        "--target",
        "ecp5-85k",
    )
    assert points[0].gemm == (256, 256, 256) and points[0].place
    spec.write_text('target = "ecp5-85k"\nplace = false\nbackpressure = false\nseed = [1, 1]\n')
    (p,) = sweep.load_spec(spec, resolve_point)  # the repeated point runs once
    assert p.argv == ("--no-backpressure", "--block", "mxu", "--seed", "1", "--target", "ecp5-85k") and not p.place


def test_two_point_sweep_on_a_local_ray_instance_is_cached(tmp_path):
    """Two points on a local Ray instance with one worker: the placed one with its cells, Fmax and
    the GEMM's cycles from the cycle model, the other recorded as not fitting; run again, both come
    from the cache and nothing is placed."""
    from verif.cycles import gemm_cycles

    (tmp_path / "two.toml").write_text(TWO_POINTS)
    env = {**os.environ, "MXU_BUILD_DIR": str(tmp_path / "build"), "MXU_PROGRESS": "0"}
    cmd = [sys.executable, "-m", "sim.cli", "sweep", "two.toml", "--jobs", "1", "-o", "out", "--json"]
    r = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, env=env, timeout=600)
    assert r.returncode == 0, r.stderr
    doc = json.loads((tmp_path / "out" / "sweep.json").read_text())
    assert (doc["points"], doc["ran"], doc["cached"]) == (2, 2, 0)
    placed, unfit = doc["records"]
    assert placed["status"] == "ok" and placed["options"]["target"] == "ecp5-25k"
    assert (placed["dsp"], placed["bram"], placed["requested_mhz"]) == (2, 0, 100.0)
    assert placed["lut4"] > 0 and placed["achieved_mhz"] > 0 and placed["met"] == (placed["achieved_mhz"] >= 100)
    cycles = 16_389  # 1x2, L = 2: 32 x 8 tiles of 64 beats back to back (16,384) plus 5 of fill and drain
    assert placed["gemm_cycles"] == cycles == gemm_cycles(64, 32, 16, 1, 2, 2)
    assert placed["gemm_gmacs"] == round(64 * 32 * 16 / cycles * placed["achieved_mhz"] / 1e3, 3)
    assert unfit["status"] == "does-not-fit"
    assert unfit["error"].endswith(
        "SB_MAC16 DSP: needs 16, iCE40UP5K-SG48I has 8; multipliers can be built from LUTs instead (--no-dsp)"
    )
    assert json.loads(r.stdout) == doc["records"]
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == [
        "pareto_fmax_lut4.png",
        "pareto_gmacs_lut4.png",
        "sweep.json",
    ]

    r = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, env=env, timeout=120)
    assert r.returncode == 0, r.stderr
    again = json.loads((tmp_path / "out" / "sweep.json").read_text())
    assert (again["ran"], again["cached"]) == (0, 2)
    strip = lambda recs: [{k: v for k, v in x.items() if k != "cached"} for x in recs]  # noqa: E731
    assert strip(again["records"]) == strip(doc["records"])
    assert [x["cached"] for x in again["records"]] == [True, True]

    # the same points with their defaults spelled out: from the cache, each with this spec's options
    (tmp_path / "two.toml").write_text(TWO_POINTS.replace('fmt = "int8"', 'fmt = "int8"\nsubnormals = "ftz"\nseed = 1'))
    r = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, env=env, timeout=120)
    assert r.returncode == 0, r.stderr
    spelled = json.loads((tmp_path / "out" / "sweep.json").read_text())
    assert (spelled["ran"], spelled["cached"]) == (0, 2)
    assert [(x["options"]["subnormals"], x["options"]["seed"]) for x in spelled["records"]] == [("ftz", 1)] * 2
    assert [x["lut4"] for x in spelled["records"][:1]] == [placed["lut4"]]


def test_cache_key_is_the_resolved_configuration():
    """The same array spelled with or without its defaults is one cache record; another stage count,
    seed or GEMM is another."""
    from sim.sweep import _key, make_point

    def key(**options):
        return _key(
            make_point({"block": "mxu", "target": "ecp5-85k", "rows": 4, "cols": 4, **options}), "fp", resolve_point
        )

    base = key()
    assert key(fmt="bf16", subnormals="ftz", stages=2, backpressure=True, seed=1, gemm="256x256x256") == base
    assert key(freq=48) == base  # the OrangeCrab's oscillator, mxu synth's default for ecp5-85k
    assert len({base, key(stages=3), key(seed=2), key(gemm="8x8x8"), key(freq=100), key(place=False)}) == 6


@pytest.mark.cocotb
def test_engine_gemm_cycles_on_the_rtl_bit_exact():
    """The engine sweep points' cycle figure: a 4x4x4 GEMM on the 2x2 int8 engine with the HDL memory
    in Icarus takes 97 cycles (the CYCLES ``mxu report`` traces for the same GEMM), bit-exact."""
    from hw.engine import EngineConfig
    from sim.gemm import engine_gemm_cycles

    cfg = EngineConfig.from_options(rows=2, cols=2, fmt="int8", stages=1)
    assert engine_gemm_cycles(cfg, 4, 4, 4, sim="icarus") == 97


def test_engine_point_takes_its_cycles_from_the_rtl(tmp_path, monkeypatch):
    """An engine point: the flow's report gives Fmax and cells, the RTL the GEMM's cycles (here a
    stand-in that records its call), GMAC/s = M K N / cycles x MHz; a failing simulation leaves the
    synthesis record with ``gemm_error`` and no throughput."""
    import sim.gemm
    import sim.synth

    monkeypatch.setenv("MXU_BUILD_DIR", str(tmp_path))
    report = {
        "fmax": [{"achieved_mhz": 80.0, "met": False, "critical_path": None}],
        "requested_mhz": 100.0,
        "cells": {"block": {"lut4": 5000, "ff": 3000, "dsp": 4}},
        "tools": {},
    }
    monkeypatch.setattr(sim.synth, "run_flow", lambda *a, **k: report)
    calls = []

    def cycles(cfg, m, k, n):
        calls.append((cfg.mxu.rows, cfg.mxu.cols, cfg.mxu.fmt, m, k, n))
        return 1234

    monkeypatch.setattr(sim.gemm, "engine_gemm_cycles", cycles)
    point = sweep.make_point(
        {"block": "engine", "rows": 2, "cols": 2, "fmt": "int8", "target": "ecp5-85k", "gemm": "16x8x4"}
    )
    rec = sweep.run_point(point, tmp_path / "w", resolve_point)
    assert rec["status"] == "ok" and calls == [(2, 2, "int8", 16, 8, 4)]
    assert (rec["gemm_cycles"], rec["gemm_gmacs"]) == (1234, round(16 * 8 * 4 / 1234 * 80.0 / 1e3, 3))
    assert rec["cycle_model"].startswith("RTL:") and rec["lut4"] == 5000
    # the record and the table carry the configuration as synthesized, defaults filled in
    assert rec["resolved"]["engine"]["mxu"] == {
        "rows": 2,
        "cols": 2,
        "fmt": "int8",
        "subnormals": "ftz",
        "stages": 2,
        "backpressure": True,
        "multiplier": "generic",
    }
    assert (rec["resolved"]["target"], rec["resolved"]["seed"]) == ("ecp5-85k", 1)
    from sim.cli.sweep import format_table

    assert format_table([rec]).splitlines()[1].split()[:7] == ["engine", "ecp5-85k", "2", "2", "int8", "2", "1"]

    def fails(cfg, m, k, n):
        raise RuntimeError("the engine's 16x8x4 GEMM is not bit-exact against the golden model (1 of 64 ...)")

    monkeypatch.setattr(sim.gemm, "engine_gemm_cycles", fails)
    rec = sweep.run_point(point, tmp_path / "w2", resolve_point)
    assert rec["status"] == "ok" and rec["gemm_cycles"] is None and rec["gemm_gmacs"] is None
    assert rec["gemm_error"].startswith("the engine's 16x8x4 GEMM is not bit-exact")


def test_a_cache_record_without_a_fingerprint_gets_the_one_its_key_was_made_under(tmp_path):
    """Records written before they carried their fingerprint: the key already hashes it, so the first
    cache hit stores it (``mxu report`` lists only records with the current fingerprint)."""
    from sim.sweep import _load

    old = {"options": {"block": "mxu"}, "status": "ok", "lut4": 7}
    (tmp_path / "k.json").write_text(json.dumps(old))
    assert _load(tmp_path, "k", "fp1") == {**old, "fingerprint": "fp1"}
    assert json.loads((tmp_path / "k.json").read_text()) == {**old, "fingerprint": "fp1"}
    assert _load(tmp_path, "k", "fp2")["fingerprint"] == "fp1"  # a stored fingerprint is kept
