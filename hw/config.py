"""Validation shared by the configuration dataclasses (MAC, PE, MXU).

Each check raises ``ValueError`` with the message ``"<name> must be ...; got <value>"``, naming the
parameter and its allowed values, as every configuration error in the project does.
"""

from __future__ import annotations

from enum import Enum

__all__ = ["check_choice", "check_int"]


def check_choice(name: str, value, enum: type[Enum]) -> None:
    """``value`` must be the ``.value`` of a member of ``enum``."""
    allowed = [m.value for m in enum]
    if value not in allowed:
        raise ValueError(f"{name} must be one of {', '.join(allowed)}; got {value!r}")


def check_int(name: str, value, lo: int, hi: int | None = None) -> None:
    """``value`` must be an int (not bool) with ``lo <= value`` (and ``<= hi`` when given)."""
    ok = not isinstance(value, bool) and isinstance(value, int) and value >= lo and (hi is None or value <= hi)
    if not ok:
        rule = f"an integer from {lo} to {hi}" if hi is not None else f"an integer >= {lo}"
        raise ValueError(f"{name} must be {rule}; got {value!r}")
