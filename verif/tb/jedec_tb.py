"""cocotb testbench of the HDL JEDEC checker (:class:`verif.hdl.jedec_checker.JedecCheckerHDL`) on
its own, Verilator and Icarus: replays command traces on its pins, one trace after another from
reset, and records the latched violation of each.

Environment: ``JEDEC_TB_CONFIG`` (JSON): ``traces`` (a JSON file holding a list of traces, each a list
of ``[cycle, cmd, bank_group, bank, row, column]``; a file because a recorded GEMM's trace outgrows
the environment), ``cwl`` (write data is driven at WR + CWL, as the controller does), ``report`` (where the
verdicts go: a JSON list with, per trace, null or the ``v_*`` outputs without the prefix).
"""

from __future__ import annotations

import json
import os

import cocotb
from cocotb.clock import Clock
from cocotb.triggers import FallingEdge, RisingEdge

CFG = json.loads(os.environ.get("JEDEC_TB_CONFIG", "{}"))
ROW = {"ACT": 1, "PRE": 2, "PREA": 3, "REF": 4}
COL = {"RD": 1, "WR": 2}
FIELDS = ("rule", "cycle", "cmd", "prev", "bg", "bank", "row", "col", "distance")


def _nop(dut):
    dut.row_cmd.value = 0
    dut.col_cmd.value = 0
    dut.wdata_valid.value = 0
    dut.finish.value = 0


@cocotb.test()
async def replay_traces(dut):
    cocotb.start_soon(Clock(dut.clk, 10, unit="ns", impl="gpi").start())
    _nop(dut)
    for name in ("row_bg", "row_bank", "row_row", "col_bg", "col_bank", "col_row", "col_column"):
        getattr(dut, name).value = 0  # an address latched with a violation is never X
    out = []
    with open(CFG["traces"]) as f:
        traces = json.load(f)
    for trace in traces:
        dut.rst.value = 1
        await RisingEdge(dut.clk)
        await FallingEdge(dut.clk)
        dut.rst.value = 0
        by_cycle = {}
        for cycle, cmd, bg, bank, row, col in trace:
            by_cycle.setdefault(cycle, []).append((cmd, bg, bank, row, col))
        writes = {c + CFG["cwl"] for c, cmds in by_cycle.items() for x in cmds if x[0] == "WR"}
        for c in range(max(by_cycle) + 1):  # pins change on the falling edge, sampled on the rising
            _nop(dut)
            dut.wdata_valid.value = int(c in writes)
            for cmd, bg, bank, row, col in by_cycle.get(c, []):
                if cmd in ROW:
                    dut.row_cmd.value, dut.row_bg.value, dut.row_bank.value, dut.row_row.value = ROW[cmd], bg, bank, row
                else:
                    dut.col_cmd.value, dut.col_bg.value, dut.col_bank.value = COL[cmd], bg, bank
                    dut.col_row.value, dut.col_column.value = row, col
            await FallingEdge(dut.clk)
        _nop(dut)
        if int(dut.violation.value):
            out.append({f: int(getattr(dut, f"v_{f}").value) for f in FIELDS})
        else:
            out.append(None)
    with open(CFG["report"], "w") as f:
        json.dump(out, f)
