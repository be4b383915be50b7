"""The ECP5 board top (``hw.board.BoardTop``): simulate it behind a serial line, or build its bitstream.

* :func:`simulate_board` runs the board top in Verilator or Icarus (``verif/tb/board_tb.py``) with a
  host talking to it through a pseudo-terminal, as it would talk to ``/dev/ttyUSB0``: the real
  ``mxu board matmul --port`` command, or a Python function (protocol tests).
* :func:`build_bitstream` synthesizes the board top with Yosys, places and routes it with nextpnr-ecp5
  on a ULX3S (``constraints/ulx3s_board.lpf``: 25 MHz clock, the FTDI UART, FIRE 1 as reset, 8 LEDs)
  and packs the bitstream with ``yowasp-ecppack``.
"""

from __future__ import annotations

import json
import re
import shutil
import tempfile
import time
from dataclasses import replace
from pathlib import Path

__all__ = ["SIM_BAUD_DIVISOR", "sim_config", "board_verilog", "simulate_board", "BOARD_TARGETS", "BOARD_OSC_MHZ",
           "build_bitstream"]

#: clock cycles per UART bit in simulation: the receiver's minimum (``hw.board.uart_divisor``), which
#: ``test_uart_loopback`` checks. The default BoardConfig runs 217 at 115,200 baud and 25 MHz; the protocol
#: and the RTL are the same, the serial transfers in simulation 54 times shorter.
SIM_BAUD_DIVISOR = 4


def sim_config(config=None):
    """``config`` (default :class:`hw.board.BoardConfig`) with the baud set to
    clk_hz / SIM_BAUD_DIVISOR (4) for simulation."""
    from hw.board import BoardConfig
    config = config or BoardConfig()
    return replace(config, baud=config.clk_hz // SIM_BAUD_DIVISOR)


def board_verilog(config) -> Path:
    """Generate (or reuse from the cache) the board top's Verilog, module ``board``; returns its path."""
    from hw.generate import board_top_verilog
    from sim.runner import generate_verilog
    return generate_verilog(lambda: board_top_verilog(config, "board"), name="board", key=("board_top", config))


def simulate_board(host: dict, config=None, *, sim: str = "verilator", timeout_s: float = 600,
                   poll_cycles: int = 200, waves: str | Path | None = None) -> dict:
    """Simulate the board top with ``host`` talking to it over a pseudo-terminal.

    Args:
        host: ``{"argv": [...]}`` (a command; ``{port}`` in an argument is replaced by the pty's path,
            optional ``"env"``) or ``{"call": "module:function", "args": {...}}`` (called as
            ``function(port, **args)`` in a thread of the simulator's Python).
        config: a :class:`hw.board.BoardConfig` (default :func:`sim_config`).
        sim: "verilator" or "icarus".
        timeout_s: wall-clock limit for the host, in s.
        poll_cycles: clock cycles between two copies of bytes between the pty and the UART models.
        waves: write a waveform there (.fst or .vcd).

    Returns:
        The bench's record: ``returncode``/``stdout``/``stderr`` (command) or ``value``/``error``
        (function), ``bytes_to_board``, ``bytes_to_host``, ``sim_cycles``, ``wall_s``, ``led``, plus
        ``build_s`` and ``cached_build``.

    Raises:
        RuntimeError: the bench failed (the host timed out, the simulator failed); the message holds
            the end of its log.
    """
    from sim.runner import build_root, run_cocotb
    config = config or sim_config()
    verilog = board_verilog(config)
    work = build_root() / "runs"
    work.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=work) as tmp:
        result_path = Path(tmp) / "result.json"
        conf = {"clk_ns": 1e9 / config.clk_hz, "baud": config.baud, "host": host, "result": str(result_path),
                "timeout_s": timeout_s, "poll_cycles": poll_cycles}
        res = run_cocotb([verilog], "board", "verif.tb.board_tb", simulator=sim,
                         waves_path=Path(waves).resolve() if waves else None,
                         env={"BOARD_TB_CONFIG": json.dumps(conf)})
        if res.failed or not result_path.is_file():
            raise RuntimeError(f"board testbench failed on {sim}:\n{res.log_tail()}")
        out = json.loads(result_path.read_text())
    out.update(build_s=res.build_s, cached_build=res.cached_build)
    return out


#: Boards the board top is built for: the ULX3S (FTDI UART on the board) with a 25F or an 85F.
BOARD_TARGETS = {
    "ulx3s-25f": {"device": "LFE5U-25F", "part": "LFE5U-25F-6BG381C", "nextpnr": ("--25k", "--package", "CABGA381",
                                                                                   "--speed", "6"),
                  "synth_target": "ecp5-25k"},
    "ulx3s-85f": {"device": "LFE5U-85F", "part": "LFE5U-85F-6BG381C", "nextpnr": ("--85k", "--package", "CABGA381",
                                                                                   "--speed", "6"),
                  "synth_target": "ecp5-85k"},
}
BOARD_LPF = "ulx3s_board.lpf"


#: The ULX3S oscillator on pin G2, in MHz.
BOARD_OSC_MHZ = 25.0

_WRAPPER = """// Board wrapper: 25 MHz oscillator -> ECP5 PLL (EHXPLLL, from yowasp-ecppll) -> the board top.
// `rst` (FIRE 1) and PLL lock are synchronized into the design clock (two flip-flops).
module board_top(input clk, input rst, input uart_rx, output uart_tx, output [7:0] led);
  wire design_clk, locked;
{clock}
  reg [1:0] rst_sync = 2'b11;
  always @(posedge design_clk) rst_sync <= {{rst_sync[0], rst | ~locked}};
  board board_i(.clk(design_clk), .rst(rst_sync[1]), .uart_rx(uart_rx), .uart_tx(uart_tx), .led(led));
endmodule
"""


def build_bitstream(config, board: str, out_dir: Path, *, seed: int = 1, progress=None) -> dict:
    """Yosys + nextpnr-ecp5 + ecppack of the board top for ``board`` (a :data:`BOARD_TARGETS` key).

    The design runs at ``config.clk_hz``: when that differs from the 25 MHz oscillator, an ECP5 PLL
    (``EHXPLLL``, parameters from ``yowasp-ecppll``, VCO 400-800 MHz) makes it, and ``board_top``
    (``board_top.v``) wraps the PLL and the board top (reset = FIRE 1 or PLL not locked). Writes into
    ``out_dir`` (any folder): ``board.v``, ``pll.v``, ``board_top.v``, ``ulx3s_board.lpf``,
    ``board.bit``, ``board.json`` (report: the commit built (``+dirty`` with local edits), the placement
    seed, cells, placed utilization, Fmax of the design clock against ``clk_hz``, tool versions, wall
    times) and the tools' logs. Nothing is left half written: the files
    are made in a work folder inside ``out_dir`` and moved in at the end (removed when the design does
    not fit; kept, and named in the message, when a tool fails).

    Raises:
        ValueError: unknown board, or a clock the PLL cannot make.
        sim.synth.DoesNotFit: the design does not fit the part.
        sim.synth.SynthError: a tool failed.
    """
    from sim import synth
    if board not in BOARD_TARGETS:
        raise ValueError(f"board must be one of {', '.join(BOARD_TARGETS)}; got {board!r}")
    bt = BOARD_TARGETS[board]
    base = synth.TARGETS[bt["synth_target"]]
    freq = config.clk_hz / 1e6
    target = replace(base, name=board, board=f"ULX3S {bt['device'][5:]}", part=bt["part"], package="CABGA381",
                     speed="6", constraints=BOARD_LPF, board_clock_mhz=BOARD_OSC_MHZ,
                     nextpnr_args=tuple(bt["nextpnr"]), capacity=dict(base.capacity, io=197))
    say = progress or (lambda s: None)
    out_dir = Path(out_dir)
    made_out = not out_dir.exists()
    out_dir.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=".mxu-board-", dir=out_dir))
    t0 = time.perf_counter()
    try:
        sources = ["board.v"]
        if abs(freq - BOARD_OSC_MHZ) > 1e-9:   # the PLL first: a clock it cannot make fails in a second
            proc = synth._run([synth._tool("yowasp-ecppll"), "-i", f"{BOARD_OSC_MHZ:g}", "-o", f"{freq:g}",
                               "-f", "pll.v"], work, "ecppll.log")
            text = (work / "ecppll.log").read_text() if (work / "ecppll.log").is_file() else ""
            got = re.search(r"clkout0 frequency: ([0-9.]+) MHz", text)
            if proc.returncode != 0 or not got or abs(float(got.group(1)) - freq) > 1e-6:
                raise ValueError(f"the ECP5 PLL cannot make {freq:g} MHz from {BOARD_OSC_MHZ:g} MHz exactly"
                                 + (f" (nearest {got.group(1)} MHz)" if got else "") + "; choose another clock")
            clock = "  pll pll_i(.clkin(clk), .clkout0(design_clk), .locked(locked));"
            sources.append("pll.v")
        else:
            clock = "  assign design_clk = clk;\n  assign locked = 1'b1;"
        (work / "board_top.v").write_text(_WRAPPER.format(clock=clock))
        sources.append("board_top.v")
        say("generating the board top's Verilog")
        shutil.copy(board_verilog(config), work / "board.v")
        (work / BOARD_LPF).write_text((synth.CONSTRAINTS_DIR / BOARD_LPF).read_text())
        say(f"yosys: synthesizing the board top for {target.part}")
        syn = synth.synthesize(work, sources, "board_top", target, netlist="netlist.json")
        problems = synth.fit_problems(syn["cells"], target)
        if problems:
            raise synth.DoesNotFit(f"the board top does not fit {target.part} ({board}): " + "; ".join(problems))
        say(f"nextpnr-ecp5: placing and routing on {target.part} ({freq:g} MHz design clock)")
        pnr = synth.place_and_route(work, "netlist.json", target, BOARD_LPF, freq, seed,
                                    extra_args=("--textcfg", "board.config"))
    except (synth.DoesNotFit, ValueError):
        shutil.rmtree(work, ignore_errors=True)   # nothing to look at: the message says what is missing
        if made_out and not any(out_dir.iterdir()):
            out_dir.rmdir()
        raise
    say("ecppack: packing the bitstream")
    t1 = time.perf_counter()
    proc = synth._run([synth._tool("yowasp-ecppack"), "board.config", "board.bit"], work, "ecppack.log")
    if proc.returncode != 0 or not (work / "board.bit").is_file():
        raise synth.SynthError(f"ecppack failed: {synth._first_error(work / 'ecppack.log')} (log: {work})")
    pack_s = time.perf_counter() - t1
    # the design clock is the PLL output (or the pin itself without a PLL)
    fmax = [dict(f, requested_mhz=freq) for f in synth._fmax(target, pnr, freq, syn["cells"]["dsp"])
            if f["clock"] != "clk" or abs(freq - BOARD_OSC_MHZ) < 1e-9]
    from sim.cli.files import project_info
    report = {
        "board": board, "part": target.part, "git_commit": project_info()["git_commit"], "seed": seed,
        "oscillator_mhz": BOARD_OSC_MHZ, "clk_mhz": freq,
        "pll": abs(freq - BOARD_OSC_MHZ) > 1e-9, "baud": config.baud, "uart_divisor": config.divisor,
        "engine": config.engine.as_dict(), "memory_bytes": config.memory_bytes,
        "cells": syn["cells"], "utilization": synth._utilization(target, syn["cells"], pnr), "fmax": fmax,
        "bitstream_bytes": (work / "board.bit").stat().st_size,
        "tools": synth.synth_tool_versions(),
        "wall_s": {"yosys_s": round(syn["seconds"], 2), "nextpnr_s": round(pnr["seconds"], 2),
                   "ecppack_s": round(pack_s, 2), "total_s": round(time.perf_counter() - t0, 2)},
    }
    (work / "board.json").write_text(json.dumps(report, indent=2) + "\n")
    for name in ("netlist.json", "board.config"):
        (work / name).unlink(missing_ok=True)
    for f in work.iterdir():
        f.replace(out_dir / f.name)
    work.rmdir()
    return report
