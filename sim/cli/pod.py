"""``mxu pod``: ``mxu pod matmul``, one GEMM sharded over a pod of GEMM engines on an ICI ring, checked
bit for bit, and ``mxu pod demo`` (:mod:`sim.cli.pod_demo`), the digits MLP on the pod."""

from __future__ import annotations

import argparse
import time

from .errors import UsageError
from .files import check_build_dir, check_out_file, gemm_shape, initial_c, load_npy, operand, progress_enabled
from .options import add_pod_options, check_ring, npy_path_arg
from .pod_demo import add_parser as add_demo_parser
from .pod_demo import run as run_demo
from .report import finish_gemm

__all__ = ["add_parser", "run"]

SHARDINGS = ("dp", "tp", "fsdp", "tp-k")
#: the pod's simulators: Verilator and Icarus run every node's HBM controller with the HDL device
#: models and JEDEC checkers; "amaranth" runs the Amaranth simulator with a checked behavioural AXI4
#: memory in place of each node's controller (no build, slow per cycle: small shapes)
POD_SIMULATORS = ("verilator", "icarus", "amaranth")


def add_parser(sub) -> None:
    """Add the ``pod`` command (with its ``matmul`` and ``demo`` subcommands) to the ``mxu`` parser's
    subparsers."""
    pod = sub.add_parser("pod", help="run sharded GEMMs and the digits MLP on a pod of GEMM engines joined by an "
                                     "ICI ring")
    psub = pod.add_subparsers(dest="pod_command", metavar="POD_COMMAND", parser_class=type(pod))
    psub.required = True
    m = psub.add_parser(
        "matmul", help="one GEMM C = A @ B (+ C0) sharded over the pod, checked bit for bit",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="""\
Shard C = C0 + A @ B over --devices nodes of a pod (each a GEMM engine, a collective engine and its
memory, on a bidirectional ring of ICI links), run it through the pod's RTL, compare every result
bit for bit with the golden model of the sharding (verif.golden.collectives.sharded_matmul), write C
and print one JSON object on stdout.

Shardings (shards as numpy.array_split, node r gets part r):

- dp: A by rows (the batch), B on every node; C comes back by rows.
- tp: B by columns (tensor parallel), A on every node; C comes back by columns.
- fsdp: B stored by rows, all-gathered by the collective engines before the product; A by rows.
- tp-k: A by columns and B by rows, each node a partial product over its slice of K (node 0's
  from C0), summed by the collective engines' all-reduce (reduce-scatter then all-gather, adds in
  the ring order the golden model defines); every node ends with all of C.

dp, tp and fsdp give the single engine's bits (verif.golden.matmul); tp-k its own order's.

Inputs follow mxu matmul's rules (A is M x K, B is K x N, .npy; --bits for raw bit patterns).

JSON fields: m, k, n, devices (the live nodes: --devices less the --absent slots), slots
(--devices), absent, sharding, bidirectional, rows, cols, stages, fmt,
subnormals, link_bytes, link_latency, sim, gemm_cycles (per node, start to done), collective_cycles
(per node, each collective), phase_cycles (the pod's cycles per phase: collectives before, GEMMs,
collectives after, each from the first start to the last node's done), pod_cycles (their sum),
collective_payload_beats (link beats of data the collectives sent, all links), link_utilization
(those beats over the collective phases' cycles times the links in use), replays and crc_errors
(all links), nodes_differ (tp-k: ranks whose copy of C is not node 0's), single_engine_cycles (the
same GEMM on the first live node of the same pod, the others idle), scaling_efficiency
(single_engine_cycles / (devices * pod_cycles)), bitexact, mismatches, wall_s, output.

Exit status: 0 when every result is bit-exact; 1 when any differs (C.npy still written, holding
the RTL's results) or a node reports an error; 2 for bad input (one line on stderr, nothing
written).""")
    m.add_argument("a", type=npy_path_arg, metavar="A.npy", help="left operand, M x K")
    m.add_argument("b", type=npy_path_arg, metavar="B.npy", help="right operand, K x N")
    m.add_argument("-o", "--out", required=True, type=npy_path_arg, metavar="C.npy",
                   help="where to write the M x N result (.npy; written atomically)")
    m.add_argument("--c", type=npy_path_arg, default=None, metavar="C0.npy",
                   help="initial accumulator, M x N (float32; integers for int8); default +0")
    m.add_argument("--sharding", choices=SHARDINGS, required=True, help="how C = A @ B is split (see above)")
    add_pod_options(m)
    m.add_argument("--bits", action="store_true", help="A and B hold raw bit patterns (as mxu matmul)")
    m.add_argument("--sim", choices=POD_SIMULATORS, default="verilator",
                   help="verilator (default) or icarus: every node's HBM controller, device models and JEDEC "
                        "checkers in the netlist; amaranth: the Amaranth simulator, each node's memory a checked "
                        "behavioural AXI4 memory in place of its controller (no build; small shapes)")
    add_demo_parser(psub)


def run(args) -> int:
    """Run ``mxu pod matmul`` or ``mxu pod demo``; returns the exit status."""
    if args.pod_command == "demo":
        return run_demo(args)
    t0 = time.perf_counter()
    check_ring(args)
    check_out_file(args.out, suffix=".npy")
    m, k, n = gemm_shape(args.a, args.b, args.c)

    import numpy as np

    from hw.engine import EngineConfig
    from hw.pod.config import PodConfig, pod_link
    from verif.golden import compare_bits
    from verif.golden.collectives import sharded_matmul
    from verif.pod_host import assemble, collective_payload_beats, plan_matmul, plan_single
    from verif.pod_sim import run_pod_amaranth

    try:
        engine = EngineConfig.from_options(rows=args.rows, cols=args.cols, fmt=args.fmt, subnormals=args.subnormals,
                                           stages=args.stages, pseudo_channels=args.pseudo_channels)
        link = pod_link(beat_bytes=args.link_bytes, latency_cycles=args.link_latency)
        cfg = PodConfig(engine=engine, link=link, nodes=args.devices, absent=args.absent)
    except (TypeError, ValueError) as e:
        raise UsageError(str(e)) from None
    fmt, sub = engine.mxu.fmt, engine.mxu.subnormals
    devices = len(cfg.live)
    a = operand(load_npy(args.a, "A"), "A", args.a, fmt, args.bits)
    b = operand(load_npy(args.b, "B"), "B", args.b, fmt, args.bits)
    c = initial_c(load_npy(args.c, "--c"), args.c, fmt, m, n) if args.c is not None else None
    try:
        plan = plan_matmul(cfg, a, b, c, args.sharding, bidirectional=args.bidirectional)
        single = plan_single(cfg, a, b, c)
    except ValueError as e:
        raise UsageError(str(e)) from None
    bar = None
    if progress_enabled():
        import sys

        from tqdm import tqdm
        bar = tqdm(total=2, desc="pod", unit="run", file=sys.stderr, leave=False,
                   bar_format="{desc}: {n_fmt}/{total_fmt} [{elapsed}] {postfix}")
        bar.set_postfix_str(f"{devices} nodes, {args.sharding}")
    if args.sim == "amaranth":
        def run_on(p):
            return run_pod_amaranth(cfg, p)
    else:
        from sim import toolchain
        from sim.pod import run_pod, stored_rows

        check_build_dir()
        try:
            toolchain.check_simulator(args.sim)
        except toolchain.SimulatorUnavailable as e:
            raise UsageError(str(e)) from None

        rows = stored_rows(cfg, plan, single)  # one netlist, so one build, for both runs

        def run_on(p):
            return run_pod(cfg, p, sim=args.sim, rows=rows)
    try:
        res = run_on(plan)
        if bar:
            bar.update(1)
            bar.set_postfix_str("the same GEMM on one node")
        one = run_on(single)
    except AssertionError as e:     # a node's error status, a protocol error or a hang
        raise RuntimeError(str(e).splitlines()[0]) from None
    finally:
        if bar:
            bar.close()
    payload = collective_payload_beats(cfg, plan)
    phases = res["phase_cycles"]
    n_before = max(len(nd.before) for nd in plan.nodes)
    coll_cycles = sum(phases[:n_before]) + sum(phases[n_before + 1:])
    links = devices * (2 if args.bidirectional else 1)
    pod_cycles = sum(phases)
    report = {
        "m": m, "k": k, "n": n, "devices": devices, "slots": args.devices, "absent": list(args.absent),
        "sharding": args.sharding, "bidirectional": args.bidirectional, "rows": args.rows, "cols": args.cols,
        "stages": args.stages, "fmt": fmt, "subnormals": sub, "link_bytes": args.link_bytes,
        "link_latency": args.link_latency, "sim": args.sim,
        "gemm_cycles": res["gemm_cycles"], "collective_cycles": res["collective_cycles"], "phase_cycles": phases,
        "pod_cycles": pod_cycles, "collective_payload_beats": payload,
        "link_utilization": round(payload / (coll_cycles * links), 4) if coll_cycles and devices > 1 else None,
        "replays": res["links"]["replays"], "crc_errors": res["links"]["crc_errors"],
        "single_engine_cycles": one["gemm_cycles"][0],
        "scaling_efficiency": round(one["gemm_cycles"][0] / (devices * pod_cycles), 4),
        "nodes_differ": None, "bitexact": None, "mismatches": None, "wall_s": None, "output": None,
    }
    rtl = assemble(plan, res["results"]).view(np.uint32)
    golden = sharded_matmul(a, b, c, devices=devices, sharding=args.sharding, fmt=fmt, subnormals=sub,
                            bidirectional=args.bidirectional).view(np.uint32)
    differ = [r for r, x in enumerate(res["results"]) if args.sharding == "tp-k"
              and not np.array_equal(x.view(np.uint32), rtl)]
    report["nodes_differ"] = differ
    status = finish_gemm(args.out, "fp32", fmt, report, rtl, golden, compare_bits(rtl, golden), t0, source="pod")
    if differ:
        import sys
        print(f"mxu: nodes {differ} hold a C that differs from node 0's", file=sys.stderr)
        return 1
    return status
