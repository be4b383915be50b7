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

from amaranth import Cat, Const, Module, Mux, Signal, signed
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from .bf16_mul import ZERO_EXP
from .bits import leading_zeros, normalize_left, shift_right_jam, signed_gt_const, signed_lt_const, wire
from .formats import FP32, FP32_CANONICAL_NAN, Product, Subnormals
from .pipeline import Cuts

__all__ = ["FP32Adder", "fp32_accumulate", "adder_options", "ADDER_CUTS"]

#: Cut points inside the adder, in datapath order.
ADDER_CUTS = ("exp", "align", "add", "norm1", "norm", "round", "out")

_WIN = 27          # 24-bit significand + guard + round + sticky
_EXP = signed(12)  # working exponent width: covers [-512 - 27, 511 + 2]
_EMIN = -126


def fp32_accumulate(m: Module, acc, prod, valid, subnormals: Subnormals, cuts: Cuts):
    """Add the fused accumulate datapath to ``m``; returns ``(result, valid)``.

    ``acc`` is a :data:`FP32` view, ``prod`` a :data:`Product` view (or an :data:`Addend` view: an fp32
    value decoded by :func:`decode_addend`, for ``RNE_fp32(acc + y)``), ``valid`` a 1-bit value that
    travels with the data through the enabled cut points (``cuts.enabled`` among :data:`ADDER_CUTS`).
    ``result`` is a 32-bit value in the :data:`FP32` layout.
    """
    ftz = Subnormals(subnormals) is Subnormals.FTZ

    # ---- decode the accumulator -------------------------------------------------------------
    c_ezero = wire(m, acc.exponent == 0, "c_exp_zero")
    c_emax = wire(m, acc.exponent == 0xFF, "c_exp_max")
    c_man_zero = wire(m, acc.mantissa == 0, "c_man_zero")
    c_nan = c_emax & ~c_man_zero
    c_inf = c_emax & c_man_zero
    if ftz:                                   # DAZ: a subnormal reads as zero of its sign
        c_sig = Mux(c_ezero, 0, Cat(acc.mantissa, Const(1, 1)))
        c_exp = Mux(c_ezero, ZERO_EXP, acc.exponent - 127)
    else:
        c_sig = Cat(acc.mantissa, ~c_ezero)   # subnormal: hidden 0 at exponent -126
        c_exp = Mux(c_ezero, _EMIN, acc.exponent - 127)
    # 24 bits, bit 23 <-> 2**prod.exp (a bf16 product's 16-bit significand, or an fp32 addend's 24)
    p_sig = prod.sig if len(prod.sig) == 24 else Cat(Const(0, 24 - len(prod.sig)), prod.sig)

    # ---- specials (resolved here, carried to the end) ---------------------------------------
    nan = c_nan | prod.nan | (c_inf & prod.inf & (acc.sign != prod.sign))
    inf = c_inf | prod.inf
    inf_sign = Mux(prod.inf, prod.sign, acc.sign)
    zero_sign = acc.sign & prod.sign          # sign of an exact zero sum (IEEE 754-2019 §6.3)

    # ---- exponent compare -------------------------------------------------------------------
    # Two subtractors give both differences; the sign of c - p is the comparison (no third chain).
    d_pc = Signal(_EXP, name="d_pc")
    d_cp = Signal(_EXP, name="d_cp")
    m.d.comb += [d_pc.eq(prod.exp - c_exp), d_cp.eq(c_exp - prod.exp)]
    x = cuts.cut("exp", d_pc=d_pc, d_cp=d_cp, c_sig=c_sig, p_sig=p_sig, c_exp=c_exp, p_exp=prod.exp,
                 c_sign=acc.sign, p_sign=prod.sign, nan=nan, inf=inf, inf_sign=inf_sign, zero_sign=zero_sign,
                 valid=valid)

    # ---- align ------------------------------------------------------------------------------
    swap = x["d_cp"][-1]                      # c - p < 0: the product is the big operand
    e_big = Signal(_EXP, name="e_big")
    diff = Signal(11, name="exp_diff")         # |exponent difference|, 0..1023 (at most 639 here)
    m.d.comb += [
        e_big.eq(Mux(swap, x["p_exp"], x["c_exp"])),
        diff.eq(Mux(swap, x["d_pc"], x["d_cp"])),
    ]
    big_sig = Mux(swap, x["p_sig"], x["c_sig"])
    small_sig = Mux(swap, x["c_sig"], x["p_sig"])
    big_w = Cat(Const(0, 3), big_sig)
    small_w = shift_right_jam(m, Cat(Const(0, 3), small_sig), _WIN, diff, name="align")
    s = cuts.cut("align", big_w=big_w, small_w=small_w, e_big=e_big,
                 sign_big=Mux(swap, x["p_sign"], x["c_sign"]), sub=x["c_sign"] ^ x["p_sign"],
                 nan=x["nan"], inf=x["inf"], inf_sign=x["inf_sign"], zero_sign=x["zero_sign"], valid=x["valid"])

    # ---- add / subtract, absolute value -----------------------------------------------------
    # big +- small in one carry chain: big + (small ^ sub) + sub, the +sub entering as a carry from
    # an extra low bit (sub + sub = 2 sub).
    total = Signal(signed(_WIN + 2), name="sum")
    sub = s["sub"]
    wide = Signal(_WIN + 3, name="sum_ext")
    m.d.comb += [
        wide.eq(Cat(sub, s["big_w"], Const(0, 2)) + Cat(sub, (s["small_w"] ^ sub.replicate(_WIN)), sub.replicate(2))),
        total.eq(wide[1:]),
    ]
    neg = total < 0
    mag = Signal(_WIN + 1, name="mag")
    m.d.comb += mag.eq(Mux(neg, -total, total))
    a = cuts.cut("add", mag=mag, sign=s["sign_big"] ^ neg, e_big=s["e_big"], nan=s["nan"], inf=s["inf"],
                 inf_sign=s["inf_sign"], zero_sign=s["zero_sign"], valid=s["valid"])

    # ---- normalize --------------------------------------------------------------------------
    # With the "norm1" cut the normalization is split over two stages: FTZ shifts by 16 and 8, then
    # 4, 2 and 1 (the carry-out's 1-bit right shift goes first there, after which the MSB is set and no
    # left step fires); IEEE computes the clamped shift amount, then shifts.
    mag = a["mag"]
    carry = mag[_WIN]
    exact_zero = mag == 0
    split = "norm1" in cuts.enabled
    flags = dict(sign=a["sign"], exact_zero=exact_zero, nan=a["nan"], inf=a["inf"], inf_sign=a["inf_sign"],
                 zero_sign=a["zero_sign"], valid=a["valid"])

    def right1(v):                            # carry-out: 1-bit right shift, the dropped bit jammed
        return Cat(v[0] | v[1], v[2:_WIN + 1])

    lshift = Signal(range(32), name="lshift")
    if ftz:
        # count and shift in one structure (bits.normalize_left); for mag == 0 the count is
        # meaningless and exact_zero decides the result
        x0 = Mux(carry, right1(mag), mag[:_WIN]) if split else mag[:_WIN]
        coarse, cnt_hi = normalize_left(m, x0, _WIN, steps=(16, 8), name="norm_hi")
        h = cuts.cut("norm1", x=coarse, cnt_hi=cnt_hi, mag=None if split else mag, carry=carry,
                     e_big=a["e_big"], **flags)
        shifted, cnt_lo = normalize_left(m, h["x"], _WIN, steps=(4, 2, 1), name="norm_lo")
        m.d.comb += lshift.eq(h["cnt_hi"] | cnt_lo)
        norm_v = shifted if split else Mux(h["carry"], right1(h["mag"]), shifted)
    else:
        lz = leading_zeros(m, mag[:_WIN], _WIN, name="sum_lz")
        room = a["e_big"] - _EMIN             # >= 0: the big exponent is never below -126 in IEEE
        amount = Mux(lz > room, room, lz)
        h = cuts.cut("norm1", mag=mag, amount=amount, carry=carry, e_big=a["e_big"], **flags)
        m.d.comb += lshift.eq(h["amount"])
        shifted = (h["mag"][:_WIN] << lshift)[:_WIN]
        norm_v = Mux(h["carry"], right1(h["mag"]), shifted)
    norm = Signal(_WIN, name="norm")
    e_shift = Signal(signed(6), name="e_shift")   # exponent change: -1 on carry-out, else the left shift
    m.d.comb += [
        norm.eq(norm_v),
        e_shift.eq(Mux(h["carry"], -1, lshift)),
    ]
    n = cuts.cut("norm", norm=norm, e_big=h["e_big"], e_shift=e_shift, sign=h["sign"],
                 exact_zero=h["exact_zero"], nan=h["nan"], inf=h["inf"], inf_sign=h["inf_sign"],
                 zero_sign=h["zero_sign"], valid=h["valid"])
    # the exponent subtraction sits after the cut, beside the rounding increment (off the
    # normalizer's path)
    e_norm = Signal(_EXP, name="e_norm")
    m.d.comb += e_norm.eq(n["e_big"] - n["e_shift"])

    # ---- round to nearest even, pack ------------------------------------------------------
    sig24 = n["norm"][3:]
    guard = n["norm"][2]
    sticky = n["norm"][0] | n["norm"][1]
    inc = guard & (sticky | sig24[0])
    rounded = Signal(25, name="rounded")
    m.d.comb += rounded.eq(sig24 + inc)
    r_carry = rounded[24]
    r_exp = Signal(_EXP, name="r_exp")
    m.d.comb += r_exp.eq(e_norm + r_carry)
    n = cuts.cut("round", rounded=rounded, r_exp=r_exp, sign=n["sign"], exact_zero=n["exact_zero"], nan=n["nan"],
                 inf=n["inf"], inf_sign=n["inf_sign"], zero_sign=n["zero_sign"], valid=n["valid"])
    rounded, r_exp = n["rounded"], n["r_exp"]
    r_sig = Mux(rounded[24], rounded[1:25], rounded[:24])

    overflow = signed_gt_const(r_exp, 127)
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
        with m.Elif(signed_lt_const(r_exp, _EMIN)):
            put(sign_r, 0, 0)
    with m.Else():
        put(sign_r, finite, r_sig[:23])

    o = cuts.cut("out", result=result.as_value(), valid=n["valid"])
    return o["result"], o["valid"]


def adder_options(component, subnormals, cuts) -> tuple[Subnormals, tuple[str, ...]]:
    """An adder component's checked ``subnormals`` and its ``cuts`` in datapath order.

    Raises:
        ValueError: unknown ``subnormals`` or cut name (``component`` is marked as not to be
            elaborated first, so no warning about an unused elaboratable follows).
    """
    try:
        mode = Subnormals(subnormals)
    except ValueError:
        component._MustUse__silence = True
        raise ValueError(f"subnormals must be one of ftz, ieee; got {subnormals!r}") from None
    bad = set(cuts) - set(ADDER_CUTS)
    if bad:
        component._MustUse__silence = True
        raise ValueError(f"cuts must be a subset of {', '.join(ADDER_CUTS)}; got {sorted(bad)}")
    return mode, tuple(c for c in ADDER_CUTS if c in cuts)


class FP32Adder(wiring.Component):
    """Fused accumulate adder ``RNE_fp32(acc + product)`` as a component.

    Ports: ``acc`` (In, 32 bits, :data:`FP32`), ``product`` (In, 32 bits, :data:`Product`),
    ``i_valid`` (In, 1), ``result`` (Out, 32 bits, :data:`FP32`), ``o_valid`` (Out, 1).
    Latency: ``len(cuts)`` cycles.

    Args:
        subnormals: ``"ftz"`` or ``"ieee"``.
        cuts: register stages to place, a subset of :data:`ADDER_CUTS` ("exp": after the exponent
            differences, "align": after the alignment shift, "add": after the add and absolute value,
            "norm1": after the first half of normalization (FTZ: the shifts by 16 and 8; IEEE: the
            clamped shift amount), "norm": after normalization, "round": after the rounding
            increment, "out": after packing).

    Raises:
        ValueError: unknown ``subnormals`` or cut name.
    """

    def __init__(self, subnormals="ftz", cuts=()):
        self.subnormals, self.cuts = adder_options(self, subnormals, cuts)
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
