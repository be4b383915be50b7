"""A component instantiated as a separately generated Verilog module (for Verilog generation only)."""

from __future__ import annotations

from amaranth.hdl import ClockSignal, Elaboratable, Instance, ResetSignal, Value
from amaranth.lib import wiring

__all__ = ["ModuleInstance"]


class ModuleInstance(Elaboratable):
    """Instantiate the Verilog module ``module_name`` in place of ``component``.

    The module must be ``component`` (or one built from the same configuration) converted alone
    (:func:`hw.generate.submodule_verilog`): its ports are then ``clk``, ``rst`` and one port per
    signature member, named by its path joined with ``__``, exactly as this instance connects them.
    Amaranth gives a module ``clk`` and ``rst`` only when it has registers in ``sync`` with a reset,
    so the component must have some (the HBM controllers and the JEDEC checker do). The parent
    connects to ``component``'s interface as usual (``wiring.connect``, ``m.d.comb``); only the logic
    behind the interface moves into the module.

    Why: a design that holds several equal copies of a large component (one HBM pseudo-channel
    controller per pseudo-channel) is converted, parsed and compiled once per copy when flattened.
    As one module it is converted once, and the module text can be cached across designs.

    Args:
        component: a ``wiring.Component`` in the ``sync`` domain (a ``DomainRenamer`` around the
            parent renames the clock and reset given here as well).
        module_name: the Verilog module's name.

    Raises:
        TypeError: ``component`` is not a ``wiring.Component``.
    """

    def __init__(self, component: wiring.Component, module_name: str):
        if not isinstance(component, wiring.Component):
            self._MustUse__silence = True
            raise TypeError(f"component must be a wiring.Component; got {component!r}")
        self.component, self.module_name = component, module_name
        component._MustUse__silence = True  # its logic is the module's; it is not elaborated here

    def elaborate(self, platform):
        ports = {"i_clk": ClockSignal(), "i_rst": ResetSignal()}
        for path, member, value in self.component.signature.flatten(self.component):
            direction = "i_" if member.flow == wiring.In else "o_"
            ports[direction + "__".join(str(p) for p in path)] = Value.cast(value)
        return Instance(self.module_name, **ports)
