"""The pod: collective engines that join nodes' memories over ICI rings."""

from .collective import ERRORS, CollectiveEngine
from .config import CollectiveConfig, CollectiveOp

__all__ = ["CollectiveConfig", "CollectiveEngine", "CollectiveOp", "ERRORS"]
