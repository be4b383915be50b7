"""Formal harness: a FIFO of the design keeps order and loses nothing.

The design's FIFOs are Amaranth's ``SyncFIFO`` and ``SyncFIFOBuffered``, in the widths and depths its
components choose (:func:`design_fifos` finds every one in an elaborated top). :class:`FIFOOrder`
checks one such FIFO with a free environment (every input, reset included, takes any value in any
cycle):

* ``level`` is always the number of writes taken less the number of reads taken, and ``w_rdy`` is
  high exactly while ``level < depth``: a write is refused only when the FIFO is full, so nothing
  offered with room is lost;
* following the n-th write taken, for an ``n`` the solver picks (``AnyConst``, so for every write):
  the n-th read taken returns its data. So nothing is lost, duplicated or reordered.

The FIFO never looks at its data, so ``data_bits`` free bits (zero-extended to the FIFO's width)
tell every mix-up apart (data independence) and keep the solver's memories small.
"""

from __future__ import annotations

from amaranth.asserts import AnyConst  # Amaranth 0.5 keeps it here, not in amaranth.hdl
from amaranth.hdl import Assert, Cover, Fragment, Module, Signal
from amaranth.lib import fifo, wiring
from amaranth.lib.wiring import In

__all__ = ["FIFOOrder", "design_fifos"]


class FIFOOrder(wiring.Component):
    """The order harness (see the module docstring) around ``queue``, an
    :class:`amaranth.lib.fifo.FIFOInterface` (``SyncFIFO`` or ``SyncFIFOBuffered``).

    Ports (free inputs): ``w_en``, ``w_data`` (``data_bits`` bits), ``r_en``.

    Raises:
        TypeError: ``queue`` is not a synchronous Amaranth FIFO.
        ValueError: ``data_bits`` is not 1 .. the FIFO's width.
    """

    def __init__(self, queue, data_bits: int = 4):
        if not isinstance(queue, (fifo.SyncFIFO, fifo.SyncFIFOBuffered)):
            raise TypeError(f"queue must be an amaranth.lib.fifo.SyncFIFO or SyncFIFOBuffered; got {queue!r}")
        if not 1 <= data_bits <= queue.width:
            raise ValueError(f"data_bits must be 1..{queue.width}; got {data_bits!r}")
        self._fifo = queue
        super().__init__({"w_en": In(1), "w_data": In(data_bits), "r_en": In(1)})

    def elaborate(self, platform):
        m = Module()
        m.submodules.fifo = f = self._fifo
        m.d.comb += [f.w_en.eq(self.w_en), f.w_data.eq(self.w_data), f.r_en.eq(self.r_en)]
        wrote, read = Signal(name="write_taken"), Signal(name="read_taken")
        m.d.comb += [wrote.eq(f.w_en & f.w_rdy), read.eq(f.r_en & f.r_rdy)]
        bits = (2 * f.depth).bit_length() + 1  # counts wrap; fewer than a quarter of their range in flight
        writes, reads = Signal(bits, name="writes"), Signal(bits, name="reads")
        m.d.sync += [writes.eq(writes + wrote), reads.eq(reads + read)]
        m.d.comb += Assert((writes - reads)[:bits] == f.level, "level differs from writes taken less reads taken")
        m.d.comb += Assert(f.w_rdy == (f.level < f.depth), "a write refused with room, or taken when full")

        n = Signal(bits, name="followed")
        m.d.comb += n.eq(AnyConst(bits))
        data, written = Signal(len(self.w_data), name="followed_data"), Signal(name="followed_written")
        with m.If(wrote & (writes == n)):
            m.d.sync += [data.eq(self.w_data), written.eq(1)]
        leaving = read & (reads == n)
        with m.If(leaving):
            m.d.comb += Assert(written & (f.r_data == data), "a read returned another write's data")
        # not vacuous: the followed entry leaves a FIFO that was full
        full_seen = Signal(name="full_seen")
        with m.If(f.level == f.depth):
            m.d.sync += full_seen.eq(1)
        m.d.comb += Cover(leaving & full_seen & (n == 1))
        return m


def design_fifos(top) -> dict[tuple[str, int, int], list[str]]:
    """Every Amaranth FIFO in the elaborated design ``top``: ``(class name, width, depth)`` -> the
    hierarchical names of its instances (e.g. ``top.hbm.pc0_ctrl.read_path.tag_fifo``)."""
    found: dict[tuple[str, int, int], list[str]] = {}

    def walk(frag, path):
        for origin in frag.origins or ():
            if isinstance(origin, fifo.FIFOInterface):
                found.setdefault((type(origin).__name__, origin.width, origin.depth), []).append(path)
        for sub, name, *_ in frag.subfragments:
            walk(sub, f"{path}.{name}")

    walk(Fragment.get(top, None), "top")
    return found
