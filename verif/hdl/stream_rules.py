"""A formal harness: the ``lib.stream`` rules on every stream port of a component.

Amaranth's stream rules (``amaranth.lib.stream``, "Data streams"): once a transmitter asserts
``valid`` it keeps it asserted, and keeps ``payload`` unchanged, until the receiver asserts
``ready`` (the transfer happens in a cycle with both high). The same rule is AXI4's for every
channel (AMBA AXI, A3.2.1: "once VALID is asserted it must remain asserted until the handshake
occurs").

:class:`StreamRules` wraps a component with the same ports. For each stream port the component
drives (``Out`` streams) the rules are **asserted**; for each stream port it receives (``In``
streams) they are **assumed** of the environment, which is otherwise free (every other input, reset
included, takes any value in any cycle). Two covers per output stream (a stall, and a
transfer that ends one) show that the rules are not vacuous: some trace reaches them. A stream
without ``ready`` (``always_ready``) cannot stall and has no rule. The tracking registers are reset
with the component, so a reset in the middle of a stall releases both sides.
"""

from __future__ import annotations

from amaranth.hdl import Assert, Assume, Cover, Module, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import Flow

__all__ = ["StreamRules", "read_port_holds", "stream_ports"]


def stream_ports(signature: wiring.Signature) -> list[tuple[str, Flow]]:
    """The names and flows of the stream members of ``signature`` whose ``ready`` can be low (not
    ``always_ready``: the ones the rules constrain), in signature order."""
    out = []
    for name, member in signature.members.items():
        if member.is_signature and isinstance(member.signature, stream.Signature):
            if not member.signature.always_ready:
                out.append((name, member.flow))
    return out


def read_port_holds(m: Module, en, data, name: str):
    """The contract of a synchronous memory read port (Amaranth ``Memory`` read port with enable,
    block RAM): its data changes only in the cycle after a read (``en`` high). Returns the
    condition; adds the registers it needs to ``m``."""
    was_en = Signal(name=f"{name}_was_en", init=1)  # unknown before the first cycle: any data
    last = Signal(len(data.as_value() if hasattr(data, "as_value") else data), name=f"{name}_last")
    value = data.as_value() if hasattr(data, "as_value") else data
    m.d.sync += [was_en.eq(en), last.eq(value)]
    return was_en | (value == last)


class StreamRules(wiring.Component):
    """``dut`` (a ``wiring.Component``) with the same ports, plus the stream rules as assertions on
    its output streams and assumptions on its input streams.

    Args:
        dut: the component under proof.
        only: names of the stream ports to check (default: every stream port with a ``ready``).
        assume: ``assume(m, dut)`` returns conditions on the component's other ports that the
            environment keeps in every cycle (its contract with the rest of the design, e.g. "a new
            job starts only when idle"; it may add registers to ``m``, see :func:`read_port_holds`);
            assumed, each with its reason where the proof is listed.

    Raises:
        ValueError: ``dut`` has no stream port with ``ready``, or ``only`` names one it does not have.
    """

    def __init__(self, dut: wiring.Component, only: tuple[str, ...] | None = None, assume=None):
        self._dut = dut
        self._assume = assume
        ports = stream_ports(dut.signature)
        names = [n for n, _ in ports]
        if not ports:
            raise ValueError(f"{type(dut).__name__} has no stream port with ready")
        unknown = sorted(set(only or ()) - set(names))
        if unknown:
            raise ValueError(f"only: {', '.join(unknown)} is not a stream port of {type(dut).__name__} "
                             f"(it has {', '.join(names)})")
        self._ports = [(n, f) for n, f in ports if only is None or n in only]
        super().__init__(dut.signature)

    def elaborate(self, platform):
        m = Module()
        m.submodules.dut = dut = self._dut
        wiring.connect(m, wiring.flipped(self), dut)
        for condition in (self._assume(m, dut) if self._assume else ()):
            m.d.comb += Assume(condition)
        for name, flow in self._ports:
            port = getattr(dut, name)
            payload = port.payload.as_value() if hasattr(port.payload, "as_value") else port.payload
            stalled = Signal(name=f"{name}_stalled")  # valid and not ready in the previous cycle
            held = Signal(len(payload), name=f"{name}_held")  # the payload then
            m.d.sync += [stalled.eq(port.valid & ~port.ready), held.eq(payload)]
            rule = Assert if flow == Flow.Out else Assume
            with m.If(stalled):
                m.d.comb += [
                    rule(port.valid, f"{name}: valid withdrawn before ready"),
                    rule(payload == held, f"{name}: payload changed while valid and not ready"),
                ]
            if flow == Flow.Out:
                # not vacuous: a stall that the assertions constrain must be reachable, and a transfer
                # after it (an input stream's stall is the component's choice: it may never stall)
                m.d.comb += [Cover(stalled & port.valid, f"{name}: stalled"),
                             Cover(stalled & port.valid & port.ready, f"{name}: transfer after a stall")]
        return m
