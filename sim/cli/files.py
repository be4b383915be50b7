"""Input and output files of the ``mxu`` commands: .npy operands read safely and checked, output
folders and files checked before any work and written all-or-nothing, the progress-bar switch and
the project's version record."""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from pathlib import Path

from .errors import UsageError
from .options import RAW_BITS

__all__ = ["load_npy", "check_matrix", "operand", "initial_c", "check_out_dir", "check_writable_parent",
           "check_out_file", "write_outputs", "save_npy_atomic", "progress_enabled", "PROGRESS_VALUES",
           "project_info"]

def load_npy(path: Path, what: str):
    """Read a .npy file without pickles; every failure is a UsageError naming ``what`` and the path."""
    import numpy as np

    where = f"{what} {path}"
    try:
        with open(path, "rb") as f:
            if f.read(6) != b"\x93NUMPY":
                raise UsageError(f"{where}: not a .npy file (write it with numpy.save)")
            f.seek(0)
            array = np.lib.format.read_array(f, allow_pickle=False)
    except FileNotFoundError:
        raise UsageError(f"{where}: no such file") from None
    except IsADirectoryError:
        raise UsageError(f"{where}: is a folder, not a .npy file") from None
    except OSError as e:
        raise UsageError(f"{where}: cannot read: {e.strerror or e}") from None
    except ValueError as e:
        if "Object arrays" in str(e) or "pickle" in str(e):
            raise UsageError(f"{where}: holds Python objects (dtype object); save a numeric array") from None
        first = str(e).splitlines()[0] if str(e) else "malformed"
        raise UsageError(f"{where}: corrupt or truncated .npy file ({first})") from None
    except UsageError:
        raise
    except Exception as e:  # numpy's header parser raises EOFError, SyntaxError, tokenize errors...
        raise UsageError(f"{where}: corrupt or truncated .npy file ({type(e).__name__})") from None
    if array.dtype.byteorder not in ("=", "|") and array.dtype.kind in "fiu":
        array = array.astype(array.dtype.newbyteorder("="))
    # not np.ascontiguousarray: it returns at least 1-D, so a 0-d array would pass as shape (1,)
    return array if array.flags.c_contiguous else array.copy(order="C")


def check_matrix(array, what: str, path: Path) -> None:
    if array.ndim != 2:
        raise UsageError(f"{what} {path} must be a 2-D matrix; got shape {tuple(array.shape)}")
    if 0 in array.shape:
        raise UsageError(f"{what} {path} is {array.shape[0]}x{array.shape[1]}: empty dimension (0); "
                         "every dimension must be at least 1")


def operand(array, what: str, path: Path, fmt: str, bits: bool):
    """Convert a loaded A or B into ``fmt`` following the input rules of ``mxu matmul``."""
    import numpy as np

    from verif.golden import dtype_of, to_format

    check_matrix(array, what, path)
    dt = array.dtype
    if dt.kind == "V":
        raise UsageError(f"{what} {path} has dtype {dt} (raw bytes, e.g. an ml_dtypes array): save its "
                         f"{RAW_BITS[fmt]} bit patterns (.view(np.{RAW_BITS[fmt]})) and pass --bits")
    if bits:
        allowed = (np.uint16,) if fmt == "bf16" else (np.uint8, np.int8) if fmt == "int8" else (np.uint8,)
        if dt not in [np.dtype(t) for t in allowed]:
            raise UsageError(f"{what} {path} has dtype {dt}; with --bits, --fmt {fmt} takes "
                             f"{RAW_BITS[fmt]} bit patterns")
        return array.view(dtype_of(fmt))
    if fmt == "int8":
        if dt == np.uint8:
            raise UsageError(f"{what} {path} is uint8: pass --bits if it holds int8 bit patterns "
                             "(two's complement), or save int8 values")
        if dt.kind not in "iu":
            raise UsageError(f"{what} {path} has dtype {dt}; --fmt int8 takes integer arrays with values "
                             "in -128..127 (quantize on the host first)")
        if array.min() < -128 or array.max() > 127:
            raise UsageError(f"{what} {path}: int8 values must lie in -128..127; got "
                             f"{array.min()}..{array.max()}")
        return array.astype(np.int8)
    if dt in (np.dtype(np.uint16), np.dtype(np.uint8)):
        raise UsageError(f"{what} {path} is {dt}: pass --bits to read it as raw {fmt} bit patterns "
                         f"({RAW_BITS[fmt]}), or save float16/float32/float64 values")
    if dt not in (np.dtype(np.float16), np.dtype(np.float32), np.dtype(np.float64)):
        raise UsageError(f"{what} {path} has dtype {dt}; --fmt {fmt} takes float16, float32 or float64 values "
                         f"(rounded to nearest even into {fmt}) or, with --bits, {RAW_BITS[fmt]} bit patterns")
    try:
        return to_format(array, fmt)
    except ValueError as e:
        raise UsageError(f"{what} {path}: {e}") from None


def initial_c(array, path: Path, fmt: str, m: int, n: int):
    import numpy as np

    check_matrix(array, "--c", path)
    if array.shape != (m, n):
        raise UsageError(f"--c {path} is {array.shape[0]}x{array.shape[1]} but the result is {m}x{n} "
                         "(M from A, N from B)")
    dt = array.dtype
    if fmt == "int8":
        if dt.kind not in "iu":
            raise UsageError(f"--c {path} has dtype {dt}; with --fmt int8 the accumulator is int32: "
                             "give an integer array")
        info = np.iinfo(np.int32)
        if array.min() < info.min or array.max() > info.max:
            raise UsageError(f"--c {path}: values must fit int32")
        return array.astype(np.int32)
    if dt not in (np.dtype(np.float16), np.dtype(np.float32), np.dtype(np.float64)):
        raise UsageError(f"--c {path} has dtype {dt}; the accumulator is fp32: give float32 values")
    with np.errstate(over="ignore"):
        return array.astype(np.float32)  # float64: one RNE rounding (IEEE cast); float16: exact


def check_out_dir(out: Path, names, option: str = "--out") -> None:
    """The checks an output folder must pass before any work starts: ``out`` is a folder or can be
    created (its nearest existing parent is a writable folder), it is writable, and none of
    ``names`` is a folder inside it. UsageError otherwise."""
    if out.exists() and not out.is_dir():
        raise UsageError(f"{option} {out} exists and is not a folder")
    for name in names:
        if (out / name).is_dir():
            raise UsageError(f"{option} {out}: {name} exists there and is a folder")
    check_writable_parent(out, option)


def check_writable_parent(path: Path, option: str) -> None:
    """``path`` itself when it exists, else its nearest existing parent, must be a folder this user
    can write into (created folders and written files go there). Checked by creating and removing
    a probe file there: permission bits alone say nothing for root, a read-only mount or /proc."""
    for where in (path, *path.parents):
        if where.exists():
            if not where.is_dir():
                raise UsageError(f"{option} {path}: {where} is not a folder")
            try:
                fd, probe = tempfile.mkstemp(prefix=".mxu-probe-", dir=where)
            except OSError as e:
                raise UsageError(f"{option} {path}: folder {where} is not writable ({e.strerror or e})") from None
            os.close(fd)
            os.unlink(probe)
            return


def check_out_file(path: Path, option: str = "--out") -> None:
    if path.is_dir():
        raise UsageError(f"{option} {path} is a folder; give a file name such as C.npy")
    check_writable_parent(path.parent, option)


def write_outputs(out: Path, files: dict[str, str | Path]) -> None:
    """Write ``files`` (name -> text or source path) into ``out`` all-or-nothing: everything goes
    to a temporary folder first and is then moved into place; a folder this call created is
    removed again when writing fails."""
    check_out_dir(out, files)
    created = not out.exists()
    try:
        out.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=".mxu-", dir=out))
    except OSError as e:
        raise UsageError(f"--out {out}: cannot create: {e.strerror}") from None
    try:
        for name, content in files.items():
            if isinstance(content, Path):
                shutil.copyfile(content, tmp / name)
            else:
                (tmp / name).write_text(content)
        for name in files:
            os.replace(tmp / name, out / name)
    except OSError as e:
        shutil.rmtree(tmp, ignore_errors=True)
        if created:
            shutil.rmtree(out, ignore_errors=True)
        raise UsageError(f"--out {out}: cannot write: {e.strerror}") from None
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def save_npy_atomic(path: Path, array) -> None:
    """Write ``array`` to ``path`` as .npy all-or-nothing (temporary file in the same folder + rename)."""
    import numpy as np

    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            np.save(f, array)
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


PROGRESS_VALUES = {"1": True, "true": True, "yes": True, "on": True,
                    "0": False, "false": False, "no": False, "off": False}


def progress_enabled() -> bool:
    """Progress bars on stderr: ``MXU_PROGRESS`` when set (1/true/yes/on or 0/false/no/off, any case),
    else only when stderr is a terminal. Any other value is a UsageError (checked before any work:
    :func:`main` calls this first)."""
    raw = os.environ.get("MXU_PROGRESS")
    if raw is None or not raw.strip():
        return sys.stderr.isatty()
    value = PROGRESS_VALUES.get(raw.strip().lower())
    if value is None:
        raise UsageError(f"MXU_PROGRESS must be one of {', '.join(PROGRESS_VALUES)}; got {raw!r}")
    return value


def project_info() -> dict:
    """Version of this distribution and the git commit of the checkout (``+dirty`` with local edits)."""
    import subprocess
    from importlib import metadata

    try:
        version = metadata.version("open-mxu")
    except metadata.PackageNotFoundError:
        version = "unknown"
    root = Path(__file__).resolve().parents[1]
    try:
        commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True,
                                timeout=10).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=root,
                               capture_output=True, text=True, timeout=10).stdout.strip()
        commit = (commit + ("+dirty" if dirty else "")) if commit else "unknown"
    except (OSError, subprocess.SubprocessError):
        commit = "unknown"
    return {"name": "open-mxu", "version": version, "git_commit": commit}
