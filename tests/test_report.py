"""``mxu report``: the design-review page of one MXU configuration, built with --no-synth for a small
array: the page parses, every image and link it references is beside it, its numbers are
report.json's, and the timing diagram's beats are the generated RTL's, at the cycle model's cycles."""

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


#: sweep records in the report's build folder: two of its format (2x3 and 4x4 int8 on the ECP5-85k),
#: one of another (bf16), one on another target
SWEEP = [
    ({"rows": 2, "cols": 3, "fmt": "int8", "stages": 1}, 60, 300),
    ({"rows": 4, "cols": 4, "fmt": "int8", "stages": 2, "backpressure": False}, 160, 2224),
    ({"rows": 2, "cols": 3, "fmt": "bf16", "stages": 1}, 9000, 3000),
    ({"rows": 2, "cols": 3, "fmt": "int8", "stages": 1, "target": "ecp5-25k"}, 61, 301),
]


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    import os

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
        }
        (build / "cache" / "sweep" / f"{i}.json").write_text(json.dumps(rec))
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
            "3",
            "--fmt",
            "int8",
            "--stages",
            "1",
            "--no-synth",
            "-o",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "MXU_PROGRESS": "0", "MXU_BUILD_DIR": str(build)},
    )
    assert r.returncode == 0, r.stderr
    return out, json.loads((out / "report.json").read_text()), json.loads(r.stdout)


@pytest.mark.cocotb
def test_page_parses_and_its_files_are_beside_it(report):
    out, doc, printed = report
    assert sorted(p.name for p in out.iterdir()) == [
        "block.svg",
        "index.html",
        "lut4_per_pe.svg",
        "report.json",
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
        "lut4_per_pe.svg",
        "report.json",
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
    """2x3 int8, L = 1, tiles of 3 and 2 beats: the cycles read from the Icarus trace of the
    generated Verilog, counted from the first weight beat."""
    _, doc, _ = report
    t = doc["timing"]
    expected = {"wgt": [0, 1, 5, 6], "act": [3, 4, 5, 8, 9], "out": [7, 8, 9, 12, 13]}
    assert t["rtl"] == expected and t["model"] == expected and t["matches"] is True
    assert (t["tiles"], t["latency_cycles"], t["simulator"]) == ([3, 2], 4, "icarus")
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


@pytest.mark.cocotb
def test_the_pages_numbers_are_report_json(report):
    out, doc, _ = report
    page = _Page()
    page.feed((out / "index.html").read_text())
    text = " ".join(page.text)
    c = doc["config"]
    assert c["parameters"]["rows"]["value"] == 2 and c["latency_cycles"] == 4
    assert [p["name"] for p in c["ports"]][:2] == ["clk", "rst"]
    assert [(g["m"], g["k"], g["n"], g["model"], g["scalesim_ws"], g["ideal"]) for g in doc["cycles"]["gemms"]] == [
        (2, 2, 3, 9, 7, 2),
        (8, 8, 12, 135, 208, 128),
        (256, 256, 256, 2818055, 2873088, 2796203),
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
        ("row_0", ["pe_0", "pe_1", "pe_2"]),
        ("row_1", ["pe_0", "pe_1", "pe_2"]),
    ]
    assert [(p["name"], p["dir"], p["bits"]) for p in tree["ports"]] == [
        ("act", "in", 113),
        ("wgt", "in", 24),
        ("out", "out", 96),
    ]
    assert doc["fpga"]["synth"] is None and "Not synthesized for this report" in text
    assert [r["options"]["rows"] for r in doc["fpga"]["sweep"]] == [2]  # this array, this target
    assert [(r["rows"], r["cols"], r["stages"], r["lut4_per_pe"], r["ff_per_pe"]) for r in doc["fpga"]["per_pe"]] == [
        (2, 3, 1, 10.0, 50.0),
        (4, 4, 2, 10.0, 139.0),
    ]  # int8 on the ECP5-85k only: 60 / 6, 160 / 16
    assert doc["fpga"]["per_pe_svg"] == "lut4_per_pe.svg"
    assert "int32, two's-complement wrap-around (never saturates)" in text


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
    assert sorted(src for src, _ in images) == ["block.svg", "lut4_per_pe.svg", "tile.svg", "utilization.svg"]
    assert all(width > 300 for _, width in images), images
    assert height > 900 and h1 == "open-mxu design review: 2x3 int8 (ftz), 1 pipeline stage"
    assert (tmp_path / "page.png").stat().st_size > 10_000


def test_sweep_records_of_the_configuration_only(tmp_path, monkeypatch):
    """The FPGA section lists the sweep's records of this array on this target: options the sweep
    left out take MXUConfig's defaults (a point without ``backpressure`` has it)."""
    from hw.mxu import MXUConfig
    from sim.design_report import fpga_figures

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
        }
        (cache / f"{key}.json").write_text(json.dumps(rec))
    (cache / "g.json").write_text(json.dumps({"options": base, "status": "does-not-fit", "error": "x"}))
    got = fpga_figures(MXUConfig(4, 4, "int8", "ftz", 2), "ecp5-85k")
    assert got["synth"] is None
    assert [r["lut4"] for r in got["sweep"]] == [ord("a"), ord("b")]
