"""Sphinx directives that write the manual's tables from the project's own sources.

Nothing these tables show is typed into a page: the register map comes from ``hw.engine.csr``, the
error codes from ``hw.engine.ERRORS``, the JEDEC rules from ``verif.jedec_checker.RULES``, the timing
sets from ``hw.hbm.config.TIMING_PRESETS``, the presets from ``hw.mxu.PRESETS``, the FPGA targets
from ``sim.synth.TARGETS`` and every measured figure from ``bench/results/*.json`` through
``bench.tables``.

Directives (MyST: ```` ```{mxu-table} gemm bench/results/gemm_bench.json ```` ````)::

    mxu-table KIND SOURCE     a bench.tables table and the file(s) it came from
    mxu-reference NAME        registers | errors | jedec-rules | jedec-other | timing-sets | presets | targets
                              | pod-registers | pod-errors
"""

from __future__ import annotations

from docutils.statemachine import StringList
from sphinx.util.docutils import SphinxDirective

from bench import tables


def _md(header, rows) -> str:
    return tables.to_markdown(tables.Table(header, [[str(c) for c in r] for r in rows]))


def _reference(name: str) -> str:
    if name == "registers":
        from hw.engine.csr import register_table_markdown

        return register_table_markdown()
    if name == "errors":
        from hw.engine.engine import ERRORS

        return _md(["code", "name", "meaning"], [(c, n, m) for c, (n, m) in ERRORS.items()])
    if name == "jedec-rules":
        from verif.jedec_checker import RULES

        def cmds(s):
            return ", ".join(sorted(c.name for c in s))

        return _md(
            ["rule", "previous command", "next command", "scope", "minimum distance (cycles)"],
            [(r.name, cmds(r.prev), cmds(r.next), r.scope.value.replace("_", " "), r.formula) for r in RULES],
        )
    if name == "jedec-other":
        from verif.jedec_checker import OTHER_RULES

        return _md(["check", "rule"], OTHER_RULES.items())
    if name == "timing-sets":
        from hw.hbm.config import TIMING_PRESETS

        fields = [
            "CL",
            "CWL",
            "tRCD",
            "tRP",
            "tRAS",
            "tRC",
            "tCCD_S",
            "tCCD_L",
            "tRRD_S",
            "tRRD_L",
            "tFAW",
            "tWR",
            "tWTR_S",
            "tWTR_L",
            "tRTP",
            "tRTW",
            "tRFC",
            "tREFI",
            "burst_cycles",
        ]
        return _md(["set"] + fields, [[k] + [getattr(t, f) for f in fields] for k, t in TIMING_PRESETS.items()])
    if name == "presets":
        from hw.mxu import PRESETS

        return _md(
            ["preset", "rows", "cols", "fmt", "subnormals", "stages"],
            [(k, c.rows, c.cols, c.fmt, c.subnormals, c.stages) for k, c in PRESETS.items()],
        )
    if name == "targets":
        from sim.synth import TARGETS

        keys = ["lut4", "ff", "carry", "lutram", "dsp", "bram", "spram", "io"]
        return _md(
            ["--target", "board", "part", "nextpnr device", "clock (MHz)"] + keys,
            [
                (t.name, t.board, t.part, " ".join(t.nextpnr_args), t.board_clock_mhz)
                + tuple(t.capacity.get(k, "-") for k in keys)
                for t in TARGETS.values()
            ],
        )
    if name == "pod-registers":
        from hw.pod.csr import collective_register_table

        return collective_register_table()
    if name == "pod-errors":
        from hw.pod import ERRORS

        return _md(["code", "meaning"], ERRORS.items())
    raise ValueError(f"mxu-reference: unknown table {name!r}")


class _MarkdownDirective(SphinxDirective):
    has_content = False

    def _parse(self, text: str):
        node_list = []
        from docutils import nodes

        container = nodes.container()
        self.state.nested_parse(
            StringList(text.splitlines(), source=self.get_source_info()[0]), self.content_offset, container
        )
        node_list.extend(container.children)
        return node_list


class TableDirective(_MarkdownDirective):
    """``mxu-table KIND SOURCE``: a measured table and the JSON it was built from."""

    required_arguments = 2

    def run(self):
        kind, source = self.arguments
        table = tables.build(kind, source)
        for path in table.sources:
            self.env.note_dependency(str(tables.ROOT / path))
        names = ", ".join(f"`{p}`" for p in table.sources) if len(table.sources) <= 2 else f"`{source}`"
        derived = "".join(f" {col}: {rule}." for col, rule in table.derived.items())
        return self._parse(tables.to_markdown(table) + f"\n\nFrom {names}.{derived}\n")


class ReferenceDirective(_MarkdownDirective):
    """``mxu-reference NAME``: a table generated from the code (register map, JEDEC rules, ...)."""

    required_arguments = 1

    def run(self):
        return self._parse(_reference(self.arguments[0]))


def setup(app):
    app.add_directive("mxu-table", TableDirective)
    app.add_directive("mxu-reference", ReferenceDirective)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
