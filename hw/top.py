"""Top level for simulation: the GEMM engine joined to the HBM2-style controller.

``GEMMTop`` = :class:`~hw.engine.GEMMEngine` + :class:`~hw.hbm.axi.HBMController` with three AXI4 ports
(engine ``mem_a`` -> ``axi0``, ``mem_w`` -> ``axi1``, ``mem_c`` -> ``axi2``). Its pins are the engine's
AXI4-Lite register port ``csr``, ``irq``, and one DRAM command/data interface per pseudo-channel
(``pc0`` .. ``pc{P-1}``, :func:`~hw.hbm.controller.dram_signature`), which the testbench connects to the
cycle-accurate HBM2 device model with its JEDEC timing checker (``verif/hbm_device.py``).
"""

from __future__ import annotations

from amaranth.hdl import Module
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from .axi_slice import AXI4RegisterSlice
from .axi_stall import AXI4Stall
from .engine import EngineConfig, GEMMEngine
from .engine.csr import axi4lite_signature
from .hbm.axi import HBMController
from .hbm.interface import dram_signature
from .instance import ModuleInstance

__all__ = ["GEMMTop"]


class GEMMTop(wiring.Component):
    """Engine + HBM controller, an :class:`~hw.axi_slice.AXI4RegisterSlice` on each engine port
    (AW and AR fully registered, W forward: one cycle more per request, full rate).

    Ports: ``csr`` (AXI4-Lite slave, 7-bit address, 32-bit data), ``irq`` (Out 1), ``pc<k>`` (Out
    :func:`dram_signature` per pseudo-channel), ``refresh_owed<k>`` (Out 4), ``queue_empty<k>`` (Out 1:
    no accepted request of pseudo-channel k waits for its command; with DONE, every result write is
    on the pins).

    Args:
        config: :class:`EngineConfig`.
        pe_blackbox, row_name: see :class:`~hw.mxu.MXU` (Verilog generation).
        hbm_name: instantiate the HBM controller (:meth:`hbm_controller`) as the Verilog module of this
            name (:class:`~hw.instance.ModuleInstance`; Verilog generation, see
            :func:`hw.generate.gemm_top_verilog`) instead of flattening it.
        stall: for simulation, an :class:`~hw.axi_stall.AXI4Stall` between each engine port and its
            slice, with ports ``stall_a``, ``stall_w``, ``stall_c`` (In(8), its ``rate``: random
            back-pressure on the engine's memory; 0 changes no cycle).
    """

    def __init__(self, config: EngineConfig | None = None, *, pe_blackbox: bool = False, row_name: str = "mxu_row",
                 hbm_name: str | None = None, stall: bool = False):
        self.config = config or EngineConfig()
        self.pe_blackbox, self.row_name, self.hbm_name, self.stall = pe_blackbox, row_name, hbm_name, stall
        members = {"csr": Out(axi4lite_signature()), "irq": Out(1)}
        if stall:
            members.update({f"stall_{x}": In(8) for x in "awc"})
        for k in range(self.config.hbm.pseudo_channels):
            members[f"pc{k}"] = Out(dram_signature(self.config.hbm))
            members[f"refresh_owed{k}"] = Out(4)
            members[f"queue_empty{k}"] = Out(1)
        super().__init__(members)

    @staticmethod
    def hbm_controller(config, ctrl_name: str | None = None) -> HBMController:
        """The HBM controller of a top with ``config`` (an :class:`EngineConfig`): three AXI4 ports
        (A, W, C), 1-bit IDs, the engine's reorder buffer depth; ``ctrl_name`` as
        :class:`~hw.hbm.axi.HBMController` takes it."""
        cfg = config
        return HBMController(cfg.hbm, axi_ports=3, id_bits=1, rob_depth=cfg.rob_depth, ctrl_name=ctrl_name)

    def elaborate(self, platform):
        m = Module()
        cfg = self.config
        m.submodules.engine = eng = GEMMEngine(cfg, pe_blackbox=self.pe_blackbox, row_name=self.row_name)
        hbm = self.hbm_controller(self.config)
        m.submodules.hbm = hbm if self.hbm_name is None else ModuleInstance(hbm, self.hbm_name)
        wiring.connect(m, wiring.flipped(self.csr), eng.csr)
        m.d.comb += self.irq.eq(eng.irq)
        # a register slice on each engine port: without it the engine's VALIDs run through the front
        # end's round-robin arbiter into the READYs of the other ports and back into the engine
        for i, name in enumerate(("mem_a", "mem_w", "mem_c")):
            m.submodules[f"{name}_slice"] = sl = AXI4RegisterSlice(cfg.hbm.address_bits, cfg.hbm.burst_bytes * 8, 1)
            port = getattr(eng, name)
            if self.stall:
                m.submodules[f"{name}_stall"] = st = AXI4Stall(cfg.hbm.address_bits, cfg.hbm.burst_bytes * 8, 1, seed=i)
                wiring.connect(m, port, st.s)
                m.d.comb += st.rate.eq(getattr(self, f"stall_{name[-1]}"))
                port = st.m
            wiring.connect(m, port, sl.s)
            wiring.connect(m, sl.m, getattr(hbm, f"axi{i}"))
        for k in range(cfg.hbm.pseudo_channels):
            wiring.connect(m, getattr(hbm, f"pc{k}"), wiring.flipped(getattr(self, f"pc{k}")))
            m.d.comb += [getattr(self, f"refresh_owed{k}").eq(getattr(hbm, f"refresh_owed{k}")),
                         getattr(self, f"queue_empty{k}").eq(getattr(hbm, f"queue_empty{k}"))]
        return m
