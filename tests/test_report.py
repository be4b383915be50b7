"""``mxu report``: the design-review page of one MXU configuration, built with --no-synth for a small
array (2x2 int8, the engine's GEMMs and the HBM traffic in Icarus at a small scale): the page parses,
every image and link it references is beside it, its numbers are report.json's, the timing
diagrams' beats are the generated RTL's, at the cycle model's cycles, and the engine and memory
sections hold the RTL's cycles and counters."""

from __future__ import annotations

import json
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


class _Page(HTMLParser):
    """Every referenced file (img src, a href) and the text of the page; fails on a tag closed that
    was not open."""

    def __init__(self):
        super().__init__()
        self.refs, self.text, self.open = [], [], []

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "img":
            self.refs.append(a["src"])
        if tag == "a":
            self.refs.append(a["href"])
        if tag not in ("meta", "img", "br", "hr", "link"):
            self.open.append(tag)

    def handle_endtag(self, tag):
        assert self.open and self.open[-1] == tag, f"</{tag}> closes {self.open[-1:]}"
        self.open.pop()

    def handle_data(self, data):
        self.text.append(data)


#: sweep records in the report's build folder: two of its format (2x2 and 4x4 int8 on the ECP5-85k),
#: one of another (bf16), one on another target
SWEEP = [
    ({"rows": 2, "cols": 2, "fmt": "int8", "stages": 1}, 60, 300),
    ({"rows": 4, "cols": 4, "fmt": "int8", "stages": 2, "backpressure": False}, 160, 2224),
    ({"rows": 2, "cols": 2, "fmt": "bf16", "stages": 1}, 9000, 3000),
    ({"rows": 2, "cols": 2, "fmt": "int8", "stages": 1, "target": "ecp5-25k"}, 61, 301),
]


#: a recorded regression run in the report's build folder: two suites
RUN = [
    {
        "nodeid": "tests/test_mac_cocotb.py::test_mac[verilator-bf16]",
        "outcome": "passed",
        "duration_s": 4.5,
        "seed": 7,
        "simulators": ["verilator"],
        "checked": 3040,
    },
    {
        "nodeid": "tests/test_mac_cocotb.py::test_mac[icarus-bf16]",
        "outcome": "passed",
        "duration_s": 11.0,
        "seed": 9,
        "simulators": ["icarus"],
        "checked": 3040,
    },
    {
        "nodeid": "tests/test_golden.py::test_rne",
        "outcome": "failed",
        "duration_s": 0.5,
        "seed": None,
        "simulators": [],
        "checked": None,
    },
    {
        "nodeid": "tests/test_hbm_axi.py::test_random_traffic[icarus]",
        "outcome": "passed",
        "duration_s": 3.0,
        "seed": 5,
        "simulators": ["icarus"],
        "checked": None,
        "checked_bytes": 51234,
    },
    {
        "nodeid": "tests/test_formal.py::test_stream_rules_proven_by_induction[mxu-2x2-bf16]",
        "outcome": "passed",
        "duration_s": 6.4,
        "seed": None,
        "simulators": [],
        "checked": None,
    },
]


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    import os

    from sim.sweep import fingerprint

    build = tmp_path_factory.mktemp("build")
    (build / "cache" / "sweep").mkdir(parents=True)
    for i, (options, lut4, ff) in enumerate(SWEEP):
        rec = {
            "options": {"block": "mxu", "target": "ecp5-85k", **options},
            "status": "ok",
            "lut4": lut4,
            "ff": ff,
            "dsp": 6,
            "bram": 0,
            "achieved_mhz": 120.5,
            "requested_mhz": 100,
            "gemm": "64x64x64",
            "gemm_gmacs": 0.5,
            "fingerprint": fingerprint(),
        }
        (build / "cache" / "sweep" / f"{i}.json").write_text(json.dumps(rec))
    from sim import test_record

    test_record.write(
        RUN,
        args=["tests/"],
        options={"soak": False, "quick": False, "seed": "random per test"},
        path=build / "verification" / "last_run.json",
    )
    out = tmp_path_factory.mktemp("report") / "r"
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "sim.cli",
            "report",
            "--rows",
            "2",
            "--cols",
            "2",
            "--fmt",
            "int8",
            "--stages",
            "1",
            "--no-synth",
            "--sim",
            "icarus",
            "--hbm-scale",
            "0.001",
            "-o",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "MXU_PROGRESS": "0", "MXU_BUILD_DIR": str(build)},
    )
    assert r.returncode == 0, r.stderr
    return out, json.loads((out / "report.json").read_text()), json.loads(r.stdout), build


@pytest.mark.cocotb
def test_page_parses_and_its_files_are_beside_it(report):
    out, doc, printed, _ = report
    assert sorted(p.name for p in out.iterdir()) == [
        "block.svg",
        "engine.vcd",
        "engine_start.svg",
        "engine_start.wavedrom.json",
        "index.html",
        "lut4_per_pe.svg",
        "report.json",
        "roofline.svg",
        "tile.svg",
        "tile.vcd",
        "tile.wavedrom.json",
        "utilization.svg",
    ]
    page = _Page()
    page.feed((out / "index.html").read_text())
    page.close()
    assert page.open == []
    assert sorted(set(page.refs)) == [
        "block.svg",
        "engine.vcd",
        "engine_start.svg",
        "lut4_per_pe.svg",
        "report.json",
        "roofline.svg",
        "tile.svg",
        "tile.vcd",
        "utilization.svg",
    ]
    for ref in page.refs:
        assert (out / ref).is_file() and (out / ref).stat().st_size > 0, ref
    assert (out / "tile.svg").read_text().startswith("<svg") and "row_1.swap" in (out / "tile.svg").read_text()
    assert printed["timing_matches_model"] is True and printed["page"] == str(out / "index.html")


@pytest.mark.cocotb
def test_the_traced_beats_are_at_the_cycle_models_cycles(report):
    """2x2 int8, L = 1, tiles of 3 and 2 beats: the cycles read from the Icarus trace of the
    generated Verilog, counted from the first weight beat."""
    _, doc, _, _ = report
    t = doc["timing"]
    expected = {"wgt": [0, 1, 4, 5], "act": [3, 4, 5, 7, 8], "out": [6, 7, 8, 10, 11]}
    assert t["rtl"] == expected and t["model"] == expected and t["matches"] is True
    assert (t["tiles"], t["latency_cycles"], t["simulator"]) == ([3, 2], 3, "icarus")
    wave = json.loads((Path(report[0]) / "tile.wavedrom.json").read_text())
    names = [s["name"] for s in wave["signal"]]
    assert names == [
        "clk",
        "wgt__valid",
        "wgt__ready",
        "act__valid",
        "act__ready",
        "act swap",
        "row_0.swap",
        "row_1.swap",
        "out__valid",
        "out__ready",
    ]
    assert all(len(s["wave"]) == t["cycles_shown"] for s in wave["signal"])

    # the diagram's cycle numbers (WaveDrom's tick) are the table's: its cycle 0 is the first weight beat
    def levels(name):
        out = []
        for ch in next(s["wave"] for s in wave["signal"] if s["name"] == name):
            out.append(out[-1] if ch == "." else ch)
        return out

    fires = [i for i, (v, r) in enumerate(zip(levels("wgt__valid"), levels("wgt__ready"))) if v == r == "1"]
    assert [i + wave["head"]["tick"] for i in fires][:4] == expected["wgt"]


@pytest.mark.cocotb
def test_the_pages_numbers_are_report_json(report):
    out, doc, _, _ = report
    page = _Page()
    page.feed((out / "index.html").read_text())
    text = " ".join(page.text)
    c = doc["config"]
    assert c["parameters"]["rows"]["value"] == 2 and c["latency_cycles"] == 3
    assert [p["name"] for p in c["ports"]][:2] == ["clk", "rst"]
    assert [(g["m"], g["k"], g["n"], g["model"], g["scalesim_ws"], g["ideal"]) for g in doc["cycles"]["gemms"]] == [
        (2, 2, 2, 8, 6, 2),
        (8, 8, 8, 134, 192, 128),
        (256, 256, 256, 4194310, 4259840, 4194304),
    ]
    for g in doc["cycles"]["gemms"]:
        assert str(g["model"]) in text and str(g["scalesim_ws"]) in text
    for p in c["ports"]:
        assert p["meaning"] in text
    for m in doc["verification"]["mutation"]:
        assert m["campaign"] in text and f"{m['score_pct']:.1f} %" in text
    tree = doc["hierarchy"]["tree"]
    assert (tree["name"], tree["class"]) == ("mxu", "MXU")
    assert [(r["name"], [p["name"] for p in r["children"]]) for r in tree["children"]] == [
        ("row_0", ["pe_0", "pe_1"]),
        ("row_1", ["pe_0", "pe_1"]),
    ]
    assert [(p["name"], p["dir"], p["bits"]) for p in tree["ports"]] == [
        ("act", "in", 81),
        ("wgt", "in", 16),
        ("out", "out", 64),
    ]
    assert doc["fpga"]["synth"] is None and "Not synthesized for this report" in text
    assert [r["options"]["rows"] for r in doc["fpga"]["sweep"]] == [2]  # this array, this target
    assert [(r["rows"], r["cols"], r["stages"], r["lut4_per_pe"], r["ff_per_pe"]) for r in doc["fpga"]["per_pe"]] == [
        (2, 2, 1, 15.0, 75.0),
        (4, 4, 2, 10.0, 139.0),
    ]  # int8 on the ECP5-85k only: 60 / 4, 160 / 16
    assert doc["fpga"]["per_pe_svg"] == "lut4_per_pe.svg"
    assert "int32, two's-complement wrap-around (never saturates)" in text
    run = doc["verification"]["run"]
    assert run["total"] == {"tests": 5, "passed": 4, "failed": 1, "skipped": 0, "checked": 6080, "checked_bytes": 51234}
    assert run["formal"] == [
        {"proof": "test_stream_rules_proven_by_induction[mxu-2x2-bf16]", "outcome": "passed", "seconds": 6.4}
    ]
    assert "test_stream_rules_proven_by_induction[mxu-2x2-bf16]" in text
    assert run["suites"][1:] == [
        {
            "suite": "tests/test_golden.py",
            "tests": 1,
            "passed": 0,
            "failed": 1,
            "skipped": 0,
            "checked": 0,
            "checked_bytes": 0,
            "simulators": [],
            "seed_count": 0,
            "seeds": [],
            "seconds": 0.5,
        },
        {
            "suite": "tests/test_hbm_axi.py",
            "tests": 1,
            "passed": 1,
            "failed": 0,
            "skipped": 0,
            "checked": 0,
            "checked_bytes": 51234,
            "simulators": ["icarus"],
            "seed_count": 1,
            "seeds": [5],
            "seconds": 3.0,
        },
        {
            "suite": "tests/test_mac_cocotb.py",
            "tests": 2,
            "passed": 2,
            "failed": 0,
            "skipped": 0,
            "checked": 6080,
            "checked_bytes": 0,
            "simulators": ["icarus", "verilator"],
            "seed_count": 2,
            "seeds": [7, 9],
            "seconds": 15.5,
        },
    ]
    assert "icarus, verilator" in text and "6080" in text and "51234" in text and "5 tests, 4 passed, 1 failed" in text


@pytest.mark.cocotb
def test_engine_start_is_traced_from_the_rtl(report):
    """A 4x4x4 GEMM on the 2x2 int8 engine in Icarus: the first cycle of each event after the START
    strobe read from the trace, ``irq`` at the cycle the CYCLES register counts, the DRAM command
    lanes named by command."""
    out, doc, _, _ = report
    s = doc["engine"]["start"]
    assert (s["gemm"], s["rtl_cycles"], s["simulator"]) == ([4, 4, 4], 97, "icarus")
    assert s["events"] == {
        "A read address": 20,
        "W read address": 20,
        "first ACT": 25,
        "first RD": 39,
        "A read data": 57,
        "W read data": 56,
        "weight beat": 58,
        "activation beat": 66,
        "output beat": 69,
        "irq": 97,
    }
    assert s["events"]["irq"] == s["rtl_cycles"]  # the trace and the engine's own count agree
    wave = json.loads((out / "engine_start.wavedrom.json").read_text())
    lanes = {x["name"]: x for x in wave["signal"]}
    assert list(lanes)[:2] == ["clk", "start"] and "pc1 column" in lanes and list(lanes)[-1] == "irq"
    assert all(len(x["wave"]) == s["cycles_shown"] == 69 + 4 for x in wave["signal"])
    assert lanes["pc0 row"]["data"][0] == "ACT" and set(lanes["pc0 column"]["data"]) <= {"RD", "WR"}
    assert lanes["start"]["wave"].startswith("10")


@pytest.mark.cocotb
def test_engine_gemms_against_the_model_and_the_roofline(report):
    """The three GEMMs ran bit-exact; the RTL's CYCLES, at or above the array-bound model; PERF_FEED
    is M * ceil(K/R) * ceil(N/C) and the counters account for every cycle but the set-up; the roofline
    of a 2x2 array on two pseudo-channels: 4 MACs/cycle, 32 B/cycle."""
    out, doc, _, _ = report
    e = doc["engine"]
    assert e["available"] and e["sim"] == "icarus" and e["pseudo_channels"] == 2
    got = [(g["m"], g["k"], g["n"], g["rtl_cycles"], g["model_cycles"]) for g in e["gemms"]]
    assert got == [(2, 32, 32, 1116, 1028), (32, 32, 32, 8279, 8198), (128, 4, 4, 705, 518)]
    for g in e["gemms"]:
        assert g["rtl_cycles"] >= g["model_cycles"]
        assert g["perf"]["feed"] == g["m"] * -(-g["k"] // 2) * -(-g["n"] // 2)
        assert sum(g["perf"].values()) <= g["rtl_cycles"]
        assert g["macs_per_cycle"] == round(g["m"] * g["k"] * g["n"] / g["rtl_cycles"], 3)
    assert e["roofline"] == {"peak_macs_per_cycle": 4, "bandwidth_bytes_per_cycle": 32.0, "ridge_macs_per_byte": 0.125}
    assert [g["limit"] for g in e["gemms"]] == ["array schedule", "array schedule", "memory stalls and set-up"]
    page = _Page()
    page.feed((out / "index.html").read_text())
    text = " ".join(page.text)
    for g in e["gemms"]:
        assert str(g["rtl_cycles"]) in text and str(g["model_cycles"]) in text
    assert (out / "roofline.svg").read_text().lstrip().startswith("<?xml")


@pytest.mark.cocotb
def test_hbm_section_bounds_floors_and_cache(report, monkeypatch):
    """Each traffic pattern's bound is the analytical one of the engine's timing (DRAMsim3 HBM2: tRFC
    260, tREFI 3900, tFAW 30, tRRD_S 4, tRC 48); no read is faster than the DRAM's floor of its bank
    state; a second call with the same inputs reads the cache."""
    from hw.mxu import MXUConfig
    from sim import report_engine

    out, doc, _, build = report
    mem = doc["memory"]
    assert (mem["sim"], mem["scale"], mem["cached"]) == ("icarus", 0.001, False)
    rows = {x["scenario"]: x for x in mem["scenarios"]}
    assert [x["requests"] for x in mem["scenarios"]] == [80, 80, 50, 100, 50, 50, 50]
    # runs this short land above the steady-state bound; the page says by how much, from report.json
    over = [x for x in mem["scenarios"] if x["of_bound"] is not None and x["of_bound"] > 1]
    top = max(over, key=lambda x: x["of_bound"])
    assert f"at most {100 * (top['of_bound'] - 1):.1f} % ({top['scenario']})" in (out / "index.html").read_text()
    refresh = 1 - 260 / 3900
    assert rows["sequential_read"]["bound"] == round(refresh, 4)
    assert rows["random_32B_read"]["bound"] == round(min(1, 4 * 2 / 30, 2 / 4, 16 * 2 / 48) * refresh, 4)
    assert rows["random_64B_read"]["bound"] == round(min(1, 4 * 4 / 30, 4 / 4, 16 * 4 / 48) * refresh, 4)
    assert rows["row_conflict_read"]["bound"] == round(2 / 48 * refresh, 4)
    assert rows["unloaded_mix"]["bound"] is None
    floors = {"hit": 14 + 2, "closed": 14 + 14 + 2, "conflict": 14 + 14 + 14 + 2}
    seen = set()
    for x in mem["scenarios"]:
        for kind, lat in x["read_latency"].items():
            assert lat["floor"] == floors.get(kind)
            if lat["floor"] is not None:
                assert lat["floor"] <= lat["p50"] <= lat["p95"] <= lat["p99"] <= lat["max"], (x["scenario"], kind)
            seen.add(kind)
    assert {"hit", "closed", "conflict"} <= seen
    monkeypatch.setenv("MXU_BUILD_DIR", str(build))
    ecfg, _ = report_engine.engine_config(MXUConfig(2, 2, "int8", "ftz", 1))
    again = report_engine.hbm_figures(ecfg, sim="icarus", scale=0.001)
    assert again["cached"] is True and {**again, "cached": False} == mem


def test_an_array_the_engine_does_not_take_has_no_engine_section(report):
    """A 2x3 array (the engine takes power-of-two columns): the page says why instead of a section."""
    from hw.mxu import MXUConfig
    from sim import report_engine
    from sim.report_html import render

    ecfg, why = report_engine.engine_config(MXUConfig(2, 3, "int8", "ftz", 1))
    assert ecfg is None and why == "cols must be a power of two from 1 to 256; got 3"
    doc = json.loads((report[0] / "report.json").read_text())  # the 2x2 page's figures, engine left out
    doc["engine"] = {"available": False, "reason": why}
    html = render(doc, "t")
    assert "does not take this array: cols must be a power of two" in html and "roofline" not in html
    assert "<h2 id=memory>HBM controller</h2>" in html  # the memory is the engine's default, whatever the array


@pytest.mark.cocotb
def test_page_renders_in_headless_chromium(report, tmp_path):
    """Debian's chromium (Playwright's driver, not its browser download) loads the page: no console
    error, no failed request, every image decoded with a width, a page taller than a screen."""
    import os
    import shutil

    chromium = shutil.which("chromium")
    if chromium is None:
        if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
            pytest.fail("CI=true and chromium is missing (.ci/run installs Debian's chromium)", pytrace=False)
        pytest.skip("chromium is not installed (apt-get install chromium)")
    from playwright.sync_api import sync_playwright

    out = report[0]
    errors = []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium, args=["--no-sandbox"])
        page = browser.new_page(viewport={"width": 1200, "height": 900})
        page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
        page.on("requestfailed", lambda r: errors.append(f"request failed: {r.url}"))
        page.goto((out / "index.html").as_uri())
        page.wait_for_load_state("load")
        images = page.evaluate("Array.from(document.images).map(i => [i.getAttribute('src'), i.naturalWidth])")
        height = page.evaluate("document.body.scrollHeight")
        h1 = page.inner_text("h1")
        page.screenshot(path=str(tmp_path / "page.png"), full_page=True)
        browser.close()
    assert errors == []
    assert sorted(src for src, _ in images) == [
        "block.svg",
        "engine_start.svg",
        "lut4_per_pe.svg",
        "roofline.svg",
        "tile.svg",
        "utilization.svg",
    ]
    assert all(width > 300 for _, width in images), images
    assert height > 900 and h1 == "open-mxu design review: 2x2 int8, 1 pipeline stage"
    assert (tmp_path / "page.png").stat().st_size > 10_000


def test_sweep_records_of_the_configuration_only(tmp_path, monkeypatch):
    """The FPGA section lists the sweep's records of this array on this target, made from the current
    sources: options the sweep left out take MXUConfig's defaults (a point without ``backpressure``
    has it); a record an older design left in the cache (another fingerprint) is not this design's."""
    from hw.mxu import MXUConfig
    from sim.design_report import fpga_figures
    from sim.sweep import fingerprint

    monkeypatch.setenv("MXU_BUILD_DIR", str(tmp_path))
    cache = tmp_path / "cache" / "sweep"
    cache.mkdir(parents=True)
    base = {"block": "mxu", "target": "ecp5-85k", "rows": 4, "cols": 4, "fmt": "int8"}
    records = {
        "a": {**base},
        "b": {**base, "stages": 2, "backpressure": True, "seed": 3},
        "c": {**base, "backpressure": False},
        "d": {**base, "stages": 4},
        "e": {**base, "target": "ecp5-25k"},
        "f": {**base, "rows": 8, "cols": 8},
    }
    for key, options in records.items():
        rec = {
            "options": options,
            "status": "ok",
            "lut4": ord(key),
            "ff": 1,
            "dsp": 16,
            "bram": 0,
            "achieved_mhz": 100.0,
            "requested_mhz": 100,
            "gemm": "8x8x8",
            "gemm_gmacs": 1.0,
            "fingerprint": fingerprint(),
        }
        (cache / f"{key}.json").write_text(json.dumps(rec))
    stale = json.loads((cache / "a.json").read_text())
    (cache / "h.json").write_text(json.dumps({**stale, "lut4": 999, "fingerprint": "an older design"}))
    (cache / "g.json").write_text(json.dumps({"options": base, "status": "does-not-fit", "error": "x"}))
    got = fpga_figures(MXUConfig(4, 4, "int8", "ftz", 2), "ecp5-85k")
    assert got["synth"] is None
    assert [r["lut4"] for r in got["sweep"]] == [ord("a"), ord("b")]
