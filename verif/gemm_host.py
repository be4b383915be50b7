"""Host side of the GEMM engine, simulator independent: memory layout, backdoor load and read-back.

A GEMM's matrices live row-major in the HBM address space. :func:`layout` places A, B, C0 and D in
4 KiB-aligned regions with row strides rounded up to 32 B (the engine's alignment rule) plus an
optional number of extra bytes per row (``pad_bytes``, a multiple of 32: tests use it to prove the
engine never reads or writes outside a row). Bytes of memory that no matrix element occupies hold
``FILL`` (0xFF: a NaN as bf16 0xFFFF, fp32 0xFFFFFFFF and fp8 0xFF of either format; -1 as int8),
so a padding element that leaked into a result would change it, even one multiplied by a padding
zero of the other operand (NaN x 0 is NaN; a finite fill times 0 left no trace).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from hw.engine.csr import REG

__all__ = ["FILL", "Layout", "layout", "check_gemm", "engine_error", "poke_matrix", "peek_matrix", "check_untouched",
           "register_writes", "drain_cycles", "POLL_CYCLES"]

FILL = 0xFF
BEAT = 32


#: Between jobs a testbench checks every this many clock cycles whether the memory system drained.
POLL_CYCLES = 16


def drain_cycles(timing) -> int:
    """Clock cycles without a column command after which the controllers' queues have drained.

    DONE means every result write was accepted (posted), not that it reached the device; before a
    testbench reads D through the backdoor it waits until, for longer than the longest gap a refresh
    can cause inside a stream of queued requests, no column command has been issued and no request
    has waited in a controller's queue (the top's ``queue_empty<k>``): tRP + tRFC + tRCD + tRAS + CWL +
    64 cycles of ``timing`` (an :class:`hw.hbm.config.HBMTiming`). Column commands alone are not
    enough: a REF begun while the queues were empty can hold the last writes, queued after it,
    for most of tRFC, so the quiet spell may have started before DONE. Both GEMM testbenches
    wait by this rule, polled every :data:`POLL_CYCLES` cycles, so a later job of a run starts at the
    same cycle (and sees the same refresh phase) on either memory model.
    """
    t = timing
    return t.tRP + t.tRFC + t.tRCD + t.tRAS + t.CWL + 64


def _round_up(x: int, a: int) -> int:
    return -(-x // a) * a


@dataclass(frozen=True)
class Layout:
    """Byte addresses and row strides of one GEMM's matrices (``c_base`` is None without C0)."""
    a_base: int
    a_stride: int
    b_base: int
    b_stride: int
    c_base: int | None
    c_stride: int
    d_base: int
    d_stride: int
    end: int


def layout(m: int, k: int, n: int, operand_bytes: int, out_bytes: int, load_c: bool, *, start: int = 0x1000,
           pad_bytes: int = 0) -> Layout:
    """Place A (M x K), B (K x N), C0 (M x N fp32) and D (M x N, ``out_bytes`` each) from ``start``.

    Raises:
        ValueError: ``pad_bytes`` not a multiple of 32.
    """
    if pad_bytes % BEAT:
        raise ValueError(f"pad_bytes must be a multiple of {BEAT}; got {pad_bytes}")
    addr = _round_up(start, 4096)
    out = {}
    for name, rows, row_bytes, used in (("a", m, k * operand_bytes, True), ("b", k, n * operand_bytes, True),
                                        ("c", m, n * 4, load_c), ("d", m, n * out_bytes, True)):
        stride = _round_up(row_bytes, BEAT) + pad_bytes
        if used:
            out[name] = (addr, stride)
            addr = _round_up(addr + rows * stride, 4096)
        else:
            out[name] = (None, stride)
    return Layout(out["a"][0], out["a"][1], out["b"][0], out["b"][1], out["c"][0], out["c"][1], out["d"][0],
                  out["d"][1], addr)


def check_gemm(m: int, k: int, n: int, config, *, load_c: bool = False, out_bf16: bool = False,
               start: int = 0x1000, pad_bytes: int = 0) -> Layout:
    """The GEMM engine's descriptor checks, made on the host before anything is built or run, and
    the :func:`layout` of the GEMM in the engine's memory.

    The engine makes the same checks at START (``hw.engine.ERRORS``: ZERO_DIM, DIM_TOO_LARGE,
    FORMAT, RANGE) and reports them in STATUS; checking here first turns a GEMM the engine would
    refuse into one clear message instead of a simulator build and a failed run.

    Args:
        m, k, n: the GEMM's M x K x N.
        config: the :class:`hw.engine.EngineConfig` of the engine that will run it.
        load_c: an initial accumulator C0 is loaded (its M x N fp32 region is placed too).
        out_bf16: results are written as bf16 (2 bytes each) instead of fp32 / int32 (4 bytes).
        start, pad_bytes: as :func:`layout`.

    Returns:
        The :class:`Layout` (its ``end`` is at most the memory's ``capacity_bytes``).

    Raises:
        TypeError: a dimension that is not an int.
        ValueError: M, K or N outside 1 .. ``config.max_dim`` (2**dim_bits - 1); K above the engine's
            MAX_K; bf16 output with int8; the matrices do not fit the memory (bytes needed and available named).
    """
    from verif.cycles import check_engine_dims

    check_engine_dims(m, k, n, config)
    if out_bf16 and config.mxu.fmt == "int8":
        raise ValueError("bf16 output does not apply to the int8 format (results are int32)")
    lay = layout(m, k, n, config.operand_bytes, 2 if out_bf16 else 4, load_c, start=start, pad_bytes=pad_bytes)
    capacity = config.hbm.capacity_bytes
    if lay.end > capacity:
        what = "A, B, C0 and D" if load_c else "A, B and D"
        raise ValueError(f"a {m}x{k}x{n} GEMM does not fit the engine's memory: {what} need "
                         f"{lay.end - _round_up(start, 4096):,} bytes from 0x{_round_up(start, 4096):x} "
                         f"(rows 32 B aligned, matrices 4 KiB aligned); the memory holds {capacity:,} bytes")
    return lay


def engine_error(status: int) -> str | None:
    """None when a STATUS value says the run was fine, else a description.

    Accepts the documented error code (0 = ok) as well as the raw STATUS register (BUSY and DONE in
    bits [1:0], the ERROR code in [7:4], BUS_ERROR in [8]; ``hw.engine.csr``)."""
    from hw.engine import ERRORS

    value = int(status) & ~0x3
    if value == 0:
        return None
    code, bus = (value >> 4) & 0xF, (value >> 8) & 1
    name = ERRORS.get(code, ("UNKNOWN", ""))[0]
    parts = [f"ERROR {code} ({name})"] if code else []
    if bus:
        parts.append("BUS_ERROR (SLVERR)")
    return f"STATUS 0x{int(status):x}: " + (", ".join(parts) if parts else "unexpected bits")


def poke_matrix(device, base: int, stride: int, x: np.ndarray) -> None:
    """Write the rows of ``x`` (2-D, any fixed-size dtype) at ``base + i * stride`` through the device
    model's backdoor; the rest of each 32 B beat a row touches holds ``FILL``."""
    x = np.ascontiguousarray(x)
    rows = x.shape[0]
    raw = x.view(np.uint8).reshape(rows, -1)
    row_bytes = raw.shape[1]
    padded = _round_up(row_bytes, BEAT)
    buf = np.full((rows, padded), FILL, dtype=np.uint8)
    buf[:, :row_bytes] = raw
    cfg = device.config
    for i in range(rows):
        row = buf[i].tobytes()
        for j in range(0, padded, BEAT):
            device.poke(*cfg.decode(base + i * stride + j), row[j:j + BEAT])


def peek_matrix(device, base: int, stride: int, rows: int, cols: int, dtype) -> np.ndarray:
    """Read a rows x cols matrix of ``dtype`` at ``base + i * stride`` from the device model."""
    itemsize = np.dtype(dtype).itemsize
    row_bytes = cols * itemsize
    padded = _round_up(row_bytes, BEAT)
    cfg = device.config
    out = np.empty((rows, row_bytes), dtype=np.uint8)
    for i in range(rows):
        chunks = b"".join(device.peek(*cfg.decode(base + i * stride + j)) for j in range(0, padded, BEAT))
        out[i] = np.frombuffer(chunks[:row_bytes], dtype=np.uint8)
    return out.view(dtype).reshape(rows, cols)


def check_untouched(device, base: int, stride: int, rows: int, row_bytes: int, region_end: int) -> int:
    """Count bytes of D's region that are not result bytes and no longer hold ``FILL``: the stride
    padding of every row and the rest of the region up to ``region_end`` (4 KiB rounded)."""
    cfg = device.config
    bad = 0
    for addr in range(base, region_end, BEAT):
        data = device.peek(*cfg.decode(addr))
        off = addr - base
        i, col = divmod(off, stride)
        for b in range(BEAT):
            in_result = i < rows and col + b < row_bytes
            if not in_result and data[b] != FILL:
                bad += 1
    return bad


def register_writes(m: int, k: int, n: int, lay: Layout, *, load_c: bool, out_bf16: bool) -> list[tuple[int, int]]:
    """(offset, value) AXI4-Lite writes that describe one GEMM (START not included)."""
    return [
        (REG["M"].offset, m), (REG["K"].offset, k), (REG["N"].offset, n),
        (REG["FLAGS"].offset, int(load_c) | int(out_bf16) << 1),
        (REG["A_BASE"].offset, lay.a_base), (REG["A_STRIDE"].offset, lay.a_stride),
        (REG["B_BASE"].offset, lay.b_base), (REG["B_STRIDE"].offset, lay.b_stride),
        (REG["C_BASE"].offset, lay.c_base or 0), (REG["C_STRIDE"].offset, lay.c_stride),
        (REG["D_BASE"].offset, lay.d_base), (REG["D_STRIDE"].offset, lay.d_stride),
    ]
