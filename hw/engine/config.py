"""Configuration of the GEMM engine (:class:`EngineConfig`) and the constants of its register
interface: dimension width, descriptor error codes, format codes, the default address mapping."""

from __future__ import annotations

from dataclasses import dataclass, field, fields, replace

from ..config import check_int, check_pow2
from ..hbm.config import HBMConfig
from ..mxu import MXUConfig

__all__ = ["BEAT_BYTES", "DIM_BITS", "ENGINE_ADDRESS_MAPPING", "ERRORS", "FMT_CODES", "PASS_CHUNKS", "EngineConfig"]

DIM_BITS = 20  #: default width of M, K, N (``EngineConfig.dim_bits``): 1 .. 2**20 - 1
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
    2: ("DIM_TOO_LARGE", "M, K or N >= 2^dim_bits (default 2^20), or K > MAX_K (one row of A must fit an "
                          "A bank)"),
    3: ("FORMAT", "FLAGS.OUT_BF16 with the int8 format (int8 results are int32)"),
    4: ("ALIGN", "a base address or row stride in use is not a multiple of 32 bytes"),
    5: ("STRIDE", "a row stride is smaller than the row it must hold"),
    6: ("RANGE", "a matrix in use runs past the end of memory"),
}
FMT_CODES = {"bf16": 0, "fp8_e4m3fn": 1, "fp8_e5m2": 2, "int8": 3}


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
        dim_bits: width of M, K and N, 8..20 (default :data:`DIM_BITS` = 20): each is 1 ..
            2**dim_bits - 1 (a larger one is the DIM_TOO_LARGE error); the latched dimensions, row
            and n-block counts are sized by it, so a narrower engine is smaller.

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
    dim_bits: int = DIM_BITS

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
        check_int("dim_bits", self.dim_bits, 8, DIM_BITS)

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
    def max_dim(self) -> int:
        """Largest M, K or N: 2**dim_bits - 1."""
        return (1 << self.dim_bits) - 1

    @property
    def max_k(self) -> int:
        """Largest K: one row of A fills an A bank (and at most :attr:`max_dim`)."""
        return min(self.max_dim, self.a_buffer_bytes // self.operand_bytes)

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
                "rob_depth": self.rob_depth, "dim_bits": self.dim_bits}

    @classmethod
    def from_dict(cls, d: dict) -> EngineConfig:
        """Inverse of :meth:`as_dict`."""
        d = dict(d)
        d["mxu"] = MXUConfig(**d["mxu"])
        d["hbm"] = HBMConfig.from_dict(d["hbm"])
        return cls(**d)
