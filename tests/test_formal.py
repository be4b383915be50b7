"""Formal proofs of the stream rules (``verif.hdl.stream_rules``, ``verif.stream_proofs``) with
SymbiYosys and Yices: every listed component keeps the rules on its output streams by k-induction
(every cycle, not a bound), the rules' covers are reachable (not vacuous), and designs that break a
rule on purpose are refused with a counterexample. And the MXU's weight double buffer
(``verif.hdl.weight_tiles``): no activation beat meets another tile's weights, bounded to 20 cycles,
with an array that commits too early refused."""

from __future__ import annotations

import pytest
from amaranth.hdl import Module, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from hw.mxu import MXU, MXUConfig
from sim import formal
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
