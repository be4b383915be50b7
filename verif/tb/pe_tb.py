"""cocotb testbench of one generated PE (:class:`hw.pe.PE`), Verilator and Icarus.

``MXU_TB_CONFIG`` (JSON): ``fmt`` ("bf16" or "int8"), ``subnormals``, ``stages``, ``seed``,
``random_total`` (random MACs, default 20,000), ``corners`` (default true), ``gaps`` (cycles with
``en`` low, default true), ``lookahead`` (default false: the strap's value; when true, ``swap_next``
carries the swap bit of the next enabled cycle, and random values in cycles with ``en`` low).

The PE has no handshake: every input is driven every cycle and every output is checked every cycle
against a cycle model of the PE written from its specification (``hw/pe.py``'s docstring), with the
MAC results from :func:`verif.vectors.expected_bits`:

* the weight registers: ``transport`` takes ``w_in`` on ``w_shift``, ``shadow`` takes ``transport``
  on ``commit_in``, ``active`` takes ``shadow`` on ``swap_in``; the weight multiplied is ``shadow``
  when ``swap_in`` is high, else ``active``; ``w_out`` is ``transport``;
* ``a_out``, ``swap_out`` and ``commit_out`` are their inputs one enabled cycle later;
* ``psum_out`` is ``psum_in + a_in * weight`` (one rounding) exactly ``stages`` enabled cycles later,
  and holds while ``en`` is low;
* nothing moves while ``en`` is low, whatever the other inputs do.

Tests:

* ``corner_cases``: every MAC corner vector (:func:`verif.vectors.corner_vectors`) with its weight
  streamed through the chain (shift, commit and swap every cycle: the weight used is ``w_in`` of
  two cycles earlier);
* ``random_macs``: random MACs from every distribution with random shift, commit and swap strobes,
  so the weight in use comes from either register at random times.
"""

from __future__ import annotations

import json
import os

import cocotb
import numpy as np
from cocotb.clock import Clock
from cocotb.triggers import FallingEdge

from verif import checked
from verif.vectors import corner_vectors, expected_bits, random_vectors, special_operands

CFG = json.loads(os.environ.get("MXU_TB_CONFIG", "{}"))
FMT = CFG.get("fmt", "bf16")
SUB = CFG.get("subnormals", "ftz")
STAGES = int(CFG.get("stages", 2))
SEED = int(CFG.get("seed", 1))
TOTAL = int(CFG.get("random_total", 20000))
GAPS = bool(CFG.get("gaps", True))
LOOKAHEAD = bool(CFG.get("lookahead", False))
_INPUTS = ("en", "a_in", "swap_in", "psum_in", "w_in", "w_shift", "commit_in", "swap_next")


def _with_gaps(edges: dict[str, np.ndarray], rng: np.random.Generator | None) -> dict[str, np.ndarray]:
    """Per-cycle inputs from per-enabled-edge inputs: with ``rng``, 20 % extra cycles with ``en`` low
    and random values on every other input (which the PE must ignore)."""
    n = edges["a_in"].size
    if rng is None:
        return {"en": np.ones(n, np.uint8), **edges}
    extra = rng.geometric(0.8, n) - 1  # idle cycles before each enabled edge
    total = n + int(extra.sum())
    pos = np.arange(n) + np.cumsum(extra)
    cyc = {"en": np.zeros(total, np.uint8)}
    cyc["en"][pos] = 1
    for k, v in edges.items():
        noise = rng.integers(0, 1 << (8 * v.itemsize), total, dtype=np.uint64).astype(v.dtype)
        if k in ("swap_in", "w_shift", "commit_in", "swap_next"):
            noise &= 1
        noise[pos] = v
        cyc[k] = noise
    return cyc


def _model(cyc: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Expected outputs after each cycle's clock edge (index k: the values seen in cycle k + 1), from
    the per-cycle inputs; ``psum_out`` is -1 until ``stages`` enabled edges have passed."""
    n = cyc["en"].size
    transport = shadow = active = 0
    a_out = swap_out = commit_out = 0
    out = {k: np.zeros(n, np.int64) for k in ("a_out", "swap_out", "commit_out", "w_out", "psum_idx")}
    ops_a, ops_w, ops_c = [], [], []
    enabled = 0
    for k in range(n):
        if cyc["en"][k]:
            swap, commit, shift = int(cyc["swap_in"][k]), int(cyc["commit_in"][k]), int(cyc["w_shift"][k])
            ops_w.append(shadow if swap else active)
            ops_a.append(int(cyc["a_in"][k]))
            ops_c.append(int(cyc["psum_in"][k]))
            active = shadow if swap else active
            shadow = transport if commit else shadow
            transport = int(cyc["w_in"][k]) if shift else transport
            a_out, swap_out, commit_out = int(cyc["a_in"][k]), swap, commit
            enabled += 1
        out["a_out"][k], out["swap_out"][k], out["commit_out"][k], out["w_out"][k] = (
            a_out, swap_out, commit_out, transport)
        out["psum_idx"][k] = enabled - STAGES  # which enabled edge's MAC psum_out shows
    dt = np.uint16 if FMT == "bf16" else np.uint8
    res = expected_bits(FMT, SUB, np.array(ops_a, dt), np.array(ops_w, dt), np.array(ops_c, np.uint32))
    out["psum_out"] = np.where(out["psum_idx"] >= 0, res[np.maximum(out["psum_idx"], 0)].astype(np.int64), -1)
    out["macs"] = np.array([len(ops_a)])
    return out


def _read(handle) -> int:
    v = handle.value
    return v.to_unsigned() if hasattr(v, "to_unsigned") else int(v)  # a 1-bit port reads as Logic


async def _run(dut, cyc: dict[str, np.ndarray], what: str) -> None:
    exp = _model(cyc)
    cocotb.start_soon(Clock(dut.clk, 10, unit="ns").start())
    for name in _INPUTS:
        getattr(dut, name).value = 0
    dut.lookahead.value = int(LOOKAHEAD)
    dut.rst.value = 1
    await FallingEdge(dut.clk)
    await FallingEdge(dut.clk)
    dut.rst.value = 0
    n = cyc["en"].size
    cols = {name: cyc[name].tolist() for name in _INPUTS}
    checks = ("a_out", "swap_out", "commit_out", "w_out")
    want = {k: exp[k].tolist() for k in (*checks, "psum_out")}
    bad = 0
    for k in range(n):
        for name in _INPUTS:
            getattr(dut, name).value = cols[name][k]
        # the rising edge of cycle k has passed half a period ago: the outputs show its effect and
        # are read before the next cycle's inputs are driven (no output depends on an input)
        await FallingEdge(dut.clk)
        for name in checks:
            got = _read(getattr(dut, name))
            if got != want[name][k]:
                bad += 1
                if bad <= 10:
                    dut._log.error(f"{what}: after cycle {k}: {name} = {got:#x}, expected {want[name][k]:#x}")
        if want["psum_out"][k] >= 0:
            got = _read(dut.psum_out)
            if got != want["psum_out"][k]:
                bad += 1
                if bad <= 10:
                    i = int(exp["psum_idx"][k])
                    dut._log.error(f"{what}: after cycle {k}: psum_out = {got:#010x}, expected "
                                   f"{want['psum_out'][k]:#010x} (MAC {i})")
    checked.count(n * len(checks) + int((exp["psum_out"] >= 0).sum()))
    assert bad == 0, f"{what}: {bad} output mismatches in {n} cycles"
    dut._log.info(f"{what}: {int(exp['macs'][0])} MACs in {n} cycles, every output as the model says")


def _edges(a, w_in, c, shift, commit, swap) -> dict[str, np.ndarray]:
    dt = np.uint16 if FMT == "bf16" else np.uint8
    swap = np.asarray(swap, np.uint8)
    # the look-ahead promise: swap_next is the next enabled edge's swap_in (without the strap the
    # PE ignores it: then it is random)
    nxt = np.append(swap[1:], 0) if LOOKAHEAD else np.random.default_rng(SEED + 2).integers(0, 2, swap.size)
    return {"a_in": np.asarray(a, dt), "w_in": np.asarray(w_in, dt), "psum_in": np.asarray(c, np.uint32),
            "w_shift": np.asarray(shift, np.uint8), "commit_in": np.asarray(commit, np.uint8),
            "swap_in": swap, "swap_next": nxt.astype(np.uint8)}


@cocotb.test(skip=not CFG.get("corners", True))
async def corner_cases(dut):
    """Every MAC corner vector, its weight streamed through transport -> shadow -> use."""
    rng = np.random.default_rng(SEED)
    dut._log.info(f"seed={SEED} {FMT}/{SUB} stages={STAGES} lookahead={LOOKAHEAD}")
    a, b, c = corner_vectors(FMT)
    n = a.size + 2
    ones = np.ones(n, np.uint8)
    # edge j multiplies the w_in of edge j - 2: a and c lag two edges behind their weight
    pad = lambda x: np.concatenate([np.zeros(2, x.dtype), x])  # noqa: E731
    w_in = np.concatenate([b, np.zeros(2, b.dtype)])
    await _run(dut, _with_gaps(_edges(pad(a), w_in, pad(c), ones, ones, ones), rng if GAPS else None), "corners")


@cocotb.test(skip=TOTAL == 0)
async def random_macs(dut):
    """Random MACs (every distribution) with random shift, commit and swap strobes."""
    rng = np.random.default_rng(SEED + 1)
    dut._log.info(f"seed={SEED + 1} {FMT}/{SUB} stages={STAGES} lookahead={LOOKAHEAD}: {TOTAL} random MACs")
    a, b, c = random_vectors(FMT, TOTAL, rng)
    w_in = np.where(rng.random(TOTAL) < 0.3, rng.choice(special_operands(FMT), TOTAL), b)
    strobes = [(rng.random(TOTAL) < p).astype(np.uint8) for p in (0.6, 0.5, 0.4)]
    await _run(dut, _with_gaps(_edges(a, w_in, c, *strobes), rng if GAPS else None), "random")
