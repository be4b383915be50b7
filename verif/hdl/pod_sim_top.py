"""The pod with every node's memory system in the netlist: :class:`hw.pod.top.PodTop` (HBM
controllers) with an HDL device model and JEDEC checker on each node's every pseudo-channel, for the
transaction-level pod bench (:mod:`verif.tb.pod_tb`)."""

from __future__ import annotations

from amaranth.hdl import Cat, DomainRenamer, Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from hw.engine.csr import axi4lite_signature
from hw.hbm.interface import ColCmd
from hw.pod.config import PodConfig
from hw.pod.top import PodTop

from .gemm_sim_top import VIOLATION_FIELDS, core_domain
from .hbm_device import STORE_VERILOG, HBMDeviceHDL

__all__ = ["PodSimTop", "pod_sim_verilog", "device_name"]


def device_name(slot: int, pc: int) -> str:
    """The submodule (and Verilog instance) name of slot ``slot``'s device on pseudo-channel ``pc``."""
    return f"n{slot}dev{pc}"


class PodSimTop(wiring.Component):
    """:class:`hw.pod.top.PodTop` (``memory="hbm"``) with an :class:`~verif.hdl.hbm_device.HBMDeviceHDL`
    on each live node's each pseudo-channel (submodule :func:`device_name`).

    Ports:
        node<k>_csr, node<k>_ccsr: AXI4-Lite slaves; node<k>_irq, node<k>_cirq: Out(1), per live slot k.
        flip_cw<k>, flip_ccw<k>: In (fault injection); replays_<d><k>, crc_errors_<d><k>: Out(16).
        finish: In(1), strobe at the end of a run (the checkers' refresh-rate check, a cycle later).
        violation: Out(1), some device's checker latched a JEDEC violation; row_error: Out(1).
        n<k>pc<j>_violation, n<k>pc<j>_v_<field>: that checker's latched violation.
        since_col: Out(16), cycles since the last column command on any device or a request waiting in
            any controller's queue, saturating (the bench waits on it before reading memory).

    Args:
        config: :class:`~hw.pod.config.PodConfig`.
        stored_rows, fill: of each device model.
        node_name, checker_name: instantiate the nodes as the Verilog module ``node_name``, the links
            as ``<node_name>_link`` and the checker of each device on pseudo-channel j as
            ``<checker_name><j>`` (Verilog generation).
    """

    def __init__(self, config: PodConfig, *, stored_rows: int = 256, fill: int = 0, node_name: str | None = None,
                 checker_name: str | None = None):
        self.config = config
        self.pod = PodTop(config, memory="hbm", node_name=node_name, link_name=None if node_name is None
                          else f"{node_name}_link")
        hbm = config.engine.hbm
        self.devices = {(k, j): HBMDeviceHDL(hbm, j, stored_rows=stored_rows, fill=fill,
                                             checker_name=None if checker_name is None else f"{checker_name}{j}")
                        for k in config.live for j in range(hbm.pseudo_channels)}
        members = {"finish": In(1), "violation": Out(1), "row_error": Out(1), "since_col": Out(16)}
        for k in config.live:
            members.update({f"node{k}_csr": Out(axi4lite_signature()), f"node{k}_ccsr": Out(axi4lite_signature()),
                            f"node{k}_irq": Out(1), f"node{k}_cirq": Out(1)})
            for d in ("cw", "ccw"):
                members.update({f"flip_{d}{k}": In(config.link.width), f"replays_{d}{k}": Out(16),
                                f"crc_errors_{d}{k}": Out(16)})
        for (k, j), dev in self.devices.items():
            for f in VIOLATION_FIELDS:
                members[f"n{k}pc{j}_v_{f}"] = Out(getattr(dev.checker, f"v_{f}").shape())
            members[f"n{k}pc{j}_violation"] = Out(1)
        super().__init__(members)

    def elaborate(self, platform):
        m = Module()
        core_domain(m)   # the design runs in "core", reset by rst registered once
        pod = self.pod
        m.submodules.pod = DomainRenamer("core")(pod)
        finish_q = Signal(reset_less=True)
        m.d.sync += finish_q.eq(self.finish)
        for k in self.config.live:
            for port in ("csr", "ccsr"):
                wiring.connect(m, wiring.flipped(getattr(self, f"node{k}_{port}")), getattr(pod, f"node{k}_{port}"))
            m.d.comb += [getattr(self, f"node{k}_irq").eq(getattr(pod, f"node{k}_irq")),
                         getattr(self, f"node{k}_cirq").eq(getattr(pod, f"node{k}_cirq"))]
            for d in ("cw", "ccw"):
                m.d.comb += [getattr(pod, f"flip_{d}{k}").eq(getattr(self, f"flip_{d}{k}")),
                             getattr(self, f"replays_{d}{k}").eq(getattr(pod, f"replays_{d}{k}")),
                             getattr(self, f"crc_errors_{d}{k}").eq(getattr(pod, f"crc_errors_{d}{k}"))]
        busy = []
        for (k, j), dev in self.devices.items():
            m.submodules[device_name(k, j)] = DomainRenamer("core")(dev)
            wiring.connect(m, getattr(pod, f"node{k}_pc{j}"), dev.dram)
            m.d.comb += [dev.finish.eq(finish_q), getattr(self, f"n{k}pc{j}_violation").eq(dev.checker.violation)]
            for f in VIOLATION_FIELDS:
                m.d.comb += getattr(self, f"n{k}pc{j}_v_{f}").eq(getattr(dev.checker, f"v_{f}"))
            busy += [dev.dram.col_cmd != ColCmd.NOP, ~getattr(pod, f"node{k}_queue_empty{j}")]
        devs = list(self.devices.values())
        m.d.comb += [self.violation.eq(Cat(*(d.checker.violation for d in devs)).any()),
                     self.row_error.eq(Cat(*(d.row_error for d in devs)).any())]
        m.d.core += self.since_col.eq(Mux(Cat(*busy).any(), 0,
                                          Mux(self.since_col.all(), self.since_col, self.since_col + 1)))
        return m


def pod_sim_verilog(config: PodConfig, *, stored_rows: int = 256, fill: int = 0) -> str:
    """Verilog of :class:`PodSimTop` (module ``pod_sim``): one ``pod_sim_node`` module instantiated by
    every node and one ``pod_sim_node_link`` by every link (equal copies: converted and compiled
    once), the JEDEC checker of
    pseudo-channel j as ``pod_sim_chk<j>``, and the device storage module."""
    from amaranth.back import verilog

    from hw.generate import submodule_verilog
    from hw.pod.node import PodNode

    from .gemm_sim_top import _checker_verilog

    hbm = config.engine.hbm
    from hw.ici.channel import ICIChannel

    modules = [submodule_verilog(PodNode(config, "hbm"), "pod_sim_node"),
               submodule_verilog(ICIChannel(config.link), "pod_sim_node_link")]
    modules += [_checker_verilog(hbm, j, f"pod_sim_chk{j}") for j in range(hbm.pseudo_channels)]
    top = PodSimTop(config, stored_rows=stored_rows, fill=fill, node_name="pod_sim_node", checker_name="pod_sim_chk")
    text = verilog.convert(top, name="pod_sim", emit_src=False)
    return "\n".join((*modules, text, STORE_VERILOG))
