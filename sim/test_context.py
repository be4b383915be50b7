"""The running test, for the code under test to report to (no imports: ``sim.runner`` and
``sim.test_record`` both use it). ``tests/conftest.py`` sets :data:`current_node` around every test;
outside a test it is None and every function here does nothing."""

from __future__ import annotations

__all__ = ["current_node", "note_simulator"]

#: the running test's pytest item, or None
current_node = None


def note_simulator(name: str) -> None:
    """Record that the running test ran simulator ``name`` (``sim.runner.run_cocotb`` calls this)."""
    if current_node is not None:
        current_node.user_properties.append(("simulator", name))
