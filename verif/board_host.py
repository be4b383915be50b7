"""Host side of the board's UART protocol (``hw.board.bridge``): load matrices, run a GEMM, read the result.

:class:`BoardLink` speaks the protocol over any object with ``write(bytes)`` and ``read(n) -> bytes``
(a ``serial.Serial`` from pyserial: ``mxu board matmul --port``, a simulated board in the tests).
:func:`run_gemm` does one GEMM the way ``sim.gemm.run_gemms`` does it in simulation: the same memory
layout (``verif.gemm_host.layout``, unused bytes ``FILL``), the same register writes, START, then
STATUS is polled until DONE and D is read back.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from hw.board.bridge import BEAT_BYTES, CMD, INFO_MAGIC, NAK, PROTOCOL_VERSION
from hw.engine.csr import ENGINE_ID, REG
from verif.gemm_host import FILL, layout, register_writes

__all__ = ["BoardLink", "BoardError", "BoardInfo", "run_gemm", "decode_config", "check_engine"]

FMT_NAMES = {0: "bf16", 1: "fp8_e4m3fn", 2: "fp8_e5m2", 3: "int8"}


class BoardError(RuntimeError):
    """The board answered something the protocol does not allow, too little, or nothing."""


@dataclass(frozen=True)
class BoardInfo:
    """The ``I`` answer: protocol version, beat bytes, memory bytes, clock in Hz."""
    version: int
    beat_bytes: int
    memory_bytes: int
    clk_hz: int


def decode_config(word: int) -> dict:
    """The engine's CONFIG register as ``rows, cols, fmt, subnormals, stages``."""
    return {"rows": word & 0xFFF, "cols": (word >> 12) & 0xFFF, "fmt": FMT_NAMES[(word >> 24) & 3],
            "subnormals": "ieee" if (word >> 26) & 1 else "ftz", "stages": (word >> 28) & 0xF}


class BoardLink:
    """The protocol over a byte transport.

    Args:
        port: an object with ``write(bytes)`` and ``read(n)`` (returning fewer than ``n`` bytes on a
            time-out, as pyserial does).
        max_beats: most beats per ``W``/``R`` command (<= 65535); long transfers are split.
    """

    def __init__(self, port, max_beats: int = 64):
        self.port = port
        self.max_beats = max_beats
        self.bytes_sent = 0
        self.bytes_received = 0

    def _send(self, data: bytes) -> None:
        self.port.write(data)
        self.bytes_sent += len(data)

    def _recv(self, n: int, what: str) -> bytes:
        data = b""
        while len(data) < n:
            chunk = self.port.read(n - len(data))
            if not chunk:
                raise BoardError(f"no answer from the board to {what} ({len(data)} of {n} bytes came); "
                                 "check the port and the baud rate, or reset the board")
            data += chunk
        self.bytes_received += n
        return data

    def _status(self, what: str) -> None:
        s = self._recv(1, what)[0]
        if s == NAK:
            raise BoardError(f"the board did not know the command of {what} (answered '?'): it is out of step; "
                             "reset it")
        if s:
            raise BoardError(f"{what}: the bus answered {'SLVERR' if s == 2 else 'DECERR' if s == 3 else hex(s)}")

    def info(self) -> BoardInfo:
        """Send ``I``; check the magic and the protocol version.

        Raises:
            BoardError: no answer, or an answer that is not this protocol's.
        """
        self._send(bytes([CMD["INFO"]]))
        raw = self._recv(16, "INFO")
        if raw[:4] != INFO_MAGIC:
            raise BoardError(f"the board's INFO answer starts {raw[:4]!r}, not {INFO_MAGIC!r}: not an MXU board "
                             "bitstream, a wrong baud rate, or a board out of step (reset it)")
        info = BoardInfo(int.from_bytes(raw[4:6], "little"), int.from_bytes(raw[6:8], "little"),
                         int.from_bytes(raw[8:12], "little"), int.from_bytes(raw[12:16], "little"))
        if info.version != PROTOCOL_VERSION or info.beat_bytes != BEAT_BYTES:
            raise BoardError(f"board protocol version {info.version} with {info.beat_bytes} B beats; this host "
                             f"speaks version {PROTOCOL_VERSION} with {BEAT_BYTES} B beats")
        return info

    def write_reg(self, offset: int, value: int) -> None:
        self._send(bytes([CMD["WRITE_REG"], offset]) + int(value).to_bytes(4, "little"))
        self._status(f"register write 0x{offset:02x}")

    def read_reg(self, offset: int) -> int:
        self._send(bytes([CMD["READ_REG"], offset]))
        value = int.from_bytes(self._recv(4, f"register read 0x{offset:02x}"), "little")
        self._status(f"register read 0x{offset:02x}")
        return value

    def write_mem(self, address: int, data: bytes) -> None:
        """Write ``data`` (a multiple of 32 bytes) from ``address`` (32 B aligned)."""
        if address % BEAT_BYTES or len(data) % BEAT_BYTES:
            raise ValueError(f"address and length must be multiples of {BEAT_BYTES}; got {address}, {len(data)}")
        for off in range(0, len(data), self.max_beats * BEAT_BYTES):
            chunk = data[off:off + self.max_beats * BEAT_BYTES]
            self._send(bytes([CMD["WRITE_MEM"]]) + (address + off).to_bytes(4, "little")
                       + (len(chunk) // BEAT_BYTES).to_bytes(2, "little") + chunk)
            self._status(f"memory write at 0x{address + off:x}")

    def read_mem(self, address: int, nbytes: int) -> bytes:
        """Read ``nbytes`` (a multiple of 32) from ``address`` (32 B aligned)."""
        if address % BEAT_BYTES or nbytes % BEAT_BYTES:
            raise ValueError(f"address and length must be multiples of {BEAT_BYTES}; got {address}, {nbytes}")
        out = b""
        for off in range(0, nbytes, self.max_beats * BEAT_BYTES):
            n = min(self.max_beats * BEAT_BYTES, nbytes - off)
            self._send(bytes([CMD["READ_MEM"]]) + (address + off).to_bytes(4, "little")
                       + (n // BEAT_BYTES).to_bytes(2, "little"))
            out += self._recv(n, f"memory read at 0x{address + off:x}")
            self._status(f"memory read at 0x{address + off:x}")
        return out


def _matrix_bytes(x: np.ndarray, stride: int) -> bytes:
    raw = np.ascontiguousarray(x).view(np.uint8).reshape(x.shape[0], -1)
    buf = np.full((x.shape[0], stride), FILL, dtype=np.uint8)
    buf[:, :raw.shape[1]] = raw
    return buf.tobytes()


def run_gemm(link: BoardLink, a: np.ndarray, b: np.ndarray, c: np.ndarray | None = None, out: str = "fp32", *,
             timeout_s: float = 60.0, info: BoardInfo | None = None) -> dict:
    """One GEMM on the board: D = C0 + A @ B.

    Args:
        link: the :class:`BoardLink`.
        a, b: (M, K) and (K, N) arrays already in the board's format (``verif.golden.to_format``).
        c: optional (M, N) float32 (int32 for int8) initial accumulator.
        out: "fp32" or "bf16".
        timeout_s: wall-clock limit for DONE after START, in s.

    Returns:
        ``bits`` (M x N uint32, or uint16 for bf16 output), ``cycles`` (the engine's CYCLES register),
        ``status`` (STATUS), ``bytes_sent``/``bytes_received``, ``memory_bytes_used`` and
        ``clobbered_bytes`` (bytes of D's rows past column N that no longer hold ``FILL``: must be 0).

    Raises:
        ValueError: the GEMM's matrices do not fit the board's memory (the message gives both sizes).
        BoardError: the board does not answer as the protocol says, or DONE does not come in time.
    """
    info = info or link.info()
    m, k = a.shape
    n = b.shape[1]
    ob = a.dtype.itemsize
    out_bytes = 2 if out == "bf16" else 4
    lay = layout(m, k, n, ob, out_bytes, c is not None, start=0)
    if lay.end > info.memory_bytes:
        raise ValueError(f"a {m}x{k}x{n} GEMM needs {lay.end} bytes of board memory (A, B, C0 and D, 4 KiB "
                         f"aligned); the board has {info.memory_bytes}")
    link.write_mem(lay.a_base, _matrix_bytes(a, lay.a_stride))
    link.write_mem(lay.b_base, _matrix_bytes(b, lay.b_stride))
    if c is not None:
        link.write_mem(lay.c_base, _matrix_bytes(c.view(np.uint32), lay.c_stride))
    link.write_mem(lay.d_base, bytes([FILL]) * (m * lay.d_stride))
    for offset, value in register_writes(m, k, n, lay, load_c=c is not None, out_bf16=out == "bf16"):
        link.write_reg(offset, value)
    link.write_reg(REG["STATUS"].offset, 0b10)       # clear a DONE left from an earlier run
    link.write_reg(REG["CTRL"].offset, 1)            # START
    t0 = time.monotonic()
    while True:
        status = link.read_reg(REG["STATUS"].offset)
        if status & 0b10:
            break
        if time.monotonic() - t0 > timeout_s:
            raise BoardError(f"the engine did not finish in {timeout_s} s (STATUS 0x{status:x})")
    cycles = link.read_reg(REG["CYCLES"].offset)
    raw = link.read_mem(lay.d_base, m * lay.d_stride)
    rows = np.frombuffer(raw, dtype=np.uint8).reshape(m, lay.d_stride)
    bits = np.ascontiguousarray(rows[:, :n * out_bytes]).view(np.uint16 if out == "bf16" else np.uint32).reshape(m, n)
    # D's region was filled with FILL before START: a byte of a row's padding that changed was written
    # by the engine outside the result (its WSTRB must cover exactly the columns < N)
    clobbered = int(np.count_nonzero(rows[:, n * out_bytes:] != FILL))
    return {"bits": bits, "cycles": cycles, "status": status, "bytes_sent": link.bytes_sent,
            "bytes_received": link.bytes_received, "memory_bytes_used": lay.end, "clobbered_bytes": clobbered}


def check_engine(link: BoardLink) -> dict:
    """Read ID and CONFIG; returns :func:`decode_config` plus ``max_k``.

    Raises:
        BoardError: the ID register is not the engine's.
    """
    ident = link.read_reg(REG["ID"].offset)
    if ident != ENGINE_ID:
        raise BoardError(f"register ID reads 0x{ident:08x}, not the engine's 0x{ENGINE_ID:08x}")
    cfg = decode_config(link.read_reg(REG["CONFIG"].offset))
    cfg["max_k"] = link.read_reg(REG["MAX_K"].offset)
    return cfg
