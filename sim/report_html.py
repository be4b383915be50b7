"""The HTML page of ``mxu report``: one self-contained ``index.html`` rendered from the report's JSON
(:func:`sim.design_report.collect`) and the images beside it. Styles are inline, images are files in
the same folder, no script and no network access: the page opens from a file system or an archive."""

from __future__ import annotations

import html
import json
from pathlib import Path

__all__ = ["render", "utilization_plot", "per_pe_plot", "roofline_plot"]

_CSS = """
body { font: 15px/1.45 system-ui, sans-serif; margin: 2em auto; max-width: 68em; color: #222; }
h1 { font-size: 1.6em; } h2 { margin-top: 2em; border-bottom: 1px solid #ccc; }
table { border-collapse: collapse; margin: .6em 0; } td, th { border: 1px solid #ccc; padding: .25em .6em; }
th { background: #f3f3f3; text-align: left; } td.n { text-align: right; font-variant-numeric: tabular-nums; }
.ok { color: #161; font-weight: bold; } .bad { color: #a11; font-weight: bold; }
figure { margin: 1em 0; } figcaption { color: #555; font-size: .9em; } .small { color: #555; font-size: .9em; }
img.wave { max-width: 100%; background: white; }
.scroll { overflow-x: auto; } .scroll img.wave { max-width: none; }
"""


def _e(x) -> str:
    if isinstance(x, bool):
        return "yes" if x else "no"
    return html.escape("-" if x is None else str(x))


def _table(head: list[str], rows: list[list], numeric: set[int] = frozenset()) -> str:
    out = ["<table><tr>" + "".join(f"<th>{_e(h)}</th>" for h in head) + "</tr>"]
    for r in rows:
        out.append("<tr>" + "".join(f'<td class="n">{_e(v)}</td>' if i in numeric else f"<td>{_e(v)}</td>"
                                    for i, v in enumerate(r)) + "</tr>")
    return "".join(out) + "</table>"


def utilization_plot(cycles: dict, path: Path) -> None:
    """The array's utilization (ideal / model cycles) against M, from ``cycles["utilization"]``, as SVG."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    u = cycles["utilization"]
    fig, ax = plt.subplots(figsize=(6.5, 3.6), dpi=100)
    ax.semilogx([p["m"] for p in u["points"]], [100 * p["utilization"] for p in u["points"]], "o-", base=2)
    ax.set(xlabel="M (activation rows)", ylabel="utilization (%)", ylim=(0, 105),
           title=f"utilization against M, K = {u['k']}, N = {u['n']} (cycle model)")
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, format="svg")
    plt.close(fig)


def per_pe_plot(fpga: dict, path: Path) -> bool:
    """LUT4 per PE against pipeline stages, one line per swept array size and back-pressure mode, from
    ``fpga["per_pe"]`` (seed 1 of each), as SVG; False (nothing written) when the sweep has none."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    pts = [r for r in fpga["per_pe"] if r["seed"] == 1]
    if not pts:
        return False
    fig, ax = plt.subplots(figsize=(6.5, 3.6), dpi=100)
    for key in dict.fromkeys((r["rows"], r["cols"], r["backpressure"]) for r in pts):
        line = sorted((r for r in pts if (r["rows"], r["cols"], r["backpressure"]) == key), key=lambda r: r["stages"])
        label = f"{key[0]}x{key[1]}" + ("" if key[2] else ", no back-pressure")
        ax.plot([r["stages"] for r in line], [r["lut4_per_pe"] for r in line], "o-", label=label)
    ax.set(xlabel="pipeline stages per MAC", ylabel="LUT4 per PE", title=f"LUT4 per PE ({fpga['target']}, mxu sweep)")
    ax.set_ylim(0, 1.2 * max(r["lut4_per_pe"] for r in pts))  # headroom: no point on the frame or under the legend
    ax.set_xticks(sorted({r["stages"] for r in pts}))
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, format="svg")
    plt.close(fig)
    return True


def roofline_plot(engine: dict, path: Path) -> None:
    """The engine's roofline from ``engine["roofline"]`` (MACs per cycle against MACs per byte, log-log:
    the HBM roof up to the ridge, the array's peak after it) with each measured GEMM placed on it from
    its RTL cycles, as SVG."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FormatStrFormatter, LogLocator

    r = engine["roofline"]
    peak, bw, ridge = r["peak_macs_per_cycle"], r["bandwidth_bytes_per_cycle"], r["ridge_macs_per_byte"]
    xs = [g["intensity"] for g in engine["gemms"]]
    lo, hi = min([ridge, *xs]) / 4, max([ridge, *xs]) * 4
    fig, ax = plt.subplots(figsize=(6.5, 3.8), dpi=100)
    ax.loglog([lo, ridge, hi], [lo * bw, peak, peak], "-", color="0.3",
              label=f"roof: {bw:g} B/cycle HBM, {peak} MACs/cycle array")
    for g in engine["gemms"]:
        ax.loglog([g["intensity"]], [g["macs_per_cycle"]], "o", label=f"{g['m']}x{g['k']}x{g['n']} (RTL)")
    ax.axvline(ridge, color="0.7", ls=":")
    ax.yaxis.set_major_locator(LogLocator(subs=(1.0, 2.0, 5.0)))
    for axis in (ax.xaxis, ax.yaxis):
        axis.set_major_formatter(FormatStrFormatter("%g"))
        axis.set_minor_formatter(FormatStrFormatter(""))
    ax.set(xlabel="arithmetic intensity (MACs per byte moved)", ylabel="MACs per cycle",
           title="roofline of the engine (each GEMM at its RTL CYCLES)")
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, format="svg")
    plt.close(fig)


def _seeds(r: dict) -> str:
    if not r["seed_count"]:
        return "-"
    return ", ".join(map(str, r["seeds"])) if r["seeds"] is not None else f"{r['seed_count']} random"


def _engine_section(e: dict) -> list[str]:
    parts = ["<h2 id=engine>The array in the GEMM engine</h2>"]
    if not e["available"]:
        return parts + [f"<p>The GEMM engine does not take this array: {_e(e['reason'])}.</p>"]
    s, r = e["start"], e["roofline"]
    parts.append(f"<p>The engine with its default memory ({_e(e['pseudo_channels'])} HBM2 pseudo-channels, "
                 "the HDL device models and JEDEC checkers) around this array.</p>")
    parts.append("<h3>Start of a GEMM</h3>")
    parts.append(f'<figure><div class=scroll><img class=wave src="{_e(s["svg"])}" alt="timing diagram of a GEMM '
                 'start"></div>'
                 f"<figcaption>A {_e('x'.join(map(str, s['gemm'])))} GEMM on the generated Verilog in "
                 f"{_e(s['simulator'])} (seed {_e(s['seed'])}), from the START strobe to its first output beat: "
                 "the engine's A and W read channels (handshakes), each pseudo-channel's row and column "
                 "commands, the MXU's beats. Waveform: "
                 f"<a href=\"{_e(s['vcd'])}\">{_e(s['vcd'])}</a>.</figcaption></figure>")
    parts.append(_table(["event", "first cycle after START"], [[k, v] for k, v in s["events"].items()], {1}))
    parts.append(f"<p>The whole GEMM: {_e(s['rtl_cycles'])} cycles (CYCLES).</p>")
    parts.append(f"<h3>GEMMs on the RTL ({_e(e['sim'])}) against the cycle model</h3>")
    parts.append("<p>Model: the engine's tile sequence on the array with a memory that never makes it wait "
                 "(<code>verif.cycles.engine_array_cycles</code>), a lower bound. Every result is bit-exact "
                 "against the golden model. Counters: the engine's performance registers.</p>")
    parts.append(_table(["M", "K", "N", "RTL cycles", "model", "feed", "wait A", "wait W", "wait acc", "wait dep",
                         "drain"],
                        [[g["m"], g["k"], g["n"], g["rtl_cycles"], g["model_cycles"], g["perf"]["feed"],
                          g["perf"]["wait_a"], g["perf"]["wait_w"], g["perf"]["wait_acc"], g["perf"]["wait_dep"],
                          g["perf"]["drain"]] for g in e["gemms"]], set(range(11))))
    parts.append("<h3>Roofline</h3>")
    parts.append('<figure><img src="roofline.svg" alt="roofline of the engine"></figure>')
    parts.append(f"<p>Array peak {_e(r['peak_macs_per_cycle'])} MACs/cycle, HBM {_e(r['bandwidth_bytes_per_cycle'])} "
                 f"B/cycle, ridge at {_e(r['ridge_macs_per_byte'])} MACs/B. <i>Roof</i>: the part of the roofline "
                 "above the GEMM, by its arithmetic intensity (left of the ridge the HBM bandwidth bounds it, "
                 "right of it the array's peak). <i>Held by</i>: what keeps the RTL below that roof: HBM "
                 "bandwidth, the array schedule (weight loads, fill and drain; the model explains at least 90 % "
                 "of the cycles), or memory stalls and set-up (the rest).</p>")
    parts.append("<p>Bytes moved: computed from the engine's blocking, not measured: every row of A once (in "
                 "32 B beats), the weights of every tile once per m-block, D written once as 4-byte values. "
                 "MACs/cycle: M K N over the RTL's CYCLES.</p>")
    parts.append(_table(["M", "K", "N", "bytes moved", "MACs/B", "MACs/cycle", "of peak", "roof", "held by"],
                        [[g["m"], g["k"], g["n"], g["bytes"], g["intensity"], g["macs_per_cycle"],
                          f"{100 * g['of_peak']:.1f} %", f"{g['bound']}-bound", g["limit"]] for g in e["gemms"]],
                        {0, 1, 2, 3, 4, 5, 6}))
    return parts


def _above_bound(mem: dict) -> str:
    """Why some efficiencies exceed their steady-state bound, with the largest excess of this run."""
    over = [x for x in mem["scenarios"] if x["of_bound"] is not None and x["of_bound"] > 1]
    if not over:
        return ""
    top = max(over, key=lambda x: x["of_bound"])
    return (f" {len(over)} pattern{'s' if len(over) > 1 else ''} land above the bound, at most "
            f"{100 * (top['of_bound'] - 1):.1f} % ({_e(top['scenario'])}): a run of scale {_e(mem['scale'])} lasts "
            "a few tREFI and its refreshes come in whole tRFC, so it has not paid refresh's steady-state share.")


def _memory_section(mem: dict | None) -> list[str]:
    parts = []
    if mem:
        t = mem["timing"]
        parts.append("<h2 id=memory>HBM controller</h2>")
        parts.append(f"<p>One pseudo-channel controller of the engine's memory (queue {_e(mem['queue_depth'])}, "
                     f"{_e(mem['banks'])} banks; CL {_e(t['CL'])}, tRCD {_e(t['tRCD'])}, tRP {_e(t['tRP'])}, "
                     f"tRC {_e(t['tRC'])}, tFAW {_e(t['tFAW'])}, tRFC {_e(t['tRFC'])}, tREFI {_e(t['tREFI'])} "
                     f"cycles) in {_e(mem['sim'])} with the fatal JEDEC checker, traffic scale {_e(mem['scale'])}, "
                     f"seed {_e(mem['seed'])}. "
                     "Efficiency: busy data-bus cycles over the run's cycles, each REF still owed at its end charged "
                     "at tRFC (<code>efficiency_debt_charged</code>); bound: the pattern's analytical limit (none "
                     "for mixed reads and writes, nor for one request at a time)."
                     + _above_bound(mem) + "</p>")
        parts.append(_table(["traffic", "requests", "cycles", "efficiency", "bound", "of bound", "row hits"],
                            [[x["scenario"], x["requests"], x["cycles"], f"{100 * x['efficiency_debt_charged']:.1f} %",
                              "-" if x["bound"] is None else f"{100 * x['bound']:.1f} %",
                              "-" if x["of_bound"] is None else f"{100 * x['of_bound']:.1f} %",
                              f"{100 * x['row_hit_rate']:.1f} %"] for x in mem["scenarios"]], {1, 2, 3, 4, 5, 6}))
        parts.append("<p>Read latency (request accepted to response taken, cycles) by the bank state the request "
                     "found (hit, closed bank, conflict), against the DRAM's floor for it (CL + burst, + tRCD when "
                     "closed, + tRP on a conflict); refresh_blocked: a PREA or REF was issued while it waited (no "
                     "floor):</p>")
        rows = [[x["scenario"], k, v["count"], v["p50"], v["p95"], v["p99"], v["max"], v["floor"]]
                for x in mem["scenarios"] for k, v in x["read_latency"].items()]
        parts.append(_table(["traffic", "bank state", "reads", "p50", "p95", "p99", "max", "floor"], rows,
                            {2, 3, 4, 5, 6, 7}))
    return parts


def render(doc: dict, title: str) -> str:
    """The page's HTML for the report ``doc``; every number on it is read from ``doc``."""
    c, t, cy, f, v = doc["config"], doc["timing"], doc["cycles"], doc["fpga"], doc["verification"]
    p = c["parameters"]
    parts = [f"<!DOCTYPE html><html lang=en><head><meta charset=utf-8><title>{_e(title)}</title>",
             f"<style>{_CSS}</style></head><body><h1>{_e(title)}</h1>",
             f'<p class=small>open-mxu {_e(doc["project"]["version"])}, commit {_e(doc["project"]["git_commit"])}; '
             f"every figure on this page is in <a href=report.json>report.json</a>.</p>"]

    parts.append("<h2 id=config>Configuration</h2>")
    parts.append(_table(["parameter", "value", "unit", "meaning"],
                        [[k, x["value"], x["unit"], x["meaning"]] for k, x in p.items()]))
    parts.append(f"<p>Latency from an activation beat to its output: <b>{_e(c['latency_cycles'])}</b> cycles.</p>")
    parts.append("<h3>Numerics contract</h3>" + _table(["", "rule"], [list(r) for r in c["numerics"]]))
    parts.append("<h3>Ports</h3>" + _table(["port", "direction", "bits", "meaning"],
                                            [[q["name"], q["direction"], q["width_bits"], q["meaning"]]
                                             for q in c["ports"]], {2}))

    hier = doc["hierarchy"]
    parts.append("<h2 id=blocks>Block diagram</h2>")
    parts.append(f'<figure><img src="{_e(hier["svg"])}" alt="block diagram"><figcaption>The component hierarchy '
                 "of the elaborated design (submodules as named in the Verilog) and the top's streams with "
                 "their payload widths, generated from the design.</figcaption></figure>")
    parts.append("<h2 id=timing>Timing of two tiles</h2>")
    verdict = ('<span class="ok">as the cycle model predicts</span>' if t["matches"]
               else '<span class="bad">NOT as the cycle model predicts</span>')
    parts.append(f'<figure><div class=scroll><img class=wave src="{_e(t["svg"])}" alt="timing diagram of two '
                 f"weight tiles\"></div><figcaption>The generated Verilog in {_e(t['simulator'])} "
                 f"({_e(t['testbench'])}, seed {_e(t['seed'])}): weight beats, the swap beat of each tile and its "
                 "wavefront down the rows (each row's first PE), activations and outputs, sampled at every rising "
                 "clock edge; cycle 0 is the first weight beat, as in the table below. A third tile of one "
                 "activation beat follows the two: its weights load behind the second tile's and its beat keeps "
                 "the array busy until the second tile's last output, so its handshakes show at the right "
                 "edge but are not in the table. "
                 f"Waveform: <a href=\"{_e(t['vcd'])}\">{_e(t['vcd'])}</a> (GTKWave, Surfer).</figcaption></figure>")
    parts.append(f"<p>Beat cycles read from the trace, counted from the first weight beat (cycle 0 of the "
                 f"diagram): {verdict}.</p>")
    parts.append(_table(["beats", "RTL (trace)", "cycle model"],
                        [[k, " ".join(map(str, t["rtl"][k])), " ".join(map(str, t["model"][k]))]
                         for k in ("wgt", "act", "out")]))

    parts.append("<h2 id=cycles>Cycle counts</h2>")
    parts.append(f"<p>Cycle model: {_e(cy['formula'])}.</p>")
    parts.append(_table(["M", "K", "N", "cycle model", "SCALE-Sim v2 WS", "ideal MKN/RC", "utilization"],
                        [[g["m"], g["k"], g["n"], g["model"], g["scalesim_ws"], g["ideal"],
                          f"{100 * g['utilization']:.1f} %"] for g in cy["gemms"]], {0, 1, 2, 3, 4, 5, 6}))
    parts.append('<figure><img src="utilization.svg" alt="utilization against M"></figure>')

    parts.append(f"<h2 id=fpga>FPGA ({_e(f['target'])})</h2>")
    if f["synth"]:
        s = f["synth"]
        cells = s["cells"]
        parts.append(_table(["LUT4", "FF", "carry", "DSP", "block RAM", "LUT RAM", "requested MHz", "achieved MHz",
                             "met"],
                            [[cells.get("lut4"), cells.get("ff"), cells.get("carry"), cells.get("dsp"),
                              cells.get("bram"), cells.get("lutram"), s["requested_mhz"], s["achieved_mhz"], s["met"]]],
                            set(range(8))))
        if s.get("critical_path"):
            cp = s["critical_path"]
            parts.append(f"<p>Critical path: {_e(cp.get('from_cell'))} to {_e(cp.get('to_cell'))}, "
                         f"{_e(cp.get('delay_ns'))} ns, {_e(cp.get('logic_levels'))} logic levels.</p>")
    else:
        parts.append("<p>Not synthesized for this report (<code>--no-synth</code>).</p>")
    if f["sweep"]:
        parts.append("<h3>From <code>mxu sweep</code></h3>")
        parts.append("<p>GMAC/s: the point's GEMM (M x K x N) at its achieved Fmax, cycles from the cycle "
                     "model.</p>")
        parts.append(_table(["options", "LUT4", "FF", "DSP", "achieved MHz", "GEMM", "GMAC/s"],
                            [[json.dumps(r["options"]), r["lut4"], r["ff"], r["dsp"], r["achieved_mhz"], r.get("gemm"),
                              r["gemm_gmacs"]] for r in f["sweep"]], {1, 2, 3, 4, 6}))

    if f["per_pe"]:
        parts.append("<h3>LUT4 per PE against pipeline stages</h3>")
        if f.get("per_pe_svg"):
            parts.append(f'<figure><img src="{_e(f["per_pe_svg"])}" alt="LUT4 per PE against stages"></figure>')
        parts.append(_table(["array", "stages", "back-pressure", "seed", "LUT4 / PE", "FF / PE", "achieved MHz"],
                            [[f"{r['rows']}x{r['cols']}", r["stages"], r["backpressure"], r["seed"], r["lut4_per_pe"],
                              r["ff_per_pe"], r["achieved_mhz"]] for r in f["per_pe"]], {1, 3, 4, 5, 6}))

    parts += _engine_section(doc["engine"])
    parts += _memory_section(doc["memory"])

    parts.append("<h2 id=verification>Verification</h2>")
    run = v.get("run")
    if run:
        tot = run["total"]
        parts.append(f"<p>The last regression run of this build folder ({_e(run['date'])}, commit "
                     f"{_e(run['commit'])}, <code>pytest {_e(' '.join(run['args']))}</code>, soak "
                     f"{'on' if run['options']['soak'] else 'off'}, seed {_e(run['options']['seed'])}): "
                     f"{_e(tot['tests'])} tests, {_e(tot['passed'])} passed, {_e(tot['failed'])} failed, "
                     f"{_e(tot['skipped'])} skipped. Values compared: result elements (MAC, PE and MXU outputs, "
                     "GEMM elements) checked bit for bit against the golden model; bytes compared: memory "
                     "read back and checked against a shadow memory. A dash: the suite compares none "
                     "(e.g. command-line, formal or cycle-model tests).</p>")
        parts.append(_table(["suite", "tests", "passed", "failed", "skipped", "simulators", "seeds", "values compared",
                             "bytes compared", "seconds"],
                            [[r["suite"], r["tests"], r["passed"], r["failed"], r["skipped"],
                              ", ".join(r["simulators"]) or "-", _seeds(r), r["checked"] or "-",
                              r.get("checked_bytes") or "-", r["seconds"]]
                             for r in run["suites"]], {1, 2, 3, 4, 7, 8, 9}))
        if run["formal"]:
            parts.append("<h3>Formal proofs</h3><p>SymbiYosys with Yices on the generated Verilog "
                         "(<code>tests/test_formal.py</code>), in the same run:</p>")
            parts.append(_table(["proof", "outcome", "seconds"],
                                [[f["proof"], f["outcome"], f["seconds"]] for f in run["formal"]], {2}))
    else:
        parts.append("<p>No regression run is recorded in this build folder (<code>make test</code> records one).</p>")
    if v["mutation"]:
        parts.append("<p>Mutation testing (<code>mxu mutate</code>): one-point bugs of each block and the share "
                     "its regression catches, equivalent mutants left out.</p>")
        parts.append(_table(["campaign", "block", "simulator", "mutants", "killed", "equivalent", "survived",
                             "score", "date", "commit"],
                            [[r["campaign"], r["block"], r["simulator"], r["mutants"], r["killed"],
                              r["equivalent"] if r["equivalence_depth"] else "not checked", r["survived"],
                              f"{r['score_pct']:.1f} %", r["date"], r["commit"]]
                             for r in v["mutation"]], {3, 4, 5, 6, 7}))
    parts.append("</body></html>")
    return "\n".join(parts)
