"""Traffic patterns, analytical bounds and latency floors of one HBM2 pseudo-channel controller: the
definitions ``bench/hbm_bench.py`` and ``mxu report`` measure against.

* efficiency = busy data-bus cycles (``burst_cycles`` per RD/WR) / cycles from the first accepted
  request to the end of the last data burst. Requests are offered back to back and responses are
  always taken, so the controller, not the traffic source, sets the pace. REFs still owed at the end
  of a run (up to ``max_refresh_postpone`` may legally be) are charged at tRFC each
  (:func:`summarize`), so a run cannot look better than the steady state by ending in refresh debt.
* bounds (each times the refresh factor 1 - tRFC/tREFI): sequential 1; random 32 B (every access
  opens a row) ``min(1, 4*bc/tFAW, bc/tRRD_S, banks*bc/tRC)``; random 64 B the same with two bursts
  per ACT; single-bank row conflicts ``bc/tRC`` per burst.
* latency: request accepted -> read response taken (reads), by the bank state the request found on
  arrival (row hit, closed bank, row conflict; ``refresh_blocked`` when a PREA/REF was issued while
  it waited). Its floor is the DRAM's own: CL + bc for a hit, + tRCD for a closed bank, + tRP for a
  conflict (JEDEC JESD235 timing parameters); the difference is the controller's pipeline and queueing.
"""

from __future__ import annotations

import numpy as np

from hw.hbm.config import HBMConfig

__all__ = ["UNLOADED", "scenarios", "efficiency_bound", "read_latency_floor", "read_latency_percentiles",
           "summarize"]

#: scenarios that offer one request at a time: their latencies are the controller's own, not queueing
UNLOADED = frozenset({"unloaded_mix"})


def scenarios(scale: float) -> dict[str, list[dict]]:
    """The traffic patterns (segments of :func:`verif.hbm_harness.build_traffic`), each request count
    multiplied by ``scale`` (at least 50 requests). At ``scale`` 1 each runs 80k-160k cycles; below
    about 0.2 a run is shorter than a few tREFI and refresh has not yet cost its steady-state share."""
    n = lambda k: max(50, int(k * scale))  # noqa: E731
    return {
        "sequential_read": [{"kind": "sequential", "count": n(80000), "write": False}],
        "sequential_write": [{"kind": "sequential", "count": n(80000), "write": True}],
        "random_32B_read": [{"kind": "random", "count": n(20000), "write_p": 0.0}],
        "random_64B_read": [{"kind": "random", "count": n(20000), "write_p": 0.0, "bursts": 2}],
        "random_32B_mixed": [{"kind": "random", "count": n(20000), "write_p": 0.5, "partial_p": 0.0}],
        "row_conflict_read": [{"kind": "conflicts", "count": n(3000), "write_p": 0.0}],
        # one request at a time over 48 addresses (few banks and rows): unloaded latency by category
        "unloaded_mix": [{"kind": "random", "count": n(4000), "write_p": 0.3, "span_bursts": 48}],
    }


def efficiency_bound(name: str, cfg: HBMConfig) -> float | None:
    """The analytical data-bus efficiency bound of scenario ``name`` (a key of :func:`scenarios`) on
    ``cfg``'s timing, or None where the pattern has none (the mixed and unloaded ones)."""
    t, bc = cfg.timing, cfg.timing.burst_cycles
    refresh = 1 - t.tRFC / t.tREFI

    def act_limited(per_act):
        return min(1.0, 4 * per_act / t.tFAW, per_act / t.tRRD_S, cfg.banks * per_act / t.tRC)

    if name.startswith("sequential"):
        return refresh
    if name == "random_32B_read":
        return act_limited(bc) * refresh
    if name == "random_64B_read":
        return act_limited(2 * bc) * refresh
    if name == "row_conflict_read":
        return bc / t.tRC * refresh
    return None


def read_latency_floor(kind: str, cfg: HBMConfig) -> int | None:
    """The DRAM's minimum cycles from a read's command to its last data beat for a request that found
    its bank in state ``kind`` (``hit``: RD; ``closed``: ACT, RD; ``conflict``: PRE, ACT, RD), or None
    for ``refresh_blocked`` (no floor: it waited for a refresh)."""
    t = cfg.timing
    base = t.CL + t.burst_cycles
    return {"hit": base, "closed": t.tRCD + base, "conflict": t.tRP + t.tRCD + base}.get(kind)


def read_latency_percentiles(latencies: list, cfg: HBMConfig) -> dict[str, dict]:
    """Per bank-state category, the reads' latency count, p50, p95, p99 and max (cycles) and the
    DRAM floor (:func:`read_latency_floor`), from the harness's ``(kind, refresh_blocked, write,
    cycles, addr)`` records."""
    by_kind: dict[str, list[int]] = {}
    for kind, blocked, write, lat, _addr in latencies:
        if not write:
            by_kind.setdefault("refresh_blocked" if blocked else kind, []).append(int(lat))
    out = {}
    for k in ("hit", "closed", "conflict", "refresh_blocked"):
        v = by_kind.get(k)
        if v:
            p = np.percentile(v, [50, 95, 99])
            out[k] = {"count": len(v), "p50": round(float(p[0]), 1), "p95": round(float(p[1]), 1),
                      "p99": round(float(p[2]), 1),
                      "max": int(max(v)), "floor": read_latency_floor(k, cfg)}
    return out


def summarize(name: str, stats: dict, cfg: HBMConfig) -> dict:
    """One scenario's figures from the harness's statistics ``stats``: efficiency, the same with the
    refresh debt at the end charged at tRFC per owed REF, its bound and the ratio of the two."""
    t = cfg.timing
    debt = max(0, stats["cycles"] // t.tREFI - stats["refreshes"])
    adjusted = stats["data_busy_cycles"] / (stats["span_cycles"] + debt * t.tRFC)
    b = efficiency_bound(name, cfg)
    return {"scenario": name, "requests": stats["requests"], "cycles": stats["cycles"],
            "efficiency": round(stats["efficiency"], 4), "refresh_debt_at_end": debt,
            "efficiency_debt_charged": round(adjusted, 4), "bound": None if b is None else round(b, 4),
            "of_bound": None if b is None else round(adjusted / b, 4),
            "row_hit_rate": round(stats["row_hit_rate"], 4), "refreshes": stats["refreshes"],
            "max_refresh_owed": stats["max_refresh_owed"]}
