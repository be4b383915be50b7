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

from hw.arith import MAX_STAGES
from hw.config import check_int

__all__ = ["a_read_order", "TileTiming", "Schedule", "mxu_schedule", "gemm_tiles", "gemm_cycles", "scalesim_ws_cycles",
           "ideal_cycles", "engine_blocking", "engine_array_cycles", "check_engine_dims", "schedule_total"]

#: Largest R or C the array models take (the engine's own limit, ``hw.engine.EngineConfig``).
MAX_ARRAY = 256
#: Most tiles (``ceil(K/R) * ceil(N/C)``) the per-tile models enumerate: a schedule holds one
#: record per tile and one cycle per output beat, so the size of what they build is bounded
#: before they start (2**20 tiles is 2**20 tile records; a GEMM of that many tiles takes hours
#: of simulation, far beyond what anyone runs through these models).
MAX_TILES = 1 << 20
#: :func:`engine_blocking` takes the steady-state m-blocks of a long M at once (the property tests
#: compare it with this off: block by block, as the RTL steps).
_FAST_FORWARD = True
#: Most output beats :func:`mxu_schedule` lists (the sum of the tiles' rows; 2**22 is about 150 MB
#: of Python integers).
MAX_SCHEDULE_BEATS = 1 << 22


def _check_array(rows, cols, stages=None) -> None:
    check_int("rows", rows, 1, MAX_ARRAY)
    check_int("cols", cols, 1, MAX_ARRAY)
    if stages is not None:
        check_int("stages", stages, 1, MAX_STAGES)


def _check_gemm(m, k, n, rows, cols) -> None:
    """M, K, N integers from 1 to 2**20 - 1 (the engine's widest ``dim_bits``, 20) and an array in
    range."""
    for name, value in (("M", m), ("K", k), ("N", n)):
        check_int(name, value, 1, (1 << 20) - 1)
    _check_array(rows, cols)


def check_engine_dims(m: int, k: int, n: int, config) -> None:
    """The engine's dimension checks (its ZERO_DIM and DIM_TOO_LARGE errors) on the host.

    Args:
        m, k, n: the GEMM's M x K x N.
        config: a :class:`hw.engine.EngineConfig`.

    Raises:
        TypeError: a dimension that is not an int.
        ValueError: a dimension outside 1 .. 2**dim_bits - 1 (``config.max_dim``, by default
            2**20 - 1), or K above the engine's MAX_K (``config.max_k``: one row of A must fit an A
            bank of ``config.a_buffer_bytes`` bytes).
    """
    _check_gemm(m, k, n, config.mxu.rows, config.mxu.cols)
    for name, value in (("M", m), ("K", k), ("N", n)):
        if value > config.max_dim:
            raise ValueError(f"{name} = {value} is larger than the engine's largest dimension "
                             f"2^{config.dim_bits} - 1 = {config.max_dim} (dim_bits = {config.dim_bits})")
    if k > config.max_k:
        raise ValueError(f"K = {k} is larger than the engine's MAX_K = {config.max_k} (one row of A must "
                         f"fit an A bank of a_buffer_bytes = {config.a_buffer_bytes} bytes, "
                         f"{config.operand_bytes} byte(s) per {config.mxu.fmt} element)")


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
        TypeError: a size or an M_t that is not an int.
        ValueError: R or C outside 1..256, L outside 1..9, empty ``tile_rows``, any M_t < 1, more
            than :data:`MAX_TILES` tiles or more than :data:`MAX_SCHEDULE_BEATS` beats in all.
    """
    _check_array(rows, cols, stages)
    tile_rows = list(tile_rows)
    if not tile_rows:
        raise ValueError("tile_rows must be a non-empty list of integers >= 1; got []")
    if len(tile_rows) > MAX_TILES:
        raise ValueError(f"tile_rows must hold at most {MAX_TILES} tiles; got {len(tile_rows)}")
    for mt in tile_rows:
        check_int("tile_rows[t]", mt, 1)
    if sum(tile_rows) > MAX_SCHEDULE_BEATS:
        raise ValueError(f"tile_rows must sum to at most {MAX_SCHEDULE_BEATS} beats; got {sum(tile_rows)}")
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
    pairs; every tile streams all M activation rows.

    Raises:
        TypeError, ValueError: M, K, N outside 1 .. 2**20 - 1, R or C outside 1..256, or more than
            :data:`MAX_TILES` tiles.
    """
    _check_gemm(m, k, n, rows, cols)
    tiles = ceil(k / rows) * ceil(n / cols)
    if tiles > MAX_TILES:
        raise ValueError(f"a GEMM of {m}x{k}x{n} on {rows}x{cols} has {tiles} tiles; the models enumerate "
                         f"at most {MAX_TILES}")
    return [(kb, nb) for nb in range(ceil(n / cols)) for kb in range(ceil(k / rows))]


def gemm_cycles(m: int, k: int, n: int, rows: int, cols: int, stages: int) -> int:
    """Cycles of a whole GEMM streamed through the MXU as ``ceil(K/R) * ceil(N/C)`` tiles of M beats
    each, back to back (the partial sums of one K block re-enter as the next block's ``c`` input,
    which the caller must have ready; the engine does that). Weight streams always ready.

    Computed in closed form from the recurrence of :func:`mxu_schedule` (every tile has the same M,
    so the swap interval is constant after the first tile): O(1) time and memory for any GEMM.

    Raises:
        TypeError, ValueError: as :func:`gemm_tiles`, and L outside 1..9.
    """
    _check_gemm(m, k, n, rows, cols)
    _check_array(rows, cols, stages)
    tiles = ceil(k / rows) * ceil(n / cols)
    R, C, L = rows, cols, stages
    D = R * L + C - 1
    GAP = max(1, (R - 1) * (L - 1))
    HOLD = max(1, R + C - 2)
    # s_0 = R + 1; for t >= 1: k_t = max(load_t + R, s_{t-1} + GAP) with load_t = k_{t-1} + HOLD, and
    # s_t = max(k_t + 1, s_{t-1} + M). From t = 1 on, every step adds the same amount: the interval
    # is max(M, GAP + 1, HOLD + 1 when the weight chain is the bound) -- computed by stepping twice
    # and extrapolating, which the property tests hold against mxu_schedule.
    k0, s0 = R, R + 1
    if tiles == 1:
        return s0 + m + D
    k1 = max(k0 + HOLD + R, s0 + GAP)
    s1 = max(k1 + 1, s0 + m)
    if tiles == 2:
        return s1 + m + D
    k2 = max(k1 + HOLD + R, s1 + GAP)
    s2 = max(k2 + 1, s1 + m)
    step = s2 - s1
    return s1 + (tiles - 2) * step + m + D


def scalesim_ws_cycles(m: int, k: int, n: int, rows: int, cols: int) -> int:
    """SCALE-Sim v2 weight-stationary compute cycles: ``ceil(K/R) * ceil(N/C) * (2R + C + M - 2)``.

    Raises:
        TypeError, ValueError: M, K, N outside 1 .. 2**20 - 1, R or C outside 1..256.
    """
    _check_gemm(m, k, n, rows, cols)
    return ceil(k / rows) * ceil(n / cols) * (2 * rows + cols + m - 2)


def ideal_cycles(m: int, k: int, n: int, rows: int, cols: int) -> float:
    """Lower bound ``M*K*N / (R*C)``: every PE busy every cycle.

    Raises:
        TypeError, ValueError: M, K, N outside 1 .. 2**20 - 1, R or C outside 1..256.
    """
    _check_gemm(m, k, n, rows, cols)
    return m * k * n / (rows * cols)


def a_read_order(blocks: list[int], rb: int, q: int, a_base: int, a_stride: int) -> list[int]:
    """The byte address of every 32 B beat the engine's A loader reads, in order: for each m-block of
    ``blocks`` rows (:func:`engine_blocking`'s ``m_blocks``), passes of ``q`` beats of every row
    (``rb`` beats per row; the last pass of a row may be shorter); row i of A at
    ``a_base + i * a_stride``."""
    out, m0 = [], 0
    for mb in blocks:
        for pb in range(0, rb, q):
            for i in range(m0, m0 + mb):
                out += [a_base + i * a_stride + 32 * b for b in range(pb, min(pb + q, rb))]
        m0 += mb
    return out


def engine_blocking(m: int, k: int, n: int, config) -> dict:
    """The GEMM engine's blocking of an M x K x N GEMM, computed exactly as the RTL does
    (:mod:`hw.engine.sequencer` and :mod:`hw.engine.descriptor`).

    Args:
        m, k, n: the GEMM, each 1 .. ``config.max_dim`` with K at most ``config.max_k``.
        config: a :class:`hw.engine.EngineConfig`.

    Returns:
        dict with ``mb_max`` (most rows per m-block), ``g`` (most n-blocks per group), ``m_blocks``
        (the row count of each m-block, in order: every one >= 1, summing to M), ``block_g``
        (n-blocks per group of each m-block) and ``tile_runs``: the tiles in the order the MXU runs
        them, as ``(activation_beats, tiles)`` runs (each m-block's ``ceil(K/R) * ceil(N/C)`` tiles
        all stream its rows; consecutive m-blocks of equal rows share a run). The size of the
        result is O(number of m-blocks) <= M, whatever K and N.

    Raises:
        TypeError: a dimension that is not an int, ``config`` not an EngineConfig.
        ValueError: a dimension outside 1 .. ``config.max_dim`` or K > ``config.max_k``
            (:func:`check_engine_dims`), the engine's DIM_TOO_LARGE and ZERO_DIM errors.
    """
    from hw.engine import EngineConfig

    if not isinstance(config, EngineConfig):
        raise TypeError(f"config must be an EngineConfig; got {type(config).__name__}")
    check_engine_dims(m, k, n, config)
    R, C = config.mxu.rows, config.mxu.cols
    ob = config.operand_bytes
    nsub = max(1, R * ob // 32)
    cpw = max(1, 32 // (R * ob))
    depth = config.a_buffer_bytes // (32 * nsub)
    kb, nb = ceil(k / R), ceil(n / C)
    wpr = ceil(kb / cpw)
    mb_max = min(config.m_block, m, depth // wpr)
    # K <= MAX_K keeps one A row in a bank, so an m-block holds at least one row (with 0 the loop
    # below would never advance)
    assert mb_max >= 1, (m, k, n, config)
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
        if _FAST_FORWARD and len(blocks) > 1 and cap0 == mb_max:
            # steady state: every block takes mb_max rows until the last few decide the tail (the
            # rules below all pick cap0 while rem >= 2 * cap0 + 2 * minm + tail), so take those
            # blocks at once: O(1) instead of O(M / mb_max) steps
            q = (rem - (2 * cap0 + 2 * minm + tail)) // cap0
            if q > 0:
                blocks.extend([cap0] * q)
                m0 += q * cap0
                continue
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
    # per block: the fewest n-blocks covering the K-chain distance, at most g (the RTL's rule); the
    # group size changes only the order of a block's tiles, not their rows
    rule = {mb: g if 8 * mb < dep else min(g, next(j for j in range(1, 9) if j * mb >= dep)) for mb in set(blocks)}
    group_sizes = [rule[mb] for mb in blocks]
    runs = []   # consecutive blocks of equal rows make one run of tiles
    for mb in blocks:
        if runs and runs[-1][0] == mb:
            runs[-1][1] += kb * nb
        else:
            runs.append([mb, kb * nb])
    runs = [tuple(r) for r in runs]
    return {"mb_max": mb_max, "g": g, "m_blocks": blocks, "block_g": group_sizes, "tile_runs": runs}


def schedule_total(rows: int, cols: int, stages: int, tile_runs) -> int:
    """Total cycles of :func:`mxu_schedule` for tiles given as ``(activation_beats, count)`` runs,
    without listing them: within a run the recurrence's state (commit minus swap cycle) settles
    to a fixed point, after which every tile adds the same number of cycles, so a run costs at
    most a few hundred steps whatever its count.

    Raises:
        TypeError, ValueError: sizes out of range (as :func:`mxu_schedule`), an empty run list, a
            run with beats or count < 1, more than 2**20 runs.
    """
    _check_array(rows, cols, stages)
    runs = list(tile_runs)
    if not runs or len(runs) > 1 << 20:
        raise ValueError(f"tile_runs must hold 1 to {1 << 20} runs; got {len(runs)}")
    R, C, L = rows, cols, stages
    D = R * L + C - 1
    GAP = max(1, (R - 1) * (L - 1))
    HOLD = max(1, R + C - 2)
    k = s = mt = None
    for beats, count in runs:
        check_int("tile_runs beats", beats, 1)
        check_int("tile_runs count", count, 1)
        left = count
        prev_x = None
        while left:
            if s is None:
                k, s = R, R + 1
            else:
                k_new = max(k + HOLD + R, s + GAP)
                s_new = max(k_new + 1, s + mt)
                k, step, s = k_new, s_new - s, s_new
                x = k - s
                if x == prev_x:   # fixed point: every remaining tile of the run adds `step`
                    s += (left - 1) * step
                    k = s + x
                    mt = beats
                    break
                prev_x = x
            mt = beats
            left -= 1
    return s + mt + D


def engine_array_cycles(m: int, k: int, n: int, config) -> int:
    """Cycles of the engine's tile sequence on the MXU alone (:func:`mxu_schedule` of
    :func:`engine_blocking`'s tiles): what the engine would take with a memory that never makes it
    wait; the RTL with the HBM controller takes at least this plus its start-up and drain.

    Raises:
        TypeError, ValueError: as :func:`engine_blocking`.
    """
    b = engine_blocking(m, k, n, config)
    return schedule_total(config.mxu.rows, config.mxu.cols, config.mxu.stages, b["tile_runs"])
