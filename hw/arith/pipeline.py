"""Optional pipeline registers between the combinational steps of an arithmetic unit."""

from amaranth import Module, Signal, Value

__all__ = ["Cuts"]


class Cuts:
    """Places a register stage at each named cut point that is enabled.

    ``cut(name, **values)`` returns, for each value, a signal named ``<name>_<key>``: a register
    clocked in the ``sync`` domain when ``name`` is enabled (``reset_less``: data registers carry no
    reset, so they can be absorbed into DSP pipeline registers; ``valid`` is the one value that gets
    a reset, to 0, so no garbage is reported valid after reset), else a wire driven combinationally.
    A value given as ``None`` passes through as ``None``.

    The wire matters for the generated Verilog: Amaranth emits an expression once per use, so an
    expression used by several later steps (the aligned significand in every stage of a shifter) would
    be written out again for each; a named wire is written once and is readable in a waveform.
    """

    def __init__(self, m: Module, enabled):
        self.m = m
        self.enabled = frozenset(enabled)

    def cut(self, name: str, **values):
        registered = name in self.enabled
        out = {}
        for key, value in values.items():
            if value is None:  # e.g. no valid bit to carry: no register either
                out[key] = None
                continue
            shape = value.shape() if isinstance(value, Value) else Value.cast(value).shape()
            sig = Signal(shape, name=f"{name}_{key}", reset_less=(key != "valid"))
            if registered:
                self.m.d.sync += sig.eq(value)
            else:
                self.m.d.comb += sig.eq(value)
            out[key] = sig
        return out
