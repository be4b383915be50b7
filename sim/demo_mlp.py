"""The main job of ``mxu demo``: handwritten digits classified by an MLP whose every matrix product
runs on the GEMM engine RTL.

Steps (all deterministic for a given seed):

1. Data: scikit-learn's bundled 8x8 digits (1,797 images, pixel values 0..16, no download), scaled
   to [0, 1] in float32 and split 80/20, stratified (1,437 training, 360 held-out images).
2. Model: ``MLPClassifier`` 64 -> 32 (ReLU) -> 10 trained in float32 (Adam, 300 iterations).
3. Inference on the held-out images three ways:

   * **RTL**: layer 1 is ``H = b1 + X @ W1`` with X and W1 rounded RNE into the input format and the
     bias broadcast as the initial accumulator C0 (float32), one :func:`sim.gemm.run_gemms` call;
     ReLU on the host; ``logits = b2 + relu(H) @ W2`` likewise (a second call, as it depends on the
     first). The prediction is the arg-max of the logits.
   * **golden**: the same two GEMMs with :func:`verif.golden.matmul`; each RTL GEMM must match it
     bit for bit (checked per layer with the RTL's own inputs, so a layer-1 error does not hide a
     layer-2 one).
   * **float32 reference**: ``relu(X @ W1 + b1) @ W2 + b2`` in float32 numpy (the accuracy the
     trained model has without bf16 rounding).

:func:`run` returns the summary (``summary.json``); :func:`format_summary` prints it for people.
"""

from __future__ import annotations

import time
import warnings
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from verif.golden import relu  # the one ReLU: the RTL's layer 2 (in the testbench) and the golden path

__all__ = ["DemoConfig", "REPORT_FILES", "load_data", "train", "forward_float32", "run", "plot_digits",
           "format_summary"]

#: Files of the report folder, written together or not at all.
REPORT_FILES = ("summary.json", "digits.png")


@dataclass(frozen=True)
class DemoConfig:
    """Engine configuration and model of the demo (defaults: the published run)."""
    rows: int = 8
    cols: int = 8
    fmt: str = "bf16"
    subnormals: str = "ftz"
    stages: int = 2
    sim: str = "verilator"
    memory: str = "hdl"
    seed: int = 0
    hidden: int = 32
    test_fraction: float = 0.2
    max_iter: int = 300


def load_data(seed: int, test_fraction: float = 0.2):
    """The digits scaled to [0, 1] (float32), split stratified: (x_train, x_test, y_train, y_test)."""
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    digits = load_digits()
    x = (digits.data / 16.0).astype(np.float32)
    return train_test_split(x, digits.target, test_size=test_fraction, random_state=seed,
                            stratify=digits.target)


def train(x, y, *, hidden: int = 32, seed: int = 0, max_iter: int = 300):
    """Train the MLP; returns ((w1, b1, w2, b2) as float32 arrays, info dict)."""
    from sklearn.exceptions import ConvergenceWarning
    from sklearn.neural_network import MLPClassifier

    clf = MLPClassifier(hidden_layer_sizes=(hidden,), activation="relu", solver="adam",
                        max_iter=max_iter, random_state=seed)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)  # a fixed iteration budget is the point
        clf.fit(x, y)
    w1, w2 = (np.ascontiguousarray(w, dtype=np.float32) for w in clf.coefs_)
    b1, b2 = (np.ascontiguousarray(b, dtype=np.float32) for b in clf.intercepts_)
    return (w1, b1, w2, b2), {"iterations": int(clf.n_iter_),
                              "train_accuracy": float(clf.score(x, y))}


def trained_model(cfg: DemoConfig):
    """:func:`load_data` and :func:`train`, cached: a run with the same seed, split, width and
    iteration budget, scikit-learn and numpy reads the data split and the weights from the build cache
    (``cache/demo``) instead of importing scikit-learn and training again (a fixed seed makes both
    deterministic). Returns ``((x_train, x_test, y_train, y_test), (w1, b1, w2, b2), info)``;
    ``info["cached"]`` says which."""
    import hashlib
    import json
    from importlib.metadata import version

    from sim.runner import build_root

    key = json.dumps(["split+weights", cfg.seed, cfg.test_fraction, cfg.hidden, cfg.max_iter, version("scikit-learn"),
                      np.__version__])
    path = build_root() / "cache" / "demo" / f"mlp-{hashlib.sha256(key.encode()).hexdigest()[:16]}.npz"
    names = ("x_train", "x_test", "y_train", "y_test", "w1", "b1", "w2", "b2")
    if path.is_file():
        z = np.load(path)
        data, weights = (tuple(z[n] for n in part) for part in (names[:4], names[4:]))
        return data, weights, {**json.loads(str(z["info"])), "cached": True}
    data = load_data(cfg.seed, cfg.test_fraction)
    weights, info = train(data[0], data[2], hidden=cfg.hidden, seed=cfg.seed, max_iter=cfg.max_iter)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp.npz")
    np.savez(tmp, **dict(zip(names, (*data, *weights))), info=json.dumps(info))
    tmp.replace(path)  # atomic: a concurrent run reads the old file or the whole new one
    return data, weights, {**info, "cached": False}


def forward_float32(x, w1, b1, w2, b2):
    """float32 numpy inference: the reference accuracy."""
    return relu(x @ w1 + b1) @ w2 + b2


def _job(x, w, bias, fmt):
    from sim.gemm import GemmJob
    from verif.golden import to_format

    c0 = np.ascontiguousarray(np.broadcast_to(bias, (x.shape[0], w.shape[1])), dtype=np.float32)
    return GemmJob(to_format(x, fmt), to_format(w, fmt), c0, "fp32")


def _golden(job, cfg):
    from verif.golden import matmul
    return matmul(job.a, job.b, job.c, fmt=cfg.fmt, subnormals=cfg.subnormals)


def _layer_record(name, job, result, golden_bits, cfg, params):
    from verif.cycles import engine_array_cycles, gemm_cycles, ideal_cycles, scalesim_ws_cycles
    from verif.gemm_host import engine_error
    from verif.golden import compare_bits, result_bits

    m, k = job.a.shape
    n = job.b.shape[1]
    error = engine_error(result.status)
    bad = compare_bits(result_bits(result.bits, "fp32"), golden_bits) if error is None else []
    ideal = ideal_cycles(m, k, n, cfg.rows, cfg.cols)
    return {
        "layer": name, "m": m, "k": k, "n": n,
        "cycles": int(result.cycles),
        "predicted_cycles": gemm_cycles(m, k, n, cfg.rows, cfg.cols, cfg.stages),
        "engine_model_cycles": engine_array_cycles(m, k, n, params),
        "ideal_cycles": ideal,
        "scalesim_cycles": scalesim_ws_cycles(m, k, n, cfg.rows, cfg.cols),
        "utilization": round(ideal / result.cycles, 4) if result.cycles else None,
        "status": int(result.status), "engine_error": error,
        "bitexact": error is None and not bad,
        "mismatches": len(bad) if error is None else None,
        "first_mismatches": [list(ix) for ix in bad[:5]],
        "sim_cycles": int(result.sim_cycles),  # START to irq; the run's totals are in the summary
    }


def _round(value, digits: int = 2):
    if value is None:
        return None
    return round(float(value), digits) if digits else int(round(float(value)))


def run(cfg: DemoConfig = DemoConfig(), *, progress: bool = False, plot: Path | None = None) -> dict:
    """Train, infer on the RTL, the golden model and float32; return the summary dict.

    ``plot``: where to write the PNG of 16 held-out digits with the RTL's predictions (optional).

    Raises:
        ValueError: the engine refuses the configuration (from :func:`sim.gemm.run_gemms`).
        sim.runner.BuildError / SimulationError: the simulator failed.
    """
    from hw.engine import EngineConfig
    from sim import toolchain
    from sim.gemm import run_gemms

    t0 = time.perf_counter()
    (x_train, x_test, y_train, y_test), (w1, b1, w2, b2), train_info = trained_model(cfg)
    if plot is not None:  # matplotlib imports (about a second) while the simulator runs
        import threading

        threading.Thread(target=_import_pyplot, daemon=True).start()
    train_s = time.perf_counter() - t0
    ref_pred = forward_float32(x_test, w1, b1, w2, b2).argmax(axis=1)

    params = EngineConfig.from_options(rows=cfg.rows, cols=cfg.cols, fmt=cfg.fmt, subnormals=cfg.subnormals,
                                       stages=cfg.stages)
    # Both layers in one simulator run: layer 2's A is layer 1's RTL result after ReLU, rounded into
    # the format inside the testbench (GemmJob.a_from), the host computing the same for the golden model.
    from sim.gemm import GemmJob
    from verif.golden import to_format

    job1 = _job(x_test, w1, b1, cfg.fmt)
    c2 = np.ascontiguousarray(np.broadcast_to(b2, (x_test.shape[0], w2.shape[1])), dtype=np.float32)
    (res1, res2), info = run_gemms([job1, GemmJob(None, to_format(w2, cfg.fmt), c2, "fp32", a_from=0)], params,
                                   sim=cfg.sim, progress=progress, memory=cfg.memory)
    gold1 = _golden(job1, cfg)
    rec1 = _layer_record("hidden", job1, res1, gold1.view(np.uint32), cfg, params)
    # (an engine error in layer 1 fails the run: the testbench has no result to chain)
    job2 = _job(relu(np.ascontiguousarray(res1.result, dtype=np.float32)), w2, b2, cfg.fmt)
    gold2 = _golden(job2, cfg)
    rec2 = _layer_record("output", job2, res2, gold2.view(np.uint32), cfg, params)
    rtl_logits = np.ascontiguousarray(res2.result, dtype=np.float32)
    rtl_pred = rtl_logits.argmax(axis=1)
    # The golden model end to end (its own hidden activations).
    gold_pred = _golden(_job(relu(gold1), w2, b2, cfg.fmt), cfg).argmax(axis=1)

    layers = [rec1, rec2]
    sim_cycles = info.get("sim_cycles") or 0
    sim_wall = info.get("sim_wall_s") or 0
    n_test = len(y_test)
    if plot is not None:
        plot_digits(x_test[:16], y_test[:16], rtl_pred[:16], plot,
                    title=f"held-out digits: RTL predictions ({cfg.fmt}, {cfg.rows}x{cfg.cols} MXU)")
    sim_version = toolchain.tool_versions().get("iverilog" if cfg.sim == "icarus" else cfg.sim, "")
    return {
        # The flat fields the summary line prints, then the whole engine configuration.
        "config": {"rows": params.mxu.rows, "cols": params.mxu.cols, "fmt": params.mxu.fmt,
                   "subnormals": params.mxu.subnormals, "stages": params.mxu.stages,
                   "pseudo_channels": params.hbm.pseudo_channels, "sim": cfg.sim, "memory": cfg.memory,
                   "simulator_version": sim_version.split(";")[0], "engine": params.as_dict()},
        "model": {"layers": [64, cfg.hidden, 10], "activation": "relu", "trained_in": "float32",
                  "trainer": "sklearn.neural_network.MLPClassifier (adam)", "seed": cfg.seed,
                  **train_info, "train_s": round(train_s, 2)},
        "data": {"dataset": "sklearn.datasets.load_digits (8x8, 0..16 scaled to 0..1)",
                 "train_images": int(len(y_train)), "test_images": int(n_test)},
        "accuracy": {"rtl": round(float((rtl_pred == y_test).mean()), 4),
                     "golden": round(float((gold_pred == y_test).mean()), 4),
                     "float32_reference": round(float((ref_pred == y_test).mean()), 4)},
        "rtl_correct": int((rtl_pred == y_test).sum()),
        "reference_correct": int((ref_pred == y_test).sum()),
        "agreement_with_float32": round(float((rtl_pred == ref_pred).mean()), 4),
        "agreeing_predictions": int((rtl_pred == ref_pred).sum()),
        "bitexact": all(r["bitexact"] for r in layers) and bool((rtl_pred == gold_pred).all()),
        "results_checked": int(gold1.size + gold2.size),
        "gemms": layers,
        "engine_cycles": sum(r["cycles"] for r in layers),
        "sim_cycles": sim_cycles,
        "sim_cycles_per_s": round(sim_cycles / sim_wall) if sim_wall else None,
        "build_s": _round(info.get("build_s")),
        "cached_build": info.get("cached_build"),
        "wall_s": round(time.perf_counter() - t0, 2),
        "predictions_first_16": [int(p) for p in rtl_pred[:16]],
        "labels_first_16": [int(t) for t in y_test[:16]],
    }


def _import_pyplot():
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot  # noqa: F401


def plot_digits(images, labels, predictions, path: Path, *, title: str = "") -> None:
    """A 4 x 4 grid of 8x8 digits titled with the prediction (red with the true label when wrong)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    count = len(images)
    cols = 4
    rows = (count + cols - 1) // cols
    fig, axes = plt.subplots(rows, cols, figsize=(1.6 * cols, 1.8 * rows + 0.5), squeeze=False)
    for i, ax in enumerate(axes.flat):
        ax.set_axis_off()
        if i >= count:
            continue
        ax.imshow(np.asarray(images[i]).reshape(8, 8), cmap="gray_r", vmin=0, vmax=1, interpolation="nearest")
        ok = predictions[i] == labels[i]
        ax.set_title(f"RTL: {predictions[i]}" + ("" if ok else f" (true {labels[i]})"),
                     color="green" if ok else "red", fontsize=10)
    if title:
        fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def format_summary(s: dict) -> str:
    """The human summary printed by ``mxu demo``."""
    c, acc, model = s["config"], s["accuracy"], s["model"]
    n = s["data"]["test_images"]
    fmt = c["fmt"]
    lines = [
        "mxu demo: handwritten digits through an MLP whose GEMMs run on the GEMM engine RTL",
        f"  model         {model['layers'][0]} -> {model['layers'][1]} (ReLU) -> {model['layers'][2]}, "
        "trained in float32 on "
        f"{s['data']['train_images']} images (seed {model['seed']}, {model['iterations']} iterations, "
        f"{model['train_s']} s{', cached' if model.get('cached') else ''})",
        f"  engine        {c['rows']}x{c['cols']} MXU, {fmt} x {fmt} -> fp32 accumulate, "
        f"subnormals={c['subnormals']}, stages={c['stages']}, {c['pseudo_channels']} HBM pseudo-channels",
        f"  simulator     {c['sim']} {c['simulator_version']}".rstrip(),
        f"  held-out      {n} images, bias as the initial accumulator, ReLU on the host",
        f"  accuracy      RTL {acc['rtl']:.1%} ({s['rtl_correct']}/{n})   float32 reference "
        f"{acc['float32_reference']:.1%} ({s['reference_correct']}/{n})",
        f"  agreement     RTL and float32 predict the same digit for {s['agreeing_predictions']}/{n} images "
        f"({s['agreement_with_float32']:.1%})",
        f"  bit-exact     {'yes' if s['bitexact'] else 'NO'}: "
        + " + ".join(f"{g['m'] * g['n']:,}" for g in s["gemms"])
        + " results vs the golden model, "
        + ", ".join(f"{g['mismatches']} mismatches in {g['layer']}" if g["engine_error"] is None
                    else f"{g['layer']}: {g['engine_error']}" for g in s["gemms"]),
        "  GEMM          M x K x N      engine cycles  array model  ideal    utilization  SCALE-Sim WS",
    ]
    for g in s["gemms"]:
        shape = f"{g['m']}x{g['k']}x{g['n']}"
        util = f"{g['utilization']:.1%}" if g["utilization"] is not None else "-"
        lines.append(f"    {g['layer']:<10}  {shape:<13}  {g['cycles']:>13,}  {g['predicted_cycles']:>11,}  "
                     f"{g['ideal_cycles']:>7,.0f}  {util:>11}  {g['scalesim_cycles']:>12,}")
    rate = f"{s['sim_cycles_per_s']:,} cycles/s simulated" if s["sim_cycles_per_s"] else "rate unknown"
    lines += [
        f"  simulation    {s['sim_cycles']:,} cycles in total, {rate} "
        f"({'cached build' if s['cached_build'] else 'build ' + str(s['build_s']) + ' s'})",
        f"  wall time     {s['wall_s']} s",
    ]
    if "report" in s:
        lines.append(f"  report        {', '.join(s['report'].values())}")
    lines.append(f"  result        {'PASS: bit-exact' if s['bitexact'] else 'FAIL: not bit-exact'}")
    return "\n".join(lines)
