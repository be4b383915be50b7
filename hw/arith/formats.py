"""Number-format layouts (``amaranth.lib.data``) and the mode enums of the arithmetic units.

Field order in a :class:`~amaranth.lib.data.StructLayout` is LSB first, so each layout below matches
the IEEE 754 / OCP bit order (mantissa in the low bits, sign in the MSB).
"""

from amaranth import signed
from amaranth.lib import data, enum

__all__ = [
    "BF16", "FP32", "FP8_E4M3FN", "FP8_E5M2", "INT8", "INT32", "Product", "PRODUCT_EXP_BITS",
    "Format", "Subnormals", "operand_layout", "accumulator_layout",
    "FP32_CANONICAL_NAN", "BF16_CANONICAL_NAN",
]

#: bfloat16: 1 sign, 8 exponent (bias 127), 7 mantissa bits; 16 bits.
BF16 = data.StructLayout({"mantissa": 7, "exponent": 8, "sign": 1})
#: IEEE 754 binary32: 1 sign, 8 exponent (bias 127), 23 mantissa bits; 32 bits.
FP32 = data.StructLayout({"mantissa": 23, "exponent": 8, "sign": 1})
#: OCP FP8 E4M3 "fn" (finite, no infinity; NaN is S.1111.111), bias 7; 8 bits.
FP8_E4M3FN = data.StructLayout({"mantissa": 3, "exponent": 4, "sign": 1})
#: OCP FP8 E5M2 (IEEE-like: infinities and NaNs), bias 15; 8 bits.
FP8_E5M2 = data.StructLayout({"mantissa": 2, "exponent": 5, "sign": 1})
#: Two's-complement integers for the int8 mode.
INT8 = signed(8)
INT32 = signed(32)

#: Width of the unbiased exponent of an exact product: bf16 products span 2**-266 .. 2**256,
#: and -512 is reserved as the "zero" sentinel below every real exponent; 10 bits signed.
PRODUCT_EXP_BITS = 10

#: The exact product of two bf16 values (no rounding): value = (-1)**sign * sig * 2**(exp - 15).
#: ``sig`` is normalized (bit 15 set) unless the product is zero; ``exp`` is the unbiased exponent of
#: bit 15. ``zero``/``inf``/``nan`` flag the special cases (nan: a NaN input, or inf * 0).
Product = data.StructLayout({
    "sig": 16,
    "exp": signed(PRODUCT_EXP_BITS),
    "sign": 1,
    "zero": 1,
    "inf": 1,
    "nan": 1,
})

#: The only NaN the hardware emits (quiet, positive, zero payload).
FP32_CANONICAL_NAN = 0x7FC00000
BF16_CANONICAL_NAN = 0x7FC0


class Format(enum.Enum):
    """Input format of the multipliers (fp8 is decoded exactly to bf16 at the array edge)."""
    BF16 = "bf16"
    FP8_E4M3FN = "fp8_e4m3fn"
    FP8_E5M2 = "fp8_e5m2"
    INT8 = "int8"


class Subnormals(enum.Enum):
    """Subnormal handling of the float datapath.

    FTZ: subnormal inputs read as signed zero (DAZ) and results tiny after rounding flushed to signed
    zero (as the TPU and Intel AMX do). IEEE: gradual underflow (IEEE 754-2019 §7.5), as numpy does.
    """
    FTZ = "ftz"
    IEEE = "ieee"


def operand_layout(fmt: Format):
    """Layout of one multiplier operand in format ``fmt`` (8 or 16 bits)."""
    return {
        Format.BF16: BF16, Format.FP8_E4M3FN: FP8_E4M3FN, Format.FP8_E5M2: FP8_E5M2, Format.INT8: INT8,
    }[Format(fmt)]


def accumulator_layout(fmt: Format):
    """Layout of the accumulator / partial sum for ``fmt``: fp32 for floats, int32 for int8 (32 bits)."""
    return INT32 if Format(fmt) is Format.INT8 else FP32
