"""Design-space sweeps: a grid of ``mxu synth`` configurations run as Ray tasks, cached by hash.

A sweep specification (TOML) names the configurations. Every key is an option of ``mxu synth``
written with ``_`` (``block``, ``target``, ``rows``, ``cols``, ``fmt``, ``subnormals``, ``stages``,
``backpressure``, ``queue_depth``, ``pseudo_channels``, ``hbm_timing``, ``freq``, ``seed``, ``dsp``,
``widelut``, ``preset``), plus ``place`` (false: Yosys and the fit check only) and ``gemm`` (``"MxKxN"``,
the GEMM of the throughput figure, default ``"256x256x256"``). A top-level value applies to every
point; a top-level list is an axis of the grid; each ``[[point]]`` table is one partial configuration
that the grid is expanded around (no ``[[point]]``: one empty one)::

    target = "ecp5-85k"
    block = "mxu"
    fmt = ["bf16", "int8"]      # axis
    rows = [4, 8]               # axis
    cols = 8
    seed = [1, 2, 3]            # placement seeds are an axis like any other
    freq = 100

Each point is one task on Ray (a local instance, or a cluster given by its address, as OpenROAD's
AutoTuner runs its flow sweeps): Verilog generation, Yosys, nextpnr (:func:`sim.synth.run_flow`, the
out-of-context flow of ``mxu synth``) and the cycle benchmark of the configuration: for ``mxu`` the
GEMM's cycles from the exact weight-stationary tile schedule (:func:`verif.cycles.gemm_cycles`), for
``engine`` and ``gemm-top`` the engine's CYCLES for the GEMM on the RTL with the HDL memory system in
Verilator (:func:`sim.gemm.engine_gemm_cycles`, bit-exact), and the throughput at the achieved Fmax.
A point's record is cached under ``<build>/cache/sweep/<hash>.json``, where the hash covers the
point's configuration as ``mxu synth`` resolves it (every default filled in), the project's hardware
sources, the simulation that gives the engine's cycles and the tool versions: a sweep that is run
again, or resumed after an interrupt, runs only the points it has no record of. A point whose design
does not fit the part is a result (``does-not-fit``, cached); a tool failure is recorded with its
message (``failed``, not cached, so it runs again) and does not stop the other points.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import time
import tomllib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["SPEC_KEYS", "Point", "SpecError", "load_spec", "make_point", "fingerprint", "run_point", "run_cached",
           "run_sweep", "pareto", "plot_pareto"]

#: spec key -> ``mxu synth`` flag: ``None`` for a switch (true adds the flag), a string for a valued
#: option; ``place`` and ``gemm`` are the sweep's own.
SPEC_KEYS: dict[str, str | None] = {
    "block": "--block",
    "target": "--target",
    "rows": "--rows",
    "cols": "--cols",
    "fmt": "--fmt",
    "subnormals": "--subnormals",
    "stages": "--stages",
    "queue_depth": "--queue-depth",
    "pseudo_channels": "--pseudo-channels",
    "hbm_timing": "--hbm-timing",
    "freq": "--freq",
    "seed": "--seed",
    "preset": "--preset",
    "multiplier": "--multiplier",
    "backpressure": None,
    "dsp": None,
    "widelut": None,
    "place": None,
    "gemm": None,
}
_DEFAULT_GEMM = "256x256x256"


@dataclass(frozen=True)
class Point:
    """One configuration of a sweep: ``options`` as the spec gives them (sorted keys), ``argv`` the
    ``mxu synth`` arguments for it (without ``-o``), ``gemm`` its (M, K, N), ``place`` whether it is
    placed and routed, ``key`` its cache hash (hex)."""

    options: dict
    argv: tuple[str, ...]
    gemm: tuple[int, int, int]
    place: bool
    key: str = field(default="")


class SpecError(ValueError):
    """A sweep specification that cannot run: one line that names the key or the point."""


def _argv(options: dict) -> list[str]:
    argv = []
    for k, v in options.items():
        if k in ("place", "gemm"):
            continue
        if k == "backpressure":
            argv += [] if v else ["--no-backpressure"]
        elif k == "dsp":
            argv += [] if v else ["--no-dsp"]
        elif k == "widelut":
            argv += ["--widelut"] if v else []
        else:
            argv += [SPEC_KEYS[k], str(v)]
    return argv


def _gemm(text) -> tuple[int, int, int]:
    try:
        m, k, n = (int(x) for x in str(text).lower().split("x"))
        if min(m, k, n) < 1:
            raise ValueError
    except ValueError:
        raise SpecError(f"gemm must be 'MxKxN' with positive sizes; got {text!r}") from None
    return m, k, n


def load_spec(path: Path, check: Callable[[list[str]], object]) -> list[Point]:
    """The points of the sweep specification at ``path``, each checked by ``check(argv)`` (``mxu
    synth``'s checks of its options, ``sim.cli.sweep.resolve_point``: no Verilog is generated; it
    raises ValueError). See the module's docstring for the format.

    Raises:
        SpecError: unreadable file, TOML error, unknown key, an axis with no values (the grid would
            be empty), a value of the wrong type, or a point ``mxu synth`` refuses (unknown target,
            an option that does not apply to the block, a configuration error): the message names it.
    """
    try:
        spec = tomllib.loads(Path(path).read_text())
    except OSError as e:
        raise SpecError(f"cannot read: {e.strerror or e}") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as e:
        raise SpecError(f"not TOML: {e}") from None
    entries = spec.pop("point", [{}])
    if not isinstance(entries, list) or not entries or not all(isinstance(e, dict) for e in entries):
        raise SpecError("[[point]] must be tables of options, at least one")
    axes, fixed = {}, {}
    for where, table in [("top level", spec)] + [(f"point {i + 1}", e) for i, e in enumerate(entries)]:
        for k, v in table.items():
            if k not in SPEC_KEYS:
                raise SpecError(f"unknown key {k!r} at the {where} (allowed: {', '.join(sorted(SPEC_KEYS))})")
            if isinstance(v, dict):
                raise SpecError(f"{k} at the {where} must be a value or a list of values, not a table")
            if isinstance(v, list) and where != "top level":
                raise SpecError(f"{k} in {where} must be one value (lists are axes: put them at the top level)")
    for k, v in spec.items():
        if isinstance(v, list):
            if not v:
                raise SpecError(f"{k} has no values: the grid would be empty")
            axes[k] = v
        else:
            fixed[k] = v
    points, seen = [], set()
    for entry in entries:
        for combo in itertools.product(*axes.values()):
            options = {"block": "mxu", **fixed, **dict(zip(axes, combo)), **entry}
            for k in ("backpressure", "dsp", "widelut", "place"):
                if k in options and not isinstance(options[k], bool):
                    raise SpecError(f"{k} must be true or false; got {options[k]!r}")
            options = dict(sorted(options.items()))
            desc = ", ".join(f"{k}={v}" for k, v in options.items())
            argv = _argv(options)
            try:
                check(argv)
            except ValueError as e:
                raise SpecError(f"point ({desc}): {e}") from None
            gemm = _gemm(options.get("gemm", _DEFAULT_GEMM))
            text = json.dumps(options, sort_keys=True)
            if text in seen:
                continue
            seen.add(text)
            points.append(Point(options, tuple(argv), gemm, bool(options.get("place", True))))
    return points


def make_point(options: dict) -> Point:
    """The sweep point of ``options`` (spec keys, see the module's docstring), not checked: for a
    caller that built the options from a checked configuration (``mxu report``'s synthesis)."""
    options = dict(sorted(options.items()))
    return Point(options, tuple(_argv(options)), _gemm(options.get("gemm", _DEFAULT_GEMM)),
                 bool(options.get("place", True)))


def _store(cache: Path, key: str, rec: dict, fp: str) -> dict:
    """Write ``rec`` as the cache entry ``key``, with the :func:`fingerprint` ``fp`` it was made under
    (``mxu report`` lists only records of the current sources); returns the record as stored."""
    rec = {**rec, "fingerprint": fp}
    tmp = cache / f".{key}.json.tmp"
    tmp.write_text(json.dumps(rec, indent=1))
    tmp.replace(cache / f"{key}.json")
    return rec


def _load(cache: Path, key: str, fp: str) -> dict:
    """The cache entry ``key``; one written before records carried their fingerprint gets ``fp`` (its
    key was computed with ``fp``, so it is current)."""
    rec = json.loads((cache / f"{key}.json").read_text())
    return rec if "fingerprint" in rec else _store(cache, key, rec, fp)


def run_cached(point: Point, resolve: Callable) -> dict:
    """One point in this process, from the sweep cache when it has the record (``cached`` true), else
    run (:func:`run_point`) and stored there as a sweep stores it (a failure is not stored)."""
    from sim.runner import build_root

    cache = build_root() / "cache" / "sweep"
    cache.mkdir(parents=True, exist_ok=True)
    fp = fingerprint()
    key = _key(point, fp, resolve)
    if (cache / f"{key}.json").is_file():
        return {**_load(cache, key, fp), "options": point.options, "cached": True}
    point = Point(point.options, point.argv, point.gemm, point.place, key)
    rec = _remote_point(point, str(cache / "work" / key), resolve)
    if rec["status"] != "failed":
        rec = _store(cache, key, rec, fp)
    return {**rec, "cached": False}


#: blocks whose sweep points run their GEMM on the engine's RTL for the cycle figure
ENGINE_CYCLE_BLOCKS = ("engine", "gemm-top")


def fingerprint() -> str:
    """A hash of what a point's result depends on besides its options: the hardware generator's
    sources (``hw/``), the flow's (``sim/synth.py``, ``sim/blocks.py``, ``sim/cli/synth.py``), the
    cycle model and the tool versions."""
    from sim.runner import repo_root
    from sim.synth import synth_tool_versions

    root = repo_root()
    h = hashlib.sha256()
    files = sorted((root / "hw").rglob("*.py")) + [root / "sim" / f for f in ("synth.py", "blocks.py")]
    files += [root / "sim" / "cli" / "synth.py", root / "verif" / "cycles.py"]
    # the engine points' cycles come from a simulation: its memory models, testbench and runner
    files += sorted((root / "verif" / "hdl").rglob("*.py")) + [root / "verif" / "tb" / "gemm_fast_tb.py",
                                                               root / "verif" / "tb" / "base.py",
                                                               root / "sim" / "gemm.py"]
    for f in files:
        h.update(str(f.relative_to(root)).encode() + b"\0" + f.read_bytes() + b"\0")
    h.update(json.dumps(synth_tool_versions(), sort_keys=True).encode())
    return h.hexdigest()


def _resolved(point: Point, args, target, block: dict) -> dict:
    """``point``'s configuration as ``mxu synth`` resolved it (``args``, ``target``, ``block`` from
    ``resolve``): the block's full configuration with every default filled in, the target, seed,
    requested MHz (the board clock when the spec gives none), flow switches and the GEMM."""
    freq = target.board_clock_mhz if args.freq is None else float(args.freq)
    return {**block, "target": target.name, "seed": args.seed, "freq_mhz": freq, "place": point.place,
            "dsp": not args.no_dsp, "widelut": args.widelut, "gemm": list(point.gemm)}


def _key(point: Point, fp: str, resolve: Callable) -> str:
    """The cache key of ``point``: its resolved configuration (:func:`_resolved`), so the same array
    reached through different keys (``subnormals`` given or left to its default) is one record, and
    the fingerprint ``fp``."""
    import dataclasses

    args, _, _, target, _, block = resolve(list(point.argv))
    canon = {"resolved": _resolved(point, args, target, block), "fp": fp}
    text = json.dumps(canon, sort_keys=True, default=lambda o: dataclasses.asdict(o) if dataclasses.is_dataclass(o)
                      else str(o))
    return hashlib.sha256(text.encode()).hexdigest()[:20]


def run_point(point: Point, work: Path, resolve: Callable) -> dict:
    """Generate, synthesize and (unless ``place`` is false) place and route ``point`` in ``work``;
    returns its record: ``status`` (``ok``, ``does-not-fit`` or ``failed`` with ``error``), the block's
    cells, the achieved and requested MHz, the critical path, and the GEMM's cycles and throughput in
    GMAC/s at the achieved Fmax: the exact cycle model's for the MXU, the RTL's CYCLES for the engine
    and the GEMM top (``gemm_error`` when that simulation failed), ``None`` for other blocks.
    ``resolve(argv, work)`` turns the point's ``mxu synth`` arguments into ``(args, factory, module
    name, Target, configuration, block description)`` (``sim.cli.sweep.resolve_point``)."""
    from sim import runner, synth

    t0 = time.perf_counter()
    rec = {"options": point.options, "key": point.key, "gemm": "x".join(map(str, point.gemm))}
    try:
        args, factory, name, target, cfg, block = resolve(list(point.argv), work)
        rec["resolved"] = _resolved(point, args, target, block)  # what the cache key hashes
        verilog = runner.generate_verilog(factory, name=name, key=(block["block"], cfg))
        rep = synth.run_flow(
            verilog,
            name,
            target,
            work,
            freq_mhz=args.freq,
            seed=args.seed,
            place=point.place,
            dsp=not args.no_dsp,
            widelut=args.widelut,
            block=block,
        )
    except synth.DoesNotFit as e:
        return {**rec, "status": "does-not-fit", "error": str(e), "wall_s": round(time.perf_counter() - t0, 1)}
    except Exception as e:  # noqa: BLE001 - any failure of one point is recorded, the others go on
        first = (str(e).splitlines() or [type(e).__name__])[0]
        return {
            **rec,
            "status": "failed",
            "error": f"{type(e).__name__}: {first}",
            "wall_s": round(time.perf_counter() - t0, 1),
        }
    clk = rep["fmax"][0] if rep["fmax"] else {}
    cells = rep["cells"]["block"]
    rec.update(
        {
            "status": "ok",
            "target": target.name,
            "requested_mhz": rep["requested_mhz"],
            "achieved_mhz": clk.get("achieved_mhz"),
            "met": clk.get("met"),
            "critical_path": clk.get("critical_path"),
            **{k: cells.get(k, 0) for k in ("lut4", "ff", "carry", "dsp", "bram", "lutram")},
            "gemm_cycles": None,
            "gemm_gmacs": None,
            "cycle_model": None,
        }
    )
    m, k, n = point.gemm
    cycles = None
    if block["block"] == "mxu":
        from verif.cycles import gemm_cycles

        cycles = gemm_cycles(m, k, n, cfg.rows, cfg.cols, cfg.stages)
        rec["cycle_model"] = "verif.cycles.gemm_cycles (weight-stationary tiles, exact)"
    elif block["block"] in ENGINE_CYCLE_BLOCKS:
        from sim.gemm import engine_gemm_cycles

        try:
            cycles = engine_gemm_cycles(cfg, m, k, n)
            rec["cycle_model"] = "RTL: the engine's CYCLES with the HDL memory system in Verilator (bit-exact)"
        except (RuntimeError, ValueError) as e:  # the synthesis result stands; the figure is missing
            rec["gemm_error"] = (str(e).splitlines() or [type(e).__name__])[0]
    if cycles is not None:
        rec["gemm_cycles"] = cycles
        if rec["achieved_mhz"]:
            rec["gemm_gmacs"] = round(m * k * n / cycles * rec["achieved_mhz"] / 1e3, 3)
    rec["tools"] = rep["tools"]
    rec["wall_s"] = round(time.perf_counter() - t0, 1)
    return rec


def _remote_point(point: Point, work: str, resolve: Callable) -> dict:
    """:func:`run_point` in ``work``, which is removed afterwards (a Ray task, or :func:`run_cached`)."""
    import shutil

    try:
        return run_point(point, Path(work), resolve)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def run_sweep(
    points: list[Point], resolve: Callable, *, address: str | None = None, jobs: int = 1, progress=None
) -> tuple[list[dict], dict]:
    """Run ``points`` on Ray (``address``: an existing cluster; default a local instance with ``jobs``
    CPUs), at most ``jobs`` at a time (:func:`run_point` with ``resolve``), each point's record cached
    as it arrives. Returns the records in the order of ``points`` and run figures (``ran``,
    ``cached``, ``wall_s``). ``progress`` is called with the number of points done after each one.

    Raises:
        RuntimeError: Ray could not start or reach ``address``.
    """
    from sim.runner import build_root

    t0 = time.perf_counter()
    cache = build_root() / "cache" / "sweep"
    cache.mkdir(parents=True, exist_ok=True)
    fp = fingerprint()
    points = [Point(p.options, p.argv, p.gemm, p.place, _key(p, fp, resolve)) for p in points]
    records: dict[str, dict] = {}
    for p in points:
        f = cache / f"{p.key}.json"
        if f.is_file():
            # the options as this spec spells them (another spelling of the same point wrote the file)
            records[p.key] = {**_load(cache, p.key, fp), "options": p.options, "cached": True}
    todo = list({p.key: p for p in points if p.key not in records}.values())  # one run per configuration
    done = len(points) - len(todo)
    if progress:
        progress(done)
    if todo:
        import logging

        import ray

        # the local instance's token authentication is on by default; its notice is not for our users
        logging.getLogger("ray._private.authentication.authentication_token_setup").setLevel(logging.ERROR)
        try:
            ray.init(
                address=address,
                num_cpus=None if address else jobs,
                include_dashboard=False,
                log_to_driver=False,
                configure_logging=False,
                ignore_reinit_error=True,
            )
        except Exception as e:  # noqa: BLE001 - Ray's connection errors have no common base class
            raise RuntimeError(f"Ray: {(str(e).splitlines() or [type(e).__name__])[0]}") from None
        try:
            task = ray.remote(num_cpus=1, max_retries=0)(_remote_point)
            pending, queue = {}, list(todo)
            while queue or pending:
                while queue and len(pending) < jobs:
                    p = queue.pop(0)
                    work = cache / "work" / p.key
                    pending[task.remote(p, str(work), resolve)] = p
                ready, _ = ray.wait(list(pending), num_returns=1)
                p = pending.pop(ready[0])
                try:
                    rec = ray.get(ready[0])
                except Exception as e:  # noqa: BLE001 - a worker that died: recorded like a tool failure
                    rec = {
                        "options": p.options,
                        "key": p.key,
                        "status": "failed",
                        "error": f"{type(e).__name__}: {(str(e).splitlines() or [''])[0]}",
                    }
                if rec["status"] != "failed":
                    rec = _store(cache, p.key, rec, fp)
                records[p.key] = {**rec, "cached": False}
                done += 1
                if progress:
                    progress(done)
        finally:
            ray.shutdown()
    out = [records[p.key] for p in points]
    return out, {"ran": len(todo), "cached": len(points) - len(todo), "wall_s": round(time.perf_counter() - t0, 1)}


def pareto(records: list[dict], x: str, y: str) -> list[int]:
    """Indices of the records on the Pareto front of smaller ``x`` and larger ``y`` (records without
    both values are left out), in increasing ``x``. A record is on the front when no other has
    ``x`` <= and ``y`` >= with one of them strict."""
    pts = [(r[x], r[y], i) for i, r in enumerate(records) if r.get(x) is not None and r.get(y) is not None]
    front = []
    for xi, yi, i in pts:
        if not any((xj <= xi and yj >= yi) and (xj < xi or yj > yi) for xj, yj, _ in pts):
            front.append((xi, -yi, i))
    return [i for _, _, i in sorted(front)]


def plot_pareto(records: list[dict], x: str, y: str, path: Path, *, xlabel: str, ylabel: str, title: str) -> bool:
    """A PNG scatter of ``y`` against ``x`` with the Pareto front (:func:`pareto`) drawn and labelled;
    returns False (and writes nothing) when no record has both values."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    pts = [r for r in records if r.get(x) is not None and r.get(y) is not None]
    if not pts:
        return False
    front = pareto(records, x, y)
    fig, ax = plt.subplots(figsize=(7, 4.5), dpi=110)
    ax.scatter([r[x] for r in pts], [r[y] for r in pts], s=18, color="#9aa", label="points")
    ax.plot([records[i][x] for i in front], [records[i][y] for i in front], "o-", color="#c33", label="Pareto front")
    for i in front:
        o = records[i]["options"]
        label = " ".join(
            [o["block"]]
            + ([f"{o['rows']}x{o['cols']}"] if "rows" in o and "cols" in o else [])
            + [str(o[k]) for k in ("fmt", "target") if k in o]
            + ([f"s{o['stages']}"] if "stages" in o else [])
        )
        ax.annotate(label, (records[i][x], records[i][y]), fontsize=7, xytext=(4, 4), textcoords="offset points")
    xs = [r[x] for r in pts]
    if min(xs) > 0 and max(xs) / min(xs) > 20:  # int8 and bf16 arrays differ by 60x in LUT4
        ax.set_xscale("log")
    ax.set(xlabel=xlabel, ylabel=ylabel, title=title)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return True
