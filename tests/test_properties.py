"""Property-based tests (hypothesis): every model function terminates and is total on its domain.

For all inputs in range the cycle and blocking models (``verif.cycles``), the host layout
(``verif.gemm_host``), the engine configuration and the CLI's input checks return a result with the
stated invariants; for every input out of range they raise ``ValueError`` (``TypeError`` for a wrong
type) at once. The hypothesis deadline (tests/conftest.py) bounds every example's time, so a model
that loops or grows without bound fails here. Profile ``ci`` runs 40 examples per property; ``--soak``
runs 2,000.
"""

from __future__ import annotations

import argparse
from math import ceil

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from hw.engine import EngineConfig
from hw.hbm.config import HBMConfig
from hw.mxu import MXUConfig
from verif import cycles
from verif.cycles import (
    MAX_TILES,
    check_engine_dims,
    engine_array_cycles,
    engine_blocking,
    gemm_cycles,
    gemm_tiles,
    ideal_cycles,
    mxu_schedule,
    scalesim_ws_cycles,
    schedule_total,
)
from verif.gemm_host import check_gemm, layout

DIM_MAX = (1 << 20) - 1
FMTS = ("bf16", "fp8_e4m3fn", "fp8_e5m2", "int8")

pow2 = st.sampled_from([1, 2, 4, 8, 16, 32])
small = st.integers(1, 24)
stages = st.integers(1, 9)
tile_rows = st.lists(st.integers(1, 120), min_size=1, max_size=8)
not_int = st.one_of(st.floats(allow_nan=False), st.text(max_size=3), st.booleans(), st.none())


@st.composite
def engine_configs(draw):
    """Any EngineConfig the engine accepts: array, format, depth and buffer sizes in range."""
    rows, cols = draw(pow2), draw(pow2)
    fmt = draw(st.sampled_from(FMTS))
    mxu = MXUConfig(
        rows=rows, cols=cols, fmt=fmt, subnormals=draw(st.sampled_from(["ftz", "ieee"])), stages=draw(stages)
    )
    ob = mxu.operand_bits // 8
    lo = max(32, rows * ob)
    a_buffer = draw(st.sampled_from([b for b in (1 << e for e in range(5, 17)) if b >= lo]))
    m_block = draw(st.integers(1, 256))
    acc = draw(st.sampled_from([e for e in (1 << i for i in range(0, 11)) if e >= m_block] or [1024]))
    m_first = draw(st.none() | st.integers(1, 300))
    pcs = draw(st.sampled_from([1, 2, 4]))
    hbm = HBMConfig(
        pseudo_channels=pcs, address_mapping=("row", "bank", "bank_group", "column", "channel"), channel_xor=True
    )
    return EngineConfig(mxu=mxu, hbm=hbm, m_block=m_block, m_first=m_first, a_buffer_bytes=a_buffer, acc_entries=acc)


@st.composite
def gemms(draw, max_m=4000, max_k=4096, max_n=600):
    """(config, m, k, n) with every dimension in the engine's range (K <= MAX_K)."""
    cfg = draw(engine_configs())
    m = draw(st.integers(1, max_m))
    k = draw(st.integers(1, min(cfg.max_k, max_k)) | st.just(min(cfg.max_k, max_k)))
    n = draw(st.integers(1, max_n))
    return cfg, m, k, n


# ---- the MXU cycle model ----------------------------------------------------------------------


@given(small, small, stages, tile_rows)
def test_mxu_schedule_invariants(rows, cols, lat, tiles):
    """Outputs one per cycle per tile in order, activations and weight beats never two in a cycle,
    every tile's commit after its R weight beats and before its first activation."""
    s = mxu_schedule(rows, cols, lat, tiles)
    d = rows * lat + cols - 1
    assert s.latency_cycles == d
    outs, acts, wts = s.output_cycles, s.act_cycles(), s.weight_cycles(rows)
    assert len(outs) == len(acts) == sum(tiles) and len(wts) == rows * len(tiles)
    assert all(b > a for a, b in zip(outs, outs[1:]))
    assert all(b > a for a, b in zip(acts, acts[1:]))
    assert all(b > a for a, b in zip(wts, wts[1:]))
    assert [o - a for o, a in zip(outs, acts)] == [d] * len(outs)
    for t in s.tiles:
        assert t.load + rows <= t.commit < t.swap
    assert s.total_cycles == outs[-1] + 1


@given(small, small, stages, st.integers(1, 300), st.integers(1, 12), st.integers(1, 12))
def test_gemm_cycles_closed_form_equals_the_schedule(rows, cols, lat, m, kb, nb):
    """gemm_cycles (closed form, O(1)) equals the tile-by-tile schedule of ceil(K/R) * ceil(N/C)
    tiles of M beats, and never beats the ideal M*K*N/(R*C)."""
    k, n = kb * rows, nb * cols
    total = gemm_cycles(m, k, n, rows, cols, lat)
    assert total == mxu_schedule(rows, cols, lat, [m] * len(gemm_tiles(m, k, n, rows, cols))).total_cycles
    assert total >= ideal_cycles(m, k, n, rows, cols)
    assert scalesim_ws_cycles(m, k, n, rows, cols) == kb * nb * (2 * rows + cols + m - 2)


@given(
    st.integers(1, 256),
    st.integers(1, 256),
    stages,
    st.integers(1, DIM_MAX),
    st.integers(1, DIM_MAX),
    st.integers(1, DIM_MAX),
)
def test_gemm_cycles_total_on_the_whole_domain(rows, cols, lat, m, k, n):
    """Any GEMM the engine's registers take: an answer at once (the hypothesis deadline), no list of
    tiles built."""
    total = gemm_cycles(m, k, n, rows, cols, lat)
    assert isinstance(total, int) and total >= m * ceil(k / rows) * ceil(n / cols)


@given(small, small, stages, st.lists(st.tuples(st.integers(1, 80), st.integers(1, 40)), min_size=1, max_size=6))
def test_schedule_total_of_runs_equals_the_listed_schedule(rows, cols, lat, runs):
    listed = [beats for beats, count in runs for _ in range(count)]
    assert schedule_total(rows, cols, lat, runs) == mxu_schedule(rows, cols, lat, listed).total_cycles


@given(st.sampled_from([0, -1, DIM_MAX + 1, 1 << 40]), st.sampled_from(["m", "k", "n"]))
def test_cycle_models_refuse_dimensions_out_of_range(bad, which):
    dims = {"m": 5, "k": 5, "n": 5, which: bad}
    for fn in (gemm_cycles,):
        with pytest.raises(ValueError, match=f"^{which.upper()} must be an integer from 1 to {DIM_MAX}; got {bad}$"):
            fn(dims["m"], dims["k"], dims["n"], 4, 4, 2)
    for fn in (gemm_tiles, scalesim_ws_cycles, ideal_cycles):
        with pytest.raises(ValueError):
            fn(dims["m"], dims["k"], dims["n"], 4, 4)


@given(not_int, st.sampled_from(range(6)))
def test_cycle_models_refuse_wrong_types(value, position):
    args = [5, 5, 5, 4, 4, 2]
    args[position] = value
    with pytest.raises(TypeError):
        gemm_cycles(*args)


def test_mxu_schedule_refuses_bad_tiles():
    with pytest.raises(ValueError, match=r"^tile_rows must be a non-empty list"):
        mxu_schedule(2, 2, 2, [])
    with pytest.raises(ValueError, match=r"^tile_rows\[t\] must be an integer >= 1; got 0$"):
        mxu_schedule(2, 2, 2, [3, 0])
    with pytest.raises(ValueError, match=r"^stages must be an integer from 1 to 9; got 10$"):
        mxu_schedule(2, 2, 10, [3])
    with pytest.raises(ValueError, match=r"^tile_rows must sum to at most"):
        mxu_schedule(2, 2, 2, [1 << 21, 1 << 21, 1])
    with pytest.raises(ValueError, match=r"^a GEMM of 1x1048575x1048575 on 1x1 has"):
        gemm_tiles(1, DIM_MAX, DIM_MAX, 1, 1)
    assert MAX_TILES == 1 << 20


# ---- the engine's blocking --------------------------------------------------------------------


@given(gemms())
def test_engine_blocking_covers_m_exactly(g):
    """The m-blocks cover M exactly with no empty block and none above mb_max; each block has a
    group size in 1..g; the tile runs hold every tile once (ceil(K/R) * ceil(N/C) per block)."""
    cfg, m, k, n = g
    b = engine_blocking(m, k, n, cfg)
    blocks = b["m_blocks"]
    assert sum(blocks) == m and all(1 <= mb <= b["mb_max"] for mb in blocks)
    assert 1 <= b["mb_max"] <= min(cfg.m_block, m)
    assert len(b["block_g"]) == len(blocks) and all(1 <= gb <= b["g"] for gb in b["block_g"])
    kb, nb = ceil(k / cfg.mxu.rows), ceil(n / cfg.mxu.cols)
    assert sum(count for _, count in b["tile_runs"]) == len(blocks) * kb * nb
    assert [beats for beats, _ in b["tile_runs"]] == [
        mb for i, mb in enumerate(blocks) if i == 0 or blocks[i - 1] != mb
    ]


@given(gemms(max_m=2500))
def test_engine_blocking_fast_forward_is_the_block_by_block_rule(g):
    """Taking the steady-state blocks at once gives exactly the blocks the RTL's rule gives one by
    one (the fast path off)."""
    cfg, m, k, n = g
    fast = engine_blocking(m, k, n, cfg)
    cycles._FAST_FORWARD = False
    try:
        slow = engine_blocking(m, k, n, cfg)
    finally:
        cycles._FAST_FORWARD = True
    assert fast == slow


@st.composite
def small_tile_gemms(draw):
    """GEMMs of at most 4 x 4 tiles per m-block, so the listed oracle stays small."""
    cfg = draw(engine_configs())
    m = draw(st.integers(1, 600))
    k = draw(st.integers(1, min(cfg.max_k, 4 * cfg.mxu.rows)))
    n = draw(st.integers(1, 4 * cfg.mxu.cols))
    return cfg, m, k, n


@settings(deadline=None)  # the oracle lists every tile and beat; the function under test does not
@given(small_tile_gemms())
def test_engine_array_cycles_equals_the_listed_schedule(g):
    cfg, m, k, n = g
    b = engine_blocking(m, k, n, cfg)
    listed = [beats for beats, count in b["tile_runs"] for _ in range(count)]
    c = cfg.mxu
    assert engine_array_cycles(m, k, n, cfg) == mxu_schedule(c.rows, c.cols, c.stages, listed).total_cycles


@given(engine_configs(), st.integers(1, DIM_MAX), st.integers(1, DIM_MAX))
def test_engine_models_total_for_the_largest_gemms(cfg, m, n):
    """The largest K the engine takes with any M and N: blocking and cycles at once (the
    deadline), the blocking's size bounded by the number of m-blocks."""
    b = engine_blocking(m, cfg.max_k, n, cfg)
    assert sum(b["m_blocks"]) == m and len(b["tile_runs"]) <= len(b["m_blocks"])
    assert engine_array_cycles(m, cfg.max_k, n, cfg) >= m


@given(engine_configs(), st.sampled_from(["m", "k", "n"]), st.sampled_from([0, -5, DIM_MAX + 1]))
def test_engine_blocking_refuses_out_of_range_at_once(cfg, which, bad):
    dims = {"m": 3, "k": 3, "n": 3, which: bad}
    with pytest.raises(ValueError, match=f"^{which.upper()} must be an integer from 1 to {DIM_MAX}"):
        engine_blocking(dims["m"], dims["k"], dims["n"], cfg)


@given(engine_configs(), st.integers(1, 1000))
def test_engine_blocking_refuses_k_above_max_k(cfg, extra):
    """The input of the 'mxu matmul never ends' report: K = MAX_K + 1 (16385 for bf16 32 KiB banks)
    made an m-block of 0 rows that never advanced."""
    k = cfg.max_k + extra
    assume(k <= DIM_MAX)
    with pytest.raises(ValueError, match=rf"^K = {k} is larger than the engine's MAX_K = {cfg.max_k} "):
        engine_blocking(1, k, 1, cfg)
    with pytest.raises(ValueError, match=r"MAX_K"):
        engine_array_cycles(1, k, 1, cfg)


def test_engine_blocking_regression_k_16385():
    """The reported input: 1 x 16385 x 1 on the default engine raises at once instead of looping."""
    cfg = EngineConfig()
    assert cfg.max_k == 16384
    with pytest.raises(ValueError, match=r"^K = 16385 is larger than the engine's MAX_K = 16384 "):
        engine_blocking(1, 16385, 1, cfg)
    assert engine_blocking(1, 16384, 1, cfg)["m_blocks"] == [1]


# ---- the host layout --------------------------------------------------------------------------


@given(
    st.integers(1, 3000),
    st.integers(1, 3000),
    st.integers(1, 3000),
    st.sampled_from([1, 2]),
    st.sampled_from([2, 4]),
    st.booleans(),
    st.integers(0, 1 << 20),
    st.sampled_from([0, 32, 64]),
)
def test_layout_regions_are_aligned_and_disjoint(m, k, n, ob, out_bytes, load_c, start, pad):
    lay = layout(m, k, n, ob, out_bytes, load_c, start=start, pad_bytes=pad)
    regions = [
        ("a", lay.a_base, lay.a_stride, m, k * ob),
        ("b", lay.b_base, lay.b_stride, k, n * ob),
        ("d", lay.d_base, lay.d_stride, m, n * out_bytes),
    ]
    if load_c:
        regions.append(("c", lay.c_base, lay.c_stride, m, n * 4))
    else:
        assert lay.c_base is None
    spans = []
    for _name, base, stride, rows, row_bytes in regions:
        assert base % 4096 == 0 and base >= start and stride % 32 == 0 and stride >= row_bytes + pad
        spans.append((base, base + rows * stride))
    spans.sort()
    assert all(e0 <= b1 for (_, e0), (b1, _) in zip(spans, spans[1:]))
    assert spans[-1][1] <= lay.end and lay.end % 4096 == 0


@given(gemms(max_m=DIM_MAX), st.booleans(), st.booleans())
def test_check_gemm_accepts_exactly_what_fits(g, load_c, out_bf16):
    """check_gemm returns a layout inside the memory or raises ValueError naming the need; int8
    with bf16 output is refused."""
    cfg, m, k, n = g
    try:
        lay = check_gemm(m, k, n, cfg, load_c=load_c, out_bf16=out_bf16)
    except ValueError as e:
        fits = layout(m, k, n, cfg.operand_bytes, 2 if out_bf16 else 4, load_c).end <= cfg.hbm.capacity_bytes
        assert (out_bf16 and cfg.mxu.fmt == "int8") or (not fits and "does not fit the engine's memory" in str(e))
    else:
        assert lay.end <= cfg.hbm.capacity_bytes and not (out_bf16 and cfg.mxu.fmt == "int8")


@given(engine_configs(), st.integers(1, 50))
def test_check_engine_dims_names_max_k(cfg, extra):
    with pytest.raises(ValueError, match="MAX_K"):
        check_engine_dims(1, cfg.max_k + extra, 1, cfg) if cfg.max_k + extra <= DIM_MAX else check_engine_dims(
            1, DIM_MAX + extra, 1, cfg
        )


# ---- the engine configuration -----------------------------------------------------------------


@given(engine_configs())
def test_engine_config_derived_values(cfg):
    # one A row of MAX_K elements fills an A bank exactly (the engine's blocking needs one row per bank)
    assert cfg.max_k * cfg.operand_bytes <= cfg.a_buffer_bytes < (cfg.max_k + 1) * cfg.operand_bytes
    assert cfg.first_block_rows >= 1
    assert cfg.as_dict()["a_buffer_bytes"] == cfg.a_buffer_bytes


@given(
    st.sampled_from(["m_block", "acc_entries", "a_buffer_bytes", "rob_depth", "m_first"]),
    st.one_of(st.integers(-(1 << 30), 0), st.integers((1 << 26) + 1, 1 << 40)),
)
def test_engine_config_refuses_values_out_of_range(name, value):
    with pytest.raises(ValueError, match=f"^{name} must be"):
        EngineConfig(**{name: value})


@given(
    st.sampled_from(["m_block", "acc_entries", "a_buffer_bytes", "rob_depth", "m_first"]),
    st.one_of(st.floats(allow_nan=False), st.text(max_size=3), st.booleans()),
)
def test_engine_config_refuses_wrong_types(name, value):
    with pytest.raises(TypeError, match=f"^{name} must be"):
        EngineConfig(**{name: value})


def test_engine_config_wrong_component_types():
    with pytest.raises(TypeError, match="^mxu must be an MXUConfig; got dict$"):
        EngineConfig(mxu={})
    with pytest.raises(TypeError, match="^hbm must be an HBMConfig; got str$"):
        EngineConfig(hbm="hbm2")


# ---- the CLI's input checks -------------------------------------------------------------------


class _cli_api:
    """The CLI's input checks, from the modules that hold them."""

    from sim.cli import build_parser as _build_parser
    from sim.cli.errors import UsageError
    from sim.cli.files import operand as _operand
    from sim.cli.options import ENGINE_SIZES
    from sim.cli.options import engine_size_arg as _engine_size
    from sim.cli.options import freq_mhz_arg as _freq_mhz
    from sim.cli.options import positive_arg as _positive
    from sim.cli.options import seed_arg as _seed
    from sim.cli.options import stages_arg as _stages


def _cli():
    return _cli_api


@given(st.text(max_size=12))
def test_cli_value_parsers_are_total(text):
    """Each option parser returns a value in its range or raises ArgumentTypeError (argparse makes
    that one line, exit 2) for any text."""
    cli = _cli()
    for parse, ok in (
        (cli._positive, lambda v: v >= 1),
        (cli._seed, lambda v: 0 <= v < 2**31),
        (cli._engine_size, lambda v: v in cli.ENGINE_SIZES),
        (cli._freq_mhz, lambda v: 0 < v <= 1000),
        (cli._stages, lambda v: isinstance(v, int)),
    ):
        try:
            value = parse(text)
        except argparse.ArgumentTypeError:
            continue
        assert ok(value), (parse.__name__, text, value)


@given(
    hnp.arrays(
        st.sampled_from(
            [
                np.float16,
                np.float32,
                np.float64,
                np.int8,
                np.int16,
                np.int64,
                np.uint8,
                np.uint16,
                np.bool_,
                np.complex64,
            ]
        ),
        hnp.array_shapes(min_dims=0, max_dims=3, min_side=0, max_side=4),
    ),
    st.sampled_from(FMTS),
    st.booleans(),
)
def test_cli_operand_check_is_total(array, fmt, bits):
    """Any array: converted to the format's dtype with its 2-D shape kept, or one UsageError whose
    text names the operand (never another exception)."""
    cli = _cli()
    from pathlib import Path

    from verif.golden import dtype_of

    try:
        out = cli._operand(array, "A", Path("a.npy"), fmt, bits)
    except cli.UsageError as e:
        assert str(e).startswith("A a.npy") and "\n" not in str(e)
        if array.ndim != 2:
            assert f"got shape {tuple(array.shape)}" in str(e)
    else:
        assert out.shape == array.shape and array.ndim == 2 and 0 not in array.shape
        assert out.dtype == np.dtype(dtype_of(fmt))


_TOKENS = st.sampled_from(
    [
        "generate",
        "matmul",
        "synth",
        "demo",
        "board",
        "build",
        "--rows",
        "--cols",
        "3",
        "8",
        "0",
        "-1",
        "x",
        "--fmt",
        "int8",
        "bf16",
        "--stages",
        "12",
        "-o",
        "",
        "--mac",
        "--preset",
        "nope",
        "--target",
        "ulx3s-85f",
        "--sim",
        "--seed",
        "--freq",
        "1e9",
        "--vectors",
        "--no-size-limit",
        "--block",
        "pe",
        "--help",
    ]
)


@given(st.lists(_TOKENS, max_size=8))
def test_cli_argument_parsing_is_total(tokens):
    """Any command line: parsed, or one UsageError (argparse's errors included); --help exits 0."""
    cli = _cli()
    parser = cli._build_parser()
    try:
        parser.parse_args(tokens)
    except cli.UsageError as e:
        assert "\n" not in str(e)
    except SystemExit as e:  # --help
        assert e.code == 0 and "--help" in tokens
