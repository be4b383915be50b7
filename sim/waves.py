"""Reading a simulation's VCD at clock edges and writing WaveDrom wave strings: the timing diagrams
of ``mxu report`` (:mod:`sim.design_report`, :mod:`sim.report_engine`) are drawn from real traces."""

from __future__ import annotations

from pathlib import Path

__all__ = ["sample", "wave"]


def sample(vcd_path: Path, names: dict[str, str], clock: str) -> list[dict[str, int | None]]:
    """Values of the VCD variables ``names`` (label -> dotted hierarchical name) at every rising edge
    of ``clock`` (a dotted name), taken before the edge's updates; X or Z read as None."""
    from vcd.reader import TokenKind, tokenize

    want = {**names, "__clk": clock}
    ident, scope, values, rows = {}, [], {}, []
    before, rose = {}, False  # the values before this time step; whether the clock rose in it

    def end_step():
        if rose:
            rows.append({k: before.get(k) for k in names})

    with open(vcd_path, "rb") as f:
        for tok in tokenize(f):
            kind, data = tok.kind, tok.data
            if kind is TokenKind.SCOPE:
                scope.append(data.ident)
            elif kind is TokenKind.UPSCOPE:
                scope.pop()
            elif kind is TokenKind.VAR:
                full = ".".join([*scope, data.reference])
                for label, name in want.items():
                    if full == name:
                        ident.setdefault(data.id_code, []).append(label)
            elif kind is TokenKind.CHANGE_TIME:
                end_step()
                before, rose = dict(values), False
            elif kind in (TokenKind.CHANGE_SCALAR, TokenKind.CHANGE_VECTOR):
                for label in ident.get(data.id_code, ()):
                    v = data.value
                    try:
                        new = int(v) if isinstance(v, int) else int(str(v), 2)
                    except ValueError:
                        new = None
                    if label == "__clk" and new == 1 and before.get("__clk") == 0:
                        rose = True
                    values[label] = new
        end_step()
    missing = sorted(set(want) - {lab for labs in ident.values() for lab in labs})
    if missing:
        raise ValueError(f"{vcd_path}: no variable for {', '.join(want[m] for m in missing)}")
    return rows


def wave(bits: list[int | None]) -> str:
    """A WaveDrom wave string of one-bit samples ('.' repeats, 'x' unknown)."""
    out, prev = [], object()
    for b in bits:
        ch = "x" if b is None else str(b)
        out.append("." if ch == prev else ch)
        prev = ch
    return "".join(out)
