"""Exact fp8 -> bf16 decoders (OCP 8-bit floating point: E4M3 "fn" and E5M2).

Every fp8 value is exactly representable in bf16 as a *normal* number (the smallest fp8 subnormals,
2**-9 for E4M3 and 2**-16 for E5M2, are far above bf16's 2**-126), so decoding is a re-bias plus a
small normalization of fp8 subnormals. FTZ in the MAC therefore never flushes an fp8 input.
"""

from amaranth import Cat, Const, Module, Mux
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from .formats import BF16, BF16_CANONICAL_NAN, FP8_E4M3FN, FP8_E5M2, Format

__all__ = ["FP8Decoder", "decode_fp8"]

_PARAMS = {
    # format: (exponent bits, mantissa bits, bias, has infinity)
    Format.FP8_E4M3FN: (4, 3, 7, False),
    Format.FP8_E5M2: (5, 2, 15, True),
}


def decode_fp8(m: Module, x, fmt: Format):
    """Add combinational logic to ``m`` decoding fp8 view ``x`` into a new bf16 value.

    Returns an Amaranth value of 16 bits in the :data:`BF16` layout. NaN decodes to bf16 0x7FC0 with the
    input's sign; E5M2 +-inf to bf16 +-inf; +-0 to +-0; subnormals to normal bf16.
    """
    fmt = Format(fmt)
    ebits, mbits, bias, has_inf = _PARAMS[fmt]
    e = x.exponent
    man = x.mantissa
    e_max = (1 << ebits) - 1
    if has_inf:
        is_nan = (e == e_max) & (man != 0)
        is_inf = (e == e_max) & (man == 0)
    else:
        is_nan = (e == e_max) & (man == (1 << mbits) - 1)
        is_inf = Const(0)
    is_zero = (e == 0) & (man == 0)

    # Normal: bf16 exponent = e - bias + 127; mantissa left-aligned into 7 bits.
    normal_exp = e + (127 - bias)
    normal_man = Cat(Const(0, 7 - mbits), man)
    # Subnormal: value = man * 2**(1 - bias - mbits) = 1.f * 2**(lead + 1 - bias - mbits), where
    # lead is the index of man's leading one; the bits below it become the bf16 fraction.
    sub_exp = Const(0, 8)
    sub_man = Const(0, 7)
    for lead in range(mbits):  # ascending, so the highest set bit wins the priority chain
        cand_man = Cat(Const(0, 7 - lead), man[:lead]) if lead else Const(0, 7)
        cand_exp = 127 + lead + 1 - bias - mbits
        sub_exp = Mux(man[lead], cand_exp, sub_exp)
        sub_man = Mux(man[lead], cand_man, sub_man)

    man_o = Mux(e == 0, sub_man, normal_man)
    exp_o = Mux(e == 0, sub_exp, normal_exp)
    bits = Mux(is_nan, Cat(Const(BF16_CANONICAL_NAN & 0x7FFF, 15), x.sign),
           Mux(is_inf, Cat(Const(0, 7), Const(0xFF, 8), x.sign),
           Mux(is_zero, Cat(Const(0, 15), x.sign),
               Cat(man_o[:7], exp_o[:8], x.sign))))
    return BF16(bits)


class FP8Decoder(wiring.Component):
    """Combinational fp8 -> bf16 decoder.

    Ports: ``fp8`` (In, 8 bits, layout :data:`FP8_E4M3FN` or :data:`FP8_E5M2`), ``bf16`` (Out,
    16 bits, :data:`BF16`). Latency 0 cycles.

    Args:
        fmt: ``Format.FP8_E4M3FN`` or ``Format.FP8_E5M2`` (or their string values).

    Raises:
        ValueError: any other format.
    """

    def __init__(self, fmt):
        try:
            self.fmt = Format(fmt)
        except ValueError:
            self._MustUse__silence = True
            raise ValueError(f"fmt must be one of fp8_e4m3fn, fp8_e5m2; got {fmt!r}") from None
        if self.fmt not in _PARAMS:
            self._MustUse__silence = True
            raise ValueError(f"fmt must be one of fp8_e4m3fn, fp8_e5m2; got {self.fmt.value!r}")
        layout = FP8_E4M3FN if self.fmt is Format.FP8_E4M3FN else FP8_E5M2
        super().__init__({"fp8": In(layout), "bf16": Out(BF16)})

    def elaborate(self, platform):
        m = Module()
        m.d.comb += self.bf16.eq(decode_fp8(m, self.fp8, self.fmt))
        return m
