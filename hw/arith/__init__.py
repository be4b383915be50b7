"""Arithmetic units: bf16 multiplier, fused fp32 accumulate adder, fp8 decoders, int8 MAC, MAC."""

from .bf16_mul import BF16Multiplier
from .formats import BF16, FP8_E4M3FN, FP8_E5M2, FP32, Format, Product, Subnormals
from .fp8_decode import FP8Decoder
from .fp32_add import FP32Adder
from .fp32_sum import FP32Sum
from .int8_mac import Int8MAC
from .mac import MAC, MAX_STAGES, MACConfig

__all__ = ["BF16", "FP32", "FP8_E4M3FN", "FP8_E5M2", "Product", "Format", "Subnormals",
           "BF16Multiplier", "FP32Adder", "FP32Sum", "FP8Decoder", "Int8MAC", "MAC", "MACConfig", "MAX_STAGES"]
