"""Benchmarks: each writes JSON to bench/results/. Run from the repository root with the project's venv,
e.g. ``.venv/bin/python -m bench.gemm_bench``."""

import subprocess
from pathlib import Path

__all__ = ["git_commit"]


def git_commit() -> str:
    """The short commit of the repository's HEAD, or ``"unknown"`` (no git, not a clone). Every
    benchmark records it with its results: the RTL is generated from the tree as it is."""
    try:
        out = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"],
            cwd=Path(__file__).resolve().parents[1],
            capture_output=True,
            text=True,
            timeout=10,
        )
        return out.stdout.strip() or "unknown"
    except (OSError, subprocess.SubprocessError):
        return "unknown"
