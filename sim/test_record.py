"""The record of the last regression run (``<build>/verification/last_run.json``), written by the test
suite (``tests/conftest.py``) and read by ``mxu report``'s verification section: which suites ran,
on which simulators, with which seeds, how many result values were compared bit for bit, and with
what outcome, with the run's date and commit.

Each test contributes ``{"nodeid", "outcome", "duration_s", "seed", "simulators", "checked",
"checked_bytes"}``:
``seed`` from the ``seed`` fixture, ``simulators`` every simulator it ran (``sim.runner.run_cocotb``
notes each, :func:`sim.test_context.note_simulator`), ``checked`` the number of result values (MAC
outputs, PE and MXU outputs, GEMM elements) the test and its cocotb benches compared with the golden
model (:func:`verif.checked.count`, in the test or in the simulator's process; several counts add up),
``checked_bytes`` the memory bytes its benches read back and compared with a shadow memory; None or
empty where a test has none of these.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

__all__ = ["FORMAL_SUITE", "record_path", "write", "suites"]

#: the suite of formal proofs (SymbiYosys): listed one by one in the summary
FORMAL_SUITE = "tests/test_formal.py"


def record_path() -> Path:
    """``<build root>/verification/last_run.json`` (:func:`sim.runner.build_root`)."""
    from sim.runner import build_root

    return build_root() / "verification" / "last_run.json"


def write(tests: list[dict], *, args: list[str], options: dict, path: Path | None = None) -> Path:
    """Write the record of a run of ``tests`` (dicts as in the module docstring) started with the
    command-line ``args`` and ``options`` (seed, soak, quick), with today's date and the checkout's
    commit; returns the path."""
    from sim.cli.files import project_info

    path = path or record_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    doc = {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "commit": project_info()["git_commit"],
           "args": args, "options": options, "tests": tests}
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(doc, indent=0) + "\n")
    tmp.replace(path)
    return path


def suites(path: Path | None = None) -> dict | None:
    """The last run summarized per suite (test file), or None when no run was recorded: each suite's
    tests, passed, failed, skipped, simulators, distinct seeds (and the seeds themselves when at most
    three), values and memory bytes compared and seconds; ``formal``: each test of :data:`FORMAL_SUITE` with its
    outcome; plus the run's date, commit, arguments and totals."""
    path = path or record_path()
    if not path.is_file():
        return None
    doc = json.loads(path.read_text())
    by: dict[str, dict] = {}
    for t in doc["tests"]:
        s = by.setdefault(t["nodeid"].split("::")[0], {"tests": 0, "passed": 0, "failed": 0, "skipped": 0,
                                                         "simulators": set(), "seeds": set(), "checked": 0,
                                                         "checked_bytes": 0, "seconds": 0.0})
        s["tests"] += 1
        s[t["outcome"]] = s.get(t["outcome"], 0) + 1
        s["simulators"].update(t.get("simulators") or [])
        if t.get("seed") is not None:
            s["seeds"].add(t["seed"])
        s["checked"] += t.get("checked") or 0
        s["checked_bytes"] += t.get("checked_bytes") or 0
        s["seconds"] += t.get("duration_s") or 0.0
    rows = []
    for name, s in sorted(by.items()):
        seeds = sorted(s["seeds"])
        rows.append({"suite": name, **{k: s[k] for k in ("tests", "passed", "failed", "skipped", "checked",
                                                       "checked_bytes")},
                     "simulators": sorted(s["simulators"]), "seed_count": len(seeds),
                     "seeds": seeds if len(seeds) <= 3 else None, "seconds": round(s["seconds"], 1)})
    total = {k: sum(r[k] for r in rows) for k in ("tests", "passed", "failed", "skipped", "checked", "checked_bytes")}
    formal = [{"proof": t["nodeid"].split("::", 1)[1], "outcome": t["outcome"], "seconds": t.get("duration_s")}
              for t in doc["tests"] if t["nodeid"].split("::")[0] == FORMAL_SUITE]
    return {"date": doc["date"], "commit": doc["commit"], "args": doc["args"], "options": doc["options"],
            "suites": rows, "total": total, "formal": formal, "source": str(path)}
