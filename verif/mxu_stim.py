"""MXU stimulus: weight tiles, activation beats and their golden results, and the stream payloads.

A *tile* is one weight matrix W (R x C) and the M activation rows that use it, each with C
partial-sum inputs. Its golden result is ``verif.golden.matmul(A, W, Cin)`` (K = R), the same
sequential chain the array computes. All values are raw bit patterns (uint16 bf16, uint8 fp8/int8,
uint32 fp32/int32).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from verif.golden import matmul, to_format
from verif.vectors import nan_operands, random_vectors, special_accumulators, special_operands

__all__ = [
    "as_format",
    "Tile",
    "random_tile",
    "probe_tiles",
    "mxu_probe",
    "tile_expected",
    "pack_act",
    "pack_wgt",
    "unpack_out",
    "weight_beats",
    "act_beats",
    "gemm_tiles_exact",
    "pad_value_bits",
]

_OP_DTYPE = {"bf16": np.uint16, "fp8_e4m3fn": np.uint8, "fp8_e5m2": np.uint8, "int8": np.uint8}
_SPECIAL_BF16 = np.array([0x0000, 0x8000, 0x0001, 0x8070, 0x7F80, 0xFF80, 0x7FC0, 0x7F7F, 0x0080], np.uint16)
_SPECIAL_F32 = np.array(
    [0x00000000, 0x80000000, 0x00000001, 0x7F800000, 0xFF800000, 0x7FC00000, 0x7F7FFFFF, 0x00800000], np.uint32
)


@dataclass
class Tile:
    """One weight tile: ``w`` (R, C), ``a`` (M, R), ``c`` (M, C) raw bit patterns."""

    w: np.ndarray
    a: np.ndarray
    c: np.ndarray


def _random_ops(fmt: str, shape, rng, specials: float) -> np.ndarray:
    if fmt == "bf16":
        # Moderate exponents (so sums really round) plus uniform patterns and special values.
        x = rng.standard_normal(shape).astype(np.float32) * np.float32(4.0)
        bits = to_format(x, "bf16").view(np.uint16)
        uni = rng.integers(0, 1 << 16, shape, dtype=np.uint16)
        bits = np.where(rng.random(shape) < 0.1, uni, bits)
        sp = rng.choice(_SPECIAL_BF16, shape)
        return np.where(rng.random(shape) < specials, sp, bits).astype(np.uint16)
    if fmt == "int8":
        return rng.integers(0, 256, shape, dtype=np.uint16).astype(np.uint8)
    x = rng.standard_normal(shape).astype(np.float32) * np.float32(2.0)
    bits = to_format(x, fmt).view(np.uint8)
    uni = rng.integers(0, 256, shape, dtype=np.uint16).astype(np.uint8)
    return np.where(rng.random(shape) < max(specials, 0.1), uni, bits).astype(np.uint8)


def _random_acc(fmt: str, shape, rng, specials: float) -> np.ndarray:
    if fmt == "int8":
        return rng.integers(0, 1 << 32, shape, dtype=np.uint32)
    x = (rng.standard_normal(shape) * 8).astype(np.float32).view(np.uint32)
    sp = rng.choice(_SPECIAL_F32, shape)
    return np.where(rng.random(shape) < specials, sp, x).astype(np.uint32)


def random_tile(fmt: str, rows: int, cols: int, m: int, rng: np.random.Generator, specials: float = 0.02) -> Tile:
    """A random tile; ``specials`` is the fraction of operands replaced by NaN/inf/subnormal/zero."""
    return Tile(
        _random_ops(fmt, (rows, cols), rng, specials),
        _random_ops(fmt, (m, rows), rng, specials),
        _random_acc(fmt, (m, cols), rng, specials),
    )


def as_format(bits: np.ndarray, fmt: str) -> np.ndarray:
    """Raw bit patterns -> the format's dtype (int8 viewed as signed)."""
    if fmt == "int8":
        return bits.view(np.int8)
    return to_format(bits, fmt)


def tile_expected(tile: Tile, fmt: str, subnormals: str) -> np.ndarray:
    """Golden (M, C) result bits (uint32) of one tile."""
    acc = tile.c.view(np.int32) if fmt == "int8" else tile.c.view(np.float32)
    out = matmul(as_format(tile.a, fmt), as_format(tile.w, fmt), acc, fmt=fmt, subnormals=subnormals)
    return out.view(np.uint32)


def _op_bits(fmt: str) -> int:
    return 16 if fmt == "bf16" else 8


def pack_act(fmt: str, rows: int, cols: int, a_row, c_row, swap: bool) -> int:
    """Activation-stream payload: a[r] at bits w*r, c[c] at R*w + 32*c, swap at R*w + 32*C."""
    w = _op_bits(fmt)
    v = 0
    for r in range(rows):
        v |= int(a_row[r]) << (w * r)
    base = rows * w
    for c in range(cols):
        v |= int(c_row[c]) << (base + 32 * c)
    return v | (int(bool(swap)) << (base + 32 * cols))


def pack_wgt(fmt: str, w_row) -> int:
    """Weight-stream payload of one row: w[c] at bits w*c."""
    w = _op_bits(fmt)
    return sum(int(x) << (w * c) for c, x in enumerate(w_row))


def unpack_out(value: int, cols: int) -> np.ndarray:
    """Output payload -> (C,) uint32."""
    return np.array([(value >> (32 * c)) & 0xFFFFFFFF for c in range(cols)], dtype=np.uint32)


def weight_beats(fmt: str, tile: Tile) -> list[int]:
    """The R weight beats of a tile, row R-1 first (it travels furthest down the chain)."""
    return [pack_wgt(fmt, tile.w[r]) for r in range(tile.w.shape[0] - 1, -1, -1)]


def act_beats(fmt: str, tile: Tile) -> list[int]:
    """The M activation beats of a tile; the first carries ``swap``."""
    rows, cols = tile.w.shape
    return [pack_act(fmt, rows, cols, tile.a[i], tile.c[i], i == 0) for i in range(tile.a.shape[0])]


def pad_value_bits(fmt: str) -> tuple[int, int]:
    """(activation pad, weight pad) bit patterns that leave every partial sum unchanged.

    A padded product must be -0 for floats: ``x + (-0) = x`` for every x including +-0 (IEEE 754-2019
    §6.3), whereas ``-0 + (+0) = +0`` would change a -0 partial sum. So activations pad with -0 and
    weights with +0 (``(-0) * (+0) = -0``); real data is never multiplied by padding. int8 pads with 0.
    """
    if fmt == "int8":
        return 0, 0
    return (0x8000, 0x0000) if fmt == "bf16" else (0x80, 0x00)


def gemm_tiles_exact(fmt: str, a: np.ndarray, b: np.ndarray, rows: int, cols: int):
    """Split (M, K) @ (K, N) bit-pattern operands into K-blocks x N-blocks of padded tiles.

    Returns ``blocks[kb][nb] = (w_tile (R, C), a_tile (M, R))`` with padding from
    :func:`pad_value_bits`; the caller chains ``c`` through the K blocks.
    """
    m, k = a.shape
    n = b.shape[1]
    a_pad, w_pad = pad_value_bits(fmt)
    kb_n, nb_n = -(-k // rows), -(-n // cols)
    dt = a.dtype
    a_full = np.full((m, kb_n * rows), a_pad, dtype=dt)
    a_full[:, :k] = a
    b_full = np.full((kb_n * rows, nb_n * cols), w_pad, dtype=dt)
    b_full[:k, :n] = b
    return [
        [
            (b_full[kb * rows : (kb + 1) * rows, nb * cols : (nb + 1) * cols], a_full[:, kb * rows : (kb + 1) * rows])
            for nb in range(nb_n)
        ]
        for kb in range(kb_n)
    ]


def _decode(bits: np.ndarray, fmt: str) -> np.ndarray:
    """Operand bit patterns -> float64 values (bf16 or fp8)."""
    return as_format(bits, fmt).astype(np.float64)


def probe_lengths(rows: int, cols: int, per_row: int, long: int, rng: np.random.Generator) -> list[int]:
    """Activation beats of ``per_row * rows`` probe tiles: every other tile ``long`` beats, the others
    1 .. 3R + C + 3 at random (short tiles make swaps wait for the weight load and the commit gap,
    as in ``tiles_back_to_back``)."""
    return [long if (t // rows) % 2 else int(rng.integers(1, 3 * rows + cols + 4)) for t in range(per_row * rows)]


def probe_tiles(fmt: str, rows: int, cols: int, lengths: list[int], rng: np.random.Generator) -> list[Tile]:
    """Tiles that put MAC test vectors into single PEs of the array, one tile per entry of
    ``lengths`` (its activation beats).

    Tile t makes row ``p = t mod R`` the probe: row p's weights and every beat's row-p activation
    and partial-sum inputs are MAC stimulus, and every other row holds the padding of
    :func:`pad_value_bits` (weight +0, activation -0), whose product -0 leaves a partial sum
    unchanged. So PE (p, c) computes ``c_in + a * w`` on the operands below, not on sums of
    ordinary numbers, and its result reaches the output unchanged (the golden model computes the
    whole chain, so nothing relies on that).

    Operands, with k = t div R the tile's number among its row's probes and S the operands of
    :func:`probe_operands`: for even k, column c's weight is S[(k/2 + c) mod |S|] (over 2|S| probes
    every PE holds every special weight) and beat i's activation S[(i + k/2) mod |S|] for i < |S|,
    random after; for odd k, 40 % of weights and activations are drawn from S, the
    rest from :func:`verif.vectors.random_vectors` (every distribution). Partial sums: 20 % special
    values, 25 % (floats) the negated product rounded to fp32 and moved by -3..3 ulps (massive
    cancellation, ties, sticky bits), 15 % (floats) the product's magnitude scaled by 2**-30..2**30
    with random low bits (aligned adds), the rest random.

    Returns: tiles with ``w`` (R, C), ``a`` (M_t, R), ``c`` (M_t, C) bit patterns.
    """
    a_pad, w_pad = pad_value_bits(fmt)
    ops, accs = probe_operands(fmt), special_accumulators(fmt)
    n_ops = ops.size
    dt = _OP_DTYPE[fmt]
    tiles = []
    for t, beats in enumerate(lengths):
        p, k = t % rows, t // rows
        # one draw per role: random_vectors splits a draw evenly over its distributions in order,
        # so a prefix of one long draw would hold the first distribution only
        ra = random_vectors(fmt, beats, rng)[0]
        rb = random_vectors(fmt, cols, rng)[1]
        rc = random_vectors(fmt, beats * cols, rng)[2]
        if k % 2 == 0:
            w_p = ops[(k // 2 + np.arange(cols)) % n_ops].astype(dt)
            a_p = ra[:beats].astype(dt)
            head = min(beats, n_ops)
            a_p[:head] = ops[(np.arange(head) + k // 2) % n_ops]
        else:
            w_p = np.where(rng.random(cols) < 0.4, rng.choice(ops, cols), rb[:cols]).astype(dt)
            a_p = np.where(rng.random(beats) < 0.4, rng.choice(ops, beats), ra[:beats]).astype(dt)
        c = rc[:beats * cols].reshape(beats, cols).copy()
        kind = rng.random((beats, cols))
        c = np.where(kind < 0.2, rng.choice(accs, (beats, cols)), c).astype(np.uint32)
        if fmt != "int8":
            with np.errstate(all="ignore"):
                prod = np.outer(_decode(a_p, fmt), _decode(w_p, fmt))
                cancel = (-prod).astype(np.float32).view(np.uint32).astype(np.int64)
                cancel = (cancel + rng.integers(-3, 4, (beats, cols))).astype(np.uint32)
                scale = 2.0 ** rng.integers(-30, 31, (beats, cols)) * rng.choice([-1.0, 1.0], (beats, cols))
                mag = (np.abs(prod) * scale).astype(np.float32).view(np.uint32)
                mag = mag ^ rng.integers(0, 1 << 16, (beats, cols), dtype=np.uint32)
            c = np.where((kind >= 0.2) & (kind < 0.45), cancel, c)
            c = np.where((kind >= 0.45) & (kind < 0.6), mag, c).astype(np.uint32)
        w = np.full((rows, cols), w_pad, dtype=dt)
        w[p] = w_p
        a = np.full((beats, rows), a_pad, dtype=dt)
        a[:, p] = a_p
        tiles.append(Tile(w, a, c))
    return tiles


def probe_operands(fmt: str) -> np.ndarray:
    """The operands every PE meets in :func:`probe_tiles`: the special values
    (:func:`verif.vectors.special_operands`) and the NaNs with one mantissa bit
    (:func:`verif.vectors.nan_operands`)."""
    both = [int(x) for x in np.concatenate([special_operands(fmt), nan_operands(fmt)])]
    return np.array(list(dict.fromkeys(both)), dtype=_OP_DTYPE[fmt])  # each once, in order


def mxu_probe(fmt: str, simulator: str = "verilator", pes: int = 64) -> tuple[int, int]:
    """(probe tiles per row, beats of a long probe tile) of the ``mac_vectors`` test
    (:func:`probe_lengths`) on an array of ``pes`` PEs: under Verilator 2 |S| + 4 per row up to 64 PEs
    (:func:`probe_operands`; every PE holds every special weight, about 4 s on 8x8 bf16), |S| / 2 + 2
    above (each PE holds a quarter of them; every PE still multiplies every special activation); under
    Icarus 4 per row (about 20 times slower per cycle)."""
    n = probe_operands(fmt).size
    if simulator != "verilator":
        return 4, 16
    return (2 * n + 4, 48) if pes <= 64 else (n // 2 + 2, 48)
