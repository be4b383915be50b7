"""Cycle model of the MXU: the exact cycle of every output beat, and GEMM totals.

Timing of :class:`hw.mxu.MXU` with R rows, C columns and PE latency L (``stages``), when the weight
and activation streams always offer their next beat and the consumer is always ready (so every cycle
is a step). Cycle 0 is the first cycle after reset. For tiles t = 0..T-1 of ``M_t`` activation beats::

    D    = R*L + C - 1                   activation beat -> output beat
    GAP  = max(1, (R-1)*(L-1))           swap beat -> earliest next commit
    HOLD = max(1, R + C - 2)             commit -> weight chain free again

    load_0 = 0                           first weight beat of tile t accepted at load_t,
                                         the R beats on consecutive cycles
    k_0    = R                           commit of tile t's weights
    k_t    = max(load_t + R, s_{t-1} + GAP)
    s_0    = k_0 + 1                     first (swap) beat of tile t
    s_t    = max(k_t + 1, s_{t-1} + M_{t-1})
    load_{t+1} = k_t + HOLD
    out(t, i) = s_t + i + D              output beat i of tile t leaves in this cycle
    total  = s_{T-1} + M_{T-1} + D       cycles until the last output has been taken

In steady state tiles run back to back (``s_t = s_{t-1} + M_{t-1}``) whenever
``M_{t-1} >= max(2R + C - 1, GAP + 1)`` (the next tile's R weight beats and its commit fit under the
current tile; for L >= 3 and R > C + 1 the commit gap is the bound), so utilization
``sum(M_t) * R * C / (R * C * total)`` tends to 1 for long tiles.

SCALE-Sim v2's weight-stationary count for comparison (Samajdar et al., "SCALE-Sim", ISPASS 2020),
which serializes weight loads: ``ceil(K/R) * ceil(N/C) * (2R + C + M - 2)`` (its report prints that
minus 1).
"""

from __future__ import annotations

from dataclasses import dataclass
from math import ceil

__all__ = ["TileTiming", "Schedule", "mxu_schedule", "gemm_tiles", "gemm_cycles", "scalesim_ws_cycles",
           "ideal_cycles", "engine_blocking", "engine_array_cycles"]


@dataclass(frozen=True)
class TileTiming:
    """Cycles of one tile: first weight beat accepted, commit, first activation (swap) beat, and
    the cycle of each output beat."""
    rows: int
    load: int
    commit: int
    swap: int
    outputs: tuple[int, ...]


@dataclass(frozen=True)
class Schedule:
    """Result of :func:`mxu_schedule`: per-tile timings, total cycles, and the constants used."""
    tiles: tuple[TileTiming, ...]
    total_cycles: int
    latency_cycles: int
    gap_cycles: int
    hold_cycles: int

    @property
    def output_cycles(self) -> list[int]:
        return [c for t in self.tiles for c in t.outputs]

    def act_cycles(self) -> list[int]:
        """Cycle in which each activation beat is accepted (tile t's beat i at ``s_t + i``)."""
        return [t.swap + i for t in self.tiles for i in range(t.rows)]

    def weight_cycles(self, rows: int) -> list[int]:
        """Cycle in which each weight beat is accepted (tile t's beat j at ``load_t + j``)."""
        return [t.load + j for t in self.tiles for j in range(rows)]


def mxu_schedule(rows: int, cols: int, stages: int, tile_rows: list[int]) -> Schedule:
    """Exact cycle schedule of a sequence of tiles with ``tile_rows[t]`` activation beats each.

    Args:
        rows, cols: array size R x C (>= 1).
        stages: PE partial-sum latency L in cycles (1..9).
        tile_rows: activation beats M_t >= 1 of each weight tile, in order.

    Returns:
        :class:`Schedule` (see the module docstring for the recurrence).

    Raises:
        ValueError: empty ``tile_rows`` or any M_t < 1.
    """
    if not tile_rows or any(mt < 1 for mt in tile_rows):
        raise ValueError("tile_rows must be a non-empty list of integers >= 1")
    R, C, L = rows, cols, stages
    D = R * L + C - 1
    GAP = max(1, (R - 1) * (L - 1))
    HOLD = max(1, R + C - 2)
    tiles = []
    load = 0
    prev_s = prev_m = None
    for mt in tile_rows:
        if prev_s is None:
            k = load + R
            s = k + 1
        else:
            k = max(load + R, prev_s + GAP)
            s = max(k + 1, prev_s + prev_m)
        tiles.append(TileTiming(mt, load, k, s, tuple(s + i + D for i in range(mt))))
        load = k + HOLD
        prev_s, prev_m = s, mt
    total = prev_s + prev_m + D
    return Schedule(tuple(tiles), total, D, GAP, HOLD)


def gemm_tiles(m: int, k: int, n: int, rows: int, cols: int) -> list[tuple[int, int]]:
    """Tile order of a GEMM (M x K) @ (K x N) on an R x C array: for each column block of N, the K
    blocks in order (the accumulator re-enters for the next K block). Returns (k_block, n_block)
    pairs; every tile streams all M activation rows."""
    return [(kb, nb) for nb in range(ceil(n / cols)) for kb in range(ceil(k / rows))]


def gemm_cycles(m: int, k: int, n: int, rows: int, cols: int, stages: int) -> int:
    """Cycles of a whole GEMM streamed through the MXU as ``ceil(K/R) * ceil(N/C)`` tiles of M beats
    each, back to back (the partial sums of one K block re-enter as the next block's ``c`` input,
    which the caller must have ready; the engine does that). Weight streams always ready."""
    tiles = gemm_tiles(m, k, n, rows, cols)
    return mxu_schedule(rows, cols, stages, [m] * len(tiles)).total_cycles


def scalesim_ws_cycles(m: int, k: int, n: int, rows: int, cols: int) -> int:
    """SCALE-Sim v2 weight-stationary compute cycles: ``ceil(K/R) * ceil(N/C) * (2R + C + M - 2)``."""
    return ceil(k / rows) * ceil(n / cols) * (2 * rows + cols + m - 2)


def ideal_cycles(m: int, k: int, n: int, rows: int, cols: int) -> float:
    """Lower bound ``M*K*N / (R*C)``: every PE busy every cycle."""
    return m * k * n / (rows * cols)


def engine_blocking(m: int, k: int, n: int, config) -> dict:
    """The GEMM engine's blocking of an M x K x N GEMM, computed exactly as the RTL does
    (:mod:`hw.engine.engine`): ``mb_max`` (rows per m-block), ``g`` (most n-blocks per group),
    ``m_blocks`` (the row count of each m-block), ``block_g`` (n-blocks per group of each m-block)
    and ``tile_rows`` (activation beats of every tile in
    the order the MXU runs them).

    Args:
        config: a :class:`hw.engine.EngineConfig`.
    """
    R, C = config.mxu.rows, config.mxu.cols
    ob = config.operand_bytes
    nsub = max(1, R * ob // 32)
    cpw = max(1, 32 // (R * ob))
    depth = config.a_buffer_bytes // (32 * nsub)
    kb, nb = ceil(k / R), ceil(n / C)
    wpr = ceil(kb / cpw)
    mb_max = min(config.m_block, m, depth // wpr)
    dep = config.mxu.latency_cycles + 16
    g = 0
    msmall = min(config.first_block_rows, mb_max)
    while g < nb and (g + 1) * mb_max <= config.acc_entries and g * msmall < dep:
        g += 1
    minm = 2 * R + C - 1
    tail = max(minm, dep)
    ramp = nb * cpw < 4 * nsub
    blocks = []
    m0 = 0
    cap0 = min(config.first_block_rows, mb_max)
    while m0 < m:
        rem = m - m0
        if len(blocks) == 1:
            cap0 = cap0 if ramp else mb_max
        elif len(blocks) > 1:
            cap0 = min(cap0 + max(1, cap0 // 2), mb_max) if ramp else mb_max
        if rem <= cap0:
            mb = rem
        elif rem - cap0 >= minm:
            mb = cap0
            # look-ahead: the rest would fit neither one block nor two of at least minm rows
            if cap0 == mb_max and 2 * cap0 < rem < cap0 + 2 * minm and rem >= 3 * minm:
                mb = rem - 2 * minm
        elif rem <= mb_max:
            mb = rem
        elif rem - minm >= minm:
            mb = rem - minm
        else:
            mb = min((rem + 1) // 2, cap0)
        if mb == rem and rem >= tail + minm:   # a short last block: less write-back after it
            mb = rem - tail
        blocks.append(mb)
        m0 += mb
    tiles = []
    group_sizes = []
    for mb in blocks:
        # per block: the fewest n-blocks covering the K-chain distance, at most g (the RTL's rule)
        gb = g if 8 * mb < dep else min(g, next(j for j in range(1, 9) if j * mb >= dep))
        group_sizes.append(gb)
        nb0 = 0
        while nb0 < nb:
            gc = min(gb, nb - nb0)
            tiles += [mb] * (kb * gc)
            nb0 += gc
    return {"mb_max": mb_max, "g": g, "m_blocks": blocks, "block_g": group_sizes, "tile_rows": tiles}


def engine_array_cycles(m: int, k: int, n: int, config) -> int:
    """Cycles of the engine's tile sequence on the MXU alone (:func:`mxu_schedule` of
    :func:`engine_blocking`'s tiles): what the engine would take with a memory that never makes it
    wait; the RTL with the HBM controller takes at least this plus its start-up and drain."""
    b = engine_blocking(m, k, n, config)
    return mxu_schedule(config.mxu.rows, config.mxu.cols, config.mxu.stages, b["tile_rows"]).total_cycles
