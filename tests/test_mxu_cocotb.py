"""cocotb regression of the generated MXU Verilog (one PE module, one row module, the top) on
Verilator and Icarus: bit-exact with the golden model, cycle-exact with the cycle model, random
gaps and back-pressure, and a GEMM whose result must be identical on three array shapes."""

import json
import xml.etree.ElementTree as ET

import numpy as np
import pytest

from hw.generate import mxu_verilog
from hw.mxu import MXUConfig
from sim.runner import generate_verilog, run_cocotb
from verif import checked
from verif.mxu_stim import mxu_probe


def run_mxu(cfg: MXUConfig, simulator: str, seed: int, tiles, gemm=None, report=None, probe=None):
    verilog = generate_verilog(lambda: mxu_verilog(cfg, "mxu"), name="mxu", key=cfg)
    conf = {**cfg.as_dict(), "seed": seed, "tiles": list(tiles), "specials": 0.03}
    if gemm:
        conf["gemm"] = list(gemm)
    if probe:
        conf["probe"] = list(probe)
    env = {"MXU_TB_CONFIG": json.dumps(conf)}
    if report:
        env["MXU_TB_REPORT"] = str(report)
    # Verilator compiles the PE once (hier_block) instead of once per instance.
    args = ["--hierarchical"] if simulator == "verilator" else []
    result = run_cocotb([verilog], "mxu", "verif.tb.mxu_tb", simulator=simulator, env=env, build_args=args)
    print(f"{simulator} {cfg}: build {result.build_s:.1f} s, test {result.test_s:.1f} s, seed {seed}")
    return result


def ran_and_passed(result) -> set[str]:
    """Names of the cocotb tests that ran (not skipped) and passed, from the JUnit results file."""
    names = set()
    for case in ET.parse(result.results_xml).getroot().iter("testcase"):
        if case.find("skipped") is None and case.find("failure") is None and case.find("error") is None:
            names.add(case.get("name"))
    return names


SHAPES = [
    MXUConfig(1, 1, "bf16", "ftz", 2),
    MXUConfig(1, 8, "bf16", "ftz", 2),
    MXUConfig(8, 1, "bf16", "ftz", 2),
    MXUConfig(3, 5, "bf16", "ftz", 1),
    MXUConfig(4, 4, "bf16", "ftz", 3),
    MXUConfig(8, 8, "bf16", "ftz", 2),
    MXUConfig(16, 16, "bf16", "ftz", 2),
    MXUConfig(3, 5, "fp8_e4m3fn", "ftz", 2),
    MXUConfig(4, 4, "fp8_e5m2", "ieee", 2),
    MXUConfig(4, 4, "int8", "ftz", 2),
    MXUConfig(5, 3, "bf16", "ieee", 4),
    # the ECP5 DSP block's output register as the product register (its simulation model)
    MXUConfig(4, 4, "int8", "ftz", 2, multiplier="ecp5"),
    MXUConfig(3, 5, "bf16", "ieee", 8, multiplier="ecp5"),
]


def _id(cfg):
    return f"{cfg.rows}x{cfg.cols}-{cfg.fmt}-{cfg.subnormals}-s{cfg.stages}" + (
        "-ecp5" if cfg.multiplier == "ecp5" else ""
    )


# Icarus simulates a 16x16 bf16 array (256 PEs) at a few dozen cycles per second: arrays above 64 PEs
# run on Icarus under --soak only (Verilator runs every shape in the default suite).
ICARUS_MAX_PES = 64
TILE_CASES = [
    pytest.param(
        cfg,
        sim,
        id=f"{sim}-{_id(cfg)}",
        marks=[pytest.mark.soak] if sim == "icarus" and cfg.rows * cfg.cols > ICARUS_MAX_PES else [],
    )
    for cfg in SHAPES
    for sim in ("verilator", "icarus")
]


@pytest.mark.cocotb
@pytest.mark.parametrize("cfg,simulator", TILE_CASES, indirect=["simulator"])
def test_mxu_tiles(cfg, simulator, seed, soak):
    """Several tiles back to back (short and long tiles, so swaps both wait and overlap), then MAC
    test vectors in every PE (``mac_vectors``: a bug in one generated PE's datapath fails here even
    where the MAC's own tests pass)."""
    r = np.random.default_rng(seed)
    n_tiles = 12 if soak else 4
    tiles = [int(r.integers(1, 3 * cfg.rows + cfg.cols + 4)) for _ in range(n_tiles)]
    result = run_mxu(cfg, simulator, seed, tiles, probe=mxu_probe(cfg.fmt, simulator, cfg.rows * cfg.cols))
    assert result.failed == 0, result.log_tail()
    assert ran_and_passed(result) == {"tiles_back_to_back", "tiles_with_stalls", "mac_vectors"}, result.log_tail()


@pytest.mark.cocotb
@pytest.mark.parametrize(
    "simulator", [pytest.param("verilator"), pytest.param("icarus", marks=pytest.mark.soak)], indirect=True
)
def test_same_gemm_on_three_shapes(simulator, seed, tmp_path):
    """24 x 40 x 24 on 8x8, 5x3 and 16x16 arrays: each bit-exact with the golden GEMM, and the
    three results identical bit for bit (the chain over k does not depend on the tiling). Icarus
    (16x16: 256 PEs) under --soak only."""
    results = []
    for cfg in (MXUConfig(8, 8), MXUConfig(5, 3, stages=1), MXUConfig(16, 16)):
        report = tmp_path / f"{cfg.rows}x{cfg.cols}.npz"
        result = run_mxu(cfg, simulator, seed, [2], gemm=(24, 40, 24), report=report)
        assert result.failed == 0 and "gemm" in ran_and_passed(result), result.log_tail()
        results.append(np.load(report)["result"])
    assert results[0].shape == (24, 24)
    assert np.array_equal(results[0], results[1]) and np.array_equal(results[0], results[2])


@pytest.mark.cocotb
def test_the_bench_reports_the_values_it_compared_from_the_simulators_process(simulator, seed, tmp_path, monkeypatch):
    """The count in the run record (``mxu report``'s "values compared") comes from the bench itself,
    across the process boundary: tiles of 2 and 3 beats on a 3 x 5 array are 5 x 5 = 25 outputs, once
    back to back and once with stalls; the GEMM and MAC-vector tests are skipped and count nothing."""
    counts = tmp_path / "checked.txt"
    monkeypatch.setenv(checked.ENV, str(counts))
    result = run_mxu(MXUConfig(3, 5, "bf16", "ftz", 1), simulator, seed, [2, 3])
    assert result.failed == 0 and ran_and_passed(result) == {"tiles_back_to_back", "tiles_with_stalls"}
    assert checked.totals(counts) == {"values": 50}


def test_checked_counts_only_inside_the_suite_and_names_bad_units(tmp_path, monkeypatch):
    monkeypatch.delenv(checked.ENV, raising=False)
    checked.count(5)  # outside the suite: nothing to write to, no error
    monkeypatch.setenv(checked.ENV, str(tmp_path / "c.txt"))
    checked.count(5)
    checked.count(7, "bytes")
    checked.count(2)
    assert checked.totals(tmp_path / "c.txt") == {"values": 7, "bytes": 7}
    assert checked.totals(tmp_path / "missing.txt") == {}
    with pytest.raises(ValueError, match="unit 'beats': allowed values are values, bytes"):
        checked.count(1, "beats")
    with pytest.raises(ValueError, match="n must be >= 0"):
        checked.count(-1)
