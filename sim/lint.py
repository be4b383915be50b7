"""Verilator ``--lint-only`` of generated Verilog, module by module.

Linting a whole array at once makes Verilator elaborate every PE instance (at 128 x 128, 16,384
of them; already slow at 16 x 16), so the MXU is linted per module: the PE on its
own, the row module with its C PE instances, and the top with the row module replaced by a port-only
stub. Every line of the generated file is linted; only the elaboration of identical instances is
skipped.

Warnings: ``-Wall`` (every lint warning Verilator has), less the rules waived in one file,
:data:`WAIVER_FILE` (``sim/lint_waivers.vlt``), each waiver there with its reason. A test lints the
generated Verilog of every block (MAC, PE, MXU, HBM pseudo-channel controller, HBM controller, GEMM
engine, GEMM top, board top) and holds it at zero warnings.
"""

from __future__ import annotations

import re
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from . import toolchain

__all__ = ["WAIVER_FILE", "waived_rules", "LintResult", "lint_module", "lint_mxu"]

#: Verilator configuration file with every waived lint rule and the reason for each.
WAIVER_FILE = Path(__file__).with_name("lint_waivers.vlt")


def waived_rules() -> list[str]:
    """The rules :data:`WAIVER_FILE` turns off, in file order."""
    return re.findall(r"^lint_off -rule (\w+)", WAIVER_FILE.read_text(), re.M)


@dataclass
class LintResult:
    top: str
    ok: bool
    seconds: float
    output: str


def lint_module(sources: list[Path], top: str, *, extra_text: str | None = None,
                workdir: Path | None = None) -> LintResult:
    """``verilator --lint-only -Wall`` with :data:`WAIVER_FILE` on ``sources`` (plus ``extra_text``
    written to a scratch file), top module ``top``. ``ok`` is False on any remaining warning or error."""
    exe = toolchain.verilator_executable()
    files = [str(p) for p in sources]
    if extra_text is not None:
        workdir = workdir or Path(sources[0]).parent
        stub = workdir / f"{top}_lint_stub.v"
        stub.write_text(extra_text)
        files.append(str(stub))
    cmd = [str(exe), "--lint-only", "-Wall", "--top-module", top, str(WAIVER_FILE), *files]
    t0 = time.perf_counter()
    res = subprocess.run(cmd, capture_output=True, text=True, env=toolchain.simulator_env())
    out = (res.stdout + res.stderr).strip()
    ok = res.returncode == 0 and "%Warning" not in out and "%Error" not in out
    return LintResult(top, ok, time.perf_counter() - t0, out)


def _module_text(verilog: str, name: str) -> str:
    start = re.search(rf"^module {re.escape(name)}\(", verilog, re.M)
    if start is None:
        raise ValueError(f"module {name} not found")
    end = verilog.index("\nendmodule", start.start()) + len("\nendmodule\n")
    return verilog[start.start():end]


def _stub(module_text: str) -> str:
    """A port-only copy of a module: its header and its input/output declarations. Its outputs are
    undriven by construction (the real module is linted on its own), so the stub, and only the
    stub, turns UNDRIVEN off."""
    lines = module_text.splitlines()
    keep = [lines[0], "  /* verilator lint_off UNDRIVEN */"]
    keep += [ln for ln in lines[1:] if re.match(r"\s*(input|output)\b", ln)]
    return "\n".join(keep) + "\nendmodule\n"


def lint_mxu(verilog_path: Path, name: str = "mxu") -> list[LintResult]:
    """Lint the three modules of a generated MXU file separately (see the module docstring)."""
    verilog_path = Path(verilog_path)
    text = verilog_path.read_text()
    work = verilog_path.parent
    pe, row, top = f"{name}_pe", f"{name}_row", name
    pe_file, row_file, top_file = (work / f"lint_{m}.v" for m in (pe, row, top))
    pe_file.write_text(_module_text(text, pe))
    row_file.write_text(_module_text(text, row))
    top_file.write_text(_module_text(text, top))
    return [
        lint_module([pe_file], pe),
        lint_module([pe_file, row_file], row),
        lint_module([top_file], top, extra_text=_stub(_module_text(text, row))),
    ]
