"""Golden collectives on a ring of N nodes and the sharded GEMM of a pod, with the reduction order
the pod's collective engines use.

Shards and chunks follow ``numpy.array_split`` along axis 0: part i of an axis of length L has
``L // N + (1 if i < L % N else 0)`` rows, the larger parts first; a part may be empty.

**Reduction order (ring reduce-scatter).** Every node holds an array of the same shape, cut into N
chunks; chunk c ends on node c. Its partial sum starts on node c + 1 and travels once round the
ring, each node adding its own chunk to what it received: ``x[c+1] + x[c+2]``, then
``+ x[c+3]``, ..., then ``+ x[c]`` last (node indices mod N), each addition one RNE rounding to fp32
(:func:`~verif.golden.numerics.add`, in the configuration's subnormal mode) or an int32 wrap-around
addition for int8. On the bidirectional ring each chunk is split once more: its first
``ceil(rows / 2)`` rows travel clockwise as above, the rest counter-clockwise (start on node
c - 1, then c - 2, ..., node c last). Floating-point addition is not associative, so a sum over
nodes is defined by this order, not by ``numpy.sum``.
"""

from __future__ import annotations

import numpy as np

from .matmul import matmul
from .numerics import add

__all__ = ["split_sizes", "ring_order", "reduce_scatter", "all_gather", "all_reduce", "sharded_matmul",
           "SHARDINGS", "after_collective"]

#: the pod's shardings of C = A @ B (+ C0): ``dp`` A by rows (the batch; B on every node), ``tp`` B
#: by columns (each node a vertical slice of the weights; C comes out by columns), ``fsdp`` B stored
#: by rows and all-gathered before the product, A by rows, ``tp-k`` A by columns and B by rows (each
#: node a partial product over its slice of K, summed by reduce-scatter and all-gather)
SHARDINGS = ("dp", "tp", "fsdp", "tp-k")


def split_sizes(length: int, n: int) -> list[int]:
    """Rows of each of ``n`` parts of ``length`` rows (``numpy.array_split``).

    Raises:
        ValueError: ``n`` < 1 or ``length`` < 0.
    """
    if n < 1:
        raise ValueError(f"the number of nodes must be >= 1; got {n}")
    if length < 0:
        raise ValueError(f"length must be >= 0; got {length}")
    return [length // n + (1 if i < length % n else 0) for i in range(n)]


def ring_order(chunk: int, n: int, clockwise: bool = True) -> list[int]:
    """The nodes whose parts of chunk ``chunk`` are added, in order: from the node after ``chunk``
    round the ring to ``chunk`` itself (clockwise: ``chunk + 1, chunk + 2, ...``; counter-clockwise:
    ``chunk - 1, chunk - 2, ...``)."""
    step = 1 if clockwise else -1
    return [(chunk + step * k) % n for k in range(1, n + 1)]


def _fold(parts: list[np.ndarray], order: list[int], subnormals: str) -> np.ndarray:
    acc = parts[order[0]].copy()
    for node in order[1:]:
        if acc.dtype == np.int32:
            acc = ((acc.astype(np.int64) + parts[node].astype(np.int64) + 2**31) % 2**32 - 2**31).astype(np.int32)
        else:
            acc = add(acc, parts[node], subnormals=subnormals)
    return acc


def _check(arrays: list[np.ndarray]) -> None:
    if not arrays:
        raise ValueError("a collective needs at least one node")
    first = arrays[0]
    for i, x in enumerate(arrays):
        if x.shape != first.shape or x.dtype != first.dtype:
            raise ValueError(f"node {i} holds {x.dtype} {x.shape}; node 0 holds {first.dtype} {first.shape}")
        if x.dtype not in (np.float32, np.int32):
            raise ValueError(f"collectives add float32 or int32 arrays; got {x.dtype}")


def reduce_scatter(arrays: list[np.ndarray], *, subnormals: str = "ftz",
                   bidirectional: bool = False) -> list[np.ndarray]:
    """Ring reduce-scatter: node c ends with chunk c (rows :func:`split_sizes` along axis 0) of the sum
    of every node's array, added in :func:`ring_order` (module docstring).

    Args:
        arrays: one float32 or int32 array per node, all of one shape.
        subnormals: "ftz" or "ieee" (float32 only).
        bidirectional: split each chunk into a clockwise and a counter-clockwise half.

    Raises:
        ValueError: no node, or arrays of different shapes or dtypes, or another dtype.
    """
    _check(arrays)
    n = len(arrays)
    sizes = split_sizes(arrays[0].shape[0], n)
    bounds = np.cumsum([0, *sizes])
    out = []
    for c in range(n):
        parts = [x[bounds[c]:bounds[c + 1]] for x in arrays]
        if not bidirectional:
            out.append(_fold(parts, ring_order(c, n), subnormals))
            continue
        half = -(-sizes[c] // 2)
        cw = _fold([p[:half] for p in parts], ring_order(c, n), subnormals)
        ccw = _fold([p[half:] for p in parts], ring_order(c, n, clockwise=False), subnormals)
        out.append(np.concatenate([cw, ccw]))
    return out


def all_gather(chunks: list[np.ndarray]) -> np.ndarray:
    """Ring all-gather: every node ends with the chunks of all nodes, in node order, along axis 0
    (no arithmetic, so no order to define)."""
    if not chunks:
        raise ValueError("a collective needs at least one node")
    return np.concatenate(chunks, axis=0)


def all_reduce(arrays: list[np.ndarray], *, subnormals: str = "ftz", bidirectional: bool = False) -> np.ndarray:
    """Ring all-reduce: :func:`reduce_scatter`, then :func:`all_gather`; every node ends with this."""
    return all_gather(reduce_scatter(arrays, subnormals=subnormals, bidirectional=bidirectional))


def after_collective(op: str, arrays: list[np.ndarray], *, subnormals: str = "ftz",
                     bidirectional: bool = False) -> list[np.ndarray]:
    """Every node's whole array after ``op`` run in place on ``arrays`` (node r's chunk r is its
    contribution to an all-gather; a reduce-scatter writes only chunk r on node r).

    Raises:
        ValueError: unknown ``op``, or what the collective raises.
    """
    n = len(arrays)
    b = np.cumsum([0, *split_sizes(arrays[0].shape[0], n)])
    if op == "all_gather":
        return [all_gather([arrays[k][b[k]:b[k + 1]] for k in range(n)])] * n
    if op == "all_reduce":
        return [all_reduce(arrays, subnormals=subnormals, bidirectional=bidirectional)] * n
    if op != "reduce_scatter":
        raise ValueError(f"op must be one of all_gather, reduce_scatter, all_reduce; got {op!r}")
    chunks = reduce_scatter(arrays, subnormals=subnormals, bidirectional=bidirectional)
    out = [x.copy() for x in arrays]
    for k in range(n):
        out[k][b[k]:b[k + 1]] = chunks[k]
    return out


def sharded_matmul(a, b, c=None, *, devices: int, sharding: str, fmt: str = "bf16", subnormals: str = "ftz",
                   bidirectional: bool = False) -> np.ndarray:
    """C = A @ B (+ C0) on a pod of ``devices`` engines sharded as ``sharding`` (:data:`SHARDINGS`),
    each node's product the single-engine golden :func:`~verif.golden.matmul.matmul` of its shards.

    ``dp``, ``tp`` and ``fsdp`` split no sum over K, so the result is bit-identical to
    ``matmul(a, b, c)``. ``tp-k`` gives node i the partial product of its K slice (node 0's starts
    from C0, the others from +0) and sums the partials with :func:`reduce_scatter` (rows chunked
    over the nodes) and :func:`all_gather`.

    Returns:
        (M, N) float32 (int32 for int8).

    Raises:
        ValueError: unknown ``sharding``, ``devices`` < 1, or what :func:`matmul` raises.
    """
    if sharding not in SHARDINGS:
        raise ValueError(f"sharding must be one of {', '.join(SHARDINGS)}; got {sharding!r}")
    if isinstance(devices, bool) or not isinstance(devices, int) or devices < 1:
        raise ValueError(f"devices must be an int >= 1; got {devices!r}")
    a, b = np.asarray(a), np.asarray(b)
    m, k = a.shape
    n = b.shape[1]
    acc = np.int32 if fmt == "int8" else np.float32
    c0 = np.zeros((m, n), dtype=acc) if c is None else np.asarray(c)

    def cut(length):
        return np.cumsum([0, *split_sizes(length, devices)])

    if sharding in ("dp", "fsdp"):   # fsdp: the all-gathered B is B itself
        r = cut(m)
        return np.concatenate([matmul(a[r[i]:r[i + 1]], b, c0[r[i]:r[i + 1]], fmt=fmt, subnormals=subnormals)
                               for i in range(devices)], axis=0)
    if sharding == "tp":
        q = cut(n)
        return np.concatenate([matmul(a, b[:, q[i]:q[i + 1]], c0[:, q[i]:q[i + 1]], fmt=fmt, subnormals=subnormals)
                               for i in range(devices)], axis=1)
    s = cut(k)
    partials = [matmul(a[:, s[i]:s[i + 1]], b[s[i]:s[i + 1]], c0 if i == 0 else None, fmt=fmt, subnormals=subnormals)
                for i in range(devices)]
    return all_reduce(partials, subnormals=subnormals, bidirectional=bidirectional)
