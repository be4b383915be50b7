"""Configuration, descriptor and commands of the pod's collective engine."""

from __future__ import annotations

from dataclasses import dataclass, field

from amaranth.lib import data, enum

from hw.arith.formats import Format, Subnormals
from hw.arith.fp32_add import ADDER_CUTS
from hw.config import check_choice, check_int, check_pow2
from hw.ici.config import ICIConfig

__all__ = ["CollectiveConfig", "CollectiveOp", "PodConfig", "pod_link", "descriptor_layout", "command_layout",
           "hbm_beat_layout", "is_drain", "HBM_BEAT_BYTES", "MAX_SLOTS"]

#: bytes of one HBM burst, the collective engine's AXI4 beat (as the GEMM engine's)
HBM_BEAT_BYTES = 32
#: slots a pod's ring takes at most (:class:`PodConfig`'s ``nodes``)
MAX_SLOTS = 16


class CollectiveOp(enum.Enum, shape=2):
    """The ring collectives (``verif.golden.collectives``): ALL_GATHER (node r's chunk r to every
    node), REDUCE_SCATTER (node r ends with chunk r of the sum), ALL_REDUCE (both, in that order)."""
    ALL_GATHER = 0
    REDUCE_SCATTER = 1
    ALL_REDUCE = 2


def pod_link(**fields) -> ICIConfig:
    """The pod's ICI link: 8-byte beats and a 16-packet receive buffer (so a collective's slices,
    at most (16 - 1) // 2 packets, keep the link busy), with ``fields`` (ICIConfig's) overriding.

    Raises:
        TypeError, ValueError: as :class:`~hw.ici.config.ICIConfig`.
    """
    return ICIConfig(**{"beat_bytes": 8, "rx_packets": 16, **fields})


@dataclass(frozen=True)
class CollectiveConfig:
    """One node's collective engine.

    Attributes:
        fmt: the GEMM format whose results are reduced: ``"int8"`` adds int32 with wrap-around, the
            float formats add fp32 with :class:`~hw.arith.FP32Sum` (RNE).
        subnormals: ``"ftz"`` or ``"ieee"``, the fp32 adds' subnormal mode.
        link: the :class:`~hw.ici.config.ICIConfig` of the node's links; ``beat_bytes`` at most
            :data:`HBM_BEAT_BYTES` (an HBM beat is cut into ``32 / beat_bytes`` link beats), and
            ``rx_packets`` >= 3, with ``slice_beats`` at least one HBM beat.
        address_bits: byte-address width of the node's memory, 12 .. 40.
        max_nodes: the largest ring, a power of two from 2 to 16.
        adder_cuts: register stages of each fp32 adder lane (:data:`~hw.arith.fp32_add.ADDER_CUTS`);
            the int32 lanes get as many, so both formats have the same latency.

    Raises:
        TypeError, ValueError: a value of the wrong type or outside its range, naming the field.
    """

    fmt: str = "bf16"
    subnormals: str = "ftz"
    link: ICIConfig = field(default_factory=pod_link)
    address_bits: int = 28
    max_nodes: int = 8
    adder_cuts: tuple = ("align", "norm", "out")

    def __post_init__(self):
        check_choice("fmt", self.fmt, Format)
        check_choice("subnormals", self.subnormals, Subnormals)
        if not isinstance(self.link, ICIConfig):
            raise TypeError(f"link must be an ICIConfig; got {self.link!r}")
        if self.link.beat_bytes > HBM_BEAT_BYTES:
            raise ValueError(f"link.beat_bytes must be at most the HBM beat, {HBM_BEAT_BYTES}; "
                             f"got {self.link.beat_bytes}")
        check_int("link.rx_packets", self.link.rx_packets, 3, 64)
        if self.slice_beats < self.words:
            raise ValueError(f"link.packet_beats * floor((link.rx_packets - 1) / 2) must hold an HBM beat "
                             f"({self.words} link beats); got {self.slice_beats}")
        check_int("address_bits", self.address_bits, 12, 40)
        check_pow2("max_nodes", self.max_nodes, 2, 16)
        bad = set(self.adder_cuts) - set(ADDER_CUTS)
        if bad or not isinstance(self.adder_cuts, tuple):
            raise ValueError(f"adder_cuts must be a tuple of {', '.join(ADDER_CUTS)}; got {self.adder_cuts!r}")

    @property
    def words(self) -> int:
        """Link beats per HBM beat."""
        return HBM_BEAT_BYTES // self.link.beat_bytes

    @property
    def lanes(self) -> int:
        """Adder lanes: 32-bit elements per link beat."""
        return self.link.beat_bytes // 4

    @property
    def latency_cycles(self) -> int:
        """Cycles through an adder lane."""
        return len(self.adder_cuts)

    @property
    def slice_beats(self) -> int:
        """Link beats of the largest message (a slice): ``floor((rx_packets - 1) / 2)`` whole
        packets, so the receiver's buffer holds two messages and a packet. Why: every node sends its
        slice of phase p + 1 while it takes its neighbour's slice of phase p beat for beat, so a
        node blocked on credits must find its neighbour's buffer full; with room for two messages
        and a packet that means the neighbour holds a whole unread message of an earlier phase,
        which it reads without waiting for anything, so no ring of nodes can wait on itself."""
        return (self.link.rx_packets - 1) // 2 * self.link.packet_beats

    @property
    def slice_hbm_beats(self) -> int:
        """HBM beats of the largest slice (>= 1: checked at construction)."""
        return self.slice_beats // self.words

    @property
    def node_bits(self) -> int:
        return (self.max_nodes - 1).bit_length()


def descriptor_layout(cfg: CollectiveConfig) -> data.StructLayout:
    """One collective on one node. ``base``/``stride``: the array's first row and row pitch (bytes,
    multiples of 32); ``rows`` (< 2**16) and ``row_bytes`` (1 .. 65,535; a multiple of 4 for a
    reduction): its shape;
    chunks are row ranges (``numpy.array_split``); ``nodes`` (1 .. max_nodes) the ring, ``rank`` this
    node's place on it; ``bidirectional``: each chunk's first ceil(rows / 2) rows go clockwise, the
    rest counter-clockwise."""
    return data.StructLayout({
        "op": CollectiveOp, "bidirectional": 1,
        "nodes": cfg.node_bits + 1, "rank": cfg.node_bits,
        "base": cfg.address_bits, "stride": cfg.address_bits,
        "rows": 16, "row_bytes": 16,
    })


def command_layout(cfg: CollectiveConfig) -> data.StructLayout:
    """One slice of one phase on one node: ``rows`` rows from byte address ``addr`` (row pitch the
    descriptor's stride), ``hbm_beats`` beats of each (its last beat at the row's end when
    ``row_end``), ``beats`` link beats in all; read the local slice (``local``), take the
    neighbour's (``remote``; both: add them), send the result on (``tx``), write it (``hbm``)."""
    return data.StructLayout({
        "addr": cfg.address_bits, "rows": 16, "hbm_beats": 12, "row_end": 1, "beats": 24,
        "local": 1, "remote": 1, "tx": 1, "hbm": 1,
    })


def is_drain(cmd) -> object:
    """Whether a command (a :func:`command_layout` view) is a drain: the last phase of a slice,
    which takes the neighbour's slice and writes it without sending it on (an all-gather's, or a
    reduce-scatter's with the local slice added). The combiner runs it beside the next command, so
    its local reads go to a read port of their own."""
    return cmd.remote & cmd.hbm & ~cmd.tx


def hbm_beat_layout() -> data.StructLayout:
    """An AXI4 write beat without WLAST: ``data`` (256 bits), ``strb`` (32 bits)."""
    return data.StructLayout({"data": HBM_BEAT_BYTES * 8, "strb": HBM_BEAT_BYTES})


@dataclass(frozen=True)
class PodConfig:
    """A pod: ``nodes`` slots on a bidirectional ring of ICI links, each a GEMM engine, a collective
    engine and an HBM controller with seven AXI4 ports (the engine's A, W and C, the collective
    engine's two directions and their drains' read ports).

    Attributes:
        engine: each node's :class:`~hw.engine.EngineConfig` (the collective engine adds in its
            format and subnormal mode, on its memory's address width).
        link: the :class:`~hw.ici.config.ICIConfig` of every link.
        nodes: slots on the ring, 1 .. :data:`MAX_SLOTS`.
        absent: slots with no node (a failed chip): the ring closes around them, and the live nodes
            take ranks 0, 1, ... in slot order. At least one node stays.
        adder_cuts: see :class:`CollectiveConfig`.

    Raises:
        TypeError, ValueError: naming the field.
    """

    engine: object = None
    link: ICIConfig = field(default_factory=pod_link)
    nodes: int = 4
    absent: tuple = ()
    adder_cuts: tuple = ("align", "norm", "out")

    def __post_init__(self):
        from hw.engine import EngineConfig

        if self.engine is None:
            object.__setattr__(self, "engine", EngineConfig())
        if not isinstance(self.engine, EngineConfig):
            raise TypeError(f"engine must be an EngineConfig; got {self.engine!r}")
        check_int("nodes", self.nodes, 1, MAX_SLOTS)
        if not isinstance(self.absent, tuple) or any(isinstance(a, bool) or not isinstance(a, int)
                                                     or not 0 <= a < self.nodes for a in self.absent):
            raise ValueError(f"absent must be a tuple of slots 0 .. {self.nodes - 1}; got {self.absent!r}")
        if len(set(self.absent)) >= self.nodes:
            raise ValueError(f"absent leaves no node of {self.nodes}; got {self.absent!r}")
        _ = self.collective   # checks the link against the engine

    def as_dict(self) -> dict:
        return {"engine": self.engine.as_dict(), "link": self.link.as_dict(), "nodes": self.nodes,
                "absent": list(self.absent), "adder_cuts": list(self.adder_cuts)}

    @classmethod
    def from_dict(cls, d: dict) -> PodConfig:
        from hw.engine import EngineConfig

        return cls(engine=EngineConfig.from_dict(d["engine"]), link=ICIConfig(**d["link"]), nodes=d["nodes"],
                   absent=tuple(d["absent"]), adder_cuts=tuple(d["adder_cuts"]))

    @property
    def live(self) -> tuple[int, ...]:
        """The slots with a node, in ring order (rank i is ``live[i]``)."""
        return tuple(k for k in range(self.nodes) if k not in self.absent)

    @property
    def collective(self) -> CollectiveConfig:
        max_nodes = max(2, 1 << (self.nodes - 1).bit_length())
        e = self.engine
        return CollectiveConfig(fmt=e.mxu.fmt, subnormals=e.mxu.subnormals, link=self.link,
                                address_bits=e.hbm.address_bits, max_nodes=max_nodes, adder_cuts=self.adder_cuts)
