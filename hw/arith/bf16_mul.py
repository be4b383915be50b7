"""Exact bf16 x bf16 multiplier: 8 x 8-bit significand product, widened exponent, no rounding.

The product of two bf16 values has at most 16 significant bits and an exponent in [-266, 256], so it
is carried exactly to the fp32 adder (:mod:`.fp32_add`), which then rounds once (fused MAC).
"""

from amaranth import Cat, Module, Mux, Signal, signed
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from .bits import leading_zeros, wire
from .formats import BF16, PRODUCT_EXP_BITS, Product, Subnormals

__all__ = ["BF16Multiplier", "bf16_multiply", "bf16_decode_pair", "bf16_significand_product",
           "bf16_normalize_product", "bf16_product_exponent", "ZERO_EXP"]

#: Exponent given to a zero product: below every real exponent, so a zero never wins alignment.
ZERO_EXP = -(1 << (PRODUCT_EXP_BITS - 1))


def bf16_decode_pair(m: Module, a, b, subnormals: Subnormals) -> dict:
    """Decode bf16 views ``a`` and ``b`` for the multiplier; returns a dict (36 bits in all).

    Keys: ``sig_a``/``sig_b``: 8 bits (hidden bit 0 for a subnormal); ``exp_a``/``exp_b``: 8-bit
    biased exponents, 1..254 (1 for a subnormal); ``sign``, ``zero``, ``inf``, ``nan``: 1 bit each
    (rules in :func:`bf16_multiply`). This is everything the 8 x 8 multiply and the product
    normalization need, so a register stage here (the MAC's "in" cut) feeds the DSP block straight
    from flip-flops; the exponent sum (:func:`bf16_product_exponent`) comes after it.
    """
    ftz = Subnormals(subnormals) is Subnormals.FTZ

    def decode(x, name):
        e_zero = wire(m, x.exponent == 0, f"{name}_exp_zero")
        e_max = wire(m, x.exponent == 0xFF, f"{name}_exp_max")
        man_zero = wire(m, x.mantissa == 0, f"{name}_man_zero")
        zero = e_zero if ftz else (e_zero & man_zero)
        # Significand with its hidden bit; subnormals have hidden bit 0 and exponent 1 - 127.
        sig = Cat(x.mantissa, ~e_zero)
        exp = Mux(e_zero, 1, x.exponent)  # biased, 1..254
        return sig, exp, zero, e_max & man_zero, e_max & ~man_zero

    sig_a, exp_a, zero_a, inf_a, nan_a = decode(a, "a")
    sig_b, exp_b, zero_b, inf_b, nan_b = decode(b, "b")
    nan = nan_a | nan_b | (inf_a & zero_b) | (zero_a & inf_b)
    inf = (inf_a | inf_b) & ~nan
    zero = (zero_a | zero_b) & ~nan & ~inf
    return {"sig_a": sig_a, "sig_b": sig_b, "exp_a": exp_a, "exp_b": exp_b, "sign": a.sign ^ b.sign,
            "zero": zero, "inf": inf, "nan": nan}


def bf16_product_exponent(m: Module, exp_a, exp_b) -> Signal:
    """Unbiased exponent of bit 14 of the significand product: ``exp_a + exp_b - 254`` (signed 10 bits,
    -252..254) from the biased exponents of :func:`bf16_decode_pair`."""
    exp14 = Signal(signed(PRODUCT_EXP_BITS), name="exp_sum")
    m.d.comb += exp14.eq(exp_a + exp_b - 254)
    return exp14


def bf16_significand_product(m: Module, sig_a, sig_b) -> Signal:
    """The 8 x 8-bit unsigned significand product (16 bits; one MULT18X18D / SB_MAC16)."""
    raw = Signal(16, name="sig_product")
    m.d.comb += raw.eq(sig_a * sig_b)
    return raw


def bf16_normalize_product(m: Module, raw, exp, sign, zero, inf, nan, subnormals: Subnormals):
    """Normalize the raw significand product ``raw`` (16 bits) into a :data:`Product` view.

    ``exp`` is the unbiased exponent of ``raw`` bit 14 (signed 10 bits), the flags come from
    :func:`bf16_decode_pair`. FTZ: both significands are normal, so at most a 1-bit shift; IEEE: a
    16-bit leading-zero count and shift (subnormal inputs).
    """
    p = Signal(Product, name="product")
    if Subnormals(subnormals) is Subnormals.FTZ:
        top = raw[15]
        sig = Mux(top, raw, raw << 1)
        e = exp + top
    else:
        lz = leading_zeros(m, raw, 16, name="product_lz")
        sig = (raw << lz)[:16]
        e = exp + 1 - lz
    m.d.comb += [
        p.sign.eq(sign),
        p.nan.eq(nan),
        p.inf.eq(inf),
        p.zero.eq(zero),
        p.sig.eq(Mux(zero, 0, sig[:16])),
        p.exp.eq(Mux(zero, ZERO_EXP, e)),
    ]
    return p


def bf16_multiply(m: Module, a, b, subnormals: Subnormals):
    """Add combinational logic to ``m`` computing the exact product of bf16 views ``a`` and ``b``.

    Special cases: NaN if either input is NaN or for inf * 0; inf if either is inf otherwise; zero if
    either is zero (in FTZ mode subnormal inputs count as zero of their sign, DAZ). The sign is always
    ``a.sign ^ b.sign``. In IEEE mode subnormal inputs are normalized through a 16-bit leading-zero
    count; in FTZ mode the product of two normal significands needs at most a 1-bit normalization.
    The steps (:func:`bf16_decode_pair`, :func:`bf16_significand_product` beside
    :func:`bf16_product_exponent`, :func:`bf16_normalize_product`) are separate so the MAC can place
    registers between them.

    Returns a value in the :data:`Product` layout (32 bits).
    """
    d = bf16_decode_pair(m, a, b, subnormals)
    raw = bf16_significand_product(m, d["sig_a"], d["sig_b"])
    exp = bf16_product_exponent(m, d["exp_a"], d["exp_b"])
    return bf16_normalize_product(m, raw, exp, d["sign"], d["zero"], d["inf"], d["nan"], subnormals)


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
