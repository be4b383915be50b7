"""cocotb bench that reports the simulator's Python environment (``tests/test_runner.py``): which
modules pytest's assertion rewriting, installed by cocotb before the benches are imported, takes
over, and where bytecode is written. Any design will do; it drives nothing."""

from __future__ import annotations

import sys

import cocotb


@cocotb.test()
async def assertion_rewriting_scope(dut) -> None:
    """Logs ``rewritten: <patterns>``, where bytecode goes and, for this bench and numpy, whether the
    hook loaded it."""
    import numpy

    hooks = [h for h in sys.meta_path if type(h).__name__ == "AssertionRewritingHook"]
    patterns = sorted({p for h in hooks for p in h.fnpats})
    dut._log.info("rewritten: %s", ",".join(patterns))
    dut._log.info("bytecode: written %s, prefix %s", not sys.flags.dont_write_bytecode, sys.pycache_prefix)
    for name, module in (("bench", sys.modules[__name__]), ("numpy", numpy)):
        loader = type(getattr(module, "__loader__", None)).__name__
        dut._log.info("loader of %s: %s", name, loader)
