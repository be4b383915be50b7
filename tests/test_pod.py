"""The pod (``hw.pod.top.PodTop``) running sharded GEMMs in the Amaranth simulator, each node's memory
a checked behavioural AXI4 memory: every sharding bit for bit against
``verif.golden.collectives.sharded_matmul`` (and, where no sum is split, against the single-engine
``matmul``), with specials, C0, odd shapes, an absent slot, bit flips on the links."""

from __future__ import annotations

import numpy as np
import pytest

from hw.engine import EngineConfig
from hw.ici.config import ICIConfig
from hw.pod.config import PodConfig
from verif.golden import matmul
from verif.golden.collectives import all_reduce, sharded_matmul
from verif.mxu_stim import _random_acc, _random_ops, as_format
from verif.pod_host import PER_NODE, assemble, collective_payload_beats, plan_matmul, plan_per_node
from verif.pod_sim import run_pod_amaranth


def pod(fmt="bf16", nodes=3, absent=(), **link):
    """A pod of 2 x 2 engines with small buffers (many m-blocks and groups in a small GEMM)."""
    eng = EngineConfig.from_options(rows=2, cols=2, fmt=fmt, m_block=8, acc_entries=16, a_buffer_bytes=256)
    return PodConfig(
        engine=eng, nodes=nodes, absent=absent, link=ICIConfig(**{"beat_bytes": 8, "rx_packets": 16, **link})
    )


def operands(rng, fmt, m, k, n, specials=0.05):
    a = as_format(_random_ops(fmt, (m, k), rng, specials), fmt)
    b = as_format(_random_ops(fmt, (k, n), rng, specials), fmt)
    c = _random_acc(fmt, (m, n), rng, specials).view(np.int32 if fmt == "int8" else np.float32)
    return a, b, c


def run_and_check(cfg, a, b, c, sharding, seed, *, bidirectional=False, flip_p=0.0):
    fmt, sub = cfg.engine.mxu.fmt, cfg.engine.mxu.subnormals
    plan = plan_matmul(cfg, a, b, c, sharding, bidirectional=bidirectional)
    res = run_pod_amaranth(cfg, plan, seed=seed, flip_p=flip_p)
    want = sharded_matmul(
        a, b, c, devices=len(cfg.live), sharding=sharding, fmt=fmt, subnormals=sub, bidirectional=bidirectional
    ).view(np.uint32)
    got = assemble(plan, res["results"]).view(np.uint32)
    bad = np.argwhere(got != want)
    assert bad.size == 0, f"seed {seed}: {len(bad)} elements differ, first at {tuple(bad[0])}"
    if sharding == "tp-k":  # every node holds all of C
        for k, r in enumerate(res["results"]):
            assert np.array_equal(r.view(np.uint32), want), f"seed {seed}: node {k}'s copy of C differs"
    else:  # no sum split: the single engine's bits
        assert np.array_equal(want, matmul(a, b, c, fmt=fmt, subnormals=sub).view(np.uint32))
    return res


@pytest.mark.parametrize(
    "sharding,nodes,fmt,absent,bidirectional",
    [
        ("dp", 2, "bf16", (), False),
        ("dp", 4, "fp8_e5m2", (), False),
        ("tp", 2, "bf16", (), False),
        ("tp", 4, "int8", (), False),
        ("fsdp", 2, "bf16", (), True),
        ("fsdp", 4, "fp8_e4m3fn", (), False),
        ("tp-k", 2, "int8", (), False),
        ("tp-k", 5, "bf16", (2,), True),
    ],
)
def test_pod_sharding_is_bit_exact(sharding, nodes, fmt, absent, bidirectional, seed):
    """Each sharding on 2 and 4 nodes, 7 x 9 x 5 with 5 % specials and C0: bit-exact. fsdp all-gathers
    fp8 rows of 5 bytes (no multiple of 4); the 5-slot pod has slot 2 absent, so its ring of 4 closes
    around it; the engines' GEMM and the collectives report their cycles."""
    rng = np.random.default_rng(seed)
    cfg = pod(fmt, nodes, absent)
    a, b, c = operands(rng, fmt, 7, 9, 5)
    res = run_and_check(cfg, a, b, c, sharding, seed, bidirectional=bidirectional)
    assert len(res["gemm_cycles"]) == len(cfg.live) and min(res["gemm_cycles"]) > 0
    expect_collectives = {"dp": 0, "tp": 0, "fsdp": 1, "tp-k": 1}[sharding]
    assert all(len(x) == expect_collectives for x in res["collective_cycles"])


def test_pod_tp_k_survives_bit_flips(seed):
    """tp-k on 3 nodes with 5 % of every link's beats corrupted: C is still bit-exact on every node,
    and the links counted the CRC errors and the replays that repaired them."""
    rng = np.random.default_rng(seed)
    cfg = pod("bf16", 3)
    a, b, c = operands(rng, "bf16", 12, 6, 9)
    res = run_and_check(cfg, a, b, c, "tp-k", seed, bidirectional=True, flip_p=0.05)
    assert res["links"]["crc_errors"] > 0 and res["links"]["replays"] > 0, res["links"]


def test_per_node_plan_all_reduces_each_nodes_own_product(seed):
    """plan_per_node on 2 nodes (the data-parallel gradient step): node 0 computes A_0 @ B_0 + C0
    with K = 3, node 1 A_1 @ B_1 with K = 5 (5 % specials), then the collective engines all-reduce
    the 5 x 3 products: every node holds the golden ring sum of the golden products, bit for bit."""
    rng = np.random.default_rng(seed)
    cfg = pod("bf16", 2)
    a0, b0, c0 = operands(rng, "bf16", 5, 3, 3)
    a1, b1, _ = operands(rng, "bf16", 5, 5, 3)
    plan = plan_per_node(cfg, [(a0, b0, c0), (a1, b1, None)], after="all_reduce")
    assert (plan.sharding, plan.shape) == (PER_NODE, (5, 8, 3))
    assert [nd.gemm for nd in plan.nodes] == [(5, 3, 3), (5, 5, 3)]
    res = run_pod_amaranth(cfg, plan, seed=seed)
    want = all_reduce([matmul(a0, b0, c0), matmul(a1, b1)]).view(np.uint32)
    for r, got in enumerate(res["results"]):
        bad = np.argwhere(got.view(np.uint32) != want)
        assert bad.size == 0, f"seed {seed}: node {r}: {len(bad)} elements differ, first at {tuple(bad[0])}"
    assert np.array_equal(assemble(plan, res["results"]).view(np.uint32), want)
    assert [len(x) for x in res["collective_cycles"]] == [1, 1] and min(res["gemm_cycles"]) > 0
    # 5 rows of 12 bytes (one HBM beat, 4 link beats of 8 bytes each), chunks of 3 and 2 rows: each
    # node sends one chunk's partial sum (reduce-scatter) and its finished chunk (all-gather), 10 rows
    assert collective_payload_beats(cfg, plan) == (2 + 3 + 3 + 2) * 4


def test_per_node_plan_refuses_bad_input():
    cfg = pod("bf16", 2)
    a, b = np.zeros((3, 4), np.float32), np.zeros((4, 2), np.float32)
    with pytest.raises(ValueError, match="one product per live node: 2 nodes, 1 products"):
        plan_per_node(cfg, [(a, b, None)])
    with pytest.raises(ValueError, match="node 1: A is 3 x 4 but B is 5 x 2: K differs"):
        plan_per_node(cfg, [(a, b, None), (a, np.zeros((5, 2), np.float32), None)])
    with pytest.raises(ValueError, match="node 1: the product is 3 x 3; node 0's is 3 x 2"):
        plan_per_node(cfg, [(a, b, None), (a, np.zeros((4, 3), np.float32), None)])
    with pytest.raises(ValueError, match="node 0: C0 is 2 x 2; the product is 3 x 2"):
        plan_per_node(cfg, [(a, b, np.zeros((2, 2), np.float32)), (a, b, None)])
    with pytest.raises(ValueError, match="after must be None or one of all_gather, reduce_scatter, all_reduce"):
        plan_per_node(cfg, [(a, b, None), (a, b, None)], after="sum")
    with pytest.raises(ValueError, match="K must be an integer from 1 to 1048575; got 0"):
        plan_per_node(cfg, [(a, b, None), (a[:, :0], b[:0], None)])
    with pytest.raises(ValueError, match="a per-node plan without an all-reduce leaves one result per node"):
        assemble(plan_per_node(cfg, [(a, b, None), (a, b, None)]), [np.zeros((3, 2), np.float32)] * 2)


def test_pod_plan_refuses_bad_input():
    cfg = pod("bf16", 4)
    a, b = np.zeros((3, 5), np.float32), np.zeros((5, 6), np.float32)
    with pytest.raises(ValueError, match="--devices 4 is more than M = 3, the dimension dp shards"):
        plan_matmul(cfg, a, b, None, "dp")
    with pytest.raises(ValueError, match="--devices 4 is more than K = 3, the dimension tp-k shards"):
        plan_matmul(cfg, np.zeros((8, 3), np.float32), np.zeros((3, 6), np.float32), None, "tp-k")
    with pytest.raises(ValueError, match="sharding must be one of dp, tp, fsdp, tp-k; got 'pp'"):
        plan_matmul(cfg, a, b, None, "pp")
    with pytest.raises(ValueError, match="A is 3 x 5 but B is 4 x 6: K differs"):
        plan_matmul(cfg, a, np.zeros((4, 6), np.float32), None, "tp")


def test_pod_config_errors():
    with pytest.raises(ValueError, match=r"absent must be a tuple of slots 0 .. 3; got \(4,\)"):
        PodConfig(nodes=4, absent=(4,))
    with pytest.raises(ValueError, match="absent leaves no node of 2"):
        PodConfig(nodes=2, absent=(0, 1))
    with pytest.raises(ValueError, match="nodes must be an integer from 1 to 16; got 0"):
        PodConfig(nodes=0)
    with pytest.raises(TypeError, match="engine must be an EngineConfig"):
        PodConfig(engine="8x8")
    assert PodConfig(nodes=8, absent=(3,)).live == (0, 1, 2, 4, 5, 6, 7)
    assert PodConfig(nodes=5).collective.max_nodes == 8


def test_mxu_pod_matmul_end_to_end(tmp_path, capsys, monkeypatch):
    """``mxu pod matmul`` in Verilator on 3 slots with slot 1 absent, fsdp, bf16 with a C0: exit 0,
    C.npy equal to the golden product, the JSON names the ring, every node's GEMM and its all-gather.
    The pod is test_pod_with_hbm_controllers_is_bit_exact's (one build), and the single-engine
    reference runs on its first node: no second build."""
    import json

    from ml_dtypes import bfloat16

    from sim.cli import main

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("MXU_PROGRESS", "0")
    rng = np.random.default_rng(7)
    a = rng.standard_normal((5, 6)).astype(bfloat16).astype(np.float32)
    b = rng.standard_normal((6, 3)).astype(bfloat16).astype(np.float32)
    c = rng.standard_normal((5, 3)).astype(np.float32)
    for name, x in (("a", a), ("b", b), ("c", c)):
        np.save(f"{name}.npy", x)
    argv = ["pod", "matmul", "a.npy", "b.npy", "--c", "c.npy", "-o", "c_out.npy", "--devices", "3", "--absent", "1"]
    argv += ["--sharding", "fsdp", "--rows", "2", "--cols", "2", "--pseudo-channels", "1", "--sim", "verilator"]
    rc = main(argv)
    out, err = capsys.readouterr()
    assert rc == 0, err
    rep = json.loads(out)
    assert (rep["devices"], rep["slots"], rep["absent"], rep["bitexact"], rep["mismatches"]) == (2, 3, [1], True, 0)
    assert len(rep["gemm_cycles"]) == 2 and [len(x) for x in rep["collective_cycles"]] == [1, 1]
    # each node sends its 3 rows of B, one 32-byte HBM beat each (4 link beats of 8 bytes)
    assert rep["collective_payload_beats"] == 2 * 3 * 4 and 0 < rep["link_utilization"] <= 1
    # the RTL's cycles, exact; the single-engine reference (148) ran on slot 0 of the same netlist
    assert (rep["gemm_cycles"], rep["collective_cycles"], rep["phase_cycles"]) == (
        [107, 100],
        [[195], [189]],
        [199, 109],
    )
    assert (rep["pod_cycles"], rep["single_engine_cycles"], rep["scaling_efficiency"]) == (308, 148, 0.2403)
    want = matmul(a.astype(bfloat16), b.astype(bfloat16), c).view(np.uint32)
    assert np.array_equal(np.load("c_out.npy").view(np.uint32), want)


def test_stored_rows_cover_every_plan_given():
    """The device models store as many DRAM rows as the largest plan needs (a power of two from 256,
    16 KB per row with one pseudo-channel): a 1100 x 2048 bf16 A is 4.3 MB on one node (512 rows)
    and 2.2 MB per node when dp splits it (256), so the CLI's shared netlist takes 512; a run given
    fewer rows than its plan needs is refused before any build."""
    from ml_dtypes import bfloat16

    from sim.pod import run_pod, stored_rows
    from verif.pod_host import plan_single

    cfg = PodConfig(engine=EngineConfig.from_options(rows=2, cols=2, pseudo_channels=1), nodes=3, absent=(1,))
    a, b = np.zeros((1100, 2048), bfloat16), np.zeros((2048, 8), bfloat16)
    sharded, single = plan_matmul(cfg, a, b, None, "dp"), plan_single(cfg, a, b, None)
    assert (stored_rows(cfg, sharded), stored_rows(cfg, single), stored_rows(cfg, sharded, single)) == (256, 512, 512)
    with pytest.raises(ValueError, match="rows 256 is too few for the plan: it needs 512"):
        run_pod(cfg, single, rows=256)


def test_single_engine_plan_runs_on_one_node_of_the_pod(seed):
    """``plan_single`` (``mxu pod matmul``'s single-engine reference) runs the whole GEMM on the first
    live node of the sharded run's pod, the others idle: its result is the golden product and its
    cycles are those of a one-node pod, exactly (the nodes share nothing during a GEMM)."""
    from verif.pod_host import plan_single

    rng = np.random.default_rng(seed)
    cfg = pod("bf16", 2, absent=(0,))
    a, b, c = operands(rng, "bf16", 5, 6, 3)
    plan = plan_single(cfg, a, b, c)
    assert [(nd.slot, nd.rank, nd.gemm) for nd in plan.nodes] == [(1, 0, (5, 6, 3))]
    res = run_pod_amaranth(cfg, plan, seed=seed)
    one = run_pod_amaranth(pod("bf16", 1), plan_matmul(pod("bf16", 1), a, b, c, "dp"), seed=seed)
    assert res["gemm_cycles"] == one["gemm_cycles"] and len(res["results"]) == 1
    assert np.array_equal(res["results"][0].view(np.uint32), matmul(a, b, c).view(np.uint32))


@pytest.mark.cocotb
@pytest.mark.parametrize("simulator", ["verilator", "icarus"], indirect=True)
def test_pod_with_hbm_controllers_is_bit_exact(simulator, seed):
    """The pod with every node's HBM controller, HDL device model and JEDEC checker in the netlist
    (``sim.pod.run_pod``), on 3 slots with slot 1 absent: tp-k (bidirectional all-reduce) with 10 %
    of the links' beats corrupted, then fsdp (all-gather of B), 5 % specials and C0; bit-exact,
    no JEDEC violation (the bench fails on one), and the links repaired the corrupted packets. On
    Icarus this also checks ``sim.icarus.wake_comb_processes``: without it the ICI transmitter's
    ``flit.valid`` stayed X and the all-reduce hung."""
    from sim.pod import run_pod

    rng = np.random.default_rng(seed)
    eng = EngineConfig.from_options(rows=2, cols=2, pseudo_channels=1)
    cfg = PodConfig(engine=eng, nodes=3, absent=(1,))
    a, b, c = operands(rng, "bf16", 7, 9, 5)
    for sharding, flip_p in (("tp-k", 0.1), ("fsdp", 0.0)):
        plan = plan_matmul(cfg, a, b, c, sharding, bidirectional=True)
        res = run_pod(cfg, plan, sim=simulator, flip_p=flip_p, seed=seed)
        want = sharded_matmul(a, b, c, devices=2, sharding=sharding, bidirectional=True).view(np.uint32)
        got = assemble(plan, res["results"]).view(np.uint32)
        assert np.array_equal(got, want), f"seed {seed}: {sharding}: {int((got != want).sum())} elements differ"
        assert min(res["gemm_cycles"]) > 0 and all(len(x) == 1 for x in res["collective_cycles"])
        if flip_p:
            assert res["links"]["crc_errors"] > 0 and res["links"]["replays"] > 0, res["links"]
