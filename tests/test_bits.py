"""The combinational building blocks of the adder (``hw.arith.bits``) against Python references:
the jamming right shift, the successive-normalization left shift, and comparisons with constants."""

from __future__ import annotations

import numpy as np
import pytest
from amaranth import Module, Signal, signed
from amaranth.sim import Simulator

from hw.arith.bits import leading_zeros, lt_const, normalize_left, shift_right_jam, signed_gt_const, signed_lt_const

W = 27


def _run(m, inputs, outputs, vectors):
    """Set each vector on ``inputs`` and read ``outputs``; returns a list of tuples."""
    got = []

    async def tb(ctx):
        for vec in vectors:
            for sig, value in zip(inputs, vec):
                ctx.set(sig, value)
            got.append(tuple(ctx.get(o) for o in outputs))

    sim = Simulator(m)
    sim.add_testbench(tb)
    sim.run()
    return got


def _operands(rng, n):
    """Edge values (0, all ones, every single bit, every low mask) and random ones of 27 bits."""
    edge = [0, (1 << W) - 1] + [1 << i for i in range(W)] + [(1 << i) - 1 for i in range(1, W)]
    return edge + [int(v) for v in rng.integers(0, 1 << W, n)]


def test_shift_right_jam(seed):
    """Every amount 0..40 and the large ones up to 2**11 - 1, on edge and random operands: the kept
    bits are x >> amount and bit 0 also holds the OR of every bit shifted out."""
    rng = np.random.default_rng(seed)
    m = Module()
    x, amt, y = Signal(W), Signal(11), Signal(W)
    m.d.comb += y.eq(shift_right_jam(m, x, W, amt))
    amounts = list(range(41)) + [63, 64, 100, 639, 1023, 1024 + 5, 2047]
    xs = _operands(rng, 60)
    vectors = [(v, a) for v in xs for a in amounts]
    got = _run(m, [x, amt], [y], vectors)
    for (v, a), (r,) in zip(vectors, got):
        lost = v & ((1 << min(a, W)) - 1)
        want = (v >> a if a < W else 0) | (lost != 0)
        assert r == want, (hex(v), a, hex(r), hex(want))


def test_normalize_left_matches_leading_zeros(seed):
    """For every non-zero operand: count = leading zeros (as leading_zeros gives) and the shifted
    value has its MSB set and equals x << count."""
    rng = np.random.default_rng(seed)
    m = Module()
    x, y, n, lz = Signal(W), Signal(W), Signal(5), Signal(5)
    sh, cnt = normalize_left(m, x, W)
    m.d.comb += [y.eq(sh), n.eq(cnt), lz.eq(leading_zeros(m, x, W))]
    xs = [v for v in _operands(rng, 400) if v]
    got = _run(m, [x], [y, n, lz], [(v,) for v in xs])
    for v, (r, count, lzc) in zip(xs, got):
        want = W - v.bit_length()
        assert count == want == lzc, (hex(v), count, lzc, want)
        assert r == (v << want) & ((1 << W) - 1) and r >> (W - 1) == 1


def test_normalize_left_split_in_two_steps(seed):
    """Steps (16, 8) then (4, 2, 1), as the MAC's "norm1" cut splits it: same shifted value as the
    whole normalizer, and the two partial counts OR to the leading-zero count."""
    rng = np.random.default_rng(seed)
    m = Module()
    x, y, n = Signal(W), Signal(W), Signal(5)
    mid, hi = normalize_left(m, x, W, steps=(16, 8), name="hi")
    sh, lo = normalize_left(m, mid, W, steps=(4, 2, 1), name="lo")
    m.d.comb += [y.eq(sh), n.eq(hi | lo)]
    xs = [v for v in _operands(rng, 400) if v] + [1, 1 << 8, (1 << 8) - 1, 1 << 26]
    got = _run(m, [x], [y, n], [(v,) for v in xs])
    for v, (r, count) in zip(xs, got):
        want = W - v.bit_length()
        assert count == want, (hex(v), count, want)
        assert r == (v << want) & ((1 << W) - 1)


def test_normalize_left_rejects_bad_step():
    with pytest.raises(ValueError, match=r"^steps must be among \[16, 8, 4, 2, 1\] for width 27; got \[3\]$"):
        normalize_left(Module(), Signal(W), W, steps=(3,))


def test_comparisons_with_constants():
    """lt_const on every 5-bit value against constants -1..33; the signed forms on every 6-bit
    two's-complement value against -40..40 (constants outside the range included)."""
    m = Module()
    u, s = Signal(5), Signal(signed(6))
    ks_u, ks_s = range(-1, 34), range(-40, 41)
    outs_u = [Signal(name=f"lt{k + 1}") for k in ks_u]
    outs_lt = [Signal(name=f"slt{k + 40}") for k in ks_s]
    outs_gt = [Signal(name=f"sgt{k + 40}") for k in ks_s]
    m.d.comb += [o.eq(lt_const(u, k)) for o, k in zip(outs_u, ks_u)]
    m.d.comb += [o.eq(signed_lt_const(s, k)) for o, k in zip(outs_lt, ks_s)]
    m.d.comb += [o.eq(signed_gt_const(s, k)) for o, k in zip(outs_gt, ks_s)]
    got = _run(m, [u, s], outs_u + outs_lt + outs_gt, [(v, v - 32) for v in range(32)] + [(0, v) for v in range(0, 32)])
    for (uv, sv), row in zip([(v, v - 32) for v in range(32)] + [(0, v) for v in range(0, 32)], got):
        ru, rl, rg = row[: len(ks_u)], row[len(ks_u) : len(ks_u) + len(ks_s)], row[len(ks_u) + len(ks_s) :]
        assert list(ru) == [int(uv < k) for k in ks_u], uv
        assert list(rl) == [int(sv < k) for k in ks_s], sv
        assert list(rg) == [int(sv > k) for k in ks_s], sv


def test_leading_zeros_of_zero_is_the_width():
    m = Module()
    x, lz = Signal(W), Signal(5)
    m.d.comb += lz.eq(leading_zeros(m, x, W))
    assert _run(m, [x], [lz], [(0,), (1,), (1 << 26,)]) == [(27,), (26,), (0,)]


@pytest.mark.parametrize("block", ["shift_right_jam", "normalize_left", "leading_zeros"])
def test_each_stage_is_written_once_in_the_verilog(block):
    """Regression: Amaranth writes an expression out once per use, and every shifter stage used the
    previous one twice, so the operand ``p ^ q`` was written 2**stages times (the bf16 IEEE PE had
    4,081 assigns; Icarus evaluated each copy). Now the operand and each stage are named wires."""
    from amaranth.back import rtlil

    m = Module()
    p, q, amt, y = Signal(W), Signal(W), Signal(11), Signal(W)
    if block == "shift_right_jam":
        m.d.comb += y.eq(shift_right_jam(m, p ^ q, W, amt))
    elif block == "normalize_left":
        m.d.comb += y.eq(normalize_left(m, p ^ q, W)[0])
    else:
        m.d.comb += y.eq(leading_zeros(m, p ^ q, W))
    text = rtlil.convert(m, ports=[p, q, amt, y])
    assert text.count("cell $xor ") == 1
