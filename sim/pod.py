"""Run a sharded GEMM (a :class:`verif.pod_host.PodPlan`) on the pod RTL with every node's HBM
controller and device models in the netlist, in Verilator or Icarus (:mod:`verif.tb.pod_tb`)."""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

import numpy as np

from hw.pod.config import PodConfig

__all__ = ["run_pod", "pod_verilog", "bench_plan", "stored_rows"]


def pod_verilog(cfg: PodConfig, stored_rows: int) -> Path:
    """Generate (or reuse) the Verilog of :class:`verif.hdl.pod_sim_top.PodSimTop` (module ``pod_sim``)."""
    from sim.runner import generate_verilog
    from verif.gemm_host import FILL
    from verif.hdl.pod_sim_top import pod_sim_verilog

    return generate_verilog(lambda: pod_sim_verilog(cfg, stored_rows=stored_rows, fill=FILL), name="pod_sim",
                            key=("pod_sim", cfg, stored_rows, FILL))


def bench_plan(plan) -> tuple[list[dict], dict[str, np.ndarray], int]:
    """The bench's node list (:class:`verif.tb.base.PodTbConfig`), the loads' raw bytes and the
    highest byte address the plan touches, for a plan of :func:`verif.pod_host.plan_matmul`."""
    from verif.pod_host import collective_writes

    nodes, arrays, end = [], {}, 0
    n = len(plan.nodes)
    m, _, nn = plan.shape
    for i, nd in enumerate(plan.nodes):
        loads = []
        for j, (base, stride, x) in enumerate(nd.loads):
            key = f"n{i}l{j}"
            raw = np.ascontiguousarray(x)
            arrays[key] = raw.view(np.uint8).reshape(raw.shape[0], -1) if raw.size else np.zeros((0, 0), np.uint8)
            loads.append([base, stride, key])
            end = max(end, base + stride * raw.shape[0])
        rows, cols = (m, nn) if plan.sharding == "tp-k" else (nd.gemm[0], nd.gemm[2])
        lay = nd.layout
        end = max(end, lay.end)
        nodes.append({"slot": nd.slot, "rank": nd.rank, "loads": loads,
                      "gemm_writes": [list(w) for w in nd.gemm_writes],
                      "before": [collective_writes(nd, n, *c, plan.bidirectional) for c in nd.before],
                      "after": [collective_writes(nd, n, *c, plan.bidirectional) for c in nd.after],
                      "result": [lay.d_base, lay.d_stride, rows, cols * 4]})
    return nodes, arrays, end


def stored_rows(cfg: PodConfig, *plans) -> int:
    """DRAM rows each device model stores (part of the netlist, so of the simulator build): the
    smallest power of two from 256 that holds every byte the ``plans`` touch. Runs that should share
    one build pass the same value to :func:`run_pod`."""
    return _rows_for(cfg, max(bench_plan(p)[2] for p in plans))


def _rows_for(cfg: PodConfig, end: int) -> int:
    hbm = cfg.engine.hbm
    per_row = hbm.capacity_bytes // hbm.rows
    rows = 256
    while rows * per_row < end and rows < hbm.rows:
        rows *= 2
    return rows


def run_pod(cfg: PodConfig, plan, *, sim: str = "verilator", flip_p: float = 0.0, seed: int = 1,
            timeout_cycles: int = 2_000_000, waves: str | None = None, rows: int | None = None) -> dict:
    """Run ``plan`` on the pod ``cfg`` in ``sim`` ("verilator" or "icarus").

    ``waves``: write a waveform there (.fst or .vcd). ``rows``: the device models' stored rows
    (:func:`stored_rows`; default: what ``plan`` needs).

    Returns:
        the dict of :func:`verif.pod_sim.run_pod_amaranth` (``results``, ``gemm_cycles``,
        ``collective_cycles``, ``phase_cycles``, ``links``) and ``build_s``, ``cached_build`` (an
        existing simulator build was reused), ``wall_s``, ``sim_cycles``.

    Raises:
        ValueError: ``rows`` is fewer than the plan needs.
        RuntimeError: the bench failed (a node's error status, a hang, a JEDEC violation): the message
            holds the end of the log.
    """
    from sim.runner import build_root, run_cocotb
    from verif.tb.base import PodTbConfig

    t0 = time.perf_counter()
    nodes, arrays, end = bench_plan(plan)
    stored = _rows_for(cfg, end)
    if rows is not None:
        if rows < stored:
            raise ValueError(f"rows {rows} is too few for the plan: it needs {stored}")
        stored = rows
    verilog = pod_verilog(cfg, stored)
    work = build_root() / "runs"
    work.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=work) as tmp:
        tmp = Path(tmp)
        np.savez(tmp / "arrays.npz", **arrays)
        conf = PodTbConfig(pod=cfg, nodes=nodes, arrays_npz=str(tmp / "arrays.npz"), out_npz=str(tmp / "out.npz"),
                           stored_rows=stored, timeout_cycles=timeout_cycles, flip_p=flip_p, seed=seed)
        res = run_cocotb([verilog], "pod_sim", "verif.tb.pod_tb", simulator=sim, env=conf.env(),
                         waves_path=Path(waves).resolve() if waves else None)
        if res.failed or not (tmp / "out.npz").is_file():
            raise RuntimeError(f"pod testbench failed on {sim}:\n{res.log_tail()}")
        out = dict(np.load(tmp / "out.npz"))
    results = [out[f"result{i}"].view(plan.acc_dtype) for i in range(len(nodes))]
    return {"results": results, "gemm_cycles": [int(x) for x in out["gemm_cycles"]],
            "collective_cycles": [[int(x) for x in out[f"collective_cycles{i}"]] for i in range(len(nodes))],
            "phase_cycles": [int(x) for x in out["phase_cycles"]],
            "links": {"replays": int(out["replays"]), "crc_errors": int(out["crc_errors"])},
            "sim_cycles": int(out["total_cycles"]), "build_s": res.build_s, "cached_build": res.cached_build,
            "wall_s": time.perf_counter() - t0}
