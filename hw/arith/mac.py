"""The multiply-accumulate unit of one PE: ``acc_out = RNE_fp32(acc_in + a*b)`` (or int8/int32).

:class:`MACConfig` is the frozen configuration shared by the hardware, the golden model and the tests;
:class:`MAC` is the component. For fp8 formats the operands are decoded exactly to bf16 in front of the
bf16 multiplier (as the array does at its edge), so one datapath serves every float format.
"""

from __future__ import annotations

from dataclasses import dataclass

from amaranth import EnableInserter, Module, Signal, Value
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from ..config import check_choice, check_int
from .bf16_mul import bf16_decode_pair, bf16_normalize_product, bf16_product_exponent, bf16_significand_product
from .dsp import Multiplier, registered_product
from .formats import BF16, FP32, Format, Product, Subnormals, accumulator_layout, operand_layout
from .fp8_decode import decode_fp8
from .fp32_add import fp32_accumulate
from .int8_mac import int8_accumulate
from .pipeline import Cuts

__all__ = ["MACConfig", "MAC", "MAX_STAGES", "FLOAT_CUTS_BY_STAGES", "mac_datapath", "check_multiplier"]

#: Largest supported number of pipeline register stages in the MAC.
MAX_STAGES = 9

#: Where the register stages go for each ``stages`` value (float formats). Cut points, in datapath
#: order: "in" (the operands, before the multiplier: on ECP5 the MULT18X18D then starts from
#: registers, not from the PE's weight-select mux), "mul" (after operand decode and the 8 x 8
#: multiply: the DSP output register), "exp" (after the two exponent differences), "align" (after
#: the exponent compare and the alignment shift), "add" (after the add/subtract and absolute value),
#: "norm1" (after the first half of the normalization), "norm" (after the normalization shift),
#: "round" (after the rounding increment), "out" (after packing). 0-4 stages are the original set;
#: 5-9 split the datapath further for clock rates above ~75 MHz on ECP5 (``bench/synth_scale.py``).
#: With the "in" cut (8 and 9 stages) the operands are decoded before it (the exponent sum after it,
#: beside the multiplier) and the product is normalized after "mul", so the multiplier's DSP block
#: has flip-flops right at both ends.
FLOAT_CUTS_BY_STAGES = {
    0: (),
    1: ("align",),
    2: ("mul", "norm"),
    3: ("mul", "align", "norm"),
    4: ("mul", "align", "norm", "out"),
    5: ("mul", "align", "add", "norm", "out"),
    6: ("mul", "exp", "align", "add", "norm", "out"),
    7: ("mul", "exp", "align", "add", "norm", "round", "out"),
    8: ("in", "mul", "exp", "align", "add", "norm", "round", "out"),
    9: ("in", "mul", "exp", "align", "add", "norm1", "norm", "round", "out"),
}
#: int8: "mul" (after the multiply), "out" (after the 32-bit add); beyond 2 stages the extra
#: registers are output delay stages so the latency still equals ``stages``.
INT8_CUTS_BY_STAGES = {0: (), 1: ("mul",), **{k: ("mul", "out") for k in range(2, MAX_STAGES + 1)}}


@dataclass(frozen=True)
class MACConfig:
    """Configuration of one MAC.

    Attributes:
        fmt: input format, one of "bf16", "fp8_e4m3fn", "fp8_e5m2", "int8" (default "bf16").
        subnormals: "ftz" (default) or "ieee"; int8 has no subnormals, so it reads "ftz" there
            whatever was given (one configuration, one cache entry, one manifest).
        stages: pipeline register stages, 0..9 (default 0 = combinational); latency = stages cycles.

    Raises:
        ValueError: on any value outside those sets, with the parameter name and allowed values.
    """

    fmt: str = "bf16"
    subnormals: str = "ftz"
    stages: int = 0

    def __post_init__(self):
        check_choice("fmt", self.fmt, Format)
        check_choice("subnormals", self.subnormals, Subnormals)
        check_int("stages", self.stages, 0, MAX_STAGES)
        if self.fmt == "int8":
            object.__setattr__(self, "subnormals", "ftz")

    @property
    def format(self) -> Format:
        return Format(self.fmt)

    @property
    def is_float(self) -> bool:
        return self.format is not Format.INT8

    @property
    def latency_cycles(self) -> int:
        """Cycles from an input beat to its result (0 = combinational)."""
        return self.stages

    @property
    def operand_bits(self) -> int:
        """Width of one multiplier operand in bits (16 for bf16, 8 for fp8 and int8)."""
        return 16 if self.format is Format.BF16 else 8

    @property
    def cuts(self) -> tuple[str, ...]:
        """Names of the cut points that carry a register stage."""
        return (FLOAT_CUTS_BY_STAGES if self.is_float else INT8_CUTS_BY_STAGES)[self.stages]

    def input_layout(self) -> data.StructLayout:
        """Payload of the input stream: ``a`` and ``b`` operands (LSB first) then ``c`` accumulator."""
        op = operand_layout(self.format)
        return data.StructLayout({"a": op, "b": op, "c": accumulator_layout(self.format)})


def check_multiplier(multiplier: str, fmt: str, stages: int) -> None:
    """Whether the multiplier kind ``multiplier`` (:data:`hw.arith.dsp.MULTIPLIERS`) fits a MAC of ``fmt``
    (the datapath format, "bf16" or "int8") with ``stages`` stages: "ecp5" makes the "mul" cut the DSP
    block's output register, so the multiplier must feed that register directly: int8 (any stages
    >= 1), or bf16 with the "in" cut (stages >= 8; with fewer the product is normalized before it).

    Raises:
        ValueError: an unknown kind, or "ecp5" where the product is not registered right after the
            multiplier.
    """
    check_choice("multiplier", multiplier, Multiplier)
    if multiplier == "ecp5":
        cuts = (INT8_CUTS_BY_STAGES if fmt == "int8" else FLOAT_CUTS_BY_STAGES)[stages]
        if "mul" not in cuts or (fmt != "int8" and "in" not in cuts):
            raise ValueError("multiplier='ecp5' makes the DSP block's output register the product register: it needs "
                             f"int8 with stages >= 1 or bf16 with stages >= 8; got fmt={fmt!r}, stages={stages}")


def mac_datapath(m: Module, cfg: MACConfig, a, b, c, valid, *, multiplier: str = "generic", ce=None, b_choice=None):
    """Add the MAC datapath ``c + a*b`` for ``cfg`` to ``m``, with ``cfg.stages`` register stages.

    ``a`` and ``b`` are bf16 views for every float format (fp8 is decoded by the caller, at the edge)
    or signed 8-bit values for int8; ``c`` is the 32-bit accumulator (fp32 view or int32). ``valid``
    (1 bit, or ``None`` for no valid bit and no valid registers) travels with the data. Returns
    ``(result, valid)``: 32-bit value and its valid bit,
    ``cfg.stages`` cycles later. Registers are placed at :attr:`MACConfig.cuts`. ``multiplier``: the
    multiplier kind (:mod:`hw.arith.dsp`; checked by :func:`check_multiplier`), ``ce`` the clock enable of
    the module (1 bit; "ecp5" only: the DSP block's register does not see an ``EnableInserter``);
    ``b_choice``: int8 with "ecp5" only, see :func:`~hw.arith.int8_mac.int8_accumulate`.

    Raises:
        ValueError: see :func:`check_multiplier`; ``b_choice`` given where it does not apply.
    """
    check_multiplier(multiplier, "int8" if not cfg.is_float else "bf16", cfg.stages)
    if b_choice is not None and (multiplier != "ecp5" or cfg.is_float):
        raise ValueError(f"b_choice is for int8 with multiplier='ecp5'; got {cfg.fmt} with {multiplier!r}")
    ce = 1 if ce is None else ce
    cuts = Cuts(m, cfg.cuts)
    if not cfg.is_float:
        result, valid = int8_accumulate(m, c, a, b, valid, cuts, multiplier=multiplier, ce=ce, b_choice=b_choice)
        for i in range(cfg.stages - len(cfg.cuts)):
            r = Signal.like(result, name=f"out_delay{i}", reset_less=True)
            m.d.sync += r.eq(result)
            if valid is not None:
                v = Signal(name=f"out_delay{i}_valid")
                m.d.sync += v.eq(valid)
                valid = v
            result = r
        return result, valid
    sub = Subnormals(cfg.subnormals)
    r = cuts.cut("in", **bf16_decode_pair(m, a, b, sub), c=Value.cast(c), valid=valid)
    flags = {"exp": bf16_product_exponent(m, r["exp_a"], r["exp_b"]),
             **{k: r[k] for k in ("sign", "zero", "inf", "nan")}}
    if multiplier == "ecp5":
        # "in" -> the DSP block -> its own output register as the "mul" cut (check_multiplier)
        s = cuts.cut("mul", **flags, c=r["c"], valid=r["valid"])
        s["raw"] = registered_product(m, r["sig_a"], r["sig_b"], signed=False, ce=ce, name="mul_dsp")
        product = bf16_normalize_product(m, s["raw"], s["exp"], s["sign"], s["zero"], s["inf"], s["nan"], sub)
        return fp32_accumulate(m, FP32(s["c"]), product, s["valid"], sub, cuts)
    raw = bf16_significand_product(m, r["sig_a"], r["sig_b"])
    if "in" in cfg.cuts:
        # 8+ stages: decode -> "in" -> 8 x 8 multiply -> "mul" -> product normalization, so the DSP
        # block sits between two flip-flop stages with no LUT on either side (on ECP5 the routes into
        # and out of the DSP column are the rest of that stage's budget).
        s = cuts.cut("mul", raw=raw, **flags, c=r["c"], valid=r["valid"])
        product = bf16_normalize_product(m, s["raw"], s["exp"], s["sign"], s["zero"], s["inf"], s["nan"], sub)
    else:
        # fewer stages: the normalization stays before the "mul" register (its stage is short there)
        p = bf16_normalize_product(m, raw, **flags, subnormals=sub)
        s = cuts.cut("mul", product=p.as_value(), c=r["c"], valid=r["valid"])
        product = Product(s["product"])
    return fp32_accumulate(m, FP32(s["c"]), product, s["valid"], sub, cuts)


class MAC(wiring.Component):
    """One fused multiply-accumulate unit with a fixed-latency pipeline.

    Ports (``amaranth.lib.stream``, valid/ready; in Verilog ``i__payload``, ``i__valid``,
    ``i__ready``, ``o__payload``, ``o__valid``, ``o__ready``, plus ``clk``/``rst`` when stages > 0):

    * ``i``: In stream, payload ``{a, b, c}`` (:meth:`MACConfig.input_layout`: 16+16+32 bits for bf16,
      8+8+32 for fp8 and int8; ``a`` in the low bits).
    * ``o``: Out stream, payload 32 bits (fp32, or int32 for int8).

    Flow control: the pipeline advances as one unit. It moves when ``o.ready`` is high or the
    output holds no valid beat (``i.ready = o.ready | ~o.valid``); otherwise every stage holds, so
    ``o.payload`` stays stable while ``o.valid & ~o.ready`` (stream rules). With an always-ready
    consumer, ``o`` carries the result of the beat that entered ``latency_cycles`` cycles earlier.
    With ``stages=0`` the unit is combinational: ``o.valid = i.valid``, ``i.ready = o.ready``.
    """

    def __init__(self, config: MACConfig | None = None):
        self.config = config or MACConfig()
        if not isinstance(self.config, MACConfig):
            raise TypeError(f"config must be a MACConfig; got {type(self.config).__name__}")
        super().__init__({
            "i": In(stream.Signature(self.config.input_layout())),
            "o": Out(stream.Signature(accumulator_layout(self.config.format))),
        })

    @property
    def latency_cycles(self) -> int:
        """Cycles from an accepted input beat to its result with an always-ready consumer."""
        return self.config.latency_cycles

    def port_meanings(self) -> dict[str, str]:
        """One-line meaning of each Verilog port, for the generated manifest."""
        cfg = self.config
        w = cfg.operand_bits
        acc = "int32" if cfg.fmt == "int8" else "fp32"
        return {
            "i__payload": (f"operands: a = bits [{w - 1}:0], b = bits [{2 * w - 1}:{w}] ({cfg.fmt}); "
                           f"c = bits [{2 * w + 31}:{2 * w}] ({acc} accumulator in)"),
            "i__valid": "input beat valid",
            "i__ready": ("input beat accepted (= o__ready; combinational MAC)" if cfg.stages == 0
                         else "input beat accepted (o__ready | ~o__valid: the pipeline advances)"),
            "o__payload": ("int32 result c + a*b, two's-complement wrap" if cfg.fmt == "int8" else
                           f"fp32 result RNE(c + a*b), one rounding, subnormals {cfg.subnormals}"),
            "o__valid": "result valid",
            "o__ready": "consumer ready; low stalls the whole pipeline",
        }

    def elaborate(self, platform):
        m = Module()
        cfg = self.config
        p = self.i.payload
        if cfg.format in (Format.FP8_E4M3FN, Format.FP8_E5M2):
            a = Signal(BF16, name="a_bf16")
            b = Signal(BF16, name="b_bf16")
            m.d.comb += [a.eq(decode_fp8(m, p.a, cfg.format)), b.eq(decode_fp8(m, p.b, cfg.format))]
        else:
            a, b = p.a, p.b
        result, valid = mac_datapath(m, cfg, a, b, p.c, self.i.valid)
        m.d.comb += [self.o.payload.eq(result), self.o.valid.eq(valid)]
        if cfg.stages == 0:
            m.d.comb += self.i.ready.eq(self.o.ready)
            return m
        advance = Signal(name="advance")
        m.d.comb += [advance.eq(self.o.ready | ~self.o.valid), self.i.ready.eq(advance)]
        return EnableInserter(advance)(m)
