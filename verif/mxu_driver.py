"""Simulator-independent stream driver and checker for the MXU's three streams.

Both the Amaranth-simulator tests and the cocotb testbench call it once per clock cycle:
``inputs()`` gives the values to drive before the edge, ``observe()`` takes the handshake signals
sampled (settled) in the same cycle. It checks the stream rules on the output (a stalled beat holds
its payload) and records every output beat with its cycle.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from verif.mxu_stim import unpack_out

__all__ = ["MXUDriver", "Drive"]


@dataclass
class Drive:
    wgt_valid: int
    wgt_payload: int
    act_valid: int
    act_payload: int
    out_ready: int


@dataclass
class MXUDriver:
    """Feeds ``weight_beats`` and ``act_beats`` and collects outputs.

    Args:
        cols: C, to unpack output vectors.
        weight_beats, act_beats: payload integers in order (see :mod:`verif.mxu_stim`).
        rng: with a generator, each stream's valid is withheld with probability ``gap_p`` and
            ``out.ready`` is low with probability ``stall_p`` per cycle; without, everything is
            offered as early as possible and the consumer is always ready.
        swap_bit: bit position of ``swap`` in the activation payload (``R*w + 32*C``); when given,
            the stall rule is checked from the ports every cycle: the array stalls exactly when
            ``out`` holds a beat the consumer does not take (then both ``ready`` are low), and an
            offered non-swap activation beat is taken whenever the array does not stall.
    """

    cols: int
    weight_beats: list[int]
    act_beats: list[int]
    rng: np.random.Generator | None = None
    gap_p: float = 0.2
    stall_p: float = 0.3
    swap_bit: int | None = None
    wi: int = 0
    ai: int = 0
    outputs: list[int] = field(default_factory=list)
    output_cycles: list[int] = field(default_factory=list)
    act_cycles: list[int] = field(default_factory=list)
    wgt_cycles: list[int] = field(default_factory=list)
    _drive: Drive | None = None
    _held: int | None = None

    @property
    def done(self) -> bool:
        return len(self.outputs) >= len(self.act_beats)

    def inputs(self, cycle: int) -> Drive:
        r = self.rng
        wv = int(self.wi < len(self.weight_beats) and (r is None or r.random() >= self.gap_p))
        av = int(self.ai < len(self.act_beats) and (r is None or r.random() >= self.gap_p))
        ready = int(r is None or r.random() >= self.stall_p)
        self._drive = Drive(wv, self.weight_beats[self.wi] if wv else 0, av,
                            self.act_beats[self.ai] if av else 0, ready)
        return self._drive

    def observe(self, cycle: int, wgt_ready: int, act_ready: int, out_valid: int, out_payload: int) -> None:
        d = self._drive
        stalled = bool(out_valid and not d.out_ready)
        if self.swap_bit is not None:
            if stalled:
                assert not act_ready and not wgt_ready, f"cycle {cycle}: ready high while the array stalls"
            elif d.act_valid and not (d.act_payload >> self.swap_bit) & 1:
                assert act_ready, f"cycle {cycle}: activation beat refused while the array does not stall"
        if self._held is not None:
            assert out_valid and out_payload == self._held, f"cycle {cycle}: a stalled output beat changed"
        self._held = out_payload if (out_valid and not d.out_ready) else None
        if out_valid and d.out_ready:
            assert len(self.outputs) < len(self.act_beats), f"cycle {cycle}: more output beats than inputs"
            self.outputs.append(out_payload)
            self.output_cycles.append(cycle)
        if d.wgt_valid and wgt_ready:
            self.wi += 1
            self.wgt_cycles.append(cycle)
        if d.act_valid and act_ready:
            self.ai += 1
            self.act_cycles.append(cycle)

    def results(self) -> np.ndarray:
        """(beats, C) uint32 result bits in output order."""
        if not self.outputs:
            return np.zeros((0, self.cols), dtype=np.uint32)
        return np.stack([unpack_out(v, self.cols) for v in self.outputs])
