"""The GEMM engine and its HBM controller with the HDL device model and JEDEC checker on every
pseudo-channel: the whole memory system inside the simulator, for transaction-level testbenches
(:mod:`verif.tb.gemm_fast_tb`)."""

from __future__ import annotations

import functools

from amaranth.hdl import Cat, ClockDomain, ClockSignal, DomainRenamer, Module, Mux, ResetSignal, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from hw.engine import EngineConfig
from hw.engine.csr import axi4lite_signature
from hw.hbm.interface import ColCmd
from hw.top import GEMMTop

from .hbm_device import STORE_VERILOG, HBMDeviceHDL
from .jedec_checker import JedecCheckerHDL

__all__ = ["GEMMSimTop", "gemm_sim_verilog", "core_domain", "VIOLATION_FIELDS"]

#: The checker outputs each pseudo-channel brings to the top (``pc<k>_v_<field>``): a testbench reads
#: them there, so the simulator need not make the design's inner signals visible.
VIOLATION_FIELDS = ("rule", "cycle", "cmd", "prev", "bg", "bank", "row", "col", "distance")


class GEMMSimTop(wiring.Component):
    """:class:`hw.top.GEMMTop` with an :class:`~verif.hdl.hbm_device.HBMDeviceHDL` (submodules
    ``dev0``, ``dev1``, ...) on each pseudo-channel.

    Ports:
        csr: AXI4-Lite slave (the engine's registers); irq: Out(1).
        finish: In(1), strobe at the end of a run (every checker's refresh-rate check, one cycle later:
            the strobe is registered, so no checker logic depends on a top-level input).
        violation: Out(1), some pseudo-channel's checker latched a JEDEC violation (details on
            ``dev<k>.checker.v_*``); row_error: Out(1), an ACT to a row the model does not store.
        stall_a, stall_w, stall_c: In(8), random back-pressure on the engine's A, W and C ports
            (:class:`hw.axi_stall.AXI4Stall`: each channel closed in about ``stall / 256`` of the
            cycles; 0, the value out of reset, changes no cycle), registered once.
        since_col: Out(16), clock cycles since the last cycle with a column command on any
            pseudo-channel or a request waiting in any controller's queue (``queue_empty<k>`` low),
            saturating at 65,535 (the testbench waits on it for the queues to drain, as
            :mod:`verif.tb.gemm_tb` counts the same from the pins and the queue flags).
        pc<k>_violation, pc<k>_v_<field>: Out, pseudo-channel k's checker's latched violation
            (:data:`VIOLATION_FIELDS`).

    Args:
        config: the engine's :class:`~hw.engine.EngineConfig`.
        stored_rows, fill: of each device model.
        pe_blackbox, row_name: passed to the MXU (Verilog generation, :func:`gemm_sim_verilog`).
        hbm_name: passed to the :class:`~hw.top.GEMMTop` (Verilog generation).
        checker_name: device k's JEDEC checker is the Verilog module ``<checker_name><k>`` (Verilog
            generation, :class:`hw.instance.ModuleInstance`).
        device_hbm: the devices' :class:`~hw.hbm.config.HBMConfig` when it is not the controller's
            (same geometry, CL and CWL; other timing rules): a test that the checker catches a
            controller built with a rule too short.
    """

    def __init__(self, config: EngineConfig, *, stored_rows: int = 256, fill: int = 0, pe_blackbox: bool = False,
                 row_name: str = "mxu_row", device_hbm=None, hbm_name: str | None = None,
                 checker_name: str | None = None):
        self.config, self.pe_blackbox, self.row_name, self.hbm_name = config, pe_blackbox, row_name, hbm_name
        dev = config.hbm if device_hbm is None else device_hbm
        if (dev.field_bits, dev.burst_bytes, dev.timing.CL, dev.timing.CWL) != (
                config.hbm.field_bits, config.hbm.burst_bytes, config.hbm.timing.CL, config.hbm.timing.CWL):
            raise ValueError("device_hbm must have the controller's geometry, burst size, CL and CWL")
        self.devices = [HBMDeviceHDL(dev, k, stored_rows=stored_rows, fill=fill,
                                     checker_name=None if checker_name is None else f"{checker_name}{k}")
                        for k in range(config.hbm.pseudo_channels)]
        members = {"csr": Out(axi4lite_signature()), "irq": Out(1), "finish": In(1), "violation": Out(1),
                   "row_error": Out(1), "since_col": Out(16), **{f"stall_{x}": In(8) for x in "awc"}}
        for k, d in enumerate(self.devices):  # each checker's latched violation, as top-level ports
            for f in VIOLATION_FIELDS:
                members[f"pc{k}_v_{f}"] = Out(getattr(d.checker, f"v_{f}").shape())
            members[f"pc{k}_violation"] = Out(1)
        super().__init__(members)

    def elaborate(self, platform):
        m = Module()
        # The design runs in domain "core", whose reset is the rst port registered once. Amaranth folds
        # a domain's reset into every register's next-state logic; with rst a top-level input, Verilator
        # puts all of that logic in its input-combinational region and evaluates it at every eval call,
        # both clock edges (the largest functions of a perf profile of the 8x8 engine). Registered, it
        # runs once per rising edge. (The testbench releases rst one cycle earlier, so the design leaves reset at the
        # same edge as the GEMMTop of verif.tb.gemm_tb.)
        # rst_q starts at 0 and rises at the first clock edge: that change is the event that makes
        # Icarus evaluate the reset into the next-state logic (a constant 1 from time 0 is no event,
        # and the design ran on X); the testbench holds rst for two edges.
        core_domain(m)
        top = GEMMTop(self.config, pe_blackbox=self.pe_blackbox, row_name=self.row_name, hbm_name=self.hbm_name,
                      stall=True)
        m.submodules.top = DomainRenamer("core")(top)
        wiring.connect(m, wiring.flipped(self.csr), top.csr)
        # Registered for the same reason as rst: the checkers' whole first-violation chain reads it.
        finish_q = Signal(reset_less=True)
        m.d.sync += finish_q.eq(self.finish)
        m.d.comb += self.irq.eq(top.irq)
        for x in "awc":  # registered, as finish: the stall gates read them every cycle
            rate = Signal(8, name=f"stall_{x}_q", reset_less=True)
            m.d.sync += rate.eq(getattr(self, f"stall_{x}"))
            m.d.comb += getattr(top, f"stall_{x}").eq(rate)
        for k, dev in enumerate(self.devices):
            m.submodules[f"dev{k}"] = DomainRenamer("core")(dev)
            wiring.connect(m, getattr(top, f"pc{k}"), dev.dram)
            m.d.comb += dev.finish.eq(finish_q)
            m.d.comb += getattr(self, f"pc{k}_violation").eq(dev.checker.violation)
            for f in VIOLATION_FIELDS:
                m.d.comb += getattr(self, f"pc{k}_v_{f}").eq(getattr(dev.checker, f"v_{f}"))
        m.d.comb += [self.violation.eq(Cat(*(d.checker.violation for d in self.devices)).any()),
                     self.row_error.eq(Cat(*(d.row_error for d in self.devices)).any())]
        # a write that waits in a queue behind a REF begun while the queue was empty must restart
        # the count: a quiet spell from before DONE does not say the posted writes reached the device
        busy = (Cat(*(d.dram.col_cmd != ColCmd.NOP for d in self.devices)).any()
                | ~Cat(*(getattr(top, f"queue_empty{k}") for k in range(len(self.devices)))).all())
        m.d.core += self.since_col.eq(Mux(busy, 0, Mux(self.since_col.all(), self.since_col, self.since_col + 1)))
        return m


def core_domain(m: Module) -> None:
    """Add the local domain ``core`` to ``m``: the ``sync`` clock, reset by the ``sync`` reset
    registered once (see :meth:`GEMMSimTop.elaborate` for why a simulation top runs its design there)."""
    m.domains.core = core = ClockDomain("core", local=True)
    rst_q = Signal(reset_less=True)
    m.d.sync += rst_q.eq(ResetSignal("sync"))
    m.d.comb += [core.clk.eq(ClockSignal("sync")), core.rst.eq(rst_q)]


def gemm_sim_verilog(config: EngineConfig, *, stored_rows: int = 256, fill: int = 0, device_hbm=None) -> str:
    """Verilog of :class:`GEMMSimTop` (module ``gemm_sim``) with the storage module appended.

    The MXU's PE and row, the HBM controller (``gemm_sim_hbm``, :func:`hw.generate.hbm_verilog`) and
    each device's JEDEC checker (``gemm_sim_chk<k>``, some 14,000 lines each) are modules of their own;
    the controller and the checkers are converted once per process and configuration.
    """
    from hw.generate import hbm_verilog, verilog_with_mxu
    from hw.top import GEMMTop

    dev = config.hbm if device_hbm is None else device_hbm

    def make(row_name):
        return GEMMSimTop(config, stored_rows=stored_rows, fill=fill, pe_blackbox=True, row_name=row_name,
                          device_hbm=device_hbm, hbm_name="gemm_sim_hbm", checker_name="gemm_sim_chk")

    modules = [hbm_verilog(GEMMTop.hbm_controller(config), "gemm_sim_hbm")]
    modules += [_checker_verilog(dev, k, f"gemm_sim_chk{k}") for k in range(config.hbm.pseudo_channels)]
    return verilog_with_mxu(make, config.mxu, "gemm_sim", modules=modules) + "\n" + STORE_VERILOG


@functools.lru_cache(maxsize=16)
def _checker_verilog(hbm_config, pc: int, module_name: str) -> str:
    """Verilog of :class:`~verif.hdl.jedec_checker.JedecCheckerHDL` for pseudo-channel ``pc`` as module
    ``module_name`` (without ``(* top = 1 *)``)."""
    from hw.generate import cached_text, submodule_verilog

    return cached_text(module_name, ("jedec_checker", hbm_config, pc),
                       lambda: submodule_verilog(JedecCheckerHDL(hbm_config, pc), module_name))
