"""Host programs run against the simulated board (``sim.board.simulate_board``, ``{"call": ...}``).

Each takes the serial port path first, opens it with pyserial as a host opens a real board's port,
and returns a JSON-able record that the pytest side checks.
"""

from __future__ import annotations

import numpy as np


def _open(port: str):
    import serial
    return serial.Serial(port, baudrate=115200, timeout=30)


def protocol_checks(port: str, seed: int) -> dict:
    """INFO, the engine's ID and CONFIG, a '?' for an unknown command byte, register write/read-back,
    memory writes and reads of random beats (first and last beat of memory, a multi-command transfer),
    and a zero-beat write and read."""
    from hw.engine.csr import REG
    from verif.board_host import BoardLink, check_engine

    rng = np.random.default_rng(seed)
    with _open(port) as s:
        link = BoardLink(s, max_beats=3)
        info = link.info()
        engine = check_engine(link)
        s.write(b"\x00")
        nak = s.read(1)
        link.write_reg(REG["A_BASE"].offset, 0x1234_5660)
        a_base = link.read_reg(REG["A_BASE"].offset)
        mem = info.memory_bytes
        spans = [(0, 32), (mem - 32, 32), (4096, 7 * 32), (mem // 2 - 64, 4 * 32)]
        written = {}
        for addr, n in spans:
            data = rng.integers(0, 256, n, dtype=np.uint8).tobytes()
            link.write_mem(addr, data)
            written[addr] = data
        back = {addr: link.read_mem(addr, n) for addr, n in spans}
        s.write(bytes([0x57]) + (0).to_bytes(4, "little") + (0).to_bytes(2, "little"))   # W with 0 beats
        zero_w = s.read(1)
        s.write(bytes([0x52]) + (0).to_bytes(4, "little") + (0).to_bytes(2, "little"))   # R with 0 beats
        zero_r = s.read(1)
        info2 = link.info()           # still in step after all of it
    return {"info": [info.version, info.beat_bytes, info.memory_bytes, info.clk_hz], "engine": engine,
            "nak": nak.hex(), "a_base": a_base, "zero_w": zero_w.hex(), "zero_r": zero_r.hex(),
            "roundtrip": {str(k): back[k] == written[k] for k in written}, "info_again": info2.memory_bytes}


def run_commands(port: str, commands: list[list[str]], timeout_s: float = 600) -> list[dict]:
    """Run each command line in turn (``{port}`` replaced by the port); returns their exit status,
    stdout and stderr. One simulated board serves them all, as one real board would."""
    import subprocess
    out = []
    for argv in commands:
        p = subprocess.run([a.replace("{port}", port) for a in argv], capture_output=True, text=True,
                           timeout=timeout_s)
        out.append({"argv": argv, "returncode": p.returncode, "stdout": p.stdout, "stderr": p.stderr})
    return out
