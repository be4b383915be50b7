"""The engine and memory sections of ``mxu report``: the MXU of the reviewed configuration inside the
GEMM engine with its HBM controllers (:class:`hw.engine.EngineConfig`, the engine's default memory),
simulated with the HDL memory system (:class:`verif.hdl.gemm_sim_top.GEMMSimTop`).

* :func:`engine_gemms`: a few GEMMs on the RTL, bit-exact against the golden model, their CYCLES and
  performance counters against the engine's array-bound cycle model
  (:func:`verif.cycles.engine_array_cycles`), the bytes the engine's blocking moves and the
  roofline: array peak (R C MACs per cycle), HBM bandwidth (pseudo-channels x burst bytes per
  ``burst_cycles``), each GEMM's arithmetic intensity and attained MACs per cycle.
* :func:`trace_engine_start`: one GEMM traced in Icarus from the START write to its first output,
  drawn as WaveDrom: the A and W read channels, the DRAM commands of each pseudo-channel, the MXU's
  weight, activation and output beats.
* :func:`hbm_figures`: one pseudo-channel controller of the engine's memory under the traffic
  patterns of :mod:`verif.hbm_figures`: efficiency against its analytical bound, read latency
  percentiles against the DRAM's floor (cached: the runs take tens of seconds).
"""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import replace
from pathlib import Path

__all__ = ["engine_config", "engine_gemms", "trace_engine_start", "hbm_figures"]


def engine_config(cfg):
    """The GEMM engine around MXU configuration ``cfg`` (every other engine parameter at its default),
    or ``(None, reason)`` when the engine does not take this array (e.g. columns not a power of two).
    Returns ``(EngineConfig | None, str | None)``."""
    from hw.engine import EngineConfig

    try:
        return EngineConfig.from_options(rows=cfg.rows, cols=cfg.cols, fmt=cfg.fmt, subnormals=cfg.subnormals,
                                         stages=cfg.stages), None
    except (TypeError, ValueError) as e:
        return None, str(e)


def default_shapes(ecfg) -> list[tuple[int, int, int]]:
    """Three GEMM shapes for array R x C: few rows and many weights (R, 16R, 16C), square (16R, 16R,
    16C) and many rows on few weights (64R, 2R, 2C); K at most the engine's ``max_k``."""
    R, C = ecfg.mxu.rows, ecfg.mxu.cols
    k = lambda x: min(x, ecfg.max_k)  # noqa: E731
    return [(R, k(16 * R), 16 * C), (16 * R, k(16 * R), 16 * C), (64 * R, k(2 * R), 2 * C)]


def moved_bytes(m: int, k: int, n: int, ecfg) -> int:
    """Bytes an M x K x N GEMM moves between the engine and HBM as the engine blocks it
    (:func:`verif.cycles.engine_blocking`): every row of A once (in 32 B beats), the weights of every
    tile once per m-block, D (fp32) written once."""
    from verif.cycles import engine_blocking

    R, C, ob = ecfg.mxu.rows, ecfg.mxu.cols, ecfg.operand_bytes
    blocks = engine_blocking(m, k, n, ecfg)["m_blocks"]
    a = m * math.ceil(k * ob / 32) * 32
    w = len(blocks) * math.ceil(k / R) * math.ceil(n / C) * R * C * ob
    return a + w + m * n * 4


def engine_gemms(ecfg, *, sim: str = "verilator", shapes=None, seed: int = 1) -> dict:
    """Run ``shapes`` ((M, K, N) triples; default :func:`default_shapes`) on the engine RTL with the HDL
    memory in ``sim``, one simulator process; random operands from ``seed``.

    Returns ``{"sim", "seed", "gemms": [...], "roofline": {...}}``; every result is bit-exact
    (:func:`sim.gemm.check_bitexact`, else RuntimeError); each GEMM has the RTL's cycles and
    performance counters, the array-bound model's cycles, bytes moved, arithmetic intensity (MACs per
    byte), attained MACs per cycle, ``bound`` (``compute`` or ``memory``: which roof it sits under) and ``limit``: ``HBM
    bandwidth`` under the memory roof, else ``array schedule`` when the model (a memory that never
    makes the engine wait) explains at least 90 % of the cycles, else ``memory stalls and set-up``.
    The roofline holds the
    array's peak (MACs per cycle), the HBM bandwidth (bytes per cycle, controller and engine on one
    clock) and the ridge point (MACs per byte).

    Raises:
        RuntimeError: the testbench failed (hang, JEDEC violation), or a result is not bit-exact.
    """
    from sim.gemm import check_bitexact, random_jobs, run_gemms
    from verif.cycles import engine_array_cycles

    shapes = shapes or default_shapes(ecfg)
    jobs = random_jobs(ecfg.mxu.fmt, shapes, seed)
    results, info = run_gemms(jobs, ecfg, sim=sim, memory="hdl", progress=False)
    check_bitexact(jobs, results, ecfg)
    R, C, h = ecfg.mxu.rows, ecfg.mxu.cols, ecfg.hbm
    peak = R * C
    bandwidth = h.pseudo_channels * h.burst_bytes / h.timing.burst_cycles
    ridge = peak / bandwidth
    rows = []
    for (m, k, n), res in zip(shapes, results):
        moved = moved_bytes(m, k, n, ecfg)
        intensity = m * k * n / moved
        perf = {name.removeprefix("perf_"): v for name, v in res.perf.items()}
        model = engine_array_cycles(m, k, n, ecfg)
        if intensity < ridge:
            limit = "HBM bandwidth"
        elif res.cycles <= 1.1 * model:  # a memory that never makes the engine wait explains >= 90 %
            limit = "array schedule"
        else:
            limit = "memory stalls and set-up"
        rows.append({"m": m, "k": k, "n": n, "rtl_cycles": res.cycles,
                     "model_cycles": model, "perf": perf,
                     "bytes": moved, "intensity": round(intensity, 3),
                     "macs_per_cycle": round(m * k * n / res.cycles, 3),
                     "of_peak": round(m * k * n / res.cycles / peak, 4),
                     "bound": "memory" if intensity < ridge else "compute", "limit": limit})
    return {"sim": sim, "seed": seed, "pseudo_channels": h.pseudo_channels, "gemms": rows,
            "roofline": {"peak_macs_per_cycle": peak, "bandwidth_bytes_per_cycle": bandwidth,
                         "ridge_macs_per_byte": round(ridge, 3)},
            "sim_cycles_per_s": round(info["cycles_per_s"])}


#: rows of the engine-start diagram: label -> (valid, ready) VCD names, drawn as the handshake's fire
#: (valid and ready); the engine's MXU has no out__ready (its outputs are always taken)
_FIRE = {"A address": ("gemm_sim.top.mem_a__arvalid", "gemm_sim.top.mem_a__arready"),
         "A data": ("gemm_sim.top.mem_a__rvalid", "gemm_sim.top.mem_a__rready"),
         "W address": ("gemm_sim.top.mem_w__arvalid", "gemm_sim.top.mem_w__arready"),
         "W data": ("gemm_sim.top.mem_w__rvalid", "gemm_sim.top.mem_w__rready")}
_BEATS = {"weight beat": ("gemm_sim.top.engine.mxu.wgt__valid", "gemm_sim.top.engine.mxu.wgt__ready"),
          "activation beat": ("gemm_sim.top.engine.mxu.act__valid", "gemm_sim.top.engine.mxu.act__ready"),
          "output beat": ("gemm_sim.top.engine.mxu.out__valid", None)}


def trace_engine_start(ecfg, work: Path, *, shape=None, seed: int = 1, max_cycles: int = 200) -> dict:
    """Run one GEMM (default (2R, 2R, 2C)) on the engine with the HDL memory in Icarus, keep its VCD
    (``work/engine.vcd``) and draw the cycles from the START strobe to the first output beat (plus
    three; at most ``max_cycles``) as ``work/engine_start.svg`` (WaveDrom): the engine's A and W read
    channels, each pseudo-channel's row and column commands, the MXU's beats and ``irq``.

    Returns the figures: the first cycle of each event counted from the START strobe, the RTL's
    CYCLES, the cycles drawn.

    Raises:
        RuntimeError: the testbench failed.
    """
    import yowasp_wavedrom

    from hw.hbm.interface import ColCmd, RowCmd
    from sim.gemm import random_jobs, run_gemms
    from sim.waves import sample as _sample
    from sim.waves import wave as _wave

    work.mkdir(parents=True, exist_ok=True)
    R, C = ecfg.mxu.rows, ecfg.mxu.cols
    m, k, n = shape or (2 * R, min(2 * R, ecfg.max_k), 2 * C)
    fmt = ecfg.mxu.fmt
    vcd = work / "engine.vcd"
    (res,), _ = run_gemms(random_jobs(fmt, [(m, k, n)], seed), ecfg, sim="icarus", memory="hdl", progress=False,
                          waves=str(vcd))
    names = {"start": "gemm_sim.top.engine.start", "irq": "gemm_sim.irq"}
    for label, (valid, ready) in {**_FIRE, **_BEATS}.items():
        names[label + "/v"] = valid
        if ready:
            names[label + "/r"] = ready
    pcs = ecfg.hbm.pseudo_channels
    for p in range(pcs):
        names[f"pc{p} row"], names[f"pc{p} column"] = f"gemm_sim.pc{p}__row_cmd", f"gemm_sim.pc{p}__col_cmd"
    samples = _sample(vcd, names, "gemm_sim.clk")
    for s in samples:
        for label in [*_FIRE, *_BEATS]:
            v, r = s.pop(label + "/v"), s.pop(label + "/r", 1)
            s[label] = None if v is None or r is None else v & r
    t0 = next(i for i, s in enumerate(samples) if s["start"] == 1)
    cmd_names = {**{f"pc{p} row": RowCmd for p in range(pcs)}, **{f"pc{p} column": ColCmd for p in range(pcs)}}

    def first(label, value=1):  # the first cycle from START at which the lane holds value
        return next((i - t0 for i, s in enumerate(samples) if i >= t0 and s[label] == value), None)

    def first_on_any_pc(lane, value):
        return min((c for p in range(pcs) if (c := first(f"pc{p} {lane}", value)) is not None), default=None)

    events = {"A read address": first("A address"), "W read address": first("W address"),
              "first ACT": first_on_any_pc("row", RowCmd.ACT.value),
              "first RD": first_on_any_pc("column", ColCmd.RD.value),
              "A read data": first("A data"), "W read data": first("W data"),
              "weight beat": first("weight beat"), "activation beat": first("activation beat"),
              "output beat": first("output beat"), "irq": first("irq")}
    end = t0 + min(max_cycles, (events["output beat"] or max_cycles) + 4)
    window = samples[t0:end]
    lanes = [{"name": "clk", "wave": "p" + "." * (len(window) - 1)},
             {"name": "start", "wave": _wave([s["start"] for s in window])}]
    lanes += [{"name": lab, "wave": _wave([s[lab] for s in window])} for lab in _FIRE]
    for label, enum in cmd_names.items():  # a command bus: one box per command, named
        wave, data = [], []
        for s in window:
            v = s[label]
            if v in (None, 0):
                ch = "x" if v is None else "0"
                wave.append("." if _last_state(wave) == ch else ch)
            else:
                wave.append("=")
                data.append(enum(v).name)
        lanes.append({"name": label, "wave": "".join(wave), "data": data})
    lanes += [{"name": lab, "wave": _wave([s[lab] for s in window])} for lab in _BEATS]
    lanes.append({"name": "irq", "wave": _wave([s["irq"] for s in window])})
    source = {"signal": lanes, "head": {"text": f"engine {R}x{C} {fmt}: a {m}x{k}x{n} GEMM from the START strobe",
                                        "tick": 0}, "config": {"hscale": 1}}
    (work / "engine_start.svg").write_text(yowasp_wavedrom.render(source))
    (work / "engine_start.wavedrom.json").write_text(json.dumps(source))
    return {"svg": "engine_start.svg", "vcd": "engine.vcd", "wavedrom": "engine_start.wavedrom.json",
            "simulator": "icarus", "gemm": [m, k, n], "seed": seed, "rtl_cycles": res.cycles, "events": events,
            "cycles_shown": len(window)}


def _last_state(wave: list[str]) -> str | None:
    """The state a WaveDrom wave is in at its end ('.' repeats the one before)."""
    return next((c for c in reversed(wave) if c != "."), None)


def _hbm_key(hcfg, scale: float, seed: int, sim: str) -> str:
    from sim.runner import _hw_sources_digest

    h = hashlib.sha256(repr((hcfg, scale, seed, sim)).encode())
    _hw_sources_digest(h)
    for name in ("verif/hbm_figures.py", "verif/hbm_harness.py", "verif/hbm_device.py", "verif/tb/hbm_tb.py"):
        h.update((Path(__file__).resolve().parent.parent / name).read_bytes())
    return h.hexdigest()[:20]


def hbm_figures(ecfg, *, sim: str = "verilator", scale: float = 0.2, seed: int = 1) -> dict:
    """One pseudo-channel controller of the engine's memory (its timing, geometry and queue) under each
    traffic pattern of :func:`verif.hbm_figures.scenarios` at ``scale``, with the fatal JEDEC checker:
    efficiency against its bound and read latency percentiles against the DRAM floor per bank state.
    Cached in ``<build>/cache/report/hbm-<hash>.json`` (configuration, scale, seed, simulator and the
    gateware and testbench sources); ``cached`` says whether this call ran nothing.

    Raises:
        RuntimeError: a run failed (JEDEC violation, lost or corrupted data).
    """
    from hw.hbm.controller import PseudoChannelController
    from sim.runner import build_root, generate_verilog, run_cocotb
    from verif.hbm_figures import UNLOADED, read_latency_percentiles, scenarios, summarize

    hcfg = replace(ecfg.hbm, pseudo_channels=1)
    cache = build_root() / "cache" / "report" / f"hbm-{_hbm_key(hcfg, scale, seed, sim)}.json"
    if cache.is_file():
        return {**json.loads(cache.read_text()), "cached": True}
    verilog = generate_verilog(lambda: PseudoChannelController(hcfg), name="hbm_pc", key=hcfg)
    work = build_root() / "runs"
    work.mkdir(parents=True, exist_ok=True)
    rows = []
    for name, traffic in scenarios(scale).items():
        report = work / f"report-hbm-{cache.stem}-{name}.json"
        conf = {"config": hcfg.as_dict(), "seed": seed, "traffic": traffic, "max_cycles": 2_000_000,
                "max_outstanding": 1 if name in UNLOADED else None}
        res = run_cocotb([verilog], "hbm_pc", "verif.tb.hbm_tb", simulator=sim,
                         env={"HBM_TB_CONFIG": json.dumps(conf), "HBM_TB_REPORT": str(report)})
        if res.failed or not res.passed:
            raise RuntimeError(f"the HBM controller's {name} run failed on {sim}:\n{res.log_tail()}")
        stats = json.loads(report.read_text())
        report.unlink()
        rows.append({**summarize(name, stats, hcfg),
                     "read_latency": read_latency_percentiles(stats["latencies_raw"], hcfg),
                     "unloaded": name in UNLOADED})
    t = hcfg.timing
    doc = {"sim": sim, "scale": scale, "seed": seed, "queue_depth": hcfg.queue_depth, "banks": hcfg.banks,
           "timing": {k: getattr(t, k) for k in ("CL", "tRCD", "tRP", "tRC", "tFAW", "tRRD_S", "tRFC", "tREFI",
                                                  "burst_cycles")},
           "scenarios": rows}
    cache.parent.mkdir(parents=True, exist_ok=True)
    cache.write_text(json.dumps(doc, indent=1) + "\n")
    return {**doc, "cached": False}
