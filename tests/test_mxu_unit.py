"""Amaranth-simulator tests of the MXU (real PE submodules): bit-exact results and the cycle model
equal to the RTL cycle by cycle over many shapes, depths and tile mixes; stalls; config errors."""

import re

import numpy as np
import pytest
from amaranth import ResetInserter, Signal, Value
from amaranth.sim import Simulator

from hw.mxu import MXU, PRESETS, MXUConfig
from hw.pe import PEConfig
from verif.cycles import gemm_cycles, mxu_schedule, scalesim_ws_cycles
from verif.mxu_driver import MXUDriver
from verif.mxu_stim import act_beats, random_tile, tile_expected, weight_beats


def simulate(cfg: MXUConfig, tiles, rng=None, limit=20000, garbage_cycles=0):
    """Run tiles through the Amaranth model of the MXU with the shared stream driver.

    With ``garbage_cycles``: first drive that many cycles of random traffic (swap beats, weight
    beats, stalls), then assert the synchronous reset for one cycle; cycle 0 is the cycle after it.
    """
    drv = MXUDriver(
        cfg.cols,
        [b for t in tiles for b in weight_beats(cfg.fmt, t)],
        [b for t in tiles for b in act_beats(cfg.fmt, t)],
        rng=rng,
        swap_bit=cfg.rows * cfg.operand_bits + 32 * cfg.cols,
    )
    dut = MXU(cfg)
    reset = Signal()
    sim = Simulator(ResetInserter(reset)(dut))
    sim.add_clock(1e-8)

    async def tb(ctx):
        if garbage_cycles:
            junk = np.random.default_rng(7)
            for _ in range(garbage_cycles):
                ctx.set(dut.wgt.valid, 1)
                ctx.set(Value.cast(dut.wgt.payload), int(junk.integers(0, 2**31)))
                ctx.set(dut.act.valid, 1)
                ctx.set(Value.cast(dut.act.payload), int(junk.integers(0, 2**62)) | (1 << drv.swap_bit))
                ctx.set(dut.out.ready, int(junk.integers(0, 2)) if cfg.backpressure else 0)
                await ctx.tick()
            ctx.set(reset, 1)
            await ctx.tick()
            ctx.set(reset, 0)
        for cycle in range(limit):
            if drv.done:
                return
            d = drv.inputs(cycle)
            ctx.set(dut.wgt.valid, d.wgt_valid)
            ctx.set(Value.cast(dut.wgt.payload), d.wgt_payload)
            ctx.set(dut.act.valid, d.act_valid)
            ctx.set(Value.cast(dut.act.payload), d.act_payload)
            ctx.set(dut.out.ready, d.out_ready if cfg.backpressure else 0)  # ignored without back-pressure
            drv.observe(
                cycle,
                ctx.get(dut.wgt.ready),
                ctx.get(dut.act.ready),
                ctx.get(dut.out.valid),
                ctx.get(Value.cast(dut.out.payload)),
            )
            await ctx.tick()
        raise AssertionError(f"only {len(drv.outputs)} of {len(drv.act_beats)} outputs in {limit} cycles")

    sim.add_testbench(tb)
    sim.run()
    return drv


CASES = [
    # (rows, cols, fmt, subnormals, stages, tile lengths)
    (1, 1, "bf16", "ftz", 1, [1, 1, 3, 1]),
    (1, 1, "bf16", "ieee", 4, [2, 5]),
    (2, 3, "bf16", "ftz", 2, [4, 3, 5, 1, 12]),
    (3, 2, "bf16", "ieee", 3, [1, 20, 2]),
    (4, 4, "bf16", "ftz", 1, [16, 16, 16]),
    (1, 6, "int8", "ftz", 2, [3, 8, 1]),
    (6, 1, "fp8_e4m3fn", "ftz", 2, [9, 1, 30]),
    (3, 3, "fp8_e5m2", "ieee", 4, [7, 2]),
    (5, 4, "int8", "ftz", 3, [2, 40, 1, 6]),
    (6, 1, "bf16", "ftz", 4, [12, 12, 12, 16, 16]),  # commit gap (R-1)(L-1) = 15 is the bound
    (2, 3, "bf16", "ftz", 9, [5, 1, 9]),  # deepest MAC: "in" and "norm1" cuts
    (3, 2, "bf16", "ieee", 9, [4, 11]),
]


@pytest.mark.parametrize("rows,cols,fmt,subnormals,stages,tiles", CASES)
def test_model_equals_rtl(rows, cols, fmt, subnormals, stages, tiles, seed):
    """Every output beat bit-exact and in exactly the cycle mxu_schedule predicts."""
    cfg = MXUConfig(rows, cols, fmt, subnormals, stages)
    rng = np.random.default_rng(seed)
    ts = [random_tile(fmt, rows, cols, m, rng, specials=0.05) for m in tiles]
    drv = simulate(cfg, ts)
    exp = np.concatenate([tile_expected(t, fmt, subnormals) for t in ts])
    assert np.array_equal(drv.results(), exp)
    sched = mxu_schedule(rows, cols, stages, tiles)
    assert drv.output_cycles == sched.output_cycles
    assert drv.act_cycles == sched.act_cycles()
    assert drv.wgt_cycles == sched.weight_cycles(rows)


@pytest.mark.parametrize("rows,cols,fmt,subnormals,stages,tiles", [CASES[2], CASES[8], CASES[9], CASES[10]])
def test_without_backpressure_same_results_and_cycles(rows, cols, fmt, subnormals, stages, tiles, seed):
    """backpressure=False (no clock enable, out.ready ignored): with a consumer that takes every
    beat, the same bits in the same cycles as the model."""
    cfg = MXUConfig(rows, cols, fmt, subnormals, stages, backpressure=False)
    rng = np.random.default_rng(seed)
    ts = [random_tile(fmt, rows, cols, m, rng, specials=0.05) for m in tiles]
    drv = simulate(cfg, ts, garbage_cycles=11)
    assert np.array_equal(drv.results(), np.concatenate([tile_expected(t, fmt, subnormals) for t in ts]))
    sched = mxu_schedule(rows, cols, stages, tiles)
    assert drv.output_cycles == sched.output_cycles
    assert drv.act_cycles == sched.act_cycles() and drv.wgt_cycles == sched.weight_cycles(rows)


def test_reset_mid_tile_leaves_nothing_in_flight(seed):
    """Reset while swap/commit strobes, weights and results are in flight: afterwards the array
    behaves exactly as from power-up (results and every cycle as the model predicts)."""
    cfg = MXUConfig(4, 3, "bf16", "ftz", 2)
    rng = np.random.default_rng(seed)
    ts = [random_tile("bf16", 4, 3, m, rng) for m in (6, 2, 9)]
    drv = simulate(cfg, ts, garbage_cycles=23)
    assert np.array_equal(drv.results(), np.concatenate([tile_expected(t, "bf16", "ftz") for t in ts]))
    sched = mxu_schedule(4, 3, 2, [6, 2, 9])
    assert drv.output_cycles == sched.output_cycles and drv.wgt_cycles == sched.weight_cycles(4)


def test_random_stalls_and_gaps(seed):
    cfg = MXUConfig(3, 4, "bf16", "ieee", 2)
    rng = np.random.default_rng(seed)
    ts = [random_tile("bf16", 3, 4, m, rng, specials=0.05) for m in (5, 1, 9, 2)]
    drv = simulate(cfg, ts, rng=np.random.default_rng(seed + 1))
    assert np.array_equal(drv.results(), np.concatenate([tile_expected(t, "bf16", "ieee") for t in ts]))


def test_steady_state_is_back_to_back():
    """Tiles of M >= max(2R + C - 1, (R-1)(L-1) + 1) beats start exactly M cycles apart (no bubble),
    for every shape up to 12 x 12 and every depth; one beat fewer leaves a gap somewhere."""
    for r in range(1, 13):
        for c in range(1, 13):
            for lat in range(1, 5):
                m = max(2 * r + c - 1, max(1, (r - 1) * (lat - 1)) + 1)
                starts = [t.swap for t in mxu_schedule(r, c, lat, [m] * 5).tiles]
                assert all(b - a == m for a, b in zip(starts[1:], starts[2:])), (r, c, lat, starts)


def test_cycles_against_scalesim():
    """Against SCALE-Sim's serialized weight-stationary count:

    * two or more tiles with M >= 2R and PE latency L <= 2, or L = 1 and M >= R >= 4: fewer cycles
      (the next tile's weights load under the current tile);
    * a single tile: exactly R*(L-1) + 2 cycles more (nothing to hide; our PEs take L cycles where
      SCALE-Sim counts 1, plus one commit cycle and one output register).
    """
    for r, c, lat in [(4, 4, 1), (8, 8, 1), (8, 8, 2), (16, 16, 2), (3, 7, 2), (32, 32, 2), (4, 16, 1)]:
        ms = (2 * r, 8 * r) + ((r,) if lat == 1 and r >= 4 else ())
        for m in ms:
            for k, n in [(2 * r, c), (r, 3 * c), (4 * r, 2 * c)]:
                assert gemm_cycles(m, k, n, r, c, lat) < scalesim_ws_cycles(m, k, n, r, c), (r, c, lat, m, k, n)
            single = gemm_cycles(m, r, c, r, c, lat) - scalesim_ws_cycles(m, r, c, r, c)
            assert single == r * (lat - 1) + 2


@pytest.mark.parametrize(
    "kwargs,message,error",
    [
        ({"rows": 0}, "rows must be an integer from 1 to 1024; got 0", ValueError),
        ({"cols": -1}, "cols must be an integer from 1 to 1024; got -1", ValueError),
        ({"cols": 1366}, "cols must be an integer from 1 to 1024; got 1366", ValueError),
        ({"rows": 2.5}, "rows must be an integer from 1 to 1024; got 2.5", TypeError),
        ({"fmt": "fp16"}, "fmt must be one of bf16, fp8_e4m3fn, fp8_e5m2, int8; got 'fp16'", ValueError),
        ({"subnormals": "daz"}, "subnormals must be one of ftz, ieee; got 'daz'", ValueError),
        ({"stages": 0}, "stages must be an integer from 1 to 9; got 0", ValueError),
        ({"stages": 10}, "stages must be an integer from 1 to 9; got 10", ValueError),
        ({"backpressure": 1}, "backpressure must be True or False; got 1", TypeError),
        ({"multiplier": "dsp48"}, "multiplier must be one of generic, ecp5; got 'dsp48'", ValueError),
        (
            {"multiplier": "ecp5", "stages": 7},
            "multiplier='ecp5' makes the DSP block's output register the product register: it needs int8 with "
            "stages >= 1 or bf16 with stages >= 8; got fmt='bf16', stages=7",
            ValueError,
        ),
    ],
)
def test_config_errors(kwargs, message, error):
    """A value of the wrong type raises TypeError, a value out of range ValueError."""
    with pytest.raises(error) as e:
        MXUConfig(**kwargs)
    assert str(e.value) == message


def test_pe_config_errors():
    with pytest.raises(ValueError, match="fmt must be one of bf16, int8 inside a PE"):
        PEConfig("fp8_e4m3fn")


def test_the_weight_choice_after_the_products_is_refused_where_it_does_not_apply():
    """``b_choice`` (two registered products, chosen after their registers) exists for int8 in ECP5
    DSP blocks only; with the generic multiplier it would be ignored, so it is refused."""
    from amaranth import Module, Signal

    from hw.arith.mac import MACConfig, mac_datapath

    m = Module()
    a, b, c = Signal(8), Signal(8), Signal(32)
    choice = (Signal(), Signal(), Signal(8), Signal(8))
    with pytest.raises(ValueError) as e:
        mac_datapath(m, MACConfig("int8", "ftz", 2), a, b, c, None, b_choice=choice)
    assert str(e.value) == "b_choice is for int8 with multiplier='ecp5'; got int8 with 'generic'"
    mac_datapath(m, MACConfig("int8", "ftz", 2), a, b, c, None, multiplier="ecp5", b_choice=choice)


def test_preset_names_match_their_configs():
    """Each preset's name states its format, subnormal mode (when ieee) and R x C; a typo in the
    table would give a user something other than what the name promises."""
    tokens = {"int8": "int8", "bf16": "bf16", "fp8_e4m3fn": "fp8-e4m3", "fp8_e5m2": "fp8-e5m2"}
    for name, cfg in PRESETS.items():
        rows, cols = map(int, re.search(r"(\d+)x(\d+)$", name).groups())
        assert (rows, cols) == (cfg.rows, cfg.cols), name
        assert tokens[cfg.fmt] in name, name
        assert ("ieee" in name) == (cfg.subnormals == "ieee"), name


def test_int8_has_no_subnormal_mode():
    """int8 has no subnormals: "ieee" given reads "ftz", so the two spellings are one configuration
    (one cache entry, one report, one manifest), at every level."""
    from hw.arith import MACConfig

    assert MXUConfig(4, 4, "int8", "ieee") == MXUConfig(4, 4, "int8", "ftz")
    assert MXUConfig(4, 4, "int8", "ieee").subnormals == "ftz"
    assert PEConfig("int8", "ieee").subnormals == MACConfig("int8", "ieee").subnormals == "ftz"
    assert MXUConfig(4, 4, "bf16", "ieee").subnormals == "ieee"
    with pytest.raises(ValueError, match="subnormals"):
        MXUConfig(4, 4, "int8", "daz")
