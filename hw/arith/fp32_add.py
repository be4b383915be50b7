"""Fused fp32 accumulate adder: ``RNE_fp32(acc + product)`` with one rounding.

``acc`` is an fp32 value (the partial sum from above); ``product`` is the exact :data:`Product` of two
bf16 values. The adder is a single-path design:

1. **align**: the operand with the larger exponent is "big"; the other is shifted right by the
   exponent difference into a 27-bit window (24-bit significand + guard, round, sticky) with the
   shifted-out bits jammed into the sticky bit (round-to-odd at the window's LSB).
2. **add/normalize**: two's-complement add or subtract (28 bits plus sign), absolute value, then a
   1-bit right shift on carry-out or a left shift by the leading-zero count. In IEEE mode the left
   shift stops at the minimum exponent -126 (gradual underflow: the result is then subnormal and
   rounds at 2**-149).
3. **round/pack**: roundTiesToEven on guard and sticky (IEEE 754-2019 §4.3.1), carry into the
   exponent, overflow to +-inf, FTZ flush of results below 2**-126 *after* rounding (tininess after
   rounding, IEEE 754-2019 §7.5), special cases, canonical NaN 0x7FC00000.

Why 3 extra bits with jamming are enough: when the exponents differ by 2 or more the sum needs at
most a 1-bit left shift (both operands are normalized, the product by the multiplier, the
accumulator because it is normal or, in IEEE mode, at the minimum exponent where no left shift
happens), and jamming keeps every bit above the sticky position exact whether the result is then
added, subtracted or negated; when they differ by 0 or 1 no bit is lost.
"""

from amaranth import Module, Mux, Cat, Const, Signal, signed
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from .bits import leading_zeros, shift_right_jam
from .bf16_mul import ZERO_EXP
from .formats import FP32, Product, Subnormals, FP32_CANONICAL_NAN
from .pipeline import Cuts

__all__ = ["FP32Adder", "fp32_accumulate", "ADDER_CUTS"]

#: Cut points inside the adder, in datapath order.
ADDER_CUTS = ("align", "norm", "out")

_WIN = 27          # 24-bit significand + guard + round + sticky
_EXP = signed(12)  # working exponent width: covers [-512 - 27, 511 + 2]
_EMIN = -126


def fp32_accumulate(m: Module, acc, prod, valid, subnormals: Subnormals, cuts: Cuts):
    """Add the fused accumulate datapath to ``m``; returns ``(result, valid)``.

    ``acc`` is a :data:`FP32` view, ``prod`` a :data:`Product` view, ``valid`` a 1-bit value that
    travels with the data through the enabled cut points (``cuts.enabled`` among :data:`ADDER_CUTS`).
    ``result`` is a 32-bit value in the :data:`FP32` layout.
    """
    ftz = Subnormals(subnormals) is Subnormals.FTZ

    # ---- decode the accumulator -------------------------------------------------------------
    c_ezero = acc.exponent == 0
    c_emax = acc.exponent == 0xFF
    c_nan = c_emax & (acc.mantissa != 0)
    c_inf = c_emax & (acc.mantissa == 0)
    if ftz:                                   # DAZ: a subnormal reads as zero of its sign
        c_sig = Mux(c_ezero, 0, Cat(acc.mantissa, Const(1, 1)))
        c_exp = Mux(c_ezero, ZERO_EXP, acc.exponent - 127)
    else:
        c_sig = Cat(acc.mantissa, ~c_ezero)   # subnormal: hidden 0 at exponent -126
        c_exp = Mux(c_ezero, _EMIN, acc.exponent - 127)
    p_sig = Cat(Const(0, 8), prod.sig)       # 24 bits, bit 23 <-> 2**prod.exp

    # ---- specials (resolved here, carried to the end) ---------------------------------------
    nan = c_nan | prod.nan | (c_inf & prod.inf & (acc.sign != prod.sign))
    inf = c_inf | prod.inf
    inf_sign = Mux(prod.inf, prod.sign, acc.sign)
    zero_sign = acc.sign & prod.sign          # sign of an exact zero sum (IEEE 754-2019 §6.3)

    # ---- align ------------------------------------------------------------------------------
    swap = prod.exp > c_exp                   # product is the big operand
    e_big = Signal(_EXP, name="e_big")
    diff = Signal(11, name="exp_diff")         # |exponent difference|, 0..1023
    m.d.comb += [
        e_big.eq(Mux(swap, prod.exp, c_exp)),
        diff.eq(Mux(swap, prod.exp - c_exp, c_exp - prod.exp)),
    ]
    big_sig = Mux(swap, p_sig, c_sig)
    small_sig = Mux(swap, c_sig, p_sig)
    big_w = Cat(Const(0, 3), big_sig)
    small_w = shift_right_jam(Cat(Const(0, 3), small_sig), _WIN, diff, _WIN + 1)
    s = cuts.cut("align", big_w=big_w, small_w=small_w, e_big=e_big,
                 sign_big=Mux(swap, prod.sign, acc.sign), sub=acc.sign ^ prod.sign,
                 nan=nan, inf=inf, inf_sign=inf_sign, zero_sign=zero_sign, valid=valid)

    # ---- add / subtract, absolute value, normalize -----------------------------------------
    total = Signal(signed(_WIN + 2), name="sum")
    m.d.comb += total.eq(Mux(s["sub"], s["big_w"] - s["small_w"], s["big_w"] + s["small_w"]))
    neg = total < 0
    mag = Signal(_WIN + 1, name="mag")
    m.d.comb += mag.eq(Mux(neg, -total, total))
    sign = s["sign_big"] ^ neg
    exact_zero = mag == 0

    lz = leading_zeros(mag[:_WIN], _WIN)
    lshift = Signal(range(_WIN + 1), name="lshift")
    if ftz:
        m.d.comb += lshift.eq(lz)
    else:
        room = s["e_big"] - _EMIN             # >= 0: the big exponent is never below -126 in IEEE
        m.d.comb += lshift.eq(Mux(lz > room, room, lz))
    carry = mag[_WIN]
    norm = Signal(_WIN, name="norm")
    e_norm = Signal(_EXP, name="e_norm")
    m.d.comb += [
        norm.eq(Mux(carry, Cat(mag[0] | mag[1], mag[2:_WIN + 1]), (mag[:_WIN] << lshift)[:_WIN])),
        e_norm.eq(Mux(carry, s["e_big"] + 1, s["e_big"] - lshift)),
    ]
    n = cuts.cut("norm", norm=norm, e_norm=e_norm, sign=sign, exact_zero=exact_zero,
                 nan=s["nan"], inf=s["inf"], inf_sign=s["inf_sign"], zero_sign=s["zero_sign"],
                 valid=s["valid"])

    # ---- round to nearest even, pack ------------------------------------------------------
    sig24 = n["norm"][3:]
    guard = n["norm"][2]
    sticky = n["norm"][0] | n["norm"][1]
    inc = guard & (sticky | sig24[0])
    rounded = Signal(25, name="rounded")
    m.d.comb += rounded.eq(sig24 + inc)
    r_carry = rounded[24]
    r_sig = Mux(r_carry, rounded[1:25], rounded[:24])
    r_exp = Signal(_EXP, name="r_exp")
    m.d.comb += r_exp.eq(n["e_norm"] + r_carry)

    overflow = r_exp > 127
    sign_r = n["sign"]
    result = Signal(FP32, name="result")
    finite = Mux(r_sig[23], r_exp + 127, 0)[:8]   # IEEE: a subnormal has hidden bit 0 at e=-126

    def put(sign_, exponent, mantissa):
        m.d.comb += [result.sign.eq(sign_), result.exponent.eq(exponent), result.mantissa.eq(mantissa)]

    with m.If(n["nan"]):
        m.d.comb += result.as_value().eq(FP32_CANONICAL_NAN)
    with m.Elif(n["inf"]):
        put(n["inf_sign"], 0xFF, 0)
    with m.Elif(n["exact_zero"]):
        put(n["zero_sign"], 0, 0)
    with m.Elif(overflow):
        put(sign_r, 0xFF, 0)
    if ftz:
        with m.Elif(r_exp < _EMIN):
            put(sign_r, 0, 0)
    with m.Else():
        put(sign_r, finite, r_sig[:23])

    o = cuts.cut("out", result=result.as_value(), valid=n["valid"])
    return o["result"], o["valid"]


class FP32Adder(wiring.Component):
    """Fused accumulate adder ``RNE_fp32(acc + product)`` as a component.

    Ports: ``acc`` (In, 32 bits, :data:`FP32`), ``product`` (In, 32 bits, :data:`Product`),
    ``i_valid`` (In, 1), ``result`` (Out, 32 bits, :data:`FP32`), ``o_valid`` (Out, 1).
    Latency: ``len(cuts)`` cycles.

    Args:
        subnormals: ``"ftz"`` or ``"ieee"``.
        cuts: register stages to place, a subset of :data:`ADDER_CUTS` ("align", "norm", "out").

    Raises:
        ValueError: unknown ``subnormals`` or cut name.
    """

    def __init__(self, subnormals="ftz", cuts=()):
        try:
            self.subnormals = Subnormals(subnormals)
        except ValueError:
            self._MustUse__silence = True
            raise ValueError(f"subnormals must be one of ftz, ieee; got {subnormals!r}") from None
        bad = set(cuts) - set(ADDER_CUTS)
        if bad:
            self._MustUse__silence = True
            raise ValueError(f"cuts must be a subset of {', '.join(ADDER_CUTS)}; got {sorted(bad)}")
        self.cuts = tuple(c for c in ADDER_CUTS if c in cuts)
        super().__init__({
            "acc": In(FP32), "product": In(Product), "i_valid": In(1),
            "result": Out(FP32), "o_valid": Out(1),
        })

    @property
    def latency_cycles(self) -> int:
        """Cycles from ``acc``/``product`` to ``result``."""
        return len(self.cuts)

    def elaborate(self, platform):
        m = Module()
        result, valid = fp32_accumulate(m, self.acc, self.product, self.i_valid, self.subnormals,
                                        Cuts(m, self.cuts))
        m.d.comb += [self.result.eq(result), self.o_valid.eq(valid)]
        return m
