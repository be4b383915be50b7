"""fp32 + fp32 adder, ``RNE_fp32(x + y)`` with one rounding: the collective engine's reduction step.

It is the PE's accumulate adder (:func:`~hw.arith.fp32_add.fp32_accumulate`) with ``y`` decoded into
an :data:`Addend` (a 24-bit significand) in place of a bf16 product (16 bits), so a sum over a
ring rounds exactly as a partial sum in the array does, in the same subnormal modes.

Why the adder's 3 extra bits stay enough with an fp32 second operand: the argument needs the big
operand normalized whenever the exponents differ by 2 or more. ``y`` is normal, zero, or (IEEE
mode) subnormal at exponent -126; a subnormal ``y`` can only be the big operand if ``x`` is also at
-126 (no fp32 exponent is lower), and then the exponents are equal and no bit is shifted out.
FTZ mode reads a subnormal ``y`` as a signed zero (DAZ), as the accumulator is read.
"""

from amaranth import Cat, Module, Mux, Signal, signed
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from .bf16_mul import ZERO_EXP
from .formats import FP32, PRODUCT_EXP_BITS, Subnormals
from .fp32_add import adder_options, fp32_accumulate
from .pipeline import Cuts

__all__ = ["Addend", "decode_addend", "FP32Sum"]

#: An fp32 value as the accumulate adder's second operand: value = (-1)**sign * sig * 2**(exp - 23);
#: ``sig`` 24 bits with the hidden bit at bit 23 (0 for an IEEE subnormal, at exp -126); a zero in
#: FTZ mode has ``exp`` = the product's zero sentinel, in IEEE mode exp -126 and ``sig`` 0.
Addend = data.StructLayout({
    "sig": 24,
    "exp": signed(PRODUCT_EXP_BITS),
    "sign": 1,
    "zero": 1,
    "inf": 1,
    "nan": 1,
})


def decode_addend(m: Module, y, subnormals: Subnormals):
    """Decode the :data:`FP32` view ``y`` into a new :data:`Addend` signal of ``m`` (combinational);
    FTZ reads a subnormal as a zero of its sign (DAZ, IEEE 754-2019 §7.5 as the TPU applies it)."""
    ftz = Subnormals(subnormals) is Subnormals.FTZ
    d = Signal(Addend, name="addend")
    e_zero = y.exponent == 0
    e_max = y.exponent == 0xFF
    man_zero = y.mantissa == 0
    m.d.comb += [d.sign.eq(y.sign), d.nan.eq(e_max & ~man_zero), d.inf.eq(e_max & man_zero)]
    if ftz:
        m.d.comb += [d.zero.eq(e_zero),
                     d.sig.eq(Mux(e_zero, 0, Cat(y.mantissa, 1))),
                     d.exp.eq(Mux(e_zero, ZERO_EXP, y.exponent - 127))]
    else:
        m.d.comb += [d.zero.eq(e_zero & man_zero),
                     d.sig.eq(Cat(y.mantissa, ~e_zero)),
                     d.exp.eq(Mux(e_zero, -126, y.exponent - 127))]
    return d


class FP32Sum(wiring.Component):
    """``result = RNE_fp32(x + y)`` of two fp32 values (IEEE 754-2019 §4.3.1 roundTiesToEven, one
    rounding; the sign of an exact zero sum per §6.3; every NaN out is 0x7FC00000; overflow to
    +-inf). Commutative: ``x + y`` and ``y + x`` give the same bits.

    Ports: ``x``, ``y`` (In, 32 bits, :data:`FP32`), ``i_valid`` (In, 1), ``result`` (Out, 32 bits,
    :data:`FP32`), ``o_valid`` (Out, 1). Latency: ``len(cuts)`` cycles; a new pair every cycle.

    Args:
        subnormals: ``"ftz"`` (DAZ inputs, results below 2**-126 after rounding flushed) or ``"ieee"``
            (gradual underflow).
        cuts: register stages, a subset of :data:`~hw.arith.fp32_add.ADDER_CUTS` (as
            :class:`~hw.arith.fp32_add.FP32Adder`).

    Raises:
        ValueError: unknown ``subnormals`` or cut name.
    """

    def __init__(self, subnormals="ftz", cuts=()):
        self.subnormals, self.cuts = adder_options(self, subnormals, cuts)
        super().__init__({"x": In(FP32), "y": In(FP32), "i_valid": In(1), "result": Out(FP32), "o_valid": Out(1)})

    @property
    def latency_cycles(self) -> int:
        """Cycles from ``x``/``y`` to ``result``."""
        return len(self.cuts)

    def elaborate(self, platform):
        m = Module()
        y = decode_addend(m, self.y, self.subnormals)
        result, valid = fp32_accumulate(m, self.x, y, self.i_valid, self.subnormals, Cuts(m, self.cuts))
        m.d.comb += [self.result.eq(result), self.o_valid.eq(valid)]
        return m
