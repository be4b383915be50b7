"""``mxu synth``: Yosys + nextpnr for an FPGA target, out of context; utilization and Fmax."""

from __future__ import annotations

import dataclasses
import json
import shutil
import sys
import tempfile
from pathlib import Path

from .errors import UsageError
from .files import check_build_dir, check_out_dir, progress_enabled, write_outputs
from .options import (
    FMTS,
    SUBNORMALS,
    add_config_options,
    add_size_limit_option,
    check_module_name,
    check_size,
    engine_params,
    freq_mhz_arg,
    generate_params,
    out_dir_arg,
    positive_arg,
    seed_arg,
    stages_arg,
)

__all__ = ["add_parser", "run"]

SYNTH_FILES = ("synth.json", "ooc_top.v", "yosys.log", "yosys_wrapper.log", "nextpnr.log", "nextpnr_report.json")


def add_parser(sub) -> None:
    """Add the ``synth`` subcommand to the ``mxu`` parser's subparsers ``sub``."""
    from hw.hbm.config import TIMING_PRESETS
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
    from sim.blocks import ENGINE_BLOCKS, HBM_BLOCKS, ICI_BLOCKS, POD_BLOCKS

    s.add_argument("--block", choices=["mxu", "pe", "mac", *HBM_BLOCKS, *ENGINE_BLOCKS, *ICI_BLOCKS, *POD_BLOCKS],
                   default=None,
                   help="block to synthesize (default: mxu); "
                        + "; ".join(f"{k}: {what}" for k, (_, what) in HBM_BLOCKS.items())
                        + "; " + "; ".join(f"{k}: {what}" for k, what in POD_BLOCKS.items()))
    s.add_argument("--rows", type=positive_arg, default=None, help="MXU PE rows R (default 8)")
    s.add_argument("--cols", type=positive_arg, default=None, help="MXU PE columns C (default 8)")
    s.add_argument("--fmt", choices=FMTS, default=None, help="input format (default: bf16; a PE takes bf16 or int8)")
    s.add_argument("--subnormals", choices=SUBNORMALS, default=None,
                   help="ftz: flush subnormals to zero (default); ieee: gradual underflow")
    s.add_argument("--stages", type=stages_arg, default=None,
                   help="pipeline stages of each MAC in cycles: 1..9 for the MXU and a PE, 0..9 for a MAC "
                        "(default 2)")
    add_config_options(s)
    s.add_argument("--no-backpressure", dest="backpressure", action="store_const", const=False, default=None,
                   help="MXU without out__ready (no clock enable to every register: the 8x8 bf16 array's "
                        "critical path with it; see the manual's FPGA pages)")
    hbm = s.add_argument_group("HBM blocks (hbm, hbm-*)")
    hbm.add_argument("--queue-depth", type=positive_arg, default=None,
                     help="request queue slots per pseudo-channel, 1..256 (default 16)")
    hbm.add_argument("--pseudo-channels", type=int, choices=(1, 2, 4), default=None,
                     help="pseudo-channels of block hbm (default 2; the hbm-* parts serve one), gemm-top and "
                          "board (default 2)")
    hbm.add_argument("--hbm-timing", choices=sorted(TIMING_PRESETS), default=None,
                     help="HBM2 timing set (default dramsim3_hbm2)")
    ici = s.add_argument_group("ICI and pod blocks (ici-*, pod-*)")
    ici.add_argument("--link-bytes", type=positive_arg, default=None,
                     help="link width, bytes per beat: a power of two, 4..64 (default 8)")
    ici.add_argument("--link-latency", type=positive_arg, default=None,
                     help="one-way wire latency, cycles, 1..4096 (default 4)")
    ici.add_argument("--packet-beats", type=positive_arg, default=None, help="payload beats per packet, 1..256 "
                     "(default 32)")
    ici.add_argument("--rx-packets", type=positive_arg, default=None,
                     help="receive buffer in packets (the credits), 2..64 (default 4)")
    ici.add_argument("--replay-packets", type=positive_arg, default=None,
                     help="replay buffer in packets, a power of two, 2..64 (default 8)")
    ici.add_argument("--devices", type=positive_arg, default=None,
                     help="pod blocks: slots on the ring, 1..16 (default 4; sets the rank widths)")
    s.add_argument("--freq", type=freq_mhz_arg, default=None, metavar="MHZ",
                   help="requested clock frequency in MHz (default: the board's oscillator: 12 MHz "
                        "iCEBreaker, 25 MHz ULX3S, 48 MHz OrangeCrab)")
    s.add_argument("--seed", type=seed_arg, default=1, help="nextpnr placement seed, 0..2**31-1 (default 1)")
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
    add_size_limit_option(s, "generate and synthesize")
    s.add_argument("-o", "--out", required=True, type=out_dir_arg,
                   help="output folder (created; any folder, /tmp included): synth.json, the Verilog, the "
                        "wrapper, the constraints used and the tool logs, all together or none")


def run(args) -> int:
    """Run ``mxu synth``; returns the exit status."""
    return _flow(args, *resolve(args))


def resolve(args) -> tuple:
    """The block that ``args`` (parsed ``mxu synth`` options) asks for, checked but not generated:
    ``(factory, module name, Target, configuration, block description)``. ``mxu sweep`` checks every
    point of its grid with it before it starts any.

    Raises:
        UsageError: an option that does not apply to the block, or a configuration error.
    """
    from sim import synth

    if args.widelut and synth.TARGETS[args.target].family != "ecp5":
        raise UsageError(f"--widelut applies to ECP5 targets only (PFUMX/L6MUX21); {args.target} has none")
    return _resolve(args)


def _resolve(args) -> tuple:
    from hw.arith import MAC, MACConfig
    from hw.generate import mxu_verilog
    from hw.mxu import MXUConfig
    from hw.pe import PE, PEConfig
    from sim import synth
    from sim.blocks import ENGINE_BLOCKS, HBM_BLOCKS, ICI_BLOCKS, POD_BLOCKS

    if args.multiplier is not None and args.block not in (None, "mxu", "pe", "mac"):
        raise UsageError(f"--multiplier applies to blocks mxu and pe only, not {args.block}")
    if args.block in ICI_BLOCKS:
        if getattr(args, "devices", None) is not None:
            raise UsageError(f"--devices applies to the pod blocks (pod-*) only, not {args.block}")
        return _resolve_ici(args)
    if args.block in POD_BLOCKS:
        return _resolve_pod(args)
    for opt in (*_ICI_OPTIONS, "devices"):
        if getattr(args, opt, None) is not None:
            raise UsageError(f"--{opt.replace('_', '-')} applies to the ICI and pod blocks (ici-*, pod-*) only")
    if args.block in HBM_BLOCKS:
        return _resolve_hbm(args)
    if args.block in ENGINE_BLOCKS:
        return _resolve_engine(args)
    for opt in ("queue_depth", "pseudo_channels"):
        if getattr(args, opt) is not None:
            flag = "--" + opt.replace("_", "-")
            raise UsageError(f"{flag} applies to the HBM blocks (hbm, hbm-*), gemm-top and board only")
    if args.hbm_timing is not None:
        raise UsageError("--hbm-timing applies to the HBM blocks only (hbm, hbm-*)")
    params = generate_params(args, blocks=("mxu", "pe", "mac"))
    block = params.pop("block")
    name = args.name or block
    check_module_name(name, reserved=(synth.WRAPPER_TOP,))
    target = synth.TARGETS[args.target]
    if params.get("multiplier") == "ecp5" and args.no_dsp:
        raise UsageError("--multiplier ecp5 instantiates DSP blocks; --no-dsp builds the multipliers from LUTs: "
                         "give one of them")
    if params.get("multiplier") == "ecp5" and target.family != "ecp5":
        raise UsageError(f"--multiplier ecp5 instantiates the ECP5 DSP primitive: it needs an ECP5 target "
                         f"({', '.join(t for t, v in synth.TARGETS.items() if v.family == 'ecp5')}); got {args.target}")
    try:
        if block in ("mac", "pe"):
            for key in ("rows", "cols", "backpressure", *(("multiplier",) if block == "mac" else ())):
                if key in params:
                    raise UsageError(f"{key} does not apply to block {block} (from "
                                     f"--{'no-' if key == 'backpressure' else ''}{key}, --preset or --config)")
            cfg = (MACConfig if block == "mac" else PEConfig)(**{"stages": 2, **params})
        else:
            cfg = MXUConfig(**params)
    except (TypeError, ValueError) as e:
        raise UsageError(str(e)) from None
    if block == "mxu":
        check_size(cfg.rows, cfg.cols, args, simulated=False)

    if block == "mac":
        factory = lambda: MAC(cfg)  # noqa: E731
    elif block == "pe":
        factory = lambda: PE(cfg)  # noqa: E731
    else:
        factory = lambda: mxu_verilog(cfg, name)  # noqa: E731
    return factory, name, target, cfg, {"block": block, **dataclasses.asdict(cfg)}


#: ``mxu synth`` options of the ICI blocks -> ICIConfig field
_ICI_OPTIONS = {"link_bytes": "beat_bytes", "link_latency": "latency_cycles", "packet_beats": "packet_beats",
                "rx_packets": "rx_packets", "replay_packets": "replay_packets"}


def _resolve_ici(args) -> tuple:
    """``mxu synth --block ici-*``: one direction of an ICI link or its transmitter or receiver."""
    from hw.ici import ICIConfig
    from sim import synth
    from sim.blocks import ici_block

    for opt, flag in (("rows", "--rows"), ("cols", "--cols"), ("fmt", "--fmt"), ("subnormals", "--subnormals"),
                      ("stages", "--stages"), ("backpressure", "--no-backpressure"), ("preset", "--preset"),
                      ("config", "--config"), ("queue_depth", "--queue-depth"),
                      ("pseudo_channels", "--pseudo-channels"), ("hbm_timing", "--hbm-timing")):
        if getattr(args, opt) is not None:
            raise UsageError(f"{flag} does not apply to block {args.block}")
    name = args.name or args.block.replace("-", "_")
    check_module_name(name, reserved=(synth.WRAPPER_TOP,))
    try:
        cfg = ICIConfig(**{field: getattr(args, opt) for opt, field in _ICI_OPTIONS.items()
                           if getattr(args, opt) is not None})
    except (TypeError, ValueError) as e:
        raise UsageError(str(e).replace("beat_bytes", "--link-bytes").replace("latency_cycles", "--link-latency")
                         ) from None
    return ici_block(args.block, cfg), name, synth.TARGETS[args.target], cfg, {"block": args.block, **cfg.as_dict()}


def _resolve_pod(args) -> tuple:
    """``mxu synth --block pod-*``: a pod node or its collective engine, on the engine's defaults with
    the array, HBM and link options."""
    from hw.engine import EngineConfig
    from hw.pod.config import PodConfig, pod_link
    from sim import synth
    from sim.blocks import pod_block

    for opt, flag in (("backpressure", "--no-backpressure"), ("config", "--config"), ("hbm_timing", "--hbm-timing")):
        if getattr(args, opt) is not None:
            raise UsageError(f"{flag} does not apply to block {args.block}")
    name = args.name or args.block.replace("-", "_")
    check_module_name(name, reserved=(synth.WRAPPER_TOP,))
    link = {field: getattr(args, opt) for opt, field in _ICI_OPTIONS.items() if getattr(args, opt) is not None}
    try:
        params = engine_params(args)
        if args.queue_depth is not None:
            params["queue_depth"] = args.queue_depth
        devices = getattr(args, "devices", None)
        cfg = PodConfig(engine=EngineConfig.from_options(**params), link=pod_link(**link),
                        nodes=devices if devices is not None else 4)
    except (TypeError, ValueError) as e:
        raise UsageError(str(e).replace("beat_bytes", "--link-bytes").replace("latency_cycles", "--link-latency")
                         .replace("nodes must", "--devices must")) from None
    check_size(cfg.engine.mxu.rows, cfg.engine.mxu.cols, args, simulated=False)
    return pod_block(args.block, cfg), name, synth.TARGETS[args.target], cfg, {"block": args.block, **cfg.as_dict()}


def _resolve_hbm(args) -> tuple:
    """``mxu synth --block hbm|hbm-*``: the HBM controller or one of its parts."""
    from hw.hbm.config import TIMING_PRESETS, HBMConfig
    from sim import synth
    from sim.blocks import hbm_block

    for opt, flag in (("rows", "--rows"), ("cols", "--cols"), ("fmt", "--fmt"), ("subnormals", "--subnormals"),
                      ("stages", "--stages"), ("backpressure", "--no-backpressure"), ("preset", "--preset"),
                      ("config", "--config")):
        if getattr(args, opt) is not None:
            raise UsageError(f"{flag} does not apply to block {args.block}")
    if args.pseudo_channels is not None and args.block != "hbm":
        raise UsageError(f"--pseudo-channels applies to block hbm only; {args.block} serves one pseudo-channel")
    name = args.name or args.block.replace("-", "_")
    check_module_name(name, reserved=(synth.WRAPPER_TOP,))
    options = {"pseudo_channels": args.pseudo_channels or (2 if args.block == "hbm" else 1)}
    if args.queue_depth is not None:
        options["queue_depth"] = args.queue_depth
    if args.hbm_timing is not None:
        options["timing"] = TIMING_PRESETS[args.hbm_timing]
    try:
        cfg = HBMConfig(**options)
    except (TypeError, ValueError) as e:
        raise UsageError(str(e)) from None
    block = {"block": args.block, "pseudo_channels": cfg.pseudo_channels, "queue_depth": cfg.queue_depth,
             "timing": args.hbm_timing or "dramsim3_hbm2"}
    return hbm_block(args.block, cfg), name, synth.TARGETS[args.target], cfg, block


def _resolve_engine(args) -> tuple:
    """``mxu synth --block engine|gemm-top|board|engine-*``: the GEMM engine, one of its parts, the GEMM
    top (engine + HBM controller) or the board top, on the engine's defaults (the board's: 2 x 2 bf16)
    with the array options and --preset."""
    from hw.board import BoardConfig, board_engine_config
    from hw.engine import EngineConfig
    from hw.mxu import MXUConfig
    from sim import synth
    from sim.blocks import engine_block

    for opt, flag in (("backpressure", "--no-backpressure"), ("config", "--config"), ("hbm_timing", "--hbm-timing")):
        if getattr(args, opt) is not None:
            raise UsageError(f"{flag} does not apply to block {args.block}")
    if args.pseudo_channels is not None and args.block not in ("gemm-top", "board"):
        raise UsageError(f"--pseudo-channels applies to blocks hbm, gemm-top and board; not {args.block}")
    if args.queue_depth is not None and args.block not in ("gemm-top", "board"):
        raise UsageError(f"--queue-depth applies to the HBM blocks, gemm-top and board; not {args.block}")
    name = args.name or args.block.replace("-", "_")
    check_module_name(name, reserved=(synth.WRAPPER_TOP,))
    try:
        if args.block == "board":
            mxu = {k: getattr(args, k) for k in ("rows", "cols", "fmt", "subnormals", "stages")
                   if getattr(args, k) is not None}
            engine = board_engine_config(MXUConfig(**{"rows": 2, "cols": 2, **mxu}),
                                         pseudo_channels=args.pseudo_channels or 2,
                                         queue_depth=args.queue_depth or 4)
            cfg = BoardConfig(engine=engine)
        else:
            params = engine_params(args)
            if args.queue_depth is not None:
                params["queue_depth"] = args.queue_depth
            cfg = engine = EngineConfig.from_options(**params)
    except (TypeError, ValueError) as e:
        raise UsageError(str(e)) from None
    if args.block in ("engine", "gemm-top", "board"):
        check_size(engine.mxu.rows, engine.mxu.cols, args, simulated=False)
    block = {"block": args.block, "engine": engine.as_dict()}
    return engine_block(args.block, cfg, name), name, synth.TARGETS[args.target], cfg, block


def _flow(args, factory, name, target, cfg, block: dict) -> int:
    """Generate ``factory()``'s Verilog as module ``name``, run the flow, write ``--out``, print."""
    from tqdm import tqdm

    from sim import runner, synth

    files = [f"{name}.v", target.constraints, *SYNTH_FILES]
    if args.synth_only:
        files = [f for f in files if not f.startswith("nextpnr")]
    check_out_dir(args.out, files)
    check_build_dir()
    steps = tqdm(total=4 if not args.synth_only else 3, desc="mxu synth", unit="step", file=sys.stderr,
                 leave=False, disable=not progress_enabled())
    steps.set_postfix_str("generating Verilog")
    verilog = runner.generate_verilog(factory, name=name, key=(block["block"], cfg))
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
                                block=block)
        steps.update(steps.total - steps.n)
        steps.close()
        write_outputs(args.out, {f: work / f for f in files})
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
