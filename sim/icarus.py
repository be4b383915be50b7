"""Verilog for Icarus: one clocked process per clock and module instead of one per register.

Yosys's ``write_verilog`` (behind Amaranth's ``verilog.convert``) gives every flip-flop its own
process::

    always @(posedge clk)
      count <= \\$12 ;

Icarus schedules each process as a thread and wakes every one of them at every clock edge, so a
design's cost per cycle grows with its register count even when nothing changes: the 4x4 GEMM
simulation top has 1,210 of them. :func:`merge_register_processes` moves the single-assignment
processes of each clock into one ``always @(posedge clk) begin ... end`` at the end of the module.
The assignments are non-blocking and each register has one, so the order of the statements does
not matter and the behaviour is the same; Verilator, which compiles the design, gains nothing from
it, so only Icarus builds use it (:func:`sim.runner.run_cocotb`; ``MXU_ICARUS_MERGE=0`` turns it
off, :func:`enabled`). Measured on a 4x4 bf16 engine with its memory system, one run after the
other on one machine::

    MXU_ICARUS_MERGE=0 python -m bench.sim_speed --sims icarus --memories hdl --array 4x4 --shapes 32x64x32
    python -m bench.sim_speed --sims icarus --memories hdl --array 4x4 --shapes 32x64x32

187 cycles/s without the rewrite, 264 with it (4,688 cycles, bit-exact, the same engine cycles).
"""

from __future__ import annotations

import os
import re

__all__ = ["merge_register_processes", "wake_comb_processes", "rewrite", "enabled"]

# exactly the two-line form Yosys writes for a $dff: the event line, then one complete non-blocking
# assignment on one line
_ONE_REGISTER = re.compile(r"^  always @\(posedge (\S+)\)\n    ([^\n;]*<=[^\n]*;)\n", re.M)
_MODULE = re.compile(r"(?=^module )", re.M)


# the register Yosys's write_verilog adds to every module with combinational processes, for them to
# be sensitive to: "reg \$auto$verilog_backend.cc:2355:dump_module$7  = 0;"
_WAKE_REG = re.compile(r"^  reg (\\\$auto\$verilog_backend\.cc:\d+:dump_module\$\d+ ) = 0;\n", re.M)


def wake_comb_processes(verilog: str) -> str:
    """``verilog`` with every module's wake-up register set to 1 once more after time 0.

    Yosys makes each ``always @*`` process of a module read a register initialized to 0 in its
    declaration, so that the change at time 0 runs every process once. Icarus runs declaration
    initializers as time-0 statements in no fixed order with the processes, so a process that has
    not started waiting yet misses the change; if none of its inputs changes later it never runs,
    and its outputs stay X for the whole simulation. Seen in the ICI transmitter, whose ``flit.valid``
    depends only on a state register that reset leaves at its initial value: the wire clocked the X
    in, the credits went X and the pod's collectives hung. ``initial #0`` runs after every process
    has started waiting (the inactive region), so all of them see it.
    """
    return _WAKE_REG.sub(lambda m: f"{m.group(0)}  initial #0 {m.group(1)} = 1;\n", verilog)


def rewrite(verilog: str) -> str:
    """What an Icarus build compiles: :func:`wake_comb_processes` always (correctness), and
    :func:`merge_register_processes` unless :func:`enabled` says no (speed)."""
    text = wake_comb_processes(verilog)
    return merge_register_processes(text) if enabled() else text


def enabled() -> bool:
    """Whether Icarus builds rewrite their sources: yes unless ``MXU_ICARUS_MERGE`` is 0, no, off or
    false (part of the build cache key)."""
    return os.environ.get("MXU_ICARUS_MERGE", "").strip().lower() not in {"0", "no", "off", "false"}


def _collector(by_clock: dict[str, list[str]]):
    """A ``re.sub`` callback that files each matched process's statement under its clock and removes it."""

    def take(m: re.Match) -> str:
        by_clock.setdefault(m.group(1), []).append(m.group(2))
        return ""

    return take


def merge_register_processes(verilog: str) -> str:
    """``verilog`` with each module's one-register ``always @(posedge clk)`` processes merged into one
    process per clock (placed before ``endmodule``); every other line is kept as it is.

    Args:
        verilog: Verilog text as Yosys writes it (any text: what does not match is kept).

    Returns:
        The rewritten text.
    """
    out = []
    for module in _MODULE.split(verilog):
        by_clock: dict[str, list[str]] = {}

        body = _ONE_REGISTER.sub(_collector(by_clock), module)
        if by_clock:
            end = body.rindex("endmodule")
            merged = "".join(
                f"  always @(posedge {clk}) begin\n" + "".join(f"    {s}\n" for s in stmts) + "  end\n"
                for clk, stmts in by_clock.items()
            )
            body = body[:end] + merged + body[end:]
        out.append(body)
    return "".join(out)
