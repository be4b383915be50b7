"""The pod: nodes on a bidirectional ring of ICI links, closed around absent slots."""

from __future__ import annotations

from amaranth.hdl import Module
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from hw.ici.channel import ICIChannel
from hw.instance import ModuleInstance

from .config import PodConfig
from .node import PodNode

__all__ = ["PodTop"]


class PodTop(wiring.Component):
    """``config.nodes`` slots of :class:`~hw.pod.node.PodNode`; each live node's clockwise link goes to
    the next live slot, its counter-clockwise link to the previous one (an
    :class:`~hw.ici.channel.ICIChannel` each way), so an absent slot is routed around.

    Ports, per live slot k (names carry the slot, not the rank):
        node<k>_<port>: the node's ports (csr, irq, ccsr, cirq and its memory ports).
        flip_cw<k>, flip_ccw<k>: In(link bits): fault injection on the wire of node k's outgoing
            clockwise / counter-clockwise link.
        replays_cw<k>, crc_errors_cw<k>, replays_ccw<k>, crc_errors_ccw<k>: Out(16): those links'
            counters (go-back events at the transmitter, bad packets at the receiver).

    Args:
        config: :class:`~hw.pod.config.PodConfig`.
        memory: the nodes' memory, "hbm" or "axi" (see PodNode).
        node_name, link_name: instantiate every node (link) as the Verilog module of this name
            (:class:`~hw.instance.ModuleInstance`: the nodes are equal, and so are the links, so their
            logic is converted and compiled once; Verilog generation, see
            :func:`verif.hdl.pod_sim_top.pod_sim_verilog`).
    """

    def __init__(self, config: PodConfig, memory: str = "hbm", *, node_name: str | None = None,
                 link_name: str | None = None):
        self.config, self.memory, self.node_name, self.link_name = config, memory, node_name, link_name
        self.nodes = {k: PodNode(config, memory) for k in config.live}
        self.links = {(k, d): ICIChannel(config.link) for k in config.live for d in ("cw", "ccw")}
        members = {}
        for k, node in self.nodes.items():
            for name, member in node.signature.members.items():
                if name.startswith(("tx_", "rx_")):
                    continue
                members[f"node{k}_{name}"] = member
            for d in ("cw", "ccw"):
                members[f"flip_{d}{k}"] = In(config.link.width)
                members[f"replays_{d}{k}"] = Out(16)
                members[f"crc_errors_{d}{k}"] = Out(16)
        super().__init__(members)

    def elaborate(self, platform):
        m = Module()
        live = self.config.live
        for i, k in enumerate(live):
            node = self.nodes[k]
            m.submodules[f"node{k}"] = node if self.node_name is None else ModuleInstance(node, self.node_name)
            nxt, prv = self.nodes[live[(i + 1) % len(live)]], self.nodes[live[i - 1]]
            for d, dest in (("cw", nxt), ("ccw", prv)):
                ch = self.links[k, d]
                m.submodules[f"link_{d}{k}"] = ch if self.link_name is None else ModuleInstance(ch, self.link_name)
                wiring.connect(m, getattr(node, f"tx_{d}"), ch.inp)
                wiring.connect(m, ch.out, getattr(dest, f"rx_{d}"))
                m.d.comb += [ch.flip.eq(getattr(self, f"flip_{d}{k}")),
                             getattr(self, f"replays_{d}{k}").eq(ch.replays),
                             getattr(self, f"crc_errors_{d}{k}").eq(ch.crc_errors)]
            for name, member in node.signature.members.items():
                if name.startswith(("tx_", "rx_")):
                    continue
                outer, inner = getattr(self, f"node{k}_{name}"), getattr(node, name)
                if not member.is_port:
                    wiring.connect(m, wiring.flipped(outer), inner)
                elif member.flow is Out:
                    m.d.comb += outer.eq(inner)
                else:
                    m.d.comb += inner.eq(outer)
        return m
