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

AXI4 masters: INCR bursts only, full 32 B beats, at most 256 beats and never across a 4 KiB boundary
(ARM IHI 0022, A3.4.1); reads are consumed in order (the memory returns each port's data in AR
order); a SLVERR response sets STATUS.BUS_ERROR (the run still completes).
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields, replace

from amaranth.hdl import Array, Cat, Const, Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.fifo import SyncFIFOBuffered
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from ..config import check_int, check_pow2
from ..hbm.axi import axi4_signature
from ..hbm.config import HBMConfig
from ..mxu import MXU, MXUConfig
from .csr import PERF_COUNTERS, CSRBlock, axi4lite_signature
from .dma import BurstSplitter

__all__ = ["EngineConfig", "GEMMEngine", "ERRORS", "DIM_BITS", "FMT_CODES", "ENGINE_ADDRESS_MAPPING"]

DIM_BITS = 20  #: M, K, N are 1 .. 2**20 - 1
#: Default address mapping of the engine's memory: the pseudo-channel is the lowest field above the
#: burst offset, so consecutive 32 B bursts alternate pseudo-channels and one sequential stream (an A
#: row, a result row) uses every pseudo-channel at once; the columns above it keep each channel's
#: accesses inside its open DRAM row. The engine's memories also hash the channel
#: (``HBMConfig.channel_xor``): matrix rows at a power-of-two stride (a weight tile's rows of B, the
#: result rows of one n-block) then alternate pseudo-channels instead of all landing in one.
ENGINE_ADDRESS_MAPPING = ("row", "bank", "bank_group", "column", "channel")
BEAT_BYTES = 32
#: A chunks (NSUB beats each) per row per pass when an m-block is read (2: one beat in each of two
#: pseudo-channels for chunks of at most one beat)
PASS_CHUNKS = 2

#: STATUS.ERROR codes (checked in this order; the first failing check is reported).
ERRORS = {
    0: ("NONE", "no error"),
    1: ("ZERO_DIM", "M, K or N is 0"),
    2: ("DIM_TOO_LARGE", "M, K or N >= 2^20, or K > MAX_K (one row of A must fit an A bank)"),
    3: ("FORMAT", "FLAGS.OUT_BF16 with the int8 format (int8 results are int32)"),
    4: ("ALIGN", "a base address or row stride in use is not a multiple of 32 bytes"),
    5: ("STRIDE", "a row stride is smaller than the row it must hold"),
    6: ("RANGE", "a matrix in use runs past the end of memory"),
}
FMT_CODES = {"bf16": 0, "fp8_e4m3fn": 1, "fp8_e5m2": 2, "int8": 3}


def _lg(x: int) -> int:
    return x.bit_length() - 1


@dataclass(frozen=True)
class EngineConfig:
    """Configuration of the GEMM engine.

    Attributes:
        mxu: the array (:class:`~hw.mxu.MXUConfig`); rows and cols must be powers of two (every
            buffer row is then a whole number of 32 B beats or a power-of-two part of one).
        hbm: the memory (:class:`~hw.hbm.config.HBMConfig`); its ``address_bits`` set the AXI address
            width, ``burst_bytes`` must be 32 (default: HBM2 geometry with
            :data:`ENGINE_ADDRESS_MAPPING` and ``channel_xor``).
        m_block: most activation rows per m-block, 1..65536 (default 128).
        m_first: most rows of the first m-block, 1..65536, at most m_block in effect (default None:
            max(2R + C - 1, D + 2), the shortest block whose partial sums are back in the
            accumulator before its next k-block needs them): computing starts as soon as the first
            block's first pass of A has arrived, so a short first block hides the A load sooner.
        a_buffer_bytes: bytes per A bank (two banks), a power of two >= 32 * ceil(R*ob / 32); the
            largest K is ``a_buffer_bytes / ob`` (default 32 KiB: K <= 16384 for bf16).
        acc_entries: accumulator entries per bank (two banks), each C x 32 bits; a power of two
            >= m_block (default 512).
        rob_depth: read reorder-buffer beats per AXI port in the HBM controller (default 64).

    Raises:
        TypeError: a parameter of the wrong type (``mxu`` not an MXUConfig, a float for an integer).
        ValueError: a parameter outside its allowed values (the message names both).
    """

    mxu: MXUConfig = field(default_factory=MXUConfig)
    hbm: HBMConfig = field(default_factory=lambda: HBMConfig(address_mapping=ENGINE_ADDRESS_MAPPING,
                                                             channel_xor=True))
    m_block: int = 128
    m_first: int | None = None
    a_buffer_bytes: int = 32768
    acc_entries: int = 512
    rob_depth: int = 64

    def __post_init__(self):
        if not isinstance(self.mxu, MXUConfig):
            raise TypeError(f"mxu must be an MXUConfig; got {type(self.mxu).__name__}")
        if not isinstance(self.hbm, HBMConfig):
            raise TypeError(f"hbm must be an HBMConfig; got {type(self.hbm).__name__}")
        check_pow2("rows", self.mxu.rows, 1, 256)
        check_pow2("cols", self.mxu.cols, 1, 256)
        if self.hbm.burst_bytes != BEAT_BYTES:
            raise ValueError(f"hbm burst_bytes must be {BEAT_BYTES}; got {self.hbm.burst_bytes}")
        check_int("m_block", self.m_block, 1, 65536)
        if self.m_first is not None:
            check_int("m_first", self.m_first, 1, 65536)
        check_pow2("acc_entries", self.acc_entries, 1, 1 << 20)
        if self.acc_entries < self.m_block:
            raise ValueError(f"acc_entries must be >= m_block = {self.m_block}; got {self.acc_entries}")
        row_bytes = max(BEAT_BYTES, self.mxu.rows * self.operand_bytes)
        check_pow2("a_buffer_bytes", self.a_buffer_bytes, row_bytes, 1 << 26)
        check_pow2("rob_depth", self.rob_depth, 2, 256)

    @property
    def operand_bytes(self) -> int:
        return self.mxu.operand_bits // 8

    @property
    def first_block_rows(self) -> int:
        """Rows of the first m-block (before the A-bank limit): ``m_first``, by default
        ``max(2R + C - 1, D + 2)`` (D = the array latency; D + 2 is the feeder -> array ->
        accumulator loop, so a first block this long never waits for its own partial sums)."""
        if self.m_first is not None:
            return self.m_first
        return max(2 * self.mxu.rows + self.mxu.cols - 1, self.mxu.latency_cycles + 2)

    @property
    def max_k(self) -> int:
        """Largest K: one row of A fills an A bank."""
        return min((1 << DIM_BITS) - 1, self.a_buffer_bytes // self.operand_bytes)

    @property
    def config_word(self) -> int:
        c = self.mxu
        return (c.rows & 0xFFF) | (c.cols & 0xFFF) << 12 | FMT_CODES[c.fmt] << 24 | \
            (c.subnormals == "ieee") << 26 | c.stages << 28

    @classmethod
    def from_options(cls, **options) -> EngineConfig:
        """An engine from flat options, each keeping its class default when not given (the one
        place defaults live): the array's ``rows``, ``cols``, ``fmt``, ``subnormals``, ``stages``
        (:class:`~hw.mxu.MXUConfig`), the memory's ``pseudo_channels`` and ``queue_depth``
        (:class:`~hw.hbm.config.HBMConfig`, on top of the engine's default memory: its address
        mapping and channel hash) and this class's own fields (``m_block``, ``a_buffer_bytes``, ...).
        ``None`` counts as not given.

        Raises:
            TypeError: an unknown option, or a value of the wrong type.
            ValueError: a value outside its allowed range (the message names it).
        """
        options = {k: v for k, v in options.items() if v is not None}
        mxu_keys = {f.name for f in fields(MXUConfig)} - {"backpressure"}
        hbm_keys = {"pseudo_channels", "queue_depth"}
        own = {f.name for f in fields(cls)} - {"mxu", "hbm"}
        unknown = sorted(set(options) - mxu_keys - hbm_keys - own)
        if unknown:
            raise TypeError(f"unknown engine option(s) {', '.join(unknown)}; allowed: "
                            f"{', '.join(sorted(mxu_keys | hbm_keys | own))}")
        default = cls()
        mxu = replace(default.mxu, **{k: options[k] for k in mxu_keys & set(options)})
        hbm = replace(default.hbm, **{k: options[k] for k in hbm_keys & set(options)})
        return cls(mxu=mxu, hbm=hbm, **{k: options[k] for k in own & set(options)})

    def as_dict(self) -> dict:
        return {"mxu": self.mxu.as_dict(), "hbm": self.hbm.as_dict(), "m_block": self.m_block, "m_first": self.m_first,
                "a_buffer_bytes": self.a_buffer_bytes, "acc_entries": self.acc_entries,
                "rob_depth": self.rob_depth}

    @classmethod
    def from_dict(cls, d: dict) -> EngineConfig:
        """Inverse of :meth:`as_dict`."""
        d = dict(d)
        d["mxu"] = MXUConfig(**d["mxu"])
        d["hbm"] = HBMConfig.from_dict(d["hbm"])
        return cls(**d)


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

    # ------------------------------------------------------------------------------------------
    def elaborate(self, platform):  # noqa: C901 (one process per block, written out)
        cfg = self.config
        mc = cfg.mxu
        R, C = mc.rows, mc.cols
        lgR, lgC = _lg(R), _lg(C)
        w = mc.operand_bits
        ob = w // 8
        BB = BEAT_BYTES
        WB = BB * 8
        E = BB // ob                       # operands per beat
        NSUB = max(1, R * ob // BB)        # beats per A chunk (R operands)
        CPW = max(1, BB // (R * ob))       # A chunks per beat
        lgNSUB, lgCPW = _lg(NSUB), _lg(CPW)
        WS = max(1, C * ob // BB)          # beats per weight row
        WPART = max(1, BB // (C * ob))     # weight rows per beat
        CS = max(1, C * 4 // BB)           # beats per fp32 accumulator entry
        CPART = max(1, BB // (C * 4))      # fp32 entries per beat
        ABUF_DEPTH = cfg.a_buffer_bytes // (BB * NSUB)
        ACCD = cfg.acc_entries
        capacity = cfg.hbm.capacity_bytes
        AW = cfg.hbm.address_bits
        is_int8 = mc.fmt == "int8"
        a_pad = 0 if is_int8 else (1 << (w - 1))   # -0
        D = DIM_BITS
        A32 = 34                           # internal byte-address width (checked < capacity)
        DEP_BEATS = mc.latency_cycles + 16  # K-chain distance that never stalls the feeder

        m = Module()
        m.submodules.csr = csr = CSRBlock(cfg.config_word, cfg.max_k)
        wiring.connect(m, wiring.flipped(self.csr), csr.axil)
        # the collector takes every output beat, so the array is built without back-pressure (no
        # clock enable fanning out to every PE register)
        m.submodules.mxu = mxu = MXU(replace(mc, backpressure=False), pe_blackbox=self.pe_blackbox,
                                     row_name=self.row_name)
        m.d.comb += mxu.out.ready.eq(1)

        # ================= descriptor latch and checks =================================
        busy = Signal()
        done = Signal()
        err = Signal(4)
        bus_err = Signal()
        cycles = Signal(32)
        run = Signal()         # processes active
        go = Signal()          # one-cycle strobe: processes reset their loops
        prep = Signal()        # one-cycle strobe with S_G: the m-block sequencer starts
        all_done = Signal()
        m.d.comb += [
            csr.status.eq(Cat(busy, done, Const(0, 2), err, bus_err)),
            csr.cycles.eq(cycles),
            self.irq.eq(done & csr.irq_en),
        ]
        Mr, Kr, Nr = Signal(D), Signal(D), Signal(D)
        load_c, out_bf16 = Signal(), Signal()
        base = {n: Signal(A32, name=f"{n}_base") for n in "abcd"}
        stride = {n: Signal(32, name=f"{n}_stride") for n in "abcd"}
        KB, NB = Signal(D), Signal(D)      # k-blocks, n-blocks
        RB = Signal(D)                     # beats per A row
        WPR = Signal(D + 1)                # A words per row (per sub-memory)
        Mbmax = Signal(range(cfg.m_block + 1))
        RAMP = Signal()                    # grow the m-blocks after the first (m-block sequencer)
        G = Signal(range(ACCD + 1))
        ldb_R = Signal(A32 + 8)            # R * B_STRIDE
        ldb_R1 = Signal(A32 + 8)           # (R - 1) * B_STRIDE
        ob_out = Mux(out_bf16, 2, 4)

        def min_(a, b):
            return Mux(a < b, a, b)

        state = Signal(range(16))
        S_IDLE, S_CHK1, S_CHK2, S_RANGE, S_MB, S_G, S_GO, S_RUN = range(8)
        rng_i = Signal(2)
        rng_ph = Signal()                  # S_RANGE phase: 0 = register product and offset, 1 = compare
        rng_prod = Signal(A32 + D + 2)     # (rows - 1) * stride of matrix rng_i
        rng_off = Signal(A32 + D + 2)      # base + row bytes of matrix rng_i
        loop_n = Signal(range(max(cfg.m_block, ACCD) + 2))
        loop_p = Signal(D + 2)
        loop_s = Signal(D + 2)
        Mfirst = Const(min(cfg.first_block_rows, cfg.m_block), range(cfg.m_block + 1))
        QB = ABUF_DEPTH.bit_length()           # quotient bits of ABUF_DEPTH / WPR
        div_q = Signal(QB)
        div_r = Signal(QB + 1)
        div_b = Signal(range(QB))

        with m.If(busy & ~done):
            m.d.sync += cycles.eq(cycles + 1)
        with m.If(csr.done_clear):
            m.d.sync += done.eq(0)

        regs = {n: getattr(csr, f"reg_{n}") for n in CSRBlock.RW}
        m_too = Signal()
        m_zero = Signal()
        with m.Switch(state):
            with m.Case(S_IDLE):
                with m.If(csr.start):
                    m.d.sync += [
                        busy.eq(1), done.eq(0), err.eq(0), bus_err.eq(0), cycles.eq(1),
                        Mr.eq(regs["M"]), Kr.eq(regs["K"]), Nr.eq(regs["N"]),
                        m_zero.eq((regs["M"] == 0) | (regs["K"] == 0) | (regs["N"] == 0)),
                        m_too.eq((regs["M"] >> D).any() | (regs["K"] >> D).any() | (regs["N"] >> D).any()
                                 | (regs["K"] > cfg.max_k)),
                        load_c.eq(regs["FLAGS"][0]), out_bf16.eq(regs["FLAGS"][1]),
                        base["a"].eq(regs["A_BASE"]), base["b"].eq(regs["B_BASE"]),
                        base["c"].eq(regs["C_BASE"]), base["d"].eq(regs["D_BASE"]),
                        stride["a"].eq(regs["A_STRIDE"]), stride["b"].eq(regs["B_STRIDE"]),
                        stride["c"].eq(regs["C_STRIDE"]), stride["d"].eq(regs["D_STRIDE"]),
                        state.eq(S_CHK1),
                    ]
            with m.Case(S_CHK1):
                zero = m_zero
                used = [("a", 1), ("b", 1), ("c", load_c), ("d", 1)]
                misaligned = Const(0)
                for n, u in used:
                    misaligned = misaligned | (u & ((base[n][:5] != 0) | (stride[n][:5] != 0)))
                short = ((stride["a"] < Kr * ob) | (stride["b"] < Nr * ob)
                         | (load_c & (stride["c"] < (Nr << 2))) | (stride["d"] < Nr * ob_out))
                code = Mux(zero, 1, Mux(m_too, 2, Mux(out_bf16 & is_int8, 3, Mux(misaligned, 4,
                                                                                    Mux(short, 5, 0)))))
                m.d.sync += [
                    KB.eq((Kr + R - 1) >> lgR), NB.eq((Nr + C - 1) >> lgC), RB.eq((Kr + E - 1) >> _lg(E)),
                    ldb_R.eq(stride["b"] << lgR), ldb_R1.eq((stride["b"] << lgR) - stride["b"]),
                    rng_i.eq(0), rng_ph.eq(0), state.eq(S_CHK2),
                ]
                with m.If(code != 0):
                    m.d.sync += [err.eq(code), state.eq(S_IDLE), busy.eq(0), done.eq(1)]
            with m.Case(S_CHK2):
                # WPR = ceil(KB / CPW) words per A row per sub-memory; RAMP when an A beat feeds
                # fewer than 4 tile beats (NB * CPW / NSUB < 4: the A load is as long as the compute)
                m.d.sync += [WPR.eq((KB + CPW - 1) >> lgCPW), RAMP.eq((NB << lgCPW) < (4 << lgNSUB)),
                             state.eq(S_RANGE)]
            with m.Case(S_RANGE):
                # end = base + (rows - 1) * stride + row_bytes <= capacity, one matrix per two cycles:
                # the product and the offset are registered first (phase 0), so the multiplier and
                # the compare are not one combinational path (the board top's clock)
                rows = [Mr, Kr, Mr, Mr]
                rowb = [Kr * ob, Nr * ob, Nr << 2, Nr * ob_out]
                names = "abcd"
                use = Signal()
                sel_rows = Const(0, D)
                sel_stride = Const(0, 32)
                sel_base = Const(0, A32)
                sel_rowb = Const(0, D + 3)
                for j in range(4):
                    hit = rng_i == j
                    sel_rows = Mux(hit, rows[j], sel_rows)
                    sel_stride = Mux(hit, stride[names[j]], sel_stride)
                    sel_base = Mux(hit, base[names[j]], sel_base)
                    sel_rowb = Mux(hit, rowb[j], sel_rowb)
                m.d.comb += use.eq((rng_i != 2) | load_c)
                with m.If(~rng_ph):
                    m.d.sync += [rng_prod.eq((sel_rows - 1) * sel_stride), rng_off.eq(sel_base + sel_rowb),
                                 rng_ph.eq(1)]
                with m.Else():
                    m.d.sync += rng_ph.eq(0)
                    with m.If(use & (rng_prod + rng_off > capacity)):
                        m.d.sync += [err.eq(6), state.eq(S_IDLE), busy.eq(0), done.eq(1)]
                    with m.Elif(rng_i == 3):
                        m.d.sync += [state.eq(S_MB), div_q.eq(0), div_r.eq(ABUF_DEPTH), div_b.eq(QB - 1)]
                    with m.Else():
                        m.d.sync += rng_i.eq(rng_i + 1)
            with m.Case(S_MB):
                # Mbmax = min(m_block, M, floor(ABUF_DEPTH / WPR)): restoring division, one quotient
                # bit per cycle
                trial = WPR << div_b
                with m.If(trial <= div_r):
                    m.d.sync += [div_r.eq(div_r - trial), div_q.eq(div_q | (1 << div_b))]
                with m.If(div_b == 0):
                    q_fin = Mux(trial <= div_r, div_q | 1, div_q)
                    m.d.sync += [Mbmax.eq(min_(min_(q_fin, Mr), cfg.m_block)), loop_n.eq(0), loop_p.eq(0),
                                 loop_s.eq(0),
                                 state.eq(S_G), prep.eq(1)]
                with m.Else():
                    m.d.sync += div_b.eq(div_b - 1)
            with m.Case(S_G):
                # G: the fewest n-blocks whose G * min(Mfirst, Mbmax) beats (the first block, the
                # shortest but for a tail block) cover the array latency plus a margin (so the K-chain
                # never waits), at most NB and floor(ACCD / Mbmax). Few n-blocks per group keep the
                # exposed write-back of the last group short.
                with m.If((loop_n < NB) & (loop_p + Mbmax <= ACCD) & (loop_s < DEP_BEATS)):
                    m.d.sync += [loop_n.eq(loop_n + 1), loop_p.eq(loop_p + Mbmax),
                                 loop_s.eq(loop_s + min_(Mfirst, Mbmax))]
                with m.Else():
                    m.d.sync += [G.eq(loop_n), state.eq(S_GO), go.eq(1)]
            with m.Case(S_GO):      # processes reset their loops in this cycle
                m.d.sync += [run.eq(1), state.eq(S_RUN)]
            with m.Case(S_RUN):
                with m.If(all_done):
                    m.d.sync += [run.eq(0), busy.eq(0), done.eq(1), state.eq(S_IDLE)]
        with m.If(go):
            m.d.sync += go.eq(0)
        with m.If(prep):
            m.d.sync += prep.eq(0)

        # ================= shared loop helpers ===========================================

        MINM = 2 * R + C - 1
        TAIL = max(MINM, DEP_BEATS)        # rows of a cut last m-block (one n-block per group)
        QF = PASS_CHUNKS * NSUB            # beats per row per pass of an m-block (both channels)

        # ---- m-block sequencer: the block rule, computed once and ahead ----------------------
        # Block sizes (verif.cycles.engine_blocking is the same rule): at most ``cap`` rows, no
        # block shorter than MINM = 2R + C - 1 rows when that can be avoided (shorter tiles cannot
        # run back to back). cap: Mfirst for the first block; then Mbmax, or with RAMP (little
        # compute per A beat) Mfirst again and 1.5x per block (+ max(1, cap / 2) rows), so each
        # block's A load fits under the previous block's compute (a 1.125x variant, not kept,
        # was not better on 8x8 256x256x8: 9,224 vs 9,207 cycles, within refresh-phase noise).
        # The last block is cut to TAIL rows when both parts stay >= MINM: its rows are written
        # back after its last k-block, so a short last block exposes less write-back.
        # Look-ahead (cap == Mbmax < 2 * MINM, e.g. 16x16 bf16 at K = 256: 64-row A banks,
        # MINM = 47): when the rows after a full block would be too many for one block and too
        # few for two of MINM, this block takes rem - 2 * MINM rows and two MINM-row blocks
        # follow (blocks 49, 64, 49, 47, 47 for M = 256 instead of 49, 64, 64, 40, 39, whose
        # short tiles cost 3,291 cycles).
        # The rule runs once per GEMM in this sequencer, two cycles per block (one computes the
        # size, one writes it), into a table of SEQ_DEPTH blocks that the ten loops read by their
        # own block index. (Each loop once evaluated the rule combinationally from its own
        # position: ten copies, and the rule plus the loop's use of the size was the board top's
        # critical path, wb_aw_m0 -> d_row, 123 logic levels.) The sequencer starts with S_G, so
        # block 0 is in the table when the loops start, and writes a block only when every loop
        # that moves has left the block it replaces. A loop that starts work (A, weight and C0
        # reads, feeder, write-back) waits while its block is not in the table (``ok``); the
        # loops that only take beats (A store, C0 store, collector) follow one of those, so their
        # block is always there. Only one-row m-blocks (K close to MAX_K) are shorter than two
        # cycles in a loop (the write-back addresses, the C0 loop without LOAD_C): there the loop
        # waits a cycle per block (36 test GEMMs in the Amaranth simulator before and after this
        # change: identical cycle counts without memory stalls; under random stalls 16x1 bf16
        # 3x80x1 in 1-row blocks took 539 cycles instead of 530, and the job after it 212 for 211
        # as the stall draws shifted; the other 34 identical).
        SEQ_DEPTH = 8
        SQB = _lg(SEQ_DEPTH) + 1           # index bits: differences 0..SEQ_DEPTH stay unambiguous
        t_mb = Array(Signal(range(cfg.m_block + 1), name=f"seq{j}_mb") for j in range(SEQ_DEPTH))
        t_need = Array(Signal(range(9), name=f"seq{j}_need") for j in range(SEQ_DEPTH))
        t_small = Array(Signal(name=f"seq{j}_small") for j in range(SEQ_DEPTH))
        t_last = Array(Signal(name=f"seq{j}_last") for j in range(SEQ_DEPTH))
        seq_cnt = Signal(SQB)              # blocks written
        seq_rem = Signal(D)                # rows after the blocks written
        seq_cap = Signal(range(cfg.m_block + 1))
        seq_first = Signal()               # the next block is block 0
        seq_mb = Signal(range(cfg.m_block + 1))
        seq_ph = Signal()                  # 0: compute the size, 1: write it
        seq_done = Signal()
        seq_free = Signal()                # no loop is SEQ_DEPTH blocks behind
        trackers = []                      # (block index, counted)

        rem_m, cap = seq_rem, seq_cap
        look = ((cap == Mbmax) & (rem_m > (cap << 1)) & (rem_m < cap + 2 * MINM)
                & (rem_m >= 3 * MINM))
        mb_p = Mux(rem_m <= cap, rem_m,
                   Mux(rem_m >= cap + MINM, Mux(look, rem_m - 2 * MINM, cap),
                       Mux(rem_m <= Mbmax, rem_m,
                           Mux(rem_m >= 2 * MINM, rem_m - MINM, min_((rem_m + 1) >> 1, cap)))))
        mb_v = Mux((mb_p == rem_m) & (rem_m >= TAIL + MINM), rem_m - TAIL, mb_p)
        # n-blocks of this block's groups: the fewest whose rows cover DEP_BEATS (a long block
        # needs fewer than G, so its last group's write-back is shorter), at most G
        # (mb * j < DEP_BEATS is mb < ceil(DEP_BEATS / j): constants, no multiplier per j)
        need = Const(1, range(9))
        for j in range(1, 8):
            need = need + (seq_mb < -(-DEP_BEATS // j))
        grown = seq_cap + Mux((seq_cap >> 1) == 0, 1, seq_cap >> 1)
        with m.If(prep):
            m.d.sync += [seq_cnt.eq(0), seq_rem.eq(Mr), seq_cap.eq(min_(Mfirst, Mbmax)), seq_first.eq(1),
                         seq_ph.eq(0), seq_done.eq(0)]
        with m.Elif(~seq_done & ~seq_ph):
            m.d.sync += [seq_mb.eq(mb_v), seq_ph.eq(1)]
        with m.Elif(~seq_done & seq_free):
            j = seq_cnt[:SQB - 1]
            m.d.sync += [
                t_mb[j].eq(seq_mb), t_need[j].eq(need), t_small[j].eq(seq_mb < -(-DEP_BEATS // 8)),
                t_last[j].eq(seq_mb == seq_rem),
                seq_cnt.eq(seq_cnt + 1), seq_rem.eq(seq_rem - seq_mb), seq_first.eq(0), seq_ph.eq(0),
                seq_done.eq(seq_mb == seq_rem),
                # with RAMP the second block keeps the first block's cap
                seq_cap.eq(Mux(RAMP, Mux(~seq_first, min_(grown, Mbmax), seq_cap), Mbmax)),
            ]

        def blocks(p, counted=Const(1, 1)):  # noqa: B008 (a Const is an immutable value)
            """One loop's position: its block index into the sequencer's table (``mb`` rows,
            ``last_mblock``) and its group (``nb0``, ``gc`` n-blocks, ``last_group``); ``ok``
            when its block is in the table, ``fin`` after its last group. ``counted``: the loop
            holds the sequencer back (the C0 consumer only with LOAD_C: without it, it never
            moves)."""
            idx = Signal(SQB, name=f"{p}_blk")
            s = {
                "idx": idx, "nb0": Signal(D, name=f"{p}_nb0"), "remn": Signal(D, name=f"{p}_remn"),
                "mb": Signal(range(cfg.m_block + 1), name=f"{p}_mb"),
                "gc": Signal(range(ACCD + 1), name=f"{p}_gc"),
                "fin": Signal(name=f"{p}_fin"), "ok": Signal(name=f"{p}_ok"),
                "last_mblock": Signal(name=f"{p}_lastm"), "last_group": Signal(name=f"{p}_lastg"),
            }
            j = idx[:SQB - 1]
            need_j = t_need[j]
            gb = Mux(t_small[j] | (G <= need_j), G, need_j)
            m.d.comb += [s["mb"].eq(t_mb[j]), s["last_mblock"].eq(t_last[j]), s["ok"].eq(idx != seq_cnt),
                         s["gc"].eq(Mux(s["remn"] < gb, s["remn"], gb)), s["last_group"].eq(s["remn"] <= gb)]
            trackers.append((idx, counted))
            with m.If(prep):
                m.d.sync += idx.eq(0)
            with m.If(go):
                m.d.sync += [s["nb0"].eq(0), s["remn"].eq(NB), s["fin"].eq(0)]
            return s

        def next_mblock(s):
            """Statements: go to the next m-block (its first group)."""
            return [s["idx"].eq(s["idx"] + 1), s["nb0"].eq(0), s["remn"].eq(NB)]

        def pass_beats(s, pb):
            """(beats per row of a pass, beats of this row in the pass at beat pb): passes of QF
            beats (the last pass of a row may be shorter)."""
            q = min_(QF, RB)
            return q, min_(q, RB - pb)

        def next_group(s):
            """Statements: advance to the next group (and m-block); ``fin`` after the last."""
            with m.If(s["last_group"]):
                m.d.sync += next_mblock(s)
            with m.Else():
                m.d.sync += [s["nb0"].eq(s["nb0"] + s["gc"]), s["remn"].eq(s["remn"] - s["gc"])]
            return [s["fin"].eq(s["last_group"] & s["last_mblock"])]

        # per-bank hand-shake flags
        a_busy = Signal(2)     # A bank claimed by the loader, released by the feeder
        a_full = Signal(2)     # A bank loaded
        ACC_FREE, ACC_LOADING, ACC_READY, ACC_DONE = range(4)
        acc_state = [Signal(2, name=f"acc{b}_state") for b in range(2)]
        wcount = [Signal(D + 12, name=f"acc{b}_wcount") for b in range(2)]
        o_bank = Signal()      # accumulator bank the collector writes

        # ================= memories ===================================================
        abuf = []
        for s_ in range(NSUB):
            mem = Memory(shape=WB, depth=2 * ABUF_DEPTH, init=[])
            m.submodules[f"abuf{s_}"] = mem
            abuf.append((mem.write_port(), mem.read_port()))
        acc = []
        for b in range(2):
            mem = Memory(shape=32 * C, depth=ACCD, init=[])
            m.submodules[f"acc{b}"] = mem
            acc.append((mem.write_port(granularity=32), mem.read_port(), mem.read_port()))

        def tie_write(port):
            m.d.comb += [port.awvalid.eq(0), port.wvalid.eq(0), port.bready.eq(1)]

        for port in (self.mem_a, self.mem_w, self.mem_c):
            m.d.comb += [port.arid.eq(0), port.awid.eq(0), port.arsize.eq(_lg(BB)), port.awsize.eq(_lg(BB)),
                         port.arburst.eq(1), port.awburst.eq(1)]
            with m.If(port.rvalid & port.rready & port.rresp[1]):
                m.d.sync += bus_err.eq(1)
            with m.If(port.bvalid & port.bready & port.bresp[1]):
                m.d.sync += bus_err.eq(1)
        tie_write(self.mem_a)
        tie_write(self.mem_w)

        def splitter(name, port, read=True):
            sp = BurstSplitter(A32, BB)
            m.submodules[name] = sp
            if read:
                m.d.comb += [port.araddr.eq(sp.ax.payload.addr[:AW]), port.arlen.eq(sp.ax.payload.len),
                             port.arvalid.eq(sp.ax.valid), sp.ax.ready.eq(port.arready)]
            return sp

        # ================= A loader =====================================================
        # Every m-block is read in *passes* of QF beats of every row (pass p: beats [p*QF,
        # (p+1)*QF) of rows 0..mb-1), so its first k-blocks can run after ~mb*QF beats instead of
        # the whole block (mb*RB beats). (Reading a block row by row gives long bursts in few open
        # DRAM rows, but with the weights sharing the memory it makes the block wait for its whole
        # load.)
        ai = blocks("ai")
        sp_a = splitter("split_a", self.mem_a)
        ai_i = Signal(range(cfg.m_block + 1))
        ai_bank = Signal()
        ai_addr = Signal(A32 + D)              # address of row i of the block, pass start
        ai_baddr = Signal(A32 + D)             # address of row 0 of the block
        ai_pb = Signal(D)                      # first beat of the current pass
        ai_q, ai_beats = pass_beats(ai, ai_pb)
        with m.If(go):
            m.d.sync += [ai_i.eq(0), ai_bank.eq(0), ai_addr.eq(base["a"]), ai_baddr.eq(base["a"]),
                         ai_pb.eq(0)]
        ai_can = run & ai["ok"] & ~ai["fin"] & ((ai_i != 0) | (ai_pb != 0) | ~a_busy.bit_select(ai_bank, 1))
        m.d.comb += [sp_a.cmd.valid.eq(ai_can), sp_a.cmd.payload.addr.eq(ai_addr + (ai_pb << _lg(BB))),
                     sp_a.cmd.payload.beats.eq(ai_beats)]
        a_claim = Signal()
        m.d.comb += a_claim.eq(sp_a.cmd.valid & sp_a.cmd.ready & (ai_i == 0) & (ai_pb == 0))
        with m.If(sp_a.cmd.valid & sp_a.cmd.ready):
            with m.If(ai_i + 1 != ai["mb"]):
                m.d.sync += [ai_i.eq(ai_i + 1), ai_addr.eq(ai_addr + stride["a"])]
            with m.Elif(ai_pb + ai_q < RB):
                m.d.sync += [ai_i.eq(0), ai_pb.eq(ai_pb + ai_q), ai_addr.eq(ai_baddr)]
            with m.Else():
                m.d.sync += [ai_i.eq(0), ai_pb.eq(0), ai_bank.eq(~ai_bank), ai_addr.eq(ai_addr + stride["a"]),
                             ai_baddr.eq(ai_addr + stride["a"]), *next_mblock(ai),
                             ai["fin"].eq(ai["last_mblock"])]

        # consumer: beats -> A bank (same pass order)
        ac = blocks("ac")
        ac_i = Signal(range(cfg.m_block + 1))
        ac_j = Signal(D)                       # beat within the pass
        ac_pb = Signal(D)
        ac_bank = Signal()
        ac_row = Signal(range(ABUF_DEPTH + 1))      # i * WPR
        a_fill = Signal()
        a_prog = Signal(D)                     # beats of every row of bank ac_bank already stored
        ac_q, ac_beats = pass_beats(ac, ac_pb)
        with m.If(go):
            m.d.sync += [ac_i.eq(0), ac_j.eq(0), ac_pb.eq(0), ac_bank.eq(0), ac_row.eq(0), a_prog.eq(0)]
        m.d.comb += self.mem_a.rready.eq(1)
        a_beat = self.mem_a.rvalid
        ac_bi = ac_pb + ac_j                   # beat index in the row
        word = ac_row + (ac_bi >> lgNSUB)
        for s_, (wp, _rp) in enumerate(abuf):
            sub_hit = (ac_bi[:lgNSUB] == s_) if NSUB > 1 else Const(1)
            m.d.comb += [wp.addr.eq(Cat(word[:_lg(ABUF_DEPTH)], ac_bank)), wp.data.eq(self.mem_a.rdata),
                         wp.en.eq(a_beat & sub_hit)]
        ac_row_end = ac_j + 1 == ac_beats
        ac_pass_end = ac_row_end & (ac_i + 1 == ac["mb"])
        m.d.comb += a_fill.eq(a_beat & ac_pass_end & (ac_pb + ac_q >= RB))
        with m.If(a_beat):
            with m.If(~ac_row_end):
                m.d.sync += ac_j.eq(ac_j + 1)
            with m.Elif(~ac_pass_end):
                m.d.sync += [ac_j.eq(0), ac_i.eq(ac_i + 1), ac_row.eq(ac_row + WPR)]
            with m.Elif(ac_pb + ac_q < RB):
                m.d.sync += [ac_j.eq(0), ac_i.eq(0), ac_row.eq(0), ac_pb.eq(ac_pb + ac_q),
                             a_prog.eq(ac_pb + ac_q)]
            with m.Else():
                m.d.sync += [ac_j.eq(0), ac_i.eq(0), ac_row.eq(0), ac_pb.eq(0), a_prog.eq(0),
                             ac_bank.eq(~ac_bank), *next_mblock(ac)]

        # ================= weight loader ================================================
        def wrow_geometry(nbC):
            """(byte offset of the row segment in its row, beats to read, real columns)."""
            rem = Nr - nbC
            cols_real = Signal(range(C + 1))
            m.d.comb += cols_real.eq(Mux(rem < C, rem, C))
            if WS > 1:
                off = nbC * ob
                beats = (cols_real * ob + BB - 1) >> _lg(BB)
            else:
                off = ((nbC * ob) >> _lg(BB)) << _lg(BB)
                beats = Const(1, 2)
            return off, beats, cols_real

        wi = blocks("wi")
        sp_w = splitter("split_w", self.mem_w)
        wi_kb = Signal(D)
        wi_k0 = Signal(D + 9)
        wi_g = Signal(D)
        wi_nbC = Signal(D + 9)
        wi_r = Signal(range(R))
        wi_kbase = Signal(A32 + D + 9)
        wi_row = Signal(A32 + D + 9)
        with m.If(go):
            m.d.sync += [wi_kb.eq(0), wi_k0.eq(0), wi_g.eq(0), wi_nbC.eq(0), wi_r.eq(R - 1),
                         wi_kbase.eq(base["b"]), wi_row.eq(base["b"] + ldb_R1)]
        wi_off, wi_beats, _ = wrow_geometry(wi_nbC)
        wi_real = (wi_k0 + wi_r) < Kr
        wi_active = run & wi["ok"] & ~wi["fin"]
        m.d.comb += [sp_w.cmd.valid.eq(wi_active & wi_real), sp_w.cmd.payload.addr.eq(wi_row + wi_off),
                     sp_w.cmd.payload.beats.eq(wi_beats)]
        wi_step = Signal()
        m.d.comb += wi_step.eq(wi_active & (~wi_real | sp_w.cmd.ready))

        def tile_loop_step(kb, k0, g, nbC, s, extra_tile=(), extra_kb=(), extra_group=()):
            """Statements advancing (kb, g) after a tile; returns nothing (emits under current If)."""
            last_g = g + 1 == s["gc"]
            last_kb = kb + 1 == KB
            with m.If(~last_g):
                m.d.sync += [g.eq(g + 1), nbC.eq(nbC + C), *extra_tile]
            with m.Elif(~last_kb):
                m.d.sync += [g.eq(0), kb.eq(kb + 1), k0.eq(k0 + R), nbC.eq(s["nb0"] << lgC), *extra_kb]
            with m.Else():
                m.d.sync += [g.eq(0), kb.eq(0), k0.eq(0), *next_group(s), *extra_group]
                m.d.sync += nbC.eq(Mux(s["last_group"], 0, (s["nb0"] + s["gc"]) << lgC))

        with m.If(wi_step):
            with m.If(wi_r != 0):
                m.d.sync += [wi_r.eq(wi_r - 1), wi_row.eq(wi_row - stride["b"])]
            with m.Else():
                m.d.sync += wi_r.eq(R - 1)
                tile_loop_step(wi_kb, wi_k0, wi_g, wi_nbC, wi,
                               extra_tile=[wi_row.eq(wi_kbase + ldb_R1)],
                               extra_kb=[wi_kbase.eq(wi_kbase + ldb_R), wi_row.eq(wi_kbase + ldb_R + ldb_R1)],
                               extra_group=[wi_kbase.eq(base["b"]), wi_row.eq(base["b"] + ldb_R1)])

        # assembler: beats -> weight rows -> FIFO -> MXU
        wa = blocks("wa")
        wa_kb = Signal(D)
        wa_k0 = Signal(D + 9)
        wa_g = Signal(D)
        wa_nbC = Signal(D + 9)
        wa_r = Signal(range(R))
        wa_q = Signal(range(WS + 1))
        wa_data = Signal(C * w)              # lanes of the beats before the row's last one
        with m.If(go):
            m.d.sync += [wa_kb.eq(0), wa_k0.eq(0), wa_g.eq(0), wa_nbC.eq(0), wa_r.eq(R - 1), wa_q.eq(0)]
        _, wa_beats, wa_cols = wrow_geometry(wa_nbC)
        wa_real = (wa_k0 + wa_r) < Kr
        wa_active = run & wa["ok"] & ~wa["fin"]
        # four tiles of weight rows: a refresh (tRFC + tRP, ~300 cycles) of the pseudo-channel holding
        # B must not starve the array
        m.submodules.wfifo = wfifo = SyncFIFOBuffered(width=C * w, depth=max(16, 4 * R))
        wa_last_beat = wa_q + 1 == wa_beats
        # a row goes into the FIFO in the cycle its last beat arrives (or at once for a padding row)
        m.d.comb += self.mem_w.rready.eq(wa_active & wa_real & (~wa_last_beat | wfifo.w_rdy))
        wbeat = self.mem_w.rvalid & self.mem_w.rready
        if WS > 1:
            row_now = Signal(C * w)
            lanes = []
            for q in range(WS):
                lanes.append(Mux(wa_q == q, self.mem_w.rdata, wa_data[q * WB:(q + 1) * WB]))
            m.d.comb += row_now.eq(Cat(*lanes))
            with m.If(wbeat):
                m.d.sync += wa_data.eq(row_now)
        else:
            part = (wa_nbC >> lgC)[:max(1, _lg(WPART))] if WPART > 1 else Const(0, 1)
            sel = Const(0, C * w)
            for p_ in range(WPART):
                sel = Mux(part == p_, self.mem_w.rdata[p_ * C * w:(p_ + 1) * C * w], sel)
            row_now = sel
        with m.If(wbeat):
            m.d.sync += wa_q.eq(Mux(wa_last_beat, 0, wa_q + 1))
        push = Signal()
        m.d.comb += push.eq(wa_active & wfifo.w_rdy & Mux(wa_real, self.mem_w.rvalid & wa_last_beat, 1))
        # mask columns >= N (and whole padding rows) to +0
        wa_cols_eff = Mux(wa_real, wa_cols, 0)
        masked = Cat(*(Mux(c < wa_cols_eff, row_now[c * w:(c + 1) * w], 0) for c in range(C)))
        m.d.comb += [wfifo.w_data.eq(masked), wfifo.w_en.eq(push)]
        with m.If(push):
            with m.If(wa_r != 0):
                m.d.sync += wa_r.eq(wa_r - 1)
            with m.Else():
                m.d.sync += wa_r.eq(R - 1)
                tile_loop_step(wa_kb, wa_k0, wa_g, wa_nbC, wa)
        m.d.comb += [mxu.wgt.valid.eq(wfifo.r_rdy), mxu.wgt.payload.as_value().eq(wfifo.r_data),
                     wfifo.r_en.eq(mxu.wgt.ready)]

        # ================= C0 loader ====================================================
        ci = blocks("ci")
        sp_c = splitter("split_c", self.mem_c)
        ci_i = Signal(range(cfg.m_block + 1))
        ci_g = Signal(D)
        ci_nbC = Signal(D + 9)
        ci_bank = Signal()
        ci_started = Signal()
        ci_row = Signal(A32 + D + 9)        # C row address of (m0 + i)
        ci_mrow = Signal(A32 + D + 9)       # C row address of m0
        with m.If(go):
            m.d.sync += [ci_i.eq(0), ci_g.eq(0), ci_nbC.eq(0), ci_bank.eq(0), ci_started.eq(0),
                         ci_row.eq(base["c"]), ci_mrow.eq(base["c"])]
        ci_state = Mux(ci_bank, acc_state[1], acc_state[0])
        ci_active = run & ci["ok"] & ~ci["fin"]
        # a group starts when its bank is free: LOADING (C0) or straight READY (+0 start)
        ci_begin = ci_active & ~ci_started & (ci_state == ACC_FREE)
        rem_c = Nr - ci_nbC
        ci_cols = Mux(rem_c < C, rem_c, C)
        if CS > 1:
            ci_off, ci_beats = ci_nbC << 2, (ci_cols * 4 + BB - 1) >> _lg(BB)
        else:
            ci_off, ci_beats = ((ci_nbC << 2) >> _lg(BB)) << _lg(BB), Const(1, 2)
        m.d.comb += [sp_c.cmd.valid.eq(ci_active & ci_started), sp_c.cmd.payload.addr.eq(ci_row + ci_off),
                     sp_c.cmd.payload.beats.eq(ci_beats)]

        def ci_advance_group():
            m.d.sync += [ci_started.eq(0), ci_bank.eq(~ci_bank), ci_i.eq(0), ci_g.eq(0), *next_group(ci)]
            m.d.sync += [
                ci_nbC.eq(Mux(ci["last_group"], 0, (ci["nb0"] + ci["gc"]) << lgC)),
                # after the block's last row ci_row = m0's row + (mb - 1) * stride, so the next block
                # starts one stride further (no stride x mb multiplier; without C0 the rows are not
                # walked and not used either)
                ci_mrow.eq(Mux(ci["last_group"], ci_row + stride["c"], ci_mrow)),
                ci_row.eq(Mux(ci["last_group"], ci_row + stride["c"], ci_mrow)),
            ]

        with m.If(ci_begin):
            with m.If(load_c):
                m.d.sync += ci_started.eq(1)
            with m.Else():
                ci_advance_group()
        with m.If(sp_c.cmd.valid & sp_c.cmd.ready):
            with m.If(ci_g + 1 != ci["gc"]):
                m.d.sync += [ci_g.eq(ci_g + 1), ci_nbC.eq(ci_nbC + C)]
            with m.Elif(ci_i + 1 != ci["mb"]):
                m.d.sync += [ci_g.eq(0), ci_i.eq(ci_i + 1), ci_nbC.eq(ci["nb0"] << lgC),
                             ci_row.eq(ci_row + stride["c"])]
            with m.Else():
                ci_advance_group()

        # consumer: beats -> accumulator lanes
        cc = blocks("cc", counted=load_c)
        cc_i = Signal(range(cfg.m_block + 1))
        cc_g = Signal(D)
        cc_nbC = Signal(D + 9)
        cc_q = Signal(range(CS + 1))
        cc_bank = Signal()
        cc_addr = Signal(range(ACCD + 1))
        cc_rowaddr = Signal(range(ACCD + 1))
        with m.If(go):
            m.d.sync += [cc_i.eq(0), cc_g.eq(0), cc_nbC.eq(0), cc_q.eq(0), cc_bank.eq(0), cc_addr.eq(0),
                         cc_rowaddr.eq(0)]
        rem_cc = Nr - cc_nbC
        cc_cols = Mux(rem_cc < C, rem_cc, C)
        cc_beats = (cc_cols * 4 + BB - 1) >> _lg(BB) if CS > 1 else Const(1, 2)
        # the C0 beats wait while the collector writes the same bank (one write port per bank: the
        # group may start computing before its C0 rows are all in, see the feeder)
        cbeat = Signal()
        m.d.comb += [self.mem_c.rready.eq(~(mxu.out.valid & (o_bank == cc_bank))),
                     cbeat.eq(self.mem_c.rvalid & self.mem_c.rready)]
        c_we = Signal(C)
        c_wdata = Signal(32 * C)
        if CS > 1:
            m.d.comb += [c_wdata.eq(self.mem_c.rdata.replicate(CS)),
                         c_we.eq(Cat(*((cc_q == q).replicate(8) for q in range(CS))))]
        else:
            part = (cc_nbC >> lgC)[:max(1, _lg(CPART))] if CPART > 1 else Const(0, 1)
            sel = Const(0, 32 * C)
            for p_ in range(CPART):
                sel = Mux(part == p_, self.mem_c.rdata[p_ * 32 * C:(p_ + 1) * 32 * C], sel)
            m.d.comb += [c_wdata.eq(sel), c_we.eq(Const((1 << C) - 1, C))]
        cc_last_entry = (cc_q + 1 == cc_beats)
        with m.If(cbeat):
            with m.If(~cc_last_entry):
                m.d.sync += cc_q.eq(cc_q + 1)
            with m.Else():
                m.d.sync += cc_q.eq(0)
                with m.If(cc_g + 1 != cc["gc"]):
                    m.d.sync += [cc_g.eq(cc_g + 1), cc_nbC.eq(cc_nbC + C), cc_addr.eq(cc_addr + cc["mb"])]
                with m.Elif(cc_i + 1 != cc["mb"]):
                    m.d.sync += [cc_g.eq(0), cc_i.eq(cc_i + 1), cc_nbC.eq(cc["nb0"] << lgC),
                                 cc_addr.eq(cc_rowaddr + 1), cc_rowaddr.eq(cc_rowaddr + 1)]
                with m.Else():
                    m.d.sync += [cc_g.eq(0), cc_i.eq(0), cc_addr.eq(0), cc_rowaddr.eq(0),
                                 cc_bank.eq(~cc_bank), *next_group(cc),
                                 cc_nbC.eq(Mux(cc["last_group"], 0, (cc["nb0"] + cc["gc"]) << lgC))]
        c0_group_done = cbeat & cc_last_entry & (cc_g + 1 == cc["gc"]) & (cc_i + 1 == cc["mb"])

        # ================= feeder =======================================================
        fd = blocks("fd")
        f_kb = Signal(D)
        f_k0 = Signal(D + 9)
        f_g = Signal(D)
        f_i = Signal(range(cfg.m_block + 1))
        f_arow = Signal(range(ABUF_DEPTH + 1))   # i * WPR
        f_caddr = Signal(range(ACCD + 1))         # g * Mb + i
        f_q1 = Signal(D + 12)                     # beats issued in this group after k-block 0
        f_abank = Signal()
        f_cbank = Signal()
        with m.If(go):
            m.d.sync += [f_kb.eq(0), f_k0.eq(0), f_g.eq(0), f_i.eq(0), f_arow.eq(0), f_caddr.eq(0),
                         f_q1.eq(0), f_abank.eq(0), f_cbank.eq(0)]
        f_state = Mux(f_cbank, acc_state[1], acc_state[0])
        f_w = Mux(f_cbank, wcount[1], wcount[0])
        f_ok = Signal()
        # A ready: the bank is full, or (first block, read in passes) every row's beats up to the
        # ones holding k-block f_kb have been stored
        f_need = ((f_kb >> lgCPW) << lgNSUB) + NSUB
        f_a_ok = a_full.bit_select(f_abank, 1) | ((ac_bank == f_abank) & (a_prog >= f_need))
        # accumulator ready: loaded, or (k-block 0 of a group loading its C0, rows in order) the
        # C0 rows up to f_i stored, so a group starts after its first C0 row, not all of them
        f_acc_ok = ((f_state == ACC_READY)
                    | ((f_kb == 0) & (f_state == ACC_LOADING) & (cc_bank == f_cbank) & (cc_i > f_i)))
        m.d.comb += f_ok.eq(run & fd["ok"] & ~fd["fin"] & f_a_ok & f_acc_ok & ((f_kb == 0) | (f_w > f_q1)))
        s1_valid = Signal()
        s1_swap = Signal()
        s1_zero_c = Signal()
        s1_cbank = Signal()
        s1_part = Signal(max(1, lgCPW))
        s1_lim = Signal(range(R + 1))           # elements of this chunk with k < K
        load = Signal()
        m.d.comb += load.eq(~s1_valid | mxu.act.ready)
        with m.If(load):
            m.d.sync += s1_valid.eq(f_ok)
        f_word = f_arow + (f_kb >> lgCPW)
        for _wp, rp in abuf:
            m.d.comb += [rp.addr.eq(Cat(f_word[:_lg(ABUF_DEPTH)], f_abank)), rp.en.eq(load)]
        for b in range(2):
            m.d.comb += [acc[b][1].addr.eq(f_caddr), acc[b][1].en.eq(load)]
        f_rem = Kr - f_k0
        f_group_end = (f_i + 1 == fd["mb"]) & (f_g + 1 == fd["gc"]) & (f_kb + 1 == KB)
        f_fire = load & f_ok
        with m.If(f_fire):
            m.d.sync += [s1_swap.eq(f_i == 0), s1_zero_c.eq((f_kb == 0) & ~load_c), s1_cbank.eq(f_cbank),
                         s1_lim.eq(Mux(f_rem < R, f_rem, R))]
            if CPW > 1:
                m.d.sync += s1_part.eq(f_kb[:lgCPW])
            with m.If(f_kb != 0):
                m.d.sync += f_q1.eq(f_q1 + 1)
            with m.If(f_i + 1 != fd["mb"]):
                m.d.sync += [f_i.eq(f_i + 1), f_arow.eq(f_arow + WPR), f_caddr.eq(f_caddr + 1)]
            with m.Else():
                m.d.sync += [f_i.eq(0), f_arow.eq(0)]
                with m.If(f_g + 1 != fd["gc"]):
                    m.d.sync += [f_g.eq(f_g + 1), f_caddr.eq(f_caddr + 1)]
                with m.Elif(f_kb + 1 != KB):
                    m.d.sync += [f_g.eq(0), f_kb.eq(f_kb + 1), f_k0.eq(f_k0 + R), f_caddr.eq(0)]
                with m.Else():
                    m.d.sync += [f_g.eq(0), f_kb.eq(0), f_k0.eq(0), f_caddr.eq(0), f_q1.eq(0),
                                 f_cbank.eq(~f_cbank), *next_group(fd)]
                    with m.If(fd["last_group"]):
                        m.d.sync += f_abank.eq(~f_abank)
        a_release = f_fire & f_group_end & fd["last_group"]
        # activation beat
        a_raw = Cat(*(rp.data for _wp, rp in abuf))
        if CPW > 1:
            sel = Const(0, R * w)
            for p_ in range(CPW):
                sel = Mux(s1_part == p_, a_raw[p_ * R * w:(p_ + 1) * R * w], sel)
            a_chunk = sel
        else:
            a_chunk = a_raw[:R * w]
        a_vec = Cat(*(Mux(r < s1_lim, a_chunk[r * w:(r + 1) * w], a_pad) for r in range(R)))
        c_vec = Mux(s1_zero_c, 0, Mux(s1_cbank, acc[1][1].data, acc[0][1].data))
        m.d.comb += [mxu.act.valid.eq(s1_valid), mxu.act.payload.as_value().eq(Cat(a_vec, c_vec, s1_swap))]

        # ================= performance counters =========================================
        # Each cycle of a run is one of: a beat taken (FEED), the beat offered but its tile's weights
        # not committed (WAIT_W), or no beat offered, for the reason the feeder had when stage 1 last
        # loaded (registered with it, so the reason lines up with the empty cycle): set-up (not
        # counted), A not stored, accumulator bank not free, K-chain dependency, or the feeder
        # finished (DRAIN).
        W_SETUP, W_A, W_ACC, W_DEP, W_DRAIN = range(5)
        why = Signal(3)
        s1_why = Signal(3)
        m.d.comb += why.eq(Mux(~run, W_SETUP, Mux(fd["fin"], W_DRAIN, Mux(~f_a_ok, W_A,
                                                                           Mux(~f_acc_ok, W_ACC, W_DEP)))))
        with m.If(load):
            m.d.sync += s1_why.eq(why)
        perf = {name: Signal(32, name=name.lower()) for name in PERF_COUNTERS}
        for name in PERF_COUNTERS:
            m.d.comb += getattr(csr, f"perf_{name}").eq(perf[name])
        with m.If((state == S_IDLE) & csr.start):
            m.d.sync += [v.eq(0) for v in perf.values()]
        with m.Elif(busy & ~done):
            with m.If(mxu.act.valid & mxu.act.ready):
                m.d.sync += perf["PERF_FEED"].eq(perf["PERF_FEED"] + 1)
            with m.Elif(mxu.act.valid):
                m.d.sync += perf["PERF_WAIT_W"].eq(perf["PERF_WAIT_W"] + 1)
            with m.Else():
                for code, name in ((W_A, "PERF_WAIT_A"), (W_ACC, "PERF_WAIT_ACC"), (W_DEP, "PERF_WAIT_DEP"),
                                   (W_DRAIN, "PERF_DRAIN")):
                    with m.If(s1_why == code):
                        m.d.sync += perf[name].eq(perf[name] + 1)

        # ================= collector ====================================================
        co = blocks("co")
        o_kb = Signal(D)
        o_g = Signal(D)
        o_i = Signal(range(cfg.m_block + 1))
        o_addr = Signal(range(ACCD + 1))
        with m.If(go):
            m.d.sync += [o_kb.eq(0), o_g.eq(0), o_i.eq(0), o_addr.eq(0), o_bank.eq(0)]
        obeat = mxu.out.valid
        o_group_end = (o_i + 1 == co["mb"]) & (o_g + 1 == co["gc"]) & (o_kb + 1 == KB)
        with m.If(obeat):
            with m.If(o_i + 1 != co["mb"]):
                m.d.sync += [o_i.eq(o_i + 1), o_addr.eq(o_addr + 1)]
            with m.Else():
                m.d.sync += o_i.eq(0)
                with m.If(o_g + 1 != co["gc"]):
                    m.d.sync += [o_g.eq(o_g + 1), o_addr.eq(o_addr + 1)]
                with m.Elif(o_kb + 1 != KB):
                    m.d.sync += [o_g.eq(0), o_kb.eq(o_kb + 1), o_addr.eq(0)]
                with m.Else():
                    m.d.sync += [o_g.eq(0), o_kb.eq(0), o_addr.eq(0), o_bank.eq(~o_bank), *next_group(co)]

        # accumulator write ports: the collector, or the C0 loader (never the same bank at once)
        for b in range(2):
            wp = acc[b][0]
            col_hit = obeat & (o_bank == b)
            c0_hit = cbeat & (cc_bank == b)
            m.d.comb += [
                wp.addr.eq(Mux(col_hit, o_addr, cc_addr)),
                wp.data.eq(Mux(col_hit, mxu.out.payload.as_value(), c_wdata)),
                wp.en.eq(Mux(col_hit, Const((1 << C) - 1, C), Mux(c0_hit, c_we, 0))),
            ]

        # ================= write-back ===================================================
        # geometry of a row segment for the group: bytes [s, e) of the row, pieces of PB bytes
        def wb_geom(s_blk):
            s_ = (s_blk["nb0"] << lgC) * ob_out
            colend = min_((s_blk["nb0"] + s_blk["gc"]) << lgC, Nr)
            e_ = colend * ob_out
            return s_, e_

        # --- AW side: one transfer per result row
        wa_blk = blocks("wb_aw")
        sp_d = BurstSplitter(A32, BB)
        m.submodules.split_d = sp_d
        wlen = SyncFIFOBuffered(width=8, depth=8)
        m.submodules.wlen = wlen
        d_i = Signal(range(cfg.m_block + 1))
        d_row = Signal(A32 + D + 9)
        d_mrow = Signal(A32 + D + 9)
        with m.If(go):
            m.d.sync += [d_i.eq(0), d_row.eq(base["d"]), d_mrow.eq(base["d"])]
        ds, de = wb_geom(wa_blk)
        d_first = ds >> _lg(BB)
        d_lastb = (de - 1) >> _lg(BB)
        # result addresses need no data: the AW side runs ahead (the port holds each burst until its
        # W beats come)
        m.d.comb += [sp_d.cmd.valid.eq(run & wa_blk["ok"] & ~wa_blk["fin"]),
                     sp_d.cmd.payload.addr.eq(d_row + (d_first << _lg(BB))),
                     sp_d.cmd.payload.beats.eq(d_lastb - d_first + 1)]
        with m.If(sp_d.cmd.valid & sp_d.cmd.ready):
            with m.If(d_i + 1 != wa_blk["mb"]):
                m.d.sync += [d_i.eq(d_i + 1), d_row.eq(d_row + stride["d"])]
            with m.Else():
                m.d.sync += [d_i.eq(0), *next_group(wa_blk)]
                nxt = d_row + stride["d"]        # = m0's row + mb * stride (no multiplier)
                m.d.sync += [d_mrow.eq(Mux(wa_blk["last_group"], nxt, d_mrow)),
                             d_row.eq(Mux(wa_blk["last_group"], nxt, d_mrow))]
        aw_ok = wlen.w_rdy
        m.d.comb += [
            self.mem_c.awaddr.eq(sp_d.ax.payload.addr[:AW]), self.mem_c.awlen.eq(sp_d.ax.payload.len),
            self.mem_c.awvalid.eq(sp_d.ax.valid & aw_ok), sp_d.ax.ready.eq(self.mem_c.awready & aw_ok),
            wlen.w_data.eq(sp_d.ax.payload.len), wlen.w_en.eq(self.mem_c.awvalid & self.mem_c.awready),
        ]
        aw_count = Signal(32)
        b_count = Signal(32)
        with m.If(go):
            m.d.sync += [aw_count.eq(0), b_count.eq(0)]
        with m.Else():
            with m.If(self.mem_c.awvalid & self.mem_c.awready):
                m.d.sync += aw_count.eq(aw_count + 1)
            with m.If(self.mem_c.bvalid):
                m.d.sync += b_count.eq(b_count + 1)
        m.d.comb += self.mem_c.bready.eq(1)

        # --- data side: pieces of accumulator entries -> beats
        wd = blocks("wb_d")
        x_i = Signal(range(cfg.m_block + 1))
        x_off = Signal(D + 12)         # byte offset of the piece in the row
        x_bank = Signal()
        x_addr = Signal(range(ACCD + 1))  # g * Mb + i of the piece's entry
        x_q = Signal(range(8 * C // BB + 2))
        xs, xe = wb_geom(wd)
        PB = Mux(out_bf16, min(C * 2, BB), min(C * 4, BB))     # piece bytes
        PPE = Mux(out_bf16, max(1, C * 2 // BB), max(1, C * 4 // BB))  # pieces per entry
        x_state = Mux(x_bank, acc_state[1], acc_state[0])
        WFD = 16
        m.submodules.wdfifo = wdfifo = SyncFIFOBuffered(width=WB + BB, depth=WFD)
        x_go = Signal()
        # a row may be written once its last entry got its final value: during the group's last
        # k-block pass, entry (g, i) is output number (KB*Gc - 1)*Mb + i + 1 - (Gc - 1 - g)*Mb; the
        # row's last entry (g = Gc - 1) is output (KB*Gc - 1)*Mb + i + 1.
        # The group's base (KB*Gc - 1)*Mb only changes when the group does: it is computed in two
        # registered steps (the products were the board top's critical path: 104 logic levels on
        # ECP5), and x_settle holds the write-back for those two cycles after every group change
        # (Gc and Mb change at edge E0, x_gc_mb is new after E1, x_fbase after E2).
        x_gc_mb = Signal(D + 12)
        x_fbase = Signal(D + 12)
        x_settle = Signal(2, init=2)
        m.d.sync += [x_gc_mb.eq(KB * wd["gc"]), x_fbase.eq((x_gc_mb - 1) * wd["mb"])]
        with m.If(x_settle != 0):
            m.d.sync += x_settle.eq(x_settle - 1)
        x_final = Signal(D + 12)
        m.d.comb += x_final.eq(x_fbase + x_i + 1)
        x_w = Mux(x_bank, wcount[1], wcount[0])
        x_row_ready = (x_state == ACC_DONE) | ((x_state == ACC_READY) & (x_w >= x_final))
        m.d.comb += x_go.eq(run & wd["ok"] & ~wd["fin"] & x_row_ready & (wdfifo.level <= WFD - 3) & (x_settle == 0))
        # the first piece of a row starts at byte xs: x_off holds it when x_i's row begins
        cur_off = x_off
        x_last_piece = cur_off + PB >= xe
        x_closes = x_last_piece | (((cur_off + PB) & (BB - 1)) == 0)
        x_vb = min_(PB, xe - cur_off)
        x_group_end = x_last_piece & (x_i + 1 == wd["mb"])
        for b in range(2):
            m.d.comb += [acc[b][2].addr.eq(x_addr), acc[b][2].en.eq(x_go)]
        # stage B registers
        y_valid = Signal()
        y_bank = Signal()
        y_q = Signal.like(x_q)
        y_pos = Signal(range(BB))
        y_vb = Signal(range(BB + 1))
        y_closes = Signal()
        m.d.sync += y_valid.eq(x_go)
        with m.If(x_go):
            m.d.sync += [y_bank.eq(x_bank), y_q.eq(x_q), y_pos.eq(cur_off[:_lg(BB)]), y_vb.eq(x_vb),
                         y_closes.eq(x_closes)]
            with m.If(x_last_piece):
                # next row (or next group)
                m.d.sync += x_q.eq(0)
                with m.If(x_i + 1 != wd["mb"]):
                    m.d.sync += [x_i.eq(x_i + 1), x_addr.eq(x_i + 1), x_off.eq(xs)]
                with m.Else():
                    m.d.sync += [x_i.eq(0), x_addr.eq(0), x_bank.eq(~x_bank), *next_group(wd), x_settle.eq(2)]
                    nxt_nb0 = Mux(wd["last_group"], 0, wd["nb0"] + wd["gc"])
                    m.d.sync += x_off.eq((nxt_nb0 << lgC) * ob_out)
            with m.Else():
                m.d.sync += x_off.eq(cur_off + PB)
                with m.If(x_q + 1 == PPE):
                    m.d.sync += [x_q.eq(0), x_addr.eq(x_addr + wd["mb"])]
                with m.Else():
                    m.d.sync += x_q.eq(x_q + 1)
        with m.If(go):
            m.d.sync += [x_i.eq(0), x_bank.eq(0), x_addr.eq(0), x_q.eq(0), x_off.eq(0), x_settle.eq(2)]
        # convert + select the piece
        entry = Mux(y_bank, acc[1][2].data, acc[0][2].data)

        def to_bf16(x):
            nan = (x[23:31] == 0xFF) & (x[:23] != 0)
            rounded = (x + 0x7FFF + x[16])[16:32]
            return Mux(nan, 0x7FC0, rounded)

        if is_int8:
            conv = Cat(entry, Const(0, 0))
        else:
            conv = Cat(*(to_bf16(entry[32 * c:32 * c + 32]) for c in range(C)))
        piece32 = Signal(WB)
        if C * 4 > BB:
            sel = Const(0, WB)
            for q in range(C * 4 // BB):
                sel = Mux(y_q == q, entry[q * WB:(q + 1) * WB], sel)
            p32 = sel
        else:
            p32 = entry
        if (not is_int8) and C * 2 > BB:
            sel = Const(0, WB)
            for q in range(C * 2 // BB):
                sel = Mux(y_q == q, conv[q * WB:(q + 1) * WB], sel)
            p16 = sel
        elif not is_int8:
            p16 = conv
        else:
            p16 = Const(0, WB)
        m.d.comb += piece32.eq(Mux(out_bf16, p16, p32))
        asm_d = Signal(WB)
        asm_s = Signal(BB)
        shifted = Signal(WB)
        strb = Signal(BB)
        m.d.comb += [shifted.eq(piece32 << (y_pos * 8)),
                     strb.eq((((Const(1, BB + 1) << y_vb) - 1) << y_pos)[:BB])]
        m.d.comb += [wdfifo.w_data.eq(Cat(asm_d | shifted, asm_s | strb)), wdfifo.w_en.eq(y_valid & y_closes)]
        with m.If(y_valid):
            with m.If(y_closes):
                m.d.sync += [asm_d.eq(0), asm_s.eq(0)]
            with m.Else():
                m.d.sync += [asm_d.eq(asm_d | shifted), asm_s.eq(asm_s | strb)]
        # W channel
        w_cnt = Signal(8)
        m.d.comb += [
            self.mem_c.wvalid.eq(wdfifo.r_rdy & wlen.r_rdy),
            self.mem_c.wdata.eq(wdfifo.r_data[:WB]), self.mem_c.wstrb.eq(wdfifo.r_data[WB:]),
            self.mem_c.wlast.eq(w_cnt == wlen.r_data),
            wdfifo.r_en.eq(self.mem_c.wvalid & self.mem_c.wready),
            wlen.r_en.eq(self.mem_c.wvalid & self.mem_c.wready & self.mem_c.wlast),
        ]
        with m.If(self.mem_c.wvalid & self.mem_c.wready):
            m.d.sync += w_cnt.eq(Mux(self.mem_c.wlast, 0, w_cnt + 1))
        with m.If(go):
            m.d.sync += w_cnt.eq(0)

        # ================= bank hand-shakes ==========================================
        for b in range(2):
            with m.If(go):
                m.d.sync += [acc_state[b].eq(ACC_FREE), wcount[b].eq(0)]
            with m.Else():
                # C0 loader: FREE -> LOADING -> READY, or FREE -> READY without C0
                with m.If(ci_begin & (ci_bank == b)):
                    m.d.sync += acc_state[b].eq(Mux(load_c, ACC_LOADING, ACC_READY))
                with m.If(c0_group_done & (cc_bank == b)):
                    m.d.sync += acc_state[b].eq(ACC_READY)
                with m.If(obeat & (o_bank == b)):
                    m.d.sync += wcount[b].eq(wcount[b] + 1)
                    with m.If(o_group_end):
                        m.d.sync += acc_state[b].eq(ACC_DONE)
                with m.If(x_go & x_group_end & (x_bank == b)):
                    m.d.sync += [acc_state[b].eq(ACC_FREE), wcount[b].eq(0)]
            with m.If(go):
                m.d.sync += [a_busy[b].eq(0), a_full[b].eq(0)]
            with m.Else():
                with m.If(a_claim & (ai_bank == b)):
                    m.d.sync += a_busy[b].eq(1)
                with m.If(a_fill & (ac_bank == b)):
                    m.d.sync += a_full[b].eq(1)
                with m.If(a_release & (f_abank == b)):
                    m.d.sync += [a_busy[b].eq(0), a_full[b].eq(0)]

        # the sequencer may write block cnt when every loop that moves is past block cnt - SEQ_DEPTH
        m.d.comb += seq_free.eq(Cat(*(~c | ~(seq_cnt - i)[SQB - 1] for i, c in trackers)).all())
        m.d.comb += all_done.eq(run & ~go & wd["fin"] & wa_blk["fin"] & (b_count == aw_count)
                                & ~wdfifo.r_rdy & ~y_valid)
        return m
