"""Random back-pressure on an AXI4 port, for simulation: the engine's memory made slower at will."""

from __future__ import annotations

from amaranth.hdl import Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from .axi_slice import CHANNELS, _payloads
from .config import check_int
from .hbm.axi import axi4_signature

__all__ = ["AXI4Stall", "lfsr_next", "lfsr_start"]

#: x^16 + x^14 + x^13 + x^11 + 1, a maximal-length 16-bit Galois LFSR (period 65,535)
LFSR_TAPS = 0xB400


def lfsr_start(seed: int, channel: int) -> int:
    """The start state of channel ``channel``'s (index into ``CHANNELS``) LFSR for ``seed``: distinct
    and non-zero for 5 channels x 4,096 seeds (``k = 5 * seed + channel + 1`` is 1..20,480, and
    multiplying by an odd constant is a bijection modulo 2**16, so no two k meet and none gives 0)."""
    return ((seed * len(CHANNELS) + channel + 1) * 0x9E37) & 0xFFFF


def lfsr_next(state: int) -> int:
    """The LFSR's state after ``state`` (a model of the hardware's step, for tests)."""
    return (state >> 1) ^ (LFSR_TAPS if state & 1 else 0)


class AXI4Stall(wiring.Component):
    """An AXI4 pass-through that holds back transfers at random: in each cycle, each of the five
    channels is closed with probability ``rate`` / 256 (the low byte of a 16-bit LFSR of its own below
    ``rate``; consecutive cycles' bytes share bits, so stalls come in bursts), and a closed channel
    shows the destination no VALID and the source no READY.

    A transfer the destination has already seen offered stays offered (the channel is open while the
    last cycle's VALID was not taken), so both sides keep the AXI4 handshake rules (AMBA AXI A3.2.1:
    VALID, once asserted, stays until the handshake) when the source keeps them. No register on the
    payload: ``rate`` 0 is a wire in every cycle, and the stall pattern depends only on the cycle
    count since reset, so a run is reproducible.

    Ports: ``s`` (Out(:func:`~hw.hbm.axi.axi4_signature`): the master, e.g. an engine port, connects
    here), ``m`` (In(same): to the slave), ``rate`` (In(8): 0 never stalls, 255 stalls 255 of 256
    cycles).

    Args:
        addr_bits, data_bits, id_bits: as :class:`~hw.axi_slice.AXI4RegisterSlice`.
        seed: 0..4095, picks the five LFSRs' start states (give each port its own).

    Raises:
        TypeError, ValueError: a parameter of the wrong type or out of range, naming it.
    """

    def __init__(self, addr_bits: int, data_bits: int, id_bits: int, seed: int = 0):
        check_int("addr_bits", addr_bits, 1, 64)
        check_int("data_bits", data_bits, 8, 1024)
        check_int("id_bits", id_bits, 1, 16)
        check_int("seed", seed, 0, 4095)
        self.seed = seed
        self.fields = _payloads(addr_bits, data_bits, id_bits)
        sig = axi4_signature(addr_bits, data_bits, id_bits)
        super().__init__({"s": Out(sig), "m": In(sig), "rate": In(8)})

    def elaborate(self, platform):
        m = Module()
        for c, ch in enumerate(CHANNELS):
            fields = self.fields[ch]
            src, dst = (self.s, self.m) if ch in ("aw", "w", "ar") else (self.m, self.s)
            src_valid, src_ready = getattr(src, f"{ch}valid"), getattr(src, f"{ch}ready")
            dst_valid, dst_ready = getattr(dst, f"{ch}valid"), getattr(dst, f"{ch}ready")
            lfsr = Signal(16, init=lfsr_start(self.seed, c), name=f"{ch}_lfsr")
            m.d.sync += lfsr.eq(Mux(lfsr[0], (lfsr >> 1) ^ LFSR_TAPS, lfsr >> 1))
            offered = Signal(name=f"{ch}_offered")   # VALID was shown and not taken: keep it open
            m.d.sync += offered.eq(dst_valid & ~dst_ready)
            open_ = Signal(name=f"{ch}_open")
            m.d.comb += open_.eq(offered | (lfsr[:8] >= self.rate))
            m.d.comb += [dst_valid.eq(src_valid & open_), src_ready.eq(dst_ready & open_)]
            m.d.comb += [getattr(dst, ch + f).eq(getattr(src, ch + f)) for f in fields]
        return m
