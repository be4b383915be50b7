"""The shared base of the cocotb testbenches of the GEMM engine and the HBM controller.

* Typed configurations (:class:`GemmTbConfig`, :class:`HbmAxiTbConfig`) that pytest and the library
  (:func:`sim.gemm.run_gemms`) build and hand to the bench as JSON in one environment variable,
  read back in the bench with ``from_env``.
* Clock and reset (:func:`start_clock`).
* :class:`DramAdapter`: the Python HBM device model (:class:`verif.hbm_device.HBMDevice`, with its
  fatal JEDEC checker) on the ``pc<k>__*`` DRAM pins of a top, called at every falling clock edge.
* The backdoor: the device model's storage, written and read without clock cycles, with one
  interface (``poke``/``peek`` of one burst) whether the model is the Python one or the HDL one
  (:class:`HdlBackdoor`, through the simulator's handle).
* :func:`run_gemm_jobs`: the GEMM job loop both GEMM benches share (matrices in through the
  backdoor, the descriptor over AXI4-Lite, START, wait, STATUS / CYCLES / counters, DONE cleared,
  drain, D out through the backdoor).
"""

from __future__ import annotations

import dataclasses
import json
import os
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import ClassVar, Protocol

import numpy as np

from hw.engine import ENGINE_ID, PERF_COUNTERS, REG, REGISTERS, EngineConfig
from hw.hbm.config import HBMConfig
from hw.pod.config import PodConfig
from verif.gemm_host import check_untouched, layout, peek_matrix, poke_matrix, register_writes
from verif.hbm_harness import Pins, device_cycle

__all__ = ["GemmTbConfig", "HbmAxiTbConfig", "start_clock", "DramAdapter", "Backdoor", "HdlBackdoor", "run_gemm_jobs",
           "DRAM_PINS"]

#: The controller-side DRAM pins of one pseudo-channel (``pc<k>__<name>`` on a top).
DRAM_PINS = ("row_cmd", "row_bg", "row_bank", "row_row", "col_cmd", "col_bg", "col_bank", "col_row", "col_column",
             "wdata", "wmask", "wdata_valid")

#: the address pins recorded with each DRAM command of a trace (0 where that command slot is empty)
ADDR_FIELDS = ("row_bg", "row_bank", "row_row", "col_bg", "col_bank", "col_row", "col_column")


def command_pins(pseudo_channels: int) -> tuple[str, ...]:
    """The command and address pins of each pseudo-channel (``pc<k>__<pin>``) that the GEMM top with
    the HDL memory system keeps readable, for a command trace (:mod:`verif.tb.gemm_fast_tb`)."""
    return tuple(f"pc{k}__{pin}" for k in range(pseudo_channels) for pin in ("row_cmd", "col_cmd", *ADDR_FIELDS))


class _EnvConfig:
    """JSON through one environment variable (``ENV``); configuration objects as their dicts."""

    ENV: ClassVar[str]
    _CONFIGS: ClassVar[dict[str, type]] = {}

    def env(self) -> dict[str, str]:
        """``{ENV: json}`` for :func:`sim.runner.run_cocotb`'s ``env``."""
        out = {}
        for f in dataclasses.fields(self):
            v = getattr(self, f.name)
            out[f.name] = v.as_dict() if hasattr(v, "as_dict") else v
        return {self.ENV: json.dumps(out)}

    @classmethod
    def from_env(cls):
        """Read the configuration in the bench.

        Raises:
            RuntimeError: ``ENV`` is not set (the bench was started without its configuration).
        """
        raw = os.environ.get(cls.ENV)
        if raw is None:
            raise RuntimeError(f"{cls.ENV} is not set: start this bench through its pytest test or library call")
        d = json.loads(raw)
        for name, typ in cls._CONFIGS.items():
            if d.get(name) is not None:
                d[name] = typ.from_dict(d[name])
        return cls(**d)


@dataclass(frozen=True)
class GemmTbConfig(_EnvConfig):
    """Configuration of the GEMM benches (:mod:`verif.tb.gemm_tb`, :mod:`verif.tb.gemm_fast_tb`).

    engine: the hardware. jobs: ``{"kind": "gemm", "m", "k", "n", "load_c", "out_bf16", "pad_bytes"}``
    (with the HDL memory also ``"stall": [a, w, c]``, :class:`hw.axi_stall.AXI4Stall` rates on the
    engine's ports),
    ``{"kind": "regs", "writes": [[offset, value], ...]}`` (a hand-made descriptor; a write
    ``[offset, value, size]`` writes ``size`` bytes of ``value`` from byte ``offset``, a partial
    write strobe; ``"readback": true`` reads every register and one unmapped word after the run;
    ``"pause": true`` pauses the AXI4-Lite channels during its writes and read-back) or, HDL memory
    only, ``{"kind": "backdoor", "seed": s}``. out_npz: where the results go. jobs_npz: the input
    arrays ``a<j>``, ``b<j>``, ``c<j>`` as raw bit patterns. timeout_cycles: a job without ``irq`` for
    this long fails. trace: per-cycle trace file (Python memory). stored_rows: rows per bank of the HDL
    device model. device_hbm: the HDL devices' rules when not the controller's.
    """

    ENV: ClassVar[str] = "GEMM_TB_CONFIG"
    _CONFIGS: ClassVar[dict[str, type]] = {"engine": EngineConfig, "device_hbm": HBMConfig}
    engine: EngineConfig
    jobs: list = field(default_factory=list)
    out_npz: str = ""
    jobs_npz: str | None = None
    timeout_cycles: int = 2_000_000
    trace: str | None = None
    stored_rows: int = 256
    device_hbm: HBMConfig | None = None


@dataclass(frozen=True)
class PodTbConfig(_EnvConfig):
    """Configuration of the pod bench (:mod:`verif.tb.pod_tb`).

    pod: the :class:`hw.pod.config.PodConfig`. nodes: one dict per live node in rank order
    (:func:`sim.pod.bench_plan`): ``slot``, ``rank``, ``loads`` (``[base, stride, npz key]``),
    ``gemm_writes``, ``before`` / ``after`` (the collectives' register writes, one list each),
    ``result`` (``[base, stride, rows, row bytes]``). arrays_npz: the loads' raw bytes. out_npz: where
    the results go. stored_rows: rows per bank of the device models. timeout_cycles: per phase.
    flip_p, seed: each link beat corrupted with this probability (Python every cycle when > 0).
    """

    ENV: ClassVar[str] = "POD_TB_CONFIG"
    _CONFIGS: ClassVar[dict[str, type]] = {"pod": PodConfig}
    pod: PodConfig = None
    nodes: list = field(default_factory=list)
    arrays_npz: str = ""
    out_npz: str = ""
    stored_rows: int = 256
    timeout_cycles: int = 2_000_000
    flip_p: float = 0.0
    seed: int = 1


@dataclass(frozen=True)
class HbmAxiTbConfig(_EnvConfig):
    """Configuration of :mod:`verif.tb.hbm_axi_tb`: the controller's ``config``, its ``axi_ports``,
    the random ``seed``, ``ops`` per worker, ``workers`` per port, ``pause_p`` (probability of a pause
    cycle on every AXI channel) and ``region_bytes`` (the shared region at address 0)."""

    ENV: ClassVar[str] = "HBM_AXI_TB_CONFIG"
    _CONFIGS: ClassVar[dict[str, type]] = {"config": HBMConfig}
    config: HBMConfig
    axi_ports: int = 1
    seed: int = 1
    ops: int = 30
    workers: int = 2
    pause_p: float = 0.2
    region_bytes: int = 4096


async def start_clock(dut, *, period_ns: int = 10, gpi: bool = False) -> None:
    """Start the clock on ``dut.clk``, ``period_ns`` per cycle. ``gpi``: the simulator-side clock of
    cocotb 2 (no Python per edge; for benches that do not act every cycle). Reset is the bench's."""
    import cocotb
    from cocotb.clock import Clock

    cocotb.start_soon(Clock(dut.clk, period_ns, unit="ns", **({"impl": "gpi"} if gpi else {})).start())


async def check_memory_system(dut, where: str, violation_message, stored_rows: int) -> None:
    """Fail the test when ``dut``'s memory system flagged a JEDEC ``violation`` (the message from
    ``violation_message()``) or a ``row_error`` (an ACT to a row the device models do not store).
    The checkers' outputs change in the same time step as the flag, so they are read at its end."""
    from cocotb.triggers import ReadOnly

    if int(dut.violation.value) or int(dut.row_error.value):
        await ReadOnly()
    if int(dut.violation.value):
        raise AssertionError(f"{where}: JEDEC violation: {violation_message()}")
    if int(dut.row_error.value):
        raise AssertionError(f"{where}: an ACT addressed a row the device model does not store "
                             f"(stored_rows = {stored_rows}): the matrices need more")


class DramAdapter:
    """The Python device model on a top's DRAM pins (``pc<k>__<pin>``), one call per clock cycle.

    At every falling edge it samples each pseudo-channel's command pins (a pin that is X or Z fails
    the test), hands commands and write data to the device model (which raises on any JEDEC
    violation) and drives the read data due in this cycle. The address pins are read with a command
    and the data pins with write data; ``all_pins`` checks every address pin for X / Z in every cycle
    too (the HBM controller's own bench; the GEMM bench saves that Python work per cycle).
    ``cycle`` counts the cycles run, ``last_busy_cycle`` the last cycle with a column command or a
    request waiting in a controller's queue (the top's ``queue_empty<k>`` low: a GEMM top's);
    ``on_command(cycle, pc, pins)`` and ``on_cycle(cycle)`` are optional hooks.
    """

    def __init__(self, dut, config: HBMConfig, device, *, on_command=None, on_cycle=None, all_pins: bool = False):
        self.dut, self.config, self.device = dut, config, device
        self.handles = [{name: getattr(dut, f"pc{k}__{name}") for name in (*DRAM_PINS, "rdata", "rdata_valid")}
                        for k in range(config.pseudo_channels)]
        self.queue_empty = [getattr(dut, f"queue_empty{k}") for k in range(config.pseudo_channels)]
        self.cycle = 0
        self.last_busy_cycle = 0
        self.stop = False
        self.on_command, self.on_cycle, self.all_pins = on_command, on_cycle, all_pins
        self._driven = [False] * config.pseudo_channels

    def reset_inputs(self) -> None:
        """Drive the read-data pins low (before reset)."""
        for h in self.handles:
            h["rdata_valid"].value = 0
            h["rdata"].value = 0

    def _read(self, k: int, name: str) -> int:
        v = self.handles[k][name].value
        if not v.is_resolvable:
            raise AssertionError(f"cycle {self.cycle}: pc{k}__{name} is {v}")
        return int(v)

    def sample(self, k: int) -> Pins | None:
        """Pseudo-channel ``k``'s pins this cycle, or None when it has no command and no write data."""
        row, col, wv = (self._read(k, n) for n in ("row_cmd", "col_cmd", "wdata_valid"))
        v = {n: 0 for n in DRAM_PINS}
        if self.all_pins:
            v.update({n: self._read(k, n) for n in (*DRAM_PINS[1:4], *DRAM_PINS[5:9])})
        if not (row or col or wv):
            return None
        v.update(row_cmd=row, col_cmd=col, wdata_valid=wv)
        for n in DRAM_PINS[1:4] if row and not self.all_pins else ():
            v[n] = self._read(k, n)
        for n in DRAM_PINS[5:9] if col and not self.all_pins else ():
            v[n] = self._read(k, n)
        if wv:
            v["wdata"], v["wmask"] = self._read(k, "wdata"), self._read(k, "wmask")
        return Pins(**v, req_ready=0, rsp_valid=0, rsp_tag=0, rsp_rdata=0)

    async def run(self) -> None:
        """The per-cycle loop (start it with ``cocotb.start_soon`` after reset)."""
        from cocotb.triggers import FallingEdge

        n = self.config.pseudo_channels
        while not self.stop:
            await FallingEdge(self.dut.clk)
            c = self.cycle
            pins = {}
            for k in range(n):
                p = self.sample(k)
                if p is not None:
                    pins[k] = p
                    if p.col_cmd:
                        self.last_busy_cycle = c
                    if self.on_command and (p.row_cmd or p.col_cmd):
                        self.on_command(c, k, p)
            if any(not int(h.value) for h in self.queue_empty):
                self.last_busy_cycle = c
            if self.on_cycle:
                self.on_cycle(c)
            out = device_cycle(self.device, c, pins)
            for k in range(n):
                valid, data = out.get(k, (0, 0))
                h = self.handles[k]
                if valid:
                    h["rdata"].value = data
                    h["rdata_valid"].value = 1
                    self._driven[k] = True
                elif self._driven[k]:
                    h["rdata_valid"].value = 0
                    self._driven[k] = False
            self.cycle += 1


class Backdoor(Protocol):
    """One burst of a device model's storage, without clock cycles (the Python
    :class:`verif.hbm_device.HBMDevice` has this interface; :class:`HdlBackdoor` gives it to the HDL
    model)."""

    def poke(self, pc: int, bank_group: int, bank: int, row: int, column: int, data: bytes) -> None: ...

    def peek(self, pc: int, bank_group: int, bank: int, row: int, column: int) -> bytes: ...


class HdlBackdoor:
    """The HDL device models' storage (``dev<k>.store.mem`` of :class:`verif.hdl.gemm_sim_top.GEMMSimTop`,
    or the instances ``names`` in pseudo-channel order) through the simulator's handles."""

    def __init__(self, dut, config: HBMConfig, stored_rows: int, names: list[str] | None = None):
        from verif.gemm_host import FILL
        from verif.hdl.hbm_device import HBMDeviceHDL

        self.config = config
        names = names or [f"dev{k}" for k in range(config.pseudo_channels)]
        self.mems = [getattr(dut, name).store.mem for name in names]
        self.model = HBMDeviceHDL(config, stored_rows=stored_rows, fill=FILL)  # for word_index only
        self.bb = config.burst_bytes

    def poke(self, pc, bank_group, bank, row, column, data: bytes) -> None:
        from cocotb.handle import Immediate

        # Immediate: visible to a peek in the same time step (a plain write lands at its end)
        self.mems[pc][self.model.word_index(bank_group, bank, row, column)].value = Immediate(
            int.from_bytes(data, "little"))

    def peek(self, pc, bank_group, bank, row, column) -> bytes:
        v = self.mems[pc][self.model.word_index(bank_group, bank, row, column)].value
        return int(v).to_bytes(self.bb, "little")


def chained_a(j: int, job: dict, results: dict, fmt: str) -> np.ndarray:
    """A of a job with ``a_from`` (:class:`sim.gemm.GemmJob`): the earlier job's fp32 result after
    ReLU, rounded RNE into ``fmt``, as raw bit patterns."""
    from verif.golden import relu, to_format

    src = job["a_from"]
    d = results.get(f"d{src}")
    assert d is not None, f"job {j}: A is the result of job {src}, which has none ({results.get(f'status{src}')})"
    a = to_format(relu(d.view(np.float32)), fmt)
    return np.ascontiguousarray(a).view(np.uint16 if fmt == "bf16" else np.uint8)


def axil_pauses(axil, on: bool) -> None:
    """Pause each channel of a cocotbext-axi ``AxiLiteMaster`` (AW, W, AR valid; B, R ready) on a
    fixed pattern of its own phase, or stop pausing: AW and W then reach the slave in different
    cycles and B and R wait, deterministically (the same cycles in every run). A paused channel
    runs Python every clock cycle, so a bench pauses only around register accesses."""
    import itertools

    pattern = (1, 1, 0, 1, 0, 0, 0)
    chans = (axil.write_if.aw_channel, axil.write_if.w_channel, axil.write_if.b_channel,
             axil.read_if.ar_channel, axil.read_if.r_channel)
    for phase, ch in enumerate(chans):
        ch.set_pause_generator(itertools.islice(itertools.cycle(pattern), 2 * phase, None) if on else None)
        if not on:
            ch.pause = False  # (removing the generator leaves the channel as it last set it)


#: the words a ``readback`` job reads: every register of the map, then the first unmapped word
READBACK_OFFSETS = (*(r.offset for r in REGISTERS), REGISTERS[-1].offset + 4)


async def run_gemm_jobs(dut, cfg: GemmTbConfig, mem: Backdoor, axil, *, now: Callable[[], int],
                        wait_done: Callable[[int, int], Awaitable[None]], drain: Callable[[int], Awaitable[None]],
                        special: Callable[[int, dict], dict] | None = None) -> dict:
    """The GEMM job loop of both GEMM benches; returns the result arrays for ``out_npz``.

    Per job: the matrices into ``mem`` (laid out one after another from 0x1000,
    :func:`verif.gemm_host.layout`), the descriptor over ``axil`` (a cocotbext-axi ``AxiLiteMaster``),
    START with IRQ_EN, ``await wait_done(j, timeout_cycles)`` (returns with ``irq`` high or fails),
    STATUS, CYCLES and the performance counters read, DONE cleared (``irq`` must fall), ``await
    drain(j)`` (the posted writes reach the device), then D read back and the bytes around it checked.
    ``now()`` is the bench's cycle count; ``special(j, job)`` handles job kinds other than gemm / regs.
    """
    from cocotb.triggers import ClockCycles

    mc = cfg.engine.mxu
    arrays = np.load(cfg.jobs_npz) if cfg.jobs_npz else {}

    async def rd_at(offset):
        return int.from_bytes((await axil.read(offset, 4)).data, "little")

    async def rd(name):
        return await rd_at(REG[name].offset)

    async def wr(offset, value, size=4):
        await axil.write(offset, int(value & ((1 << 8 * size) - 1)).to_bytes(size, "little"))

    # messages of their own: the simulator rewrites only the benches' asserts (sim.runner)
    for name, want in (("ID", ENGINE_ID), ("CONFIG", cfg.engine.config_word), ("MAX_K", cfg.engine.max_k)):
        got = await rd(name)
        assert got == want, f"register {name} reads {got:#x}; this configuration's is {want:#x}"
    results = {}
    spent = {"backdoor_s": 0.0, "engine_s": 0.0, "registers_s": 0.0}  # where the wall time goes
    start = 0x1000
    for j, job in enumerate(cfg.jobs):
        lay = None
        if job["kind"] not in ("gemm", "regs"):
            assert special is not None, f"job {j}: kind {job['kind']!r} is not run by this bench"
            results.update(special(j, job))
            continue
        if job["kind"] == "gemm":
            m, k, n = job["m"], job["k"], job["n"]
            out_b = 2 if job.get("out_bf16") else 4
            lay = layout(m, k, n, mc.operand_bits // 8, out_b, bool(job.get("load_c")),
                         pad_bytes=int(job.get("pad_bytes", 0)), start=start)
            start = lay.end
            tb = time.perf_counter()
            poke_matrix(mem, lay.a_base, lay.a_stride, chained_a(j, job, results, mc.fmt) if job.get("a_from")
                        is not None else arrays[f"a{j}"])
            poke_matrix(mem, lay.b_base, lay.b_stride, arrays[f"b{j}"])
            if job.get("load_c"):
                poke_matrix(mem, lay.c_base, lay.c_stride, arrays[f"c{j}"])
            writes = register_writes(m, k, n, lay, load_c=bool(job.get("load_c")), out_bf16=bool(job.get("out_bf16")))
            spent["backdoor_s"] += time.perf_counter() - tb
        else:
            writes = [tuple(x) for x in job["writes"]]
        stall = job.get("stall") or (0, 0, 0)  # random back-pressure on the engine's ports (GEMMSimTop)
        if hasattr(dut, "stall_a"):
            for x, rate in zip("awc", stall, strict=True):
                getattr(dut, f"stall_{x}").value = int(rate)
        else:
            assert not any(stall), f"job {j}: back-pressure ({stall}) needs the HDL memory system"
        tr = time.perf_counter()
        if job.get("pause"):
            axil_pauses(axil, True)
        for w in writes:
            await wr(*w)
        if job.get("pause"):
            axil_pauses(axil, False)
        c0 = now()
        await wr(REG["CTRL"].offset, 0b11)  # START | IRQ_EN
        te = time.perf_counter()
        spent["registers_s"] += te - tr
        if not int(dut.irq.value):
            await wait_done(j, cfg.timeout_cycles)
            assert int(dut.irq.value), f"job {j}: no irq within {cfg.timeout_cycles} cycles: the engine hangs ({job})"
        spent["engine_s"] += time.perf_counter() - te
        sim_cycles = now() - c0
        status = await rd("STATUS")
        cycles = await rd("CYCLES")
        for name in PERF_COUNTERS:
            results[f"{name.lower()}{j}"] = np.array(await rd(name))
        await wr(REG["STATUS"].offset, 0b10)  # clear DONE
        await ClockCycles(dut.clk, 2)
        assert not int(dut.irq.value), f"job {j}: irq still high after DONE was cleared"
        assert not (status & 1), f"job {j}: BUSY with DONE"
        results[f"status{j}"] = np.array(status)
        results[f"cycles{j}"] = np.array(cycles)
        results[f"sim_cycles{j}"] = np.array(sim_cycles)
        await drain(j)
        if job.get("readback"):
            axil_pauses(axil, bool(job.get("pause")))
            results[f"readback{j}"] = np.array([await rd_at(off) for off in READBACK_OFFSETS], dtype=np.uint32)
            axil_pauses(axil, False)
        if lay is not None and ((status >> 4) & 0xF) == 0:
            tb = time.perf_counter()
            dt = np.uint16 if job.get("out_bf16") else np.uint32
            results[f"d{j}"] = peek_matrix(mem, lay.d_base, lay.d_stride, m, n, dt)
            results[f"clobbered{j}"] = np.array(check_untouched(
                mem, lay.d_base, lay.d_stride, m, n * np.dtype(dt).itemsize, lay.end))
            spent["backdoor_s"] += time.perf_counter() - tb
        dut._log.info("job %d: status 0x%x, %d engine cycles, %d simulated cycles", j, status, cycles, sim_cycles)
    results.update({key: np.array(value) for key, value in spent.items()})
    return results
