"""The CLI's error contract: bad input is a :class:`UsageError`, printed by ``main`` as one line
``mxu: error: ...`` on stderr with exit status 2 (no traceback, nothing written)."""

from __future__ import annotations

import argparse

__all__ = ["UsageError", "Parser"]


class UsageError(Exception):
    """Bad input from the user: printed as one line, exit status 2."""


class Parser(argparse.ArgumentParser):
    """argparse with errors raised as :class:`UsageError` (one line) instead of printed with the usage."""

    def error(self, message):  # one line, status 2 (argparse prints the whole usage by default)
        raise UsageError(message)
