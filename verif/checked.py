"""How many result values a bench compared with its golden model, reported across processes.

A cocotb bench runs in the simulator's process, not in pytest's, so it cannot add to the pytest
report directly. Instead it appends its counts to the file named by the environment variable
:data:`ENV`; the test suite (``tests/conftest.py``) points that variable at a fresh file around each
test, which the simulator inherits, and adds the file's totals to the test's record
(``<build>/verification/last_run.json``, shown by ``mxu report``). Outside the test suite the
variable is unset and :func:`count` does nothing, so the benches, ``bench/`` and the CLI run
unchanged.
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["ENV", "UNITS", "count", "totals"]

#: environment variable naming the file the counts are appended to
ENV = "MXU_CHECKED_FILE"

#: what a count counts: ``values`` are result elements (one MAC output, PE output, MXU output
#: column, GEMM element); ``bytes`` are memory bytes read back and compared with a shadow memory
UNITS = ("values", "bytes")


def count(n: int, unit: str = "values") -> None:
    """Add ``n`` compared items of ``unit`` to the running test's count (no-op outside the suite).

    Raises:
        ValueError: ``unit`` is not one of :data:`UNITS`, or ``n`` is negative.
    """
    if unit not in UNITS:
        raise ValueError(f"unit {unit!r}: allowed values are {', '.join(UNITS)}")
    if n < 0:
        raise ValueError(f"n must be >= 0, got {n}")
    path = os.environ.get(ENV)
    if path:
        # one short O_APPEND write per call: safe when several processes share the file
        with open(path, "a") as f:
            f.write(f"{unit} {int(n)}\n")


def totals(path: Path) -> dict[str, int]:
    """Sum the counts in ``path`` per unit (``{}`` when the file does not exist)."""
    out: dict[str, int] = {}
    try:
        text = Path(path).read_text()
    except FileNotFoundError:
        return out
    for line in text.splitlines():
        unit, _, n = line.partition(" ")
        if unit in UNITS and n.strip().isdigit():
            out[unit] = out.get(unit, 0) + int(n)
    return out
