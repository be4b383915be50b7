"""The README's example commands run as written, and print what the README shows.

Each ```sh block of the README is run in a fresh folder with the venv's commands on PATH, in order
(the matmul example needs the .npy files the python line before it writes). A plain ``` block right
after a command block is that command's output: every line it shows (but ``...`` and wall times) must
be in what the command printed, and a JSON line's shown fields must equal the command's.
Two commands cannot run here and are skipped by name: ``mxu board build`` (place and route of the whole
board, a quarter of an hour or more) and ``mxu board matmul --port /dev/ttyUSB0`` (needs a board);
``tests/test_board.py`` runs the latter against the simulated board. ``make demo`` and ``make test``
are what CI runs; ``mxu demo`` (what ``make demo`` calls) runs here.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from sim.toolchain import SimulatorUnavailable, check_simulator

ROOT = Path(__file__).resolve().parents[1]
SKIPPED = ("mxu board build -o build/board", "mxu board matmul A.npy B.npy -o C.npy --port /dev/ttyUSB0")


def examples() -> list[tuple[str, str | None]]:
    """(command, shown output or None) for every command of the README's ```sh blocks."""
    text = (ROOT / "README.md").read_text()
    out = []
    for m in re.finditer(r"```sh\n(.*?)```\n(```\n(.*?)```\n)?", text, re.S):
        commands = re.sub(r"\\\n\s*", "", m.group(1)).strip().splitlines()
        commands = [c.split("  #")[0].strip() for c in commands]
        for i, c in enumerate(commands):
            out.append((c, m.group(3) if i == len(commands) - 1 else None))
    return out


def test_readme_examples_are_found():
    cmds = [c for c, _ in examples()]
    assert cmds[:2] == ["make demo", "make test"]
    assert {c.split()[1] for c in cmds if c.startswith("mxu ")} == {
        "generate",
        "synth",
        "matmul",
        "demo",
        "board",
        "mutate",
    }
    assert set(SKIPPED) <= set(cmds)
    assert sum(1 for _, shown in examples() if shown) == 5  # generate, synth, matmul, demo, mutate


def flatten(x: dict) -> dict:
    """Every key of a nested JSON object at any depth (the README's objects repeat no key)."""
    out = {}
    for k, v in x.items():
        out.update(flatten(v) if isinstance(v, dict) else {k: v})
    return out


def check_shown(command: str, shown: str, printed: str) -> None:
    for line in shown.splitlines():
        line = line.strip()
        if not line or line == "...":
            continue
        if line.startswith("{") or line.startswith('"'):
            continue  # JSON: compared field by field below
        assert line in printed, f"{command}: README shows {line!r}, the command printed:\n{printed}"
    if shown.lstrip().startswith("{"):
        report = flatten(json.loads(printed.strip().splitlines()[-1]))
        flat = " ".join(shown.split())
        for key, value in re.findall(r'"(\w+)": ("[^"]*"|true|false|null|[-\d.]+)', flat):
            if key.endswith("wall_s") or key in ("sim_cycles_per_s", "build_s"):
                continue
            assert report[key] == json.loads(value), f"{command}: README shows {key}={value}, got {report[key]!r}"


@pytest.mark.flow
@pytest.mark.cocotb
def test_readme_examples_run(tmp_path):
    try:
        check_simulator("verilator")
    except SimulatorUnavailable as exc:
        if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
            pytest.fail(f"CI=true and Verilator is unavailable: {exc}", pytrace=False)
        pytest.skip(f"Verilator unavailable: {exc}")
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}", MXU_PROGRESS="0")
    ran = []
    for command, shown in examples():
        if command.startswith("make ") or command in SKIPPED:
            continue
        proc = subprocess.run(command, shell=True, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=3600)
        assert proc.returncode == 0, f"{command}: exit {proc.returncode}\n{proc.stdout}\n{proc.stderr}"
        if shown:
            check_shown(command, shown, proc.stdout)
        ran.append(command.split()[:2])
    assert [c for c in ran if c[0] == "mxu"] == [
        ["mxu", "generate"],
        ["mxu", "synth"],
        ["mxu", "matmul"],
        ["mxu", "demo"],
        ["mxu", "mutate"],
    ]
