"""The result of a GEMM command (``mxu matmul``, ``mxu board matmul``): C.npy written atomically,
one JSON line on stdout, the first mismatches on stderr, the exit status."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from .errors import UsageError
from .files import save_npy_atomic

__all__ = ["finish_gemm", "bits_text", "round_or_none"]

def finish_gemm(out_path: Path, out_fmt: str, fmt: str, report: dict, rtl, golden, bad, t0: float, *,
                source: str) -> int:
    """Write C.npy from the result bits ``rtl`` (atomically), complete and print ``report`` (one JSON
    line), and report mismatches against ``golden`` on stderr; returns the exit status (0 or 1).
    ``source`` names where the results came from in the messages ("rtl", "board"). The report's
    ``out_fmt`` is ``int32`` for int8 (its results are int32 whatever ``--out-fmt`` says)."""
    import numpy as np

    if fmt == "int8":
        report["out_fmt"] = "int32"

    if out_fmt == "bf16":
        out = (rtl.astype(np.uint32) << 16).view(np.float32)
    else:
        out = rtl.view(np.int32 if fmt == "int8" else np.float32)
    try:
        save_npy_atomic(out_path, out)
    except OSError as e:
        raise UsageError(f"--out {out_path}: cannot write: {e.strerror or e}") from None
    report.update(bitexact=not bad, mismatches=len(bad), output=str(out_path),
                  wall_s=round(time.perf_counter() - t0, 2))
    print(json.dumps(report))
    if bad:
        for ix in bad[:5]:
            print(f"mxu: mismatch at C[{ix[0]}, {ix[1]}]: {source} {bits_text(int(rtl[ix]), out_fmt, fmt)}, "
                  f"golden {bits_text(int(golden[ix]), out_fmt, fmt)}", file=sys.stderr)
        whose = "RTL's" if source == "rtl" else f"{source}'s"
        print(f"mxu: {len(bad)} of {golden.size} results differ from the golden model; {out_path} holds the "
              f"{whose} results", file=sys.stderr)
        return 1
    return 0


def bits_text(value: int, out: str, fmt: str) -> str:
    import numpy as np

    if out == "bf16":
        return f"0x{value:04x} ({float(np.array(value << 16, np.uint32).view(np.float32))!r})"
    if fmt == "int8":
        return f"0x{value:08x} ({int(np.array(value, np.uint32).view(np.int32))})"
    return f"0x{value:08x} ({float(np.array(value, np.uint32).view(np.float32))!r})"


def round_or_none(value, digits: int = 2):
    if value is None:
        return None
    return round(float(value), digits) if digits else int(round(float(value)))
