"""Generated Verilog passes ``verilator --lint-only`` (waivers in sim/lint.py), module by module."""

import shutil

import pytest

from hw.generate import mxu_verilog
from hw.mxu import MXUConfig
from sim.lint import lint_module, lint_mxu
from sim.runner import generate_verilog


@pytest.mark.parametrize("cfg", [MXUConfig(8, 8, "bf16", "ftz", 2), MXUConfig(3, 5, "fp8_e5m2", "ieee", 4),
                                 MXUConfig(2, 3, "int8", "ftz", 1)], ids=str)
def test_mxu_lints_clean(cfg, tmp_path):
    verilog = generate_verilog(lambda: mxu_verilog(cfg, "mxu"), name="mxu", key=cfg)
    shutil.copy(verilog, tmp_path / "mxu.v")
    results = lint_mxu(tmp_path / "mxu.v")
    assert [r.top for r in results] == ["mxu_pe", "mxu_row", "mxu"]
    for r in results:
        assert r.ok, r.output


@pytest.mark.parametrize("name,text,warning", [
    ("loop", "module bad(input a, output y);\n  wire x;\n  assign x = ~x & a;\n  assign y = x;\nendmodule\n",
     "UNOPTFLAT"),
    ("latch", "module bad(input a, input b, output reg y);\n  always @* if (a) y = b;\nendmodule\n", "LATCH"),
    ("multi", "module bad(input a, input b, output y);\n  assign y = a;\n  assign y = b;\nendmodule\n",
     "MULTIDRIVEN"),
    ("undeclared", "module bad(input a, output y);\n  assign y = a & nope;\nendmodule\n", "%Error"),
])
def test_lint_can_fail(tmp_path, name, text, warning):
    """Real defects are reported (the waivers do not hide them), so a clean result means something."""
    (tmp_path / "bad.v").write_text(text)
    r = lint_module([tmp_path / "bad.v"], "bad")
    assert not r.ok and warning in r.output
