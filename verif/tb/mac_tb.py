"""cocotb testbench of the generated MAC Verilog (runs under Verilator and Icarus).

Configuration comes from the environment variable ``MXU_TB_CONFIG``, a JSON object::

    {"fmt": "bf16", "subnormals": "ftz", "stages": 2, "seed": 1234, "random_per_dist": 4000,
     "gaps": true, "corners": true}

Ports (Amaranth names): ``i__payload`` = a | b << w | c << 2w (w = 16 for bf16, 8 otherwise),
```i__valid``, ``i__ready``, ``o__payload`` (32 bits), ``o__valid``, ``o__ready``, plus ``clk``/``rst``
when ``stages`` > 0.

Every result is compared bit for bit with :func:`verif.vectors.expected_bits` (the golden model); with
an always-ready consumer the output must appear exactly ``stages`` cycles after its input; under
random gaps and back-pressure nothing may be lost, duplicated, reordered or changed while stalled, and
``i__ready`` is exactly ``o__ready | ~o__valid`` (a stage holding no result never blocks its input).
"""

from __future__ import annotations

import json
import os
import time

import cocotb
import numpy as np
from cocotb.clock import Clock
from cocotb.triggers import FallingEdge, ReadOnly, Timer

from verif import checked
from verif.vectors import DISTRIBUTIONS, corner_vectors, expected_bits, pack_inputs, random_vectors

CFG = json.loads(os.environ.get("MXU_TB_CONFIG", "{}"))
FMT = CFG.get("fmt", "bf16")
SUB = CFG.get("subnormals", "ftz")
STAGES = int(CFG.get("stages", 0))
SEED = int(CFG.get("seed", 1))
PER_DIST = int(CFG.get("random_per_dist", 1000))
TOTAL = int(CFG["random_total"]) if "random_total" in CFG else None
GAPS = bool(CFG.get("gaps", True))
REPORT = os.environ.get("MXU_TB_REPORT")  # optional JSON-lines file: one record per test


def _report(**record) -> None:
    if REPORT:
        with open(REPORT, "a") as f:
            f.write(json.dumps({"fmt": FMT, "subnormals": SUB, "stages": STAGES, **record}) + "\n")


async def _stream(dut, payloads: list[int], rng: np.random.Generator | None) -> list[int]:
    """Send payloads through the stream ports and return the output payloads in order.

    With ``rng`` (and STAGES > 0; a combinational MAC has no pipeline to stall): random input gaps
    (15 %) and random back-pressure (``o__ready`` low 30 % of the cycles). Without: back-to-back beats,
    always ready, and each result must appear exactly STAGES
    cycles after its input. Always: no output without an input in flight, and a stalled output
    (``o__valid & ~o__ready``) keeps its payload until taken.
    """
    out: list[int] = []
    if STAGES == 0:
        dut.o__ready.value = 1
        for p in payloads:
            dut.i__payload.value = p
            dut.i__valid.value = 1
            await Timer(1, unit="ns")
            assert dut.o__valid.value == 1 and dut.i__ready.value == 1
            out.append(int(dut.o__payload.value.to_unsigned()))
        return out
    sent_at: list[int] = []
    held = None
    cycle = idx = 0
    limit = 50 * len(payloads) + 100
    while len(out) < len(payloads):
        assert cycle < limit, f"only {len(out)} of {len(payloads)} results after {cycle} cycles"
        await FallingEdge(dut.clk)
        give = idx < len(payloads) and (rng is None or rng.random() >= 0.15)
        dut.i__valid.value = int(give)
        if give:
            dut.i__payload.value = payloads[idx]
        ready = 1 if rng is None else int(rng.random() >= 0.3)
        dut.o__ready.value = ready
        await ReadOnly()
        o_valid = dut.o__valid.value == 1
        o_payload = int(dut.o__payload.value.to_unsigned()) if o_valid else None
        # the pipeline advances when its output is taken or empty: an input is taken then, and only then
        assert (dut.i__ready.value == 1) == (bool(ready) or not o_valid), (
            f"cycle {cycle}: i__ready {dut.i__ready.value} with o__valid {int(o_valid)}, o__ready {ready}")
        if held is not None:
            assert o_valid and o_payload == held, f"cycle {cycle}: stalled output changed"
        held = o_payload if (o_valid and not ready) else None
        if o_valid and ready:
            k = len(out)
            assert k < len(sent_at), f"o__valid at cycle {cycle} with no input in flight"
            if rng is None:
                assert cycle - sent_at[k] == STAGES, (
                    f"result {k} after {cycle - sent_at[k]} cycles, expected latency {STAGES}")
            out.append(o_payload)
        if give and dut.i__ready.value == 1:
            sent_at.append(cycle)
            idx += 1
        cycle += 1
    return out


async def _setup(dut):
    dut.i__valid.value = 0
    dut.i__payload.value = 0
    dut.o__ready.value = 1
    if STAGES:
        cocotb.start_soon(Clock(dut.clk, 10, unit="ns").start())
        dut.rst.value = 1
        for _ in range(2):
            await FallingEdge(dut.clk)
        dut.rst.value = 0
        # a pipeline holds nothing after reset: a beat offered now would be one nobody sent (a mutant
        # whose valid register reset to 1 passed every result check: its beat left before the first)
        await ReadOnly()
        assert dut.o__valid.value == 0, "o__valid high right after reset"
    else:
        await Timer(1, unit="ns")


def _check(dut, a, b, c, got: list[int], what: str, seconds: float) -> None:
    exp = expected_bits(FMT, SUB, a, b, c)
    got_a = np.array(got, dtype=np.uint64).astype(np.uint32)
    assert got_a.size == exp.size, f"{what}: {got_a.size} results for {exp.size} inputs"
    bad = np.nonzero(got_a != exp)[0]
    checked.count(exp.size)
    _report(test=what, vectors=int(exp.size), mismatches=int(bad.size), seconds=seconds,
            seed=SEED)
    for i in bad[:10]:
        dut._log.error(f"{what}: a={int(a[i]):#x} b={int(b[i]):#x} c={int(c[i]):#010x} "
                       f"got {int(got_a[i]):#010x} expected {int(exp[i]):#010x}")
    assert bad.size == 0, f"{what}: {bad.size} of {exp.size} MACs differ from the golden model"


@cocotb.test(skip=not CFG.get("corners", True))
async def corner_cases(dut):
    """Every pairing of special operands (+-0, subnormals, min/max normal, inf, qNaN/sNaN) and the
    fixed hard cases (ties, sticky, cancellation, overflow, underflow, the 2**-126 boundary)."""
    await _setup(dut)
    a, b, c = corner_vectors(FMT)
    t0 = time.perf_counter()
    got = await _stream(dut, pack_inputs(FMT, a, b, c), None)
    dt = time.perf_counter() - t0
    dut._log.info(f"{FMT}/{SUB}/stages={STAGES}: {a.size} corner MACs in {dt:.2f} s")
    _check(dut, a, b, c, got, "corner", dt)


@cocotb.test()
@cocotb.parametrize(dist=list(DISTRIBUTIONS) if FMT != "int8" else ["int8_uniform_and_wrap"])
async def random_macs(dut, dist):
    """PER_DIST random MACs from one distribution, with random input gaps; seed printed."""
    await _setup(dut)
    seed = SEED + sum(map(ord, dist))
    dut._log.info(f"seed={seed} (MXU_TB_CONFIG seed {SEED}, distribution {dist})")
    rng = np.random.default_rng(seed)
    count = PER_DIST
    if TOTAL is not None:  # an exact total split over the distributions
        names = list(DISTRIBUTIONS) if FMT != "int8" else [dist]
        i = names.index(dist)
        count = TOTAL // len(names) + (1 if i < TOTAL % len(names) else 0)
    if count == 0:
        return
    a, b, c = random_vectors(FMT, count, rng, None if FMT == "int8" else dist)
    t0 = time.perf_counter()
    got = await _stream(dut, pack_inputs(FMT, a, b, c), rng if GAPS else None)
    dt = time.perf_counter() - t0
    dut._log.info(f"{FMT}/{SUB}/stages={STAGES} {dist}: {a.size} MACs in {dt:.2f} s "
                  f"({a.size / dt:.0f} MAC/s)")
    _check(dut, a, b, c, got, dist, dt)
