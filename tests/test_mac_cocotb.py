"""cocotb regression of the generated MAC Verilog on Verilator and Icarus.

Per simulator and configuration: the corner-case product (every special operand pairing) and
20,000 random MACs (5,000 at depths 0, 4 and 9) split over the five distributions (one for int8),
with random input gaps and back-pressure, compared bit for bit with the golden model; ``--soak``
multiplies the count by 10. And every pipeline depth of every format and mode side by side on one
stream (``test_mac_depths``, Verilator).
"""

import json

import pytest

from hw.arith import MAC, MACConfig
from sim.runner import generate_verilog, run_cocotb

CONFIGS = [
    MACConfig("bf16", "ftz", 2),
    MACConfig("bf16", "ieee", 2),
    MACConfig("fp8_e4m3fn", "ftz", 2),
    MACConfig("fp8_e4m3fn", "ieee", 2),
    MACConfig("fp8_e5m2", "ftz", 2),
    MACConfig("fp8_e5m2", "ieee", 2),
    MACConfig("int8", "ftz", 2),
    # Other pipeline depths, bf16 only (the datapath is shared by every float format).
    MACConfig("bf16", "ftz", 0),
    MACConfig("bf16", "ieee", 4),
    MACConfig("bf16", "ftz", 9),  # decode/"in"/multiply/"mul"/normalize split, normalization in two
]
DEFAULT_RANDOM = 20000  # random MACs per format, subnormal mode and simulator at depth 2


def _id(cfg):
    return f"{cfg.fmt}-{cfg.subnormals}-s{cfg.stages}"


def _run_bench(verilog, top: str, bench: str, simulator: str, config: dict, report, what: str):
    """Run testbench ``bench`` on ``verilog`` with ``config`` as ``MXU_TB_CONFIG``; fail on a failed
    cocotb test; return the bench's JSON-lines records (a skipped cocotb test counts as passed, so the
    callers check from these that the vectors ran)."""
    env = {"MXU_TB_CONFIG": json.dumps(config), "MXU_TB_REPORT": str(report)}
    result = run_cocotb([verilog], top, bench, simulator=simulator, env=env)
    print(f"{simulator} {what}: seed {config['seed']}, build {result.build_s:.1f} s, test {result.test_s:.1f} s")
    assert result.failed == 0, result.log_tail()
    return [json.loads(line) for line in report.read_text().splitlines()]


@pytest.mark.cocotb
@pytest.mark.parametrize("cfg", CONFIGS, ids=_id)
def test_mac(cfg, simulator, seed, soak, tmp_path):
    n_random = (DEFAULT_RANDOM if cfg.stages == 2 else DEFAULT_RANDOM // 4) * (10 if soak else 1)
    verilog = generate_verilog(lambda: MAC(cfg), name="mac", key=cfg)
    config = {
        "fmt": cfg.fmt,
        "subnormals": cfg.subnormals,
        "stages": cfg.stages,
        "seed": seed,
        "random_total": n_random,
        "gaps": True,
    }
    records = _run_bench(
        verilog,
        "mac",
        "verif.tb.mac_tb",
        simulator,
        config,
        tmp_path / "report.jsonl",
        f"{_id(cfg)}: {n_random} random MACs + corners",
    )
    assert "corner" in {r["test"] for r in records}
    assert sum(r["vectors"] for r in records if r["test"] != "corner") == n_random
    assert all(r["mismatches"] == 0 for r in records)


DEPTH_CONFIGS = [(f, s) for f in ("bf16", "fp8_e4m3fn", "fp8_e5m2") for s in ("ftz", "ieee")] + [("int8", "ftz")]


@pytest.mark.cocotb
@pytest.mark.parametrize("simulator", ["verilator"], indirect=True)
@pytest.mark.parametrize("fmt,subnormals", DEPTH_CONFIGS)
def test_mac_depths(fmt, subnormals, simulator, seed, soak, tmp_path):
    """Every pipeline depth (0 to MAX_STAGES) of every format and subnormal mode at once, on one input
    stream: the full corner product and 1,500 random MACs (15,000 with ``--soak``) go through all ten
    depths, each with its exact latency and bit-exact against the golden model
    (``verif.hdl.mac_depths.MACDepths``, one Verilator build per format and mode)."""
    from hw.arith import MAX_STAGES
    from verif.hdl.mac_depths import MACDepths

    n_random = 1500 * (10 if soak else 1)
    verilog = generate_verilog(lambda: MACDepths(fmt, subnormals), name="mac_depths", key=(fmt, subnormals))
    config = {"fmt": fmt, "subnormals": subnormals, "seed": seed, "random": n_random}
    records = _run_bench(
        verilog,
        "mac_depths",
        "verif.tb.mac_depths_tb",
        simulator,
        config,
        tmp_path / "report.jsonl",
        f"{fmt}-{subnormals} depths 0..{MAX_STAGES}",
    )
    assert [r["stages"] for r in records] == list(range(MAX_STAGES + 1))
    assert all(r["mismatches"] == 0 and r["vectors"] == r["corners"] + n_random for r in records)
