"""Interfaces shared by the GEMM engine's components: the derived geometry of a configuration, the
latched descriptor, the m-block sequencer's lookup port, the accumulator bank states and the AXI4
channel layouts the loaders use.

The engine's components (one file each in ``hw/engine/``) talk through these: the descriptor unit
latches and checks the registers into a :func:`descriptor_layout` value that every loop reads; each
loop follows the m-blocks through a :class:`~hw.engine.cursor.BlockCursor` that looks its block up in
the :class:`~hw.engine.sequencer.BlockSequencer`'s table through a :func:`seq_port_signature` port.
"""

from __future__ import annotations

from dataclasses import dataclass

from amaranth.hdl import Mux, Signal
from amaranth.lib import data, enum, stream, wiring
from amaranth.lib.wiring import In, Out

from .config import BEAT_BYTES, PASS_CHUNKS, EngineConfig

__all__ = ["AccState", "EnginePart", "Geometry", "LoopEnd", "Why", "ar_signature", "check_engine_config",
           "descriptor_layout", "lg", "loop_control", "mux_min", "result_bytes", "r_signature", "seq_port_signature"]


def lg(x: int) -> int:
    """log2 of a power of two."""
    return x.bit_length() - 1


def mux_min(a, b):
    """The smaller of two values, as a multiplexer (unsigned compare)."""
    return Mux(a < b, a, b)


def result_bytes(x, out_bf16):
    """``x`` result elements in bytes: 2 each for bf16 (``out_bf16``), 4 for fp32 / int32; a shift and
    a multiplexer (a product with the two-valued factor maps onto a DSP block and its carry chain:
    the descriptor unit's critical path on ECP5 ran through one)."""
    return Mux(out_bf16, x << 1, x << 2)


class LoopEnd:
    """Whether a loop counter is at its last value (``count + 1 == limit``) from registers, so no
    adder and compare are in front of what the loop's step decides.

    At count 0 it is the limit's compare with 1 (the limit, a block cursor's or the descriptor's
    value, is a register that does not change while the loop runs through it); after it, a flag
    loaded at each increment with ``count + 2 == limit``. The loop emits :meth:`step` where it
    increments the counter and :meth:`restart` where it sets it to 0 (and at ``go``).

    Args:
        count: the counter (a Signal); limit: its number of values (>= 1 while the loop runs).
        name: prefix of the two flag registers (``<name>_first``, ``<name>_last``).
        one: a register equal to ``limit == 1`` in every cycle (a block cursor's ``gc_one`` or
            ``mb_one``), used at count 0 instead of the compare, so the limit's compare is not in
            front of what the loop's step decides either.

    Attributes:
        first: Signal(1), a register: the counter is at 0.
        last: Value(1), the counter is at ``limit - 1``.
    """

    def __init__(self, count, limit, name: str, one=None):
        self._count, self._limit = count, limit
        self.first = Signal(init=1, name=f"{name}_first")
        self._last = Signal(name=f"{name}_last")
        self.last = Mux(self.first, limit == 1 if one is None else one, self._last)

    def step(self) -> list:
        """Statements for the counter's increment (to be added to the sync domain)."""
        return [self.first.eq(0), self._last.eq(self._count + 2 == self._limit)]

    def restart(self) -> list:
        """Statements for the counter's return to 0 (to be added to the sync domain)."""
        return [self.first.eq(1)]


def check_engine_config(config) -> EngineConfig:
    """``config`` itself, after checking that it is an :class:`~hw.engine.config.EngineConfig` (every
    engine component takes one).

    Raises:
        TypeError: ``config`` is not an EngineConfig.
    """
    if not isinstance(config, EngineConfig):
        raise TypeError(f"config must be an EngineConfig; got {type(config).__name__}")
    return config


class EnginePart(wiring.Component):
    """Base of the engine's components: ``config`` (an :class:`~hw.engine.config.EngineConfig`,
    checked: TypeError otherwise), ``geom`` (its :class:`Geometry`) and the signature from
    :meth:`members`."""

    def __init__(self, config: EngineConfig):
        self.config = check_engine_config(config)
        self.geom = Geometry.of(config)
        super().__init__(self.members(self.geom))

    def members(self, g: Geometry) -> dict:
        """The component's signature members for geometry ``g``."""
        raise NotImplementedError


@dataclass(frozen=True)
class Geometry:
    """Constants derived from an :class:`EngineConfig` (R x C array, operand bytes ``ob``, 32 B beats).

    Attributes (all integers): ``R``, ``C`` (array rows, columns), ``w`` (operand bits), ``ob``
    (operand bytes), ``E`` (operands per beat), ``NSUB`` (beats per A chunk of R operands), ``CPW``
    (A chunks per beat), ``WS`` (beats per weight row), ``WPART`` (weight rows per beat), ``CS``
    (beats per fp32 accumulator entry), ``CPART`` (entries per beat), ``ABUF_DEPTH`` (words of
    ``NSUB`` beats per A bank), ``ACCD`` (accumulator entries per bank), ``A32`` (internal
    byte-address bits, 34), ``D`` (dimension bits, :attr:`EngineConfig.dim_bits`), ``DEP_BEATS`` (K-chain distance
    that never stalls the feeder: array latency + 16 beats), ``MINM`` (2R + C - 1: the
    shortest m-block whose tiles run back to back), ``TAIL`` (rows of a cut last m-block), ``QF``
    (beats per row per pass of an m-block), ``SEQ_DEPTH`` (blocks in the sequencer's table), ``SQB``
    (block-index bits), ``MFIRST`` (rows of the first m-block before the A-bank limit),
    ``GROUP_BEATS`` (most MXU output beats of one group: ``ACCD`` entries, each written once per
    k-block, for at most ``KB_MAX`` k-blocks; the width of the K-chain's beat counts), ``K_MAX``
    (largest K, :attr:`EngineConfig.max_k`), ``KB_MAX`` (most k-blocks, ceil(K_MAX / R)), ``NB_MAX``
    (most n-blocks, ceil((2**D - 1) / C)), ``RB_MAX`` (most beats per A row, ceil(K_MAX * ob / 32)).
    A loop's counter is as wide as its values: a k-block below ``KB_MAX``, an n-block of a group
    below ``ACCD``, an n-block of the GEMM at most ``NB_MAX``, a beat of an A row at most
    ``RB_MAX``.
    """

    R: int
    C: int
    w: int
    ob: int
    E: int
    NSUB: int
    CPW: int
    WS: int
    WPART: int
    CS: int
    CPART: int
    ABUF_DEPTH: int
    ACCD: int
    A32: int
    D: int
    DEP_BEATS: int
    MINM: int
    TAIL: int
    QF: int
    SEQ_DEPTH: int
    SQB: int
    MFIRST: int
    GROUP_BEATS: int
    K_MAX: int
    KB_MAX: int
    NB_MAX: int
    RB_MAX: int
    m_block: int
    capacity: int
    is_int8: bool

    @classmethod
    def of(cls, cfg: EngineConfig) -> Geometry:
        mc = cfg.mxu
        R, C, w = mc.rows, mc.cols, mc.operand_bits
        ob, BB = w // 8, BEAT_BYTES
        NSUB = max(1, R * ob // BB)
        dep = mc.latency_cycles + 16
        minm = 2 * R + C - 1
        seq_depth = 8
        return cls(R=R, C=C, w=w, ob=ob, E=BB // ob, NSUB=NSUB, CPW=max(1, BB // (R * ob)),
                   WS=max(1, C * ob // BB), WPART=max(1, BB // (C * ob)), CS=max(1, C * 4 // BB),
                   CPART=max(1, BB // (C * 4)), ABUF_DEPTH=cfg.a_buffer_bytes // (BB * NSUB),
                   ACCD=cfg.acc_entries, A32=34, D=cfg.dim_bits, DEP_BEATS=dep,
                   MINM=minm, TAIL=max(minm, dep), QF=PASS_CHUNKS * NSUB, SEQ_DEPTH=seq_depth,
                   SQB=lg(seq_depth) + 1, MFIRST=min(cfg.first_block_rows, cfg.m_block),
                   GROUP_BEATS=cfg.acc_entries * -(-cfg.max_k // R), K_MAX=cfg.max_k, KB_MAX=-(-cfg.max_k // R),
                   NB_MAX=-(-cfg.max_dim // C), RB_MAX=-(-cfg.max_k * ob // BB),
                   m_block=cfg.m_block,
                   capacity=cfg.hbm.capacity_bytes, is_int8=mc.fmt == "int8")


def descriptor_layout(g: Geometry) -> data.StructLayout:
    """The descriptor latched at START and the blocking derived from it (held for the whole run).

    ``m``, ``k``, ``n`` (``D`` bits each); ``load_c``, ``out_bf16`` (FLAGS); ``<x>_base`` (``A32``
    bits) and ``<x>_stride`` (32 bits) for x in a, b, c, d; ``kb`` = ceil(K / R), ``nb`` = ceil(N / C),
    ``rb`` = ceil(K * ob / 32) (beats per A row); ``wpr`` (A buffer words per row); ``mbmax`` (rows of a
    full m-block); ``ramp`` (grow the m-blocks after the first); ``g`` (n-blocks per group);
    ``ldb_r`` = R * B_STRIDE, ``ldb_r1`` = (R - 1) * B_STRIDE (bytes).
    """
    fields = {"m": g.D, "k": g.D, "n": g.D, "load_c": 1, "out_bf16": 1}
    fields.update({f"{x}_base": g.A32 for x in "abcd"})
    fields.update({f"{x}_stride": 32 for x in "abcd"})
    fields.update({"kb": range(g.KB_MAX + 1), "nb": range(g.NB_MAX + 1), "rb": range(g.RB_MAX + 1),
                   "wpr": range(-(-g.KB_MAX // g.CPW) + 1),
                   "mbmax": range(g.m_block + 1), "ramp": 1, "g": range(g.ACCD + 1), "ldb_r": g.A32 + 8,
                   "ldb_r1": g.A32 + 8})
    return data.StructLayout(fields)


def loop_control(g: Geometry, run: bool = True) -> dict:
    """The members every loop component takes from the descriptor unit: ``desc``
    (:func:`descriptor_layout`), ``go`` and ``prep`` (strobes) and, with ``run``, ``run``."""
    members = {"desc": In(descriptor_layout(g)), "go": In(1), "prep": In(1)}
    if run:
        members["run"] = In(1)
    return members


def seq_port_signature(g: Geometry) -> wiring.Signature:
    """A loop's lookup into the m-block sequencer's table (loop side; the sequencer takes it flipped).

    ``idx`` (``SQB`` bits): the loop's block index; ``counted``: the loop holds the sequencer back
    (it may not overwrite a block the loop has not left). ``mb`` (rows), ``gb`` (n-blocks per group,
    1 .. ACCD), ``last`` (the GEMM's last m-block): the table entry at ``idx``; ``ok``: that entry has
    been written. ``n_mb``, ``n_gb``, ``n_last``, ``n_ok``: the same for the entry at ``idx + 1`` (the
    cursor registers its next block's values before it steps there).
    """
    return wiring.Signature({
        "idx": Out(g.SQB), "counted": Out(1),
        "mb": In(range(g.m_block + 1)), "gb": In(range(g.ACCD + 1)), "last": In(1), "ok": In(1),
        "n_mb": In(range(g.m_block + 1)), "n_gb": In(range(g.ACCD + 1)), "n_last": In(1), "n_ok": In(1),
    })


class AccState(enum.Enum, shape=2):
    """State of an accumulator bank: FREE (no group), LOADING (its initial C streaming in), READY
    (computing), DONE (its last k-block is in; the write-back reads it)."""

    FREE = 0
    LOADING = 1
    READY = 2
    DONE = 3


class Why(enum.Enum, shape=3):
    """Why the feeder offers no activation beat (registered with the beat stage, for the performance
    counters): set-up (not counted), A row not stored, no accumulator bank, K-chain dependency, the
    feeder finished (drain)."""

    SETUP = 0
    A = 1
    ACC = 2
    DEP = 3
    DRAIN = 4


def ar_signature(g: Geometry) -> wiring.Signature:
    """AXI4 read- or write-address channel as a stream: ``addr`` (``A32`` bits; the port keeps the low
    ``AW``), ``len`` (AxLEN = beats - 1). INCR bursts of full 32 B beats, ID 0."""
    return stream.Signature(data.StructLayout({"addr": g.A32, "len": 8}))


def r_signature() -> wiring.Signature:
    """AXI4 read-data channel as a stream: ``data`` (256 bits), ``resp`` (2 bits), ``last``."""
    return stream.Signature(data.StructLayout({"data": BEAT_BYTES * 8, "resp": 2, "last": 1}))
