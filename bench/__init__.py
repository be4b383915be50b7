"""Benchmarks: each writes JSON to bench/results/. Run from the repository root with the project's venv,
e.g. ``.venv/bin/python -m bench.gemm_bench``."""
