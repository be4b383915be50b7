"""Verilog port tables and manifests for generated components (no tool flows here: see ``sim``)."""

from __future__ import annotations

import dataclasses
import functools
import re

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


def mxu_verilog(config, name: str = "mxu") -> str:
    """Verilog text of an MXU in three modules: ``<name>_pe`` (one PE), ``<name>_row`` (C instances
    of it) and ``name`` (the edge logic and R instances of the row). Each module is converted once,
    so generation time and file size grow with R + C plus the instance lists, not with R * C
    flattened PEs.

    Needs Amaranth's Yosys backend (set ``AMARANTH_USE_YOSYS=builtin``; ``sim.runner`` does).
    """
    from amaranth.back import verilog

    from .mxu import MXU

    row_name = f"{name}_row"
    pe_text, row_text = _pe_and_row_verilog(config, name)
    # emit_src=False: no (* src *) attribute per wire (see _pe_and_row_verilog)
    top_text = verilog.convert(MXU(config, pe_blackbox=True, row_name=row_name), name=name, emit_src=False)
    return "\n".join((pe_text, row_text, top_text))


def _pe_and_row_verilog(config, name: str) -> tuple[str, str]:
    """Verilog of ``<name>_pe`` (one PE, marked for Verilator's hierarchical verilation) and
    ``<name>_row`` (C instances of it) for the MXU ``config``; neither keeps ``(* top = 1 *)``."""
    from amaranth.back import verilog

    from .mxu import MXURow
    from .pe import PE

    pe_name, row_name = f"{name}_pe", f"{name}_row"
    # emit_src=False: no (* src *) attribute per wire (a fifth of the text at 128 x 128, and a
    # Verilator rebuild whenever a Python line moves).
    pe_text = verilog.convert(PE(config.pe), name=pe_name, emit_src=False)
    row_text = verilog.convert(MXURow(config.pe, config.cols, pe_blackbox=True, pe_name=pe_name), name=row_name,
                               emit_src=False)
    # Mark the PE for Verilator's hierarchical verilation (--hierarchical): the PE is compiled once
    # instead of once per instance. Other tools read the marker as a comment.
    head = pe_text.index(f"module {pe_name}(")
    body = pe_text.index(";\n", head) + 2
    pe_text = pe_text[:body] + "  /*verilator hier_block*/\n" + pe_text[body:]
    # Amaranth marks every converted module (* top = 1 *); only the real top may keep it, or Yosys's
    # `hierarchy` picks the PE as the top and deletes the array.
    pe_text = re.sub(r"\(\* top = +1 +\*\)\n", "", pe_text)
    row_text = re.sub(r"\(\* top = +1 +\*\)\n", "", row_text)
    return pe_text, row_text


def verilog_with_mxu(make, mxu_config, name: str, hbm_config=None) -> str:
    """Verilog of a component that holds an MXU, with the MXU's PE and row as separate modules
    (``<name>_pe``, ``<name>_row``) as :func:`mxu_verilog` does; ``make(row_name)`` builds the
    component with ``pe_blackbox=True`` and that row module name (so the PE is compiled once, not
    once per instance).

    With ``hbm_config`` (the component holds an HBM controller of that configuration) the pseudo-channel
    controller is one more module, ``<name>_pc``, instantiated once per pseudo-channel:
    ``make(row_name, ctrl_name)`` then passes ``ctrl_name`` on to the
    :class:`~hw.hbm.axi.HBMController`. The controller is most of a GEMM top's Verilog (about 1 MB
    per pseudo-channel), so it is converted once, and its text is reused by every design of the
    process with the same configuration.
    """
    from amaranth.back import verilog

    pe_text, row_text = _pe_and_row_verilog(mxu_config, name)
    parts = [pe_text, row_text]
    if hbm_config is None:
        top = make(f"{name}_row")
    else:
        parts.append(_pc_verilog(hbm_config, f"{name}_pc"))
        top = make(f"{name}_row", f"{name}_pc")
    parts.append(verilog.convert(top, name=name, emit_src=False))
    return "\n".join(parts)


@functools.lru_cache(maxsize=8)
def _pc_verilog(hbm_config, module_name: str) -> str:
    """Verilog of one :class:`~hw.hbm.controller.PseudoChannelController` as module ``module_name``
    (without ``(* top = 1 *)``; its submodules are ``module_name.<part>``)."""
    from amaranth.back import verilog

    from .hbm.controller import PseudoChannelController

    text = verilog.convert(PseudoChannelController(hbm_config), name=module_name, emit_src=False)
    return re.sub(r"\(\* top = +1 +\*\)\n", "", text)


def engine_verilog(config, name: str = "engine") -> str:
    """Verilog text of :class:`hw.engine.GEMMEngine` alone (its AXI4 masters and AXI4-Lite slave
    as ports), PE and row as separate modules."""
    from .engine import GEMMEngine

    return verilog_with_mxu(lambda row: GEMMEngine(config, pe_blackbox=True, row_name=row), config.mxu, name)


def gemm_top_verilog(config, name: str = "gemm") -> str:
    """Verilog text of :class:`hw.top.GEMMTop` (engine + HBM controller) with the MXU's PE and row
    as separate modules (``<name>_pe``, ``<name>_row``), as :func:`mxu_verilog` does, and the
    pseudo-channel controller as module ``<name>_pc``."""
    from .top import GEMMTop

    def make(row, ctrl):
        return GEMMTop(config, pe_blackbox=True, row_name=row, ctrl_name=ctrl)

    return verilog_with_mxu(make, config.mxu, name, hbm_config=config.hbm)


def board_top_verilog(config, name: str = "board") -> str:
    """Verilog text of :class:`hw.board.BoardTop` (engine + HBM controller + BRAM emulators + UART
    bridge) with the MXU's PE and row and the pseudo-channel controller as separate modules, as
    :func:`gemm_top_verilog` does."""
    from .board import BoardTop

    def make(row, ctrl):
        return BoardTop(config, pe_blackbox=True, row_name=row, ctrl_name=ctrl)

    return verilog_with_mxu(make, config.engine.mxu, name, hbm_config=config.engine.hbm)
