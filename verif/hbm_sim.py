"""Run one pseudo-channel controller in Amaranth's Python simulator with :class:`~verif.hbm_harness.PCHarness`."""

from __future__ import annotations

from amaranth.hdl import Module
from amaranth.lib import wiring
from amaranth.sim import Simulator

from hw.hbm.config import HBMConfig
from hw.hbm.controller import PseudoChannelController
from hw.hbm.emulator import BRAMEmulator

from .amaranth_tb import set_together
from .hbm_harness import PCHarness, Pins

__all__ = ["run_pc_amaranth"]


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
                refresh_owed=ctx.get(ctrl.refresh_owed))
            drv = harness.step(pins)
            set_together(ctx, [(signal, getattr(drv, name)) for signal, name in inputs])
            await ctx.tick()
            if harness.done:
                idle += 1
                if idle > drain_cycles + harness.config.timing.CWL + 2:
                    break
        result.update(harness.finish())

    sim = Simulator(dut)
    sim.add_clock(1e-9)
    sim.add_testbench(tb)
    if vcd:
        with sim.write_vcd(vcd):
            sim.run()
    else:
        sim.run()
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
