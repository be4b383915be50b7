"""Up-front size estimates and limits, so a command refuses a configuration the machine cannot
handle in reasonable time and memory before it starts, instead of grinding.

Two costs grow with the number of PEs (R x C):

* **Verilog generation** (``mxu generate``, ``mxu synth``, and the first step of ``mxu matmul`` and
  ``mxu demo``): Amaranth converts the PE once, the row module with its C instances and the top with
  its R rows and the array's edge logic; wall time and peak memory grow about linearly with R x C
  beyond 64 x 64. :data:`GENERATION_MEASURED` holds the measured points (``bench/mxu_scale.py``,
  bf16, one core of a 2-core machine; a test keeps them equal to ``bench/results/mxu_scale.json``);
  :func:`generation_estimate` interpolates them linearly in R x C and extrapolates with the slope of
  the last two points.
* **Simulator build of the GEMM engine** (``mxu matmul``, ``mxu demo``): Verilator's C++ build of
  engine + HBM controller + MXU took 3-7 min for 8 x 8 and 16-23 min for 16 x 16 on the same
  machine, about linear in R x C, so a 32 x 32 engine would take over an hour; Icarus builds fast
  but simulates each cycle about R x C times slower. :data:`MAX_SIMULATED_PES` caps the array of the
  simulation commands at 16 x 16.

Every limit can be lifted with the command's ``--no-size-limit`` option.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["GENERATION_MEASURED", "MAX_GENERATE_SECONDS", "MAX_GENERATE_MIB", "MAX_SIMULATED_PES",
           "MAX_SIMULATED_CYCLES", "SizeEstimate", "generation_estimate", "check_generation_size",
           "check_simulated_size", "check_simulated_cycles"]

#: (array side R = C, generation wall seconds, peak resident memory in MiB) of ``mxu_verilog``,
#: measured by ``bench/mxu_scale.py`` (bench/results/mxu_scale.json, bf16 ftz, 2 stages).
GENERATION_MEASURED: tuple[tuple[int, float, float], ...] = (
    (8, 1.4, 32.5), (16, 1.5, 39.1), (32, 2.24, 67.3), (64, 4.65, 181.4), (128, 12.88, 593.7))
#: Largest estimated generation time that runs without ``--no-size-limit`` (10 minutes).
MAX_GENERATE_SECONDS = 600.0
#: Largest estimated peak memory of generation that runs without ``--no-size-limit`` (8 GiB: a third
#: of the 24 GiB machines this project is built on, leaving room for a parallel test run).
MAX_GENERATE_MIB = 8192.0
#: Largest R x C of the GEMM engine that ``mxu matmul`` and ``mxu demo`` simulate without
#: ``--no-size-limit`` (16 x 16; see the module docstring).
MAX_SIMULATED_PES = 256
#: Most engine cycles (the array alone, ``verif.cycles.gemm_cycles``, a lower bound of the RTL's)
#: ``mxu matmul`` simulates without ``--no-size-limit``: the 8x8 engine simulates 1,450-2,300
#: cycles/s in Verilator, so 50 million cycles are 6-10 hours.
MAX_SIMULATED_CYCLES = 50_000_000


@dataclass(frozen=True)
class SizeEstimate:
    """Estimated cost of generating an R x C MXU's Verilog: ``seconds`` (wall), ``mib`` (peak
    resident memory in MiB), ``pes`` (max(R, C) squared: the square array the estimate is for)."""
    pes: int
    seconds: float
    mib: float


def generation_estimate(rows: int, cols: int) -> SizeEstimate:
    """Estimate of :func:`hw.generate.mxu_verilog` for an R x C array from
    :data:`GENERATION_MEASURED` (square arrays): that of the square array of side max(R, C), linear
    in its PEs between measured points, the last segment's slope beyond them, the first point's
    cost below them (the fixed cost dominates small arrays).

    Raises:
        TypeError: rows or cols not an int.
        ValueError: rows or cols < 1.
    """
    from hw.config import check_int

    check_int("rows", rows, 1)
    check_int("cols", cols, 1)
    # the measured runs are square; a long row or column (C instances in one row module) costs
    # more than its PE count says, so it is estimated as the square array of its longer side
    pes = max(rows, cols) ** 2
    points = [(side * side, s, mib) for side, s, mib in GENERATION_MEASURED]
    if pes <= points[0][0]:
        return SizeEstimate(pes, points[0][1], points[0][2])
    for i in range(1, len(points)):   # the segment holding pes, else the last one
        if pes <= points[i][0]:
            break
    (p0, s0, m0), (p1, s1, m1) = points[i - 1], points[i]
    f = (pes - p0) / (p1 - p0)
    return SizeEstimate(pes, s0 + f * (s1 - s0), m0 + f * (m1 - m0))


def _duration(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def check_generation_size(rows: int, cols: int) -> SizeEstimate:
    """Refuse an MXU whose Verilog generation is estimated above :data:`MAX_GENERATE_SECONDS` or
    :data:`MAX_GENERATE_MIB`; returns the estimate otherwise.

    Raises:
        ValueError: the message names the array, the estimate, the limit and the override
            (``--no-size-limit``).
    """
    est = generation_estimate(rows, cols)
    if est.seconds > MAX_GENERATE_SECONDS or est.mib > MAX_GENERATE_MIB:
        raise ValueError(
            f"a {rows}x{cols} MXU needs an estimated {est.mib / 1024:.1f} GiB of memory and "
            f"{_duration(est.seconds)} to generate, above the limit of {MAX_GENERATE_MIB / 1024:.0f} GiB and "
            f"{_duration(MAX_GENERATE_SECONDS)} (estimate from measured runs up to 128x128); "
            "pass --no-size-limit to generate it anyway")
    return est


def check_simulated_cycles(m: int, k: int, n: int, rows: int, cols: int, stages: int) -> int:
    """Refuse a GEMM whose simulation would take longer than :data:`MAX_SIMULATED_CYCLES` engine
    cycles (the array-alone bound); returns that bound otherwise.

    Raises:
        ValueError: naming the GEMM, its cycles, the limit and the override (``--no-size-limit``).
    """
    from verif.cycles import gemm_cycles

    cycles = gemm_cycles(m, k, n, rows, cols, stages)
    if cycles > MAX_SIMULATED_CYCLES:
        raise ValueError(
            f"a {m}x{k}x{n} GEMM on the {rows}x{cols} engine takes at least {cycles:,} cycles, above the simulation "
            f"limit of {MAX_SIMULATED_CYCLES:,} (hours at the 1,450-2,300 cycles/s measured for 8x8); "
            "pass --no-size-limit to simulate it anyway")
    return cycles


def check_simulated_size(rows: int, cols: int) -> None:
    """Refuse a GEMM engine larger than :data:`MAX_SIMULATED_PES` PEs for simulation.

    Raises:
        ValueError: the message names the array, the measured build times behind the limit and the
            override (``--no-size-limit``).
    """
    if rows * cols > MAX_SIMULATED_PES:
        raise ValueError(
            f"a {rows}x{cols} GEMM engine ({rows * cols:,} PEs) is above the simulation limit of "
            f"{MAX_SIMULATED_PES} PEs (16x16): its Verilator build grows about linearly with the PEs "
            "(8x8 3-7 min, 16x16 16-23 min measured on 2 cores); pass --no-size-limit to build it anyway")
