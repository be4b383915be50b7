"""cocotb testbench of :class:`verif.hdl.mac_depths.MACDepths`: every pipeline depth of one MAC
configuration on one input stream (the default suite runs it on Verilator; it has no
simulator-specific code).

Configuration comes from the environment variable ``MXU_TB_CONFIG``, a JSON object::

    {"fmt": "bf16", "subnormals": "ftz", "seed": 1234, "random": 1500}

The corner-case product (:func:`verif.vectors.corner_vectors`) and then ``random`` MACs
(:func:`verif.vectors.random_vectors`) go in one beat per cycle from cycle 0, back to back. Depth s
must show no result before cycle s, then the result of beat ``t - s`` in every cycle t, bit for bit
equal to the golden model (:func:`verif.vectors.expected_bits`). One line per depth goes to the JSON
lines file ``$MXU_TB_REPORT`` when it is set.
"""

from __future__ import annotations

import json
import os

import cocotb
import numpy as np
from cocotb.clock import Clock
from cocotb.triggers import FallingEdge, ReadOnly

from verif import checked
from verif.vectors import corner_vectors, expected_bits, pack_inputs, random_vectors

CFG = json.loads(os.environ.get("MXU_TB_CONFIG", "{}"))
FMT = CFG.get("fmt", "bf16")
SUB = CFG.get("subnormals", "ftz")
SEED = int(CFG.get("seed", 1))
RANDOM = int(CFG.get("random", 1500))
REPORT = os.environ.get("MXU_TB_REPORT")


@cocotb.test()
async def every_depth_on_one_stream(dut):
    """Corners and RANDOM random MACs through depths 0..MAX_STAGES: exact latency and bits."""
    depths = len(dut.o_valid)
    rng = np.random.default_rng(SEED)
    dut._log.info(f"seed={SEED} fmt={FMT} subnormals={SUB} depths 0..{depths - 1}")
    ca, cb, cc = corner_vectors(FMT)
    ra, rb, rc = random_vectors(FMT, RANDOM, rng)
    a, b, c = np.concatenate([ca, ra]), np.concatenate([cb, rb]), np.concatenate([cc, rc])
    payloads = pack_inputs(FMT, a, b, c)
    n = len(payloads)

    cocotb.start_soon(Clock(dut.clk, 10, unit="ns").start())
    dut.i_valid.value = 0
    dut.i_payload.value = 0
    dut.rst.value = 1
    for _ in range(2):
        await FallingEdge(dut.clk)
    dut.rst.value = 0

    got = [[] for _ in range(depths)]
    valid_log = []  # o_valid in each cycle
    for t in range(n + depths - 1):
        await FallingEdge(dut.clk)
        dut.i_valid.value = int(t < n)
        dut.i_payload.value = payloads[t] if t < n else 0
        await ReadOnly()
        valid = int(dut.o_valid.value)
        valid_log.append(valid)
        if valid:
            word = int(dut.o_payload.value)
            for s in range(depths):
                if valid >> s & 1:
                    got[s].append(word >> (32 * s) & 0xFFFFFFFF)

    exp = expected_bits(FMT, SUB, a, b, c)
    problems = []
    for s in range(depths):
        want = [int(t >= s and t - s < n) for t in range(len(valid_log))]
        seen = [v >> s & 1 for v in valid_log]
        if seen != want:
            first = next(t for t in range(len(seen)) if seen[t] != want[t])
            problems.append(f"depth {s}: o_valid is {seen[first]} in cycle {first}, expected {want[first]} "
                            f"(latency {s}, {n} beats from cycle 0)")
            continue
        res = np.array(got[s], dtype=np.uint32)
        bad = np.nonzero(res != exp)[0]
        checked.count(exp.size)
        if REPORT:
            with open(REPORT, "a") as f:
                f.write(json.dumps({"fmt": FMT, "subnormals": SUB, "stages": s, "vectors": int(exp.size),
                                    "corners": int(ca.size), "mismatches": int(bad.size), "seed": SEED}) + "\n")
        if bad.size:
            i = bad[0]
            problems.append(f"depth {s}: {bad.size} of {n} MACs differ; first a={int(a[i]):#x} b={int(b[i]):#x} "
                            f"c={int(c[i]):#010x} got {int(res[i]):#010x} expected {int(exp[i]):#010x}")
    assert not problems, "\n".join(problems)
