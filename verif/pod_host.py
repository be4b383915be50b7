"""The host's side of a sharded GEMM on the pod: what each node's memory holds, which GEMM each
engine runs, which collectives follow, and how the result is put together.

The plan follows :func:`verif.golden.collectives.sharded_matmul` (shards by ``numpy.array_split``):

* ``dp``: node r gets rows r of A (and of C0), all of B; C comes back by rows.
* ``tp``: node r gets columns r of B (and of C0), all of A; C comes back by columns.
* ``fsdp``: node r stores rows r of B in a buffer for all of B; the collective engines all-gather
  it (a byte copy: operands of any format), then each node runs its rows of A as in ``dp``.
* ``tp-k``: node r gets columns r of A and rows r of B; its engine writes the partial product
  (node 0's starting from C0, the others from +0), and the collective engines all-reduce it, so
  every node holds all of C, summed in the ring order the golden model defines.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from hw.pod.config import HBM_BEAT_BYTES, PodConfig
from hw.pod.csr import REG as CREG
from verif.gemm_host import Layout, layout, register_writes
from verif.golden.collectives import SHARDINGS, split_sizes

__all__ = ["NodePlan", "PodPlan", "plan_matmul", "collective_writes", "OP_CODES"]

OP_CODES = {"all_gather": 0, "reduce_scatter": 1, "all_reduce": 2}


@dataclass
class NodePlan:
    """One live node: its slot and rank, what to load (``(byte address, row stride, array)``), its
    GEMM (``(m, k, n)`` and the AXI4-Lite writes, or None: no rows for it), its collectives before
    and after the GEMM (``(op, base, stride, rows, row_bytes)``), and where its result is."""
    slot: int
    rank: int
    loads: list[tuple[int, int, np.ndarray]] = field(default_factory=list)
    gemm: tuple[int, int, int] | None = None
    gemm_writes: list[tuple[int, int]] = field(default_factory=list)
    layout: Layout | None = None
    before: list[tuple] = field(default_factory=list)
    after: list[tuple] = field(default_factory=list)


@dataclass
class PodPlan:
    """A sharded GEMM on the pod's live nodes (rank order)."""
    sharding: str
    shape: tuple[int, int, int]
    nodes: list[NodePlan]
    bidirectional: bool
    acc_dtype: type


def plan_matmul(cfg: PodConfig, a: np.ndarray, b: np.ndarray, c: np.ndarray | None, sharding: str, *,
                bidirectional: bool = False) -> PodPlan:
    """Plan C = A @ B (+ C0) on the pod ``cfg`` sharded as ``sharding``.

    Args:
        a: (M, K), b: (K, N) in the engine's input format (as :func:`verif.golden.matmul` takes them);
            c: (M, N) float32 / int32 or None.

    Raises:
        ValueError: unknown sharding, mismatched shapes, or more live nodes than the dimension the
            sharding splits (M for dp and fsdp, N for tp, K for tp-k).
    """
    if sharding not in SHARDINGS:
        raise ValueError(f"sharding must be one of {', '.join(SHARDINGS)}; got {sharding!r}")
    m, k = a.shape
    k2, n = b.shape
    if k2 != k:
        raise ValueError(f"A is {m} x {k} but B is {k2} x {n}: K differs")
    if c is not None and c.shape != (m, n):
        raise ValueError(f"C0 is {c.shape[0]} x {c.shape[1]}; the product is {m} x {n}")
    live = cfg.live
    dim = {"dp": ("M", m), "fsdp": ("M", m), "tp": ("N", n), "tp-k": ("K", k)}[sharding]
    if len(live) > dim[1]:
        raise ValueError(f"--devices {len(live)} is more than {dim[0]} = {dim[1]}, the dimension {sharding} shards")
    e = cfg.engine
    ob = e.operand_bytes
    acc = np.int32 if e.mxu.fmt == "int8" else np.float32
    cuts = np.cumsum([0, *split_sizes(dim[1], len(live))])
    plans = []
    for r, slot in enumerate(live):
        lo, hi = int(cuts[r]), int(cuts[r + 1])
        if sharding in ("dp", "fsdp"):
            sa, sb, sc = a[lo:hi], b, (None if c is None else c[lo:hi])
        elif sharding == "tp":
            sa, sb, sc = a, b[:, lo:hi], (None if c is None else c[:, lo:hi])
        else:
            sa, sb, sc = a[:, lo:hi], b[lo:hi], (c if r == 0 else None)
        mm, kk, nn = sa.shape[0], sa.shape[1], sb.shape[1]
        lay = layout(mm, k if sharding == "fsdp" else kk, nn, ob, 4, sc is not None)
        node = NodePlan(slot, r, layout=lay, gemm=(mm, kk, nn))
        node.loads.append((lay.a_base, lay.a_stride, np.ascontiguousarray(sa)))
        if sharding == "fsdp":         # this node's rows of B, where they sit in the gathered B
            bl, bh = (int(x) for x in np.cumsum([0, *split_sizes(k, len(live))])[r:r + 2])
            node.loads.append((lay.b_base + bl * lay.b_stride, lay.b_stride, np.ascontiguousarray(b[bl:bh])))
            node.before.append(("all_gather", lay.b_base, lay.b_stride, k, n * ob))
        else:
            node.loads.append((lay.b_base, lay.b_stride, np.ascontiguousarray(sb)))
        if sc is not None:
            node.loads.append((lay.c_base, lay.c_stride, np.ascontiguousarray(sc.astype(acc))))
        node.gemm_writes = register_writes(mm, kk, nn, lay, load_c=sc is not None, out_bf16=False)
        if sharding == "tp-k":
            node.after.append(("all_reduce", lay.d_base, lay.d_stride, m, n * 4))
        plans.append(node)
    return PodPlan(sharding, (m, k, n), plans, bidirectional, acc)


def collective_writes(node: NodePlan, nodes: int, op: str, base: int, stride: int, rows: int, row_bytes: int,
                      bidirectional: bool) -> list[tuple[int, int]]:
    """(offset, value) writes of the collective engine's registers (START not included)."""
    assert base % HBM_BEAT_BYTES == 0 and stride % HBM_BEAT_BYTES == 0
    return [(CREG["OP"].offset, OP_CODES[op] | int(bidirectional) << 4),
            (CREG["RING"].offset, nodes | node.rank << 8), (CREG["BASE"].offset, base),
            (CREG["STRIDE"].offset, stride), (CREG["ROWS"].offset, rows), (CREG["ROW_BYTES"].offset, row_bytes)]


def assemble(plan: PodPlan, results: list[np.ndarray]) -> np.ndarray:
    """C from each node's result matrix (rank order): rows (dp, fsdp), columns (tp), or node 0's
    copy of the all-reduced C (tp-k; every node holds the same)."""
    if plan.sharding in ("dp", "fsdp"):
        return np.concatenate(results, axis=0)
    if plan.sharding == "tp":
        return np.concatenate(results, axis=1)
    return results[0]
