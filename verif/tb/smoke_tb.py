"""cocotb smoke testbench for the registered adder in ``tests/test_runner.py``.

The design under test adds two unsigned operands and registers the sum::

    ops__a, ops__b : in  [width-1:0]
    y              : out [width:0]     y <= ops__a + ops__b   (on each rising clk edge)
    clk, rst       : clock, synchronous active-high reset (y <= 0)

Configuration comes from the JSON object in ``$MXU_TB_CONFIG`` (all keys optional):

``width`` (int, default 8)
    Operand width in bits; checked against the DUT's port widths.
``beats`` (int, default 200)
    Random operand pairs to check after the corner cases.
``expect_offset`` (int, default 0)
    Added to the expected sum. A non-zero value makes ``adder_matches_model`` fail on purpose;
    the runner's tests use it to prove that a failing cocotb test is reported as failed.
"""

from __future__ import annotations

import json
import os
import random

import cocotb
from cocotb.clock import Clock
from cocotb.triggers import FallingEdge

CLOCK_PERIOD_NS = 10


def _config() -> dict:
    config = {"width": 8, "beats": 200, "expect_offset": 0}
    raw = os.environ.get("MXU_TB_CONFIG", "")
    if raw:
        config.update(json.loads(raw))
    return config


async def _start_and_reset(dut, cycles: int = 2) -> None:
    """Start the clock, hold reset for *cycles* clock cycles, release it on a falling edge."""
    cocotb.start_soon(Clock(dut.clk, CLOCK_PERIOD_NS, unit="ns").start())
    dut.rst.value = 1
    dut.ops__a.value = 0
    dut.ops__b.value = 0
    for _ in range(cycles):
        await FallingEdge(dut.clk)
    dut.rst.value = 0


@cocotb.test()
async def reset_clears_output(dut) -> None:
    """y is 0 after reset, even with non-zero operands held during reset."""
    cocotb.start_soon(Clock(dut.clk, CLOCK_PERIOD_NS, unit="ns").start())
    dut.rst.value = 1
    dut.ops__a.value = 3
    dut.ops__b.value = 4
    await FallingEdge(dut.clk)
    await FallingEdge(dut.clk)
    got = dut.y.value.to_unsigned()
    assert got == 0, f"y = {got} after reset, expected 0"
    # Reset released: the next edge registers 3 + 4.
    dut.rst.value = 0
    await FallingEdge(dut.clk)
    got = dut.y.value.to_unsigned()
    assert got == 7, f"y = {got} one cycle after reset with 3 + 4, expected 7"


@cocotb.test()
async def adder_matches_model(dut) -> None:
    """Corner cases, then random operands: y equals a + b exactly, one cycle later."""
    config = _config()
    width = int(config["width"])
    assert len(dut.ops__a) == width, f"ops__a is {len(dut.ops__a)} bits, config says {width}"
    assert len(dut.y) == width + 1, f"y is {len(dut.y)} bits, expected {width + 1}"
    top = (1 << width) - 1
    pairs = [(0, 0), (top, top), (top, 1), (1, top), (1 << (width - 1), 1 << (width - 1)), (0, top)]
    pairs += [(random.randint(0, top), random.randint(0, top)) for _ in range(int(config["beats"]))]

    await _start_and_reset(dut)
    for a, b in pairs:
        # Drive on the falling edge; the rising edge in between registers the sum.
        dut.ops__a.value = a
        dut.ops__b.value = b
        await FallingEdge(dut.clk)
        got = dut.y.value.to_unsigned()
        expected = a + b + int(config["expect_offset"])
        assert got == expected, f"{a} + {b}: y = {got}, expected {expected}"
    dut._log.info("checked %d operand pairs at width %d", len(pairs), width)
