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

:func:`plan_per_node` is the general form behind ``tp-k``: each node its own product (data-parallel
gradients, one per node's slice of the batch), optionally followed by one collective over the
results.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from hw.pod.config import HBM_BEAT_BYTES, PodConfig
from hw.pod.csr import REG as CREG
from verif.gemm_host import Layout, check_gemm, layout, register_writes
from verif.golden.collectives import SHARDINGS, split_sizes

__all__ = ["NodePlan", "PodPlan", "plan_matmul", "plan_per_node", "plan_single", "collective_writes",
           "collective_payload_beats", "assemble", "OP_CODES", "PER_NODE"]

OP_CODES = {"all_gather": 0, "reduce_scatter": 1, "all_reduce": 2}

#: the ``sharding`` of a :class:`PodPlan` from :func:`plan_per_node`
PER_NODE = "per-node"


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
    """A sharded GEMM on the pod's live nodes (rank order): ``sharding`` one of
    :data:`verif.golden.collectives.SHARDINGS` or :data:`PER_NODE`; ``shape`` (M, K, N) of the whole
    product (a per-node plan: every node's M and N, K summed over the nodes)."""
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
        node = _gemm_node(slot, r, (mm, kk, nn), lay, sa, None if sharding == "fsdp" else sb, sc, acc)
        if sharding == "fsdp":         # this node's rows of B, where they sit in the gathered B
            bl, bh = (int(x) for x in np.cumsum([0, *split_sizes(k, len(live))])[r:r + 2])
            node.loads.insert(1, (lay.b_base + bl * lay.b_stride, lay.b_stride, np.ascontiguousarray(b[bl:bh])))
            node.before.append(("all_gather", lay.b_base, lay.b_stride, k, n * ob))
        if sharding == "tp-k":
            node.after.append(("all_reduce", lay.d_base, lay.d_stride, m, n * 4))
        plans.append(node)
    return PodPlan(sharding, (m, k, n), plans, bidirectional, acc)


def plan_single(cfg: PodConfig, a: np.ndarray, b: np.ndarray, c: np.ndarray | None) -> PodPlan:
    """Plan the whole C = A @ B (+ C0) on the first live node of the pod ``cfg``, the other nodes idle:
    the single-engine reference of a sharded run, on the same netlist (one simulator build serves
    both; the nodes share nothing during a GEMM, so node 0's cycles are those of a one-node pod).

    Raises:
        ValueError: as :func:`plan_matmul` (mismatched shapes).
    """
    one = PodConfig(engine=cfg.engine, link=cfg.link, nodes=1, adder_cuts=cfg.adder_cuts)
    plan = plan_matmul(one, a, b, c, "dp")
    plan.nodes[0].slot = cfg.live[0]
    return plan


def plan_per_node(cfg: PodConfig, products: list[tuple], *, after: str | None = None,
                  bidirectional: bool = False) -> PodPlan:
    """Plan one GEMM per live node, each on its own operands, and optionally one collective over
    the results: node r (rank r, slot ``cfg.live[r]``) computes ``C_r = A_r @ B_r (+ C0_r)``, then
    the collective engines run ``after`` on the C_r in place (all_reduce: every node ends with the
    sum of all C_r, added in the ring order of :func:`verif.golden.collectives.all_reduce`, which
    :func:`verif.golden.collectives.after_collective` models for every op).

    This is data parallelism's gradient step: node r holds rows r of the batch, its engine computes
    its partial weight gradient ``X_r^T @ dZ_r`` and the all-reduce sums them over the ICI ring.
    (``tp-k`` is this plan with A's columns and B's rows as the products.)

    Args:
        cfg: the pod.
        products: one ``(a_r, b_r, c_r)`` per live node, in rank order: ``a_r`` (M, K_r) and
            ``b_r`` (K_r, N) in the engine's input format (as :func:`verif.golden.matmul` takes
            them), ``c_r`` (M, N) float32 (int32 for int8) or None (+0). Every node's M and N are
            the same (the collective runs over one M x N array per node); K_r may differ.
        after: None, ``"all_gather"``, ``"reduce_scatter"`` or ``"all_reduce"``.
        bidirectional: the collective sends half of each chunk each way round the ring.

    Returns:
        a :class:`PodPlan` with ``sharding`` :data:`PER_NODE` and ``shape`` (M, sum of K_r, N); each
        node's result (``run_pod``'s ``results[r]``) is its (M, N) array after the collective.

    Raises:
        ValueError: not one product per live node, mismatched shapes (K of A and B, N or M differing
            between nodes, C0 not M x N), an unknown ``after``, or a GEMM the engine refuses
            (:func:`verif.gemm_host.check_gemm`: a zero dimension, K above MAX_K, too large for the
            memory).
    """
    live = cfg.live
    if len(products) != len(live):
        raise ValueError(f"one product per live node: {len(live)} nodes, {len(products)} products")
    if after is not None and after not in OP_CODES:
        raise ValueError(f"after must be None or one of {', '.join(OP_CODES)}; got {after!r}")
    e = cfg.engine
    acc = np.int32 if e.mxu.fmt == "int8" else np.float32
    m, n = products[0][0].shape[0], products[0][1].shape[1]
    nodes = []
    for r, (slot, (a, b, c)) in enumerate(zip(live, products)):
        if a.ndim != 2 or b.ndim != 2:
            raise ValueError(f"node {r}: A and B must be 2-D; got shapes {a.shape} and {b.shape}")
        if a.shape[1] != b.shape[0]:
            raise ValueError(f"node {r}: A is {a.shape[0]} x {a.shape[1]} but B is {b.shape[0]} x {b.shape[1]}: "
                             "K differs")
        if (a.shape[0], b.shape[1]) != (m, n):
            raise ValueError(f"node {r}: the product is {a.shape[0]} x {b.shape[1]}; node 0's is {m} x {n}")
        if c is not None and c.shape != (m, n):
            raise ValueError(f"node {r}: C0 is {c.shape[0]} x {c.shape[1]}; the product is {m} x {n}")
        k = a.shape[1]
        lay = check_gemm(m, k, n, e, load_c=c is not None)
        node = _gemm_node(slot, r, (m, k, n), lay, a, b, c, acc)
        if after is not None:
            node.after.append((after, lay.d_base, lay.d_stride, m, n * 4))
        nodes.append(node)
    return PodPlan(PER_NODE, (m, sum(a.shape[1] for a, _, _ in products), n), nodes, bidirectional, acc)


def _gemm_node(slot: int, rank: int, gemm: tuple[int, int, int], lay: Layout, a: np.ndarray,
               b: np.ndarray | None, c: np.ndarray | None, acc: type) -> NodePlan:
    """A node whose engine runs the ``gemm`` (M, K, N) ``C = A @ B (+ C0)`` laid out as ``lay``: its
    loads (A; B unless ``b`` is None, for the caller to place; C0 as ``acc`` when given) and its
    engine's register writes."""
    node = NodePlan(slot, rank, layout=lay, gemm=gemm)
    node.loads.append((lay.a_base, lay.a_stride, np.ascontiguousarray(a)))
    if b is not None:
        node.loads.append((lay.b_base, lay.b_stride, np.ascontiguousarray(b)))
    if c is not None:
        node.loads.append((lay.c_base, lay.c_stride, np.ascontiguousarray(c.astype(acc))))
    node.gemm_writes = register_writes(*gemm, lay, load_c=c is not None, out_bf16=False)
    return node


def collective_writes(node: NodePlan, nodes: int, op: str, base: int, stride: int, rows: int, row_bytes: int,
                      bidirectional: bool) -> list[tuple[int, int]]:
    """(offset, value) writes of the collective engine's registers (START not included)."""
    assert base % HBM_BEAT_BYTES == 0 and stride % HBM_BEAT_BYTES == 0
    return [(CREG["OP"].offset, OP_CODES[op] | int(bidirectional) << 4),
            (CREG["RING"].offset, nodes | node.rank << 8), (CREG["BASE"].offset, base),
            (CREG["STRIDE"].offset, stride), (CREG["ROWS"].offset, rows), (CREG["ROW_BYTES"].offset, row_bytes)]


def assemble(plan: PodPlan, results: list[np.ndarray]) -> np.ndarray:
    """C from each node's result matrix (rank order): rows (dp, fsdp), columns (tp), or node 0's
    copy of the all-reduced C (tp-k, and a :func:`plan_per_node` plan ending in an all-reduce;
    every node holds the same).

    Raises:
        ValueError: a per-node plan without a final all-reduce (its nodes hold different arrays).
    """
    if plan.sharding == PER_NODE and not all(nd.after and nd.after[-1][0] == "all_reduce" for nd in plan.nodes):
        raise ValueError("a per-node plan without an all-reduce leaves one result per node: use the list")
    if plan.sharding in ("dp", "fsdp"):
        return np.concatenate(results, axis=0)
    if plan.sharding == "tp":
        return np.concatenate(results, axis=1)
    return results[0]


def collective_payload_beats(cfg: PodConfig, plan: PodPlan) -> int:
    """Link beats of data the plan's collectives send, summed over every node, both ring directions
    and all collectives (before and after the GEMM): the numerator of the link utilization (the
    schedule :func:`verif.collective_model.ring_steps`, which the RTL's commands follow)."""
    from verif.collective_model import ring_steps

    n = len(plan.nodes)
    beats = 0
    for nd in plan.nodes:
        for op, _, _, rows, row_bytes in nd.before + nd.after:
            for ccw in (False, True):
                beats += sum(s.beats for s in ring_steps(cfg.collective, op, rows, row_bytes, n, nd.rank,
                                                         bidirectional=plan.bidirectional, ccw=ccw) if s.tx)
    return beats
