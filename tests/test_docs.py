"""The manual builds without warnings, and every table it shows equals the JSON it comes from.

The manual's measured tables are generated at build time (``mxu-table`` directives, ``bench.tables``).
These tests check them independently of the generator: every number a row prints must be a value of
one record of the JSON file (copied or rounded for display, not invented), a derived column is
recomputed from the JSON here, and the built HTML page must hold each row exactly.
"""

from __future__ import annotations

import html
import json
import re
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path

import pytest

from bench import tables

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
DIRECTIVE = re.compile(r"```\{mxu-table\}\s+(\S+)\s+(\S+)\s*\n```")


def directives() -> list[tuple[str, str, str]]:
    """(page, kind, source) of every mxu-table directive in the manual."""
    out = []
    for page in sorted(DOCS.rglob("*.md")):
        for kind, source in DIRECTIVE.findall(page.read_text()):
            out.append((str(page.relative_to(DOCS).with_suffix("")), kind, source))
    return out


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> Path:
    """The manual built into a temporary folder with warnings as errors (as ``make docs``)."""
    out = tmp_path_factory.mktemp("docs")
    proc = subprocess.run(
        [sys.executable, "-m", "sphinx", "-W", "--keep-going", "-q", "-b", "html", str(DOCS), str(out)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=600,
    )
    assert proc.returncode == 0, f"sphinx-build failed:\n{proc.stdout}\n{proc.stderr}"
    return out


class _Rows(HTMLParser):
    """Collects the text of every table row of an HTML page as a list of cell strings."""

    def __init__(self):
        super().__init__()
        self.rows, self._row, self._cell = [], None, None

    def handle_starttag(self, tag, attrs):
        if tag == "tr":
            self._row = []
        elif tag in ("td", "th") and self._row is not None:
            self._cell = []

    def handle_endtag(self, tag):
        if tag in ("td", "th") and self._cell is not None:
            self._row.append(" ".join("".join(self._cell).split()))
            self._cell = None
        elif tag == "tr" and self._row is not None:
            self.rows.append(self._row)
            self._row = None

    def handle_data(self, data):
        if self._cell is not None:
            self._cell.append(data)


def html_rows(path: Path) -> list[list[str]]:
    p = _Rows()
    p.feed(path.read_text())
    return p.rows


# not a number: digits inside a name, Yosys's "crc$56" included
NUMBER = re.compile(r"(?<![A-Za-z0-9_.$])(\d[\d,]*(?:\.\d+)?)(%?)(?![A-Za-z0-9_])")


def numbers_in(cell: str) -> list[tuple[float, int, bool]]:
    """(value, decimals, is_percent) of each number a cell shows; '8x8' counts as 8 and 8."""
    cell = re.sub(r"(?<=\d)x(?=\d)", " ", cell)
    out = []
    for num, pct in NUMBER.findall(cell):
        num = num.replace(",", "")
        out.append((float(num), len(num.split(".")[1]) if "." in num else 0, pct == "%"))
    return out


def json_numbers(x) -> list[float]:
    if isinstance(x, bool):
        return []
    if isinstance(x, int | float):
        return [float(x)]
    if isinstance(x, dict):
        return [v for item in x.values() for v in json_numbers(item)]
    if isinstance(x, list):
        return [v for item in x for v in json_numbers(item)]
    if isinstance(x, str) and re.fullmatch(r"\d+(x\d+)*", x):  # an array or shape name, "8x8"
        return [float(v) for v in x.split("x")]
    return []


def records(x, depth=0) -> list:
    """Every dict below the root of a JSON tree (a row must come from one of them)."""
    out = [x] if isinstance(x, dict) and depth > 0 else []
    children = x.values() if isinstance(x, dict) else x if isinstance(x, list) else []
    for c in children:
        out += records(c, depth + 1)
    return out


def shown(value: float, decimals: int, percent: bool, candidates: list[float]) -> bool:
    for v in candidates:
        scaled = [v, 100 * v] if percent else [v]
        if any(round(s, decimals) == value for s in scaled):
            return True
    return False


def test_every_measured_page_has_tables():
    pages = {p for p, _, _ in directives()}
    assert {
        "performance/engine",
        "performance/mxu",
        "performance/arithmetic",
        "performance/hbm",
        "performance/fpga",
    } <= pages


@pytest.mark.parametrize(("page", "kind", "source"), directives(), ids=lambda x: str(x))
def test_table_numbers_come_from_one_json_record(page, kind, source):
    table = tables.build(kind, source)
    assert table.rows, f"{kind} {source}: no rows"
    data = [json.loads((ROOT / p).read_text()) for p in table.sources]
    many = TABLES_MANY[kind]
    candidates = [json_numbers(r) for d in data for r in ([d] if many else records(d))]
    skip = {table.header.index(c) for c in table.derived} | ({table.header.index("report")} if many else set())
    for row in table.rows:
        shown_numbers = [n for i, cell in enumerate(row) if i not in skip for n in numbers_in(cell)]
        assert any(all(shown(v, d, p, cand) for v, d, p in shown_numbers) for cand in candidates), (
            f"{page}: row {row} of {kind} shows a number that no single record of {source} holds"
        )


TABLES_MANY = {k: many for k, (_, many) in tables.TABLES.items()}


def test_gemm_setup_column_is_cycles_minus_counters():
    """The one derived column, recomputed from the JSON."""
    for _, kind, source in directives():
        if kind != "gemm_perf":
            continue
        table = tables.build(kind, source)
        col = table.header.index("set-up")
        recs = json.loads((ROOT / source).read_text())["records"]
        assert len(recs) == len(table.rows)
        for rec, row in zip(recs, table.rows):
            assert int(row[col].replace(",", "")) == rec["cycles"] - sum(rec["perf"].values())


def test_a_wrong_number_is_caught():
    """The record check can fail: a cycle count off by one is in no record."""
    table = tables.build("gemm", "bench/results/gemm_bench.json")
    data = json.loads((ROOT / "bench/results/gemm_bench.json").read_text())
    row = list(table.rows[0])
    row[3] = f"{int(row[3].replace(',', '')) + 1:,}"
    nums = [n for cell in row for n in numbers_in(cell)]
    assert not any(all(shown(v, d, p, json_numbers(r)) for v, d, p in nums) for r in records(data))


def test_built_pages_hold_every_generated_row(built):
    for page, kind, source in directives():
        rows = html_rows(built / f"{page}.html")
        table = tables.build(kind, source)
        for row in [table.header] + table.rows:
            want = [" ".join(html.unescape(c).split()) for c in row]
            assert want in rows, f"{page}.html lacks the row {want} of {kind} {source}"


def test_reference_tables_are_generated_from_the_code(built):
    """The register map, error codes and JEDEC rules on the design pages come from the code."""
    from hw.engine.csr import REGISTERS
    from hw.engine.engine import ERRORS
    from verif.jedec_checker import RULES

    engine = html_rows(built / "engine.html")
    for r in REGISTERS:
        assert any(row[:3] == [f"0x{r.offset:02X}", r.name, r.access] for row in engine), r.name
    for code, (name, _) in ERRORS.items():
        assert any(row[:2] == [str(code), name] for row in engine), name
    hbm = html_rows(built / "hbm.html")
    for rule in RULES:
        assert any(row[0] == rule.name and row[-1] == rule.formula for row in hbm), rule.name


def test_command_reference_lists_every_command(built):
    from sim.cli import COMMANDS

    headings = re.findall(r"<h3>([^<]+)", (built / "cli.html").read_text())
    assert set(COMMANDS) <= set(headings), headings
