"""cocotb regression of one generated PE on Verilator and Icarus: every MAC corner vector with its
weight streamed through the PE's weight registers, then 20,000 random MACs (``--soak``: 200,000)
under random shift, commit and swap strobes and random cycles with ``en`` low; every output in
every cycle against the PE's cycle model (``verif/tb/pe_tb.py``). A PE whose swap multiplies the
wrong weight register must fail it."""

import json

import pytest

from hw.pe import PE, PEConfig
from sim.runner import generate_verilog, run_cocotb
from tests.test_mxu_cocotb import ran_and_passed

CONFIGS = [
    PEConfig("bf16", "ftz", 2),
    PEConfig("bf16", "ieee", 1),
    PEConfig("bf16", "ftz", 9),
    PEConfig("int8", "ftz", 2),
    # the ECP5 DSP block's output register as the product register (its simulation model)
    PEConfig("int8", "ftz", 2, "ecp5"),
    PEConfig("bf16", "ieee", 8, "ecp5"),
]


def run_pe(verilog, cfg: PEConfig, simulator: str, seed: int, random_total: int, lookahead: bool = False):
    conf = {
        "fmt": cfg.fmt,
        "subnormals": cfg.subnormals,
        "stages": cfg.stages,
        "seed": seed,
        "random_total": random_total,
        "lookahead": lookahead,
    }
    result = run_cocotb([verilog], "pe", "verif.tb.pe_tb", simulator=simulator, env={"MXU_TB_CONFIG": json.dumps(conf)})
    print(f"{simulator} {cfg}: seed {seed}, build {result.build_s:.1f} s, test {result.test_s:.1f} s")
    return result


@pytest.mark.cocotb
@pytest.mark.parametrize("lookahead", [False, True], ids=["mux", "lookahead"])
@pytest.mark.parametrize("cfg", CONFIGS, ids=lambda c: f"{c.fmt}-{c.subnormals}-s{c.stages}-{c.multiplier}")
def test_pe(cfg, lookahead, simulator, seed, soak):
    """Both ways of choosing the weight (the strap ``lookahead``): the same build, two runs."""
    verilog = generate_verilog(lambda: PE(cfg), name="pe", key=cfg)
    result = run_pe(verilog, cfg, simulator, seed, 200_000 if soak else 20_000, lookahead)
    assert result.failed == 0, result.log_tail()
    assert ran_and_passed(result) == {"corner_cases", "random_macs"}, result.log_tail()


@pytest.mark.cocotb
@pytest.mark.parametrize("simulator", ["verilator"], indirect=True)
def test_pe_bench_rejects_a_wrong_weight(simulator, seed, monkeypatch):
    """A broken PE whose swap beat is multiplied by ``active`` (the old tile's weight) instead of
    ``shadow``: both tests must fail."""
    import hw.pe

    cfg = PEConfig("bf16", "ftz", 2)
    real_mux = hw.pe.Mux
    monkeypatch.setattr(hw.pe, "Mux", lambda sel, a, b: real_mux(sel, b, b))
    verilog = generate_verilog(lambda: PE(cfg), name="pe", key=("swap-uses-active", cfg))
    result = run_pe(verilog, cfg, simulator, seed, 2000)
    assert result.failed == 2, result.log_tail()
