"""An AXI4 register slice: a timing cut between an AXI4 master and slave, one cycle per channel."""

from __future__ import annotations

from amaranth.hdl import Module
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from .config import check_int
from .hbm.axi import axi4_signature
from .skid_buffer import SkidBuffer
from .stream_register import StreamRegister

__all__ = ["AXI4RegisterSlice"]

#: channels the slice can register, in AMBA order (ARM IHI 0022, A3.1)
CHANNELS = ("aw", "w", "b", "ar", "r")


def _payloads(addr_bits: int, data_bits: int, id_bits: int) -> dict[str, dict[str, int]]:
    """Each channel's payload fields (AMBA names without the channel prefix) and widths in bits."""
    ax = {"id": id_bits, "addr": addr_bits, "len": 8, "size": 3, "burst": 2}
    return {"aw": ax, "w": {"data": data_bits, "strb": data_bits // 8, "last": 1},
            "b": {"id": id_bits, "resp": 2}, "ar": ax,
            "r": {"id": id_bits, "data": data_bits, "resp": 2, "last": 1}}


class AXI4RegisterSlice(wiring.Component):
    """A :class:`~hw.skid_buffer.SkidBuffer` on each channel of ``channels`` (the AMBA "fully
    registered" slice): VALID, the payload and READY leave the slice from flip-flops, so no
    combinational path runs between master and slave through them. A
    :class:`~hw.stream_register.StreamRegister` on each channel of ``forward`` (the AMBA "forward"
    slice: VALID and the payload from flip-flops, READY one gate after the destination's, one payload
    register instead of two and no multiplexer in front of it, for a wide channel). Both run at one
    transfer per cycle with one cycle of latency. The other channels pass straight through.

    What it cuts in :class:`~hw.top.GEMMTop` and the board top: without it, a port's VALID runs
    through the HBM front end's round-robin arbiter into the READY of every port of the same
    pseudo-channel and on into the engine's burst splitters, one combinational path from engine to
    engine.

    Ports:
        s: the slave side, where the master connects (:func:`~hw.hbm.axi.axi4_signature`, as a slave
            has it).
        m: the master side, connected to the slave (the same signature flipped).

    Args:
        addr_bits: AxADDR width, 1..64 bits.
        data_bits: xDATA width in bits, a multiple of 8 from 8 to 1024.
        id_bits: ID width, 1..16 bits.
        channels: the channels to register fully, a subset of ``("aw", "w", "b", "ar", "r")``.
        forward: the channels to register forward only, a subset of the same names, none of them in
            ``channels``.

    Raises:
        TypeError: ``channels`` is not a tuple or list of strings.
        ValueError: a width out of range, an unknown channel name or one in both ``channels`` and
            ``forward``, naming it and the allowed values.
    """

    def __init__(self, addr_bits: int, data_bits: int, id_bits: int, channels=("aw", "ar"), forward=("w",)):
        check_int("addr_bits", addr_bits, 1, 64)
        check_int("data_bits", data_bits, 8, 1024)
        if data_bits % 8:
            raise ValueError(f"data_bits must be a multiple of 8; got {data_bits}")
        check_int("id_bits", id_bits, 1, 16)
        for name, chans in (("channels", channels), ("forward", forward)):
            if not isinstance(chans, (tuple, list)) or not all(isinstance(c, str) for c in chans):
                raise TypeError(f"{name} must be a tuple of channel names; got {chans!r}")
            for c in chans:
                if c not in CHANNELS:
                    raise ValueError(f"{name}: unknown channel {c!r}; allowed: {', '.join(CHANNELS)}")
        both = [c for c in channels if c in forward]
        if both:
            raise ValueError(f"channels and forward both name {', '.join(both)}; a channel takes one kind of slice")
        self.addr_bits, self.data_bits, self.id_bits = addr_bits, data_bits, id_bits
        self.channels = tuple(c for c in CHANNELS if c in channels)
        self.forward = tuple(c for c in CHANNELS if c in forward)
        sig = axi4_signature(addr_bits, data_bits, id_bits)
        super().__init__({"s": Out(sig), "m": In(sig)})

    def elaborate(self, platform):
        m = Module()
        for ch, fields in _payloads(self.addr_bits, self.data_bits, self.id_bits).items():
            # requests (AW, W, AR) flow from s to m, responses (B, R) from m to s
            src, dst = (self.s, self.m) if ch in ("aw", "w", "ar") else (self.m, self.s)
            src_valid, src_ready = getattr(src, f"{ch}valid"), getattr(src, f"{ch}ready")
            dst_valid, dst_ready = getattr(dst, f"{ch}valid"), getattr(dst, f"{ch}ready")
            if ch not in self.channels + self.forward:
                m.d.comb += [dst_valid.eq(src_valid), src_ready.eq(dst_ready)]
                m.d.comb += [getattr(dst, ch + f).eq(getattr(src, ch + f)) for f in fields]
                continue
            kind = SkidBuffer if ch in self.channels else StreamRegister
            m.submodules[f"{ch}_slice"] = buf = kind(data.StructLayout(fields))
            m.d.comb += [buf.i.valid.eq(src_valid), src_ready.eq(buf.i.ready),
                         dst_valid.eq(buf.o.valid), buf.o.ready.eq(dst_ready)]
            m.d.comb += [getattr(buf.i.payload, f).eq(getattr(src, ch + f)) for f in fields]
            m.d.comb += [getattr(dst, ch + f).eq(getattr(buf.o.payload, f)) for f in fields]
        return m
