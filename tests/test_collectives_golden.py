"""The pod's golden model (``verif.golden.collectives``): the ring's reduction order, the fp32 add,
the shardings that must equal the single-engine GEMM bit for bit."""

from __future__ import annotations

import numpy as np
import pytest

from verif.golden import matmul, to_format
from verif.golden.collectives import all_gather, all_reduce, reduce_scatter, ring_order, sharded_matmul, split_sizes
from verif.golden.numerics import add
from verif.mxu_stim import _random_acc, _random_ops, as_format


def bits(x):
    return np.asarray(x, dtype=np.float32).view(np.uint32)


def test_split_sizes_and_ring_order():
    assert split_sizes(10, 4) == [3, 3, 2, 2]
    assert split_sizes(1, 4) == [1, 0, 0, 0]
    assert split_sizes(0, 3) == [0, 0, 0]
    with pytest.raises(ValueError, match="nodes must be >= 1; got 0"):
        split_sizes(5, 0)
    assert ring_order(0, 4) == [1, 2, 3, 0]
    assert ring_order(2, 4) == [3, 0, 1, 2]
    assert ring_order(0, 4, clockwise=False) == [3, 2, 1, 0]


def test_fp32_add_rounds_once_in_the_subnormal_mode():
    f = np.float32
    assert bits(add(f(1e8), f(1.0)))[()] == bits(f(1e8))[()]  # below half an ulp (8): RNE keeps 1e8
    assert bits(add(f(16777216.0), f(1.0)))[()] == 0x4B800000  # a tie to even: 2**24
    assert bits(add(f(-0.0), f(-0.0)))[()] == 0x80000000
    assert bits(add(f(0.0), f(-0.0)))[()] == 0x00000000
    assert bits(add(f(np.inf), f(-np.inf)))[()] == 0x7FC00000  # canonical NaN
    tiny = np.array([0x00400000], dtype=np.uint32).view(np.float32)  # a subnormal, 2**-127
    assert bits(add(tiny, tiny, subnormals="ftz"))[0] == 0  # read as +0
    assert bits(add(tiny, tiny, subnormals="ieee"))[0] == 0x00800000  # 2**-126
    big = np.array([0x00800000], dtype=np.uint32).view(np.float32)  # 2**-126
    half = np.array([0x80400000], dtype=np.uint32).view(np.float32)  # -2**-127
    assert bits(add(big, half, subnormals="ieee"))[0] == 0x00400000
    assert bits(add(big, half, subnormals="ftz"))[0] == 0x00800000  # -2**-127 read as -0


def test_reduce_scatter_adds_in_ring_order():
    """1e8, -1e8 and 1 on three nodes: the sum depends on the order. Chunk c starts on node c + 1
    and ends on node c: chunk 0 is (-1e8 + 1) + 1e8 = 0 (1 is lost against 1e8), chunk 1 is
    (1 + 1e8) - 1e8 = 0, chunk 2 is (1e8 - 1e8) + 1 = 1."""
    nodes = [np.full(3, v, dtype=np.float32) for v in (1e8, -1e8, 1.0)]
    out = reduce_scatter(nodes)
    assert [bits(x).tolist() for x in out] == [[0], [0], [0x3F800000]]
    assert bits(all_reduce(nodes)).tolist() == [0, 0, 0x3F800000]
    # counter-clockwise halves: chunk 0 (two rows) splits into one row each way
    nodes = [np.full(6, v, dtype=np.float32) for v in (1e8, -1e8, 1.0)]
    out = reduce_scatter(nodes, bidirectional=True)
    # chunk 0, row 0 clockwise [1, 2, 0]: 0; row 1 counter-clockwise [2, 1, 0]: (1 - 1e8) + 1e8 = 0
    # chunk 2, row 0 clockwise [0, 1, 2]: 1; row 1 counter-clockwise [1, 0, 2]: (-1e8 + 1e8) + 1 = 1
    # chunk 1, row 0 clockwise [2, 0, 1]: 0; row 1 counter-clockwise [0, 2, 1]: (1e8 + 1) - 1e8 = 0
    assert [bits(x).tolist() for x in out] == [[0, 0], [0, 0], [0x3F800000, 0x3F800000]]


def test_collectives_on_uneven_and_empty_chunks():
    rng = np.random.default_rng(4)
    for rows, n in ((7, 3), (1, 4), (0, 2), (5, 5), (2, 8)):
        nodes = [rng.standard_normal((rows, 3)).astype(np.float32) for _ in range(n)]
        out = reduce_scatter(nodes)
        assert [x.shape[0] for x in out] == split_sizes(rows, n)
        want = []
        for c, x in enumerate(out):  # the fold in ring order, by hand
            lo = sum(split_sizes(rows, n)[:c])
            order = ring_order(c, n)
            acc = nodes[order[0]][lo : lo + x.shape[0]]
            for node in order[1:]:
                acc = add(acc, nodes[node][lo : lo + x.shape[0]])
            want.append(acc)
        assert [bits(x).tolist() for x in out] == [bits(w).tolist() for w in want]
        assert all_gather(out).shape == (rows, 3)


def test_int32_reduction_wraps():
    nodes = [np.array([2**31 - 1, -(2**31)], dtype=np.int32), np.array([1, -1], dtype=np.int32)]
    assert all_reduce(nodes).tolist() == [-(2**31), 2**31 - 1]


def test_collective_input_errors():
    with pytest.raises(ValueError, match="at least one node"):
        reduce_scatter([])
    with pytest.raises(ValueError, match="node 1 holds"):
        reduce_scatter([np.zeros(2, np.float32), np.zeros(3, np.float32)])
    with pytest.raises(ValueError, match="float32 or int32"):
        reduce_scatter([np.zeros(2, np.float64)])
    a = to_format(np.ones((2, 2), np.float32), "bf16")
    with pytest.raises(ValueError, match="sharding must be one of dp, tp, fsdp, tp-k; got 'pp'"):
        sharded_matmul(a, a, devices=2, sharding="pp")
    with pytest.raises(ValueError, match="devices must be an int >= 1; got 0"):
        sharded_matmul(a, a, devices=0, sharding="dp")


@pytest.mark.parametrize("fmt", ["bf16", "fp8_e4m3fn", "int8"])
@pytest.mark.parametrize("devices", [2, 4])
def test_shardings_without_a_split_sum_are_the_single_engine_product(seed, fmt, devices):
    """dp, tp and fsdp cut no sum over K: bit-identical to ``matmul`` on odd shapes with specials
    (NaN, inf, subnormals, signed zeros) and an initial C, including more nodes than rows."""
    print(f"seed {seed}")
    rng = np.random.default_rng(seed)
    for m, k, n in ((7, 5, 3), (3, 9, 13), (1, 4, 2)):
        a = as_format(_random_ops(fmt, (m, k), rng, 0.1), fmt)
        b = as_format(_random_ops(fmt, (k, n), rng, 0.1), fmt)
        c = _random_acc(fmt, (m, n), rng, 0.1).view(np.int32 if fmt == "int8" else np.float32)
        for subnormals in ("ftz", "ieee") if fmt != "int8" else ("ftz",):
            want = matmul(a, b, c, fmt=fmt, subnormals=subnormals).view(np.uint32)
            for sharding in ("dp", "tp", "fsdp"):
                got = sharded_matmul(a, b, c, devices=devices, sharding=sharding, fmt=fmt, subnormals=subnormals)
                assert np.array_equal(got.view(np.uint32), want), (m, k, n, sharding, subnormals)


def test_tp_k_sums_the_partial_products_in_ring_order(seed):
    """Node i's partial product covers its slice of K (C0 on node 0, +0 elsewhere); row chunk c of
    the sum is folded by hand here in the documented order, node c + 1 first and node c last."""
    print(f"seed {seed}")
    rng = np.random.default_rng(seed)
    a = as_format(_random_ops("bf16", (6, 11), rng, 0.05), "bf16")
    b = as_format(_random_ops("bf16", (11, 5), rng, 0.05), "bf16")
    c = rng.standard_normal((6, 5)).astype(np.float32)
    for devices in (1, 3, 4):
        got = sharded_matmul(a, b, c, devices=devices, sharding="tp-k")
        ks = np.cumsum([0, *split_sizes(11, devices)])
        partials = [
            matmul(a[:, ks[i] : ks[i + 1]], b[ks[i] : ks[i + 1]], c if i == 0 else None) for i in range(devices)
        ]
        rows = np.cumsum([0, *split_sizes(6, devices)])
        want = []
        for chunk in range(devices):
            order = [(chunk + step) % devices for step in range(1, devices + 1)]
            acc = partials[order[0]][rows[chunk] : rows[chunk + 1]]
            for node in order[1:]:
                acc = add(acc, partials[node][rows[chunk] : rows[chunk + 1]])
            want.append(acc)
        assert np.array_equal(got.view(np.uint32), np.concatenate(want).view(np.uint32)), devices
    one = sharded_matmul(a, b, c, devices=1, sharding="tp-k")
    assert np.array_equal(one.view(np.uint32), matmul(a, b, c).view(np.uint32))  # one node: nothing to add


def test_after_collective_writes_only_chunk_r_on_a_reduce_scatter():
    """Node r's rows outside chunk r keep their bits; chunk r is the reduce-scatter's."""
    from verif.golden.collectives import after_collective

    x = [np.full((5, 2), float(k + 1), np.float32) for k in range(2)]
    out = after_collective("reduce_scatter", x)
    assert out[0].tolist() == [[3, 3], [3, 3], [3, 3], [1, 1], [1, 1]]
    assert out[1].tolist() == [[2, 2], [2, 2], [2, 2], [3, 3], [3, 3]]
    with pytest.raises(ValueError, match="op must be one of"):
        after_collective("broadcast", x)
