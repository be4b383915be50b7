"""The ``mxu`` command: generate Verilog, run GEMMs through the RTL (``mxu matmul``), synthesize
(``mxu synth``), and run the main job (``mxu demo``).

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
        raise argparse.ArgumentTypeError(f"must be an integer (MXU 1..9, MAC 0..9), not {text!r}") from None
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
                   help="pipeline stages of each MAC in cycles: 1..9 for the MXU, 0..9 for a MAC (default 2)")
    g.add_argument("--preset", default=None, metavar="NAME",
                   help="named configuration: " + ", ".join(_preset_names()))
    g.add_argument("--config", type=Path, default=None, metavar="FILE.toml",
                   help="TOML file with keys block, rows, cols, fmt, subnormals, stages, backpressure")
    g.add_argument("--no-backpressure", dest="backpressure", action="store_const", const=False, default=None,
                   help="MXU without out__ready: the consumer takes every beat, the array never stalls and "
                        "has no clock enable (faster on FPGAs)")
    g.add_argument("--name", default=None, help="Verilog top module name (default: mxu or mac)")
    _add_size_limit_option(g, "generate")
    g.add_argument("-o", "--out", required=True, type=_out_dir,
                   help="output folder (created; both files appear together or not at all)")

    _add_matmul_parser(sub)
    _add_synth_parser(sub)
    _add_demo_parser(sub)
    from sim.board_cli import add_board_parser
    add_board_parser(sub)
    return p


def _preset_names() -> list[str]:
    from hw.mxu import PRESETS
    return sorted(PRESETS)


_CONFIG_KEYS = ("block", "rows", "cols", "fmt", "subnormals", "stages", "backpressure")


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


def _check_out_dir(out: Path, names, option: str = "--out") -> None:
    """The checks an output folder must pass before any work starts: ``out`` is a folder or can be
    created (its nearest existing parent is a writable folder), it is writable, and none of
    ``names`` is a folder inside it. UsageError otherwise."""
    if out.exists() and not out.is_dir():
        raise UsageError(f"{option} {out} exists and is not a folder")
    for name in names:
        if (out / name).is_dir():
            raise UsageError(f"{option} {out}: {name} exists there and is a folder")
    _check_writable_parent(out, option)


def _check_writable_parent(path: Path, option: str) -> None:
    """``path`` itself when it exists, else its nearest existing parent, must be a folder this user
    can write into (created folders and written files go there). Checked by creating and removing
    a probe file there: permission bits alone say nothing for root, a read-only mount or /proc."""
    for where in (path, *path.parents):
        if where.exists():
            if not where.is_dir():
                raise UsageError(f"{option} {path}: {where} is not a folder")
            try:
                fd, probe = tempfile.mkstemp(prefix=".mxu-probe-", dir=where)
            except OSError as e:
                raise UsageError(f"{option} {path}: folder {where} is not writable ({e.strerror or e})") from None
            os.close(fd)
            os.unlink(probe)
            return


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


def _add_size_limit_option(p, what: str) -> None:
    p.add_argument("--no-size-limit", dest="size_limit", action="store_false",
                   help=f"{what} even when the up-front estimate is above the limit (sim/size.py; the "
                        "estimate and the limit are in the error message)")


def _check_size(rows: int, cols: int, args, *, simulated: bool) -> None:
    """The up-front size limits of ``sim.size`` (unless --no-size-limit): UsageError naming the
    estimate, the limit and the override."""
    from sim import size

    if not getattr(args, "size_limit", True):
        return
    try:
        if simulated:
            size.check_simulated_size(rows, cols)
        size.check_generation_size(rows, cols)
    except ValueError as e:
        raise UsageError(str(e)) from None


def _add_mac_options(p):
    p.add_argument("--fmt", choices=FMTS, default="bf16", help="input format (default: bf16)")
    p.add_argument("--subnormals", choices=SUBNORMALS, default="ftz",
                   help="ftz: flush subnormals to zero (default); ieee: gradual underflow")
    p.add_argument("--stages", type=_stages, default=2,
                   help="pipeline register stages in the MAC, 0..9 (latency in cycles; default: 2)")


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
            for key in ("rows", "cols", "backpressure"):
                if key in params:
                    raise UsageError(f"{key} does not apply to block mac (from "
                                     f"--{'no-' if key == 'backpressure' else ''}{key}, --preset or --config)")
            cfg = MACConfig(**{"stages": 2, **params})
        else:
            cfg = MXUConfig(**params)
    except (TypeError, ValueError) as e:
        raise UsageError(str(e)) from None
    if block == "mxu":
        _check_size(cfg.rows, cfg.cols, args, simulated=False)
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


# ---- mxu matmul --------------------------------------------------------------------------------

#: MXU sizes the GEMM engine takes for --rows and --cols (powers of two).
ENGINE_SIZES = tuple(2**i for i in range(9))
PSEUDO_CHANNELS = (1, 2, 4)
_RAW_BITS = {"bf16": "uint16", "fp8_e4m3fn": "uint8", "fp8_e5m2": "uint8", "int8": "uint8"}


def _engine_size(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value not in ENGINE_SIZES:
        raise argparse.ArgumentTypeError(
            f"must be a power of two for the GEMM engine ({', '.join(map(str, ENGINE_SIZES))}), not {text!r}")
    return value


def _npy_path(text: str) -> Path:
    if not text.strip():
        raise argparse.ArgumentTypeError("must name a .npy file, not an empty string")
    return Path(text)


def _waves_path(text: str) -> Path:
    path = Path(text)
    if path.suffix not in (".fst", ".vcd"):
        raise argparse.ArgumentTypeError(f"must end in .fst or .vcd (the suffix picks the format), not {text!r}")
    return path


def _add_matmul_parser(sub) -> None:
    m = sub.add_parser(
        "matmul", help="run one GEMM C = A @ B (+ C0) through the GEMM engine RTL and check it bit for bit",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="""\
Run C = C0 + A @ B through the generated GEMM engine (MXU + HBM controller + device model) in a
simulator, compare every result bit for bit with the golden model (one sequential fp32 chain over
k per element, verif.golden.matmul), write C and print one JSON object on stdout.

Inputs are 2-D .npy files (numpy.save): A is M x K, B is K x N.
  bf16 / fp8: float16 and float32 values are rounded to nearest even into the format (float16
              widens to float32 exactly first), float64 values are rounded once; with --bits, A and B hold raw bit patterns instead (uint16 for bf16,
              uint8 for fp8). uint16/uint8 arrays without --bits are refused.
  int8:       int8 arrays (any integer array with values in -128..127); with --bits, uint8
              two's-complement bytes.
  --c C0:     M x N initial accumulator, float32 (float64/float16 are rounded RNE to float32);
              for int8 any integer array with values in the int32 range.

Output C.npy: float32 for --out-fmt fp32 (NaN is the canonical 0x7FC00000), int32 for int8, and
for --out-fmt bf16 the bf16 results widened exactly to float32 (C.view(np.uint32) >> 16 gives the
bf16 bit patterns). The file is written atomically (all or nothing).

JSON fields: m, k, n, rows, cols, stages, fmt, subnormals, out_fmt (int32 for int8), sim,
pseudo_channels, cycles (engine cycles, start to done), predicted_cycles (the array alone with
always-ready streams, verif.cycles.gemm_cycles), engine_model_cycles (the array alone on the
engine's own blocking of M into m-blocks, verif.cycles.engine_array_cycles), ideal_cycles
(M*K*N/(R*C)), scalesim_cycles (SCALE-Sim v2 weight-stationary), utilization (ideal/cycles), perf
(the engine's PERF_ counters), status (the engine's STATUS register: 2 = DONE with no error),
engine_error (null, or the error it reports), bitexact, mismatches, build_s, sim_cycles_per_s,
wall_s, output.

Exit status: 0 when every result is bit-exact; 1 when any result differs from the golden model
(C.npy is still written, holding the RTL's results, and the first mismatches with both bit
patterns go to stderr), when the engine reports an error status (nothing written) or when the
simulator fails; 2 for bad input (one line on stderr, nothing written).""")
    m.add_argument("a", type=_npy_path, metavar="A.npy", help="left operand, M x K")
    m.add_argument("b", type=_npy_path, metavar="B.npy", help="right operand, K x N")
    m.add_argument("-o", "--out", required=True, type=_npy_path, metavar="C.npy",
                   help="where to write the M x N result (.npy; written atomically, missing parent folders created)")
    m.add_argument("--c", type=_npy_path, default=None, metavar="C0.npy",
                   help="initial accumulator, M x N (float32; integers for int8); default +0")
    m.add_argument("--rows", type=_engine_size, default=None,
                   help="MXU PE rows R, a power of two (default 8)")
    m.add_argument("--cols", type=_engine_size, default=None,
                   help="MXU PE columns C, a power of two (default 8)")
    m.add_argument("--preset", default=None, metavar="NAME",
                   help="named MXU configuration (rows, cols, fmt, subnormals, stages; options given "
                        "explicitly win): " + ", ".join(_preset_names()))
    m.add_argument("--fmt", choices=FMTS, default=None, help="input format (default: bf16)")
    m.add_argument("--subnormals", choices=SUBNORMALS, default=None,
                   help="ftz: flush subnormals to zero (default); ieee: gradual underflow")
    m.add_argument("--stages", type=_stages, default=None,
                   help="pipeline stages of each PE's MAC, 1..9 cycles (default 2)")
    m.add_argument("--out-fmt", choices=("fp32", "bf16"), default="fp32",
                   help="result format: fp32 (default; int32 for int8) or bf16 (fp32 rounded once, RNE)")
    m.add_argument("--bits", action="store_true",
                   help="A and B hold raw bit patterns (uint16 for bf16, uint8 for fp8 and int8)")
    m.add_argument("--sim", choices=SIMULATORS, default="verilator", help="simulator (default: verilator)")
    m.add_argument("--waves", type=_waves_path, default=None, metavar="OUT.fst",
                   help="record a waveform there (.fst or .vcd)")
    m.add_argument("--pseudo-channels", type=int, choices=PSEUDO_CHANNELS, default=None, metavar="P",
                   help="HBM pseudo-channels of the engine's memory system: 1, 2 or 4 (default 2)")
    _add_size_limit_option(m, "build and simulate an engine larger than 16x16")


def _load_npy(path: Path, what: str):
    """Read a .npy file without pickles; every failure is a UsageError naming ``what`` and the path."""
    import numpy as np

    where = f"{what} {path}"
    try:
        with open(path, "rb") as f:
            if f.read(6) != b"\x93NUMPY":
                raise UsageError(f"{where}: not a .npy file (write it with numpy.save)")
            f.seek(0)
            array = np.lib.format.read_array(f, allow_pickle=False)
    except FileNotFoundError:
        raise UsageError(f"{where}: no such file") from None
    except IsADirectoryError:
        raise UsageError(f"{where}: is a folder, not a .npy file") from None
    except OSError as e:
        raise UsageError(f"{where}: cannot read: {e.strerror or e}") from None
    except ValueError as e:
        if "Object arrays" in str(e) or "pickle" in str(e):
            raise UsageError(f"{where}: holds Python objects (dtype object); save a numeric array") from None
        first = str(e).splitlines()[0] if str(e) else "malformed"
        raise UsageError(f"{where}: corrupt or truncated .npy file ({first})") from None
    except UsageError:
        raise
    except Exception as e:  # numpy's header parser raises EOFError, SyntaxError, tokenize errors...
        raise UsageError(f"{where}: corrupt or truncated .npy file ({type(e).__name__})") from None
    if array.dtype.byteorder not in ("=", "|") and array.dtype.kind in "fiu":
        array = array.astype(array.dtype.newbyteorder("="))
    # not np.ascontiguousarray: it returns at least 1-D, so a 0-d array would pass as shape (1,)
    return array if array.flags.c_contiguous else array.copy(order="C")


def _check_matrix(array, what: str, path: Path) -> None:
    if array.ndim != 2:
        raise UsageError(f"{what} {path} must be a 2-D matrix; got shape {tuple(array.shape)}")
    if 0 in array.shape:
        raise UsageError(f"{what} {path} is {array.shape[0]}x{array.shape[1]}: empty dimension (0); "
                         "every dimension must be at least 1")


def _operand(array, what: str, path: Path, fmt: str, bits: bool):
    """Convert a loaded A or B into ``fmt`` following the input rules of ``mxu matmul``."""
    import numpy as np

    from verif.golden import dtype_of, to_format

    _check_matrix(array, what, path)
    dt = array.dtype
    if dt.kind == "V":
        raise UsageError(f"{what} {path} has dtype {dt} (raw bytes, e.g. an ml_dtypes array): save its "
                         f"{_RAW_BITS[fmt]} bit patterns (.view(np.{_RAW_BITS[fmt]})) and pass --bits")
    if bits:
        allowed = (np.uint16,) if fmt == "bf16" else (np.uint8, np.int8) if fmt == "int8" else (np.uint8,)
        if dt not in [np.dtype(t) for t in allowed]:
            raise UsageError(f"{what} {path} has dtype {dt}; with --bits, --fmt {fmt} takes "
                             f"{_RAW_BITS[fmt]} bit patterns")
        return array.view(dtype_of(fmt))
    if fmt == "int8":
        if dt == np.uint8:
            raise UsageError(f"{what} {path} is uint8: pass --bits if it holds int8 bit patterns "
                             "(two's complement), or save int8 values")
        if dt.kind not in "iu":
            raise UsageError(f"{what} {path} has dtype {dt}; --fmt int8 takes integer arrays with values "
                             "in -128..127 (quantize on the host first)")
        if array.min() < -128 or array.max() > 127:
            raise UsageError(f"{what} {path}: int8 values must lie in -128..127; got "
                             f"{array.min()}..{array.max()}")
        return array.astype(np.int8)
    if dt in (np.dtype(np.uint16), np.dtype(np.uint8)):
        raise UsageError(f"{what} {path} is {dt}: pass --bits to read it as raw {fmt} bit patterns "
                         f"({_RAW_BITS[fmt]}), or save float16/float32/float64 values")
    if dt not in (np.dtype(np.float16), np.dtype(np.float32), np.dtype(np.float64)):
        raise UsageError(f"{what} {path} has dtype {dt}; --fmt {fmt} takes float16, float32 or float64 values "
                         f"(rounded to nearest even into {fmt}) or, with --bits, {_RAW_BITS[fmt]} bit patterns")
    try:
        return to_format(array, fmt)
    except ValueError as e:
        raise UsageError(f"{what} {path}: {e}") from None


def _initial_c(array, path: Path, fmt: str, m: int, n: int):
    import numpy as np

    _check_matrix(array, "--c", path)
    if array.shape != (m, n):
        raise UsageError(f"--c {path} is {array.shape[0]}x{array.shape[1]} but the result is {m}x{n} "
                         "(M from A, N from B)")
    dt = array.dtype
    if fmt == "int8":
        if dt.kind not in "iu":
            raise UsageError(f"--c {path} has dtype {dt}; with --fmt int8 the accumulator is int32: "
                             "give an integer array")
        info = np.iinfo(np.int32)
        if array.min() < info.min or array.max() > info.max:
            raise UsageError(f"--c {path}: values must fit int32")
        return array.astype(np.int32)
    if dt not in (np.dtype(np.float16), np.dtype(np.float32), np.dtype(np.float64)):
        raise UsageError(f"--c {path} has dtype {dt}; the accumulator is fp32: give float32 values")
    with np.errstate(over="ignore"):
        return array.astype(np.float32)  # float64: one RNE rounding (IEEE cast); float16: exact


def engine_error(status: int) -> str | None:
    """None when a ``GemmResult.status`` says the run was fine, else a description.

    Accepts the documented error code (0 = ok) as well as the raw STATUS register (BUSY and DONE in
    bits [1:0], the ERROR code in [7:4], BUS_ERROR in [8]; see hw/engine/csr.py)."""
    value = int(status) & ~0x3
    if value == 0:
        return None
    code, bus = (value >> 4) & 0xF, (value >> 8) & 1
    try:
        from hw.engine import ERRORS
        name = ERRORS.get(code, ("UNKNOWN", ""))[0]
    except ImportError:
        name = "UNKNOWN"
    parts = [f"ERROR {code} ({name})"] if code else []
    if bus:
        parts.append("BUS_ERROR (SLVERR)")
    return f"STATUS 0x{int(status):x}: " + (", ".join(parts) if parts else "unexpected bits")


def engine_model_cycles(m: int, k: int, n: int, params) -> int | None:
    """The array alone on the engine's own blocking (``verif.cycles.engine_array_cycles``): what the
    engine would take if memory never made it wait; None if the model is not available."""
    try:
        from verif.cycles import engine_array_cycles
        return int(engine_array_cycles(m, k, n, params.engine_config()))
    except (ImportError, AttributeError):
        return None


def expected_bits(job, fmt: str, subnormals: str):
    """Golden result bit patterns of a ``sim.gemm.GemmJob``: uint32 (fp32 or int32 results) or
    uint16 (bf16 output), NaN as the canonical pattern the hardware emits."""
    import numpy as np

    from verif.golden import fp32_to_bf16_bits, matmul

    ref = matmul(job.a, job.b, job.c, fmt=fmt, subnormals=subnormals)
    if job.out == "bf16":
        return fp32_to_bf16_bits(ref)
    return np.ascontiguousarray(ref).view(np.uint32)


def result_bits(result, out: str):
    """The RTL's result bit patterns of a ``GemmResult`` as unsigned integers (uint32 or uint16)."""
    import numpy as np

    bits = np.ascontiguousarray(np.asarray(result.bits))
    width = 2 if out == "bf16" else 4
    if bits.dtype.itemsize != width and bits.dtype.kind in "iu":
        bits = bits.astype(np.int64).astype(np.uint32 if width == 4 else np.uint16)
    elif bits.dtype.itemsize == width:
        bits = bits.view(np.uint32 if width == 4 else np.uint16)
    else:
        bits = np.ascontiguousarray(np.asarray(result.result)).view(np.uint32 if width == 4 else np.uint16)
    return bits


def compare_bits(rtl, golden) -> list[tuple[int, ...]]:
    """Indices where two bit-pattern arrays differ (row-major order); a shape mismatch is reported
    as every index of the golden array."""
    import numpy as np

    if rtl.shape != golden.shape:
        return [tuple(int(i) for i in ix) for ix in np.ndindex(*golden.shape)]
    return [tuple(int(i) for i in ix) for ix in np.argwhere(rtl != golden)]


def _bits_text(value: int, out: str, fmt: str) -> str:
    import numpy as np

    if out == "bf16":
        return f"0x{value:04x} ({float(np.array(value << 16, np.uint32).view(np.float32))!r})"
    if fmt == "int8":
        return f"0x{value:08x} ({int(np.array(value, np.uint32).view(np.int32))})"
    return f"0x{value:08x} ({float(np.array(value, np.uint32).view(np.float32))!r})"


def _check_out_file(path: Path, option: str = "--out") -> None:
    if path.is_dir():
        raise UsageError(f"{option} {path} is a folder; give a file name such as C.npy")
    _check_writable_parent(path.parent, option)


def _save_npy_atomic(path: Path, array) -> None:
    """Write ``array`` to ``path`` as .npy all-or-nothing (temporary file in the same folder + rename)."""
    import numpy as np

    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            np.save(f, array)
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


_PROGRESS_VALUES = {"1": True, "true": True, "yes": True, "on": True,
                    "0": False, "false": False, "no": False, "off": False}


def _progress_enabled() -> bool:
    """Progress bars on stderr: ``MXU_PROGRESS`` when set (1/true/yes/on or 0/false/no/off, any case),
    else only when stderr is a terminal. Any other value is a UsageError (checked before any work:
    :func:`main` calls this first)."""
    raw = os.environ.get("MXU_PROGRESS")
    if raw is None or not raw.strip():
        return sys.stderr.isatty()
    value = _PROGRESS_VALUES.get(raw.strip().lower())
    if value is None:
        raise UsageError(f"MXU_PROGRESS must be one of {', '.join(_PROGRESS_VALUES)}; got {raw!r}")
    return value


def _check_engine_stages(stages: int) -> None:
    """The GEMM engine's PE depth: 1..MAX_STAGES (a MAC alone may be 0); UsageError otherwise."""
    from hw.arith import MAX_STAGES
    if not 1 <= stages <= MAX_STAGES:
        raise UsageError(f"argument --stages: must be 1..{MAX_STAGES} for the GEMM engine; got {stages}")


def _engine_params(args) -> dict:
    """--preset, then the explicit options; the GEMM engine's defaults for the rest."""
    import dataclasses

    from hw.mxu import PRESETS

    params = {"rows": 8, "cols": 8, "fmt": "bf16", "subnormals": "ftz", "stages": 2}
    if args.preset is not None:
        if args.preset not in PRESETS:
            raise UsageError(f"unknown --preset {args.preset!r}; choose from {', '.join(sorted(PRESETS))}")
        params.update({k: v for k, v in dataclasses.asdict(PRESETS[args.preset]).items() if k != "backpressure"})
        for key in ("rows", "cols"):
            if params[key] not in ENGINE_SIZES and getattr(args, key) is None:
                raise UsageError(f"--preset {args.preset}: {key} = {params[key]} is not a power of two the "
                                 f"GEMM engine takes ({', '.join(map(str, ENGINE_SIZES))}); override --{key}")
    for key in ("rows", "cols", "fmt", "subnormals", "stages"):
        value = getattr(args, key)
        if value is not None:
            params[key] = value
    _check_engine_stages(params["stages"])
    if args.pseudo_channels is not None:
        params["pseudo_channels"] = args.pseudo_channels
    return params


def _cmd_matmul(args) -> int:

    from sim import toolchain

    t0 = time.perf_counter()
    params = _engine_params(args)
    fmt, subnormals = params["fmt"], params["subnormals"]
    if args.out_fmt == "bf16" and fmt == "int8":
        raise UsageError("--out-fmt bf16 does not apply to --fmt int8 (results are int32)")
    if args.waves is not None:
        _check_out_file(args.waves, "--waves")
    _check_out_file(args.out)
    a = _operand(_load_npy(args.a, "A"), "A", args.a, fmt, args.bits)
    b = _operand(_load_npy(args.b, "B"), "B", args.b, fmt, args.bits)
    if a.shape[1] != b.shape[0]:
        raise UsageError(f"A is {a.shape[0]}x{a.shape[1]} but B is {b.shape[0]}x{b.shape[1]}: "
                         "inner dimensions (K) differ")
    m, k = a.shape
    n = b.shape[1]
    c = _initial_c(_load_npy(args.c, "--c"), args.c, fmt, m, n) if args.c is not None else None

    from sim.gemm import EngineParams, GemmJob, run_gemms
    from verif.cycles import gemm_cycles, ideal_cycles, scalesim_ws_cycles
    from verif.gemm_host import check_gemm

    try:
        engine = EngineParams(**params)
        # the engine's own descriptor checks (MAX_K, 2**20 dimensions, memory size) before any build
        check_gemm(m, k, n, engine.engine_config(), load_c=c is not None, out_bf16=args.out_fmt == "bf16")
    except (TypeError, ValueError) as e:
        raise UsageError(str(e)) from None
    _check_size(engine.rows, engine.cols, args, simulated=True)
    try:
        toolchain.check_simulator(args.sim)
    except toolchain.SimulatorUnavailable as e:
        raise UsageError(str(e)) from None
    job = GemmJob(a, b, c, args.out_fmt)
    try:
        results, info = run_gemms([job], engine, sim=args.sim, waves=str(args.waves) if args.waves else None,
                                  progress=_progress_enabled())
    except ValueError as e:
        raise UsageError(str(e).splitlines()[0] if str(e) else "rejected by the GEMM engine") from None
    result = results[0]
    rows, cols, stages = engine.rows, engine.cols, engine.stages
    ideal = ideal_cycles(m, k, n, rows, cols)
    report = {
        "m": m, "k": k, "n": n, "rows": rows, "cols": cols, "stages": stages, "fmt": fmt,
        "subnormals": subnormals, "out_fmt": args.out_fmt, "sim": args.sim,
        "pseudo_channels": engine.pseudo_channels,
        "cycles": int(result.cycles), "predicted_cycles": gemm_cycles(m, k, n, rows, cols, stages),
        "engine_model_cycles": engine_model_cycles(m, k, n, engine),
        "ideal_cycles": ideal, "scalesim_cycles": scalesim_ws_cycles(m, k, n, rows, cols),
        "utilization": round(ideal / result.cycles, 4) if result.cycles and not engine_error(result.status) else None,
        "perf": dict(result.perf),
        "status": int(result.status), "engine_error": engine_error(result.status),
        "bitexact": None, "mismatches": None,
        "build_s": _round(info.get("build_s")), "sim_cycles_per_s": _round(info.get("cycles_per_s"), 0),
        "wall_s": None, "output": None,
    }
    if report["engine_error"]:
        report["wall_s"] = round(time.perf_counter() - t0, 2)
        print(json.dumps(report))
        print(f"mxu: failed: the engine reported {report['engine_error']}; nothing written", file=sys.stderr)
        return 1
    rtl = result_bits(result, args.out_fmt)
    golden = expected_bits(job, fmt, subnormals)
    bad = compare_bits(rtl, golden)
    if rtl.shape != golden.shape:
        report.update(bitexact=False, mismatches=len(bad), wall_s=round(time.perf_counter() - t0, 2))
        print(json.dumps(report))
        print(f"mxu: failed: the engine returned a {rtl.shape} result for a {golden.shape} GEMM; nothing written",
              file=sys.stderr)
        return 1
    return finish_gemm(args.out, args.out_fmt, fmt, report, rtl, golden, bad, t0, source="rtl")


def finish_gemm(out_path: Path, out_fmt: str, fmt: str, report: dict, rtl, golden, bad, t0: float, *,
                source: str) -> int:
    """Write C.npy from the result bits ``rtl`` (atomically), complete and print ``report`` (one JSON
    line), and report mismatches against ``golden`` on stderr; returns the exit status (0 or 1).
    ``source`` names where the results came from in the messages ("rtl", "board"). The report's
    ``out_fmt`` is ``int32`` for int8 (its results are int32 whatever ``--out-fmt`` says)."""
    import numpy as np

    if fmt == "int8":
        report["out_fmt"] = "int32"

    if out_fmt == "bf16":
        out = (rtl.astype(np.uint32) << 16).view(np.float32)
    else:
        out = rtl.view(np.int32 if fmt == "int8" else np.float32)
    try:
        _save_npy_atomic(out_path, out)
    except OSError as e:
        raise UsageError(f"--out {out_path}: cannot write: {e.strerror or e}") from None
    report.update(bitexact=not bad, mismatches=len(bad), output=str(out_path),
                  wall_s=round(time.perf_counter() - t0, 2))
    print(json.dumps(report))
    if bad:
        for ix in bad[:5]:
            print(f"mxu: mismatch at C[{ix[0]}, {ix[1]}]: {source} {_bits_text(int(rtl[ix]), out_fmt, fmt)}, "
                  f"golden {_bits_text(int(golden[ix]), out_fmt, fmt)}", file=sys.stderr)
        whose = "RTL's" if source == "rtl" else f"{source}'s"
        print(f"mxu: {len(bad)} of {golden.size} results differ from the golden model; {out_path} holds the "
              f"{whose} results", file=sys.stderr)
        return 1
    return 0


def _round(value, digits: int = 2):
    if value is None:
        return None
    return round(float(value), digits) if digits else int(round(float(value)))


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
                   help="pipeline stages of each MAC in cycles: 1..9 for the MXU and a PE, 0..9 for a MAC "
                        "(default 2)")
    s.add_argument("--preset", default=None, metavar="NAME",
                   help="named configuration: " + ", ".join(_preset_names()))
    s.add_argument("--config", type=Path, default=None, metavar="FILE.toml",
                   help="TOML file with keys block, rows, cols, fmt, subnormals, stages, backpressure")
    s.add_argument("--no-backpressure", dest="backpressure", action="store_const", const=False, default=None,
                   help="MXU without out__ready (no clock enable to every register: the 8x8 bf16 array's "
                        "critical path with it; see README)")
    s.add_argument("--freq", type=_freq_mhz, default=None, metavar="MHZ",
                   help="requested clock frequency in MHz (default: the board's oscillator: 12 MHz "
                        "iCEBreaker, 25 MHz ULX3S, 48 MHz OrangeCrab)")
    s.add_argument("--seed", type=_seed, default=1, help="nextpnr placement seed, 0..2**31-1 (default 1)")
    s.add_argument("--no-dsp", action="store_true",
                   help="build multipliers from LUTs instead of DSP blocks (SB_MAC16 / MULT18X18D): for arrays "
                        "with more multipliers than the part has DSPs")
    s.add_argument("--widelut", action="store_true",
                   help="ECP5: let Yosys use the PFUMX/L6MUX21 wide-function muxes (default: synth_ecp5 "
                        "-nowidelut, fewer LUT4 for the same Fmax on this design)")
    s.add_argument("--synth-only", action="store_true",
                   help="stop after Yosys and the fit check (no place and route, no Fmax)")
    s.add_argument("--name", default=None, help="Verilog module name of the block (default: mxu, pe or mac)")
    s.add_argument("--json", action="store_true", help="print the report as one JSON object instead of the table")
    _add_size_limit_option(s, "generate and synthesize")
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
            for key in ("rows", "cols", "backpressure"):
                if key in params:
                    raise UsageError(f"{key} does not apply to block {block} (from "
                                     f"--{'no-' if key == 'backpressure' else ''}{key}, --preset or --config)")
            cfg = (MACConfig if block == "mac" else PEConfig)(**{"stages": 2, **params})
        else:
            cfg = MXUConfig(**params)
    except (TypeError, ValueError) as e:
        raise UsageError(str(e)) from None
    if block == "mxu":
        _check_size(cfg.rows, cfg.cols, args, simulated=False)

    from tqdm import tqdm

    steps = tqdm(total=4 if not args.synth_only else 3, desc="mxu synth", unit="step", file=sys.stderr,
                 leave=False, disable=not _progress_enabled())
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
                                place=not args.synth_only, dsp=not args.no_dsp, widelut=args.widelut, progress=progress,
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


def _add_demo_parser(sub) -> None:
    d = sub.add_parser(
        "demo", help="the main job: a handwritten-digit MLP whose every GEMM runs on the GEMM engine RTL",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="""\
Train a small MLP (64 -> 32 ReLU -> 10, float32, scikit-learn) on the 8x8 handwritten digits
bundled with scikit-learn (1,797 images; 80/20 split, seed --seed), then classify the 360 held-out
images with every matrix product computed by the GEMM engine RTL in a simulator (bf16 inputs, fp32
accumulation, the bias as the initial accumulator, ReLU on the host), the same with the bit-exact
golden model (must agree bit for bit) and with float32 numpy (reference accuracy). Prints a
summary and writes <out>/summary.json and <out>/digits.png (16 held-out digits with the RTL's
predictions). Exit status 1 when the RTL is not bit-exact with the golden model.

mxu demo --mac runs the earlier demo instead: random MACs from five distributions through one
generated MAC against the golden model (options --fmt incl. int8, --subnormals, --stages 0..9,
--vectors, --sim, --seed, --json).""")
    d.add_argument("--mac", action="store_true",
                   help="run the MAC demo (random MACs through one generated MAC) instead of the MLP")
    d.add_argument("--fmt", choices=FMTS, default=None,
                   help="input format (default: bf16; int8 with --mac only)")
    d.add_argument("--subnormals", choices=SUBNORMALS, default=None,
                   help="ftz: flush subnormals to zero (default); ieee: gradual underflow")
    d.add_argument("--stages", type=_stages, default=None,
                   help="pipeline stages of the MAC in cycles: 1..9 for the MLP's MXU, 0..9 with --mac "
                        "(default 2)")
    d.add_argument("--rows", type=_engine_size, default=None, help="MXU PE rows R, a power of two (default 8)")
    d.add_argument("--cols", type=_engine_size, default=None, help="MXU PE columns C, a power of two (default 8)")
    d.add_argument("--vectors", type=_positive, default=None,
                   help="--mac only: random MACs to run (default: 5000, split over the distributions)")
    d.add_argument("--sim", choices=SIMULATORS, default="verilator", help="simulator (default: verilator)")
    d.add_argument("--seed", type=_seed, default=None,
                   help="random seed, 0..2**31-1: the MLP's split and training (default 0, the published "
                        "numbers) or, with --mac, the vectors (default: random, printed)")
    d.add_argument("-o", "--out", type=_out_dir, default=None,
                   help="report folder for summary.json and digits.png (default: build/demo in the "
                        "repository, or $MXU_BUILD_DIR/demo)")
    d.add_argument("--json", action="store_true", help="print the summary as one JSON object on stdout")
    _add_size_limit_option(d, "build and simulate an engine larger than 16x16")


def _cmd_demo(args) -> int:
    if args.mac:
        for option, value in (("--rows", args.rows), ("--cols", args.cols), ("--out", args.out)):
            if value is not None:
                raise UsageError(f"{option} does not apply to the MAC demo (--mac)")
        args.fmt = args.fmt or "bf16"
        args.subnormals = args.subnormals or "ftz"
        args.stages = 2 if args.stages is None else args.stages
        args.vectors = args.vectors or 5000
        return _cmd_demo_mac(args)
    if args.vectors is not None:
        raise UsageError("--vectors applies to the MAC demo only (mxu demo --mac --vectors N)")
    if args.fmt == "int8":
        raise UsageError("the MLP demo runs float formats (bf16, fp8_e4m3fn, fp8_e5m2); int8 needs --mac")
    return _cmd_demo_mlp(args)


def _cmd_demo_mlp(args) -> int:
    from sim import demo_mlp, runner, toolchain

    stages = 2 if args.stages is None else args.stages
    _check_engine_stages(stages)
    try:
        toolchain.check_simulator(args.sim)
    except toolchain.SimulatorUnavailable as e:
        raise UsageError(str(e)) from None
    out = args.out if args.out is not None else runner.build_root() / "demo"
    _check_out_dir(out, demo_mlp.REPORT_FILES)  # before training, the build and the simulation
    _check_size(args.rows or 8, args.cols or 8, args, simulated=True)
    cfg = demo_mlp.DemoConfig(rows=args.rows or 8, cols=args.cols or 8, fmt=args.fmt or "bf16",
                              subnormals=args.subnormals or "ftz", stages=stages, sim=args.sim,
                              seed=0 if args.seed is None else args.seed)
    work = Path(tempfile.mkdtemp(prefix="mxu-demo-"))
    try:
        try:
            summary = demo_mlp.run(cfg, progress=_progress_enabled(), plot=work / "digits.png")
        except ValueError as e:  # the engine refused a parameter
            raise UsageError(str(e).splitlines()[0]) from None
        summary["report"] = {name: str(out / name) for name in demo_mlp.REPORT_FILES}
        _write_outputs(out, {"summary.json": json.dumps(summary, indent=2) + "\n", "digits.png": work / "digits.png"})
    finally:
        shutil.rmtree(work, ignore_errors=True)
    if args.json:
        print(json.dumps(summary))
    else:
        print(demo_mlp.format_summary(summary))
    return 0 if summary["bitexact"] else 1


def _cmd_demo_mac(args) -> int:
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
                 disable=not _progress_enabled())
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
    return (f"mxu demo --mac --fmt {args.fmt} --subnormals {args.subnormals} --stages {args.stages} "
            f"--vectors {args.vectors} --sim {args.sim} --seed {seed}")


def _print_summary(s, ok, result) -> None:
    c = s["config"]
    if c["fmt"] == "int8":
        numerics = "fmt=int8  acc=int32 two's-complement wrap"
    else:
        numerics = f"fmt={c['fmt']}  subnormals={c['subnormals']}  acc=fp32, RNE, one rounding per MAC"
    stress = "random input gaps and back-pressure" if c["stages"] else "combinational: no pipeline to stall"
    lines = [
        "mxu demo --mac: bit-exact check of the generated MAC against the golden model",
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


def _board(args) -> int:
    from sim.board_cli import cmd_board
    return cmd_board(args)


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``mxu`` console script; returns the exit status."""
    parser = _build_parser()
    try:
        args = parser.parse_args(argv)
        _progress_enabled()  # a bad MXU_PROGRESS is an input error, reported before any work
        return {"generate": _cmd_generate, "matmul": _cmd_matmul, "demo": _cmd_demo,
                "synth": _cmd_synth, "board": _board}[args.command](args)
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
    # `python -m sim.cli`: run the copy imported as sim.cli, so that the exception classes the
    # subcommand modules import from sim.cli (UsageError) are the ones main() catches.
    from sim.cli import main as _main
    sys.exit(_main())
