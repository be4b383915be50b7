"""AXI4 front end and multi-pseudo-channel top of the HBM2-style controller.

:class:`HBMController` joins ``axi_ports`` AXI4 slave ports to one
:class:`~hw.hbm.controller.PseudoChannelController` per pseudo-channel.

AXI4 support (AMBA AXI and ACE Protocol Specification, ARM IHI 0022, sections A3 and A4):

* Data width = one HBM burst (``burst_bytes * 8`` bits, 256 for HBM2): one AXI beat is one RD/WR.
* INCR bursts of 1..256 beats with ``AxSIZE = log2(burst_bytes)`` (full-width beats) and a
  ``burst_bytes``-aligned start address are served. Anything else -- FIXED or WRAP bursts, narrow
  beats (smaller AxSIZE), an unaligned start address, a burst running past the end of memory (which
  a legal master cannot issue: the capacity is a power of two and bursts may not wrap it) -- is
  answered with **SLVERR** and touches no memory: a write burst's W beats are taken and dropped and
  one B with SLVERR follows; a read burst returns ARLEN + 1 beats of zeros with SLVERR, the last with
  RLAST. ``WSTRB`` is honoured byte by byte (it becomes the controller's write mask).
* Ordering: each port serves one write burst at a time (AW, all W beats, B; the next AW is taken in
  the cycle of the last W beat, so one-beat bursts run at one per cycle; B responses wait in a
  two-slot skid buffer, so up to two may be pending) and issues read bursts in
  AR order; read data returns through a reorder buffer of ``rob_depth`` beats in AR order, so the
  per-ID ordering rule holds (a stronger order than required across IDs). Writes are posted: B is
  sent when the last beat has entered the pseudo-channel's request register, from where requests
  enter the controller's queue in order, so every later request to the same address sees it (the
  controller's hazard matrix).
* Timing: a request granted by the round-robin arbiter of its pseudo-channel waits one cycle in a
  register slice (:class:`~hw.stream_register.StreamRegister`) before it enters the queue, so the
  arbiter and the queue's readiness logic are separate paths (one cycle more latency, full rate).
  A port's reorder-buffer-full flag and the pseudo-channel of its next read and write beat are
  registers too (same values in every cycle as computed from the pointers and addresses), so the
  arbiter starts from flip-flops.
* Lock, cache, prot, QoS, region and user signals are not implemented (not ports).

Port naming: the AXI signals are flat members with the AMBA names (``awaddr``, ``wdata``, ...), so
the Verilog ports are ``axi0__awaddr`` etc.: cocotbext-axi attaches with prefix ``"axi0_"``.
"""

from __future__ import annotations

from amaranth.hdl import Cat, Const, Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.data import StructLayout
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from ..config import check_int, check_pow2
from ..instance import ModuleInstance
from ..skid_buffer import SkidBuffer
from ..stream_register import StreamRegister
from .config import HBMConfig
from .controller import PseudoChannelController, dram_signature
from .interface import check_config, request_layout

__all__ = ["HBMController", "axi4_signature", "AXI_OKAY", "AXI_SLVERR", "AXI_INCR"]

AXI_OKAY, AXI_SLVERR = 0b00, 0b10
AXI_INCR = 0b01


def or_tree(terms):
    """The OR of ``terms`` as a balanced tree of two-input ORs."""
    while len(terms) > 1:
        terms = [terms[i] | terms[i + 1] if i + 1 < len(terms) else terms[i] for i in range(0, len(terms), 2)]
    return terms[0]


def axi4_signature(addr_bits: int, data_bits: int, id_bits: int) -> wiring.Signature:
    """AXI4 slave-side signature (members flipped for the slave: ``awvalid`` is an input).

    Widths in bits: ``addr_bits`` for AxADDR, ``data_bits`` for xDATA (WSTRB ``data_bits / 8``),
    ``id_bits`` for the IDs; AxLEN 8, AxSIZE 3, AxBURST 2, xRESP 2.
    """
    return wiring.Signature({
        "awid": In(id_bits), "awaddr": In(addr_bits), "awlen": In(8), "awsize": In(3), "awburst": In(2),
        "awvalid": In(1), "awready": Out(1),
        "wdata": In(data_bits), "wstrb": In(data_bits // 8), "wlast": In(1), "wvalid": In(1), "wready": Out(1),
        "bid": Out(id_bits), "bresp": Out(2), "bvalid": Out(1), "bready": In(1),
        "arid": In(id_bits), "araddr": In(addr_bits), "arlen": In(8), "arsize": In(3), "arburst": In(2),
        "arvalid": In(1), "arready": Out(1),
        "rid": Out(id_bits), "rdata": Out(data_bits), "rresp": Out(2), "rlast": Out(1), "rvalid": Out(1),
        "rready": In(1),
    })


class HBMController(wiring.Component):
    """AXI4 ports in front of one controller per pseudo-channel.

    Ports: ``axi0`` .. ``axi{P-1}`` (:func:`axi4_signature` with ``address_bits``, ``burst_bytes * 8``
    and ``id_bits``), ``pc0`` .. ``pc{N-1}`` (:func:`~hw.hbm.controller.dram_signature`, one per
    pseudo-channel), ``refresh_owed{k}`` (REFs owed per pseudo-channel, 4 bits), ``queue_empty{k}`` (no
    accepted request of pseudo-channel k waits for its command; a write's B follows its entry into the
    register slice or queue, so all B received and every ``queue_empty`` high means every write is on
    the pins).

    Args:
        config: :class:`HBMConfig`; ``tag_bits`` must hold ``log2(axi_ports) + log2(rob_depth)``.
        axi_ports: AXI4 slave ports, 1..8.
        id_bits: AXI ID width, 1..16 bits.
        rob_depth: read reorder-buffer beats per port, a power of two from 2 to 256.
        ctrl_name: instantiate each pseudo-channel controller as the Verilog module of this name
            (:class:`~hw.instance.ModuleInstance`; Verilog generation, see
            :func:`hw.generate.verilog_with_mxu`) instead of flattening it into this module.

    Raises:
        ValueError: a parameter out of range, naming it and the allowed values.
    """

    def __init__(self, config: HBMConfig, axi_ports: int = 1, id_bits: int = 4, rob_depth: int = 16, *,
                 ctrl_name: str | None = None):
        check_config(config)
        check_int("axi_ports", axi_ports, 1, 8)
        check_int("id_bits", id_bits, 1, 16)
        check_pow2("rob_depth", rob_depth, 2, 256)
        self.port_bits = (axi_ports - 1).bit_length()
        self.slot_bits = (rob_depth - 1).bit_length()
        need = self.port_bits + self.slot_bits
        if config.tag_bits < need:
            raise ValueError(f"tag_bits must be >= log2(axi_ports) + log2(rob_depth) = {need}; "
                             f"got {config.tag_bits}")
        self.config, self.axi_ports, self.id_bits, self.rob_depth = config, axi_ports, id_bits, rob_depth
        self.ctrl_name = ctrl_name
        members = {}
        for p in range(axi_ports):
            members[f"axi{p}"] = Out(axi4_signature(config.address_bits, config.burst_bytes * 8, id_bits))
        for k in range(config.pseudo_channels):
            members[f"pc{k}"] = Out(dram_signature(config))
            members[f"refresh_owed{k}"] = Out(4)
            members[f"queue_empty{k}"] = Out(1)
        super().__init__(members)

    def elaborate(self, platform):
        cfg = self.config
        m = Module()
        nch, nports = cfg.pseudo_channels, self.axi_ports
        bb, off = cfg.burst_bytes, cfg.offset_bits
        aw = cfg.address_bits
        w = bb * 8
        ch_shift, ch_bits = cfg.field_shifts["channel"], cfg.field_bits["channel"]
        total_bursts = cfg.capacity_bytes // bb

        # A request reaches its pseudo-channel's queue through a register slice: the arbiter below
        # and the queue's readiness logic behind it were one combinational path (ROB pointers ->
        # arbitration -> payload mux -> row-hit compare -> readiness flags), the controller's
        # critical path in the board top.
        ctrls, slices = [], []
        for k in range(nch):
            c = PseudoChannelController(cfg)
            m.submodules[f"pc{k}_ctrl"] = c if self.ctrl_name is None else ModuleInstance(c, self.ctrl_name)
            m.submodules[f"pc{k}_req_slice"] = s = StreamRegister(request_layout(cfg))
            wiring.connect(m, s.o, c.req)
            wiring.connect(m, c.dram, wiring.flipped(getattr(self, f"pc{k}")))
            m.d.comb += [getattr(self, f"refresh_owed{k}").eq(c.refresh_owed),
                         getattr(self, f"queue_empty{k}").eq(c.queue_empty & ~s.o.valid)]
            ctrls.append(c)
            slices.append(s)

        def channel_of(addr):
            if not ch_bits:
                return Const(0, 1)
            ch = addr[ch_shift:ch_shift + ch_bits]
            for lo, width in cfg.channel_slices():   # channel_xor (HBMConfig)
                ch = ch ^ addr[lo:lo + width]
            return ch

        def bad_burst(addr, length, size, burst):
            """SLVERR conditions of an AW/AR (see the module docstring)."""
            last = (addr >> off) + length  # burst index of the last beat
            return ((size != off) | (burst != AXI_INCR) | (addr[:off] != 0 if off else Const(0))
                    | (last >= total_bursts))

        # requesters: (valid, channel, write, addr, tag, wdata, wmask, granted)
        requesters = []
        rsp_sinks = []  # per port: (we, slot, data)

        for p in range(nports):
            axi = getattr(self, f"axi{p}")
            # ---------------- write side: one burst at a time
            w_busy = Signal(name=f"p{p}_w_busy")    # AW taken, W beats pending
            w_id = Signal(self.id_bits, name=f"p{p}_w_id")
            w_addr = Signal(aw, name=f"p{p}_w_addr")
            w_err = Signal(name=f"p{p}_w_err")
            w_grant = Signal(name=f"p{p}_w_grant")
            wreq_valid = Signal(name=f"p{p}_wreq_valid")
            w_last_now = Signal(name=f"p{p}_w_last_now")
            # B leaves through a skid buffer (two slots): a burst's last W beat is taken only while
            # it can take one more B. Its ready is a flip-flop, so the master's BREADY does not run
            # into the arbiter; a master that takes each B at once never fills the second slot.
            m.submodules[f"p{p}_b_buf"] = b_buf = SkidBuffer(StructLayout({"id": self.id_bits, "err": 1}))
            b_free = Signal(name=f"p{p}_b_free")
            w_ok = Signal(name=f"p{p}_w_ok")
            m.d.comb += [
                b_free.eq(b_buf.i.ready),
                w_ok.eq(~axi.wlast | b_free),
                wreq_valid.eq(w_busy & ~w_err & axi.wvalid & w_ok),
                axi.wready.eq(w_busy & ((w_err & w_ok) | w_grant)),
                w_last_now.eq(axi.wvalid & axi.wready & axi.wlast),
            ]
            # the next AW may come in the cycle the current burst's last W beat is taken (one-beat
            # bursts then take one cycle each, not two), if the B slot is free by then
            m.d.comb += axi.awready.eq((~w_busy | w_last_now) & b_free)
            # the pseudo-channel of w_addr, registered with it (the address bits' XOR is then not on
            # the arbiter's input path)
            w_ch = Signal(max(1, ch_bits), name=f"p{p}_w_ch")
            with m.If(axi.wvalid & axi.wready):
                m.d.sync += [w_addr.eq(w_addr + bb), w_ch.eq(channel_of(w_addr + bb))]
                with m.If(axi.wlast):
                    m.d.sync += w_busy.eq(0)
            with m.If(axi.awvalid & axi.awready):   # after the W statements: a new burst wins
                m.d.sync += [w_busy.eq(1), w_id.eq(axi.awid), w_addr.eq(axi.awaddr), w_ch.eq(channel_of(axi.awaddr)),
                             w_err.eq(bad_burst(axi.awaddr, axi.awlen, axi.awsize, axi.awburst))]
            m.d.comb += [
                b_buf.i.valid.eq(w_last_now), b_buf.i.payload.id.eq(w_id), b_buf.i.payload.err.eq(w_err),
                axi.bvalid.eq(b_buf.o.valid), axi.bid.eq(b_buf.o.payload.id),
                axi.bresp.eq(Mux(b_buf.o.payload.err, AXI_SLVERR, AXI_OKAY)), b_buf.o.ready.eq(axi.bready),
            ]
            requesters.append((wreq_valid, w_ch, 1, w_addr, 0, axi.wdata, axi.wstrb, w_grant))

            # ---------------- read side: AR -> beats into the reorder buffer
            D = self.rob_depth
            sb = self.slot_bits
            r_busy = Signal(name=f"p{p}_r_busy")
            r_id = Signal(self.id_bits, name=f"p{p}_r_id")
            r_addr = Signal(aw, name=f"p{p}_r_addr")
            r_left = Signal(8, name=f"p{p}_r_left")  # beats after the current one
            r_err = Signal(name=f"p{p}_r_err")
            r_grant = Signal(name=f"p{p}_r_grant")
            head = Signal(sb + 1, name=f"p{p}_rob_head")
            tail = Signal(sb + 1, name=f"p{p}_rob_tail")
            # registered (set from the occupancy before the allocation that fills the buffer, cleared
            # by a pop), so the pointers' subtract-and-compare is not on the arbiter's input path
            full = Signal(name=f"p{p}_rob_full")
            near_full = Signal(name=f"p{p}_rob_near_full")
            m.d.comb += near_full.eq((tail - head)[:sb + 1] == D - 1)
            meta_id = [Signal(self.id_bits, name=f"p{p}_rob{s}_id") for s in range(D)]
            meta_last = Signal(D, name=f"p{p}_rob_last")
            meta_err = Signal(D, name=f"p{p}_rob_err")
            done = Signal(D, name=f"p{p}_rob_done")

            rreq_valid = Signal(name=f"p{p}_rreq_valid")
            m.d.comb += rreq_valid.eq(r_busy & ~r_err & ~full)
            alloc = Signal(name=f"p{p}_rob_alloc")
            m.d.comb += alloc.eq(r_busy & ~full & (r_err | r_grant))
            tail_slot = tail[:sb]
            r_ch = Signal(max(1, ch_bits), name=f"p{p}_r_ch")  # channel_of(r_addr), as w_ch
            with m.If(alloc):
                m.d.sync += [tail.eq(tail + 1), r_addr.eq(r_addr + bb), r_ch.eq(channel_of(r_addr + bb)),
                             r_left.eq(r_left - 1)]
                for s in range(D):
                    with m.If(tail_slot == s):
                        m.d.sync += [meta_id[s].eq(r_id), meta_last[s].eq(r_left == 0),
                                     meta_err[s].eq(r_err)]
                with m.If(r_left == 0):
                    m.d.sync += r_busy.eq(0)
            # the next AR may come in the cycle the last beat of the current one is allocated
            # (its capture comes after the statements above, so it wins)
            m.d.comb += axi.arready.eq(~r_busy | (alloc & (r_left == 0)))
            with m.If(axi.arvalid & axi.arready):
                m.d.sync += [r_busy.eq(1), r_id.eq(axi.arid), r_addr.eq(axi.araddr), r_ch.eq(channel_of(axi.araddr)),
                             r_left.eq(axi.arlen),
                             r_err.eq(bad_burst(axi.araddr, axi.arlen, axi.arsize, axi.arburst))]
            tag = Cat(tail_slot, Const(p, max(1, self.port_bits)) if self.port_bits else Const(0, 0))
            requesters.append((rreq_valid, r_ch, 0, r_addr, tag, 0, 0, r_grant))

            # reorder buffer data and the R channel
            m.submodules[f"p{p}_rob_data"] = mem = Memory(shape=w, depth=D, init=[])
            wport = mem.write_port()
            rport = mem.read_port(transparent_for=(wport,))
            head_slot = head[:sb]
            occupied = head != tail
            pop = Signal(name=f"p{p}_rob_pop")
            m.d.comb += [
                axi.rvalid.eq(occupied & (done >> head_slot)[0]),
                axi.rdata.eq(Mux((meta_err >> head_slot)[0], 0, rport.data)),
                axi.rresp.eq(Mux((meta_err >> head_slot)[0], AXI_SLVERR, AXI_OKAY)),
                axi.rlast.eq((meta_last >> head_slot)[0]),
                pop.eq(axi.rvalid & axi.rready),
                rport.addr.eq(Mux(pop, head_slot + 1, head_slot)),
            ]
            rid = Const(0, self.id_bits)
            for s in range(D):
                rid = Mux(head_slot == s, meta_id[s], rid)
            m.d.comb += axi.rid.eq(rid)
            with m.If(pop):
                m.d.sync += head.eq(head + 1)
            with m.If(alloc & ~pop):
                m.d.sync += full.eq(near_full)
            with m.Elif(pop):  # a pop alone frees a slot; with an allocation (never when full) it stays below D
                m.d.sync += full.eq(0)
            rsp_we = Signal(name=f"p{p}_rsp_we")
            rsp_slot = Signal(max(1, sb), name=f"p{p}_rsp_slot")
            m.d.comb += [wport.addr.eq(rsp_slot), wport.en.eq(rsp_we)]
            rsp_sinks.append((rsp_we, rsp_slot, wport.data))
            for s in range(D):
                set_s = (rsp_we & (rsp_slot == s)) | (alloc & r_err & (tail_slot == s))
                clr_s = (pop & (head_slot == s)) | (alloc & ~r_err & (tail_slot == s))
                with m.If(set_s):
                    m.d.sync += done[s].eq(1)
                with m.Elif(clr_s):
                    m.d.sync += done[s].eq(0)

        # ---------------- request arbitration: round robin per pseudo-channel
        # The requester granted last goes to the back: after a grant to j the priority order starts
        # at j + 1. (A pointer advancing every cycle instead is not fair: a queue taking one request
        # every burst-length cycles sees the pointer at the same few values, and a one-beat stream
        # beside a long burst got 1 grant in 3 instead of 1 in 2.)
        nreq = len(requesters)
        grants = [[] for _ in range(nreq)]
        for k, req in enumerate(s.i for s in slices):
            rr = Signal(range(max(2, nreq)), name=f"pc{k}_arb_next")
            cand = [Signal(name=f"pc{k}_cand{j}") for j in range(nreq)]
            for j, (valid, ch, *_rest) in enumerate(requesters):
                m.d.comb += cand[j].eq(valid & (ch == k))
            chosen = [Signal(name=f"pc{k}_pick{j}") for j in range(nreq)]
            for j in range(nreq):
                terms = []
                for r in range(nreq):  # rotation r: priority order r, r+1, ...
                    order = [(r + i) % nreq for i in range(nreq)]
                    ahead = order[:order.index(j)]
                    blocked = Cat(*(cand[a] for a in ahead)).any() if ahead else Const(0)
                    terms.append((rr == r) & cand[j] & ~blocked)
                m.d.comb += chosen[j].eq(Cat(*terms).any())
            m.d.comb += req.valid.eq(Cat(*cand).any())
            # the payload as an AND-OR of the one-hot choice: a balanced tree, not a chain of
            # multiplexers as deep as the requesters are many (the board's critical path ran
            # through one)
            fields = {"write": [], "addr": [], "tag": [], "wdata": [], "wmask": []}
            for j, (_valid, _ch, write, addr, tag, wdata, wmask, _granted) in enumerate(requesters):
                for name, val in (("write", write), ("addr", addr), ("tag", tag), ("wdata", wdata),
                                  ("wmask", wmask)):
                    fields[name].append(Mux(chosen[j], val, 0))
                grants[j].append(chosen[j] & req.ready)
            for name, terms in fields.items():
                m.d.comb += getattr(req.payload, name).eq(or_tree(terms))
            with m.If(req.valid & req.ready):
                for j in range(nreq):
                    with m.If(chosen[j]):
                        m.d.sync += rr.eq((j + 1) % nreq)
        for j, (*_rest, granted) in enumerate(requesters):
            m.d.comb += granted.eq(Cat(*grants[j]).any())

        # ---------------- read responses: one per cycle, rotating over pseudo-channels
        rsp_rr = Signal(range(max(2, nch)), name="rsp_rotate")
        m.d.sync += rsp_rr.eq(Mux(rsp_rr == nch - 1, 0, rsp_rr + 1))
        pick = [Signal(name=f"rsp_pick{k}") for k in range(nch)]
        for k in range(nch):
            terms = []
            for r in range(nch):
                order = [(r + i) % nch for i in range(nch)]
                ahead = order[:order.index(k)]
                blocked = Cat(*(ctrls[a].rsp.valid for a in ahead)).any() if ahead else Const(0)
                terms.append((rsp_rr == r) & ctrls[k].rsp.valid & ~blocked)
            m.d.comb += [pick[k].eq(Cat(*terms).any()), ctrls[k].rsp.ready.eq(pick[k])]
        sel_tag, sel_data = Const(0, cfg.tag_bits), Const(0, w)
        for k in range(nch):
            sel_tag = Mux(pick[k], ctrls[k].rsp.payload.tag, sel_tag)
            sel_data = Mux(pick[k], ctrls[k].rsp.payload.rdata, sel_data)
        any_pick = Cat(*pick).any()
        sb = self.slot_bits
        for p, (we, slot, data) in enumerate(rsp_sinks):
            port_match = (sel_tag[sb:sb + self.port_bits] == p) if self.port_bits else Const(1)
            m.d.comb += [we.eq(any_pick & port_match), slot.eq(sel_tag[:sb]), data.eq(sel_data)]
        return m
