"""Optional pipeline registers between the combinational steps of an arithmetic unit."""

from amaranth import Module, Signal, Value

__all__ = ["Cuts"]


class Cuts:
    """Places a register stage at each named cut point that is enabled.

    ``cut(name, **values)`` returns the values unchanged when ``name`` is not enabled, else registers
    (``reset_less``: data registers carry no reset, so they can be absorbed into DSP pipeline
    registers) named ``<name>_<key>`` clocked in the ``sync`` domain. ``valid`` is the one value
    that gets a reset (to 0), so no garbage is reported valid after reset. A value given as ``None``
    passes through as ``None`` without a register.
    """

    def __init__(self, m: Module, enabled):
        self.m = m
        self.enabled = frozenset(enabled)

    def cut(self, name: str, **values):
        if name not in self.enabled:
            return values
        out = {}
        for key, value in values.items():
            if value is None:  # e.g. no valid bit to carry: no register either
                out[key] = None
                continue
            shape = value.shape() if isinstance(value, Value) else Value.cast(value).shape()
            reg = Signal(shape, name=f"{name}_{key}", reset_less=(key != "valid"))
            self.m.d.sync += reg.eq(value)
            out[key] = reg
        return out
