"""A loop's position in the m-block / group order of a GEMM."""

from __future__ import annotations

from amaranth.hdl import Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from .interface import EnginePart, Geometry, seq_port_signature

__all__ = ["BlockCursor"]


class BlockCursor(EnginePart):
    """One loop's position: its m-block (an index into the sequencer's table) and its group of
    n-blocks within the m-block.

    A block's groups take the table's ``gb`` n-blocks each (``G``, or fewer for a long block), the last
    group what is left of ``nb`` n-blocks.

    Ports:
        seq: Out(:func:`~hw.engine.interface.seq_port_signature`): to the sequencer (``counted`` is
            driven from the ``counted`` input).
        nb: In(range(NB_MAX + 1)), n-blocks of the GEMM (descriptor ``nb``).
        prep: In(1), strobe: back to block 0 (with the sequencer's ``prep``).
        go: In(1), strobe: first group, ``fin`` cleared (the loops start).
        counted: In(1): the loop holds the sequencer back.
        next_group: In(1), strobe: the loop finished its group (next group or m-block; ``fin`` after
            the last group of the last m-block).
        next_mblock: In(1), strobe: the loop finished its m-block (``fin`` after the last m-block).
        mb: Out, rows of the m-block; nb0: Out(range(NB_MAX + 1)), first n-block of the group; gc: Out, n-blocks in the
            group; mb_one, gc_one: Out(1), ``mb == 1`` and ``gc == 1`` (for
            :class:`~hw.engine.interface.LoopEnd`); last_mblock, last_group: Out(1); ok: Out(1), the
            m-block is in the table; fin: Out(1), the loop is done with the GEMM. A step taken in the
            cycle of ``prep`` or ``go`` wins over them. All of these are registers: ``ok`` rises one
            cycle after the block's entry is written, and the values after a step (next group or next
            m-block) are there in the cycle after it.

    Raises:
        TypeError: ``config`` is not an EngineConfig.
    """

    def members(self, g: Geometry) -> dict:
        return {
            "seq": Out(seq_port_signature(g)), "nb": In(range(g.NB_MAX + 1)),
            "prep": In(1), "go": In(1), "counted": In(1), "next_group": In(1), "next_mblock": In(1),
            "mb": Out(range(g.m_block + 1)), "nb0": Out(range(g.NB_MAX + 1)), "gc": Out(range(g.ACCD + 1)),
            "mb_one": Out(1), "gc_one": Out(1),
            "last_mblock": Out(1), "last_group": Out(1), "ok": Out(1), "fin": Out(1),
        }

    def elaborate(self, platform):
        m = Module()
        g, s = self.geom, self.seq
        idx = Signal(g.SQB)
        nb0 = Signal.like(self.nb0)
        remn = Signal.like(self.nb)        # n-blocks from nb0 to the end
        after = Signal.like(self.nb)       # n-blocks after this group (remn - gc, unless the last group)
        fin = Signal()
        # the outputs are registers, loaded with the values of the state after each edge: candidates
        # from registers and the two table entries (each with its group size), chosen by the steps
        # taken (in one cycle, block index -> table -> group size -> the loop's step -> block index
        # was the engine's critical path); the n-blocks after a group are a register, so the next
        # group's size is one compare away from registers
        mb, gc = Signal.like(self.mb), Signal.like(self.gc)
        last_mblock, last_group, ok = Signal(), Signal(), Signal()
        mb_one, gc_one = Signal(), Signal()
        m.d.comb += [
            s.idx.eq(idx), s.counted.eq(self.counted),
            self.mb.eq(mb), self.last_mblock.eq(last_mblock), self.ok.eq(ok), self.nb0.eq(nb0), self.fin.eq(fin),
            self.gc.eq(gc), self.last_group.eq(last_group), self.mb_one.eq(mb_one), self.gc_one.eq(gc_one),
        ]

        def load(rem, e_mb, e_gb, e_last, e_ok):
            return [mb.eq(e_mb), last_mblock.eq(e_last), ok.eq(e_ok), gc.eq(Mux(rem < e_gb, rem, e_gb)),
                    last_group.eq(rem <= e_gb), after.eq(rem - e_gb),
                    mb_one.eq(e_mb == 1), gc_one.eq(Mux(rem < e_gb, rem == 1, e_gb == 1))]

        here = (s.mb, s.gb, s.last, s.ok)
        there = (s.n_mb, s.n_gb, s.n_last, s.n_ok)
        new_mblock = [idx.eq(idx + 1), nb0.eq(0), remn.eq(self.nb), *load(self.nb, *there)]
        m.d.sync += load(remn, *here)
        with m.If(self.prep):
            m.d.sync += [idx.eq(0), ok.eq(0)]
        with m.If(self.go):
            m.d.sync += [nb0.eq(0), remn.eq(self.nb), fin.eq(0), *load(self.nb, *here)]
        with m.If(self.next_mblock):
            m.d.sync += [*new_mblock, fin.eq(last_mblock)]
        with m.If(self.next_group):
            with m.If(last_group):
                m.d.sync += new_mblock
            with m.Else():
                m.d.sync += [nb0.eq(nb0 + gc), remn.eq(after), *load(after, *here)]
            m.d.sync += fin.eq(last_group & last_mblock)
        return m


def attach_cursor(m, name: str, component, seq, counted=1) -> BlockCursor:
    """Add a :class:`BlockCursor` named ``name`` to module ``m`` for a loop of ``component`` (an engine
    component with ``config``, ``desc``, ``prep`` and ``go`` ports), its ``seq`` port forwarded to
    the component's port ``seq``; returns it."""
    m.submodules[name] = cur = BlockCursor(component.config)
    wiring.connect(m, wiring.flipped(seq), cur.seq)
    d = component.desc
    m.d.comb += [cur.nb.eq(d.nb), cur.prep.eq(component.prep), cur.go.eq(component.go),
                 cur.counted.eq(counted)]
    return cur
