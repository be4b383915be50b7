"""``mxu pod demo``: the digits MLP on a pod of GEMM engines, inference tensor-parallel (the
Megatron pattern) and a few steps of data-parallel training, every GEMM on the pod RTL."""

from __future__ import annotations

import argparse
import json

from .errors import UsageError
from .files import check_build_dir, check_out_dir, progress_enabled, write_outputs
from .options import (
    SIMULATORS,
    add_pod_options,
    check_ring,
    float_range_arg,
    nonnegative_arg,
    out_dir_arg,
    positive_arg,
    seed_arg,
)

__all__ = ["add_parser", "run"]


def add_parser(psub) -> None:
    """Add the ``demo`` subcommand to the ``mxu pod`` parser's subparsers ``psub``."""
    d = psub.add_parser(
        "demo", help="the digits MLP on the pod: tensor-parallel inference and data-parallel training, bit for bit",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="""\
The MLP of mxu demo (64 -> 32 ReLU -> 10, trained in float32 on scikit-learn's 8x8 digits, seed
--seed) on a pod of --devices nodes (GEMM engine, collective engine and HBM memory each, on a ring of
ICI links), every matrix product run on the pod's RTL and compared bit for bit with the golden model
of its sharding (verif.golden.collectives):

1. Inference of the 360 held-out images, the Megatron pattern: layer 1 tensor-parallel by columns
   (node r holds W1[:, cols_r] and b1[cols_r] as C0), ReLU on the host per node, layer 2
   row-parallel (node r holds its own relu(H_r) and W2[rows_r]) with the partial logits all-reduced
   by the collective engines, so every node holds the logits (b2 on node 0).
2. --steps steps of data-parallel SGD (--lr) from the trained model: each minibatch of --batch
   training images split by rows over the nodes; the forward, dW2 = relu(H_r)^T dZ_r, dH = dZ W2^T
   and dW1 = X_r^T (dH_r * mask_r) on the engines, each weight gradient all-reduced over the ICI;
   softmax, the ReLU mask, the bias gradients (column sums) and the update on the host in float32.
3. The inference again with the updated weights.

Prints a summary (--json: the summary as one JSON object) and writes <out>/summary.json.

JSON fields: config (the pod; pod: the whole configuration), model, data, hidden_split (hidden
units per node), inference and after_training (images, accuracy {rtl, float32_reference},
rtl_correct, reference_correct, agreeing_predictions, loss {rtl, float32_reference} (mean
cross-entropy), nodes_agree; after_training is null with --steps 0), training (init, optimizer, lr,
batch, batch_split, minibatch_seed, steps: [{step, loss (the minibatch's, from the engines'
logits), loss_float32_reference, gradient_norm}]), phases (one per run of the pod: part, phase,
sharding, collective, m, k, n, node_gemms, gemm_cycles and collective_cycles per node,
phase_cycles, pod_cycles, gemm_phase_cycles, collective_phase_cycles, collective_payload_beats,
link_utilization, replays, crc_errors, results_checked, mismatches, nodes_differ, bitexact,
sim_cycles, build_s, cached_build, wall_s), bitexact, nodes_agree, results_checked, mismatches,
pod_cycles, gemm_cycles, collective_cycles (the phases' sums), gemm_share, collective_share,
cycles_by_part (inference, training, after_training: the same sums and their runs), runs,
sim_cycles, sim_wall_s, build_s, cached_build, wall_s, report.

Exit status: 0 when every result is bit-exact and every node holds the same logits; 1 when not, or
when a node reports an error (summary.json still written in the first case); 2 for bad input (one
line on stderr, nothing written).""")
    add_pod_options(d, devices_default=4,
                    fmt_help="input format: bf16 (default), fp8_e4m3fn or fp8_e5m2 (the MLP runs float formats)")
    d.add_argument("--sim", choices=SIMULATORS, default="verilator",
                   help="verilator (default) or icarus: every node's HBM controller, device models and JEDEC "
                        "checkers in the netlist")
    d.add_argument("--seed", type=seed_arg, default=0,
                   help="the data split and the MLP's training (as mxu demo) and the minibatches (default 0)")
    d.add_argument("--steps", type=nonnegative_arg, default=3,
                   help="data-parallel training steps; 0: inference only (default 3)")
    d.add_argument("--batch", type=positive_arg, default=64, metavar="B",
                   help="training images per step, split by rows over the nodes (default 64; at most the 1,437 "
                        "training images, at least one per node)")
    d.add_argument("--lr", type=float_range_arg(0, 10, "a learning rate"), default=0.05,
                   help="SGD learning rate (default 0.05)")
    d.add_argument("-o", "--out", type=out_dir_arg, default=None,
                   help="report folder for summary.json (default: build/pod-demo in the repository, or "
                        "$MXU_BUILD_DIR/pod-demo)")
    d.add_argument("--json", action="store_true", help="print the summary as one JSON object on stdout")


def run(args) -> int:
    """Run ``mxu pod demo``; returns the exit status."""
    from sim import pod_demo, runner, toolchain

    check_ring(args)
    cfg = pod_demo.PodDemoConfig(
        devices=args.devices, absent=args.absent, rows=args.rows, cols=args.cols, fmt=args.fmt,
        subnormals=args.subnormals, stages=args.stages, pseudo_channels=args.pseudo_channels,
        link_bytes=args.link_bytes, link_latency=args.link_latency, bidirectional=args.bidirectional, sim=args.sim,
        seed=args.seed, steps=args.steps, batch=args.batch, lr=args.lr)
    try:
        cfg.check()
    except (TypeError, ValueError) as e:
        raise UsageError(str(e).splitlines()[0]) from None
    try:
        toolchain.check_simulator(args.sim)
    except toolchain.SimulatorUnavailable as e:
        raise UsageError(str(e)) from None
    out = args.out if args.out is not None else runner.build_root() / "pod-demo"
    check_out_dir(out, pod_demo.REPORT_FILES)  # before training, the build and the simulation
    check_build_dir()
    summary = pod_demo.run(cfg, progress=progress_enabled())
    summary["report"] = {name: str(out / name) for name in pod_demo.REPORT_FILES}
    write_outputs(out, {"summary.json": json.dumps(summary, indent=2) + "\n"})
    if args.json:
        print(json.dumps(summary))
    else:
        print(pod_demo.format_summary(summary))
    return 0 if summary["bitexact"] else 1
