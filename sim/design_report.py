"""The numbers of a design review of one MXU configuration (``mxu report``), gathered into one JSON
object that the HTML page is rendered from (:mod:`sim.report_html`): nothing on the page is typed in.

Sections (keys of :func:`collect`'s result):

* ``config``: every parameter with its value, meaning and unit; the numerics contract for it; the
  port table and latency from the generated Verilog's manifest.
* ``hierarchy``: the component tree of the elaborated design (:func:`sim.diagram.hierarchy`) and its
  block diagram, generated from the design, not drawn by hand.
* ``timing``: one run of the MXU testbench's ``tiles_back_to_back`` (two tiles) on the generated
  Verilog in Icarus, its VCD kept beside the page; the ports and each row's swap bit sampled at every
  rising clock edge and drawn as a WaveDrom diagram (``yowasp-wavedrom``); the cycles of the weight,
  activation and output beats read from the trace against the cycle model's.
* ``cycles``: the cycle model's formula, its count for a few GEMMs beside SCALE-Sim v2's
  weight-stationary count and the ideal ``ceil(M K N / (R C))``, and the array's utilization against
  M for fixed K and N (a plot).
* ``fpga``: ``mxu synth`` of the array for the target (unless ``--no-synth``) and every ``mxu sweep``
  record of this configuration in the sweep cache.
* ``engine``: the array inside the GEMM engine with the HDL memory system
  (:mod:`sim.report_engine`): one GEMM's start traced in Icarus and drawn (WaveDrom), a few GEMMs'
  RTL cycles and performance counters against the engine's cycle model, and the roofline; or
  ``available: false`` with the reason when the engine does not take this array.
* ``memory``: one pseudo-channel controller of the engine's memory under each traffic pattern:
  efficiency against its bound, read latency percentiles against the DRAM's floor.
* ``verification``: the last regression run of this build folder per suite (simulators, seeds,
  values compared, outcomes, with its date and commit) and the mutation score of each block
  (``bench/results/mutation.json``), with the date and commit of its campaign.
"""

from __future__ import annotations

import json
import math
import time
from pathlib import Path

__all__ = ["PARAMETERS", "numerics", "trace_tile", "cycle_figures", "fpga_figures", "verification", "collect"]

#: MXU parameter -> (meaning, unit)
PARAMETERS = {
    "rows": ("PE rows R: the K extent of one weight tile (activation elements per beat)", "PEs"),
    "cols": ("PE columns C: the N extent of one weight tile (outputs per beat)", "PEs"),
    "fmt": ("input format of activations and weights (the multipliers' operands)", "-"),
    "subnormals": ("ftz: subnormal inputs and tiny results are signed zero; ieee: gradual underflow", "-"),
    "stages": ("pipeline stages L of each PE's MAC: its partial-sum latency", "cycles"),
    "backpressure": ("out__ready exists: a low ready stalls the whole array (else the consumer is always ready)",
                     "-"),
    "multiplier": ("generic: a*b and a fabric product register; ecp5: each product register is an ECP5 "
                   "MULT18X18D's output register", "-"),
}


def numerics(fmt: str, subnormals: str) -> list[tuple[str, str]]:
    """The numerics contract of the array for ``fmt`` and ``subnormals``: (knob, rule) rows, the same
    rules the golden model (``verif.golden``) and the manual's numerics page state."""
    if fmt == "int8":
        return [("inputs", "int8, two's complement"), ("product", "exact 16-bit"),
                ("accumulate", "int32, two's-complement wrap-around (never saturates)"),
                ("subnormals, NaN, rounding", "do not apply")]
    decode = "" if fmt == "bf16" else f" ({fmt} decoded exactly to bf16 in front of the multiplier)"
    sub = ("ftz: subnormal inputs (a, b, acc) read as signed zero; results below 2^-126 after rounding "
           "flush to signed zero" if subnormals == "ftz" else "ieee: gradual underflow")
    return [("inputs", fmt + decode), ("product", "exact: 8 x 8-bit significands, no rounding"),
            ("accumulate", "fp32, fused: acc <- RNE_fp32(acc + a*b), one rounding per MAC (IEEE 754-2019 "
                           "roundTiesToEven)"),
            ("subnormals", sub),
            ("NaN", "NaN input, inf*0 and inf-inf give NaN; the hardware emits 0x7FC00000"),
            ("overflow", "to +-inf; never saturates"),
            ("zero sign", "x + (-x) = +0; (-0) + (-0) = -0 (IEEE 754-2019 6.3)")]


def trace_tile(cfg, work: Path, *, seed: int = 1) -> dict:
    """Run ``tiles_back_to_back`` with two tiles of R + 1 and 2 activation beats on the generated MXU in
    Icarus (and a third of one beat after them), keep its VCD (``work/tile.vcd``), and draw the ports
    and each row's swap bit from reset to the last output as ``work/tile.svg`` (WaveDrom, its cycle 0
    the first weight beat). Returns the
    figures: the cycle of every weight, activation and output beat counted from the first weight beat,
    read from the trace, and the cycle model's (:func:`verif.cycles.mxu_schedule`) for the same tiles;
    ``matches`` is their equality.

    Raises:
        RuntimeError: the testbench failed (its message names the log).
    """
    import yowasp_wavedrom

    from hw.generate import mxu_verilog
    from sim.runner import generate_verilog, run_cocotb
    from sim.waves import sample as _sample
    from sim.waves import wave as _wave
    from verif.cycles import mxu_schedule

    work.mkdir(parents=True, exist_ok=True)
    tiles = [cfg.rows + 1, 2, 1]  # the third only runs the trace past the second's last output
    verilog = generate_verilog(lambda: mxu_verilog(cfg, "mxu"), name="mxu", key=cfg)
    conf = {**cfg.as_dict(), "seed": seed, "tiles": tiles, "specials": 0.0}
    vcd = work / "tile.vcd"
    res = run_cocotb([verilog], "mxu", "verif.tb.mxu_tb", simulator="icarus", testcase="tiles_back_to_back",
                     env={"MXU_TB_CONFIG": json.dumps(conf)}, waves_path=vcd, seed=seed)
    if res.failed or not res.passed:
        raise RuntimeError(f"tiles_back_to_back failed on the traced MXU (log: {res.log})")
    swap_bit = cfg.rows * cfg.operand_bits + 32 * cfg.cols  # act payload: Cat(a[R], c[C], swap)
    ports = {n: f"mxu.{n}" for n in ("rst", "wgt__valid", "wgt__ready", "act__valid", "act__ready",
                                     "out__valid", "out__ready", "act__payload")}
    rows_swap = {f"row_{r}.swap": f"mxu.row_{r}.pe_0.swap_q" for r in range(cfg.rows)}
    samples = _sample(vcd, {**ports, **rows_swap}, "mxu.clk")
    for s in samples:
        p = s.pop("act__payload")
        s["act swap"] = None if p is None else (p >> swap_bit) & 1
    start = next(i for i, s in enumerate(samples) if s["rst"] == 0)
    fire = {k: [i for i, s in enumerate(samples) if s[f"{k}__valid"] == 1 and s[f"{k}__ready"] == 1]
            for k in ("wgt", "act", "out")}
    first = fire["wgt"][0]
    sched = mxu_schedule(cfg.rows, cfg.cols, cfg.stages, tiles)
    origin = sched.tiles[0].load
    beats = {"wgt": 2 * cfg.rows, "act": tiles[0] + tiles[1], "out": tiles[0] + tiles[1]}  # two tiles
    model = {"wgt": [c - origin for c in sched.weight_cycles(cfg.rows)][:beats["wgt"]],
             "act": [c - origin for c in sched.act_cycles()][:beats["act"]],
             "out": [c - origin for c in sched.output_cycles][:beats["out"]]}
    rtl = {k: [c - first for c in v][:beats[k]] for k, v in fire.items()}
    end = first + model["out"][-1] + 2
    shown = ["wgt__valid", "wgt__ready", "act__valid", "act__ready", "act swap", *rows_swap, "out__valid",
             "out__ready"]
    window = samples[max(0, start - 1):end]
    source = {"signal": [{"name": "clk", "wave": "p" + "." * (len(window) - 1)}]
              + [{"name": n, "wave": _wave([s[n] for s in window])} for n in shown],
              "head": {"text": f"{cfg.rows}x{cfg.cols} {cfg.fmt}, L = {cfg.stages}: two weight tiles "
                               f"({tiles[0]} and {tiles[1]} activation beats), cycles from the first weight beat",
                       "tick": max(0, start - 1) - first},
              "config": {"hscale": 1}}
    (work / "tile.svg").write_text(yowasp_wavedrom.render(source))
    (work / "tile.wavedrom.json").write_text(json.dumps(source))
    return {"svg": "tile.svg", "vcd": "tile.vcd", "wavedrom": "tile.wavedrom.json", "simulator": "icarus",
            "testbench": "verif.tb.mxu_tb:tiles_back_to_back", "seed": seed, "tiles": tiles[:2],
            "cycles_shown": len(window), "rtl": rtl, "model": model, "matches": rtl == model,
            "latency_cycles": sched.latency_cycles, "gap_cycles": sched.gap_cycles,
            "hold_cycles": sched.hold_cycles}


def cycle_figures(cfg, gemms=None, util_k: int | None = None, util_n: int | None = None,
                  util_m=(1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024)) -> dict:
    """The cycle model against SCALE-Sim v2's weight-stationary count and the ideal for ``gemms``
    ((M, K, N) triples; default: one tile, 4 x 4 tiles, 256^3), and the utilization (ideal / model)
    against M for K = ``util_k`` (default 4 R) and N = ``util_n`` (default 4 C)."""
    from verif.cycles import gemm_cycles, ideal_cycles, scalesim_ws_cycles

    R, C, L = cfg.rows, cfg.cols, cfg.stages
    gemms = gemms or [(R, R, C), (4 * R, 4 * R, 4 * C), (256, 256, 256)]
    rows = []
    for m, k, n in gemms:
        model = gemm_cycles(m, k, n, R, C, L)
        rows.append({"m": m, "k": k, "n": n, "model": model, "scalesim_ws": scalesim_ws_cycles(m, k, n, R, C),
                     "ideal": math.ceil(ideal_cycles(m, k, n, R, C)),
                     "utilization": round(ideal_cycles(m, k, n, R, C) / model, 4)})
    k, n = util_k or 4 * R, util_n or 4 * C
    util = [{"m": m, "utilization": round(ideal_cycles(m, k, n, R, C) / gemm_cycles(m, k, n, R, C, L), 4)}
            for m in util_m]
    return {"formula": ("tiles of K x N in R x C blocks, each tile's M activation beats back to back; "
                        f"D = R L + C - 1 = {R * L + C - 1} cycles from a beat to its output, "
                        f"a new tile's weights load in R = {R} cycles behind the previous tile"),
            "gemms": rows, "utilization": {"k": k, "n": n, "points": util}}


def fpga_figures(cfg, target: str, resolve=None) -> dict:
    """``mxu synth``'s out-of-context flow of the array on ``target`` (seed 1, 100 MHz requested) as a
    sweep point, from the sweep cache when it holds it (``resolve``: ``sim.cli.sweep.resolve_point``;
    None: not synthesized); the ``mxu sweep`` records of this configuration on ``target`` in the cache
    made from the current sources and tools (every seed and requested frequency); and ``per_pe``: LUT4
    and flip-flops per PE and Fmax of every such array of this format and subnormal mode on ``target``
    (any size, stages, back-pressure)."""
    from sim.runner import build_root

    out = {"target": target, "synth": None, "sweep": [], "per_pe": []}
    if resolve is not None:
        from sim import sweep

        rec = sweep.run_cached(sweep.make_point({"block": "mxu", **cfg.as_dict(), "target": target, "seed": 1,
                                                 "freq": 100}), resolve)
        if rec["status"] != "ok":
            raise RuntimeError(f"synthesis of the array on {target}: {rec['status']}: {rec.get('error')}")
        out["synth"] = {"cells": {k: rec[k] for k in ("lut4", "ff", "carry", "dsp", "bram", "lutram")},
                        "requested_mhz": rec["requested_mhz"], "achieved_mhz": rec["achieved_mhz"],
                        "met": rec["met"], "critical_path": rec["critical_path"], "seed": 1,
                        "cached": rec["cached"]}
    from hw.mxu import MXUConfig
    from sim.sweep import fingerprint

    keys = ("rows", "cols", "fmt", "subnormals", "stages", "backpressure", "multiplier")
    fp = fingerprint()
    for f in sorted((build_root() / "cache" / "sweep").glob("*.json")):
        rec = json.loads(f.read_text())
        o = rec.get("options", {})
        if rec.get("status") != "ok" or o.get("block") != "mxu" or "preset" in o or o.get("target") != target:
            continue
        if rec.get("fingerprint") != fp:  # made from other hardware sources or tools: not this design's
            continue
        try:  # the sweep's options with MXUConfig's defaults for the ones it did not give
            other = MXUConfig(**{k: o[k] for k in keys if k in o})
        except (TypeError, ValueError):
            continue
        if other == cfg:
            out["sweep"].append({k: rec.get(k) for k in ("options", "lut4", "ff", "dsp", "bram", "achieved_mhz",
                                                          "requested_mhz", "gemm", "gemm_gmacs")})
        if (other.fmt, other.subnormals) == (cfg.fmt, cfg.subnormals):
            out["per_pe"].append({"rows": other.rows, "cols": other.cols, "stages": other.stages,
                                  "backpressure": other.backpressure, "seed": o.get("seed", 1),
                                  "lut4_per_pe": round(rec["lut4"] / (other.rows * other.cols), 1),
                                  "ff_per_pe": round(rec["ff"] / (other.rows * other.cols), 1),
                                  "achieved_mhz": rec.get("achieved_mhz")})
    # one per array, stages, back-pressure and seed (a report's point and a sweep's of the same array)
    seen = {}
    for r in out["per_pe"]:
        seen.setdefault((r["rows"], r["cols"], r["stages"], r["backpressure"], r["seed"]), r)
    out["per_pe"] = sorted(seen.values(),
                           key=lambda r: (r["rows"] * r["cols"], r["rows"], r["backpressure"], r["stages"], r["seed"]))
    return out


def verification() -> dict:
    """The last regression run per suite (:func:`sim.test_record.suites`: tests and outcomes,
    simulators, seeds, values compared, with the run's date and commit; None when no run was
    recorded in this build folder) and the mutation campaigns of ``bench/results/mutation.json``:
    per campaign the block, its configuration, the score and counts, and the date and commit it was
    run at."""
    from sim import test_record
    from sim.runner import repo_root

    run = test_record.suites()
    path = repo_root() / "bench" / "results" / "mutation.json"
    if not path.is_file():
        return {"run": run, "mutation": []}
    rows = []
    for c in json.loads(path.read_text())["campaigns"]:
        s = c["summary"]
        rows.append({"campaign": c["campaign"], "block": c["block"], "simulator": c["simulator"],
                     "mutants": s["mutants"], "killed": s["killed"] + s.get("timeout", 0),
                     "equivalent": s["equivalent"], "survived": s["survived"], "score_pct": s["score_pct"],
                     "equivalence_depth": c.get("equivalence_depth"),
                     "regression": c.get("regression"), "date": c.get("date"), "commit": c.get("commit")})
    return {"run": run, "mutation": rows, "source": "bench/results/mutation.json"}


def collect(cfg, out: Path, *, target: str = "ecp5-85k", resolve=None, progress=None, sim: str = "verilator",
            hbm_scale: float = 0.2) -> dict:
    """Every section of the report of MXU configuration ``cfg``, its files written into ``out``
    (the traces, the diagrams); returns the JSON object of ``report.json``. ``resolve``: synthesize
    the array (:func:`fpga_figures`); None leaves the synthesis out. ``sim``: the simulator of the
    engine's GEMMs and the controller's traffic; ``hbm_scale``: the traffic's length
    (:func:`sim.report_engine.hbm_figures`)."""
    from hw.generate import manifest
    from hw.mxu import MXU
    from sim import report_engine
    from sim.cli.files import project_info

    say = progress or (lambda s: None)
    t0 = time.perf_counter()
    say("manifest")
    comp = MXU(cfg)
    comp._MustUse__silence = True  # only its ports are read
    man = manifest(comp, cfg, name="mxu", latency_cycles=cfg.latency_cycles, meanings=comp.port_meanings())
    from sim.diagram import block_svg, hierarchy

    tree = hierarchy(MXU(cfg), "mxu")
    (out / "block.svg").write_text(block_svg(tree))
    doc = {"config": {"parameters": {k: {"value": v, "meaning": PARAMETERS[k][0], "unit": PARAMETERS[k][1]}
                                     for k, v in cfg.as_dict().items()},
                      "numerics": numerics(cfg.fmt, cfg.subnormals), "ports": man["ports"],
                      "latency_cycles": man["latency_cycles"]},
           "hierarchy": {"svg": "block.svg", "tree": tree}}
    say("simulating one tile (Icarus)")
    doc["timing"] = trace_tile(cfg, out)
    say("cycle model")
    doc["cycles"] = cycle_figures(cfg)
    ecfg, why = report_engine.engine_config(cfg)
    if ecfg is None:  # the memory section is the engine's default memory's, whatever the array
        from hw.engine import EngineConfig

        doc["engine"] = {"available": False, "reason": why}
        say(f"HBM controller traffic ({sim})")
        doc["memory"] = report_engine.hbm_figures(EngineConfig(), sim=sim, scale=hbm_scale)
    else:
        say("engine GEMM start (Icarus)")
        start = report_engine.trace_engine_start(ecfg, out)
        say(f"engine GEMMs ({sim})")
        doc["engine"] = {"available": True, "config": ecfg.as_dict(), "start": start,
                         **report_engine.engine_gemms(ecfg, sim=sim)}
        say(f"HBM controller traffic ({sim})")
        doc["memory"] = report_engine.hbm_figures(ecfg, sim=sim, scale=hbm_scale)
    say("synthesis" if resolve else "sweep cache")
    doc["fpga"] = fpga_figures(cfg, target, resolve)
    doc["verification"] = verification()
    doc["project"] = project_info()
    doc["wall_s"] = round(time.perf_counter() - t0, 1)
    return doc
