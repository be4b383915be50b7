"""The blocks ``mxu mutate`` can mutate, each with the regression that judges its mutants.

A block's regression is the cocotb testbench and configuration of its default pytest tests
(``tests/test_*_cocotb.py``), with a fixed seed so every mutant meets the same stimulus, split into
runs ordered cheapest first: a killed mutant stops at its first failing run.
"""

from __future__ import annotations

import json
from collections.abc import Callable

from sim.mutate import Target, TestRun

__all__ = ["BLOCKS", "target"]


def _rtlil(make: Callable[[], object], name: str) -> Callable[[], tuple[str, str]]:
    """The design as Amaranth RTLIL with source locations (each cell knows its Python line)."""

    def design() -> tuple[str, str]:
        import os

        from amaranth.back import rtlil

        os.environ.setdefault("AMARANTH_USE_YOSYS", "builtin")
        return "rtlil", rtlil.convert(make(), name=name, emit_src=True)

    return design


def _mac(options: dict, seed: int) -> Target:
    """The MAC: ``tests/test_mac_cocotb.py::test_mac``'s bench (every special pairing, then 20,000
    random MACs over the distributions with random gaps and back-pressure)."""
    from hw.arith import MAC, MACConfig

    cfg = MACConfig(**{"fmt": "bf16", "subnormals": "ftz", "stages": 2, **options})
    base = {"fmt": cfg.fmt, "subnormals": cfg.subnormals, "stages": cfg.stages, "seed": seed, "gaps": True}
    runs = (
        TestRun(
            "corner_cases",
            "verif.tb.mac_tb",
            {"MXU_TB_CONFIG": json.dumps({**base, "random_total": 0})},
            testcase="corner_cases",
        ),
        TestRun(
            "random_macs",
            "verif.tb.mac_tb",
            {"MXU_TB_CONFIG": json.dumps({**base, "random_total": 20000, "corners": False})},
        ),
    )
    return Target(
        "mac",
        "mac",
        _rtlil(lambda: MAC(cfg), "mac"),
        runs,
        config={"fmt": cfg.fmt, "subnormals": cfg.subnormals, "stages": cfg.stages},
    )


def _pe(options: dict, seed: int) -> Target:
    """One PE (default bf16, FTZ, 2 stages): ``tests/test_pe_cocotb.py::test_pe``'s bench, every MAC
    corner vector with its weight streamed through the weight registers, then 20,000 random MACs
    under random strobes and random cycles with ``en`` low, every output checked every cycle."""
    from hw.pe import PE, PEConfig

    cfg = PEConfig(**{"fmt": "bf16", "subnormals": "ftz", "stages": 2, **options})
    base = {"fmt": cfg.fmt, "subnormals": cfg.subnormals, "stages": cfg.stages, "seed": seed}
    runs = (
        TestRun("corner_cases", "verif.tb.pe_tb", {"MXU_TB_CONFIG": json.dumps({**base, "random_total": 0})},
                testcase="corner_cases"),
        TestRun("random_macs", "verif.tb.pe_tb",
                {"MXU_TB_CONFIG": json.dumps({**base, "random_total": 20000, "corners": False})},
                testcase="random_macs"),
    )
    return Target("pe", "pe", _rtlil(lambda: PE(cfg), "pe"), runs,
                  config={"fmt": cfg.fmt, "subnormals": cfg.subnormals, "stages": cfg.stages})


def _mxu(options: dict, seed: int) -> Target:
    """The MXU (default 8x8 bf16, 2 stages): ``tests/test_mxu_cocotb.py``'s bench, four tiles of random
    lengths back to back and with stalls (``test_mxu_tiles``), the 24 x 40 x 24 GEMM
    (``test_same_gemm_on_three_shapes``, on this shape), then MAC test vectors in every PE
    (``test_mxu_tiles``'s ``mac_vectors``)."""
    import numpy as np

    from hw.mxu import MXU, MXUConfig
    from verif.mxu_stim import mxu_probe

    cfg = MXUConfig(**{"rows": 8, "cols": 8, **options})
    r = np.random.default_rng(seed)
    tiles = [int(r.integers(1, 3 * cfg.rows + cfg.cols + 4)) for _ in range(4)]
    base = {**cfg.as_dict(), "seed": seed, "specials": 0.03}
    tiles_env = {"MXU_TB_CONFIG": json.dumps({**base, "tiles": tiles})}
    runs = (
        TestRun("tiles_back_to_back", "verif.tb.mxu_tb", tiles_env, testcase="tiles_back_to_back"),
        TestRun("tiles_with_stalls", "verif.tb.mxu_tb", tiles_env, testcase="tiles_with_stalls"),
        TestRun(
            "gemm_24x40x24",
            "verif.tb.mxu_tb",
            {"MXU_TB_CONFIG": json.dumps({**base, "tiles": [2], "gemm": [24, 40, 24]})},
            testcase="gemm",
        ),
        TestRun(
            "mac_vectors",
            "verif.tb.mxu_tb",
            {"MXU_TB_CONFIG": json.dumps({**base, "probe": list(mxu_probe(cfg.fmt))})},
            testcase="mac_vectors",
        ),
    )
    # The whole array in one Amaranth hierarchy (not the PE and row modules of mxu_verilog): its RTLIL
    # keeps every cell's Python line; flattened, a mutation changes one PE of the R x C.
    from hw.pe import PE

    return Target("mxu", "mxu", _rtlil(lambda: MXU(cfg), "mxu"), runs, config=cfg.as_dict(),
                  parts=((r"row_\d+\.\\pe_\d+\.", "pe", _rtlil(lambda: PE(cfg.pe), "pe")),))


def _hbm_channel(options: dict, seed: int) -> Target:
    """One HBM2 pseudo-channel controller in the stress configuration of
    ``tests/test_hbm_cocotb.py::test_stress_same_commands_as_amaranth`` (:data:`verif.hbm_sim.STRESS`:
    64 rows of 8 columns, queue 8, Ramulator2 timings with refresh every 400 cycles, 2 REFs postponed at
    most, age cap 32): every one of its traffic parts (:data:`verif.hbm_sim.STRESS_TRAFFIC`) under the fatal
    JEDEC checker, each command at the Amaranth model's cycle."""
    from hw.hbm.controller import PseudoChannelController
    from verif.hbm_sim import STRESS, STRESS_TRAFFIC, traffic_reference

    cfg = STRESS
    runs = []
    for part, (traffic, fixed_seed, gap_p, stall_p) in STRESS_TRAFFIC.items():
        s = seed if fixed_seed is None else fixed_seed
        # the Amaranth model's run of the same traffic, as the test compares it
        ref = traffic_reference(cfg, traffic, s, gap_p=gap_p, stall_p=stall_p, max_cycles=400_000)
        runs.append(TestRun(part, "verif.tb.hbm_tb", {"HBM_TB_CONFIG": json.dumps({
            "config": cfg.as_dict(), "max_cycles": 400_000, "seed": s, "traffic": traffic, "gap_p": gap_p,
            "stall_p": stall_p, "expect_cycles": ref["cycles"], "expect_trace": ref["trace_digest"]})}))
    from hw.hbm.bank_timing import BankTiming
    from hw.hbm.read_path import ReadResponsePath
    from hw.hbm.refresh import RefreshTimer
    from hw.hbm.request_queue import RequestQueue
    from hw.hbm.scheduler import CommandScheduler
    from hw.hbm.write_path import WriteDataPath

    # the controller's components, each judged alone when a survivor sits in it
    parts = tuple((rf"{name}\.", name, _rtlil(lambda c=cls: c(cfg), name)) for name, cls in (
        ("queue", RequestQueue), ("banks", BankTiming), ("refresh", RefreshTimer), ("scheduler", CommandScheduler),
        ("write_path", WriteDataPath), ("read_path", ReadResponsePath)))
    return Target("hbm-channel", "hbm_pc", _rtlil(lambda: PseudoChannelController(cfg), "hbm_pc"), tuple(runs),
                  parts=parts,
                  config={"queue_depth": 8, "rows": 64, "columns": 8, "timing": "RAMULATOR2_HBM2",
                          "tRFC": cfg.timing.tRFC, "tREFI": cfg.timing.tREFI,
                          "max_refresh_postpone": cfg.max_refresh_postpone, "age_cap_cycles": cfg.age_cap_cycles})


#: block name -> (what it is for --help, the option names it takes, the target factory)
BLOCKS: dict[str, tuple[str, tuple[str, ...], Callable[[dict, int], Target]]] = {
    "mac": ("one MAC (multiply, fp32 add)", ("fmt", "subnormals", "stages"), _mac),
    "pe": ("one PE (weight registers and MAC)", ("fmt", "subnormals", "stages"), _pe),
    "mxu": ("the systolic array (default 8x8)", ("rows", "cols", "fmt", "subnormals", "stages"), _mxu),
    "hbm-channel": ("one HBM2 pseudo-channel controller (small geometry, queue 8, refresh and age stress)", (),
                    _hbm_channel),
}


def target(block: str, options: dict, seed: int) -> Target:
    """The :class:`~sim.mutate.Target` of ``block`` with configuration ``options`` (the keys its
    entry in :data:`BLOCKS` names) and regression seed ``seed``.

    Raises:
        ValueError: unknown block, an option the block does not take, or a bad configuration value.
        TypeError: a configuration value of the wrong type.
    """
    if block not in BLOCKS:
        raise ValueError(f"block must be one of {', '.join(BLOCKS)}; got {block!r}")
    _, keys, make = BLOCKS[block]
    extra = sorted(set(options) - set(keys))
    if extra:
        raise ValueError(f"{', '.join(extra)} does not apply to block {block} (it takes {', '.join(keys)})")
    return make(options, seed)
