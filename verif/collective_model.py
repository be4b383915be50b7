"""Reference schedule and cost model of the pod's collective engine (``hw.pod``).

:func:`ring_steps` is the command sequence :class:`hw.pod.schedule.RingSchedule` emits, in Python
(the schedule's unit test compares them command for command). :func:`collective_cycles` is a
cost model of a whole collective built on it: per-hop latency, link bandwidth with the packet
framing, message sizes and ring size. :func:`ring_formula` is the textbook bound it is compared
with (ASTRA-sim's ring, the JAX scaling book's ``V / W_ici`` per all-gather or reduce-scatter).
"""

from __future__ import annotations

from dataclasses import dataclass

from hw.pod.config import HBM_BEAT_BYTES, CollectiveConfig
from verif.ici_model import packets_of

__all__ = ["Step", "ring_steps", "collective_cycles", "ring_formula", "OPS"]

OPS = ("all_gather", "reduce_scatter", "all_reduce")


@dataclass(frozen=True)
class Step:
    """One command: ``rows`` rows from row ``row`` (of the whole array), HBM beats ``col`` ..
    ``col + hbm_beats - 1`` of each, ``beats`` link beats; what it reads, takes, sends, writes."""
    row: int
    rows: int
    col: int
    hbm_beats: int
    row_end: bool
    beats: int
    local: bool
    remote: bool
    tx: bool
    hbm: bool


def _split(total: int, parts: int) -> list[int]:
    return [total // parts + (1 if j < total % parts else 0) for j in range(parts)]


def ring_steps(cfg: CollectiveConfig, op: str, rows: int, row_bytes: int, nodes: int, rank: int, *,
               bidirectional: bool = False, ccw: bool = False) -> list[Step]:
    """The commands of one direction of one node, in order (see :class:`hw.pod.schedule.RingSchedule`).

    Raises:
        ValueError: unknown ``op``.
    """
    if op not in OPS:
        raise ValueError(f"op must be one of {', '.join(OPS)}; got {op!r}")
    if nodes <= 1 or rows == 0 or (ccw and not bidirectional):
        return []
    sbh = cfg.slice_hbm_beats
    row_beats = -(-row_bytes // HBM_BEAT_BYTES)
    q, rem = divmod(rows, nodes)
    widths = _split(row_beats, -(-row_beats // sbh))
    nr = sbh // max(widths)
    big = q + (rem != 0)
    n_max = big // 2 if ccw else ((big + 1) // 2 if bidirectional else big)
    if n_max == 0:
        return []
    heights = _split(n_max, -(-n_max // nr))
    phases = 2 * nodes - 1 if op == "all_reduce" else nodes
    steps = []
    r_off = 0
    for height in heights:
        o_off = 0
        for width in widths:
            for p in range(phases):
                rs = op == "reduce_scatter" or (op == "all_reduce" and p < nodes)
                pa = p - nodes + 1 if op == "all_reduce" else p
                step = p + 1 if rs else pa
                chunk = (rank + step if ccw else rank - step) % nodes
                if rs:
                    flags = (True, p != 0, p != nodes - 1 or op == "all_reduce", p == nodes - 1)
                else:
                    flags = (pa == 0, pa != 0, pa != nodes - 1, pa != 0)
                c_start, c_cnt = chunk * q + min(chunk, rem), q + (chunk < rem)
                half = (c_cnt + 1) // 2
                first, part = ((c_start + half, c_cnt - half) if ccw
                               else (c_start, half if bidirectional else c_cnt))
                if part <= r_off:
                    continue
                t_rows = min(height, part - r_off)
                steps.append(Step(first + r_off, t_rows, o_off, width, o_off + width == row_beats,
                                  t_rows * width * cfg.words, *flags))
            o_off += width
        r_off += height
    return steps


def _wire(cfg: CollectiveConfig, beats: int) -> int:
    """Wire cycles of a message: its beats, and a header and a CRC beat per packet."""
    return beats + 2 * -(-beats // cfg.link.packet_beats)


def collective_cycles(cfg: CollectiveConfig, op: str, rows: int, row_bytes: int, nodes: int, *,
                      bidirectional: bool = False) -> int:
    """Modelled cycles from ``start`` to the last node's done.

    A max-plus recurrence over each direction's packets, with the link's bounds of
    :mod:`verif.ici_model`: the combiner takes a beat a cycle once its inputs are there (a
    neighbour's packet is readable a cycle after its CRC beat has crossed the wire, behind the
    packet before; the local slice is always ready); a result reaches the transmitter
    ``latency_cycles + 2`` cycles later; a packet leaves a cycle after it is stored whole, behind
    the packet before (header, payload, CRC) and once the packet ``replay_packets`` before it is
    acknowledged. A step that takes the link and writes memory without sending (an all-gather's
    last phase, or a reduce-scatter's with the local slice added) drains beside the next send-only
    one; a step that takes the link or writes memory waits until the drain is written. The ring's
    dependencies are circular, so the recurrence is iterated to its fixed point. Credits are not
    modelled (the receive buffers hold two slices and a packet). Constants: :data:`SETUP` cycles of
    schedule set-up, :data:`TAIL` from a last beat to done.
    """
    end = SETUP
    for ccw in (False, True):
        plans = [ring_steps(cfg, op, rows, row_bytes, nodes, r, bidirectional=bidirectional, ccw=ccw)
                 for r in range(nodes)]
        if any(plans):
            end = max(end, _direction_cycles(cfg, plans, ccw))
    return end


def _direction_cycles(cfg: CollectiveConfig, plans: list[list[Step]], ccw: bool) -> int:
    nodes, link, D = len(plans), cfg.link, cfg.latency_cycles
    lat, P = link.latency_cycles, link.replay_packets
    sent: list[list[list[int]]] = [[] for _ in range(nodes)]   # per node, per message: readable cycle per packet
    for _ in range(4 * nodes + 4):
        new: list[list[list[int]]] = [[] for _ in range(nodes)]
        end = 0
        for i in range(nodes):
            prev = (i + 1) % nodes if ccw else (i - 1) % nodes
            src = new[prev] if prev < i else sent[prev]
            free, got, drain = SETUP, 0, 0
            headers, acked, last_end = [], [], 0       # this node's transmitter
            for s in plans[i]:
                lens = packets_of([s.beats], link.packet_beats)
                t = free if not (s.remote or s.hbm) else max(free, drain)
                done_at = []                           # cycle each packet's last beat leaves the combiner
                if s.remote:
                    ready = src[got] if got < len(src) else [0] * len(lens)
                    got += 1
                    if not (s.hbm and not s.tx):
                        for n, r in zip(lens, ready):
                            t = max(t, r) + n
                            done_at.append(t)
                    else:                              # drained beside the next step
                        d = max(free + D + 2, drain)
                        for n, r in zip(lens, ready):
                            d = max(d, r) + n
                        drain = d + (D + 2 if s.local else 0)   # a sum: through the adders first
                        end = max(end, drain + TAIL)
                        continue
                else:
                    for n in lens:
                        t += n
                        done_at.append(t)
                free = t
                end = max(end, free + D + TAIL)
                if not s.tx:
                    continue
                readable = []
                for n, t_done in zip(lens, done_at):
                    j = len(headers)
                    stored = t_done + D + 2
                    if j >= P:
                        stored = max(stored, acked[j - P] + n)
                    h = max(stored + 1, last_end)
                    headers.append(h)
                    last_end = h + n + 2
                    crc_rx = h + n + 1 + lat
                    acked.append(crc_rx + 2 + lat)
                    readable.append(crc_rx + 1)
                new[i].append(readable)
        if new == sent:
            return end
        sent = new
    return end


#: cycles from ``start`` to the first command (the schedule's six serial divisions and decode)
SETUP = 6 * 17 + 5
#: cycles from a step's last beat leaving the adders to the engine's done (write response)
TAIL = 8


def ring_formula(cfg: CollectiveConfig, op: str, rows: int, row_bytes: int, nodes: int, *,
                 bidirectional: bool = False) -> float:
    """The textbook ring cost, cycles: each link carries ``(N - 1) / N`` of the array per
    all-gather or reduce-scatter (twice for an all-reduce), at ``beat_bytes`` per cycle, halved on a
    bidirectional ring, plus one hop latency per step; no framing, no set-up."""
    if nodes <= 1:
        return 0.0
    volume = rows * row_bytes * (nodes - 1) / nodes * (2 if op == "all_reduce" else 1)
    hops = (nodes - 1) * (2 if op == "all_reduce" else 1)
    return volume / cfg.link.beat_bytes / (2 if bidirectional else 1) + hops * cfg.link.latency_cycles
