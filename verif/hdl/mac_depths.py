"""Every pipeline depth of one MAC configuration side by side on one input stream: one simulator
build checks the register cuts of all depths at once (:mod:`verif.tb.mac_depths_tb`)."""

from __future__ import annotations

from amaranth.hdl import Cat, Module, Value
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from hw.arith import MAC, MAX_STAGES, MACConfig

__all__ = ["MACDepths"]


class MACDepths(wiring.Component):
    """``MAX_STAGES + 1`` MACs of one format and subnormal mode, stages 0, 1, ..., ``MAX_STAGES``,
    all fed the same beat and all always ready.

    Ports (Verilog names as written):
        i_payload: In, the MAC input payload (``MACConfig.input_layout``: a | b << w | c << 2w, w = 16
            for bf16, else 8); i_valid: In(1).
        o_payload: Out(32 * (MAX_STAGES + 1)), the result of depth s in bits ``32 s`` to ``32 s + 31``.
        o_valid: Out(MAX_STAGES + 1), bit s: depth s has a result this cycle.

    With ``i_valid`` held high from cycle 0, depth s shows the result of the beat of cycle ``t - s``
    in cycle t and none before cycle s.

    Args:
        fmt, subnormals: as :class:`hw.arith.MACConfig` (checked there: ValueError, TypeError).
    """

    def __init__(self, fmt: str = "bf16", subnormals: str = "ftz"):
        self.configs = [MACConfig(fmt, subnormals, s) for s in range(MAX_STAGES + 1)]
        width = self.configs[0].input_layout().size
        n = len(self.configs)
        super().__init__({
            "i_payload": In(width), "i_valid": In(1),
            "o_payload": Out(32 * n), "o_valid": Out(n),
        })

    def elaborate(self, platform):
        m = Module()
        outs, valids = [], []
        for cfg in self.configs:
            mac = m.submodules[f"mac_s{cfg.stages}"] = MAC(cfg)
            m.d.comb += [
                Value.cast(mac.i.payload).eq(self.i_payload),
                mac.i.valid.eq(self.i_valid),
                mac.o.ready.eq(1),
            ]
            outs.append(Value.cast(mac.o.payload))
            valids.append(mac.o.valid)
        m.d.comb += [self.o_payload.eq(Cat(*outs)), self.o_valid.eq(Cat(*valids))]
        return m
