"""cocotb testbench of the generated MXU Verilog (Verilator and Icarus).

``MXU_TB_CONFIG`` (JSON) holds the :class:`hw.mxu.MXUConfig` fields plus ``seed``, ``tiles`` (a list
of activation-beat counts M_t, one per weight tile), ``specials`` (fraction of NaN/inf/subnormal/zero
operands), optionally ``gemm`` = [M, K, N] and ``probe`` = [tiles per row, long tile beats]. ``MXU_TB_REPORT``
(optional) names a ``.npz`` file where the GEMM test stores its result bits, so a pytest can compare
array shapes.

Tests:

* ``tiles_back_to_back``: every stream always offered, consumer always ready: each output beat must
  be bit-exact with :func:`verif.golden.matmul` per tile **and** appear in exactly the cycle the
  cycle model (:func:`verif.cycles.mxu_schedule`) predicts.
* ``tiles_with_stalls``: random gaps on both input streams and random back-pressure: bit-exact,
  nothing lost or reordered, stalled outputs stable.
* ``mac_vectors``: MAC test vectors (special operands, cancellation, ties, aligned adds) put into
  single PEs by :func:`verif.mxu_stim.probe_tiles`, every row in turn, back to back: the PE
  datapath of every PE meets the stimulus of the MAC's own regression, not only sums of ordinary
  numbers; bit-exact.
* ``gemm``: an M x K x N GEMM split into padded tiles, K blocks chained through the partial-sum
  input, compared with the golden GEMM.
"""

from __future__ import annotations

import json
import os

import cocotb
import numpy as np
from cocotb.clock import Clock
from cocotb.triggers import FallingEdge, ReadOnly

from verif import checked
from verif.cycles import mxu_schedule
from verif.golden import matmul
from verif.mxu_driver import MXUDriver
from verif.mxu_stim import (
    act_beats,
    as_format,
    gemm_tiles_exact,
    pack_act,
    pack_wgt,
    probe_lengths,
    probe_tiles,
    random_tile,
    tile_expected,
    weight_beats,
)

CFG = json.loads(os.environ.get("MXU_TB_CONFIG", "{}"))
R, C, L = int(CFG.get("rows", 2)), int(CFG.get("cols", 2)), int(CFG.get("stages", 2))
FMT, SUB = CFG.get("fmt", "bf16"), CFG.get("subnormals", "ftz")
SEED = int(CFG.get("seed", 1))
TILES = [int(x) for x in CFG.get("tiles", [3, 5])]
SPECIALS = float(CFG.get("specials", 0.03))
GEMM = CFG.get("gemm")
PROBE = CFG.get("probe")
REPORT = os.environ.get("MXU_TB_REPORT")
SWAP_BIT = R * (16 if FMT == "bf16" else 8) + 32 * C


async def _reset(dut):
    cocotb.start_soon(Clock(dut.clk, 10, unit="ns").start())
    for s in ("wgt__valid", "act__valid", "wgt__payload", "act__payload"):
        getattr(dut, s).value = 0
    dut.out__ready.value = 1
    dut.rst.value = 1
    await FallingEdge(dut.clk)
    await FallingEdge(dut.clk)


async def _run(dut, drv: MXUDriver, limit: int) -> None:
    """Drive until every output arrived; cycle 0 is the first cycle out of reset."""
    cycle = 0
    first = True
    while not drv.done:
        assert cycle < limit, f"only {len(drv.outputs)} of {len(drv.act_beats)} outputs after {cycle} cycles"
        if not first:
            await FallingEdge(dut.clk)
        first = False
        dut.rst.value = 0
        d = drv.inputs(cycle)
        dut.wgt__valid.value = d.wgt_valid
        dut.wgt__payload.value = d.wgt_payload
        dut.act__valid.value = d.act_valid
        dut.act__payload.value = d.act_payload
        dut.out__ready.value = d.out_ready
        await ReadOnly()
        out_valid = int(dut.out__valid.value)
        drv.observe(
            cycle,
            int(dut.wgt__ready.value),
            int(dut.act__ready.value),
            out_valid,
            int(dut.out__payload.value.to_unsigned()) if out_valid else 0,
        )
        cycle += 1


def _tiles(rng):
    return [random_tile(FMT, R, C, m, rng, SPECIALS) for m in TILES]


def _check(dut, got: np.ndarray, exp: np.ndarray, what: str) -> None:
    assert got.shape == exp.shape, f"{what}: got {got.shape} results, expected {exp.shape}"
    bad = np.argwhere(got != exp)
    checked.count(exp.size)
    for i, c in bad[:8]:
        dut._log.error(f"{what}: beat {i} column {c}: got {int(got[i, c]):#010x} expected {int(exp[i, c]):#010x}")
    assert bad.shape[0] == 0, f"{what}: {bad.shape[0]} of {exp.size} results differ from the golden model"


@cocotb.test()
async def tiles_back_to_back(dut):
    """Bit-exact and cycle-exact (== cycle model) with weight swaps between tiles."""
    dut._log.info(f"seed={SEED} {R}x{C} {FMT}/{SUB} stages={L} tiles={TILES}")
    rng = np.random.default_rng(SEED)
    tiles = _tiles(rng)
    drv = MXUDriver(
        C,
        [b for t in tiles for b in weight_beats(FMT, t)],
        [b for t in tiles for b in act_beats(FMT, t)],
        swap_bit=SWAP_BIT,
    )
    await _reset(dut)
    sched = mxu_schedule(R, C, L, TILES)
    await _run(dut, drv, sched.total_cycles + 100)
    _check(dut, drv.results(), np.concatenate([tile_expected(t, FMT, SUB) for t in tiles]), "back-to-back")
    assert drv.output_cycles == sched.output_cycles, (
        f"output cycles {drv.output_cycles} differ from the cycle model {sched.output_cycles}"
    )
    assert drv.act_cycles == sched.act_cycles(), "activation accept cycles differ from the cycle model"
    assert drv.wgt_cycles == sched.weight_cycles(R), "weight accept cycles differ from the cycle model"
    dut._log.info(f"{sum(TILES)} beats in {sched.total_cycles} cycles, model == RTL")


@cocotb.test()
async def tiles_with_stalls(dut):
    """Random input gaps and output back-pressure: still bit-exact, in order, stalls hold."""
    rng = np.random.default_rng(SEED + 1)
    tiles = _tiles(rng)
    drv = MXUDriver(
        C,
        [b for t in tiles for b in weight_beats(FMT, t)],
        [b for t in tiles for b in act_beats(FMT, t)],
        rng=np.random.default_rng(SEED + 2),
        swap_bit=SWAP_BIT,
    )
    await _reset(dut)
    await _run(dut, drv, 20 * mxu_schedule(R, C, L, TILES).total_cycles + 200)
    _check(dut, drv.results(), np.concatenate([tile_expected(t, FMT, SUB) for t in tiles]), "stalls")


@cocotb.test(skip=PROBE is None)
async def mac_vectors(dut):
    """MAC stimulus in one PE row per tile (every row in turn), tiles of random and long lengths back
    to back: bit-exact, and every output in the cycle the cycle model predicts."""
    per_row, long = (int(x) for x in PROBE)
    rng = np.random.default_rng(SEED + 4)
    dut._log.info(f"seed={SEED + 4}: {per_row} probe tiles per row")
    lengths = probe_lengths(R, C, per_row, long, rng)
    tiles = probe_tiles(FMT, R, C, lengths, rng)
    drv = MXUDriver(C, [b for t in tiles for b in weight_beats(FMT, t)], [b for t in tiles for b in act_beats(FMT, t)],
                    swap_bit=SWAP_BIT)
    await _reset(dut)
    sched = mxu_schedule(R, C, L, lengths)
    await _run(dut, drv, sched.total_cycles + 100)
    _check(dut, drv.results(), np.concatenate([tile_expected(t, FMT, SUB) for t in tiles]), "mac vectors")
    assert drv.output_cycles == sched.output_cycles, "output cycles differ from the cycle model"
    dut._log.info(f"{len(tiles)} probe tiles, {sum(lengths) * C} MACs in probe PEs, {sched.total_cycles} cycles")


@cocotb.test(skip=GEMM is None)
async def gemm(dut):
    """A whole GEMM: K blocks chained through the partial-sum input, N blocks side by side."""
    m, k, n = GEMM
    rng = np.random.default_rng(SEED + 3)
    a = random_tile(FMT, k, n, m, rng, SPECIALS)  # a: (m, k), w: (k, n), c: (m, n)
    blocks = gemm_tiles_exact(FMT, a.a, a.w, R, C)
    acc = [a.c[:, nb * C : (nb + 1) * C] for nb in range(len(blocks[0]))]
    await _reset(dut)
    for kb, row in enumerate(blocks):
        wbeats, abeats = [], []
        for nb, (w_tile, a_tile) in enumerate(row):
            c_in = np.zeros((m, C), dtype=np.uint32)
            c_in[:, : acc[nb].shape[1]] = acc[nb]
            wbeats += [pack_wgt(FMT, w_tile[r]) for r in range(R - 1, -1, -1)]
            abeats += [pack_act(FMT, R, C, a_tile[i], c_in[i], i == 0) for i in range(m)]
        drv = MXUDriver(
            C, wbeats, abeats, rng=np.random.default_rng(SEED + 10 + kb), gap_p=0.1, stall_p=0.1, swap_bit=SWAP_BIT
        )
        await _run(dut, drv, 50 * len(abeats) + 50 * R * len(row) + 1000)
        res = drv.results()
        acc = [res[nb * m : (nb + 1) * m, : min(C, n - nb * C)] for nb in range(len(row))]
        await FallingEdge(dut.clk)
    got = np.concatenate(acc, axis=1)
    acc_view = a.c.view(np.int32) if FMT == "int8" else a.c.view(np.float32)
    exp = matmul(as_format(a.a, FMT), as_format(a.w, FMT), acc_view, fmt=FMT, subnormals=SUB).view(np.uint32)
    _check(dut, got, exp, f"gemm {m}x{k}x{n}")
    if REPORT:
        np.savez(REPORT, result=got, rows=R, cols=C)
    dut._log.info(f"gemm {m}x{k}x{n} on {R}x{C}: bit-exact")
