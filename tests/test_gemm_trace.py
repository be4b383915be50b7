"""``bench/gemm_trace.py``'s reduction of a GEMM trace, on a hand-made trace (no simulator)."""

import numpy as np
import pytest

from bench.gemm_trace import reduce_trace
from hw.hbm.controller import ColCmd, RowCmd

ACT, PRE, PREA, REF = RowCmd.ACT.value, RowCmd.PRE.value, RowCmd.PREA.value, RowCmd.REF.value
RD, WR = ColCmd.RD.value, ColCmd.WR.value


def _samples(cycles, a_arvalid, a_rvalid):
    s = np.zeros((cycles, 13), np.int64)
    s[:, 0] = np.arange(cycles)
    s[list(a_arvalid), 7] = 1
    s[list(a_rvalid), 8] = 1
    return s


def test_counts_per_pseudo_channel_and_read_span():
    cmds = np.array(
        [
            [5, 0, ACT, 0],
            [10, 0, 0, RD],
            [12, 1, 0, RD],
            [14, 0, PRE, RD],
            [15, 1, PREA, 0],
            [16, 1, REF, 0],
            [18, 0, 0, WR],
            [20, 1, 0, RD],
            [40, 0, 0, RD],  # RD at 40: after the span
        ]
    )
    s = _samples(50, a_arvalid=range(8, 22), a_rvalid=[25, 26, 30])
    r = reduce_trace(cmds, s, 2)
    assert r["per_pseudo_channel"] == [
        {"act": 1, "pre": 1, "ref": 0, "rd": 3, "wr": 1},
        {"act": 0, "pre": 1, "ref": 1, "rd": 2, "wr": 0},
    ]
    assert (r["first_rd_cycle"], r["last_a_beat_cycle"], r["span_cycles"]) == (10, 30, 20)
    assert r["rd_bursts_in_span"] == 4 and r["rd_bursts_per_cycle"] == 0.2
    assert r["a_beats_per_cycle"] == 0.15 and r["a_arvalid_cycles_in_span"] == 12


def test_a_trace_without_reads_is_refused():
    with pytest.raises(ValueError, match="no RD command"):
        reduce_trace(np.array([[3, 0, ACT, 0]]), _samples(10, [], [4]), 1)
