"""Run one pseudo-channel controller in Amaranth's Python simulator with :class:`~verif.hbm_harness.PCHarness`."""

from __future__ import annotations

from amaranth.hdl import Cat, Module, Value
from amaranth.lib import wiring
from amaranth.sim import Simulator

from hw.hbm.config import HBMConfig
from hw.hbm.controller import PseudoChannelController
from hw.hbm.emulator import BRAMEmulator

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
    # The testbench's inputs in one ctx.set per cycle: each set settles the whole design (one per
    # input made test_refresh_while_saturated take 28.7 s instead of 23.0 s).
    inputs = [ctrl.req.valid, ctrl.req.payload.write, ctrl.req.payload.addr, ctrl.req.payload.tag,
              ctrl.req.payload.wdata, ctrl.req.payload.wmask, ctrl.rsp.ready]
    if emulated_rows is None:
        inputs += [d.rdata_valid, d.rdata]
    drive = Cat(*inputs)
    widths = [len(Value.cast(x)) for x in inputs]

    def drive_values(drv):
        values = [drv.req_valid, drv.req_write, drv.req_addr, drv.req_tag, drv.req_wdata, drv.req_wmask,
                  drv.rsp_ready]
        return values + ([drv.rdata_valid, drv.rdata] if emulated_rows is None else [])

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
            word, shift = 0, 0
            for value, width in zip(drive_values(drv), widths):
                word |= (value & ((1 << width) - 1)) << shift
                shift += width
            ctx.set(drive, word)
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
