"""GEMM engine: D = C0 + A @ B for any M x K x N, through AXI4 memory and the systolic MXU.

Data flow (R x C array, operand bytes ``ob`` = 2 for bf16, 1 for fp8 / int8; a *beat* is one
``burst_bytes`` = 32 B AXI data beat = one HBM burst):

* **Blocking.** M is cut into *m-blocks* of up to ``Mb`` rows, N into *n-blocks* of C columns,
  K into *k-blocks* of R rows. ``Mb = min(m_block, floor(a_words / WPR), M)`` (``WPR`` = buffer
  words per A row) and the n-blocks of an m-block are taken ``G`` at a time (a *group*): the fewest
  with ``G * min(Mfirst, Mb) >= D + 16`` (D = the array latency; Mfirst = the first block's rows),
  at most NB and ``floor(acc_entries / Mb)``; a block of ``mb`` rows takes the fewest n-blocks
  with ``g * mb >= D + 16``, at most G (longer blocks: smaller groups, shorter last write-back).
  For each m-block, for each group, for each k-block kb, for each n-block g of the group, one
  weight tile ``B[kb*R:(kb+1)*R, nb*C:(nb+1)*C]`` streams the m-block's ``Mb`` activation rows
  through the MXU. The partial sums of (kb, g) re-enter the top of the array for
  (kb + 1, g) ``G * Mb`` beats later, so the K reduction is one sequential fp32 chain per element,
  identical to ``verif.golden.matmul`` whatever R, C and the blocking (the numerics contract: one
  partial-sum chain per element, in k order).
* **A loader** (AXI port ``mem_a``): reads the m-block's rows of A (``RB = ceil(K*ob/32)`` beats each)
  into one of two A banks (ping-pong: the next m-block loads while the current one computes). Each bank
  holds ``a_buffer_bytes``; one A row must fit, so ``K <= a_buffer_bytes / ob`` (register MAX_K).
  Every m-block is read in passes of ``2 * ceil(R*ob/32)`` beats of every row, and the feeder
  starts a k-block as soon as the passes holding it are stored: the GEMM's first tile waits for
  ``Mb * 2`` beats instead of ``Mb * RB``, and a block whose load is still running when the block
  before it ends (the memory is busy with weights too) starts as soon as its first k-blocks are in
  (a block read whole, row by row, would wait for all of its load while the weights share the
  memory). When an A beat feeds
  fewer than 4 tile beats (``NB * CPW / NSUB < 4``, e.g. N <= C on an 8 x 8 bf16 array) the
  m-blocks *ramp*: the second block has the first block's cap, each later one ``max(1, cap / 2)``
  rows more (1.5 times, up to ``Mb``), so every block's A load fits under the compute of the block
  before it. The last block is cut to ``TAIL = max(2R + C - 1, D + 16)`` rows when both parts keep
  at least 2R + C - 1 rows: only the last block's write-back runs after the array is done.
* **Weight loader** (``mem_w``): reads each tile's R rows of B (row R-1 first, the order the MXU's
  weight chain wants), C columns each, into a FIFO feeding the MXU's double-buffered weights.
* **C0 loader** (``mem_c`` read side) and **accumulator**: two banks of ``acc_entries`` entries of C
  x 32 bits (ping-pong by group). A group starts in a free bank, loaded with C0 (FLAGS.LOAD_C) or
  read as +0 by the first k-block. With C0 the first k-block may start once the C0 rows it feeds are
  stored (rows arrive in order); a C0 beat waits while the collector writes the same bank (one
  write port). This hides the C0 load under the compute when the memory is the bound; on an ideal
  memory with K <= R (every row written twice in k-block 0) the shared write port can cost cycles
  instead.
* **Feeder**: reads A (bank, row, k-block) and the accumulator entry and offers the activation beat
  ``{a, c, swap}`` to the MXU; a beat of k-block kb >= 1 waits until the output it continues has been
  written back into the accumulator (in steady state it never waits: ``G * Mb`` beats > the array
  latency D = R*L + C - 1).
* **Collector**: takes every MXU output beat into the accumulator (the MXU is built with
  ``backpressure=False``: its output stream is always ready, so the array never stalls and has no
  clock enable).
* **Write-back** (``mem_c`` write side): when a group's last k-block is done, reads its entries row by
  row, converts to bf16 (RNE, once) when FLAGS.OUT_BF16, and writes each result row segment as AXI
  INCR bursts with WSTRB covering exactly the columns < N (no byte outside D is written).

**Padding never changes a result.** Elements of A with k >= K are fed as -0 and rows of B with
k >= K as +0 (floats; 0 for int8), so a padded product is (-0)*(+0) = -0 and ``x + (-0) = x`` for
every x including -0 (IEEE 754-2019 §6.3); padding never meets real data (no inf*0). Padded
columns (n >= N) compute garbage that is never written. Memory beyond the last real element of a row
is never read (the last beat of a row is read whole, which stays inside the row's stride).

**Descriptor checks** (at START, before any memory access; on failure STATUS.ERROR is set, DONE rises
with it and the engine is idle again): see :data:`ERRORS`.

**Components** (one file each, wired together by :class:`GEMMEngine`): the register block
(:mod:`~hw.engine.csr`), the descriptor unit (:mod:`~hw.engine.descriptor`), the m-block sequencer
(:mod:`~hw.engine.sequencer`) with one block cursor per loop (:mod:`~hw.engine.cursor`), the A, weight
and C0 loaders, the feeder, the accumulator with the collector, the write-back's address and data
sides and the performance counters. Inside the engine the AXI4 channels are ``lib.stream`` channels
(:func:`~hw.engine.interface.ar_signature`, :func:`~hw.engine.interface.r_signature`,
:func:`~hw.engine.write_data.w_layout`); the ports keep the flat AMBA names.

AXI4 masters: INCR bursts only, full 32 B beats, at most 256 beats and never across a 4 KiB boundary
(ARM IHI 0022, A3.4.1); reads are consumed in order (the memory returns each port's data in AR
order); a SLVERR response sets STATUS.BUS_ERROR (the run still completes).
"""

from __future__ import annotations

from dataclasses import replace

from amaranth.hdl import Module
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from ..hbm.axi import axi4_signature
from ..mxu import MXU
from .a_loader import ALoader
from .accumulator import Accumulator
from .c0_loader import C0Loader
from .config import BEAT_BYTES, DIM_BITS, ENGINE_ADDRESS_MAPPING, ERRORS, FMT_CODES, EngineConfig
from .csr import PERF_COUNTERS, CSRBlock, axi4lite_signature
from .descriptor import DescriptorUnit
from .feeder import Feeder, a_bank_connections
from .interface import lg
from .perf import PerfCounters
from .sequencer import BlockSequencer
from .weight_loader import WeightLoader
from .write_address import WriteAddress
from .write_data import WriteData

__all__ = ["EngineConfig", "GEMMEngine", "ERRORS", "DIM_BITS", "FMT_CODES", "ENGINE_ADDRESS_MAPPING"]


class GEMMEngine(wiring.Component):
    """The GEMM engine (see the module docstring for the data flow).

    Ports:
        csr: AXI4-Lite slave (:func:`~hw.engine.csr.axi4lite_signature`), registers in
            :data:`hw.engine.csr.REGISTERS`.
        irq: Out(1), high while STATUS.DONE and CTRL.IRQ_EN.
        mem_a, mem_w, mem_c: AXI4 masters (:func:`~hw.hbm.axi.axi4_signature` flipped; address
            ``hbm.address_bits``, data 256 bits, ID 1 bit, always 0): A reads; B reads; C0 reads and
            result writes. ``mem_a`` and ``mem_w`` never write.

    Args:
        config: :class:`EngineConfig`.
        pe_blackbox, row_name: passed to :class:`~hw.mxu.MXU` (Verilog generation).
    """

    def __init__(self, config: EngineConfig | None = None, *, pe_blackbox: bool = False,
                 row_name: str = "mxu_row"):
        self.config = config or EngineConfig()
        self.pe_blackbox, self.row_name = pe_blackbox, row_name
        aw = self.config.hbm.address_bits
        super().__init__({
            "csr": Out(axi4lite_signature()),
            "irq": Out(1),
            "mem_a": In(axi4_signature(aw, BEAT_BYTES * 8, 1)),
            "mem_w": In(axi4_signature(aw, BEAT_BYTES * 8, 1)),
            "mem_c": In(axi4_signature(aw, BEAT_BYTES * 8, 1)),
        })

    def elaborate(self, platform):
        cfg = self.config
        m = Module()
        m.submodules.csr = csr = CSRBlock(cfg.config_word, cfg.max_k)
        wiring.connect(m, wiring.flipped(self.csr), csr.axil)
        # the collector takes every output beat, so the array is built without back-pressure (no
        # clock enable fanning out to every PE register)
        m.submodules.mxu = mxu = MXU(replace(cfg.mxu, backpressure=False), pe_blackbox=self.pe_blackbox,
                                     row_name=self.row_name)
        m.submodules.descriptor = du = DescriptorUnit(cfg)
        m.submodules.a_loader = al = ALoader(cfg)
        m.submodules.weight_loader = wl = WeightLoader(cfg)
        m.submodules.c0_loader = cl = C0Loader(cfg)
        m.submodules.accumulator = acc = Accumulator(cfg)
        m.submodules.feeder = fd = Feeder(cfg)
        m.submodules.write_address = wa = WriteAddress(cfg)
        m.submodules.write_data = wd = WriteData(cfg)
        m.submodules.perf = perf = PerfCounters()
        seq_ports = [al.seq_read, al.seq_store, wl.seq_read, wl.seq_rows, cl.seq_read, cl.seq_store, fd.seq,
                     acc.seq, wa.seq, wd.seq]
        m.submodules.sequencer = seq = BlockSequencer(cfg, len(seq_ports))
        for j, port in enumerate(seq_ports):
            wiring.connect(m, port, getattr(seq, f"port{j}"))

        # ---- registers, descriptor, performance counters
        m.d.comb += [getattr(du, f"reg_{name}").eq(getattr(csr, f"reg_{name}")) for name in CSRBlock.RW]
        m.d.comb += [
            du.start.eq(csr.start), du.done_clear.eq(csr.done_clear), du.all_done.eq(
                du.run & ~du.go & wa.idle & wd.idle),
            csr.status.eq(du.status), csr.cycles.eq(du.cycles), self.irq.eq(du.status[1] & csr.irq_en),
            seq.desc.eq(du.desc), seq.prep.eq(du.prep), seq.g_final.eq(du.g_final),
            perf.started.eq(du.started), perf.counting.eq(du.counting), perf.why.eq(fd.why),
            perf.act_valid.eq(mxu.act.valid), perf.act_ready.eq(mxu.act.ready),
        ]
        m.d.comb += [getattr(csr, f"perf_{name}").eq(getattr(perf, name.lower())) for name in PERF_COUNTERS]
        for loop in (al, wl, cl, acc, fd, wa, wd):
            m.d.comb += [loop.desc.eq(du.desc), loop.go.eq(du.go), loop.prep.eq(du.prep)]
            if hasattr(loop, "run"):
                m.d.comb += loop.run.eq(du.run)

        # ---- data paths between the components
        m.d.comb += a_bank_connections(al, fd)
        m.d.comb += [
            # accumulator <-> C0 loader, feeder, write-back
            cl.acc_state.eq(acc.state), cl.bank_busy.eq(acc.bank_busy),
            acc.c0_start.eq(cl.start), acc.c0_start_bank.eq(cl.start_bank),
            acc.c0_done.eq(cl.group_done), acc.c0_done_bank.eq(cl.done_bank),
            acc.c0_valid.eq(cl.wr_valid), acc.c0_bank.eq(cl.wr_bank), acc.c0_addr.eq(cl.wr_addr),
            acc.c0_data.eq(cl.wr_data), acc.c0_lanes.eq(cl.wr_lanes),
            fd.acc_state.eq(acc.state), fd.wcount.eq(acc.wcount), fd.acc_wr.eq(acc.bank_busy),
            fd.c0_bank.eq(cl.store_bank), fd.c0_row_next.eq(cl.store_row_next), fd.c0_start.eq(cl.start),
            acc.fd_addr.eq(fd.acc_rd_addr), acc.fd_en.eq(fd.acc_rd_en), fd.acc_rd_data.eq(acc.fd_data),
            wd.acc_state_next.eq(acc.state_next), wd.rows_done_next.eq(acc.rows_done_next),
            acc.wb_addr.eq(wd.rd_addr), acc.wb_en.eq(wd.rd_en), wd.rd_data.eq(acc.wb_data),
            acc.wb_free.eq(wd.free), acc.wb_free_bank.eq(wd.free_bank),
            # the MXU
            mxu.wgt.valid.eq(wl.wgt.valid), mxu.wgt.payload.as_value().eq(wl.wgt.payload),
            wl.wgt.ready.eq(mxu.wgt.ready),
            mxu.act.valid.eq(fd.act.valid), mxu.act.payload.as_value().eq(fd.act.payload),
            fd.act.ready.eq(mxu.act.ready),
            acc.out.valid.eq(mxu.out.valid), acc.out.payload.eq(mxu.out.payload.as_value()),
            mxu.out.ready.eq(acc.out.ready),
        ]
        wiring.connect(m, wa.wlen, wd.wlen)

        # ---- AXI4 masters: the channel streams on the flat AMBA ports
        aw_bits = cfg.hbm.address_bits
        bus_error = 0
        for port in (self.mem_a, self.mem_w, self.mem_c):
            m.d.comb += [port.arid.eq(0), port.awid.eq(0), port.arsize.eq(lg(BEAT_BYTES)),
                         port.awsize.eq(lg(BEAT_BYTES)), port.arburst.eq(1), port.awburst.eq(1), port.bready.eq(1)]
            bus_error = bus_error | (port.rvalid & port.rready & port.rresp[1]) | (port.bvalid & port.bready
                                                                                   & port.bresp[1])
        m.d.comb += du.bus_error.eq(bus_error)
        for port, ar, r in ((self.mem_a, al.ar, al.r), (self.mem_w, wl.ar, wl.r), (self.mem_c, cl.ar, cl.r)):
            m.d.comb += [
                port.araddr.eq(ar.payload.addr[:aw_bits]), port.arlen.eq(ar.payload.len), port.arvalid.eq(ar.valid),
                ar.ready.eq(port.arready),
                r.valid.eq(port.rvalid), r.payload.data.eq(port.rdata), r.payload.resp.eq(port.rresp),
                r.payload.last.eq(port.rlast), port.rready.eq(r.ready),
            ]
        for port in (self.mem_a, self.mem_w):
            m.d.comb += [port.awvalid.eq(0), port.wvalid.eq(0)]
        c = self.mem_c
        m.d.comb += [
            c.awaddr.eq(wa.aw.payload.addr[:aw_bits]), c.awlen.eq(wa.aw.payload.len), c.awvalid.eq(wa.aw.valid),
            wa.aw.ready.eq(c.awready), wa.b.eq(c.bvalid),
            c.wvalid.eq(wd.w.valid), c.wdata.eq(wd.w.payload.data), c.wstrb.eq(wd.w.payload.strb),
            c.wlast.eq(wd.w.payload.last), wd.w.ready.eq(c.wready),
        ]
        return m
