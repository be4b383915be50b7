"""Verilog port tables and manifests for generated components (no tool flows here: see ``sim``)."""

from __future__ import annotations

import dataclasses

from amaranth.hdl import Shape
from amaranth.lib import wiring

__all__ = ["port_table", "manifest"]


def port_table(component: wiring.Component, meanings: dict[str, str] | None = None,
               synchronous: bool = True) -> list[dict]:
    """The Verilog ports Amaranth emits for ``component``, in signature order.

    Each entry: ``name`` (signature path joined with ``__``), ``direction`` ("input"/"output"),
    ``width_bits``, ``signed``, ``meaning`` (from ``meanings`` by name, else ""). ``clk`` and ``rst``
    (synchronous, active high) come first when ``synchronous``.
    """
    meanings = meanings or {}
    rows = []
    if synchronous:
        rows.append({"name": "clk", "direction": "input", "width_bits": 1, "signed": False,
                     "meaning": "clock; every register samples on its rising edge"})
        rows.append({"name": "rst", "direction": "input", "width_bits": 1, "signed": False,
                     "meaning": "synchronous reset, active high"})
    for path, member, _value in component.signature.flatten(component):
        name = "__".join(str(p) for p in path)
        direction = "input" if member.flow == wiring.In else "output"
        shape = Shape.cast(member.shape)
        rows.append({"name": name, "direction": direction, "width_bits": shape.width,
                     "signed": shape.signed, "meaning": meanings.get(name, "")})
    return rows


def manifest(component, config, *, name: str, latency_cycles: int, meanings: dict[str, str],
             extra: dict | None = None) -> dict:
    """JSON-ready description of a generated design: module name, configuration parameters,
    ports, latency in cycles, plus ``extra`` (tool versions and the like, added by the caller)."""
    return {
        "module": name,
        "parameters": dataclasses.asdict(config),
        "latency_cycles": latency_cycles,
        "ports": port_table(component, meanings, synchronous=latency_cycles > 0),
        **(extra or {}),
    }
