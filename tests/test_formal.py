# amaranth: UnusedElaboratable=no
"""Formal proofs of the stream rules (``verif.hdl.stream_rules``, ``verif.stream_proofs``) with
SymbiYosys and Yices: every listed component keeps the rules on its output streams by k-induction
(every cycle, not a bound), the rules' covers are reachable (not vacuous), and designs that break a
rule on purpose are refused with a counterexample. The MXU's weight double buffer
(``verif.hdl.weight_tiles``): no activation beat meets another tile's weights, bounded to 20 cycles,
with an array that commits too early refused. The HBM request queue (``verif.hdl.queue_order``):
nothing lost or duplicated (k-induction), same-address order and the age cap (bounded to 12 cycles),
each refusing a queue broken its way. The HBM read response path (``verif.hdl.response_order``):
every RD answered once, in order, with its tag and burst, bounded to 20 cycles, refusing a path
with a credit that overflows and one that answers with the wrong tag."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from amaranth.hdl import Module, Signal
from amaranth.lib import fifo, stream, wiring
from amaranth.lib.wiring import In, Out

from hw.board.top import BoardTop
from hw.hbm.config import HBMConfig
from hw.hbm.read_path import ReadResponsePath
from hw.hbm.request_queue import RequestQueue
from hw.mxu import MXU, MXUConfig
from hw.skid_buffer import SkidBuffer
from hw.stream_register import StreamRegister
from sim import formal
from verif.hbm_sim import STRESS
from verif.hdl import fifo_order, queue_order, response_order, stream_order
from verif.hdl.fifo_order import FIFOOrder, design_fifos
from verif.hdl.queue_order import QueueOrder
from verif.hdl.response_order import ResponseOrder
from verif.hdl.stream_order import StreamOrder
from verif.hdl.stream_rules import StreamRules, stream_ports
from verif.hdl.weight_tiles import WeightTiles
from verif.stream_proofs import PROOFS


@pytest.mark.parametrize("name", list(PROOFS))
def test_stream_rules_proven_by_induction(name, tmp_path):
    proof = PROOFS[name]
    result = formal.prove(StreamRules(proof.make(), assume=proof.assume), tmp_path, proof.depth, cover_depth=16)
    print(f"{name}: {result}")
    assert result["verdict"] == "proven", result
    assert result["covered"] is True, result


class _Source(wiring.Component):
    """A stream source counting up; ``flaw`` picks a way to break the stream rules: ``None`` (a
    correct source: a new beat only after a transfer), ``"withdraw"`` (valid drops after one
    cycle whether taken or not), ``"payload"`` (the payload counts while stalled)."""

    def __init__(self, flaw: str | None):
        self._flaw = flaw
        super().__init__({"out": Out(stream.Signature(4)), "start": In(1)})

    def elaborate(self, platform):
        m = Module()
        count, valid = Signal(4), Signal()
        m.d.comb += [self.out.valid.eq(valid), self.out.payload.eq(count)]
        with m.If(self.out.valid & self.out.ready):
            m.d.sync += [count.eq(count + 1), valid.eq(0)]
        with m.Elif(self.start):
            m.d.sync += valid.eq(1)
        if self._flaw == "withdraw":
            with m.If(valid & ~self.out.ready):
                m.d.sync += valid.eq(0)
        if self._flaw == "payload":
            with m.If(valid & ~self.out.ready):
                m.d.sync += count.eq(count + 1)
        return m


def test_a_correct_source_is_proven_and_covered(tmp_path):
    result = formal.prove(StreamRules(_Source(None)), tmp_path, 4, cover_depth=8)
    assert (result["verdict"], result["covered"]) == ("proven", True), result


@pytest.mark.parametrize("flaw", ["withdraw", "payload"])
def test_broken_sources_are_refused(flaw, tmp_path):
    result = formal.prove(StreamRules(_Source(flaw)), tmp_path, 4)
    assert result["verdict"] == "failed", result
    log = (tmp_path / "bmc" / "logfile.txt").read_text()
    assert "Assert failed" in log and (tmp_path / "bmc" / "engine_0" / "trace.vcd").is_file()


def test_contract_assumptions_are_needed(tmp_path):
    """Without its environment's contract (a new job only when idle) the write-data side's W
    channel does break the rules: the assumption carries weight, so it is listed with its reason."""
    proof = PROOFS["engine-write-data"]
    assert proof.why
    result = formal.prove(StreamRules(proof.make()), tmp_path, proof.depth)
    assert result["verdict"] == "failed", result


def test_stream_ports_and_harness_errors():
    assert stream_ports(_Source(None).signature) == [("out", wiring.Flow.Out)]
    no_ready = wiring.Signature({"out": Out(stream.Signature(4, always_ready=True))})

    class Plain(wiring.Component):
        def __init__(self):
            super().__init__(no_ready)

        def elaborate(self, platform):
            return Module()

    with pytest.raises(ValueError, match="has no stream port with ready"):
        StreamRules(Plain())
    with pytest.raises(ValueError, match="only: x is not a stream port of _Source"):
        StreamRules(_Source(None), only=("x",))


class _EarlyCommit(MXUConfig):
    """An MXU configuration whose commit waits one step after a swap instead of (R-1)(L-1): the
    next tile's weights reach a PE's shadow register before the swap wavefront has copied the
    current tile's out of it."""

    @property
    def commit_gap_cycles(self):
        return 1


# Depth: the cover (seven output beats while the third tile's weights load, so a commit has met a
# swap wavefront in flight) is reached at step 17 of a 2x2 array with 3 stages; the too-early commit
# below is refused within 16. k-induction cannot close: stationary weights keep their tags for ever.
WEIGHT_TILES_DEPTH = 20


def test_weight_double_buffer_never_mixes_tiles(tmp_path):
    """Every activation beat of tile t meets tile t's weights in every PE of the 2x2 int8 array with
    3 stages (a swap never mixes two tiles in a column; a commit never overwrites a tile in use):
    no violation within 20 cycles of any stimulus, and the cover reached."""
    result = formal.prove(
        WeightTiles(MXU(MXUConfig(2, 2, "int8", "ftz", 3))),
        tmp_path,
        WEIGHT_TILES_DEPTH,
        cover_depth=WEIGHT_TILES_DEPTH,
        induction=False,
    )
    assert (result["verdict"], result["covered"]) == ("bounded", True), result


def test_a_commit_too_early_is_refused(tmp_path):
    """The same harness refuses an array whose commit comes one step after a swap (a proof that
    cannot fail is caught)."""
    cfg = _EarlyCommit(2, 2, "int8", "ftz", 3)
    assert cfg.commit_gap_cycles == 1
    result = formal.prove(WeightTiles(MXU(cfg)), tmp_path, WEIGHT_TILES_DEPTH, induction=False)
    assert result["verdict"] == "failed", result
    log = (tmp_path / "bmc" / "logfile.txt").read_text()
    assert "Assert failed in top: " in log and "weight_tiles.py" in log  # the tile assertion, not another


def _refused_by(result: dict, tmp_path, harness, message: str) -> None:
    """The proof failed, and the first failed assertion is the one of ``harness`` (a module) that
    carries ``message`` (on the ``Assert(`` line or the line after it)."""
    assert result["verdict"] == "failed", result
    hit = re.search(r"Assert failed in top: (\S+):(\d+)", (tmp_path / "bmc" / "logfile.txt").read_text())
    source = Path(harness.__file__)
    assert hit and Path(hit[1]).name == source.name, hit
    line = int(hit[2])
    assert message in "\n".join(source.read_text().splitlines()[line - 1 : line + 1]), (line, message)


# ---------------------------------------------------------------- the HBM request queue
def _queue_config(depth: int) -> HBMConfig:
    """A small queue for the proofs: 2 rows of 2 columns (every bank field still decoded), tags of 3
    bits, an age cap of 3 cycles so the strict order comes within the bounded depth."""
    return HBMConfig(pseudo_channels=1, queue_depth=depth, rows=2, columns=2, tag_bits=3, age_cap_cycles=3)


class _DropsOnRetire(RequestQueue):
    """Loses the request that enters in a cycle in which another leaves."""

    def elaborate(self, platform):
        m = super().elaborate(platform)
        with m.If(self.retire.any()):
            m.d.sync += self.view.valid.eq(self.view.valid & ~self.retire)
        return m


class _NoHazards(RequestQueue):
    """Calls every slot column-ready: a same-address request may overtake."""

    def elaborate(self, platform):
        m = super().elaborate(platform)
        m.d.comb += self.view.col_ready.eq(-1)
        return m


class _NoAgeCap(RequestQueue):
    """Allows every slot whatever the ages: the age cap is never enforced."""

    def elaborate(self, platform):
        m = super().elaborate(platform)
        m.d.sync += self.view.allow.eq(-1)
        return m


def test_request_queue_loses_and_duplicates_nothing_by_induction(tmp_path):
    """Queue of 8: the occupied slots are always the requests accepted less those retired, and a
    followed request sits in exactly one slot, unchanged, from entry to its column command. Proven by
    k-induction (every cycle)."""
    result = formal.prove(QueueOrder(RequestQueue(_queue_config(8)), ("kept",)), tmp_path, 8)
    assert result["verdict"] == "proven", result


# Depth: a queue of 4 fills in 4 cycles, a request then reaches the cap of 3 and the strict order
# (a register) one cycle later, and a request leaves: 4 + 3 + 1 + 1 = 9 cycles, and the covers (a
# write leaving before a same-address request behind it; an aged T1 leaving a full queue) are reached
# within them. 12 leaves room for a second round. Induction cannot close: the hazard and age
# registers of a state that no reset reaches are not in the view the harness sees.
QUEUE_DEPTH = 12


def test_request_queue_keeps_same_address_order_and_the_age_cap(tmp_path):
    """Queue of 4, age cap 3: a same-address request never overtakes (one of the two a write), and
    after the cap only older requests go first, with nothing lost; no violation within 12 cycles of
    any stimulus, covers reached."""
    result = formal.prove(
        QueueOrder(RequestQueue(_queue_config(4))), tmp_path, QUEUE_DEPTH, cover_depth=QUEUE_DEPTH, induction=False
    )
    assert (result["verdict"], result["covered"]) == ("bounded", True), result


@pytest.mark.parametrize(
    ("flawed", "prop", "message"),
    [
        (_DropsOnRetire, "kept", "occupied slots differ"),
        (_NoHazards, "order", "overtook"),
        (_NoAgeCap, "age", "reached the age cap"),
    ],
)
def test_broken_request_queues_are_refused(flawed, prop, message, tmp_path):
    """Each property refuses a queue broken its way, with its own assertion (a proof that cannot fail
    is caught)."""
    result = formal.prove(QueueOrder(flawed(_queue_config(4)), (prop,)), tmp_path, QUEUE_DEPTH, induction=False)
    _refused_by(result, tmp_path, queue_order, message)


def test_queue_harness_errors():
    with pytest.raises(ValueError, match="properties must be a non-empty subset"):
        QueueOrder(RequestQueue(_queue_config(4)), ("speed",))
    with pytest.raises(ValueError, match="tag_bits >= 2; got 1"):
        QueueOrder(RequestQueue(HBMConfig(pseudo_channels=1, queue_depth=4, tag_bits=1)))


# ---------------------------------------------------------------- the HBM read response path
class _CreditAlways(ReadResponsePath):
    """Allows a RD whatever the buffer holds: under back-pressure a burst finds the buffer full."""

    def elaborate(self, platform):
        m = super().elaborate(platform)
        m.d.sync += self.rd_credit.eq(1)
        return m


class _TagFromPins(ReadResponsePath):
    """Answers with the tag on the pins instead of the one its RD waited with."""

    def elaborate(self, platform):
        m = super().elaborate(platform)
        m.d.comb += self.rsp.payload.tag.eq(self.tag)
        return m


# Depth: with CL 7 and a buffer of 7 (the stress channel's timings), seven back-to-back RDs (one per
# 2 cycles) fill it by cycle 13, and an eighth, which only a broken credit allows, is on the pins by
# cycle 16; the cover (the followed RD answered after the buffer was full and stalled) is reached
# within 20. Induction cannot close: the FIFOs' pointers of a state no reset reaches are not in the
# harness's view.
RESPONSE_DEPTH = 20


def test_read_path_answers_every_rd_once_in_order(tmp_path):
    """The read response path of the stress channel (CL 7, 7 entries) under any back-pressure: the
    credit never lets the RDs outstanding exceed the buffer, and every response carries its RD's tag
    and burst in RD order; no violation within 20 cycles, cover reached."""
    result = formal.prove(
        ResponseOrder(ReadResponsePath(STRESS)),
        tmp_path,
        RESPONSE_DEPTH,
        cover_depth=RESPONSE_DEPTH + 4,
        induction=False,
    )
    assert (result["verdict"], result["covered"]) == ("bounded", True), result


@pytest.mark.parametrize(
    ("flawed", "message"),
    [(_CreditAlways, "more RDs outstanding than buffer entries"), (_TagFromPins, "another RD's tag")],
)
def test_broken_read_paths_are_refused(flawed, message, tmp_path):
    result = formal.prove(ResponseOrder(flawed(STRESS)), tmp_path, RESPONSE_DEPTH, induction=False)
    _refused_by(result, tmp_path, response_order, message)


# ---------------------------------------------------------------- the design's FIFOs
class _ZeroRead(fifo.SyncFIFOBuffered):
    """Returns 0 instead of the entry's data."""

    def elaborate(self, platform):
        m = super().elaborate(platform)
        m.d.comb += self.r_data.eq(0)
        return m


class _RefusesLastEntry(fifo.SyncFIFO):
    """Refuses a write while one entry is still free."""

    def elaborate(self, platform):
        m = super().elaborate(platform)
        with m.If(self.level == self.depth - 1):
            m.d.comb += self.w_rdy.eq(0)
        return m


def _fifo_proof(queue, tmp_path, cover: bool = True) -> dict:
    """FIFOOrder bounded to depth + 3 cycles: a fill to full, the followed entry read out, and a
    pointer wrap (induction cannot close: the memory of a state no reset reaches is not in view)."""
    steps = queue.depth + 3
    return formal.prove(
        FIFOOrder(queue, data_bits=1),
        tmp_path,
        steps,
        cover_depth=steps if cover else 0,
        induction=False,
        memory_map=True,
    )


_DESIGN_FIFOS = {
    ("SyncFIFOBuffered", 32, 16): ["top.engine.weight_loader.fifo"],
    ("SyncFIFOBuffered", 8, 8): ["top.engine.write_address.wlen"],
    ("SyncFIFOBuffered", 288, 16): ["top.engine.write_data.fifo"],
    ("SyncFIFO", 288, 4): [f"top.hbm.pc{k}_ctrl.write_path.wdata_fifo" for k in range(2)],
    ("SyncFIFO", 8, 11): [f"top.hbm.pc{k}_ctrl.read_path.tag_fifo" for k in range(2)],
    ("SyncFIFOBuffered", 264, 11): [f"top.hbm.pc{k}_ctrl.read_path.rsp_fifo" for k in range(2)],
    ("SyncFIFOBuffered", 8, 64): ["top.rx_fifo"],
}


def test_the_design_fifos_are_found():
    """The board top (engine, HBM controller with two pseudo-channels, UART) holds these FIFOs, each
    proven below."""
    assert design_fifos(BoardTop()) == _DESIGN_FIFOS


# The FIFOs of at most 11 entries take seconds each; the 16- and 64-entry ones minutes (``--soak``).
@pytest.mark.parametrize(
    "kind",
    [pytest.param(k, marks=[pytest.mark.soak] if k[2] > 11 else []) for k in _DESIGN_FIFOS],
    ids=lambda k: f"{k[0]}-{k[1]}x{k[2]}",
)
def test_design_fifo_keeps_order_and_loses_nothing(kind, tmp_path):
    cls, width, depth = kind
    result = _fifo_proof(getattr(fifo, cls)(width=width, depth=depth), tmp_path)
    assert (result["verdict"], result["covered"]) == ("bounded", True), result


@pytest.mark.parametrize(
    ("flawed", "message"), [(_ZeroRead, "another write's data"), (_RefusesLastEntry, "a write refused with room")]
)
def test_broken_fifos_are_refused(flawed, message, tmp_path):
    result = _fifo_proof(flawed(width=8, depth=4), tmp_path, cover=False)
    _refused_by(result, tmp_path, fifo_order, message)


def test_fifo_harness_errors():
    with pytest.raises(TypeError, match="must be an amaranth.lib.fifo.SyncFIFO or SyncFIFOBuffered"):
        FIFOOrder(object())
    with pytest.raises(ValueError, match="data_bits must be 1..8; got 9"):
        FIFOOrder(fifo.SyncFIFO(width=8, depth=4), data_bits=9)


# ---------------------------------------------------------------- register slices on streams
class _SkidAlwaysReady(SkidBuffer):
    """Takes a transfer even with both registers full: the skid register's transfer is overwritten."""

    def elaborate(self, platform):
        m = super().elaborate(platform)
        m.d.comb += self.i.ready.eq(1)
        return m


class _SkidBypassed(SkidBuffer):
    """Parks a stalled transfer, then lets the next one overtake it: order is lost."""

    def elaborate(self, platform):
        m = Module()
        skid_valid, skid = Signal(), Signal(self.shape)
        moves = ~self.o.valid | self.o.ready
        m.d.comb += self.i.ready.eq(~skid_valid | moves)
        with m.If(moves):
            with m.If(self.i.valid):  # the new transfer goes first, the parked one waits
                m.d.sync += [self.o.payload.eq(self.i.payload), self.o.valid.eq(1)]
            with m.Elif(skid_valid):
                m.d.sync += [self.o.payload.eq(skid), self.o.valid.eq(1), skid_valid.eq(0)]
            with m.Else():
                m.d.sync += self.o.valid.eq(0)
        with m.Elif(self.i.valid & ~skid_valid):
            m.d.sync += [skid.eq(self.i.payload), skid_valid.eq(1)]
        return m


# 10 cycles: the slices hold at most two transfers, so fill to full, a stall, the drain and a
# refill (every control state and every order of the two registers) come within it.
_SLICE_DEPTH = 10


@pytest.mark.parametrize(
    ("make", "capacity", "full_ready"),
    [(lambda: SkidBuffer(4), 2, True), (lambda: StreamRegister(4), 1, False)],
    ids=["skid-buffer", "stream-register"],
)
def test_register_slices_keep_order_and_lose_nothing(make, capacity, full_ready, tmp_path):
    result = formal.prove(
        StreamOrder(make(), capacity, full_ready=full_ready),
        tmp_path,
        _SLICE_DEPTH,
        cover_depth=_SLICE_DEPTH,
        induction=False,
    )
    assert (result["verdict"], result["covered"]) == ("bounded", True), result


@pytest.mark.parametrize(
    ("flawed", "message"),
    [
        (_SkidAlwaysReady, "more transfers held than the capacity"),
        (_SkidBypassed, "a transfer out carried another transfer's payload"),
    ],
)
def test_broken_skid_buffers_are_refused(flawed, message, tmp_path):
    # without the ready check: the flaw must show in what is held and what comes out
    result = formal.prove(StreamOrder(flawed(4), 2), tmp_path, _SLICE_DEPTH, induction=False)
    _refused_by(result, tmp_path, stream_order, message)


def test_stream_order_harness_errors():
    with pytest.raises(TypeError, match="dut must have stream ports i and o"):
        StreamOrder(object(), 1)
    with pytest.raises(ValueError, match="capacity must be 1..8; got 0"):
        StreamOrder(SkidBuffer(4), 0)
    with pytest.raises(ValueError, match="data_bits must be 1..4; got 5"):
        StreamOrder(SkidBuffer(4), 2, data_bits=5)
