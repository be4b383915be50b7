"""Run one pseudo-channel controller in Amaranth's Python simulator with :class:`~verif.hbm_harness.PCHarness`."""

from __future__ import annotations

from dataclasses import replace

from amaranth.hdl import Module
from amaranth.lib import wiring

from hw.hbm.config import RAMULATOR2_HBM2, HBMConfig
from hw.hbm.controller import PseudoChannelController
from hw.hbm.emulator import BRAMEmulator

from .amaranth_tb import run_testbench, set_together
from .hbm_harness import PCHarness, Pins

__all__ = ["run_pc_amaranth", "traffic_reference", "STRESS", "STRESS_TRAFFIC"]

#: The small pseudo-channel (64 rows of 8 columns, queue 8) with Ramulator2's HBM2 timings but
#: refresh every 400 cycles (tRFC 60), at most 2 REFs postponed, and an age cap of 32 cycles: the
#: refresh postponement limit, the forced drain and the age cap's strict order, which real timings
#: reach only after tens of thousands of busy cycles, happen every few hundred cycles here.
STRESS = HBMConfig(pseudo_channels=1, queue_depth=8, rows=64, columns=8,
                   timing=replace(RAMULATOR2_HBM2, tRFC=60, tREFI=400), max_refresh_postpone=2, age_cap_cycles=32)

#: Traffic on :data:`STRESS` by name: (segments of :func:`~verif.hbm_harness.build_traffic`, seed or
#: ``None`` for the test's seed, input-gap probability, back-pressure probability).
STRESS_TRAFFIC: dict[str, tuple[list[dict], int | None, float, float]] = {
    # few addresses (hazards, row hits) then the whole channel, pauses and back-pressure
    "hazards": ([{"kind": "random", "count": 300, "span_bursts": 12, "write_p": 0.5, "partial_p": 0.5},
                 {"kind": "random", "count": 200, "write_p": 0.3, "bursts": 2}], None, 0.25, 0.25),
    # back to back: the queue never empties, so REFs are postponed to the limit and requests age out
    "dense": ([{"kind": "random", "count": 1200, "write_p": 0.5, "partial_p": 0.3}], 3, 0.0, 0.1),
    # row conflicts in one bank, then hits and misses mixed
    "conflicts": ([{"kind": "conflicts", "count": 200, "write_p": 0.3},
                   {"kind": "random", "count": 400, "span_bursts": 40, "write_p": 0.3}], 5, 0.1, 0.1),
    # every bank's own logic in turn: an ACT burst over all banks, then per bank a miss arriving while
    # it is open and idle, a hit, a same-address write behind a read (random traffic rarely makes
    # these in a given bank; mutation testing found a hazard and a PRE-timing bug they alone catch)
    "banks": ([{"kind": "bank_sweep", "count": 4, "fill": 24, "write_p": 0.3}], 1, 0.0, 0.3),
    # tFAW windows whose first ACT came early and whose other four came at tRRD: each window slot's
    # own wait decides the sixth ACT (mutation testing: a slot counting down twice as fast, a pending
    # wait cut short and a PRE guard on the wrong bank passed every other part)
    "windows": ([{"kind": "act_windows", "count": 60}], 1, 0.0, 0.0),
}


def run_pc_amaranth(harness: PCHarness, max_cycles: int, vcd: str | None = None,
                    drain_cycles: int = 0, dut_config: HBMConfig | None = None,
                    emulated_rows: int | None = None) -> dict:
    """Simulate until every request is answered (plus ``drain_cycles`` idle cycles), at most
    ``max_cycles``; return :meth:`PCHarness.finish`'s statistics.

    ``dut_config`` builds the controller from another configuration than the harness's device
    model and checker (tests use it to prove that a controller with a wrong timing fails).
    With ``emulated_rows``, a :class:`~hw.hbm.emulator.BRAMEmulator` is attached to the controller
    and supplies the read data (the device model still checks every command and the write data).

    Raises:
        AssertionError: any check of the harness, the device model or the JEDEC checker, or a
            time-out (``max_cycles``) with requests outstanding.
    """
    ctrl = PseudoChannelController(dut_config or harness.config)
    if emulated_rows is None:
        dut = ctrl
    else:
        dut = Module()
        dut.submodules.ctrl = ctrl
        dut.submodules.emu = emu = BRAMEmulator(harness.config, emulated_rows)
        wiring.connect(dut, ctrl.dram, emu.dram)
    d = ctrl.dram
    result = {}
    # the testbench's inputs in one ctx.set per cycle (verif.amaranth_tb.set_together)
    inputs = [(ctrl.req.valid, "req_valid"), (ctrl.req.payload.write, "req_write"), (ctrl.req.payload.addr, "req_addr"),
              (ctrl.req.payload.tag, "req_tag"), (ctrl.req.payload.wdata, "req_wdata"),
              (ctrl.req.payload.wmask, "req_wmask"), (ctrl.rsp.ready, "rsp_ready")]
    if emulated_rows is None:
        inputs += [(d.rdata_valid, "rdata_valid"), (d.rdata, "rdata")]

    async def tb(ctx):
        idle = 0
        while harness.cycle < max_cycles:
            pins = Pins(
                row_cmd=ctx.get(d.row_cmd.as_value()), row_bg=ctx.get(d.row_bg), row_bank=ctx.get(d.row_bank),
                row_row=ctx.get(d.row_row), col_cmd=ctx.get(d.col_cmd.as_value()), col_bg=ctx.get(d.col_bg),
                col_bank=ctx.get(d.col_bank), col_row=ctx.get(d.col_row), col_column=ctx.get(d.col_column),
                wdata=ctx.get(d.wdata), wmask=ctx.get(d.wmask), wdata_valid=ctx.get(d.wdata_valid),
                req_ready=ctx.get(ctrl.req.ready), rsp_valid=ctx.get(ctrl.rsp.valid),
                rsp_tag=ctx.get(ctrl.rsp.payload.tag), rsp_rdata=ctx.get(ctrl.rsp.payload.rdata),
                refresh_owed=ctx.get(ctrl.refresh_owed), queue_empty=ctx.get(ctrl.queue_empty))
            drv = harness.step(pins)
            set_together(ctx, [(signal, getattr(drv, name)) for signal, name in inputs])
            await ctx.tick()
            if harness.done:
                idle += 1
                if idle > drain_cycles + harness.config.timing.CWL + 2:
                    break
        result.update(harness.finish())

    run_testbench(dut, tb, period_s=1e-9, vcd=vcd)
    return result


def traffic_reference(config: HBMConfig, traffic: list[dict], seed: int, gap_p: float = 0.0, stall_p: float = 0.0,
                      max_cycles: int = 200_000) -> dict:
    """The Amaranth controller's run of ``traffic`` (segments of :func:`~verif.hbm_harness.build_traffic`)
    with the generator, pauses and back-pressure the cocotb bench (``verif/tb/hbm_tb.py``) draws from
    ``numpy.random.default_rng(seed)``: its statistics, ``cycles`` and ``trace_digest`` included, to
    compare the generated Verilog with command for command."""
    import numpy as np

    from .hbm_harness import build_traffic

    rng = np.random.default_rng(seed)
    harness = PCHarness(config, build_traffic(config, traffic, rng), rng=rng, gap_p=gap_p, stall_p=stall_p)
    return run_pc_amaranth(harness, max_cycles)
