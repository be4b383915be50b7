"""cocotb testbench of the ECP5 board top (``hw.board.BoardTop``) through its UART, Verilator and Icarus.

The board's ``uart_rx``/``uart_tx`` pins are driven and watched by cocotbext-uart's ``UartSource`` and
``UartSink`` (8N1 at ``baud``); between them and a **host** sits a pseudo-terminal: the host opens the
pty's slave side as a serial port (pyserial), exactly as it would open ``/dev/ttyUSB0`` on a real board,
and the bench copies bytes between the pty's master side and the UART models while the simulation
runs. The host is either a command line (``mxu board matmul --port {port} ...``: the real CLI in a
subprocess) or a Python function ``module:function(port, **args)`` run in a thread (protocol tests).

Environment: ``BOARD_TB_CONFIG`` (JSON): ``clk_ns``, ``baud``, ``host`` (``{"argv": [...]}`` with
``{port}`` standing for the pty path, or ``{"call": "module:function", "args": {...}}``),
``result`` (a JSON file the bench writes: host exit status, stdout, stderr or the function's return
value, bytes each way, simulated cycles), ``timeout_s`` (wall clock for the host), ``poll_cycles``.
The test fails when the host does not finish in time; the host's own verdict is for the caller.
"""

from __future__ import annotations

import importlib
import json
import logging
import os
import subprocess
import threading
import time
import traceback
import tty

import cocotb
from cocotb.clock import Clock
from cocotb.triggers import ClockCycles, Timer
from cocotbext.uart import UartSink, UartSource

CFG = json.loads(os.environ.get("BOARD_TB_CONFIG", "{}"))


class _ThreadHost:
    def __init__(self, spec, port):
        mod, func = spec["call"].split(":")
        self.fn = getattr(importlib.import_module(mod), func)
        self.args, self.port = spec.get("args", {}), port
        self.value, self.error = None, None
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self):
        try:
            self.value = self.fn(self.port, **self.args)
        except BaseException:  # reported to the caller, which decides
            self.error = traceback.format_exc()

    def done(self):
        return not self.thread.is_alive()

    def result(self):
        return {"value": self.value, "error": self.error}

    def kill(self):
        pass   # a Python thread cannot be stopped; it is a daemon and the failing test ends the run


class _ProcessHost:
    def __init__(self, spec, port):
        argv = [a.replace("{port}", port) for a in spec["argv"]]
        self.proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                     env=dict(os.environ, **spec.get("env", {})))
        self.out = None

    def done(self):
        return self.proc.poll() is not None

    def result(self):
        if self.out is None:
            stdout, stderr = self.proc.communicate()
            self.out = {"returncode": self.proc.returncode, "stdout": stdout, "stderr": stderr}
        return self.out

    def kill(self):
        self.proc.kill()


@cocotb.test()
async def board_host(dut):
    """Run the configured host against the board over the simulated serial line."""
    clk_ns, baud = CFG["clk_ns"], CFG["baud"]
    poll = CFG.get("poll_cycles", 200)
    # the simulator-side clock and one timer per poll: no Python per clock edge (the idle board
    # between bytes is most of the run)
    cocotb.start_soon(Clock(dut.clk, clk_ns, unit="ns", impl="gpi").start())
    dut.uart_rx.value = 1
    dut.rst.value = 1
    await ClockCycles(dut.clk, 4)
    dut.rst.value = 0
    await ClockCycles(dut.clk, 4)
    src = UartSource(dut.uart_rx, baud=baud)
    sink = UartSink(dut.uart_tx, baud=baud)
    for model in (src, sink):
        model.log.setLevel(logging.WARNING)

    master, slave = os.openpty()
    tty.setraw(slave)          # no echo, no line editing: a byte-clean line, as a serial port is
    os.set_blocking(master, False)
    port = os.ttyname(slave)
    spec = CFG["host"]
    host = _ProcessHost(spec, port) if "argv" in spec else _ThreadHost(spec, port)
    t0, to_board, to_host, cycles = time.monotonic(), 0, 0, 0
    try:
        while True:
            await Timer(poll * clk_ns, unit="ns")
            cycles += poll
            try:
                data = os.read(master, 4096)
            except (BlockingIOError, OSError):
                data = b""
            if data:
                src.write_nowait(data)
                to_board += len(data)
            if sink.count():
                out = bytes(sink.read_nowait())
                to_host += len(out)
                os.write(master, out)
            if host.done() and src.idle() and not sink.count():
                break
            if time.monotonic() - t0 > CFG.get("timeout_s", 600):
                host.kill()
                raise AssertionError(f"the host did not finish in {CFG.get('timeout_s', 600)} s "
                                     f"({to_board} bytes to the board, {to_host} back, {cycles} cycles)")
        result = dict(host.result(), bytes_to_board=to_board, bytes_to_host=to_host, sim_cycles=cycles,
                      wall_s=round(time.monotonic() - t0, 2), led=int(dut.led.value))
    finally:
        os.close(master)
        os.close(slave)
    with open(CFG["result"], "w") as f:
        json.dump(result, f)
