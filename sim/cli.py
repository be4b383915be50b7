"""The ``mxu`` command: generate Verilog, and run the main job (``mxu demo``).

Every subcommand prints ``--help`` with units; bad input prints one line ``mxu: error: ...`` on
stderr and exits with status 2 (no traceback, no partial output); work longer than a few seconds
shows a progress bar on stderr; machine-readable results go to stdout as JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

__all__ = ["main"]

FMTS = ("bf16", "fp8_e4m3fn", "fp8_e5m2", "int8")
SUBNORMALS = ("ftz", "ieee")
SIMULATORS = ("verilator", "icarus")


class UsageError(Exception):
    """Bad input from the user: printed as one line, exit status 2."""


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # one line, status 2 (argparse prints the whole usage by default)
        raise UsageError(message)


def _stages(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be an integer (MXU 1..4, MAC 0..4), not {text!r}") from None
    return value


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a positive integer, not {text!r}")
    return value


def _seed(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = -1
    if not 0 <= value < 2**31:
        raise argparse.ArgumentTypeError(f"must be an integer from 0 to {2**31 - 1}, not {text!r}")
    return value


def _out_dir(text: str) -> Path:
    if not text.strip():
        raise argparse.ArgumentTypeError("must name a folder, not an empty string")
    return Path(text)


def _build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="mxu", description="Open TPU-style matrix unit: generate, simulate and check the RTL.")
    sub = p.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    sub.required = True

    g = sub.add_parser("generate", help="write Verilog plus a JSON manifest for an MXU (or a single MAC)",
                       description="Write <out>/<name>.v and <out>/<name>.json: every parameter, every port "
                                   "(direction, width in bits, meaning), the latency of each path in cycles "
                                   "and the tool versions. Parameters come from --preset or --config, then "
                                   "from the options given, which win.")
    g.add_argument("--block", choices=["mxu", "mac"], default=None, help="block to generate (default: mxu)")
    g.add_argument("--rows", type=_positive, default=None, help="MXU PE rows R (K extent of a weight tile; default 8)")
    g.add_argument("--cols", type=_positive, default=None, help="MXU PE columns C (N extent of a tile; default 8)")
    g.add_argument("--fmt", choices=FMTS, default=None, help="input format (default: bf16)")
    g.add_argument("--subnormals", choices=SUBNORMALS, default=None,
                   help="ftz: flush subnormals to zero (default); ieee: gradual underflow")
    g.add_argument("--stages", type=_stages, default=None,
                   help="pipeline stages of each MAC in cycles: 1..4 for the MXU, 0..4 for a MAC (default 2)")
    g.add_argument("--preset", default=None, metavar="NAME",
                   help="named configuration: " + ", ".join(_preset_names()))
    g.add_argument("--config", type=Path, default=None, metavar="FILE.toml",
                   help="TOML file with keys block, rows, cols, fmt, subnormals, stages")
    g.add_argument("--name", default=None, help="Verilog top module name (default: mxu or mac)")
    g.add_argument("-o", "--out", required=True, type=_out_dir,
                   help="output folder (created; both files appear together or not at all)")

    _add_synth_parser(sub)

    d = sub.add_parser("demo", help="the main job: random bf16 MACs through the generated RTL vs the golden model",
                       description="Generate the MAC, build it in a simulator, run random MACs from five "
                                   "distributions against the bit-exact golden model, print a summary.")
    _add_mac_options(d)
    d.add_argument("--vectors", type=_positive, default=5000,
                   help="random MACs to run (default: 5000, split over the distributions)")
    d.add_argument("--sim", choices=SIMULATORS, default="verilator", help="simulator (default: verilator)")
    d.add_argument("--seed", type=_seed, default=None, help="random seed, 0..2**31-1 (default: random, printed)")
    d.add_argument("--json", action="store_true", help="print the summary as one JSON object on stdout")
    return p


def _preset_names() -> list[str]:
    from hw.mxu import PRESETS
    return sorted(PRESETS)


_CONFIG_KEYS = ("block", "rows", "cols", "fmt", "subnormals", "stages")


def _generate_params(args, blocks: tuple[str, ...] = ("mxu", "mac")) -> dict:
    """Merge --preset, --config and explicit options (in that order of precedence, lowest first);
    ``blocks`` are the block names the command accepts."""
    import dataclasses
    import tomllib

    from hw.mxu import PRESETS

    params: dict = {}
    if args.preset is not None:
        if args.preset not in PRESETS:
            raise UsageError(f"unknown --preset {args.preset!r}; choose from {', '.join(sorted(PRESETS))}")
        params.update(dataclasses.asdict(PRESETS[args.preset]), block="mxu")
    if args.config is not None:
        try:
            loaded = tomllib.loads(args.config.read_text())
        except FileNotFoundError:
            raise UsageError(f"--config {args.config}: no such file") from None
        except (OSError, UnicodeDecodeError) as e:
            raise UsageError(f"--config {args.config}: cannot read: {e}") from None
        except tomllib.TOMLDecodeError as e:
            raise UsageError(f"--config {args.config}: invalid TOML: {e}") from None
        unknown = sorted(set(loaded) - set(_CONFIG_KEYS))
        if unknown:
            raise UsageError(f"--config {args.config}: unknown keys {', '.join(unknown)}; allowed: {', '.join(_CONFIG_KEYS)}")
        params.update(loaded)
    for key in _CONFIG_KEYS:
        value = getattr(args, key)
        if value is not None:
            params[key] = value
    params.setdefault("block", "mxu")
    if params["block"] not in blocks:
        raise UsageError(f"block must be one of {', '.join(blocks)}; got {params['block']!r}")
    return params


def _project_info() -> dict:
    """Version of this distribution and the git commit of the checkout (``+dirty`` with local edits)."""
    import subprocess
    from importlib import metadata

    try:
        version = metadata.version("open-mxu")
    except metadata.PackageNotFoundError:
        version = "unknown"
    root = Path(__file__).resolve().parents[1]
    try:
        commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True,
                                timeout=10).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=root,
                               capture_output=True, text=True, timeout=10).stdout.strip()
        commit = (commit + ("+dirty" if dirty else "")) if commit else "unknown"
    except (OSError, subprocess.SubprocessError):
        commit = "unknown"
    return {"name": "open-mxu", "version": version, "git_commit": commit}


def _check_out_dir(out: Path, names) -> None:
    if out.exists() and not out.is_dir():
        raise UsageError(f"--out {out} exists and is not a folder")
    for name in names:
        if (out / name).is_dir():
            raise UsageError(f"--out {out}: {name} exists there and is a folder")


def _write_outputs(out: Path, files: dict[str, str | Path]) -> None:
    """Write ``files`` (name -> text or source path) into ``out`` all-or-nothing: everything goes
    to a temporary folder first and is then moved into place; a folder this call created is
    removed again when writing fails."""
    _check_out_dir(out, files)
    created = not out.exists()
    try:
        out.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=".mxu-", dir=out))
    except OSError as e:
        raise UsageError(f"--out {out}: cannot create: {e.strerror}") from None
    try:
        for name, content in files.items():
            if isinstance(content, Path):
                shutil.copyfile(content, tmp / name)
            else:
                (tmp / name).write_text(content)
        for name in files:
            os.replace(tmp / name, out / name)
    except OSError as e:
        shutil.rmtree(tmp, ignore_errors=True)
        if created:
            shutil.rmtree(out, ignore_errors=True)
        raise UsageError(f"--out {out}: cannot write: {e.strerror}") from None
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _add_mac_options(p):
    p.add_argument("--fmt", choices=FMTS, default="bf16", help="input format (default: bf16)")
    p.add_argument("--subnormals", choices=SUBNORMALS, default="ftz",
                   help="ftz: flush subnormals to zero (default); ieee: gradual underflow")
    p.add_argument("--stages", type=_stages, default=2,
                   help="pipeline register stages in the MAC, 0..4 (latency in cycles; default: 2)")


def _mac_config(args):
    from hw.arith import MACConfig
    try:
        return MACConfig(args.fmt, args.subnormals, args.stages)
    except ValueError as e:
        raise UsageError(str(e)) from None


def _cmd_generate(args) -> int:
    from hw.arith import MAC, MACConfig
    from hw.generate import manifest, mxu_verilog
    from hw.mxu import MXU, MXUConfig
    from sim import runner, toolchain

    params = _generate_params(args)
    block = params.pop("block")
    name = args.name or block
    if not name.isidentifier() or not name.isascii():
        raise UsageError(f"--name {name!r} is not a Verilog identifier (letters, digits, _)")
    _check_out_dir(args.out, [f"{name}.v", f"{name}.json"])  # before minutes of generation
    t0 = time.perf_counter()
    try:
        if block == "mac":
            for key in ("rows", "cols"):
                if key in params:
                    raise UsageError(f"{key} does not apply to block mac (from --{key}, --preset or --config)")
            cfg = MACConfig(**{"stages": 2, **params})
        else:
            cfg = MXUConfig(**params)
    except (TypeError, ValueError) as e:
        raise UsageError(str(e)) from None
    if block == "mac":
        verilog = runner.generate_verilog(lambda: MAC(cfg), name=name, key=cfg)
        comp = MAC(cfg)
        latencies = {"input_to_output_cycles": cfg.latency_cycles}
        modules = [name]
    else:
        verilog = runner.generate_verilog(lambda: mxu_verilog(cfg, name), name=name, key=cfg)
        comp = MXU(cfg)
        latencies = {
            "act_to_out_cycles": cfg.latency_cycles,
            "pe_partial_sum_cycles": cfg.stages,
            "pe_activation_hop_cycles": 1,
            "weight_beats_per_tile": cfg.weight_beats,
            "commit_after_swap_min_cycles": cfg.commit_gap_cycles,
            "weight_load_hold_after_commit_cycles": cfg.load_hold_cycles,
            "formula": "out beat = act beat + R*stages + C - 1 cycles (see verif/cycles.py for tile timing)",
        }
        modules = [f"{name}_pe", f"{name}_row", name]
    comp._MustUse__silence = True
    info = manifest(comp, cfg, name=name, latency_cycles=cfg.latency_cycles, meanings=comp.port_meanings(),
                    extra={"block": block, "latencies": latencies, "modules": modules,
                           "verilog": f"{name}.v", "verilog_bytes": verilog.stat().st_size,
                           "project": _project_info(), "tools": toolchain.tool_versions()})
    _write_outputs(args.out, {f"{name}.v": verilog, f"{name}.json": json.dumps(info, indent=2) + "\n"})
    print(json.dumps({"verilog": str(args.out / f"{name}.v"), "manifest": str(args.out / f"{name}.json"),
                      "block": block, "parameters": info["parameters"], "latency_cycles": cfg.latency_cycles,
                      "wall_s": round(time.perf_counter() - t0, 2)}))
    return 0


def _freq_mhz(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0 < value <= 1000:
        raise argparse.ArgumentTypeError(f"must be a frequency in MHz, above 0 and at most 1000, not {text!r}")
    return value


def _add_synth_parser(sub) -> None:
    from sim.synth import TARGETS

    targets = "; ".join(f"{t.name}: {t.board}, {t.part}" for t in TARGETS.values())
    s = sub.add_parser("synth", help="run Yosys + nextpnr for an FPGA target; print utilization and Fmax",
                       description="Generate the block, wrap it out of context (its inputs from a shift "
                                   "register on one pin, its outputs XOR-reduced to one pin), synthesize it "
                                   "with Yosys, place and route it with nextpnr (YoWASP), and print LUT4, "
                                   "flip-flops, carry, DSP, block RAM and I/O against the device capacity, and "
                                   "the achieved Fmax against --freq (a miss is reported, not an error). "
                                   f"Targets: {targets}. Exit status 2 for bad input and for a design that "
                                   "does not fit the part, 1 when a tool fails.")
    s.add_argument("--target", required=True, choices=list(TARGETS), help="FPGA target (part on a board)")
    s.add_argument("--block", choices=["mxu", "pe", "mac"], default=None,
                   help="block to synthesize (default: mxu)")
    s.add_argument("--rows", type=_positive, default=None, help="MXU PE rows R (default 8)")
    s.add_argument("--cols", type=_positive, default=None, help="MXU PE columns C (default 8)")
    s.add_argument("--fmt", choices=FMTS, default=None, help="input format (default: bf16; a PE takes bf16 or int8)")
    s.add_argument("--subnormals", choices=SUBNORMALS, default=None,
                   help="ftz: flush subnormals to zero (default); ieee: gradual underflow")
    s.add_argument("--stages", type=_stages, default=None,
                   help="pipeline stages of each MAC in cycles: 1..4 for the MXU and a PE, 0..4 for a MAC "
                        "(default 2)")
    s.add_argument("--preset", default=None, metavar="NAME",
                   help="named configuration: " + ", ".join(_preset_names()))
    s.add_argument("--config", type=Path, default=None, metavar="FILE.toml",
                   help="TOML file with keys block, rows, cols, fmt, subnormals, stages")
    s.add_argument("--freq", type=_freq_mhz, default=None, metavar="MHZ",
                   help="requested clock frequency in MHz (default: the board's oscillator: 12 MHz "
                        "iCEBreaker, 25 MHz ULX3S, 48 MHz OrangeCrab)")
    s.add_argument("--seed", type=_seed, default=1, help="nextpnr placement seed, 0..2**31-1 (default 1)")
    s.add_argument("--no-dsp", action="store_true",
                   help="build multipliers from LUTs instead of DSP blocks (SB_MAC16 / MULT18X18D): for arrays "
                        "with more multipliers than the part has DSPs")
    s.add_argument("--synth-only", action="store_true",
                   help="stop after Yosys and the fit check (no place and route, no Fmax)")
    s.add_argument("--name", default=None, help="Verilog module name of the block (default: mxu, pe or mac)")
    s.add_argument("--json", action="store_true", help="print the report as one JSON object instead of the table")
    s.add_argument("-o", "--out", required=True, type=_out_dir,
                   help="output folder (created; any folder, /tmp included): synth.json, the Verilog, the "
                        "wrapper, the constraints used and the tool logs, all together or none")


_SYNTH_FILES = ("synth.json", "ooc_top.v", "yosys.log", "yosys_wrapper.log", "nextpnr.log", "nextpnr_report.json")


def _cmd_synth(args) -> int:
    from hw.arith import MAC, MACConfig
    from hw.generate import mxu_verilog
    from hw.mxu import MXUConfig
    from hw.pe import PE, PEConfig
    from sim import runner, synth

    params = _generate_params(args, blocks=("mxu", "pe", "mac"))
    block = params.pop("block")
    name = args.name or block
    if not name.isidentifier() or not name.isascii() or name == synth.WRAPPER_TOP:
        raise UsageError(f"--name {name!r} is not a Verilog identifier (letters, digits, _) "
                         f"other than {synth.WRAPPER_TOP}")
    target = synth.TARGETS[args.target]
    files = [f"{name}.v", target.constraints, *_SYNTH_FILES]
    if args.synth_only:
        files = [f for f in files if not f.startswith("nextpnr")]
    _check_out_dir(args.out, files)
    try:
        if block in ("mac", "pe"):
            for key in ("rows", "cols"):
                if key in params:
                    raise UsageError(f"{key} does not apply to block {block} (from --{key}, --preset or --config)")
            cfg = (MACConfig if block == "mac" else PEConfig)(**{"stages": 2, **params})
        else:
            cfg = MXUConfig(**params)
    except (TypeError, ValueError) as e:
        raise UsageError(str(e)) from None

    from tqdm import tqdm

    steps = tqdm(total=4 if not args.synth_only else 3, desc="mxu synth", unit="step", file=sys.stderr,
                 leave=False, disable=not sys.stderr.isatty() and not os.environ.get("MXU_PROGRESS"))
    steps.set_postfix_str("generating Verilog")
    if block == "mac":
        verilog = runner.generate_verilog(lambda: MAC(cfg), name=name, key=cfg)
    elif block == "pe":
        verilog = runner.generate_verilog(lambda: PE(cfg), name=name, key=cfg)
    else:
        verilog = runner.generate_verilog(lambda: mxu_verilog(cfg, name), name=name, key=cfg)
    steps.update()

    flow_steps = []

    def progress(text: str) -> None:  # called before each step of the flow
        if flow_steps:
            steps.update()
        flow_steps.append(text)
        steps.set_postfix_str(text)

    created = not args.out.exists()
    try:
        args.out.mkdir(parents=True, exist_ok=True)
        work = Path(tempfile.mkdtemp(prefix=".mxu-synth-", dir=args.out))
    except OSError as e:
        raise UsageError(f"--out {args.out}: cannot create: {e.strerror}") from None
    keep_work = False
    try:
        report = synth.run_flow(verilog, name, target, work, freq_mhz=args.freq, seed=args.seed,
                                place=not args.synth_only, dsp=not args.no_dsp, progress=progress,
                                block={"block": block, **_asdict(cfg)})
        steps.update(steps.total - steps.n)
        steps.close()
        _write_outputs(args.out, {f: work / f for f in files})
    except synth.DoesNotFit as e:
        raise UsageError(str(e)) from None
    except synth.SynthError:
        keep_work = True  # the message names a log in the work folder
        raise
    finally:
        steps.close()
        if not keep_work:
            shutil.rmtree(work, ignore_errors=True)
            if created and not any(args.out.iterdir()):
                shutil.rmtree(args.out, ignore_errors=True)
    if args.json:
        print(json.dumps(report))
    else:
        print(synth.format_report(report))
        print(f"  report: {args.out / 'synth.json'}")
    return 0


def _asdict(cfg) -> dict:
    import dataclasses
    return dataclasses.asdict(cfg)


def _cmd_demo(args) -> int:
    import random

    from tqdm import tqdm

    from hw.arith import MAC
    from sim import runner, toolchain

    cfg = _mac_config(args)
    try:
        toolchain.check_simulator(args.sim)
    except toolchain.SimulatorUnavailable as e:
        raise UsageError(str(e)) from None
    seed = args.seed if args.seed is not None else random.randrange(2**31)
    t0 = time.perf_counter()
    steps = tqdm(total=3, desc="mxu demo", unit="step", file=sys.stderr, leave=False,
                 disable=not sys.stderr.isatty() and not os.environ.get("MXU_PROGRESS"))
    steps.set_postfix_str("generating Verilog")
    verilog = runner.generate_verilog(lambda: MAC(cfg), name="mac", key=cfg)
    steps.update()
    steps.set_postfix_str(f"building and running in {args.sim}")
    report = Path(tempfile.mkstemp(prefix="mxu-demo-", suffix=".jsonl")[1])
    try:
        env = {"MXU_TB_CONFIG": json.dumps({"fmt": cfg.fmt, "subnormals": cfg.subnormals, "stages": cfg.stages,
                                            "seed": seed, "random_total": args.vectors, "gaps": True,
                                            "corners": False}),
               "MXU_TB_REPORT": str(report)}
        result = runner.run_cocotb([verilog], "mac", "verif.tb.mac_tb", simulator=args.sim, env=env)
        steps.update(2)
        records = [json.loads(line) for line in report.read_text().splitlines() if line.strip()]
    finally:
        report.unlink(missing_ok=True)
        steps.close()
    vectors = sum(r["vectors"] for r in records)
    mismatches = sum(r["mismatches"] for r in records)
    sim_s = sum(r["seconds"] for r in records)
    summary = {
        "config": {"fmt": cfg.fmt, "subnormals": cfg.subnormals, "stages": cfg.stages,
                   "latency_cycles": cfg.latency_cycles},
        "simulator": args.sim,
        "simulator_version": toolchain.tool_versions().get("iverilog" if args.sim == "icarus" else args.sim,
                                                           "").split(";")[0],
        "seed": seed, "vectors": vectors, "mismatches": mismatches,
        "distributions": {r["test"]: r["vectors"] for r in records},
        "tests_run": len(records), "tests_failed": result.failed,
        "replay": _replay_command(args, seed),
        "build_s": round(result.build_s, 2), "cached_build": result.cached_build,
        "macs_per_s": round(vectors / sim_s) if sim_s else None,
        "wall_s": round(time.perf_counter() - t0, 2),
    }
    ok = result.failed == 0 and mismatches == 0 and vectors > 0
    if args.json:
        print(json.dumps(summary))
    else:
        _print_summary(summary, ok, result)
    return 0 if ok else 1


def _replay_command(args, seed: int) -> str:
    return (f"mxu demo --fmt {args.fmt} --subnormals {args.subnormals} --stages {args.stages} "
            f"--vectors {args.vectors} --sim {args.sim} --seed {seed}")


def _print_summary(s, ok, result) -> None:
    c = s["config"]
    if c["fmt"] == "int8":
        numerics = "fmt=int8  acc=int32 two's-complement wrap"
    else:
        numerics = f"fmt={c['fmt']}  subnormals={c['subnormals']}  acc=fp32, RNE, one rounding per MAC"
    stress = "random input gaps and back-pressure" if c["stages"] else "combinational: no pipeline to stall"
    lines = [
        "mxu demo: bit-exact check of the generated MAC against the golden model",
        f"  configuration   {numerics}",
        f"                  stages={c['stages']} (latency {c['latency_cycles']} cycles)",
        f"  simulator       {s['simulator']} {s['simulator_version']}  "
        f"(build {s['build_s']} s{', cached' if s['cached_build'] else ''})",
        f"  seed            {s['seed']}  (replay: {s['replay']})",
        f"  vectors run     {s['vectors']} over {len(s['distributions'])} "
        f"distribution{'s' if len(s['distributions']) != 1 else ''}, {stress}",
    ]
    for name, n in s["distributions"].items():
        lines.append(f"                    {name:<24} {n}")
    lines += [
        f"  mismatches      {s['mismatches']}",
        f"  throughput      {s['macs_per_s']} MACs/s simulated (cocotb + {s['simulator']})",
        f"  wall time       {s['wall_s']} s",
        f"  result          {'PASS: bit-exact' if ok else 'FAIL'}",
    ]
    if not ok and result.log:
        lines.append(f"  log             {result.log}")
    print("\n".join(lines))


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``mxu`` console script; returns the exit status."""
    parser = _build_parser()
    try:
        args = parser.parse_args(argv)
        return {"generate": _cmd_generate, "demo": _cmd_demo, "synth": _cmd_synth}[args.command](args)
    except UsageError as e:
        print(f"mxu: error: {e}", file=sys.stderr)
        return 2
    except RuntimeError as e:  # a tool failed (build, simulation): one line, the log path is in it
        first = str(e).splitlines()[0] if str(e) else type(e).__name__
        print(f"mxu: failed: {first}", file=sys.stderr)
        return 1
    except OSError as e:  # e.g. an unwritable build folder (MXU_BUILD_DIR) or output folder
        where = f": {e.filename}" if e.filename else ""
        print(f"mxu: error: {e.strerror or e}{where}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("mxu: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
