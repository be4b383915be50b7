"""FuseSoC core files for generated Verilog (``mxu generate --fusesoc``).

A core file lets FPGA users pull a generated block into a FuseSoC / Edalize flow like other open
IP: ``fusesoc --cores-root OUT_DIR run --target sim open-mxu:mxu:<name>``, or a ``depend:`` on
``open-mxu:mxu:<name>`` from their own core. The format is CAPI2, FuseSoC's core description:
https://fusesoc.readthedocs.io/en/stable/ref/capi2.html (its JSON schema ships with FuseSoC as
``fusesoc/capi2/json_schema.py``). The text is written here, not dumped with a YAML library, so
the same configuration gives the same bytes (and PyYAML, which FuseSoC brings, is a development
dependency only).
"""

from __future__ import annotations

import json
import re

__all__ = ["VENDOR", "LIBRARY", "vlnv", "waiver_name", "regenerate_command", "core_text"]

#: Vendor and library of every core this project writes: ``open-mxu:mxu:<name>:<version>``.
VENDOR = "open-mxu"
LIBRARY = "mxu"

# A version FuseSoC orders as one (a digit first); only the characters a VLNV part may hold.
_VERSION_RE = re.compile(r"[0-9][A-Za-z0-9_.]*")


def vlnv(name: str, version: str) -> str:
    """The core's VLNV, ``open-mxu:mxu:<name>:<version>``. ValueError when ``version`` is not one
    FuseSoC takes (a digit first, then letters, digits, ``.`` and ``_``: a PEP 440 local version
    such as ``0.1.0+g1234`` or ``unknown`` is refused) or ``name`` holds other characters than
    letters, digits and ``_``."""
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
        raise ValueError(f"core name {name!r}: letters, digits and _ only (a Verilog identifier)")
    if not _VERSION_RE.fullmatch(version):
        raise ValueError(f"project version {version!r} is not a FuseSoC core version (a digit first, "
                         "then letters, digits, '.' and '_')")
    return f"{VENDOR}:{LIBRARY}:{name}:{version}"


def waiver_name(name: str) -> str:
    """File name of the copy of the project's Verilator waivers (``sim/lint_waivers.vlt``) written
    next to ``<name>.core`` for its lint target."""
    return f"{name}_lint_waivers.vlt"


def regenerate_command(block: str, parameters: dict, name: str) -> str:
    """The ``mxu generate`` command line that writes this configuration again, every parameter
    explicit (whatever preset or config file it came from); ``OUT_DIR`` stands for the folder."""
    words = ["mxu", "generate", "--block", block]
    if block == "mxu":
        words += ["--rows", str(parameters["rows"]), "--cols", str(parameters["cols"])]
    words += ["--fmt", parameters["fmt"], "--subnormals", parameters["subnormals"],
              "--stages", str(parameters["stages"])]
    if block == "mxu" and not parameters.get("backpressure", True):
        words.append("--no-backpressure")
    if parameters.get("multiplier", "generic") != "generic":
        words += ["--multiplier", parameters["multiplier"]]
    words += ["--name", name, "--fusesoc", "-o", "OUT_DIR"]
    return " ".join(words)


def _description(block: str, parameters: dict, name: str) -> str:
    p = parameters
    size = f"{p['rows']} x {p['cols']} PEs, " if block == "mxu" else ""
    per = " per MAC" if block == "mxu" else ""
    text = (f"open-mxu {block.upper()} {name}: {size}fmt {p['fmt']}, subnormals {p['subnormals']}, "
            f"{p['stages']} pipeline stage{'' if p['stages'] == 1 else 's'}{per}")
    if block == "mxu" and not p.get("backpressure", True):
        text += ", no backpressure"
    if p.get("multiplier", "generic") == "ecp5":
        text += ", products in ECP5 MULT18X18D output registers"
    return text


#: simulation models of the vendor primitives an MXU may instantiate, by ``multiplier`` (written beside the
#: core by ``mxu generate --fusesoc``; lint and sim need them, synthesis uses the vendor's)
PRIMITIVE_MODELS = {"ecp5": "MULT18X18D.v"}


def core_text(*, name: str, version: str, block: str, parameters: dict) -> str:
    """The CAPI2 core file (``<name>.core``) of the generated ``<name>.v``, as text.

    It begins with the line ``CAPI=2:``, then comment lines saying the file was generated and by
    which ``mxu generate`` command (:func:`regenerate_command`). Fields:

    * ``name``: :func:`vlnv`, ``open-mxu:mxu:<name>:<version>`` (``version``: the project's, as in
      the JSON manifest); ``description``: the block and its configuration;
    * ``filesets``: ``rtl`` (``<name>.v``, ``verilogSource``) and ``lint_waivers``
      (:func:`waiver_name`, ``vlt``: the project's Verilator waivers, each with its reason); with
      ``multiplier`` "ecp5" also ``primitive_models`` (:data:`PRIMITIVE_MODELS`: the ECP5 DSP primitive's
      simulation model, for the lint and sim targets only);
    * ``targets``: ``default`` (``rtl``, toplevel ``name``: what a core that depends on this one
      gets), ``lint`` (Verilator ``--lint-only -Wall`` with the waivers, as ``sim/lint.py`` lints)
      and ``sim`` (Icarus Verilog: ``iverilog`` elaborates the module; there is no testbench).

    ``block`` is ``"mxu"`` or ``"mac"``; ``parameters`` the configuration as in the manifest
    (``rows``, ``cols``, ``backpressure`` for an MXU; ``fmt``, ``subnormals``, ``stages``).
    ValueError when ``vlnv(name, version)`` refuses either. Same arguments, same text.
    """
    if block not in ("mxu", "mac"):
        raise ValueError(f"block must be 'mxu' or 'mac'; got {block!r}")
    core_vlnv = vlnv(name, version)
    waivers = waiver_name(name)
    lines = [
        "CAPI=2:",
        f"# Generated by open-mxu {version} (do not edit; generate it again) with",
        f"#   {regenerate_command(block, parameters, name)}",
        "# OUT_DIR: the folder of this file. Format: FuseSoC CAPI2,",
        "# https://fusesoc.readthedocs.io/en/stable/ref/capi2.html",
        "# Targets: default (the RTL, for cores that depend on this one); lint (verilator --lint-only",
        f"# -Wall with the project's waivers in {waivers}, each with its reason; it needs",
        "# a Verilator that knows every rule named there: Debian's 5.006 stops at WIDTHTRUNC); sim",
        "# (iverilog elaborates the module; there is no testbench).",
    ]
    if block == "mxu":
        lines.append(f"# lint and sim elaborate all {parameters['rows']} x {parameters['cols']} PE instances.")
    lines += [
        "",
        f"name: {core_vlnv}",
        f"description: {json.dumps(_description(block, parameters, name))}",
        "",
        "filesets:",
        "  rtl:",
        "    files:",
        f"      - {name}.v",
        "    file_type: verilogSource",
        "  lint_waivers:",
        "    files:",
        f"      - {waivers}",
        "    file_type: vlt",
    ]
    model = PRIMITIVE_MODELS.get(parameters.get("multiplier", "generic"))
    extra = ", primitive_models" if model else ""
    if model:
        lines += ["  primitive_models:", "    files:", f"      - {model}", "    file_type: verilogSource"]
    lines += [
        "",
        "targets:",
        "  default:",
        "    filesets: [rtl]",
        f"    toplevel: {name}",
        "  lint:",
        "    default_tool: verilator",
        f"    filesets: [rtl{extra}, lint_waivers]",
        f"    toplevel: {name}",
        "    tools:",
        "      verilator:",
        "        mode: lint-only",
        "        verilator_options: [-Wall]",
        "  sim:",
        "    default_tool: icarus",
        f"    filesets: [rtl{extra}]",
        f"    toplevel: {name}",
    ]
    return "\n".join(lines) + "\n"
