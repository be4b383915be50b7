"""Tables of measured figures, built from the benchmarks' JSON in ``bench/results/``.

The manual's performance pages call these builders through its ``mxu-table`` directive (so every
figure on those pages comes from a JSON file, never typed by hand), and ``tests/test_docs.py``
checks every number they print against that JSON. From the command line::

    python -m bench.tables                         # list the table kinds
    python -m bench.tables gemm bench/results/gemm_bench.json

prints the table as Markdown. Each builder takes the parsed JSON and returns a :class:`Table`;
columns whose cells are computed from several JSON fields (not copied from one) are listed in
``Table.derived`` with the rule, so the test can recompute them.
"""

from __future__ import annotations

import argparse
import glob
import json
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["Table", "TABLES", "build", "to_markdown", "main"]

ROOT = Path(__file__).resolve().parent.parent


@dataclass
class Table:
    """A table: ``header`` (column names), ``rows`` (lists of cell strings, same length as header).

    ``derived`` maps a column name to a one-line rule for cells computed from several JSON fields.
    ``sources`` are the JSON files read (paths relative to the repository)."""

    header: list[str]
    rows: list[list[str]]
    derived: dict[str, str] = field(default_factory=dict)
    sources: list[str] = field(default_factory=list)


def _n(x) -> str:
    """An integer with thousands separators; a float with one decimal; None as a dash."""
    if x is None:
        return "-"
    if isinstance(x, bool):
        return "yes" if x else "no"
    if isinstance(x, int):
        return f"{x:,}"
    if float(x).is_integer():
        return f"{int(x):,}"
    return f"{x:,.1f}"


def _pct(x) -> str:
    """A fraction 0..1 as a percentage with one decimal."""
    return "-" if x is None else f"{100 * x:.1f}%"


def _shape(r) -> str:
    return f"{r['m']}x{r['k']}x{r['n']}"


# ---- GEMM engine (bench/gemm_bench.py, bench/gemm_overheads.py) ----


def gemm(d) -> Table:
    """Cycles of each GEMM shape on the engine with its HBM controller, against the models."""
    rows = [
        [
            r["array"],
            str(r["pseudo_channels"]),
            _shape(r),
            _n(r["cycles"]),
            _n(r["predicted_cycles"]),
            _n(r["engine_model_cycles"]),
            _n(r["ideal_cycles"]),
            _n(r["scalesim_cycles"]),
            _pct(r["utilization"]),
            _n(r["faster_than_scalesim"]),
            _n(r["bitexact"]),
        ]
        for r in d["records"]
    ]
    return Table(
        [
            "array",
            "PCs",
            "M x K x N",
            "RTL cycles",
            "array model",
            "engine blocking model",
            "ideal",
            "SCALE-Sim WS",
            "utilization",
            "< SCALE-Sim",
            "bit-exact",
        ],
        rows,
    )


def gemm_perf(d) -> Table:
    """Where each GEMM's cycles went: the engine's PERF_ counters of the same runs."""
    rows = []
    for r in d["records"]:
        p = r["perf"]
        setup = r["cycles"] - sum(p.values())
        rows.append(
            [
                r["array"],
                str(r["pseudo_channels"]),
                _shape(r),
                _n(r["cycles"]),
                _n(p["perf_feed"]),
                _n(setup),
                _n(p["perf_wait_a"]),
                _n(p["perf_wait_w"]),
                _n(p["perf_wait_acc"]),
                _n(p["perf_wait_dep"]),
                _n(p["perf_drain"]),
            ]
        )
    return Table(
        [
            "array",
            "PCs",
            "M x K x N",
            "RTL cycles",
            "beats (FEED)",
            "set-up",
            "wait A",
            "wait weights",
            "wait acc. bank",
            "wait K-chain",
            "drain",
        ],
        rows,
        derived={"set-up": "RTL cycles minus the sum of the six PERF_ counters"},
    )


def gemm_marginal(d) -> Table:
    """Steady state: the cycles M rows more cost, against M*K*N/(R*C) of them (8x8 array)."""
    s = d["steady"]
    rows = [
        [
            _shape(dict(zip("mkn", g["from"]))),
            _shape(dict(zip("mkn", g["to"]))),
            _n(g["extra_cycles"]),
            _pct(g["utilization"]),
        ]
        for g in s["marginal"]
    ]
    return Table(["from", "to", "extra cycles", "steady-state utilization"], rows)


# ---- MXU (bench/mxu_cycles.py, bench/mxu_scale.py) ----


def mxu_cycles(d) -> Table:
    """Whole GEMMs on the array alone (cycle model, equal to the RTL), against SCALE-Sim v2 WS."""
    rows = [
        [
            r["array"],
            str(r["stages"]),
            _shape(r),
            _n(r["cycles"]),
            _n(r["scalesim_ws"]),
            _n(r["ideal"]),
            _pct(r["utilization"]),
        ]
        for r in d["records"]
    ]
    return Table(
        ["array", "PE latency L", "M x K x N", "cycles", "SCALE-Sim WS", "ideal M*K*N/(R*C)", "utilization"], rows
    )


def mxu_generation(d) -> Table:
    """Verilog generation of square bf16 arrays: time, peak memory, size."""
    rows = [
        [
            f"{r['size']}x{r['size']}",
            _n(r["generate_s"]),
            _n(r["peak_rss_mib"]),
            _n(r["verilog_bytes"]),
            str(r["modules"]),
        ]
        for r in d["generation"]
    ]
    return Table(["array", "generation (s)", "peak memory (MiB)", "Verilog (bytes)", "modules"], rows)


def mxu_simulation(d) -> Table:
    """Simulator builds and speed of the MXU under cocotb."""
    rows = [
        [f"{r['size']}x{r['size']}", r["simulator"], _n(r["build_s"]), _n(r["cycles"]), _n(r["cycles_per_s"])]
        for r in d["verilator_build"] + d["simulation"]
    ]
    return Table(["array", "simulator", "build (s)", "cycles", "cycles/s"], rows)


# ---- arithmetic (bench/mac_area.py) ----


def mac_area(d) -> Table:
    """Yosys synth_ecp5 -nowidelut of one MAC (synthesis only, no wrapper)."""
    rows = [
        [
            r["fmt"],
            r["subnormals"],
            str(r["stages"]),
            _n(r["LUT4"]),
            _n(r["MULT18X18D"]),
            _n(r["CCU2C"]),
            _n(r["TRELLIS_FF"]),
            _n(r["verilog_assigns"]),
        ]
        for r in d["records"]
        if not r["widelut"]
    ]
    return Table(["format", "subnormals", "stages", "LUT4", "MULT18X18D", "CCU2C", "FF", "Verilog assigns"], rows)


# ---- HBM controller (bench/hbm_bench.py, bench/hbm_area.py) ----


def hbm_efficiency(d) -> Table:
    """Data-bus efficiency of one pseudo-channel per traffic pattern, against the analytical bound."""
    rows = [
        [
            r["timing"],
            r["scenario"].replace("_", " "),
            _n(r["requests"]),
            _n(r["cycles"]),
            _pct(r["efficiency"]),
            _pct(r["efficiency_debt_charged"]),
            _pct(r.get("bound")),
            _pct(r.get("of_bound")),
            _n(r["refreshes"]),
        ]
        for r in d["records"]
    ]
    return Table(
        ["timing", "traffic", "requests", "cycles", "efficiency", "owed REFs charged", "bound", "of bound", "REFs"],
        rows,
    )


def hbm_latency(d) -> Table:
    """Latency (cycles) p50 / p99 / max (count) by what a request found on arrival."""
    kinds = ("hit", "closed", "conflict", "refresh_blocked")

    def cell(x):
        return "-" if not x else f"{_n(x['p50'])} / {_n(x['p99'])} / {_n(x['max'])} ({_n(x['count'])})"

    rows = [
        [r["timing"], r["scenario"].replace("_", " ")] + [cell(r["latency_cycles"].get(k)) for k in kinds]
        for r in d["records"]
        if r.get("latency_cycles")
    ]
    return Table(["timing", "traffic", "row hit", "closed bank", "row conflict", "refresh-blocked"], rows)


def hbm_area(d) -> Table:
    """Yosys synth_ecp5 of one pseudo-channel controller (synthesis only)."""
    rows = [
        [
            str(r["queue_depth"]),
            _n(r.get("with_bram_emulator", False)),
            _n(r["LUT4"]),
            _n(r["TRELLIS_FF"]),
            _n(r["CCU2C"]),
            _n(r["TRELLIS_DPR16X4"]),
            _n(r["DP16KD"]),
            _n(r["verilog_bytes"]),
        ]
        for r in d
    ]
    return Table(
        ["queue depth", "with BRAM emulator", "LUT4", "FF", "CCU2C", "LUT RAM (DPR16X4)", "DP16KD", "Verilog (bytes)"],
        rows,
    )


# ---- FPGA flow (bench/synth_scale.py, mxu synth, mxu board build) ----


def _fmax(r) -> str:
    if r.get("achieved_mhz") is None:
        other = r.get("achieved_mhz_without_dsp_paths")
        return "not timed" + (f" (other paths {_n(other)})" if other else "")
    return f"{_n(r['achieved_mhz'])} / {_n(r['requested_mhz'])}" + ("" if r.get("met") else " (missed)")


def _area(cells, report) -> list[str]:
    """LUT4, carry, FF, DSP (Yosys cells of the block) and the LUT4 sites nextpnr placed."""
    return [_n(cells[k]) for k in ("lut4", "carry", "ff", "dsp")] + [_n(report["utilization"]["lut4"]["used"])]


def synth_stages(d) -> Table:
    """MAC and PE per pipeline depth, out of context, one row per block and target."""
    rows = []
    for r in d["stages"]:
        if r.get("status") != "ok":
            continue
        p, c = r["params"], r["block_cells"]
        rows.append([r["target"], f"{p['fmt']} {p['block'].upper()}", str(p["stages"]), *_area(c, r), _fmax(r)])
    return Table(
        [
            "target",
            "block",
            "stages",
            "LUT4",
            "carry",
            "FF",
            "DSP",
            "placed LUT4 sites",
            "Fmax achieved / requested (MHz)",
        ],
        rows,
    )


def synth_largest(d) -> Table:
    """The largest array per target and format: the search's bound and its place-and-route confirmation."""
    rows = []
    for key, s in d["largest"].items():
        conf = s["confirm_runs"][-1] if s.get("confirm_runs") else None
        placed = (
            f"{_n(conf['utilization']['lut4']['used'])} ({conf['utilization']['lut4']['percent']}%)"
            if conf and conf.get("placed")
            else "-"
        )
        rows.append(
            [
                s["target"],
                key.split("/", 1)[1],
                "x".join(map(str, s["largest_by_synthesis"])),
                "x".join(map(str, s["confirmed"])) if s.get("confirmed") else "-",
                placed,
                _fmax(conf) if conf else "-",
                str(s["synth_runs"]),
            ]
        )
    return Table(
        [
            "target",
            "format",
            "largest by synthesized counts",
            "placed and routed",
            "placed LUT4 sites",
            "Fmax achieved / requested (MHz)",
            "synthesis runs",
        ],
        rows,
    )


def synth_reports(reports: list) -> Table:
    """`mxu synth` reports (its synth.json) of whole arrays, one row per report file."""
    rows = []
    for r in reports:
        p, c, f = r["block"], r["cells"]["block"], r["fmax"][0]
        bp = "" if p.get("backpressure", True) else ", no back-pressure"
        rows.append(
            [
                r["target"]["name"],
                f"{p['fmt']} {p['rows']}x{p['cols']}{bp}",
                str(p["stages"]),
                str(r["seed"]),
                *_area(c, r),
                _fmax(f),
            ]
        )
    return Table(
        [
            "target",
            "array",
            "stages",
            "seed",
            "LUT4",
            "carry",
            "FF",
            "DSP",
            "placed LUT4 sites",
            "Fmax achieved / requested (MHz)",
        ],
        rows,
    )


def _short_commit(commit: str | None) -> str:
    """A report's commit as seven hex digits (``+dirty`` kept); a dash for a report without one."""
    if not commit or commit == "unknown":
        return "-"
    return commit[:7] + ("+dirty" if commit.endswith("+dirty") else "")


def board(reports: list) -> Table:
    """`mxu board build` reports: the whole board top placed and routed."""
    rows = []
    for r in reports:
        e, c, u = r["engine"]["mxu"], r["cells"], r["utilization"]
        f = r["fmax"][0]
        rows.append(
            [
                r["board"],
                f"{e['fmt']} {e['rows']}x{e['cols']}, {e['stages']} stages",
                str(r["engine"]["hbm"]["pseudo_channels"]),
                _n(r["memory_bytes"]),
                _n(r["clk_mhz"]),
                _n(f["achieved_mhz"]),
                _n(f["met"]),
                _n(u["lut4"]["used"]),
                _n(c["ff"]),
                _n(c["dsp"]),
                _n(c["bram"]),
                str(r.get("seed", 1)),
                _short_commit(r.get("git_commit")),
            ]
        )
    return Table(
        [
            "board",
            "engine",
            "PCs",
            "memory (bytes)",
            "clock (MHz)",
            "Fmax achieved (MHz)",
            "met",
            "placed LUT4 sites",
            "FF",
            "MULT18X18D",
            "DP16KD",
            "placement seed",
            "commit",
        ],
        rows,
    )


# ---- simulation speed (bench/sim_speed.py) ----


def sim_speed(d) -> Table:
    """Simulated cycles per second of the engine (array in the first column): HDL memory system against
    the per-cycle Python model, and the cold build of each model."""
    rows = [
        [
            r["array"],
            r["sim"],
            r["memory"],
            ", ".join(r["shapes"]),
            ", ".join(_n(c) for c in r["engine_cycles"]),
            _n(r["sim_cycles"]),
            _n(r["sim_wall_s"]),
            _n(r["cycles_per_s"]),
            "cached" if r["cached_build"] else _n(r["build_s"]),
            _n(r["bitexact"]),
        ]
        for r in d["records"]
        if r.get("kind", "gemm") == "gemm"
    ]
    header = [
        "array",
        "simulator",
        "memory model",
        "GEMMs",
        "engine cycles",
        "simulated cycles",
        "simulation (s)",
        "cycles/s",
        "build (s)",
        "bit-exact",
    ]
    return Table(header, rows)


def sim_speed_demo(d) -> Table:
    """Wall time of ``mxu demo`` (warm: the second of two runs) per simulator and memory model."""
    rows = [
        [r["sim"], r["memory"], _n(r["wall_s"]), _n(r["train_s"]), _n(r["sim_cycles"]), _n(r["bitexact"])]
        for r in d["records"]
        if r.get("kind") == "demo"
    ]
    return Table(
        [
            "simulator",
            "memory model",
            "mxu demo, warm (s)",
            "of it data and model (s)",
            "simulated cycles",
            "bit-exact",
        ],
        rows,
    )


#: record-name prefixes of the Fmax tables' groups (the rest: the engine, its parts, the GEMM top)
FMAX_GROUPS = {"hbm": ("hbm",), "pod": ("pod-", "ici-")}


def fmax(d, group: str | None = None) -> Table:
    """Per component (``bench/fmax.py``): median Fmax of the placement seeds, range, Yosys cells and
    the critical path of the median seed; ``group``: only the blocks of a :data:`FMAX_GROUPS` entry,
    or ``"system"`` for the blocks of none (None: all)."""
    rows = []
    for s in d["summary"]:
        groups = [k for k, prefixes in FMAX_GROUPS.items() if s["block"].startswith(prefixes)]
        if group is not None and (groups[0] if groups else "system") != group:
            continue
        cp = s.get("critical_path") or {}
        rows.append(
            [
                s["block"],
                ", ".join(str(x) for x in sorted(s["seeds"])),
                _n(s["median_mhz"]),
                f"{_n(s['min_mhz'])} - {_n(s['max_mhz'])}",
                *[_n(s[k]) for k in ("lut4", "ff", "carry", "dsp", "bram", "lutram")],
                _n(cp.get("logic_levels")),
                f"{cp.get('from_cell', '-')} -> {cp.get('to_cell', '-')}",
            ]
        )
    return Table(
        [
            "block",
            "seeds",
            "Fmax MHz (median)",
            "range",
            "LUT4",
            "FF",
            "CCU2C",
            "DSP",
            "DP16KD",
            "LUT RAM",
            "levels",
            "critical path (median seed)",
        ],
        rows,
        derived={
            "block": "the record's name in bench/fmax.py (a label, e.g. gemm-top-4x4-bf16)",
            "Fmax MHz (median)": "median of achieved_mhz over the block's records",
            "range": "min and max of achieved_mhz over the block's records",
        },
    )


#: kind -> (builder, whether it takes a glob of report files instead of one JSON file)
def mutation(d) -> Table:
    """Mutation score of each block's default regression: mutants by verdict, score, run time."""

    def config(r):
        c = r["config"]
        if "mxu" in c and "hbm" in c:  # an engine block: its array, buffers, memory and GEMMs
            x, h = c["mxu"], c["hbm"]
            return (
                f"{x['rows']}x{x['cols']} {x['fmt']} {x['subnormals']} stages={x['stages']} "
                f"m_block={c['m_block']} acc_entries={c['acc_entries']} a_buffer_bytes={c['a_buffer_bytes']} "
                f"pseudo_channels={h['pseudo_channels']} tREFI={h['timing']['tREFI']} "
                f"tRFC={h['timing']['tRFC']} gemms={c.get('gemms', len(c.get('shapes', [])))}"
            )
        return " ".join(f"{k}={v}" for k, v in c.items()) or "default"

    rows = []
    for r in d["campaigns"]:
        s = r["summary"]
        rows.append(
            [
                r["campaign"],
                config(r),
                _n(s["mutants"]),
                _n(s["killed"]),
                _n(s["timeout"]),
                _n(s["equivalent"]),
                _n(s["survived"]),
                _n(s["error"]),
                "-" if s["score_pct"] is None else f"{s['score_pct']:.1f}%",
                _n(round(r["mutant_s"] / 60, 1)),
                f"{r['seed']}",
                f"{r['equivalence_depth']} cycles" if r.get("equivalence_depth") else "not run",
            ]
        )
    return Table(
        [
            "campaign",
            "configuration",
            "mutants",
            "killed",
            "timeout",
            "equivalent",
            "survived",
            "error",
            "score",
            "mutant time (min)",
            "Yosys seed",
            "equivalence check",
        ],
        rows,
        derived={
            "mutant time (min)": "mutant_s / 60, rounded to 0.1",
            "equivalence check": "equivalence_depth: the bounded check's depth; not run: every survivor counts",
        },
    )


def collectives(d) -> Table:
    """Collectives on a ring of collective engines: RTL cycles, the cost model, the textbook ring
    and the link utilization (``python -m bench.collectives``)."""
    rows = []
    for r in d["points"]:
        rows.append(
            [
                r["op"].replace("_", "-"),
                _n(r["nodes"]),
                "both" if r["bidirectional"] else "one",
                _n(r["bytes_per_node"]),
                _n(r["cycles"]),
                _n(r["model_cycles"]),
                _pct(r["model_error"]),
                _n(r["formula_cycles"]),
                _pct(r["link_utilization"]),
                _pct(r["framing_bound"]),
                "yes" if r["bitexact"] else "NO",
            ]
        )
    return Table(
        [
            "collective",
            "nodes",
            "ring directions",
            "bytes per node",
            "RTL cycles",
            "model cycles",
            "model error",
            "ring formula (cycles)",
            "link utilization",
            "framing bound",
            "bit-exact",
        ],
        rows,
        derived={"model error": "(model_cycles - cycles) / cycles, signed"},
    )


def pod_scaling(d) -> Table:
    """A data-parallel GEMM over 1-8 nodes of the pod: cycles and scaling efficiency
    (``python -m bench.pod_scaling``)."""
    rows = []
    for r in d["points"]:
        g = r["gemm_cycles"]
        rows.append(
            [
                _n(r["nodes"]),
                f"{r['m']}x{r['k']}x{r['n']}",
                _n(r["pod_cycles"]),
                _n(min(g)),
                _n(max(g)),
                _pct(r["scaling_efficiency"]),
                "yes" if r["bitexact"] else "NO",
            ]
        )
    return Table(
        [
            "nodes",
            "GEMM (M x K x N)",
            "pod cycles",
            "fastest node's GEMM cycles",
            "slowest node's GEMM cycles",
            "scaling efficiency",
            "bit-exact",
        ],
        rows,
    )


def sweep(d) -> Table:
    """One row per point of an ``mxu sweep`` (its sweep.json): configuration, status, cells, Fmax and
    the GEMM's throughput at that Fmax."""
    rows = []
    for r in d["records"]:
        o = r["options"]
        size = f"{o['rows']}x{o['cols']}" if "rows" in o else "-"
        ok = r["status"] == "ok"
        rows.append(
            [
                o["block"],
                size,
                o.get("fmt", "-"),
                _n(o.get("stages", 2)),
                o["target"],
                _n(o.get("seed", 1)),
                r["status"],
                *([_n(r[k]) for k in ("lut4", "ff", "dsp", "bram")] if ok else ["-"] * 4),
                _n(r["achieved_mhz"]) if ok else "-",
                r["gemm"],
                _n(r["gemm_gmacs"]) if ok else "-",
            ]
        )
    return Table(
        [
            "block",
            "array",
            "fmt",
            "stages",
            "target",
            "seed",
            "status",
            "LUT4",
            "FF",
            "DSP",
            "BRAM",
            "Fmax (MHz)",
            "GEMM",
            "GMAC/s",
        ],
        rows,
        derived={"GMAC/s": "M K N / cycle model's cycles x Fmax (MHz) / 1000"},
    )


TABLES: dict[str, tuple[Callable, bool]] = {
    "gemm": (gemm, False),
    "gemm_perf": (gemm_perf, False),
    "gemm_marginal": (gemm_marginal, False),
    "mxu_cycles": (mxu_cycles, False),
    "mxu_generation": (mxu_generation, False),
    "mxu_simulation": (mxu_simulation, False),
    "mac_area": (mac_area, False),
    "hbm_efficiency": (hbm_efficiency, False),
    "hbm_latency": (hbm_latency, False),
    "hbm_area": (hbm_area, False),
    "synth_stages": (synth_stages, False),
    "synth_largest": (synth_largest, False),
    "synth_reports": (synth_reports, True),
    "board": (board, True),
    "sim_speed": (sim_speed, False),
    "sim_speed_demo": (sim_speed_demo, False),
    "fmax": (fmax, False),
    "fmax_hbm": (lambda d: fmax(d, "hbm"), False),
    "fmax_pod": (lambda d: fmax(d, "pod"), False),
    "fmax_system": (lambda d: fmax(d, "system"), False),
    "mutation": (mutation, False),
    "collectives": (collectives, False),
    "pod_scaling": (pod_scaling, False),
    "sweep": (sweep, False),
}


def build(kind: str, source: str, root: Path = ROOT) -> Table:
    """The table ``kind`` from ``source``: a JSON path, or a glob of report files for the kinds that
    take several, relative to ``root``.

    Raises:
        ValueError: unknown kind, or no file matches ``source``.
    """
    if kind not in TABLES:
        raise ValueError(f"table kind must be one of {', '.join(TABLES)}; got {kind!r}")
    fn, many = TABLES[kind]
    paths = sorted(glob.glob(str(root / source))) if many else [str(root / source)]
    if not paths or not Path(paths[0]).is_file():
        raise ValueError(f"no benchmark JSON matches {source!r}")
    data = [json.loads(Path(p).read_text()) for p in paths]
    table = fn(data if many else data[0])
    table.sources = [str(Path(p).relative_to(root)) for p in paths]
    if many:  # one row per report: say which
        table.header.append("report")
        for row, p in zip(table.rows, paths):
            row.append(Path(p).name)
    return table


def to_markdown(table: Table) -> str:
    """The table as a Markdown pipe table (``|`` and ``*`` in cells escaped)."""

    def line(cells):
        return "| " + " | ".join(c.replace("|", "\\|").replace("*", "\\*") for c in cells) + " |"

    return "\n".join([line(table.header), "|" + "---|" * len(table.header)] + [line(r) for r in table.rows])


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.tables", description=__doc__.split("\n")[0])
    ap.add_argument("kind", nargs="?", help="table kind; none lists them")
    ap.add_argument("source", nargs="?", help="JSON file (or glob of report files) under the repository root")
    args = ap.parse_args(argv)
    if args.kind and not args.source:
        ap.error("the table's JSON file (or glob) is required; the manual's pages name each")
    if not args.kind:
        for k, (fn, many) in TABLES.items():
            print(f"{k:16} {'(glob) ' if many else ''}{fn.__doc__.splitlines()[0]}")
        return 0
    try:
        text = to_markdown(build(args.kind, args.source))
    except ValueError as e:
        print(f"bench.tables: error: {e}", file=sys.stderr)
        return 2
    except (KeyError, TypeError, IndexError) as e:
        print(f"bench.tables: error: {args.source} does not hold a {args.kind} table (no field {e})", file=sys.stderr)
        return 2
    try:
        print(text)
    except BrokenPipeError:  # `| head`
        sys.stderr.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
