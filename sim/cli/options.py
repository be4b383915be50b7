"""Option values and configurations shared by the ``mxu`` commands: argparse value types (each
raises ``ArgumentTypeError``, which argparse turns into one line and exit 2), the option groups
several commands share, and the merge of ``--preset``, ``--config`` and explicit options into one
configuration."""

from __future__ import annotations

import argparse
import re
from pathlib import Path

from .errors import UsageError

__all__ = ["FMTS", "SUBNORMALS", "SIMULATORS", "ENGINE_SIZES", "PSEUDO_CHANNELS", "RAW_BITS", "CONFIG_KEYS",
           "stages_arg", "positive_arg", "nonnegative_arg", "seed_arg", "out_dir_arg", "engine_size_arg",
           "npy_path_arg",
           "waves_path_arg", "freq_mhz_arg", "preset_names", "generate_params", "engine_params",
           "check_engine_stages", "add_mac_options", "mac_config", "add_size_limit_option", "check_size",
           "vectors_arg", "check_module_name", "MAX_VECTORS", "LINK_BYTES", "absent_arg", "add_pod_options"]

FMTS = ("bf16", "fp8_e4m3fn", "fp8_e5m2", "int8")


SUBNORMALS = ("ftz", "ieee")


SIMULATORS = ("verilator", "icarus")

#: MXU sizes the GEMM engine takes for --rows and --cols (powers of two).
ENGINE_SIZES = tuple(2**i for i in range(9))


PSEUDO_CHANNELS = (1, 2, 4)


RAW_BITS = {"bf16": "uint16", "fp8_e4m3fn": "uint8", "fp8_e5m2": "uint8", "int8": "uint8"}


def stages_arg(text: str) -> int:
    value = _decimal(text)
    if value is None:
        raise argparse.ArgumentTypeError(f"must be an integer (MXU 1..9, MAC 0..9), not {text!r}")
    return value


def _decimal(text: str) -> int | None:
    """A plain decimal integer (ASCII digits, optional sign), else None: Python's int() also takes
    '4_0', ' 4' and full-width digits, which no one means on a command line."""
    return int(text) if re.fullmatch(r"[+-]?[0-9]+", text) else None


def positive_arg(text: str) -> int:
    value = _decimal(text)
    if value is None:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a positive integer, not {text!r}")
    return value


def nonnegative_arg(text: str) -> int:
    value = _decimal(text)
    if value is None or value < 0:
        raise argparse.ArgumentTypeError(f"must be an integer >= 0, not {text!r}")
    return value


def seed_arg(text: str) -> int:
    value = _decimal(text)
    if value is None:
        value = -1
    if not 0 <= value < 2**31:
        raise argparse.ArgumentTypeError(f"must be an integer from 0 to {2**31 - 1}, not {text!r}")
    return value


def out_dir_arg(text: str) -> Path:
    if not text.strip():
        raise argparse.ArgumentTypeError("must name a folder, not an empty string")
    return Path(text)


def engine_size_arg(text: str) -> int:
    value = _decimal(text)
    if value is None:
        value = 0
    if value not in ENGINE_SIZES:
        raise argparse.ArgumentTypeError(
            f"must be a power of two for the GEMM engine ({', '.join(map(str, ENGINE_SIZES))}), not {text!r}")
    return value


def npy_path_arg(text: str) -> Path:
    if not text.strip():
        raise argparse.ArgumentTypeError("must name a .npy file, not an empty string")
    return Path(text)


def absent_arg(text: str) -> tuple[int, ...]:
    """``--absent``: slot numbers separated by commas (checked against ``--devices`` by
    :func:`check_ring`)."""
    try:
        slots = tuple(int(x) for x in text.split(",") if x.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be slot numbers separated by commas, not {text!r}") from None
    return slots


def check_ring(args) -> None:
    """``--devices`` and ``--absent`` against each other, in the options' own words.

    Raises:
        UsageError: more than :data:`hw.pod.config.MAX_SLOTS` slots, an absent slot outside ``0 .. devices - 1``,
            or no slot left.
    """
    from hw.pod.config import MAX_SLOTS

    n = args.devices
    if n > MAX_SLOTS:
        raise UsageError(f"--devices {n}: a pod has at most {MAX_SLOTS} slots")
    for k in args.absent:
        if not 0 <= k < n:
            raise UsageError(f"--absent {k}: no such slot; --devices {n} gives slots 0 .. {n - 1}")
    if len(set(args.absent)) >= n:
        raise UsageError(f"--absent {','.join(map(str, args.absent))} leaves no node of the {n} slots")


#: ICI link widths the pod takes (bytes per beat)
LINK_BYTES = (4, 8, 16, 32)


def add_pod_options(p, *, devices_default: int | None = None, fmt_help: str = "input format (default: bf16)") -> None:
    """The pod's options ``mxu pod matmul`` and ``mxu pod demo`` share: the ring (``--devices``,
    required when ``devices_default`` is None; ``--absent``, ``--bidirectional``), each node's engine
    and each link."""
    if devices_default is None:
        p.add_argument("--devices", type=positive_arg, required=True, metavar="N",
                       help="slots on the ring, 1..16 (nodes: N less the --absent ones)")
    else:
        p.add_argument("--devices", type=positive_arg, default=devices_default, metavar="N",
                       help=f"slots on the ring, 1..16 (nodes: N less the --absent ones; default {devices_default})")
    p.add_argument("--absent", type=absent_arg, default=(), metavar="K[,K..]",
                   help="slots with no node (a failed chip): the ring closes around them")
    p.add_argument("--bidirectional", action="store_true",
                   help="collectives send half of each chunk each way round the ring")
    p.add_argument("--rows", type=engine_size_arg, default=4, help="each engine's PE rows, a power of two (default 4)")
    p.add_argument("--cols", type=engine_size_arg, default=4, help="each engine's PE columns (default 4)")
    p.add_argument("--fmt", choices=FMTS, default="bf16", help=fmt_help)
    p.add_argument("--subnormals", choices=SUBNORMALS, default="ftz", help="ftz (default) or ieee")
    p.add_argument("--stages", type=stages_arg, default=2, help="pipeline stages of each PE's MAC, 1..9 (default 2)")
    p.add_argument("--link-bytes", type=int, choices=LINK_BYTES, default=8,
                   help="ICI link width, bytes per cycle (default 8)")
    p.add_argument("--link-latency", type=positive_arg, default=4, metavar="L",
                   help="one-way link latency, cycles (SerDes and cable; default 4)")
    p.add_argument("--pseudo-channels", type=int, choices=PSEUDO_CHANNELS, default=1, metavar="P",
                   help="HBM pseudo-channels of each node's memory: 1 (default), 2 or 4")


def waves_path_arg(text: str) -> Path:
    path = Path(text)
    if path.suffix not in (".fst", ".vcd"):
        raise argparse.ArgumentTypeError(f"must end in .fst or .vcd (the suffix picks the format), not {text!r}")
    return path


def float_range_arg(low: float, high: float, what: str):
    """An argparse type: a number above ``low`` and at most ``high`` (NaN is neither), else the
    message "must be <what>, above <low> and at most <high>, not '<text>'"."""
    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            value = float("nan")
        if not low < value <= high:
            raise argparse.ArgumentTypeError(f"must be {what}, above {low:g} and at most {high:g}, not {text!r}")
        return value
    return parse


freq_mhz_arg = float_range_arg(0, 1000, "a frequency in MHz")


#: Most random MACs ``mxu demo --mac`` runs (the testbench holds every vector in memory).
MAX_VECTORS = 10_000_000


def vectors_arg(text: str) -> int:
    """``--vectors``: 1 .. :data:`MAX_VECTORS`."""
    value = _decimal(text)
    if value is None:
        value = 0
    if not 1 <= value <= MAX_VECTORS:
        raise argparse.ArgumentTypeError(f"must be a positive integer up to {MAX_VECTORS:,}, not {text!r}")
    return value


#: Verilog-2005 keywords (IEEE 1364-2005, Annex B) and the SystemVerilog ones tools reserve most
#: often: a module name that is a keyword comes out escaped (``\\module``) or not at all.
VERILOG_KEYWORDS = frozenset("""
always and assign automatic begin buf bufif0 bufif1 case casex casez cell cmos config deassign default
defparam design disable edge else end endcase endconfig endfunction endgenerate endmodule endprimitive
endspecify endtable endtask event for force forever fork function generate genvar highz0 highz1 if
ifnone incdir include initial inout input instance integer join large liblist library localparam
macromodule medium module nand negedge nmos nor noshowcancelled not notif0 notif1 or output parameter
pmos posedge primitive pull0 pull1 pulldown pullup pulsestyle_ondetect pulsestyle_onevent rcmos real
realtime reg release repeat rnmos rpmos rtran rtranif0 rtranif1 scalared showcancelled signed small
specify specparam strong0 strong1 supply0 supply1 table task time tran tranif0 tranif1 tri tri0 tri1
triand trior trireg unsigned use uwire vectored wait wand weak0 weak1 while wire wor xnor xor
logic bit byte int shortint longint struct union enum typedef class interface package program
""".split())
#: Name prefixes of the FPGA vendors' primitive cells the synthesis targets know (iCE40 ``SB_*``,
#: ECP5 ``MULT18X18D``, ``DP16KD``, ``TRELLIS_*``, ...): a module of that name clashes with the cell
#: library in Yosys ("Re-definition of module").
PRIMITIVE_PREFIXES = ("SB_", "TRELLIS_", "MULT18X18", "MULT9X9", "ALU54", "DP16KD", "PDPW16KD", "CCU2",
                      "LUT4", "LUT5", "PFUMX", "L6MUX", "EHXPLL", "DCC", "DCS", "DDR", "IDDR", "ODDR",
                      "OSCG", "GSR", "PUR", "USRMCLK", "JTAGG", "SGSR", "FD1", "IFS1", "OFS1", "OB", "IB", "BB")


def check_module_name(name: str, reserved: tuple[str, ...] = ()) -> None:
    """``--name``: a plain Verilog identifier that is no keyword, no vendor primitive's name and
    none of ``reserved``. UsageError otherwise."""
    if not name.isascii() or not name.isidentifier() or len(name) > 128:
        raise UsageError(f"--name {name!r} is not a Verilog identifier (letters, digits, _; at most 128)")
    if name in VERILOG_KEYWORDS:
        raise UsageError(f"--name {name!r} is a Verilog keyword")
    if name == name.upper() and name.startswith(PRIMITIVE_PREFIXES):
        raise UsageError(f"--name {name!r} is the name of an FPGA primitive cell (iCE40 / ECP5 library)")
    if name in reserved:
        raise UsageError(f"--name {name!r} is not a Verilog identifier this command can use: the flow "
                         f"takes {', '.join(reserved)}")


def preset_names() -> list[str]:
    from hw.mxu import PRESETS
    return sorted(PRESETS)


CONFIG_KEYS = ("block", "rows", "cols", "fmt", "subnormals", "stages", "backpressure", "multiplier")


def add_config_options(p) -> None:
    """``--preset`` and ``--config``, the configuration sources :func:`generate_params` merges."""
    p.add_argument("--preset", default=None, metavar="NAME",
                   help="named configuration: " + ", ".join(preset_names()))
    p.add_argument("--config", type=Path, default=None, metavar="FILE.toml",
                   help="TOML file with keys block, rows, cols, fmt, subnormals, stages, backpressure, multiplier")
    from hw.arith.dsp import MULTIPLIERS

    p.add_argument("--multiplier", choices=MULTIPLIERS, default=None,
                   help="the PEs' multiplier: generic (default: a*b, the synthesizer maps it) or ecp5 (an ECP5 "
                        "MULT18X18D whose output register is the product register: int8, or bf16 with 8 or 9 "
                        "stages; faster on ECP5, and the Verilog then needs the ECP5 primitive)")


def generate_params(args, blocks: tuple[str, ...] = ("mxu", "mac")) -> dict:
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
        import stat

        try:
            st = args.config.stat()
        except FileNotFoundError:
            raise UsageError(f"--config {args.config}: no such file") from None
        except OSError as e:
            raise UsageError(f"--config {args.config}: cannot read: {e.strerror or e}") from None
        if not stat.S_ISREG(st.st_mode):
            raise UsageError(f"--config {args.config}: is not a regular file (a folder, pipe or device)")
        if st.st_size > 65536:
            raise UsageError(f"--config {args.config}: {st.st_size:,} bytes; a configuration is at most 64 KiB")
        try:
            loaded = tomllib.loads(args.config.read_text())
        except FileNotFoundError:
            raise UsageError(f"--config {args.config}: no such file") from None
        except (OSError, UnicodeDecodeError) as e:
            raise UsageError(f"--config {args.config}: cannot read: {e}") from None
        except tomllib.TOMLDecodeError as e:
            raise UsageError(f"--config {args.config}: invalid TOML: {e}") from None
        unknown = sorted(set(loaded) - set(CONFIG_KEYS))
        if unknown:
            raise UsageError(f"--config {args.config}: unknown keys {', '.join(unknown)}; "
                             f"allowed: {', '.join(CONFIG_KEYS)}")
        params.update(loaded)
    for key in CONFIG_KEYS:
        value = getattr(args, key)
        if value is not None:
            params[key] = value
    params.setdefault("block", "mxu")
    if params["block"] not in blocks:
        raise UsageError(f"block must be one of {', '.join(blocks)}; got {params['block']!r}")
    return params


def check_engine_stages(stages: int) -> None:
    """The GEMM engine's PE depth: 1..MAX_STAGES (a MAC alone may be 0); UsageError otherwise."""
    from hw.arith import MAX_STAGES
    if not 1 <= stages <= MAX_STAGES:
        raise UsageError(f"argument --stages: must be 1..{MAX_STAGES} for the GEMM engine; got {stages}")


def engine_params(args) -> dict:
    """--preset, then the explicit options; the GEMM engine's defaults (``hw.engine.EngineConfig``)
    for the rest. Returns options for ``EngineConfig.from_options``."""
    import dataclasses

    from hw.engine import EngineConfig
    from hw.mxu import PRESETS

    default = EngineConfig().mxu
    params = {k: getattr(default, k) for k in ("rows", "cols", "fmt", "subnormals", "stages")}
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
    check_engine_stages(params["stages"])
    if args.pseudo_channels is not None:
        params["pseudo_channels"] = args.pseudo_channels
    return params


def add_mac_options(p):
    p.add_argument("--fmt", choices=FMTS, default="bf16", help="input format (default: bf16)")
    p.add_argument("--subnormals", choices=SUBNORMALS, default="ftz",
                   help="ftz: flush subnormals to zero (default); ieee: gradual underflow")
    p.add_argument("--stages", type=stages_arg, default=2,
                   help="pipeline register stages in the MAC, 0..9 (latency in cycles; default: 2)")


def mac_config(args):
    from hw.arith import MACConfig
    try:
        return MACConfig(args.fmt, args.subnormals, args.stages)
    except ValueError as e:
        raise UsageError(str(e)) from None


def add_size_limit_option(p, what: str) -> None:
    p.add_argument("--no-size-limit", dest="size_limit", action="store_false",
                   help=f"{what} even when the up-front estimate is above the limit (sim/size.py; the "
                        "estimate and the limit are in the error message)")


def check_size(rows: int, cols: int, args, *, simulated: bool) -> None:
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
