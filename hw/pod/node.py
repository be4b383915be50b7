"""One node (chip) of the pod: GEMM engine, collective engine and their memory."""

from __future__ import annotations

import dataclasses

from amaranth.hdl import Module
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from hw.engine import GEMMEngine
from hw.engine.csr import axi4lite_signature
from hw.hbm.axi import HBMController, axi4_signature
from hw.hbm.interface import dram_signature
from hw.ici.config import message_signature

from .collective import CollectiveEngine
from .config import HBM_BEAT_BYTES, PodConfig
from .csr import CollectiveCSR

__all__ = ["PodNode", "MEMORY_PORTS"]

#: the node's AXI4 masters, in the HBM controller's port order
MEMORY_PORTS = ("mem_a", "mem_w", "mem_c", "mem_cw", "mem_ccw", "mem_cw_drain", "mem_ccw_drain")


class PodNode(wiring.Component):
    """A :class:`~hw.engine.GEMMEngine` and a :class:`~hw.pod.collective.CollectiveEngine` (with its
    :class:`~hw.pod.csr.CollectiveCSR`) sharing one memory: with ``memory="hbm"`` an
    :class:`~hw.hbm.axi.HBMController` with seven AXI4 ports (:data:`MEMORY_PORTS`: the engine's three, and
    per ring direction the collective engine's port and its drain's read-only port; IDs of one bit,
    tags wide enough for seven reorder buffers); with ``memory="axi"`` those seven AXI4 masters are the
    node's ports (a behavioural memory serves them in the fast simulation tier).

    Ports:
        csr: the GEMM engine's AXI4-Lite registers; irq: Out(1).
        ccsr: the collective engine's AXI4-Lite registers (:data:`hw.pod.csr.REGISTERS`); cirq: Out(1).
        tx_cw, rx_cw, tx_ccw, rx_ccw: the ICI message ports (see CollectiveEngine).
        memory="hbm": ``pc<k>`` (DRAM pins per pseudo-channel), ``refresh_owed<k>``, ``queue_empty<k>``.
        memory="axi": ``mem_a`` .. ``mem_ccw_drain``: AXI4 masters (:func:`~hw.hbm.axi.axi4_signature` flipped).

    Args:
        config: the :class:`~hw.pod.config.PodConfig`.
        memory: "hbm" or "axi".

    Raises:
        TypeError: ``config`` is not a PodConfig. ValueError: unknown ``memory``.
    """

    def __init__(self, config: PodConfig, memory: str = "hbm"):
        if not isinstance(config, PodConfig):
            self._MustUse__silence = True
            raise TypeError(f"config must be a PodConfig; got {config!r}")
        if memory not in ("hbm", "axi"):
            self._MustUse__silence = True
            raise ValueError(f"memory must be one of hbm, axi; got {memory!r}")
        self.config, self.memory = config, memory
        msg = message_signature(config.link)
        members = {"csr": Out(axi4lite_signature()), "irq": Out(1), "ccsr": Out(axi4lite_signature()), "cirq": Out(1),
                   "tx_cw": Out(msg), "rx_cw": In(msg), "tx_ccw": Out(msg), "rx_ccw": In(msg)}
        hbm = config.engine.hbm
        if memory == "axi":
            for name in MEMORY_PORTS:
                members[name] = In(axi4_signature(hbm.address_bits, HBM_BEAT_BYTES * 8, 1))
        else:
            for k in range(hbm.pseudo_channels):
                members[f"pc{k}"] = Out(dram_signature(hbm))
                members[f"refresh_owed{k}"] = Out(4)
                members[f"queue_empty{k}"] = Out(1)
        super().__init__(members)

    def hbm_controller(self) -> HBMController:
        """The node's controller: seven ports, the engine's reorder depth, tags widened to fit."""
        e = self.config.engine
        need = (len(MEMORY_PORTS) - 1).bit_length() + (e.rob_depth - 1).bit_length()
        hbm = dataclasses.replace(e.hbm, tag_bits=max(e.hbm.tag_bits, need))
        return HBMController(hbm, axi_ports=len(MEMORY_PORTS), id_bits=1, rob_depth=e.rob_depth)

    def elaborate(self, platform):
        m = Module()
        cfg = self.config
        m.submodules.engine = eng = GEMMEngine(cfg.engine)
        m.submodules.collective = col = CollectiveEngine(cfg.collective)
        m.submodules.ccsr = regs = CollectiveCSR(cfg.collective)
        wiring.connect(m, wiring.flipped(self.csr), eng.csr)
        wiring.connect(m, wiring.flipped(self.ccsr), regs.axil)
        m.d.comb += [self.irq.eq(eng.irq), self.cirq.eq(regs.irq), col.desc.eq(regs.desc), col.start.eq(regs.start),
                     regs.busy.eq(col.busy), regs.done.eq(col.done), regs.error.eq(col.error),
                     regs.framing_error.eq(col.framing_error), regs.write_error.eq(col.write_error),
                     regs.cycles.eq(col.cycles)]
        for name in ("tx_cw", "tx_ccw"):
            wiring.connect(m, getattr(col, name), wiring.flipped(getattr(self, name)))
        for name in ("rx_cw", "rx_ccw"):
            wiring.connect(m, wiring.flipped(getattr(self, name)), getattr(col, name))
        masters = [eng.mem_a, eng.mem_w, eng.mem_c, col.axi_cw, col.axi_ccw, col.axi_cw_drain, col.axi_ccw_drain]
        if self.memory == "axi":
            for name, port in zip(MEMORY_PORTS, masters):
                wiring.connect(m, wiring.flipped(getattr(self, name)), port)
            return m
        m.submodules.hbm = hbm = self.hbm_controller()
        for k, port in enumerate(masters):
            wiring.connect(m, port, getattr(hbm, f"axi{k}"))
        for k in range(cfg.engine.hbm.pseudo_channels):
            wiring.connect(m, getattr(hbm, f"pc{k}"), wiring.flipped(getattr(self, f"pc{k}")))
            m.d.comb += [getattr(self, f"refresh_owed{k}").eq(getattr(hbm, f"refresh_owed{k}")),
                         getattr(self, f"queue_empty{k}").eq(getattr(hbm, f"queue_empty{k}"))]
        return m
