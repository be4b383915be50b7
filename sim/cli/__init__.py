"""The ``mxu`` command: generate Verilog, run GEMMs through the RTL (``mxu matmul``), synthesize
(``mxu synth``), run the main job (``mxu demo``), use the FPGA board (``mxu board``) and measure
how many bugs the regression catches (``mxu mutate``), sweep the design space on Ray (``mxu sweep``),
write a design-review page (``mxu report``) and run sharded GEMMs and the digits MLP on a pod
(``mxu pod``).

One module per command (``generate``, ``matmul``, ``synth``, ``demo``, ``board``, ``mutate``, ``sweep``,
``report`` in ``review``, ``pod`` with ``pod_demo``), each with ``add_parser(sub)`` and ``run(args)``;
shared helpers in ``errors``, ``options``, ``files`` and ``report``. Every subcommand prints ``--help`` with units; bad
input prints one line ``mxu: error: ...`` on stderr and exits with status 2 (no traceback, no partial
output); work longer than a few seconds shows a progress bar on stderr; machine-readable results go to
stdout as JSON.
"""

from __future__ import annotations

import argparse
import sys

from . import board, demo, generate, matmul, mutate, pod, review, sweep, synth
from .errors import Parser, UsageError
from .files import progress_enabled

__all__ = ["main", "build_parser", "UsageError", "COMMANDS"]

#: The subcommands in the order ``mxu --help`` lists them, each a module with add_parser and run.
COMMANDS = {"generate": generate, "matmul": matmul, "synth": synth, "demo": demo, "board": board,
            "mutate": mutate, "sweep": sweep, "report": review, "pod": pod}


def _one_line(text: str) -> str:
    """The message on one line: control characters (a newline in a path) escaped as Python does."""
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


def build_parser() -> argparse.ArgumentParser:
    """The ``mxu`` argument parser with every subcommand."""
    p = Parser(prog="mxu", description="Open TPU-style matrix unit: generate, simulate and check the RTL.")
    sub = p.add_subparsers(dest="command", metavar="COMMAND", parser_class=Parser)
    sub.required = True
    for module in COMMANDS.values():
        module.add_parser(sub)
    return p


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``mxu`` console script; returns the exit status."""
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
        progress_enabled()  # a bad MXU_PROGRESS is an input error, reported before any work
        return COMMANDS[args.command].run(args)
    except UsageError as e:
        print(f"mxu: error: {_one_line(str(e))}", file=sys.stderr)
        return 2
    except RuntimeError as e:  # a tool failed (build, simulation): one line, the log path is in it
        first = str(e).splitlines()[0] if str(e) else type(e).__name__
        print(f"mxu: failed: {_one_line(first)}", file=sys.stderr)
        return 1
    except OSError as e:  # e.g. an unwritable build folder (MXU_BUILD_DIR) or output folder
        where = f": {e.filename}" if e.filename else ""
        print(f"mxu: error: {_one_line(f'{e.strerror or e}{where}')}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("mxu: interrupted", file=sys.stderr)
        return 130
