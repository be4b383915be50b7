"""Benchmark: the FPGA flow (``sim.synth``) on the project's blocks: area and Fmax per pipeline depth,
the 8x8 bf16 MXU on ECP5-85k, the int8 4x4 MXU on the UP5K, and the largest arrays per target.

Writes ``bench/results/synth_scale.json`` (updated after every run, so an interrupted benchmark keeps
what it measured) and ``bench/results/synth_stages.png``. Sections (``--only``, comma list):

``stages``
    bf16 and int8 MAC (stages 0..9) and PE (stages 1..9) on ecp5-25k and ecp5-85k at 100 MHz
    requested: block LUT4 / CCU2C / FF / DSP (Yosys) and achieved Fmax (nextpnr), plus the plot.
``mxu85k``
    8x8 bf16 MXU without back-pressure (as the GEMM engine uses it) on ecp5-85k, requested 100 MHz,
    stages ``--mxu85k-stages`` (default 9, the deepest MAC pipeline).
``up5k``
    int8 4x4 MXU (the ``ice40-int8-4x4`` preset, 1 stage) on ice40-up5k: with DSPs (16 SB_MAC16
    needed, 8 there: reported as not fitting) and with LUT multipliers (placed and routed).
``largest``
    The largest bf16 and int8 arrays per target (bf16 with ``--largest-bf16-stages``, int8 with
    1 stage). Fit is judged from synthesized cell counts
    (``sim.synth.fit_problems``: lower bounds of LUT4 sites / logic cells, FF, DSP, block RAM vs the
    part): square N x N by doubling N then bisection, then columns C in [N, 2N] by bisection for
    N rows; the largest fitting N x C is then placed and routed once to confirm; if placement fails,
    C (then N) steps down by one, at most ``--max-confirm`` attempts. The search synthesizes ECP5
    arrays hierarchically (``flatten=False``: each module once, so time does not grow with R x C)
    and iCE40 arrays flat; a hierarchical run that fails (Yosys 0.70's abc9 asserts on some
    hierarchical designs, e.g. every int8 array here) is repeated flat. The confirming place and
    route always uses the flat netlist, as ``mxu synth`` does; an array already placed by the
    ``mxu85k`` section is reused, not placed again. Bounds:
    N <= 64, and each place and route is stopped after ``--pnr-timeout`` s (reported).

Usage (the machine may be shared: run niced, one flow at a time, which this script does)::

    nice -n 10 .venv/bin/python bench/synth_scale.py [--only stages,up5k,largest,mxu85k]

YoWASP tools cannot see the real /tmp: work folders are under ``build/bench/synth_scale``.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import time
from pathlib import Path

from hw.arith import MAC, MAX_STAGES, MACConfig
from hw.generate import mxu_verilog
from hw.mxu import MXUConfig
from hw.pe import PE, PEConfig
from sim import synth
from sim.runner import generate_verilog

ROOT = Path(__file__).resolve().parents[1]

RESULTS = ROOT / "bench" / "results" / "synth_scale.json"
PLOT = ROOT / "bench" / "results" / "synth_stages.png"
WORK = ROOT / "build" / "bench" / "synth_scale"


def log(*a):
    print(time.strftime("%H:%M:%S"), *a, file=sys.stderr, flush=True)


def _verilog(block: str, cfg):
    if block == "mac":
        return generate_verilog(lambda: MAC(cfg), name="mac", key=cfg), "mac"
    if block == "pe":
        return generate_verilog(lambda: PE(cfg), name="pe", key=cfg), "pe"
    return generate_verilog(lambda: mxu_verilog(cfg, "mxu"), name="mxu", key=cfg), "mxu"


def _summary(rep: dict) -> dict:
    """The figures the tables use, from one run_flow report."""
    cells = rep["cells"]
    util = rep.get("utilization", {})
    f = rep["fmax"][0] if rep.get("fmax") else {}
    out = {
        "block_cells": cells["block"],
        "wrapper_cells": cells["wrapper"],
        "total_cells": cells["total"],
        "placed": rep["placed"],
        "utilization": {
            k: {"used": v["used"], "available": v["available"], "percent": v["percent"]} for k, v in util.items()
        },
        "requested_mhz": rep["requested_mhz"],
        "achieved_mhz": f.get("achieved_mhz"),
        "achieved_mhz_without_dsp_paths": f.get("achieved_mhz_without_dsp_paths"),
        "met": f.get("met"),
        "critical_path": f.get("critical_path"),
        "wall_s": rep["wall_s"],
    }
    return out


def flow(
    tag: str, block: str, cfg, target: str, *, freq=100.0, place=True, flatten=True, dsp=True, pnr_timeout_s=None
) -> dict:
    """One run; never raises for a design that does not fit or a tool failure: the record says so."""
    verilog, top = _verilog(block, cfg)
    work = WORK / tag
    shutil.rmtree(work, ignore_errors=True)
    params = {"block": block, **cfg.__dict__}
    rec = {
        "tag": tag,
        "target": target,
        "params": params,
        "dsp": dsp,
        "flatten": flatten,
        "widelut": False,
    }  # sim.synth default: synth_ecp5 -nowidelut
    t0 = time.perf_counter()
    log(f"{tag}: {block} {params} on {target} (place={place}, flatten={flatten}, dsp={dsp})")
    try:
        rep = synth.run_flow(
            verilog,
            top,
            target,
            work,
            freq_mhz=freq,
            place=place,
            flatten=flatten,
            dsp=dsp,
            block=params,
            pnr_timeout_s=pnr_timeout_s,
        )
        rec.update(status="ok", **_summary(rep))
    except synth.DoesNotFit as e:
        rec.update(status="does_not_fit", message=str(e))
    except synth.SynthError as e:
        rec.update(status="tool_failed", message=str(e))
    rec["run_s"] = round(time.perf_counter() - t0, 1)
    log(
        f"{tag}: {rec['status']} in {rec['run_s']} s; "
        + (
            f"block LUT4 {rec['block_cells']['lut4']}, Fmax {rec['achieved_mhz']}"
            if rec["status"] == "ok"
            else rec.get("message", "")
        )
    )
    return rec


class Results:
    """The results file: sections are read at start and written back after every run. ``save``
    re-reads the file and writes only the sections this process changed, so two runs of this script
    on different sections (e.g. ``--only largest`` and ``--only stages`` side by side) keep each
    other's results."""

    def __init__(self, path: Path):
        self.path = path
        self.data = json.loads(path.read_text()) if path.is_file() else {}
        self._loaded = json.loads(json.dumps(self.data))

    def save(self):
        self.data["tools"] = synth.synth_tool_versions()
        self.data["machine"] = (
            "2-core shared machine (another engineer ran simulations at the same time); "
            "YoWASP (WebAssembly) builds of Yosys and nextpnr, one flow at a time, niced"
        )
        disk = json.loads(self.path.read_text()) if self.path.is_file() else {}
        for key, value in self.data.items():
            if key not in self._loaded or self._loaded[key] != value:
                disk[key] = value
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(".json.tmp")
        tmp.write_text(json.dumps(disk, indent=2) + "\n")
        tmp.replace(self.path)


def section_stages(res: Results, targets, fmts=("bf16", "int8"), depths=None):
    """MAC (depths 0..MAX_STAGES) and PE (1..MAX_STAGES) per target and format; ``depths`` limits the
    run to those pipeline depths and keeps the stored records of the others."""
    depths = set(range(0, MAX_STAGES + 1) if depths is None else depths)

    def redo(r):
        return r["target"] in targets and r["params"]["fmt"] in fmts and r["params"]["stages"] in depths

    recs = [r for r in res.data.get("stages", []) if not redo(r)]  # keep the others' records
    for target in targets:
        for fmt in fmts:
            for stages in sorted(d for d in depths if 0 <= d <= MAX_STAGES):
                recs.append(flow(f"stages_{target}_mac_{fmt}_{stages}", "mac", MACConfig(fmt, "ftz", stages), target))
                res.data["stages"] = recs
                res.save()
            for stages in sorted(d for d in depths if 1 <= d <= MAX_STAGES):
                recs.append(flow(f"stages_{target}_pe_{fmt}_{stages}", "pe", PEConfig(fmt, "ftz", stages), target))
                res.data["stages"] = recs
                res.save()
    res.data["stages"] = sorted(
        recs, key=lambda r: (r["target"], r["params"]["block"], r["params"]["fmt"], r["params"]["stages"])
    )
    res.save()
    plot_stages(res.data["stages"])


def plot_stages(recs):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4.2))
    styles = {"bf16": "-", "int8": "--"}
    for target in sorted({r["target"] for r in recs}):
        for block in ("mac", "pe"):
            for fmt in ("bf16", "int8"):
                rs = sorted(
                    (
                        r
                        for r in recs
                        if r["target"] == target
                        and r["params"]["block"] == block
                        and r["params"]["fmt"] == fmt
                        and r["status"] == "ok"
                    ),
                    key=lambda r: r["params"]["stages"],
                )
                if not rs:
                    continue
                x = [r["params"]["stages"] for r in rs]
                label = f"{fmt} {block.upper()} {target}"
                marker = "o" if block == "mac" else "s"
                if target == "ecp5-25k":  # Yosys output is the same for both ECP5 parts
                    ax1.plot(
                        x,
                        [r["block_cells"]["lut4"] + 2 * r["block_cells"]["carry"] for r in rs],
                        styles[fmt],
                        marker=marker,
                        label=f"{fmt} {block.upper()}",
                    )
                ax2.plot(x, [r["achieved_mhz"] for r in rs], styles[fmt], marker=marker, label=label)
    ax1.set_xlabel("pipeline stages")
    ax1.set_ylabel("LUT4 sites per block (LUT4 + 2 x CCU2C, Yosys)")
    ax1.set_yscale("log")
    ax1.set_title("Area per MAC / PE on ECP5 (either part)")
    ax1.legend(fontsize=7)
    ax2.set_xlabel("pipeline stages")
    ax2.set_ylabel("achieved Fmax (MHz, nextpnr, 100 MHz requested)")
    ax2.set_title("Fmax per MAC / PE (out of context)")
    ax2.axhline(100, color="grey", lw=0.8, ls=":")
    for ax in (ax1, ax2):
        ax.set_xticks(range(0, MAX_STAGES + 1))
        ax.grid(alpha=0.3)
    ax2.legend(fontsize=7, loc="upper left")
    fig.tight_layout()
    PLOT.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(PLOT, dpi=110)
    log(f"wrote {PLOT}")


def section_mxu85k(res: Results, stages: int, timeout):
    res.data["mxu85k"] = flow(
        f"mxu85k_bf16_8x8_s{stages}_nbp",
        "mxu",
        MXUConfig(8, 8, "bf16", "ftz", stages, backpressure=False),
        "ecp5-85k",
        freq=100.0,
        pnr_timeout_s=timeout,
    )
    res.save()


def section_up5k(res: Results, timeout):
    cfg = MXUConfig(4, 4, "int8", "ftz", 1)
    res.data["up5k"] = [
        flow("up5k_int8_4x4_dsp", "mxu", cfg, "ice40-up5k", freq=20.0, dsp=True),
        flow("up5k_int8_4x4_lut", "mxu", cfg, "ice40-up5k", freq=20.0, dsp=False, pnr_timeout_s=timeout),
    ]
    res.save()


def _stages(fmt):
    return BF16_STAGES if fmt == "bf16" else 1


BF16_STAGES = 2


def _fits(target, fmt, r, c, dsp, flatten, cache):
    key = (r, c)
    if key not in cache:
        cfg = MXUConfig(r, c, fmt, "ftz", _stages(fmt))
        rec = flow(
            f"largest_{target}_{fmt}{'' if dsp else '_lut'}_{r}x{c}",
            "mxu",
            cfg,
            target,
            place=False,
            flatten=flatten,
            dsp=dsp,
        )
        if rec["status"] == "tool_failed" and not flatten:  # abc9 on a hierarchical design: retry flat
            rec = flow(
                f"largest_{target}_{fmt}{'' if dsp else '_lut'}_{r}x{c}",
                "mxu",
                cfg,
                target,
                place=False,
                flatten=True,
                dsp=dsp,
            )
        cache[key] = rec
    return cache[key]["status"] == "ok"


def search_largest(target, fmt, dsp, timeout, max_confirm, n_max=64, known=()):
    t0 = time.perf_counter()
    flatten = not target.startswith("ecp5")
    cache: dict = {}
    # squares: doubling, then bisection
    lo, hi = 0, None
    n = 1
    while n <= n_max and _fits(target, fmt, n, n, dsp, flatten, cache):
        lo, n = n, n * 2
    hi = min(n, n_max + 1)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if _fits(target, fmt, mid, mid, dsp, flatten, cache):
            lo = mid
        else:
            hi = mid
    rows = lo
    result = {"target": target, "fmt": fmt, "dsp": dsp, "stages": _stages(fmt), "largest_square": rows}
    if rows == 0:
        result.update(
            largest_by_synthesis=None,
            confirmed=None,
            synth_runs=len(cache),
            runs=list(cache.values()),
            search_s=round(time.perf_counter() - t0, 1),
        )
        return result
    # columns for that many rows, in [rows, 2*rows]
    clo, chi = rows, 2 * rows + 1
    while chi - clo > 1:
        mid = (clo + chi) // 2
        if _fits(target, fmt, rows, mid, dsp, flatten, cache):
            clo = mid
        else:
            chi = mid
    result["largest_by_synthesis"] = [rows, clo]
    # confirm by place and route, stepping down on failure
    confirmed, attempts = None, []
    r, c = rows, clo
    while len(attempts) < max_confirm and r >= 1 and c >= 1:
        cfg = MXUConfig(r, c, fmt, "ftz", _stages(fmt))
        same = [
            k
            for k in known
            if k.get("status") == "ok"
            and k["target"] == target
            and k["dsp"] == dsp
            and k["params"] == {"block": "mxu", **cfg.__dict__}
        ]
        if same:  # this array was already placed and routed (e.g. the mxu85k section): reuse it
            log(f"confirm {target} {fmt} {r}x{c}: reusing {same[0]['tag']}")
            attempts.append({**same[0], "reused": same[0]["tag"]})
            confirmed = [r, c]
            break
        rec = flow(
            f"largest_{target}_{fmt}{'' if dsp else '_lut'}_{r}x{c}_pnr",
            "mxu",
            cfg,
            target,
            freq=100.0 if target.startswith("ecp5") else 20.0,
            flatten=True,
            dsp=dsp,
            pnr_timeout_s=timeout,
        )
        attempts.append(rec)
        if rec["status"] == "ok":
            confirmed = [r, c]
            break
        if c > r:
            c -= 1
        else:
            r -= 1
    result.update(
        confirmed=confirmed,
        confirm_runs=attempts,
        synth_runs=len(cache),
        runs=list(cache.values()),
        search_s=round(time.perf_counter() - t0, 1),
    )
    return result


def section_largest(res: Results, targets, fmts, timeout, max_confirm):
    largest = res.data.setdefault("largest", {})
    for target in targets:
        for fmt, dsp in fmts:
            key = f"{target}/{fmt}{'' if dsp else '/lut-multipliers'}"
            log(f"largest: {key}")
            known = [res.data["mxu85k"]] if "mxu85k" in res.data else []
            largest[key] = search_largest(target, fmt, dsp, timeout, max_confirm, known=known)
            res.save()


def stages_table(recs) -> str:
    """A per-depth table (markdown) from the ``stages`` records: one row per block, format
    and depth, Yosys cells of the block, placed LUT4 sites and Fmax per ECP5 part."""

    def fmt_mhz(r):
        if r is None or r.get("status") != "ok" or r.get("achieved_mhz") is None:
            return "-"
        return f"{r['achieved_mhz']:.1f}" + ("" if r.get("met") else " (missed)")

    by = {(r["params"]["block"], r["params"]["fmt"], r["params"]["stages"], r["target"]): r for r in recs}
    keys = sorted({k[:3] for k in by}, key=lambda k: (k[1] != "bf16", k[1], k[0] != "mac", k[2]))
    lines = [
        "| block | stages | LUT4 | CCU2C | FF | DSP | placed LUT4 sites | Fmax ECP5-25k (MHz) | "
        "Fmax ECP5-85k (MHz) | wall 25k / 85k (s) |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for block, fmt, st in keys:
        r25, r85 = by.get((block, fmt, st, "ecp5-25k")), by.get((block, fmt, st, "ecp5-85k"))
        ref = r25 or r85
        c = ref["block_cells"]
        walls = " / ".join(f"{r['wall_s']['total_s']:.0f}" if r else "-" for r in (r25, r85))
        lines.append(
            f"| {fmt} {block.upper()} | {st} | {c['lut4']:,} | {c['carry']:,} | {c['ff']:,} | {c['dsp']} | "
            f"{ref['utilization']['lut4']['used']:,} | {fmt_mhz(r25)} | {fmt_mhz(r85)} | {walls} |"
        )
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", default="stages,up5k,largest,mxu85k", help="comma list of sections")
    ap.add_argument("--results", default=str(RESULTS), help=f"results JSON (default {RESULTS.relative_to(ROOT)})")
    ap.add_argument("--stage-targets", default="ecp5-25k,ecp5-85k")
    ap.add_argument("--stage-fmts", default="bf16,int8", help="formats of the stages section")
    ap.add_argument(
        "--stage-depths",
        default=None,
        help="comma list of pipeline depths to (re)measure in the stages section (default: all)",
    )
    ap.add_argument("--largest-targets", default="ice40-up5k,ecp5-25k,ecp5-85k")
    ap.add_argument(
        "--largest-fmts",
        default="bf16,int8,int8:lut",
        help="formats for the largest-array search; ':lut' builds multipliers from LUTs (iCE40 only)",
    )
    ap.add_argument("--mxu85k-stages", type=int, default=MAX_STAGES)
    ap.add_argument("--pnr-timeout", type=float, default=2400.0, help="seconds per nextpnr run")
    ap.add_argument("--max-confirm", type=int, default=3)
    ap.add_argument(
        "--largest-bf16-stages",
        type=int,
        default=2,
        help="PE stages of the bf16 arrays in the largest-array search (default 2, the MXU default)",
    )
    args = ap.parse_args(argv)
    global BF16_STAGES
    BF16_STAGES = args.largest_bf16_stages
    res = Results(Path(args.results))
    t0 = time.perf_counter()
    for section in args.only.split(","):
        if section == "stages":
            depths = None if args.stage_depths is None else [int(d) for d in args.stage_depths.split(",")]
            section_stages(res, args.stage_targets.split(","), tuple(args.stage_fmts.split(",")), depths)
        elif section == "plot":
            plot_stages(res.data["stages"])
        elif section == "table":
            print(stages_table(res.data["stages"]))
        elif section == "up5k":
            section_up5k(res, args.pnr_timeout)
        elif section == "mxu85k":
            section_mxu85k(res, args.mxu85k_stages, args.pnr_timeout)
        elif section == "largest":
            for target in args.largest_targets.split(","):
                fmts = []
                for spec in args.largest_fmts.split(","):
                    fmt, _, mode = spec.partition(":")
                    if mode == "lut" and not target.startswith("ice40"):
                        continue
                    fmts.append((fmt, mode != "lut"))
                section_largest(res, [target], fmts, args.pnr_timeout, args.max_confirm)
        else:
            ap.error(f"unknown section {section!r}")
    log(f"done in {time.perf_counter() - t0:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
