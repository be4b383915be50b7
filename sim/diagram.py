"""Block diagrams generated from an elaborated Amaranth design: the component hierarchy as nested
boxes, each component's signature members (streams and plain ports) as arrows on its edges. No
drawing by hand: the boxes are the design's submodules, named as in the Verilog."""

from __future__ import annotations

import html

__all__ = ["hierarchy", "block_svg"]

#: at most this many children of one box are drawn (the rest are counted in a label)
MAX_CHILDREN = 16


def _ports(component) -> list[dict]:
    """The signature members of ``component`` (a ``wiring.Component``): name, direction (in / out
    as the component sees it), kind (stream or port) and width in bits (a stream's payload)."""
    from amaranth.hdl import Shape
    from amaranth.lib import stream, wiring

    out = []
    sig = getattr(component, "signature", None)
    if not isinstance(sig, wiring.Signature):
        return out
    for name, m in sig.members.items():
        direction = "in" if m.flow == wiring.In else "out"
        if m.is_signature and isinstance(m.signature, stream.Signature):
            width = Shape.cast(m.signature.members["payload"].shape).width
            out.append({"name": name, "dir": direction, "kind": "stream", "bits": width})
        elif m.is_port:
            out.append({"name": name, "dir": direction, "kind": "port", "bits": Shape.cast(m.shape).width})
        else:
            out.append({"name": name, "dir": direction, "kind": "interface", "bits": None})
    return out


def hierarchy(component, name: str = "top", depth: int = 3) -> dict:
    """The tree of ``component``'s submodules to ``depth`` levels: ``{"name", "class", "ports",
    "children"}``, from ``Fragment.get`` (the design as Amaranth elaborates it)."""
    from amaranth.hdl import Fragment

    def walk(frag, obj, nm, d):
        node = {"name": nm, "class": type(obj).__name__, "ports": _ports(obj), "children": []}
        if d > 1:
            for sub, sub_name, *_ in frag.subfragments:
                origin = (sub.origins or (None,))[0]
                node["children"].append(walk(sub, origin, sub_name, d - 1))
        return node

    return walk(Fragment.get(component, None), component, name, depth)


def _e(x) -> str:
    return html.escape(str(x))


def _size(node: dict, level: int) -> tuple[int, int]:
    """Width and height of a node's box: children side by side at odd levels, stacked at even ones."""
    kids = node["children"][:MAX_CHILDREN]
    if not kids:
        return 90, 44
    sizes = [_size(k, level + 1) for k in kids]
    more = 18 if len(node["children"]) > MAX_CHILDREN else 0
    if level % 2 == 0:  # stacked
        return max(w for w, _ in sizes) + 24, sum(h for _, h in sizes) + 10 * (len(sizes) - 1) + 40 + more
    return sum(w for w, _ in sizes) + 10 * (len(sizes) - 1) + 24, max(h for _, h in sizes) + 40 + more


def block_svg(tree: dict) -> str:
    """An SVG of ``tree`` (:func:`hierarchy`): nested boxes labelled ``name: Class``, the top's input
    streams and ports as arrows on the left, its outputs on the right, with their widths in bits."""
    parts = []

    def draw(node, x, y, level):
        w, h = _size(node, level)
        fill = ("#eef3fb", "#fdf6e8", "#eef8ee", "#f6eef8")[level % 4]
        parts.append(f'<rect x="{x}" y="{y}" width="{w}" height="{h}" rx="4" fill="{fill}" stroke="#456"/>')
        parts.append(f'<text x="{x + 6}" y="{y + 15}" font-size="11">{_e(node["name"])}: '
                     f'<tspan font-weight="bold">{_e(node["class"])}</tspan></text>')
        kids = node["children"][:MAX_CHILDREN]
        cx, cy = x + 12, y + 26
        for k in kids:
            kw, kh = _size(k, level + 1)
            draw(k, cx, cy, level + 1)
            if level % 2 == 0:
                cy += kh + 10
            else:
                cx += kw + 10
        if len(node["children"]) > MAX_CHILDREN:
            parts.append(f'<text x="{x + 12}" y="{y + h - 6}" font-size="10">... and '
                         f'{len(node["children"]) - MAX_CHILDREN} more</text>')
        return w, h

    ins = [p for p in tree["ports"] if p["dir"] == "in"]
    outs = [p for p in tree["ports"] if p["dir"] == "out"]
    margin = 170
    w, h = _size(tree, 0)
    draw(tree, margin, 10, 0)
    for side, ports in (("in", ins), ("out", outs)):
        for i, p in enumerate(ports):
            yy = 40 + i * max(24, (h - 40) // max(1, len(ports)))
            label = f"{p['name']} ({p['kind']}, {p['bits']} b)" if p["bits"] is not None else p["name"]
            if side == "in":
                parts.append(f'<line x1="10" y1="{yy}" x2="{margin}" y2="{yy}" stroke="#236" marker-end="url(#a)"/>')
                parts.append(f'<text x="12" y="{yy - 4}" font-size="11">{_e(label)}</text>')
            else:
                x0 = margin + w
                parts.append(f'<line x1="{x0}" y1="{yy}" x2="{x0 + margin - 10}" y2="{yy}" stroke="#236" '
                             f'marker-end="url(#a)"/>')
                parts.append(f'<text x="{x0 + 4}" y="{yy - 4}" font-size="11">{_e(label)}</text>')
    head = (f'<svg xmlns="http://www.w3.org/2000/svg" width="{w + 2 * margin}" height="{h + 20}" '
            f'font-family="sans-serif"><defs><marker id="a" markerWidth="8" markerHeight="8" refX="7" refY="4" '
            f'orient="auto"><path d="M0,0 L8,4 L0,8 z" fill="#236"/></marker></defs>')
    return head + "".join(parts) + "</svg>"
