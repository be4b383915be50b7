"""The collective engine's datapath: local slice and neighbour's slice in, their sum (or either one
alone) out to the next node and to memory."""

from __future__ import annotations

from amaranth.hdl import Array, Cat, Const, Module, Mux, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.fifo import SyncFIFOBuffered
from amaranth.lib.wiring import In, Out

from hw.arith.fp32_sum import FP32Sum
from hw.ici.config import message_signature

from .config import HBM_BEAT_BYTES, CollectiveConfig, command_layout

__all__ = ["Combiner", "hbm_beat_layout"]


def hbm_beat_layout() -> data.StructLayout:
    """An AXI4 write beat without WLAST: ``data`` (256 bits), ``strb`` (32 bits)."""
    return data.StructLayout({"data": HBM_BEAT_BYTES * 8, "strb": HBM_BEAT_BYTES})


class Combiner(wiring.Component):
    """For each command, ``beats`` link beats: the local slice's HBM beats (cut into
    ``32 / link.beat_bytes`` link beats, low bytes first) and the neighbour's message beat for beat;
    with both, ``lanes`` adders give ``remote + local`` per 32-bit element (fp32 RNE in the subnormal
    mode, :class:`~hw.arith.FP32Sum`; int32 wrap-around for int8), with one the beat passes
    unchanged (every bit: an all-gather copies NaN payloads and subnormals as they are). Results leave
    in order, ``latency_cycles`` after their operands, to ``tx`` (one message per command, ``last``
    on its final beat) and/or to ``hbm`` (whole HBM beats; a row's last beat, where the slice ends a
    row, has WSTRB only on the row's ``row_bytes``).

    Ports:
        cmd: In(stream of command_layout); row_bytes: In(16), held.
        local: In(stream of 256 bits): AXI4 R data. remote: In(message_signature): from the link.
        tx: Out(message_signature): to the link. hbm: Out(stream of :func:`hbm_beat_layout`).
        idle: Out(1): no command held, nothing in flight.
        framing_error: Out(1), sticky until reset: a neighbour's message ended where the command did
            not, or did not end where it did (the nodes disagree about the schedule).

    Args:
        config: :class:`CollectiveConfig`.
    """

    def __init__(self, config: CollectiveConfig):
        self.config = config
        msg = message_signature(config.link)
        super().__init__({"cmd": In(stream.Signature(command_layout(config))), "row_bytes": In(16),
                          "local": In(stream.Signature(HBM_BEAT_BYTES * 8)), "remote": In(msg),
                          "tx": Out(msg), "hbm": Out(stream.Signature(hbm_beat_layout())),
                          "idle": Out(1), "framing_error": Out(1)})

    def elaborate(self, platform):
        m = Module()
        cfg = self.config
        W, L, D = cfg.words, cfg.link.beat_bytes * 8, cfg.latency_cycles
        side = data.StructLayout({"valid": 1, "both": 1, "last": 1, "tx": 1, "hbm": 1, "beat_end": 1, "tail": 1})
        # ---- the command being fed, and a receive-only one drained beside it -------------------
        # A command that only takes the neighbour's slice and writes it (an all-gather's last
        # phase) bypasses the adders, so the next command (a send-only phase 0) can run at the same
        # time: the link then never idles while its node drains. The drain takes its command once
        # nothing older is in flight; a command that reads the link or writes memory waits for it.
        c, dc = Signal(command_layout(cfg)), Signal(command_layout(cfg))
        held, dheld = Signal(), Signal()
        p = self.cmd.payload
        drain_cmd = p.remote & p.hbm & ~p.tx & ~p.local
        depth = D + 4
        m.submodules.fifo = fifo = SyncFIFOBuffered(width=L + side.size, depth=depth)
        pending = Signal(range(depth + 1))
        take_main = self.cmd.valid & ~drain_cmd & ~held
        take_drain = self.cmd.valid & drain_cmd & ~held & ~dheld & (pending == 0)
        m.d.comb += self.cmd.ready.eq(Mux(drain_cmd, ~held & ~dheld & (pending == 0), ~held))
        go, d_go = Signal(), Signal()
        word, beat_end, row_last, msg_last = _position(m, "main", W, c, p, take_main, go)
        _, d_end, d_row_last, d_last = _position(m, "drain", W, dc, p, take_drain, d_go)
        with m.If(take_main):
            m.d.sync += [c.eq(p), held.eq(1)]
        with m.Elif(go & msg_last):
            m.d.sync += held.eq(0)
        with m.If(take_drain):
            m.d.sync += [dc.eq(p), dheld.eq(1)]
        with m.Elif(d_go & d_last):
            m.d.sync += dheld.eq(0)
        free = ~dheld | (~c.remote & ~c.hbm)
        m.d.comb += go.eq(held & free & (self.local.valid | ~c.local) & (self.remote.valid | ~c.remote)
                          & (pending < depth))
        m.d.comb += [self.local.ready.eq(go & c.local & beat_end),
                     self.remote.ready.eq(Mux(dheld, d_go, go & c.remote))]
        with m.If((go & c.remote & (self.remote.payload.last != msg_last))
                  | (d_go & (self.remote.payload.last != d_last))):
            m.d.sync += self.framing_error.eq(1)
        # ---- lanes ---------------------------------------------------------------------------
        lw = Array(self.local.payload[k * L:(k + 1) * L] for k in range(W))[word] if W > 1 else self.local.payload
        rw = self.remote.payload.data
        sums = []
        for k in range(cfg.lanes):
            x, y = rw[32 * k:32 * k + 32], lw[32 * k:32 * k + 32]
            if cfg.fmt == "int8":
                s = x + y
                for i in range(D):
                    r = Signal(32, name=f"int_sum{k}_{i}", reset_less=True)
                    m.d.sync += r.eq(s)
                    s = r
                sums.append(s[:32])
            else:
                add = FP32Sum(cfg.subnormals, cuts=cfg.adder_cuts)
                m.submodules[f"lane{k}"] = add
                m.d.comb += [add.x.as_value().eq(x), add.y.as_value().eq(y), add.i_valid.eq(go)]
                sums.append(add.result.as_value())
        # the pass-through word and the beat's flags travel beside the adders
        s0 = Signal(side)
        p0 = Signal(L)
        m.d.comb += [s0.valid.eq(go), s0.both.eq(c.local & c.remote), s0.last.eq(msg_last), s0.tx.eq(c.tx),
                     s0.hbm.eq(c.hbm), s0.beat_end.eq(beat_end), s0.tail.eq(row_last & c.row_end),
                     p0.eq(Mux(c.remote, rw, lw))]
        for i in range(D):
            s1, p1 = Signal(side, name=f"side{i}"), Signal(L, name=f"pass{i}", reset_less=True)
            m.d.sync += [s1.eq(s0), p1.eq(p0)]
            s0, p0 = s1, p1
        m.d.comb += [fifo.w_en.eq(s0.valid), fifo.w_data.eq(Cat(Mux(s0.both, Cat(*sums), p0), s0.as_value()))]
        m.d.sync += pending.eq(pending + go - (fifo.r_en & fifo.r_rdy))
        # ---- out: fork to the link and the memory side ---------------------------------------
        o_data, o = fifo.r_data[:L], data.View(side, fifo.r_data[L:])
        sent = Signal(2)                   # tx, gear: taken already
        m.submodules.gear = gear = _Gear(cfg)
        rw_ = self.remote.payload.data
        m.d.comb += [gear.row_bytes.eq(self.row_bytes),
                     gear.word.eq(Mux(dheld, rw_, o_data)), gear.beat_end.eq(Mux(dheld, d_end, o.beat_end)),
                     gear.tail.eq(Mux(dheld, d_row_last & dc.row_end, o.tail)),
                     gear.valid.eq(Mux(dheld, self.remote.valid, fifo.r_rdy & o.hbm & ~sent[1])),
                     d_go.eq(dheld & self.remote.valid & gear.ready),
                     self.tx.payload.data.eq(o_data), self.tx.payload.last.eq(o.last),
                     self.tx.valid.eq(fifo.r_rdy & o.tx & ~sent[0])]
        # (while the drain runs no entry of the FIFO is for memory: it started with the FIFO empty,
        # and commands that write memory wait for it)
        took = Cat(self.tx.valid & self.tx.ready, ~dheld & gear.valid & gear.ready)
        done = (sent | took | ~Cat(o.tx, o.hbm)) == 0b11
        m.d.comb += fifo.r_en.eq(fifo.r_rdy & done)
        m.d.sync += sent.eq(Mux(fifo.r_en, 0, sent | took))
        wiring.connect(m, gear.out, wiring.flipped(self.hbm))
        m.d.comb += self.idle.eq(~held & ~dheld & (pending == 0) & gear.empty)
        return m


def _position(m, name, W, c, p, load, adv):
    """A cursor over a command's link beats: the link beat in its HBM beat, the HBM beat in its row,
    the rows left. Loaded from the command ``p`` at ``load``; steps at ``adv``. Returns (the beat ends
    an HBM beat, it ends a row, it ends the command) for the command ``c`` held, after the cursor's
    link-beat index."""
    word = Signal(range(W), name=f"{name}_word")
    beat = Signal(12, name=f"{name}_beat")
    rows = Signal(16, name=f"{name}_rows")
    beat_end = word == W - 1
    row_last = beat_end & (beat == c.hbm_beats - 1)
    with m.If(load):
        m.d.sync += [word.eq(0), beat.eq(0), rows.eq(p.rows)]
    with m.Elif(adv):
        m.d.sync += word.eq(Mux(beat_end, 0, word + 1))
        with m.If(beat_end):
            m.d.sync += beat.eq(Mux(row_last, 0, beat + 1))
        with m.If(row_last):
            m.d.sync += rows.eq(rows - 1)
    return word, beat_end, row_last, row_last & (rows == 1)


class _Gear(wiring.Component):
    """Link beats into HBM beats (the first in the low bytes), with the row's WSTRB."""

    def __init__(self, cfg: CollectiveConfig):
        self.cfg = cfg
        super().__init__({"word": In(cfg.link.beat_bytes * 8), "beat_end": In(1), "tail": In(1), "row_bytes": In(16),
                          "valid": In(1), "ready": Out(1), "out": Out(stream.Signature(hbm_beat_layout())),
                          "empty": Out(1)})

    def elaborate(self, platform):
        m = Module()
        W, L = self.cfg.words, self.cfg.link.beat_bytes * 8
        asm = Signal(max(1, (W - 1) * L))  # the beat's earlier words
        idx = Signal(range(W))
        full = Signal()
        m.d.comb += [self.ready.eq(~self.beat_end | ~full | self.out.ready), self.out.valid.eq(full),
                     self.empty.eq(~full & (idx == 0))]
        with m.If(self.out.valid & self.out.ready):
            m.d.sync += full.eq(0)
        tail = Signal(range(HBM_BEAT_BYTES + 1))   # bytes of the row in its last beat, 1 .. 32
        m.d.comb += tail.eq(((self.row_bytes - 1) & (HBM_BEAT_BYTES - 1)) + 1)
        strb = Mux(self.tail, (Const(1, HBM_BEAT_BYTES + 1) << tail) - 1, (1 << HBM_BEAT_BYTES) - 1)
        with m.If(self.valid & self.ready):
            if W > 1:
                m.d.sync += Array(asm[k * L:(k + 1) * L] for k in range(W - 1))[idx].eq(self.word)
            with m.If(self.beat_end):
                whole = Cat(asm, self.word) if W > 1 else self.word
                m.d.sync += [full.eq(1), idx.eq(0), self.out.payload.data.eq(whole), self.out.payload.strb.eq(strb)]
            with m.Else():
                m.d.sync += idx.eq(idx + 1)
        return m
