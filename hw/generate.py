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


_text_cache = None


def set_text_cache(cache) -> None:
    """Install a cache for the Verilog of the modules a top instantiates (the HBM controller, the
    JEDEC checkers): ``cache(name, key, make)`` returns the text of module ``name`` for ``key`` (a
    value with a deterministic ``repr``), calling ``make()`` only when it has none. Without one (the
    default; :mod:`sim.runner` installs its disk cache), the text is kept per process only.
    ``None`` removes it."""
    global _text_cache
    _text_cache = cache


def cached_text(name: str, key, make) -> str:
    """``make()``, or the installed cache's text for (``name``, ``key``) (:func:`set_text_cache`)."""
    return make() if _text_cache is None else _text_cache(name, key, make)


def submodule_verilog(component, name: str) -> str:
    """Verilog of ``component`` converted alone as module ``name``, for a design that instantiates it
    (:class:`~hw.instance.ModuleInstance`, the MXU's ``pe_blackbox``): without ``(* src *)``
    attributes (a fifth of the text at 128 x 128, and a Verilator rebuild whenever a Python line moves)
    and without the ``(* top = 1 *)`` that Amaranth puts on every module it converts (only the real
    top may keep it, or Yosys's ``hierarchy`` picks the submodule as the top and deletes the rest).
    """
    from amaranth.back import verilog

    text = verilog.convert(component, name=name, emit_src=False)
    return re.sub(r"\(\* top = +1 +\*\)\n", "", text)


def _pe_and_row_verilog(config, name: str) -> tuple[str, str]:
    """Verilog of ``<name>_pe`` (one PE, marked for Verilator's hierarchical verilation) and
    ``<name>_row`` (C instances of it) for the MXU ``config``; neither keeps ``(* top = 1 *)``."""
    from .mxu import MXURow
    from .pe import PE

    pe_name, row_name = f"{name}_pe", f"{name}_row"
    pe_text = submodule_verilog(PE(config.pe), pe_name)
    row_text = submodule_verilog(MXURow(config.pe, config.cols, pe_blackbox=True, pe_name=pe_name), row_name)
    # Mark the PE for Verilator's hierarchical verilation (--hierarchical): the PE is compiled once
    # instead of once per instance. Other tools read the marker as a comment.
    head = pe_text.index(f"module {pe_name}(")
    body = pe_text.index(";\n", head) + 2
    pe_text = pe_text[:body] + "  /*verilator hier_block*/\n" + pe_text[body:]
    return pe_text, row_text


def verilog_with_mxu(make, mxu_config, name: str, modules=()) -> str:
    """Verilog of a component that holds an MXU, with the MXU's PE and row as separate modules
    (``<name>_pe``, ``<name>_row``) as :func:`mxu_verilog` does; ``make(row_name)`` builds the
    component with ``pe_blackbox=True`` and that row module name (so the PE is compiled once, not
    once per instance). ``modules``: the Verilog text of further modules the component instantiates
    (:class:`~hw.instance.ModuleInstance`), placed before it.
    """
    from amaranth.back import verilog

    pe_text, row_text = _pe_and_row_verilog(mxu_config, name)
    top_text = verilog.convert(make(f"{name}_row"), name=name, emit_src=False)
    return "\n".join((pe_text, row_text, *modules, top_text))


def hbm_verilog(controller, module_name: str) -> str:
    """Verilog of the :class:`~hw.hbm.axi.HBMController` ``controller`` (a top's
    ``hbm_controller(config)``) as module ``module_name``, with its pseudo-channel controller as one more
    module, ``<module_name>_pc``, instantiated once per pseudo-channel; no ``(* top = 1 *)``.

    The controller is most of a GEMM top's Verilog (its pseudo-channel controller about 0.6 MB and
    3 s of conversion each): as modules of their own they are converted once per configuration (the
    text is cached per process, and by :func:`set_text_cache`'s cache across processes), not once per
    engine configuration and pseudo-channel.

    Raises:
        ValueError: ``controller.ctrl_name`` is set (this function names the pseudo-channel module).
    """
    controller._MustUse__silence = True  # a description of the module; the cached text stands for it
    if controller.ctrl_name is not None:
        raise ValueError(f"controller.ctrl_name must be None (the module names its own pseudo-channel "
                         f"controller <module_name>_pc); got {controller.ctrl_name!r}")
    return _hbm_verilog(controller.config, controller.axi_ports, controller.id_bits, controller.rob_depth,
                        module_name)


@functools.lru_cache(maxsize=8)
def _hbm_verilog(hbm_config, axi_ports: int, id_bits: int, rob_depth: int, module_name: str) -> str:
    from .hbm.axi import HBMController
    from .hbm.controller import PseudoChannelController

    def make():
        pc_name = f"{module_name}_pc"
        pc_text = submodule_verilog(PseudoChannelController(hbm_config), pc_name)
        hbm = HBMController(hbm_config, axi_ports, id_bits, rob_depth, ctrl_name=pc_name)
        return pc_text + "\n" + submodule_verilog(hbm, module_name)

    return cached_text(module_name, ("hbm_controller", hbm_config, axi_ports, id_bits, rob_depth), make)


def engine_verilog(config, name: str = "engine") -> str:
    """Verilog text of :class:`hw.engine.GEMMEngine` alone (its AXI4 masters and AXI4-Lite slave
    as ports), PE and row as separate modules."""
    from .engine import GEMMEngine

    return verilog_with_mxu(lambda row: GEMMEngine(config, pe_blackbox=True, row_name=row), config.mxu, name)


def gemm_top_verilog(config, name: str = "gemm") -> str:
    """Verilog text of :class:`hw.top.GEMMTop` (engine + HBM controller) with the MXU's PE and row
    as separate modules (``<name>_pe``, ``<name>_row``), as :func:`mxu_verilog` does, and the HBM
    controller as module ``<name>_hbm`` (:func:`hbm_verilog`)."""
    from .top import GEMMTop

    hbm = hbm_verilog(GEMMTop.hbm_controller(config), f"{name}_hbm")
    return verilog_with_mxu(lambda row: GEMMTop(config, pe_blackbox=True, row_name=row, hbm_name=f"{name}_hbm"),
                            config.mxu, name, modules=[hbm])


def board_top_verilog(config, name: str = "board") -> str:
    """Verilog text of :class:`hw.board.BoardTop` (engine + HBM controller + BRAM emulators + UART
    bridge) with the MXU's PE and row and the HBM controller as separate modules, as
    :func:`gemm_top_verilog` does."""
    from .board import BoardTop

    hbm = hbm_verilog(BoardTop.hbm_controller(config), f"{name}_hbm")
    return verilog_with_mxu(lambda row: BoardTop(config, pe_blackbox=True, row_name=row, hbm_name=f"{name}_hbm"),
                            config.engine.mxu, name, modules=[hbm])
