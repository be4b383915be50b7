"""Simulation models of vendor primitives the generated Verilog may instantiate.

:data:`MULT18X18D` is the ECP5 sysDSP multiplier (``hw.arith.dsp``, ``multiplier="ecp5"``), modelled for
the subset the PEs use. :func:`models_for` lists the models a Verilog text needs, for a simulator's
source list; synthesis uses the vendor's own definitions instead.
"""

from __future__ import annotations

import re
from pathlib import Path

__all__ = ["MULT18X18D", "models_for"]

#: Verilog model of the ECP5 ``MULT18X18D`` (18 x 18 multiply, optional output register on CLK0).
MULT18X18D = Path(__file__).with_name("MULT18X18D.v")

_MODELS = {"MULT18X18D": MULT18X18D}


def models_for(verilog: str | Path) -> list[Path]:
    """The model files of the primitives instantiated in ``verilog`` (text, or a file to read), in a
    fixed order; empty for a design of plain Verilog."""
    text = Path(verilog).read_text() if isinstance(verilog, Path) else verilog
    return [path for name, path in _MODELS.items() if re.search(rf"^\s*{name}\b", text, re.M)]
