"""``mxu pod demo``: the digits MLP of ``mxu demo`` on a pod of GEMM engines joined by an ICI ring,
every matrix product on the pod RTL (:func:`sim.pod.run_pod`) and checked bit for bit against the
golden model of its sharding.

Data, model and training are ``mxu demo``'s (:func:`sim.demo_mlp.trained_model`: scikit-learn's
8x8 digits, 1,437 training and 360 held-out images, a 64 -> 32 (ReLU) -> 10 MLP trained in float32).
On a pod of N live nodes (shards as ``numpy.array_split``, :func:`verif.golden.collectives.split_sizes`):

1. **Inference, the Megatron pattern** (the 360 held-out images). Layer 1 is tensor-parallel by
   columns (``tp``): node r holds ``W1[:, cols_r]`` and ``b1[cols_r]`` (as the initial accumulator
   C0) and computes ``H_r = b1_r + X @ W1_r``. ReLU runs on the host per node: ``relu(H_r)`` stays on
   node r. Layer 2 is row-parallel (``tp-k``): node r holds ``relu(H_r)`` (its own columns: the cut
   of W2's rows, ``split_sizes(32, N)``, is layer 1's cut of W1's columns, asserted) and
   ``W2[rows_r]``; its engine computes the partial logits (node 0's from b2 as C0) and the
   collective engines all-reduce them over the ring, so every node holds the logits. Each layer is
   compared with :func:`verif.golden.collectives.sharded_matmul` of the same sharding (from the
   RTL's own inputs), and every node's copy of the logits with node 0's.
2. **Data-parallel training**, ``steps`` steps of SGD on minibatches of ``batch`` training images
   (drawn without replacement within a step by ``numpy.random.default_rng(seed)``), split by rows
   over the nodes. Per step, on the engines: the forward ``Z1 = b1 + X @ W1`` and
   ``Z2 = b2 + relu(Z1) @ W2`` (``dp``: node r its rows, the weights on every node), the
   backward ``dW2_r = relu(Z1_r)^T @ dZ_r``, ``dH = dZ @ W2^T`` (``dp``) and
   ``dW1_r = X_r^T @ (dH_r * mask_r)``, each weight gradient all-reduced over the ICI by the
   collective engines (:func:`verif.pod_host.plan_per_node` with ``after="all_reduce"``) and
   checked against :func:`verif.golden.collectives.all_reduce` of the golden per-node products (the
   hardware's ring order). On the host, in float32 numpy: the softmax, ``dZ = (softmax(Z2) -
   onehot(y)) / batch`` (the mean cross-entropy's gradient, so the all-reduced sum is the batch
   mean), the ReLU and its mask ``Z1 > 0``, the bias gradients as column sums of dZ and of
   ``dH * mask`` (summed over the whole batch on the host, not on the ICI), and the update
   ``W -= lr * dW``. Every operand goes into the engine rounded RNE into the input format, the
   weights stay float32 on the host (mixed precision).
3. **Inference after training**: step 1 again with the updated weights (when ``steps`` > 0).

The training starts from the trained model, not from a fresh initialisation: it continues the model
the inference served (fine-tuning), so the held-out accuracy before and after the steps compare
like for like; a few steps from random weights would leave the accuracy near chance and say nothing
about the machinery the demo shows (the loss per step would fall visibly, but on a model nobody
serves). The loss of each step is the mean cross-entropy on that step's minibatch from the engines'
logits (the float32 reference's on the same weights beside it).

Cycles: each phase is one run of :func:`sim.pod.run_pod` (one cocotb run); ``phase_cycles`` are the
pod's cycles of its collectives before the GEMM, the GEMMs, its collectives after (each from the
first node's start to the last node's done). Loading the operands and reading the results go
through the simulator's handles and take no cycles; the host's elementwise work takes none either.

:func:`run` returns the summary (``summary.json``); :func:`format_summary` prints it for people.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

import numpy as np

from sim.demo_mlp import DemoConfig, forward_float32, trained_model
from verif.golden import relu

__all__ = ["PodDemoConfig", "REPORT_FILES", "DIGITS_IMAGES", "training_images", "run", "format_summary"]

#: Files of the report folder.
REPORT_FILES = ("summary.json",)

#: Images in scikit-learn's ``load_digits`` (the split's sizes are known before it is loaded).
DIGITS_IMAGES = 1797

#: Output classes of the MLP (the digits 0 .. 9).
CLASSES = 10


def training_images(test_fraction: float = 0.2) -> int:
    """Training images of the demo's split (``train_test_split``: ``ceil(test_fraction * 1797)``
    held out), known without loading the data."""
    return DIGITS_IMAGES - math.ceil(test_fraction * DIGITS_IMAGES)


@dataclass(frozen=True)
class PodDemoConfig:
    """The pod, the model and the training of ``mxu pod demo`` (defaults: ``mxu pod demo``'s).

    Attributes:
        devices, absent: slots on the ring and the empty ones (:class:`hw.pod.config.PodConfig`).
        rows, cols, fmt, subnormals, stages, pseudo_channels: each node's GEMM engine
            (:meth:`hw.engine.EngineConfig.from_options`); ``fmt`` a float format.
        link_bytes, link_latency: each ICI link's width (bytes per beat) and one-way latency (cycles).
        bidirectional: collectives send half of each chunk each way round the ring.
        sim: ``"verilator"`` or ``"icarus"``.
        seed: the data split and the MLP's training (as ``mxu demo``) and the minibatches.
        steps: data-parallel SGD steps (0: inference only).
        batch: images per minibatch, split by rows over the nodes.
        lr: the SGD learning rate.
        hidden, test_fraction, max_iter: the MLP (:class:`sim.demo_mlp.DemoConfig`).
    """
    devices: int = 4
    absent: tuple = ()
    rows: int = 4
    cols: int = 4
    fmt: str = "bf16"
    subnormals: str = "ftz"
    stages: int = 2
    pseudo_channels: int = 1
    link_bytes: int = 8
    link_latency: int = 4
    bidirectional: bool = False
    sim: str = "verilator"
    seed: int = 0
    steps: int = 3
    batch: int = 64
    lr: float = 0.05
    hidden: int = 32
    test_fraction: float = 0.2
    max_iter: int = 300

    def mlp(self) -> DemoConfig:
        """The :class:`sim.demo_mlp.DemoConfig` whose data split and trained weights the demo uses."""
        return DemoConfig(rows=self.rows, cols=self.cols, fmt=self.fmt, subnormals=self.subnormals,
                          stages=self.stages, sim=self.sim, seed=self.seed, hidden=self.hidden,
                          test_fraction=self.test_fraction, max_iter=self.max_iter)

    def check(self):
        """Every check of the configuration, made before any data is loaded or anything is built.

        Returns:
            the :class:`hw.pod.config.PodConfig`.

        Raises:
            ValueError, TypeError: an engine or link parameter the pod refuses (naming the field);
                an int8 format; ``steps`` < 0; ``batch`` < 1 or above the training images; ``lr``
                not above 0; more live nodes than the hidden units (layer 1 shards its columns,
                layer 2 its rows) or than the minibatch's images (each node needs a row).
        """
        from hw.engine import EngineConfig
        from hw.pod.config import PodConfig, pod_link

        if self.fmt == "int8":
            raise ValueError("the MLP runs float formats (bf16, fp8_e4m3fn, fp8_e5m2), not int8")
        if self.steps < 0:
            raise ValueError(f"--steps must be >= 0; got {self.steps}")
        if not self.lr > 0:
            raise ValueError(f"--lr must be above 0; got {self.lr}")
        engine = EngineConfig.from_options(rows=self.rows, cols=self.cols, fmt=self.fmt, subnormals=self.subnormals,
                                           stages=self.stages, pseudo_channels=self.pseudo_channels)
        link = pod_link(beat_bytes=self.link_bytes, latency_cycles=self.link_latency)
        pod = PodConfig(engine=engine, link=link, nodes=self.devices, absent=tuple(self.absent))
        live = len(pod.live)
        train = training_images(self.test_fraction)
        if not 1 <= self.batch <= train:
            raise ValueError(f"--batch must be 1 .. {train} (the training images); got {self.batch}")
        if live > self.hidden:
            raise ValueError(f"--devices {live} is more than the {self.hidden} hidden units (layer 1 shards "
                             "its columns over the nodes, layer 2 its rows)")
        if self.steps and live > self.batch:
            raise ValueError(f"--devices {live} is more than the minibatch of {self.batch} images "
                             "(data parallelism gives each node at least one row)")
        return pod


class _Pod:
    """Runs plans on the pod RTL, compares them with their golden results and records each phase."""

    def __init__(self, cfg: PodDemoConfig, pod, bar):
        self.cfg, self.pod, self.bar = cfg, pod, bar
        self.n = len(pod.live)
        self.fmt, self.sub = pod.engine.mxu.fmt, pod.engine.mxu.subnormals
        self.phases: list[dict] = []

    def q(self, x):
        """``x`` rounded RNE into the input format (float32 first: one rounding)."""
        from verif.golden import to_format

        return to_format(np.ascontiguousarray(x, dtype=np.float32), self.fmt)

    def run(self, part: str, name: str, plan, want: np.ndarray) -> list[np.ndarray]:
        """Run ``plan``; ``want`` the golden C (dp, tp: the assembled product; tp-k and per-node
        all-reduce: every node's copy). Returns every node's result."""
        from sim.pod import run_pod
        from verif.pod_host import assemble, collective_payload_beats

        if self.bar is not None:
            self.bar.set_postfix_str(f"{part}: {name}")
        res = run_pod(self.pod, plan, sim=self.cfg.sim)
        if self.bar is not None:
            self.bar.update(1)
        results = res["results"]
        reduced = any(nd.after for nd in plan.nodes)
        golden = want.view(np.uint32)
        if reduced:   # every node holds all of C
            mismatches = sum(int((r.view(np.uint32) != golden).sum()) for r in results)
            differ = [k for k, r in enumerate(results) if not np.array_equal(r.view(np.uint32),
                                                                             results[0].view(np.uint32))]
            checked = golden.size * len(results)
        else:
            mismatches = int((assemble(plan, results).view(np.uint32) != golden).sum())
            differ, checked = [], golden.size
        phases = res["phase_cycles"]
        n_before = max(len(nd.before) for nd in plan.nodes)
        gemm_phase = phases[n_before]
        coll_phase = sum(phases) - gemm_phase
        payload = collective_payload_beats(self.pod, plan)
        links = self.n * (2 if plan.bidirectional else 1)
        m, k, n = plan.shape
        self.phases.append({
            "part": part, "phase": name, "sharding": plan.sharding,
            "collective": next((c[0] for nd in plan.nodes for c in nd.before + nd.after), None),
            "m": m, "k": k, "n": n, "node_gemms": [list(nd.gemm) for nd in plan.nodes],
            "gemm_cycles": res["gemm_cycles"], "collective_cycles": res["collective_cycles"],
            "phase_cycles": phases, "pod_cycles": sum(phases),
            "gemm_phase_cycles": gemm_phase, "collective_phase_cycles": coll_phase,
            "collective_payload_beats": payload,
            "link_utilization": round(payload / (coll_phase * links), 4) if coll_phase and self.n > 1 else None,
            "replays": res["links"]["replays"], "crc_errors": res["links"]["crc_errors"],
            "results_checked": checked, "mismatches": mismatches, "nodes_differ": differ,
            "bitexact": mismatches == 0 and not differ,
            "sim_cycles": res["sim_cycles"], "build_s": round(res["build_s"], 2), "cached_build": res["cached_build"],
            "wall_s": round(res["wall_s"], 2),
        })
        return results

    def infer(self, part: str, x, y, w1, b1, w2, b2) -> dict:
        """Megatron inference of the images ``x`` (labels ``y``); returns accuracy and loss."""
        from verif.golden.collectives import sharded_matmul, split_sizes
        from verif.pod_host import plan_matmul

        fmt, sub, n = self.fmt, self.sub, self.n
        images = x.shape[0]
        xq, w1q, w2q = self.q(x), self.q(w1), self.q(w2)
        c1 = np.ascontiguousarray(np.broadcast_to(b1, (images, w1.shape[1])), dtype=np.float32)
        c2 = np.ascontiguousarray(np.broadcast_to(b2, (images, w2.shape[1])), dtype=np.float32)
        plan1 = plan_matmul(self.pod, xq, w1q, c1, "tp")
        want1 = sharded_matmul(xq, w1q, c1, devices=n, sharding="tp", fmt=fmt, subnormals=sub)
        h = self.run(part, "layer 1", plan1, want1)       # node r: H_r, its columns of H
        a2 = [self.q(relu(h_r)) for h_r in h]             # ReLU per node: relu(H_r) stays on node r
        a2_all = np.concatenate(a2, axis=1)
        plan2 = plan_matmul(self.pod, a2_all, w2q, c2, "tp-k", bidirectional=self.cfg.bidirectional)
        # layer 2 cuts K (W2's rows) as layer 1 cut N (W1's columns): node r's A is its own relu(H_r)
        assert [nd.gemm[1] for nd in plan2.nodes] == [nd.gemm[2] for nd in plan1.nodes] == split_sizes(
            w1.shape[1], n)
        assert all(nd.loads[0][2].tobytes() == a.tobytes() for nd, a in zip(plan2.nodes, a2))
        want2 = sharded_matmul(a2_all, w2q, c2, devices=n, sharding="tp-k", fmt=fmt, subnormals=sub,
                               bidirectional=self.cfg.bidirectional)
        logits = self.run(part, "layer 2", plan2, want2)
        rtl = logits[0]
        ref = forward_float32(x, w1, b1, w2, b2)
        pred, ref_pred = rtl.argmax(axis=1), ref.argmax(axis=1)
        return {
            "images": int(images),
            "accuracy": {"rtl": round(float((pred == y).mean()), 4),
                         "float32_reference": round(float((ref_pred == y).mean()), 4)},
            "rtl_correct": int((pred == y).sum()), "reference_correct": int((ref_pred == y).sum()),
            "agreeing_predictions": int((pred == ref_pred).sum()),
            "loss": {"rtl": round(_cross_entropy(rtl, y), 5), "float32_reference": round(_cross_entropy(ref, y), 5)},
            "nodes_agree": all(np.array_equal(r.view(np.uint32), rtl.view(np.uint32)) for r in logits),
        }

    def step(self, part: str, x, y, weights) -> tuple[tuple, dict]:
        """One data-parallel SGD step on the minibatch ``x``, ``y``; returns the new weights and the
        step's record."""
        from verif.golden import matmul
        from verif.golden.collectives import all_reduce, sharded_matmul, split_sizes
        from verif.pod_host import plan_matmul, plan_per_node

        w1, b1, w2, b2 = weights
        fmt, sub, n, bidi = self.fmt, self.sub, self.n, self.cfg.bidirectional
        batch = x.shape[0]
        cuts = np.cumsum([0, *split_sizes(batch, n)])
        rows = [slice(int(cuts[r]), int(cuts[r + 1])) for r in range(n)]

        def dp(name, a, b, c):
            plan = plan_matmul(self.pod, a, b, c, "dp")
            want = sharded_matmul(a, b, c, devices=n, sharding="dp", fmt=fmt, subnormals=sub)
            return np.concatenate(self.run(part, name, plan, want), axis=0)

        def gradient(name, a, b):       # node r: a[rows_r]^T @ b[rows_r], all-reduced
            products = [(np.ascontiguousarray(a[s].T), np.ascontiguousarray(b[s]), None) for s in rows]
            plan = plan_per_node(self.pod, products, after="all_reduce", bidirectional=bidi)
            want = all_reduce([matmul(pa, pb, fmt=fmt, subnormals=sub) for pa, pb, _ in products],
                              subnormals=sub, bidirectional=bidi)
            return self.run(part, name, plan, want)[0]

        xq = self.q(x)
        z1 = dp("forward layer 1", xq, self.q(w1), _rows_of(b1, batch))
        hq = self.q(relu(z1))
        z2 = dp("forward layer 2", hq, self.q(w2), _rows_of(b2, batch))
        p = _softmax(z2)
        dz = p.copy()
        dz[np.arange(batch), y] -= np.float32(1)
        dz /= np.float32(batch)
        dzq = self.q(dz)
        dw2 = gradient("dW2 all-reduce", hq, dzq)
        dh = dp("dH", dzq, self.q(w2.T), None)
        dz1 = (dh * (z1 > 0)).astype(np.float32)
        dw1 = gradient("dW1 all-reduce", xq, self.q(dz1))
        db1, db2 = dz1.sum(axis=0, dtype=np.float32), dz.sum(axis=0, dtype=np.float32)
        lr = np.float32(self.cfg.lr)
        new = tuple((w - lr * g).astype(np.float32) for w, g in ((w1, dw1), (b1, db1), (w2, dw2), (b2, db2)))
        record = {
            "loss": round(float(-np.log(p[np.arange(batch), y]).mean()), 5),
            "loss_float32_reference": round(_cross_entropy(forward_float32(x, w1, b1, w2, b2), y), 5),
            "gradient_norm": round(float(np.sqrt(sum(float((g.astype(np.float64) ** 2).sum())
                                                     for g in (dw1, db1, dw2, db2)))), 5),
        }
        return new, record


def _rows_of(bias, rows):
    return np.ascontiguousarray(np.broadcast_to(bias, (rows, bias.shape[0])), dtype=np.float32)


def _softmax(z):
    z = z.astype(np.float32)
    e = np.exp(z - z.max(axis=1, keepdims=True))
    return (e / e.sum(axis=1, keepdims=True)).astype(np.float32)


def _cross_entropy(logits, y) -> float:
    p = _softmax(logits)
    return float(-np.log(p[np.arange(len(y)), y]).mean())


def run(cfg: PodDemoConfig = PodDemoConfig(), *, progress: bool = False) -> dict:
    """Inference, data-parallel training and inference again on the pod RTL; return the summary.

    Returns:
        the summary dict (``summary.json``; the keys are listed in ``mxu pod demo --help``).

    Raises:
        ValueError, TypeError: a configuration :meth:`PodDemoConfig.check` refuses.
        RuntimeError: the pod bench failed (a node's error status, a hang, a JEDEC violation;
            :func:`sim.pod.run_pod`), or a simulator build failed.
    """
    from sim import toolchain
    from verif.golden.collectives import split_sizes

    t0 = time.perf_counter()
    pod = cfg.check()
    n = len(pod.live)
    runs = 2 + cfg.steps * 5 + (2 if cfg.steps else 0)
    bar = None
    if progress:
        import sys

        from tqdm import tqdm
        bar = tqdm(total=runs, desc="pod demo", unit="run", file=sys.stderr, leave=False,
                   bar_format="{desc}: {n_fmt}/{total_fmt} runs [{elapsed}] {postfix}")
    try:
        (x_train, x_test, y_train, y_test), weights, train_info = trained_model(cfg.mlp())
        assert len(y_train) == training_images(cfg.test_fraction), "the split's size changed"
        train_s = time.perf_counter() - t0
        p = _Pod(cfg, pod, bar)
        before = p.infer("inference", x_test, y_test, *weights)
        rng = np.random.default_rng(cfg.seed)
        steps = []
        for s in range(cfg.steps):
            idx = rng.choice(len(y_train), cfg.batch, replace=False)
            weights, record = p.step(f"step {s + 1}", x_train[idx], y_train[idx], weights)
            steps.append({"step": s + 1, **record})
        after = p.infer("after training", x_test, y_test, *weights) if cfg.steps else None
    finally:
        if bar is not None:
            bar.close()

    phases = p.phases
    gemm = sum(ph["gemm_phase_cycles"] for ph in phases)
    coll = sum(ph["collective_phase_cycles"] for ph in phases)
    total = gemm + coll
    parts = {}
    for ph in phases:
        key = "training" if ph["part"].startswith("step ") else ph["part"].replace(" ", "_")
        d = parts.setdefault(key, {"pod_cycles": 0, "gemm_cycles": 0, "collective_cycles": 0, "runs": 0})
        d["pod_cycles"] += ph["pod_cycles"]
        d["gemm_cycles"] += ph["gemm_phase_cycles"]
        d["collective_cycles"] += ph["collective_phase_cycles"]
        d["runs"] += 1
    sim_wall = sum(ph["wall_s"] for ph in phases)
    build_s = sum(ph["build_s"] for ph in phases)
    e = pod.engine
    sim_version = toolchain.tool_versions().get("iverilog" if cfg.sim == "icarus" else cfg.sim, "")
    nodes_agree = before["nodes_agree"] and (after is None or after["nodes_agree"])
    bitexact = all(ph["bitexact"] for ph in phases) and nodes_agree
    return {
        "config": {"devices": n, "slots": cfg.devices, "absent": list(cfg.absent), "rows": e.mxu.rows,
                   "cols": e.mxu.cols, "fmt": e.mxu.fmt, "subnormals": e.mxu.subnormals, "stages": e.mxu.stages,
                   "pseudo_channels": e.hbm.pseudo_channels, "link_bytes": cfg.link_bytes,
                   "link_latency": cfg.link_latency, "bidirectional": cfg.bidirectional, "sim": cfg.sim,
                   "simulator_version": sim_version.split(";")[0], "pod": pod.as_dict()},
        "model": {"layers": [64, cfg.hidden, CLASSES], "activation": "relu", "trained_in": "float32",
                  "trainer": "sklearn.neural_network.MLPClassifier (adam)", "seed": cfg.seed,
                  **train_info, "train_s": round(train_s, 2)},
        "data": {"dataset": "sklearn.datasets.load_digits (8x8, 0..16 scaled to 0..1)",
                 "train_images": int(len(y_train)), "test_images": int(len(y_test))},
        "hidden_split": split_sizes(cfg.hidden, n),
        "inference": before,
        "training": {"init": "the trained model", "optimizer": "sgd", "lr": cfg.lr, "batch": cfg.batch,
                     "batch_split": split_sizes(cfg.batch, n), "steps": steps,
                     "minibatch_seed": cfg.seed},
        "after_training": after,
        "phases": phases,
        "bitexact": bitexact,
        "nodes_agree": nodes_agree,
        "results_checked": sum(ph["results_checked"] for ph in phases),
        "mismatches": sum(ph["mismatches"] for ph in phases),
        "pod_cycles": total,
        "gemm_cycles": gemm,
        "collective_cycles": coll,
        "gemm_share": round(gemm / total, 4) if total else None,
        "collective_share": round(coll / total, 4) if total else None,
        "cycles_by_part": parts,
        "runs": len(phases),
        "sim_cycles": sum(ph["sim_cycles"] for ph in phases),
        "sim_wall_s": round(sim_wall, 2),
        "build_s": round(build_s, 2),
        "cached_build": all(ph["cached_build"] for ph in phases),
        "wall_s": round(time.perf_counter() - t0, 2),
    }


def _pct(x) -> str:
    return "-" if x is None else f"{x:.1%}"


def format_summary(s: dict) -> str:
    """The human summary printed by ``mxu pod demo``."""
    c, model, inf, tr, after = s["config"], s["model"], s["inference"], s["training"], s["after_training"]
    n, fmt = c["devices"], c["fmt"]
    absent = ", ".join(map(str, c["absent"]))
    ring = f"{n} nodes" + (f" ({c['slots']} slots, {'slots' if len(c['absent']) > 1 else 'slot'} {absent} absent)"
                           if c["absent"] else "")
    pcs = c["pseudo_channels"]
    lines = [
        "mxu pod demo: the digits MLP on a pod of GEMM engines on an ICI ring, every GEMM on the pod RTL",
        f"  model         {model['layers'][0]} -> {model['layers'][1]} (ReLU) -> {model['layers'][2]}, trained in "
        f"float32 on {s['data']['train_images']} images (seed {model['seed']}, {model['iterations']} iterations"
        f"{', cached' if model.get('cached') else ''})",
        f"  pod           {ring} on a {'bidirectional ' if c['bidirectional'] else ''}ring; each a {c['rows']}x"
        f"{c['cols']} MXU, {fmt} x {fmt} -> fp32, subnormals={c['subnormals']}, stages={c['stages']}, "
        f"{pcs} HBM pseudo-channel{'s' if pcs > 1 else ''}; links {c['link_bytes']} B/cycle, "
        f"latency {c['link_latency']} cycles",
        f"  simulator     {c['sim']} {c['simulator_version']}".rstrip(),
        f"  inference     {inf['images']} held-out images: layer 1 tensor-parallel by columns (hidden units "
        f"{'/'.join(map(str, s['hidden_split']))}), ReLU per node, layer 2 row-parallel + all-reduce",
    ]

    def accuracy(label, r):
        m = r["images"]
        nodes = "every node holds the same logits" if r["nodes_agree"] else "NODES HOLD DIFFERENT LOGITS"
        return (f"  {label:<14}RTL {r['accuracy']['rtl']:.1%} ({r['rtl_correct']}/{m})   float32 reference "
                f"{r['accuracy']['float32_reference']:.1%} ({r['reference_correct']}/{m})   loss "
                f"{r['loss']['rtl']:.4f} (float32 {r['loss']['float32_reference']:.4f}); {nodes}")

    lines.append(accuracy("accuracy", inf))
    if tr["steps"]:
        count = len(tr["steps"])
        lines.append(f"  training      {count} SGD step{'s' if count > 1 else ''} (lr {tr['lr']:g}) from the trained "
                     "model, "
                     f"minibatches of {tr['batch']} split {'/'.join(map(str, tr['batch_split']))} by rows; "
                     "gradients by the engines, all-reduced over the ICI")
        lines.append("    step  minibatch loss  float32 reference  |gradient|")
        for st in tr["steps"]:
            lines.append(f"    {st['step']:>4}  {st['loss']:>14.4f}  {st['loss_float32_reference']:>17.4f}  "
                         f"{st['gradient_norm']:>10.4f}")
        lines.append(accuracy("after steps", after))
    lines.append("  phase                        sharding       M x K x N     GEMM cycles  collective  pod cycles"
                 "  link util  bit-exact")
    for ph in s["phases"]:
        shape = f"{ph['m']}x{ph['k']}x{ph['n']}"
        coll = max((sum(x) for x in ph["collective_cycles"]), default=0)
        name = f"{ph['part']}: {ph['phase']}"
        sharding = ph["sharding"] + (" + AR" if ph["collective"] == "all_reduce" else "")
        lines.append(f"    {name:<27}  {sharding:<13}  {shape:<12}  {max(ph['gemm_cycles']):>11,}  "
                     f"{coll:>10,}  {ph['pod_cycles']:>10,}  {_pct(ph['link_utilization']):>9}  "
                     f"{'yes' if ph['bitexact'] else 'NO'}")
    lines += [
        f"  cycles        {s['pod_cycles']:,} pod cycles in {s['runs']} runs: GEMMs {s['gemm_cycles']:,} "
        f"({_pct(s['gemm_share'])}), collectives {s['collective_cycles']:,} ({_pct(s['collective_share'])})",
        f"  bit-exact     {'yes' if s['bitexact'] else 'NO'}: {s['results_checked']:,} results vs the golden model, "
        f"{s['mismatches']} mismatches",
        f"  simulation    {s['sim_cycles']:,} cycles simulated in {s['sim_wall_s']} s "
        f"({'cached build' if s['cached_build'] else 'build ' + str(s['build_s']) + ' s included'})",
        f"  wall time     {s['wall_s']} s",
    ]
    if "report" in s:
        lines.append(f"  report        {', '.join(s['report'].values())}")
    lines.append(f"  result        {'PASS: bit-exact' if s['bitexact'] else 'FAIL: not bit-exact'}")
    return "\n".join(lines)
