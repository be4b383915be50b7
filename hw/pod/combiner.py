"""The collective engine's datapath: local slice and neighbour's slice in, their sum (or either one
alone) out to the next node and to memory."""

from __future__ import annotations

from amaranth.hdl import Array, Cat, Module, Mux, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.fifo import SyncFIFOBuffered
from amaranth.lib.wiring import In, Out

from hw.arith.fp32_sum import FP32Sum
from hw.ici.config import message_signature

from .config import HBM_BEAT_BYTES, CollectiveConfig, command_layout, hbm_beat_layout, is_drain
from .gear import Gear

__all__ = ["Combiner"]


class Combiner(wiring.Component):
    """For each command, ``beats`` link beats: the local slice's HBM beats (cut into
    ``32 / link.beat_bytes`` link beats, low bytes first) and the neighbour's message beat for beat;
    with both, ``lanes`` adders give ``remote + local`` per 32-bit element (fp32 RNE in the subnormal
    mode, :class:`~hw.arith.FP32Sum`; int32 wrap-around for int8), with one the beat passes
    unchanged (every bit: an all-gather copies NaN payloads and subnormals as they are). Results leave
    in order, ``latency_cycles`` after their operands, to ``tx`` (one message per command, ``last``
    on its final beat) and/or to ``hbm`` (whole HBM beats; a row's last beat, where the slice ends a
    row, has WSTRB only on the row's ``row_bytes``).

    A drain command (:func:`~hw.pod.config.is_drain`: the last phase of a slice, which takes the
    neighbour's slice and writes it without sending) runs beside the next command, the next slice's
    send-only first phase, so the node's link does not idle while it drains. Without a local operand
    (an all-gather's) the drain goes straight to memory; with one (a reduce-scatter's) its local
    slice comes from ``drain_local``, its own read port, and the sum through the adders, which the
    send-only command beside it does not use. The drain takes its command once nothing older is in
    flight; a command that takes the link or writes memory waits until the drain is written.

    Ports:
        cmd: In(stream of command_layout); row_bytes: In(16), held.
        local: In(stream of 256 bits): AXI4 R data of the commands other than drains.
        drain_local: In(stream of 256 bits): AXI4 R data of the drains (their own read port).
        remote: In(message_signature): from the link.
        tx: Out(message_signature): to the link. hbm: Out(stream of :func:`~hw.pod.config.hbm_beat_layout`).
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
                          "local": In(stream.Signature(HBM_BEAT_BYTES * 8)),
                          "drain_local": In(stream.Signature(HBM_BEAT_BYTES * 8)), "remote": In(msg),
                          "tx": Out(msg), "hbm": Out(stream.Signature(hbm_beat_layout())),
                          "idle": Out(1), "framing_error": Out(1)})

    def elaborate(self, platform):
        m = Module()
        cfg = self.config
        W, L, D = cfg.words, cfg.link.beat_bytes * 8, cfg.latency_cycles
        side = data.StructLayout({"valid": 1, "both": 1, "last": 1, "tx": 1, "hbm": 1, "beat_end": 1, "tail": 1})
        dside = data.StructLayout({"valid": 1, "beat_end": 1, "tail": 1})
        # ---- the command being fed, and a drain beside it ------------------------------------
        c, dc = Signal(command_layout(cfg)), Signal(command_layout(cfg))
        held, dheld = Signal(), Signal()
        p = self.cmd.payload
        depth = D + 4
        m.submodules.fifo = fifo = SyncFIFOBuffered(width=L + side.size, depth=depth)
        m.submodules.dfifo = dfifo = SyncFIFOBuffered(width=L + 2, depth=depth)
        pending, dpending = Signal(range(depth + 1)), Signal(range(depth + 1))
        dbusy = dheld | (dpending != 0)             # a drain held, or its sums not yet written
        take_main = self.cmd.valid & ~is_drain(p) & ~held
        take_drain = self.cmd.valid & is_drain(p) & ~held & ~dbusy & (pending == 0)
        m.d.comb += self.cmd.ready.eq(Mux(is_drain(p), ~held & ~dbusy & (pending == 0), ~held))
        go, d_go = Signal(), Signal()
        word, beat_end, row_last, msg_last = _position(m, "main", W, c, p, take_main, go)
        d_word, d_end, d_row_last, d_last = _position(m, "drain", W, dc, p, take_drain, d_go)
        with m.If(take_main):
            m.d.sync += [c.eq(p), held.eq(1)]
        with m.Elif(go & msg_last):
            m.d.sync += held.eq(0)
        with m.If(take_drain):
            m.d.sync += [dc.eq(p), dheld.eq(1)]
        with m.Elif(d_go & d_last):
            m.d.sync += dheld.eq(0)
        free = ~dbusy | (~c.remote & ~c.hbm)
        m.d.comb += go.eq(held & free & (self.local.valid | ~c.local) & (self.remote.valid | ~c.remote)
                          & (pending < depth))
        direct = dheld & ~dc.local                  # an all-gather's drain: link beats to memory as they are
        from_drain = (dheld & dc.local) | (dpending != 0)
        m.submodules.gear = gear = Gear(cfg)
        m.d.comb += d_go.eq(dheld & self.remote.valid
                            & Mux(dc.local, self.drain_local.valid & (dpending < depth), gear.ready))
        m.d.comb += [self.local.ready.eq(go & c.local & beat_end),
                     self.drain_local.ready.eq(d_go & dc.local & d_end),
                     self.remote.ready.eq(Mux(dheld, d_go, go & c.remote))]
        with m.If((go & c.remote & (self.remote.payload.last != msg_last))
                  | (d_go & (self.remote.payload.last != d_last))):
            m.d.sync += self.framing_error.eq(1)
        # ---- lanes: the main command's sums, or the drain's while it runs ---------------------
        def pick(payload, k):
            return Array(payload[i * L:(i + 1) * L] for i in range(W))[k] if W > 1 else payload
        lw, dlw, rw = pick(self.local.payload, word), pick(self.drain_local.payload, d_word), self.remote.payload.data
        y_all = Mux(dheld, dlw, lw)
        sums = []
        for k in range(cfg.lanes):
            x, y = rw[32 * k:32 * k + 32], y_all[32 * k:32 * k + 32]
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
                m.d.comb += [add.x.as_value().eq(x), add.y.as_value().eq(y), add.i_valid.eq(go | d_go)]
                sums.append(add.result.as_value())
        # the pass-through word and the beats' flags travel beside the adders
        s0, p0, ds0 = Signal(side), Signal(L), Signal(dside)
        m.d.comb += [s0.valid.eq(go), s0.both.eq(c.local & c.remote), s0.last.eq(msg_last), s0.tx.eq(c.tx),
                     s0.hbm.eq(c.hbm), s0.beat_end.eq(beat_end), s0.tail.eq(row_last & c.row_end),
                     p0.eq(Mux(c.remote, rw, lw)),
                     ds0.valid.eq(d_go & dc.local), ds0.beat_end.eq(d_end), ds0.tail.eq(d_row_last & dc.row_end)]
        for i in range(D):
            s1, p1 = Signal(side, name=f"side{i}"), Signal(L, name=f"pass{i}", reset_less=True)
            ds1 = Signal(dside, name=f"dside{i}")
            m.d.sync += [s1.eq(s0), p1.eq(p0), ds1.eq(ds0)]
            s0, p0, ds0 = s1, p1, ds1
        m.d.comb += [fifo.w_en.eq(s0.valid), fifo.w_data.eq(Cat(Mux(s0.both, Cat(*sums), p0), s0.as_value())),
                     dfifo.w_en.eq(ds0.valid), dfifo.w_data.eq(Cat(*sums, ds0.beat_end, ds0.tail))]
        m.d.sync += [pending.eq(pending + go - (fifo.r_en & fifo.r_rdy)),
                     dpending.eq(dpending + (d_go & dc.local) - (dfifo.r_en & dfifo.r_rdy))]
        # ---- out: fork to the link and the memory side ---------------------------------------
        o_data, o = fifo.r_data[:L], data.View(side, fifo.r_data[L:])
        d_data, d_flags = dfifo.r_data[:L], dfifo.r_data[L:]
        sent = Signal(2)                   # tx, gear: taken already
        m.d.comb += [gear.row_bytes.eq(self.row_bytes),
                     gear.word.eq(Mux(direct, rw, Mux(from_drain, d_data, o_data))),
                     gear.beat_end.eq(Mux(direct, d_end, Mux(from_drain, d_flags[0], o.beat_end))),
                     gear.tail.eq(Mux(direct, d_row_last & dc.row_end, Mux(from_drain, d_flags[1], o.tail))),
                     gear.valid.eq(Mux(direct, self.remote.valid,
                                       Mux(from_drain, dfifo.r_rdy, fifo.r_rdy & o.hbm & ~sent[1]))),
                     dfifo.r_en.eq(from_drain & dfifo.r_rdy & gear.ready),
                     self.tx.payload.data.eq(o_data), self.tx.payload.last.eq(o.last),
                     self.tx.valid.eq(fifo.r_rdy & o.tx & ~sent[0])]
        # (while a drain runs no entry of the main FIFO is for memory: it started with that FIFO
        # empty, and commands that write memory wait until the drain is written)
        took = Cat(self.tx.valid & self.tx.ready, ~dbusy & gear.valid & gear.ready)
        done = (sent | took | ~Cat(o.tx, o.hbm)) == 0b11
        m.d.comb += fifo.r_en.eq(fifo.r_rdy & done)
        m.d.sync += sent.eq(Mux(fifo.r_en, 0, sent | took))
        wiring.connect(m, gear.out, wiring.flipped(self.hbm))
        m.d.comb += self.idle.eq(~held & ~dbusy & (pending == 0) & gear.empty)
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
