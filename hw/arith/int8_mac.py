"""int8 x int8 + int32 multiply-accumulate with two's-complement wrap-around (TPU v1 style)."""

from amaranth import Module, Mux, Signal, signed
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from .dsp import registered_product
from .formats import INT8, INT32
from .pipeline import Cuts

__all__ = ["Int8MAC", "int8_accumulate", "INT8_CUTS"]

#: Cut points of the int8 datapath: after the 8 x 8 multiply, after the 32-bit add.
INT8_CUTS = ("mul", "out")


def int8_accumulate(m: Module, acc, a, b, valid, cuts: Cuts, *, multiplier: str = "generic", ce=None, b_choice=None):
    """Add ``wrap32(acc + a*b)`` to ``m`` (a, b signed 8 bits; acc signed 32 bits).

    The product is exact (16 bits signed); the sum wraps modulo 2**32. Returns ``(result, valid)``.
    ``multiplier`` = "ecp5": the product register of the "mul" cut (which must be enabled) is the output
    register of an ECP5 DSP block, clock-enabled by ``ce`` (:mod:`hw.arith.dsp`). ``b_choice``
    (``multiplier`` = "ecp5" only): ``(use_b, sel_q, b1, b0)``: where ``use_b`` is low, ``b`` is a choice
    ``sel ? b1 : b0`` made in the multiplier's own cycle, and both products are registered and chosen
    after their registers by ``sel_q`` (``sel`` one enabled cycle later): a choice that comes late
    in the cycle is then not in front of the DSP block. A synthesizer that sees ``use_b`` constant
    keeps only the DSP blocks it uses (one, or two).
    """
    if multiplier == "ecp5":
        s = cuts.cut("mul", acc=acc, valid=valid)
        s["prod"] = registered_product(m, a, b, signed=True, ce=ce, name="mul_dsp")
        if b_choice is not None:
            use_b, sel_q, b1, b0 = b_choice
            p1 = registered_product(m, a, b1, signed=True, ce=ce, name="mul_dsp_1")
            p0 = registered_product(m, a, b0, signed=True, ce=ce, name="mul_dsp_0")
            s["prod"] = Mux(use_b, s["prod"], Mux(sel_q, p1, p0))
    else:
        prod = Signal(signed(16), name="int8_product")
        m.d.comb += prod.eq(a * b)
        s = cuts.cut("mul", prod=prod, acc=acc, valid=valid)
    total = Signal(INT32, name="int_sum")
    m.d.comb += total.eq(s["acc"] + s["prod"])  # truncation to 32 bits is the wrap-around
    o = cuts.cut("out", result=total, valid=s["valid"])
    return o["result"], o["valid"]


class Int8MAC(wiring.Component):
    """int8 MAC component: ``result = wrap32(acc + a*b)``.

    Ports: ``a``, ``b`` (In, signed 8 bits), ``acc`` (In, signed 32 bits), ``i_valid`` (In, 1),
    ``result`` (Out, signed 32 bits), ``o_valid`` (Out, 1). Latency ``len(cuts)`` cycles.

    Args:
        cuts: subset of :data:`INT8_CUTS`.

    Raises:
        ValueError: unknown cut name.
    """

    def __init__(self, cuts=()):
        bad = set(cuts) - set(INT8_CUTS)
        if bad:
            self._MustUse__silence = True
            raise ValueError(f"cuts must be a subset of {', '.join(INT8_CUTS)}; got {sorted(bad)}")
        self.cuts = tuple(c for c in INT8_CUTS if c in cuts)
        super().__init__({
            "a": In(INT8), "b": In(INT8), "acc": In(INT32), "i_valid": In(1),
            "result": Out(INT32), "o_valid": Out(1),
        })

    @property
    def latency_cycles(self) -> int:
        return len(self.cuts)

    def elaborate(self, platform):
        m = Module()
        result, valid = int8_accumulate(m, self.acc, self.a, self.b, self.i_valid, Cuts(m, self.cuts))
        m.d.comb += [self.result.eq(result), self.o_valid.eq(valid)]
        return m
