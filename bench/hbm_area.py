"""Benchmark: Yosys ``synth_ecp5`` cell counts of one HBM2 pseudo-channel controller.

Writes ``bench/results/hbm_area.json``: LUT4, flip-flops, carry cells, wide-function muxes,
distributed RAM (TRELLIS_DPR16X4) and block RAM (DP16KD) for each queue depth, with the DRAMsim3
timing set and the HBM2 pseudo-channel geometry (64-bit bus, BL4, 16 banks, 16,384 rows, 32
columns), plus one record of the FPGA configuration: controller + BRAM emulator
(:class:`hw.hbm.emulator.BRAMEmulator`) storing ``--emulated-rows`` rows per bank. Synthesis only:
no place and route, so no Fmax (``mxu synth`` does that). Usage::

    .venv/bin/python bench/hbm_area.py [--depths 8,16] [--emulated-rows 4] [--place ecp5-85k --freq 100]

``--place TARGET`` also places and routes the controller + emulator out of context with ``mxu synth``'s
flow (:func:`sim.synth.run_flow`) and records utilization and the achieved Fmax.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from amaranth.hdl import Module
from amaranth.lib import wiring

from bench.mac_area import yosys_stat
from hw.hbm.config import HBMConfig
from hw.hbm.controller import PseudoChannelController
from hw.hbm.emulator import BRAMEmulator
from sim.runner import generate_verilog

ROOT = Path(__file__).resolve().parents[1]

CELLS = ("LUT4", "TRELLIS_FF", "CCU2C", "PFUMX", "L6MUX21", "TRELLIS_DPR16X4", "DP16KD")


def synth_ecp5(verilog: Path, top: str, work: Path) -> dict:
    """``synth_ecp5`` cell counts (``bench/mac_area.py``'s runner) of :data:`CELLS`."""
    return yosys_stat(verilog, top, work, CELLS)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--depths", default="8,16", help="comma list of queue depths to synthesize")
    ap.add_argument(
        "--emulated-rows",
        type=int,
        default=4,
        help="rows per bank stored by the BRAM emulator in the controller + emulator record",
    )
    ap.add_argument(
        "--place",
        default=None,
        help="also place and route controller + emulator on this mxu synth target (e.g. ecp5-85k)",
    )
    ap.add_argument("--freq", type=float, default=100.0, help="requested clock for --place, MHz")
    ap.add_argument(
        "--out",
        type=Path,
        default=ROOT / "bench" / "results" / "hbm_area.json",
        help="JSON output (default bench/results/hbm_area.json)",
    )
    args = ap.parse_args(argv)
    records = []
    for depth in (int(d) for d in args.depths.split(",")):
        cfg = HBMConfig(pseudo_channels=1, queue_depth=depth)
        verilog = generate_verilog(lambda cfg=cfg: PseudoChannelController(cfg), name="hbm_pc", key=cfg)
        t0 = time.perf_counter()
        cells = synth_ecp5(verilog, "hbm_pc", ROOT / "build" / "bench" / "hbm_area" / f"q{depth}")
        rec = {
            "queue_depth": depth,
            "timing": "dramsim3_hbm2",
            **cells,
            "verilog_bytes": verilog.stat().st_size,
            "synth_s": round(time.perf_counter() - t0, 1),
        }
        print(json.dumps(rec), flush=True)
        records.append(rec)
    cfg = HBMConfig(pseudo_channels=1, queue_depth=16)
    rows = args.emulated_rows

    class WithEmulator(wiring.Component):
        """Controller + emulator: only the request/response streams are ports."""

        def __init__(self):
            ctrl = PseudoChannelController(cfg)
            self._ctrl = ctrl
            super().__init__({"req": wiring.In(ctrl.req.signature.flip()), "rsp": wiring.Out(ctrl.rsp.signature)})

        def elaborate(self, platform):
            m = Module()
            m.submodules.ctrl = self._ctrl
            m.submodules.emu = emu = BRAMEmulator(cfg, rows)
            wiring.connect(m, self._ctrl.dram, emu.dram)
            wiring.connect(m, wiring.flipped(self.req), self._ctrl.req)
            wiring.connect(m, self._ctrl.rsp, wiring.flipped(self.rsp))
            return m

    verilog = generate_verilog(WithEmulator, name="hbm_pc_emu", key=(cfg, rows))
    t0 = time.perf_counter()
    cells = synth_ecp5(verilog, "hbm_pc_emu", ROOT / "build" / "bench" / "hbm_area" / f"emu{rows}")
    rec = {
        "queue_depth": 16,
        "timing": "dramsim3_hbm2",
        "with_bram_emulator": True,
        "emulated_rows": rows,
        "emulated_bytes": cfg.banks * rows * cfg.columns * cfg.burst_bytes,
        **cells,
        "verilog_bytes": verilog.stat().st_size,
        "synth_s": round(time.perf_counter() - t0, 1),
    }
    if args.place:
        from sim import synth

        t0 = time.perf_counter()
        report = synth.run_flow(
            verilog,
            "hbm_pc_emu",
            args.place,
            ROOT / "build" / "bench" / "hbm_area" / f"place-{args.place}",
            freq_mhz=args.freq,
            block={"hbm_pc_emu": str((cfg.queue_depth, rows))},
        )
        rec["placed"] = {
            "target": args.place,
            "requested_mhz": args.freq,
            "report": report,
            "wall_s": round(time.perf_counter() - t0, 1),
        }
        print(synth.format_report(report), flush=True)
    print(json.dumps({k: v for k, v in rec.items() if k != "placed"}), flush=True)
    records.append(rec)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(records, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
