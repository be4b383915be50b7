"""Amaranth-simulator unit tests of each arithmetic block against the golden model (fast tier)."""

import ml_dtypes
import numpy as np
import pytest
from amaranth import Value
from amaranth.sim import Simulator

from hw.arith import MAC, MAX_STAGES, BF16Multiplier, FP8Decoder, FP32Adder, FP32Sum, Int8MAC, MACConfig
from hw.arith.fp32_add import ADDER_CUTS
from hw.arith.mac import FLOAT_CUTS_BY_STAGES
from verif import checked
from verif.golden import mac_bits
from verif.vectors import corner_vectors, expected_bits, pack_inputs, random_vectors


def _run_comb(dut, drive, read, n):
    """Drive ``n`` input sets through a combinational component; return the read values."""
    out = []
    sim = Simulator(dut)

    async def tb(ctx):
        for i in range(n):
            drive(ctx, i)
            out.append(read(ctx))
            await ctx.delay(1e-9)

    sim.add_testbench(tb)
    sim.run()
    return out


def _run_pipe(dut, payloads, latency):
    """Stream payloads into a MAC-like component one per cycle; collect ``o`` payloads when valid.

    Checks the exact latency: the first valid output appears ``latency`` cycles after the first input.
    """
    got, first_valid = [], []
    sim = Simulator(dut)
    if latency:
        sim.add_clock(1e-8)

    async def tb(ctx):
        ctx.set(dut.o.ready, 1)
        for cycle in range(len(payloads) + latency):
            if cycle < len(payloads):
                ctx.set(Value.cast(dut.i.payload), payloads[cycle])
                ctx.set(dut.i.valid, 1)
            else:
                ctx.set(dut.i.valid, 0)
            if latency == 0:
                assert ctx.get(dut.o.valid) == 1
                got.append(ctx.get(Value.cast(dut.o.payload)) & 0xFFFFFFFF)
                await ctx.delay(1e-8)
            else:
                if ctx.get(dut.o.valid):
                    first_valid.append(cycle)
                    got.append(ctx.get(Value.cast(dut.o.payload)) & 0xFFFFFFFF)
                await ctx.tick()

    sim.add_testbench(tb)
    sim.run()
    if latency:
        assert first_valid[0] == latency, f"first result at cycle {first_valid[0]}, expected {latency}"
    return np.array(got, dtype=np.uint64).astype(np.uint32)


def _assert_same(fmt, sub, a, b, c, got, exp):
    bad = np.nonzero(got != exp)[0]
    checked.count(exp.size)
    if bad.size:
        i = bad[0]
        pytest.fail(
            f"{fmt}/{sub}: {bad.size} mismatches; first a={int(a[i]):#x} b={int(b[i]):#x} "
            f"c={int(c[i]):#010x} got {int(got[i]):#010x} expected {int(exp[i]):#010x}"
        )


# ---- multiplier -------------------------------------------------------------------------------


@pytest.mark.parametrize("subnormals", ["ftz", "ieee"])
def test_bf16_multiplier_exact(subnormals, seed):
    """The product's value (sig * 2**(exp-15)) equals the exact float64 product; flags are right."""
    rng = np.random.default_rng(seed)
    a = np.concatenate(
        [
            np.array(
                [0x0000, 0x8000, 0x0001, 0x007F, 0x0080, 0x7F7F, 0x7F80, 0xFF80, 0x7FC0, 0x7F81, 0x3F80, 0xBFFF],
                np.uint16,
            ),
            rng.integers(0, 1 << 16, 1500, dtype=np.uint16),
        ]
    )
    b = np.concatenate(
        [
            np.array(
                [0x7F80, 0x0000, 0x0001, 0x8001, 0x3F80, 0x7F7F, 0x0000, 0x8001, 0x3F80, 0x3F80, 0x0081, 0x3FFF],
                np.uint16,
            ),
            rng.integers(0, 1 << 16, 1500, dtype=np.uint16),
        ]
    )
    dut = BF16Multiplier(subnormals)

    def drive(ctx, i):
        ctx.set(Value.cast(dut.a), int(a[i]))
        ctx.set(Value.cast(dut.b), int(b[i]))

    res = _run_comb(dut, drive, lambda ctx: ctx.get(dut.product), len(a))
    with np.errstate(invalid="ignore"):  # NaN bf16 -> float64 warns; NaN is what we want
        av = a.view(ml_dtypes.bfloat16).astype(np.float64)
        bv = b.view(ml_dtypes.bfloat16).astype(np.float64)
    if subnormals == "ftz":
        av = np.where(np.abs(av) < 2.0**-126, 0.0, av)
        bv = np.where(np.abs(bv) < 2.0**-126, 0.0, bv)
    with np.errstate(all="ignore"):
        exact = av * bv
    for i, p in enumerate(res):
        sign = -1.0 if p["sign"] else 1.0
        assert p["sign"] == ((a[i] ^ b[i]) >> 15), i
        if np.isnan(exact[i]):
            assert p["nan"] == 1, (hex(a[i]), hex(b[i]))
        elif np.isinf(exact[i]):
            assert (p["inf"], p["nan"]) == (1, 0), (hex(a[i]), hex(b[i]))
        elif exact[i] == 0:
            assert (p["zero"], p["inf"], p["nan"], p["sig"]) == (1, 0, 0, 0), (hex(a[i]), hex(b[i]))
        else:
            assert p["sig"] >> 15 == 1, "product significand not normalized"
            assert sign * p["sig"] * 2.0 ** (p["exp"] - 15) == exact[i], (hex(a[i]), hex(b[i]))


# ---- adder ------------------------------------------------------------------------------------


@pytest.mark.soak
@pytest.mark.parametrize("subnormals", ["ftz", "ieee"])
def test_fp32_adder_via_multiplier(subnormals, seed):
    """Multiplier + adder components chained give the golden fused MAC bit for bit.

    Runs under ``--soak`` only (ftz 21 s, ieee 68 s in Amaranth's simulator): the combinational bf16
    MAC is this chain, and ``tests/test_mac_cocotb.py::test_mac_depths`` (bf16-ftz and bf16-ieee,
    depth 0) covers it with the same corner product and 1,500 random MACs in Verilator, faster
    (``test_mac`` adds 20,000 more at depth 2 on both simulators)."""
    from amaranth import Module
    from amaranth.lib import wiring

    rng = np.random.default_rng(seed)
    a, b, c = random_vectors("bf16", 3000, rng)
    ca, cb, cc = corner_vectors("bf16")
    a, b, c = np.concatenate([ca, a]), np.concatenate([cb, b]), np.concatenate([cc, c])

    mul, add = BF16Multiplier(subnormals), FP32Adder(subnormals)

    class Chain(wiring.Component):
        def __init__(self):
            super().__init__({"a": wiring.In(16), "b": wiring.In(16), "c": wiring.In(32), "r": wiring.Out(32)})

        def elaborate(self, platform):
            m = Module()
            m.submodules.mul, m.submodules.add = mul, add
            m.d.comb += [
                mul.a.eq(self.a),
                mul.b.eq(self.b),
                add.product.eq(mul.product),
                add.acc.eq(self.c),
                add.i_valid.eq(1),
                self.r.eq(add.result),
            ]
            return m

    dut = Chain()

    def drive(ctx, i):
        ctx.set(dut.a, int(a[i]))
        ctx.set(dut.b, int(b[i]))
        ctx.set(dut.c, int(c[i]))

    got = np.array(_run_comb(dut, drive, lambda ctx: ctx.get(dut.r), len(a)), dtype=np.uint32)
    _assert_same("bf16", subnormals, a, b, c, got, mac_bits(c, a, b, subnormals=subnormals))


def _fp32_pairs(rng, n):
    """``n`` random fp32 bit-pattern pairs from five mixes, plus every pairing of the specials:
    uniform bits; close exponents (cancellation, y = -x nudged by a few ulps); y = x scaled by
    2**-k for k 0..40 (alignment and sticky bits); subnormals and the normal boundary; ties
    (y = half an ulp of x, odd and even x)."""
    specials = np.array(
        [
            0,
            0x80000000,
            1,
            0x80000001,
            0x007FFFFF,
            0x807FFFFF,
            0x00800000,
            0x80800000,
            0x00800001,
            0x7F7FFFFF,
            0xFF7FFFFF,
            0x7F800000,
            0xFF800000,
            0x7FC00000,
            0xFFC00001,
            0x7F800001,
            0x3F800000,
            0xBF800000,
            0x3F800001,
            0x33800000,
            0xB3800000,
            0x4B800000,
            0x00400000,
            0x34000000,
        ],
        dtype=np.uint32,
    )
    sx, sy = np.meshgrid(specials, specials)
    k = n // 5
    uni = rng.integers(0, 2**32, size=(2, k), dtype=np.uint64).astype(np.uint32)
    x = rng.integers(0, 2**32, size=k, dtype=np.uint64).astype(np.uint32)
    close = (x ^ 0x80000000) + rng.integers(-4, 5, size=k).astype(np.uint32)
    scale = np.clip(((x >> 23) & 0xFF).astype(np.int64) - rng.integers(0, 41, size=k), 0, 255).astype(np.uint32)
    far = (rng.integers(0, 2**32, size=k, dtype=np.uint64).astype(np.uint32) & 0x807FFFFF) | (scale << 23)
    sub = rng.integers(0, 2**25, size=(2, k), dtype=np.uint64).astype(np.uint32) | (
        rng.integers(0, 2, size=(2, k)).astype(np.uint32) << 31
    )
    half = np.clip(((x >> 23) & 0xFF).astype(np.int64) - 24, 0, 255).astype(np.uint32) << 23
    xs = np.concatenate([sx.ravel(), uni[0], x, x, sub[0], x])
    ys = np.concatenate([sy.ravel(), uni[1], close, far, sub[1], half | (x & 0x80000000)])
    return xs, ys


@pytest.mark.parametrize("subnormals", ["ftz", "ieee"])
def test_fp32_sum_matches_golden_add(subnormals, seed):
    """FP32Sum (combinational) is bit-exact against ``verif.golden.add`` on 3,000 random pairs in five
    mixes and all 576 pairings of 24 specials, both operand orders (the sum is commutative)."""
    from verif.golden import add

    rng = np.random.default_rng(seed)
    x, y = _fp32_pairs(rng, 3000)
    x, y = np.concatenate([x, y]), np.concatenate([y, x])
    dut = FP32Sum(subnormals)

    def drive(ctx, i):
        ctx.set(dut.x.as_value(), int(x[i]))
        ctx.set(dut.y.as_value(), int(y[i]))

    got = np.array(_run_comb(dut, drive, lambda ctx: ctx.get(dut.result.as_value()), len(x)), dtype=np.uint32)
    exp = add(x.view(np.float32), y.view(np.float32), subnormals=subnormals).view(np.uint32)
    bad = np.flatnonzero(got != exp)
    assert bad.size == 0, (
        f"seed {seed}: {bad.size} of {len(x)} differ; first: x={x[bad[0]]:#010x} "
        f"y={y[bad[0]]:#010x} got {got[bad[0]]:#010x} expected {exp[bad[0]]:#010x}"
    )


def test_fp32_sum_pipelined_latency_and_rounding():
    """With every cut the sum comes out ``len(ADDER_CUTS)`` = 7 cycles after its operands, one per
    cycle; the fixed cases are exact: 1 + 2**-24 (a tie, to even: 1.0), (1 + 2**-23) + 2**-24 (a tie,
    up to 1 + 2**-22), max + max (+inf), 1 + -1 (+0), -0 + -0 (-0), min subnormal + min subnormal
    (2**-148 in IEEE)."""
    cases = [
        (0x3F800000, 0x33800000, 0x3F800000),
        (0x3F800001, 0x33800000, 0x3F800002),
        (0x7F7FFFFF, 0x7F7FFFFF, 0x7F800000),
        (0x3F800000, 0xBF800000, 0),
        (0x80000000, 0x80000000, 0x80000000),
        (1, 1, 2),
    ]
    dut = FP32Sum("ieee", cuts=ADDER_CUTS)
    assert dut.latency_cycles == 7
    got, when = [], []
    sim = Simulator(dut)
    sim.add_clock(1e-8)

    async def tb(ctx):
        for t in range(len(cases) + 9):
            if t < len(cases):
                ctx.set(dut.x.as_value(), cases[t][0])
                ctx.set(dut.y.as_value(), cases[t][1])
            ctx.set(dut.i_valid, int(t < len(cases)))
            await ctx.tick()
            if ctx.get(dut.o_valid):  # after clock edge t + 1: the operands of edge 1 are 7 edges in
                got.append(ctx.get(dut.result.as_value()))
                when.append(t + 1)

    sim.add_testbench(tb)
    sim.run()
    assert got == [c[2] for c in cases]
    assert when == list(range(7, 7 + len(cases)))


def test_fp32_sum_rejects_bad_configuration():
    with pytest.raises(ValueError, match="subnormals must be one of ftz, ieee; got 'daz'"):
        FP32Sum("daz")
    with pytest.raises(ValueError, match="cuts must be a subset of exp, align"):
        FP32Sum("ftz", cuts=("mul",))


def test_adder_rejects_bad_cut():
    with pytest.raises(ValueError, match="cuts must be a subset of exp, align, add, norm1, norm, round, out"):
        FP32Adder("ftz", cuts=("mul",))


# ---- fp8 decoders -----------------------------------------------------------------------------


@pytest.mark.parametrize("fmt,dtype", [("fp8_e4m3fn", ml_dtypes.float8_e4m3fn), ("fp8_e5m2", ml_dtypes.float8_e5m2)])
def test_fp8_decoder_all_codes(fmt, dtype):
    """All 256 codes decode to the exact bf16 value (ml_dtypes), NaN to 0x7FC0 with the input sign."""
    dut = FP8Decoder(fmt)
    codes = np.arange(256, dtype=np.uint8)
    got = np.array(
        _run_comb(dut, lambda ctx, i: ctx.set(Value.cast(dut.fp8), i), lambda ctx: ctx.get(Value.cast(dut.bf16)), 256),
        dtype=np.uint16,
    )
    ref = codes.view(dtype).astype(np.float32).astype(ml_dtypes.bfloat16).view(np.uint16)
    nan = np.isnan(codes.view(dtype).astype(np.float32))
    assert np.array_equal(got[~nan], ref[~nan])
    assert np.array_equal(got[nan], np.where(codes[nan] >= 128, 0xFFC0, 0x7FC0).astype(np.uint16))
    assert nan.sum() == (2 if fmt == "fp8_e4m3fn" else 6)


def test_fp8_decoder_rejects_bf16():
    with pytest.raises(ValueError, match="fmt must be one of fp8_e4m3fn, fp8_e5m2; got 'bf16'"):
        FP8Decoder("bf16")


# ---- int8 -------------------------------------------------------------------------------------


def test_int8_mac_wraps(seed):
    rng = np.random.default_rng(seed)
    a, b, c = random_vectors("int8", 2000, rng)
    ca, cb, cc = corner_vectors("int8")
    a, b, c = np.concatenate([ca, a]), np.concatenate([cb, b]), np.concatenate([cc, c])
    dut = Int8MAC()

    def drive(ctx, i):
        ctx.set(dut.a, int(a[i].view(np.int8)))
        ctx.set(dut.b, int(b[i].view(np.int8)))
        ctx.set(dut.acc, int(c[i].view(np.int32)))

    got = np.array(_run_comb(dut, drive, lambda ctx: ctx.get(dut.result) & 0xFFFFFFFF, len(a)), dtype=np.uint32)
    _assert_same("int8", "-", a, b, c, got, expected_bits("int8", "ftz", a, b, c))
    # The wrap itself: 0x7FFFFFFF + 127*127 wraps negative.
    assert expected_bits("int8", "ftz", [0x7F], [0x7F], [0x7FFFFFFF])[0] == (0x7FFFFFFF + 127 * 127) & 0xFFFFFFFF


# ---- the MAC: every format, mode and pipeline depth ---------------------------------------------

CONFIGS = [(f, s) for f in ("bf16", "fp8_e4m3fn", "fp8_e5m2") for s in ("ftz", "ieee")] + [("int8", "ftz")]


@pytest.mark.soak
@pytest.mark.parametrize("stages", range(MAX_STAGES + 1))
@pytest.mark.parametrize("fmt,subnormals", CONFIGS)
def test_mac_pipeline(fmt, subnormals, stages, seed):
    """Corner cases + 1,500 random MACs through the pipelined MAC; exact latency and bits.

    In Amaranth's simulator this took 420 s of the default suite; under ``--soak`` only, because
    ``tests/test_mac_cocotb.py::test_mac_depths`` covers the same behaviour faster: every format and
    mode, every depth, the corner product at every depth (here at three) and the same 1,500 random
    MACs, exact latency and bits, in one Verilator build per format and mode (about 140 s in all)."""
    cfg = MACConfig(fmt, subnormals, stages)
    rng = np.random.default_rng(seed)
    a, b, c = random_vectors(fmt, 1500, rng)
    if stages in (0, 3, 8):  # the full corner product once per format at three depths
        ca, cb, cc = corner_vectors(fmt)
        a, b, c = np.concatenate([ca, a]), np.concatenate([cb, b]), np.concatenate([cc, c])
    dut = MAC(cfg)
    assert dut.latency_cycles == stages
    got = _run_pipe(dut, pack_inputs(fmt, a, b, c), stages)
    assert got.size == a.size
    _assert_same(fmt, subnormals, a, b, c, got, expected_bits(fmt, subnormals, a, b, c))


def test_mac_holds_bubbles():
    """Invalid beats stay invalid through the pipeline (valid has a reset; data registers do not)."""
    dut = MAC(MACConfig("bf16", "ftz", 3))
    seen = []
    sim = Simulator(dut)
    sim.add_clock(1e-8)
    pattern = [1, 0, 0, 1, 1, 0, 1, 0, 0, 0, 0]

    async def tb(ctx):
        ctx.set(dut.o.ready, 1)
        for v in pattern:
            ctx.set(Value.cast(dut.i.payload), 0x3F80 | 0x3F80 << 16)  # 1*1 + 0
            ctx.set(dut.i.valid, v)
            await ctx.tick()
            seen.append(ctx.get(dut.o.valid))

    sim.add_testbench(tb)
    sim.run()
    assert seen == [0, 0] + pattern[:-2]


@pytest.mark.parametrize(
    "kwargs,message",
    [
        ({"fmt": "fp16"}, "fmt must be one of bf16, fp8_e4m3fn, fp8_e5m2, int8; got 'fp16'"),
        ({"subnormals": "daz"}, "subnormals must be one of ftz, ieee; got 'daz'"),
        ({"stages": 10}, "stages must be an integer from 0 to 9; got 10"),
        ({"stages": -1}, "stages must be an integer from 0 to 9; got -1"),
    ],
)
def test_mac_config_errors(kwargs, message):
    with pytest.raises(ValueError) as e:
        MACConfig(**kwargs)
    assert str(e.value) == message


def test_mac_config_wrong_type():
    with pytest.raises(TypeError, match=r"^stages must be an integer from 0 to 9; got True$"):
        MACConfig(stages=True)
    with pytest.raises(TypeError, match=r"^fmt must be one of bf16, fp8_e4m3fn, fp8_e5m2, int8; got 8$"):
        MACConfig(fmt=8)


def test_stage_placement_table():
    assert [len(FLOAT_CUTS_BY_STAGES[s]) for s in range(MAX_STAGES + 1)] == list(range(10))
    from hw.arith.fp32_add import ADDER_CUTS

    order = ("in", "mul") + ADDER_CUTS
    for cuts in FLOAT_CUTS_BY_STAGES.values():  # every cut point is a known one, in datapath order
        assert list(cuts) == sorted(cuts, key=order.index)


@pytest.mark.parametrize("stages", [1, 3])
def test_mac_backpressure(stages, seed):
    """Random o.ready and random input gaps: every result arrives once, in order, bit-exact, and a
    stalled output holds its payload (stream rules)."""
    rng = np.random.default_rng(seed)
    a, b, c = random_vectors("bf16", 400, rng)
    payloads = pack_inputs("bf16", a, b, c)
    dut = MAC(MACConfig("bf16", "ieee", stages))
    got = []
    sim = Simulator(dut)
    sim.add_clock(1e-8)

    async def tb(ctx):
        idx, held = 0, None
        for _ in range(20 * len(payloads)):
            if len(got) == len(payloads):
                break
            give = idx < len(payloads) and rng.random() < 0.7
            ctx.set(dut.i.valid, int(give))
            if give:
                ctx.set(Value.cast(dut.i.payload), payloads[idx])
            ready = int(rng.random() < 0.6)
            ctx.set(dut.o.ready, ready)
            o_valid, o_payload, i_ready = ctx.get(dut.o.valid), ctx.get(Value.cast(dut.o.payload)), ctx.get(dut.i.ready)
            if held is not None:
                assert o_valid == 1 and o_payload == held, "stalled output changed"
            held = o_payload if (o_valid and not ready) else None
            if o_valid and ready:
                got.append(o_payload)
            if give and i_ready:
                idx += 1
            await ctx.tick()

    sim.add_testbench(tb)
    sim.run()
    got = np.array(got, dtype=np.uint64).astype(np.uint32)
    assert got.size == len(payloads)
    _assert_same("bf16", "ieee", a, b, c, got, expected_bits("bf16", "ieee", a, b, c))
