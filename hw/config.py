"""Validation shared by the configuration dataclasses (MAC, PE, MXU).

Each check raises with the message ``"<name> must be ...; got <value>"``, naming the parameter and
its allowed values, as every configuration error in the project does: ``TypeError`` when the value
has the wrong type (a float, a bool or a string where an integer is asked for), ``ValueError`` when
it has the right type but lies outside the allowed values.
"""

from __future__ import annotations

from enum import Enum

__all__ = ["check_choice", "check_int", "check_pow2"]


def check_choice(name: str, value, enum: type[Enum]) -> None:
    """``value`` must be the ``.value`` of a member of ``enum``.

    Raises:
        TypeError: ``value`` is not a string (the members' values are strings).
        ValueError: a string that names no member.
    """
    allowed = [m.value for m in enum]
    if not isinstance(value, str):
        raise TypeError(f"{name} must be one of {', '.join(allowed)}; got {value!r}")
    if value not in allowed:
        raise ValueError(f"{name} must be one of {', '.join(allowed)}; got {value!r}")


def check_pow2(name: str, value, lo: int = 1, hi: int | None = None) -> None:
    """``value`` must be an int (not bool) that is a power of two with ``lo <= value`` (and
    ``<= hi`` when given); the message names the range either way.

    Raises:
        TypeError: ``value`` is not an int.
        ValueError: an int that is not a power of two or lies outside ``lo..hi``.
    """
    rule = f"a power of two from {lo} to {hi}" if hi is not None else f"a power of two >= {lo}"
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be {rule}; got {value!r}")
    if value < lo or (hi is not None and value > hi) or value & (value - 1):
        raise ValueError(f"{name} must be {rule}; got {value!r}")


def check_int(name: str, value, lo: int, hi: int | None = None) -> None:
    """``value`` must be an int (not bool) with ``lo <= value`` (and ``<= hi`` when given).

    Raises:
        TypeError: ``value`` is not an int (a bool counts as not an int).
        ValueError: ``value`` is an int outside ``lo..hi``.
    """
    rule = f"an integer from {lo} to {hi}" if hi is not None else f"an integer >= {lo}"
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be {rule}; got {value!r}")
    if value < lo or (hi is not None and value > hi):
        raise ValueError(f"{name} must be {rule}; got {value!r}")
