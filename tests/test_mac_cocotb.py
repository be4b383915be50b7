"""cocotb regression of the generated MAC Verilog on Verilator and Icarus.

Per simulator and configuration: the corner-case product (every special operand pairing) and
``random_per_dist`` random MACs from each of the five distributions (four per int8), with random
input gaps, compared bit for bit with the golden model. Default: 4,000 per distribution = 20,000
random MACs per format, subnormal mode and simulator; ``--soak`` multiplies that by 10.
"""

import json

import pytest

from hw.arith import MAC, MACConfig
from sim.runner import generate_verilog, run_cocotb
from verif.vectors import DISTRIBUTIONS

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
]
DEFAULT_PER_DIST = 4000


def _id(cfg):
    return f"{cfg.fmt}-{cfg.subnormals}-s{cfg.stages}"


@pytest.mark.cocotb
@pytest.mark.parametrize("cfg", CONFIGS, ids=_id)
def test_mac(cfg, simulator, seed, soak):
    per_dist = DEFAULT_PER_DIST * (10 if soak else 1)
    if cfg.stages != 2:
        per_dist //= 4  # extra depths: fewer vectors, same corner cases
    n_random = per_dist * (len(DISTRIBUTIONS) if cfg.fmt != "int8" else 1)
    if cfg.fmt == "int8":
        per_dist *= len(DISTRIBUTIONS)  # one distribution, same total
        n_random = per_dist
    verilog = generate_verilog(lambda: MAC(cfg), name="mac", key=cfg)
    env = {"MXU_TB_CONFIG": json.dumps({"fmt": cfg.fmt, "subnormals": cfg.subnormals, "stages": cfg.stages,
                                        "seed": seed, "random_per_dist": per_dist, "gaps": True})}
    result = run_cocotb([verilog], "mac", "verif.tb.mac_tb", simulator=simulator, env=env)
    n_tests = 1 + (len(DISTRIBUTIONS) if cfg.fmt != "int8" else 1)
    print(f"{simulator} {_id(cfg)}: {n_random} random MACs + corners, seed {seed}, "
          f"build {result.build_s:.1f} s, test {result.test_s:.1f} s")
    assert (result.passed, result.failed) == (n_tests, 0), result.log_tail()
