"""``mxu pod demo``: the digits MLP on a pod, inference tensor-parallel (Megatron) and data-parallel
training, every GEMM checked bit for bit.

The first tests replace the pod RTL (``sim.pod.run_pod``) by the golden model of each plan (every
node's ``verif.golden.matmul`` of its loads, then the plan's collective with
``verif.golden.collectives.after_collective``), so the demo's host side, its summary, JSON and exit
status are checked in seconds; the last runs the whole demo on the pod RTL in Verilator.
"""

from __future__ import annotations

import json
import re

import numpy as np
import pytest

from sim import pod_demo
from sim.cli import main
from verif.golden import matmul
from verif.golden.collectives import after_collective


def golden_pod(flip=None):
    """A stand-in for ``sim.pod.run_pod`` computing each node's result with the golden model;
    ``flip``: (phase index, node) whose result gets its lowest bit flipped."""
    calls = []

    def run_pod(cfg, plan, *, sim="verilator", **kwargs):
        fmt, sub = cfg.engine.mxu.fmt, cfg.engine.mxu.subnormals
        out = []
        for nd in plan.nodes:
            a, b, *c = (x for _, _, x in nd.loads)
            out.append(matmul(a, b, c[0] if c else None, fmt=fmt, subnormals=sub))
        ops = [x[0] for x in plan.nodes[0].after]
        for op in ops:
            out = [x.copy() for x in after_collective(op, out, subnormals=sub, bidirectional=plan.bidirectional)]
        if flip is not None and flip[0] == len(calls):
            out[flip[1]].view(np.uint32)[0, 0] ^= 1
        calls.append(plan.sharding)
        n = len(plan.nodes)
        return {
            "results": out,
            "gemm_cycles": [100 + r for r in range(n)],
            "collective_cycles": [[50] * len(ops) for _ in range(n)],
            "phase_cycles": [110] + [60] * len(ops),
            "links": {"replays": 0, "crc_errors": 0},
            "sim_cycles": 200,
            "build_s": 0.0,
            "cached_build": True,
            "wall_s": 0.5,
        }

    return run_pod, calls


def test_training_images_is_the_split_of_load_data():
    from sim.demo_mlp import load_data

    assert pod_demo.training_images() == len(load_data(0)[0]) == 1437


def test_config_check_refuses_bad_input():
    cfg = pod_demo.PodDemoConfig
    assert len(cfg(devices=4, absent=(2,)).check().live) == 3
    for kwargs, message in [
        ({"fmt": "int8"}, "the MLP runs float formats (bf16, fp8_e4m3fn, fp8_e5m2), not int8"),
        ({"steps": -1}, "--steps must be >= 0; got -1"),
        ({"lr": 0.0}, "--lr must be above 0; got 0.0"),
        ({"batch": 1438}, "--batch must be 1 .. 1437 (the training images); got 1438"),
        ({"batch": 0}, "--batch must be 1 .. 1437 (the training images); got 0"),
        ({"devices": 4, "batch": 3}, "--devices 4 is more than the minibatch of 3 images"),
        ({"devices": 4, "hidden": 3}, "--devices 4 is more than the 3 hidden units"),
        ({"devices": 17}, "nodes must be an integer from 1 to 16; got 17"),
        ({"devices": 2, "absent": (2,)}, "absent must be a tuple of slots 0 .. 1; got (2,)"),
    ]:
        with pytest.raises(ValueError, match=re.escape(message)):
            cfg(**kwargs).check()
    # inference alone needs no minibatch row per node
    assert len(cfg(devices=4, batch=3, steps=0).check().live) == 4


def test_demo_on_a_golden_pod(tmp_path, monkeypatch, capsys):
    """The demo's host side with the golden model in place of the RTL: 3 slots with slot 1 absent, 2
    steps of 8 images. Every plan is the one the demo describes (tp, tp-k, then per step dp, dp,
    per-node all-reduce, dp, per-node all-reduce, then tp, tp-k), the JSON's counts are exact, and
    the RTL's accuracy is the golden model's."""
    import sim.pod

    run_pod, calls = golden_pod()
    monkeypatch.setattr(sim.pod, "run_pod", run_pod)
    monkeypatch.setenv("MXU_PROGRESS", "0")
    args = ["pod", "demo", "--devices", "3", "--absent", "1", "--steps", "2", "--batch", "8", "-o", str(tmp_path / "d")]
    assert main([*args, "--json"]) == 0
    s = json.loads(capsys.readouterr().out)
    assert s == json.loads((tmp_path / "d" / "summary.json").read_text())
    step = ["dp", "dp", "per-node", "dp", "per-node"]
    assert calls == ["tp", "tp-k", *step, *step, "tp", "tp-k"]
    assert [(p["part"], p["phase"]) for p in s["phases"][:7]] == [
        ("inference", "layer 1"),
        ("inference", "layer 2"),
        ("step 1", "forward layer 1"),
        ("step 1", "forward layer 2"),
        ("step 1", "dW2 all-reduce"),
        ("step 1", "dH"),
        ("step 1", "dW1 all-reduce"),
    ]
    assert [p["node_gemms"] for p in s["phases"][:7]] == [
        [[360, 64, 16], [360, 64, 16]],
        [[360, 16, 10], [360, 16, 10]],
        [[4, 64, 32], [4, 64, 32]],
        [[4, 32, 10], [4, 32, 10]],
        [[32, 4, 10], [32, 4, 10]],
        [[4, 10, 32], [4, 10, 32]],
        [[64, 4, 32], [64, 4, 32]],
    ]
    assert [p["collective"] for p in s["phases"][:7]] == [
        None,
        "all_reduce",
        None,
        None,
        "all_reduce",
        None,
        "all_reduce",
    ]
    # layer 1 360 x 32, layer 2's logits on both nodes, per step 8 x 32 + 8 x 10 + 2 x 32 x 10 + 8 x 32 + 2 x 64 x 32
    assert s["results_checked"] == 2 * (360 * 32 + 2 * 360 * 10) + 2 * (256 + 80 + 640 + 256 + 4096) == 48096
    assert (s["bitexact"], s["nodes_agree"], s["mismatches"], s["runs"]) == (True, True, 0, 14)
    assert s["hidden_split"] == [16, 16] and s["training"]["batch_split"] == [4, 4]
    assert s["config"]["devices"] == 2 and s["config"]["slots"] == 3 and s["config"]["absent"] == [1]
    # the stand-in's cycles: GEMM phases 110 each, one collective phase of 60 after every all-reduce
    assert (s["gemm_cycles"], s["collective_cycles"], s["pod_cycles"]) == (14 * 110, 6 * 60, 14 * 110 + 6 * 60)
    assert s["cycles_by_part"]["training"] == {"pod_cycles": 10 * 110 + 4 * 60, "gemm_cycles": 1100,
                                               "collective_cycles": 240, "runs": 10}  # fmt: skip
    assert s["inference"]["rtl_correct"] == 350 and s["inference"]["reference_correct"] == 349
    assert [st["step"] for st in s["training"]["steps"]] == [1, 2] and s["after_training"]["images"] == 360
    # the collectives' payload: 5,760 link beats for the logits (360 rows of 40 bytes, 2 HBM beats each)
    assert s["phases"][1]["collective_payload_beats"] == 360 * 2 * 4 * 2
    assert s["phases"][1]["link_utilization"] == round(5760 / (60 * 2), 4)
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "  result        PASS: bit-exact" in out and "2 nodes (3 slots, slot 1 absent)" in out


def test_demo_exits_1_when_a_node_differs(tmp_path, monkeypatch, capsys):
    """One flipped bit in node 1's copy of the all-reduced dW1 (the 7th run): exit 1, summary.json
    written, the phase says which node differs."""
    import sim.pod

    run_pod, _ = golden_pod(flip=(6, 1))
    monkeypatch.setattr(sim.pod, "run_pod", run_pod)
    monkeypatch.setenv("MXU_PROGRESS", "0")
    rc = main(["pod", "demo", "--devices", "2", "--steps", "1", "--batch", "8", "-o", str(tmp_path / "d")])
    out = capsys.readouterr().out
    assert rc == 1 and "  result        FAIL: not bit-exact" in out
    s = json.loads((tmp_path / "d" / "summary.json").read_text())
    bad = [p for p in s["phases"] if not p["bitexact"]]
    assert [(p["phase"], p["mismatches"], p["nodes_differ"]) for p in bad] == [("dW1 all-reduce", 1, [1])]
    assert (s["bitexact"], s["mismatches"]) == (False, 1)


@pytest.mark.cocotb
@pytest.mark.parametrize("simulator", ["verilator"], indirect=True)
def test_pod_demo_on_the_rtl(simulator, tmp_path, monkeypatch, capsys):
    """``mxu pod demo`` end to end on the pod RTL in Verilator, small: 3 slots of 2 x 2 engines with
    slot 1 absent (the pod of test_pod_with_hbm_controllers_is_bit_exact: one build for both), one
    training step of 8 images. Exit 0, every phase bit-exact, every node the same logits, the cycles
    exact. Verilator only: Icarus runs the same pod in test_pod, and the 360-image layers take
    minutes there."""
    monkeypatch.setenv("MXU_PROGRESS", "0")
    out_dir = tmp_path / "d"
    rc = main(
        ["pod", "demo", "--devices", "3", "--absent", "1", "--rows", "2", "--cols", "2", "--steps", "1", "--batch", "8"]
        + ["--sim", simulator, "-o", str(out_dir), "--json"]
    )
    out, err = capsys.readouterr()
    assert rc == 0, err
    s = json.loads(out)
    assert set(s) == {
        "config", "model", "data", "hidden_split", "inference", "training", "after_training", "phases", "bitexact",
        "nodes_agree", "results_checked", "mismatches", "pod_cycles", "gemm_cycles", "collective_cycles",
        "gemm_share", "collective_share", "cycles_by_part", "runs", "sim_cycles", "sim_wall_s", "build_s",
        "cached_build", "wall_s", "report",
    }  # fmt: skip
    assert s["bitexact"] is True and s["nodes_agree"] is True and s["mismatches"] == 0
    assert all(p["bitexact"] for p in s["phases"]) and s["runs"] == len(s["phases"]) == 9
    assert s["results_checked"] == 2 * (360 * 32 + 2 * 360 * 10) + 256 + 80 + 640 + 256 + 4096
    assert s["config"]["sim"] == simulator and (s["config"]["rows"], s["config"]["cols"]) == (2, 2)
    assert s["inference"]["rtl_correct"] == 350 and s["inference"]["reference_correct"] == 349
    # the RTL's cycles, exact: layer 2's node 0 loads b2 as C0, node 1 starts from +0
    assert [p["pod_cycles"] for p in s["phases"]] == [93073, 19711, 2340, 504, 1001, 478, 4361, 93073, 19711]
    assert [p["gemm_cycles"] for p in s["phases"]][:2] == [[93068, 93068], [15298, 14813]]
    colls = [p["collective_cycles"] for p in s["phases"] if p["collective"]]
    assert colls == [[[4407], [4118]], [[520], [520]], [[1737], [1737]], [[4407], [4118]]]
    for p in s["phases"]:
        assert min(p["gemm_cycles"]) > 0 and p["pod_cycles"] == sum(p["phase_cycles"])
        if p["collective"]:
            assert [len(x) for x in p["collective_cycles"]] == [1, 1] and 0 < p["link_utilization"] <= 1
    assert s["pod_cycles"] == s["gemm_cycles"] + s["collective_cycles"] == sum(p["pod_cycles"] for p in s["phases"])
    assert json.loads((out_dir / "summary.json").read_text()) == s
