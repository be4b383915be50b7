"""Processing element of the weight-stationary systolic array.

One PE holds three weight registers:

* ``transport``: one stage of the column's weight-load shift chain (``w_in`` -> ``w_out``), shifted
  by the array-wide ``w_shift`` strobe; the next tile's weights travel down the column through it;
* ``shadow``: the next tile's weight, copied from ``transport`` when ``commit_in`` is high (the commit
  strobe travels down the column one PE per cycle, ``commit_out``);
* ``active``: the weight in use.

The activation enters from the left with a ``swap`` bit and leaves to the right one cycle later
(``a_out``, ``swap_out``). A beat whose ``swap`` bit is set is the first of a new tile: it is multiplied
by ``shadow`` and ``shadow`` becomes ``active``, so the swap moves through the array exactly with the
activation wavefront and no bubble is needed between tiles. The partial sum enters from above
(``psum_in``) and leaves below (``psum_out``) ``stages`` cycles later: ``psum_out = psum_in + a * w``
with one RNE rounding (fp32) or two's-complement wrap (int32).

The weight multiplied is ``shadow`` in a swap cycle, else ``active``. With ``lookahead`` high the PE
is also told the swap bit one enabled cycle early (``swap_next``: what ``swap_in`` will be at the next
enabled edge; in the array, the left neighbour's ``swap_in``), and the weight to multiply is then
chosen a cycle ahead into a register: the multiplier's operand comes from a flip-flop, not through a
multiplexer from the neighbour's swap register (the 8x8 int8 MXU's critical path on ECP5 ran from one
PE's ``swap_out`` through the next PE's weight multiplexer into its DSP block). The values multiplied
are the same in every cycle. ``lookahead`` is a strap (tied to a constant where the PE is used).

Every register advances only when ``en`` is high (the array's stall). fp8 operands never reach a PE:
the array decodes them to bf16 at its edges.
"""

from __future__ import annotations

from dataclasses import dataclass

from amaranth import EnableInserter, Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from .arith.formats import BF16, FP32, INT8, INT32
from .arith.mac import MAX_STAGES, MACConfig, check_multiplier, mac_datapath
from .config import check_int

__all__ = ["PEConfig", "PE"]


@dataclass(frozen=True)
class PEConfig:
    """Configuration of one PE.

    Attributes:
        fmt: datapath format inside the array, "bf16" (every float input format) or "int8".
        subnormals: "ftz" or "ieee".
        stages: partial-sum latency in cycles, 1..9 (the MAC's pipeline registers; at least one, so
            the partial sum is registered in every PE).
        multiplier: "generic" (default: ``a * b`` and a fabric register) or "ecp5" (an ECP5
            ``MULT18X18D`` whose output register is the product register; int8, or bf16 with 8 or 9
            stages; see :mod:`hw.arith.dsp`).

    Raises:
        ValueError: on any value outside those sets, naming the parameter and allowed values.
    """

    fmt: str = "bf16"
    subnormals: str = "ftz"
    stages: int = 2
    multiplier: str = "generic"

    def __post_init__(self):
        if self.fmt not in ("bf16", "int8"):
            raise ValueError(f"fmt must be one of bf16, int8 inside a PE; got {self.fmt!r}")
        check_int("stages", self.stages, 1, MAX_STAGES)
        MACConfig(self.fmt, self.subnormals, self.stages)  # validates subnormals
        check_multiplier(self.multiplier, self.fmt, self.stages)
        if self.fmt == "int8":  # no subnormals in int8: one configuration whatever was given
            object.__setattr__(self, "subnormals", "ftz")

    @property
    def mac(self) -> MACConfig:
        return MACConfig(self.fmt, self.subnormals, self.stages)

    @property
    def lookahead(self) -> bool:
        """Whether the array straps its PEs (all but the first) to choose the weight a cycle ahead:
        int8, where the weight goes straight into the multiplier. A bf16 weight is decoded first (and
        with 8 or 9 stages registered before the multiplier), so there the look-ahead's register and
        its 16 two-level multiplexers per PE would buy nothing; the strap is then low everywhere and
        synthesis removes them."""
        return self.fmt == "int8"

    @property
    def operand_bits(self) -> int:
        """Width of an activation or weight inside the array: 16 (bf16) or 8 (int8)."""
        return 16 if self.fmt == "bf16" else 8

    @property
    def operand_shape(self):
        return BF16 if self.fmt == "bf16" else INT8

    @property
    def acc_shape(self):
        return FP32 if self.fmt == "bf16" else INT32


class PE(wiring.Component):
    """One weight-stationary PE (see the module docstring for the dataflow).

    Ports (Verilog names, widths in bits; w = 16 for bf16, 8 for int8): ``en`` (1), ``a_in`` (w),
    ``swap_in`` (1), ``a_out`` (w), ``swap_out`` (1), ``psum_in`` (32), ``psum_out`` (32), ``w_in``
    (w), ``w_out`` (w), ``w_shift`` (1), ``commit_in`` (1), ``commit_out`` (1), ``lookahead`` (1, a
    strap), ``swap_next`` (1, used while ``lookahead`` is high), ``clk``, ``rst``.

    Latencies (cycles with ``en`` high): activation and swap bit 1; partial sum ``stages``;
    weight chain 1 per shift; commit strobe 1.
    """

    def __init__(self, config: PEConfig | None = None):
        self.config = config or PEConfig()
        op = self.config.operand_shape
        acc = self.config.acc_shape
        super().__init__({
            "en": In(1),
            "a_in": In(op), "swap_in": In(1), "a_out": Out(op), "swap_out": Out(1),
            "psum_in": In(acc), "psum_out": Out(acc),
            "w_in": In(op), "w_out": Out(op), "w_shift": In(1),
            "commit_in": In(1), "commit_out": Out(1),
            "lookahead": In(1), "swap_next": In(1),
        })

    def elaborate(self, platform):
        m = Module()
        op = self.config.operand_shape
        transport = Signal(op, name="w_transport")
        shadow = Signal(op, name="w_shadow")
        active = Signal(op, name="w_active")
        weight = Signal(op, name="w_use")
        # the weight of the next enabled cycle, from the registers' next values and swap_next
        weight_next = Signal(op, name="w_next")
        next_shadow = Mux(self.commit_in, transport, shadow)
        next_active = Mux(self.swap_in, shadow, active)
        m.d.sync += weight_next.eq(Mux(self.swap_next, next_shadow, next_active))
        m.d.comb += weight.eq(Mux(self.lookahead, weight_next, Mux(self.swap_in, shadow, active)))
        with m.If(self.w_shift):
            m.d.sync += transport.eq(self.w_in)
        with m.If(self.commit_in):
            m.d.sync += shadow.eq(transport)
        with m.If(self.swap_in):
            m.d.sync += active.eq(shadow)
        # Every PE on an anti-diagonal (same r*L + c) holds the same swap bit, so a synthesizer merges
        # their swap registers into one that drives PEs far apart (the 8x8 int8 MXU's critical path
        # on ECP5: 101.4 MHz merged, 121.8 MHz kept); ``keep`` asks for one per PE.
        swap_q = Signal(name="swap_q", attrs={"keep": 1})
        m.d.sync += [
            self.a_out.eq(self.a_in),
            swap_q.eq(self.swap_in),
            self.commit_out.eq(self.commit_in),
        ]
        m.d.comb += self.swap_out.eq(swap_q)
        m.d.comb += self.w_out.eq(transport)
        # int8 in ECP5 DSP blocks: without look-ahead (the array's first PE) the swap's choice of weight
        # is made after the two products' registers, by swap_q, instead of in front of one DSP block
        # (its swap comes from the input handshake, late in the cycle)
        choice = None
        if self.config.multiplier == "ecp5" and self.config.fmt == "int8":
            choice = (self.lookahead, swap_q, shadow, active)
        result, _ = mac_datapath(m, self.config.mac, self.a_in, weight, self.psum_in, None,
                                 multiplier=self.config.multiplier, ce=self.en, b_choice=choice)
        m.d.comb += self.psum_out.eq(result)
        return EnableInserter(self.en)(m)
