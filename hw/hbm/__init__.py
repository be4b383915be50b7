"""HBM2-style pseudo-channel memory controller: configuration (geometry + timing sets).

The controller (:mod:`.controller`), AXI4 top (:mod:`.axi`) and BRAM emulator (:mod:`.emulator`)
are imported from their modules; this package re-exports the configuration.
"""

from . import config
from .config import *  # noqa: F401,F403  (the names of config.__all__)

__all__ = list(config.__all__)
