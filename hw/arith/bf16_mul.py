"""Exact bf16 x bf16 multiplier: 8 x 8-bit significand product, widened exponent, no rounding.

The product of two bf16 values has at most 16 significant bits and an exponent in [-266, 256], so it
is carried exactly to the fp32 adder (:mod:`.fp32_add`), which then rounds once (fused MAC).
"""

from amaranth import Module, Mux, Cat, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from .bits import leading_zeros
from .formats import BF16, Product, Subnormals, PRODUCT_EXP_BITS

__all__ = ["BF16Multiplier", "bf16_multiply", "ZERO_EXP"]

#: Exponent given to a zero product: below every real exponent, so a zero never wins alignment.
ZERO_EXP = -(1 << (PRODUCT_EXP_BITS - 1))


def bf16_multiply(m: Module, a, b, subnormals: Subnormals):
    """Add combinational logic to ``m`` computing the exact product of bf16 views ``a`` and ``b``.

    Special cases: NaN if either input is NaN or for inf * 0; inf if either is inf otherwise; zero if
    either is zero (in FTZ mode subnormal inputs count as zero of their sign, DAZ). The sign is always
    ``a.sign ^ b.sign``. In IEEE mode subnormal inputs are normalized through a 16-bit leading-zero
    count; in FTZ mode the product of two normal significands needs at most a 1-bit normalization.

    Returns a value in the :data:`Product` layout (32 bits).
    """
    subnormals = Subnormals(subnormals)
    ftz = subnormals is Subnormals.FTZ
    p = Signal(Product, name="product")

    def decode(x):
        e_zero = x.exponent == 0
        e_max = x.exponent == 0xFF
        man_zero = x.mantissa == 0
        zero = e_zero if ftz else (e_zero & man_zero)
        # Significand with its hidden bit; subnormals have hidden bit 0 and exponent 1 - 127.
        sig = Cat(x.mantissa, ~e_zero)
        exp = Mux(e_zero, 1, x.exponent)  # biased, 1..254
        return sig, exp, zero, e_max & man_zero, e_max & ~man_zero

    sig_a, exp_a, zero_a, inf_a, nan_a = decode(a)
    sig_b, exp_b, zero_b, inf_b, nan_b = decode(b)

    raw = Signal(16, name="sig_product")
    m.d.comb += raw.eq(sig_a * sig_b)
    # Unbiased exponent of raw bit 14 (1.0 * 1.0 lands there).
    exp14 = exp_a + exp_b - 254
    if ftz:
        top = raw[15]
        sig = Mux(top, raw, raw << 1)
        exp = Mux(top, exp14 + 1, exp14)
    else:
        lz = leading_zeros(raw, 16)
        sig = (raw << lz)[:16]
        exp = exp14 + 1 - lz

    nan = nan_a | nan_b | (inf_a & zero_b) | (zero_a & inf_b)
    inf = (inf_a | inf_b) & ~nan
    zero = (zero_a | zero_b) & ~nan & ~inf
    m.d.comb += [
        p.sign.eq(a.sign ^ b.sign),
        p.nan.eq(nan),
        p.inf.eq(inf),
        p.zero.eq(zero),
        p.sig.eq(Mux(zero, 0, sig[:16])),
        p.exp.eq(Mux(zero, ZERO_EXP, exp)),
    ]
    return p


class BF16Multiplier(wiring.Component):
    """Combinational exact bf16 multiplier (latency 0 cycles; the MAC places pipeline registers).

    Ports: ``a``, ``b`` (In, 16 bits, :data:`BF16`); ``product`` (Out, 32 bits, :data:`Product`).
    One 8 x 8-bit unsigned multiply (one MULT18X18D on ECP5, one SB_MAC16 on iCE40 UP5K).

    Args:
        subnormals: ``"ftz"`` or ``"ieee"`` (see :class:`Subnormals`).

    Raises:
        ValueError: unknown ``subnormals``.
    """

    def __init__(self, subnormals="ftz"):
        try:
            self.subnormals = Subnormals(subnormals)
        except ValueError:
            self._MustUse__silence = True
            raise ValueError(f"subnormals must be one of ftz, ieee; got {subnormals!r}") from None
        super().__init__({"a": In(BF16), "b": In(BF16), "product": Out(Product)})

    def elaborate(self, platform):
        m = Module()
        m.d.comb += self.product.eq(bf16_multiply(m, self.a, self.b, self.subnormals))
        return m
