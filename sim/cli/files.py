"""Input and output files of the ``mxu`` commands: .npy operands read safely and checked, output
folders and files checked before any work and written all-or-nothing, the progress-bar switch and
the project's version record."""

from __future__ import annotations

import os
import shutil
import stat
import sys
import tempfile
from pathlib import Path

from .errors import UsageError
from .options import RAW_BITS

__all__ = ["npy_header", "check_shape", "gemm_shape", "check_build_dir", "load_npy", "check_matrix", "operand",
           "initial_c", "check_out_dir", "check_writable_parent", "check_out_file", "write_outputs", "save_npy_atomic",
           "progress_enabled", "PROGRESS_VALUES", "project_info"]

def _check_regular_file(path: Path, where: str) -> None:
    """An input must be a regular file: a FIFO would block, a device (/dev/zero) never ends."""
    try:
        mode = path.stat().st_mode
    except FileNotFoundError:
        raise UsageError(f"{where}: no such file") from None
    except OSError as e:
        raise UsageError(f"{where}: cannot read: {e.strerror or e}") from None
    if stat.S_ISDIR(mode):
        raise UsageError(f"{where}: is a folder, not a file")
    if not stat.S_ISREG(mode):
        raise UsageError(f"{where}: is not a regular file (a pipe, socket or device)")


def _read_npy(path: Path, what: str, read):
    """Open a .npy file (regular files only) and return ``read(f)``; every failure is one
    UsageError naming ``what`` and the path."""
    where = f"{what} {path}"
    _check_regular_file(path, where)
    try:
        with open(path, "rb") as f:
            if f.read(6) != b"\x93NUMPY":
                raise UsageError(f"{where}: not a .npy file (write it with numpy.save)")
            f.seek(0)
            return read(f)
    except UsageError:
        raise
    except OSError as e:
        raise UsageError(f"{where}: cannot read: {e.strerror or e}") from None
    except MemoryError:
        raise UsageError(f"{where}: too large to load into this machine's memory") from None
    except ValueError as e:
        if "Object arrays" in str(e) or "pickle" in str(e):
            raise UsageError(f"{where}: holds Python objects (dtype object); save a numeric array") from None
        first = str(e).splitlines()[0] if str(e) else "malformed"
        raise UsageError(f"{where}: corrupt or truncated .npy file ({first})") from None
    except Exception as e:  # numpy's header parser raises EOFError, SyntaxError, tokenize errors...
        raise UsageError(f"{where}: corrupt or truncated .npy file ({type(e).__name__})") from None


def npy_header(path: Path, what: str) -> tuple[tuple[int, ...], object]:
    """(shape, dtype) from a .npy file's header alone, so a matrix's shape can be checked before its
    data is read. UsageError for anything that is not a readable .npy file."""
    import numpy as np

    def header(f):
        major, _minor = np.lib.format.read_magic(f)
        if major == 1:
            return np.lib.format.read_array_header_1_0(f)
        if major in (2, 3):   # version 3 differs only in the header's text encoding
            return np.lib.format.read_array_header_2_0(f)
        raise ValueError(f"unknown .npy version {major}")

    shape, _fortran, dtype = _read_npy(path, what, header)
    if dtype.hasobject:
        raise UsageError(f"{what} {path}: holds Python objects (dtype object); save a numeric array")
    return tuple(int(x) for x in shape), dtype


def check_shape(shape, what: str, path: Path) -> None:
    """A 2-D matrix with no empty dimension (from :func:`npy_header` or an array's shape)."""
    if len(shape) != 2:
        raise UsageError(f"{what} {path} must be a 2-D matrix; got shape {tuple(shape)}")
    if 0 in shape:
        raise UsageError(f"{what} {path} is {shape[0]}x{shape[1]}: empty dimension (0); "
                         "every dimension must be at least 1")


def gemm_shape(a_path: Path, b_path: Path, c_path: Path | None = None) -> tuple[int, int, int]:
    """(M, K, N) of ``C = C0 + A @ B`` from the .npy headers alone (nothing else is read): both
    operands 2-D and non-empty, K equal, C0 (when given) M x N. UsageError otherwise."""
    (sa, _), (sb, _) = npy_header(a_path, "A"), npy_header(b_path, "B")
    check_shape(sa, "A", a_path)
    check_shape(sb, "B", b_path)
    if sa[1] != sb[0]:
        raise UsageError(f"A is {sa[0]}x{sa[1]} but B is {sb[0]}x{sb[1]}: inner dimensions (K) differ")
    m, k, n = sa[0], sa[1], sb[1]
    if c_path is not None:
        sc, _ = npy_header(c_path, "--c")
        check_shape(sc, "--c", c_path)
        if tuple(sc) != (m, n):
            raise UsageError(f"--c {c_path} is {sc[0]}x{sc[1]} but the result is {m}x{n} (M from A, N from B)")
    return m, k, n


def check_build_dir() -> None:
    """The build folder (``$MXU_BUILD_DIR``, else ``build/``) must be writable before anything is
    generated or built into it."""
    from sim.runner import build_root

    check_writable_parent(build_root(), "MXU_BUILD_DIR")


def load_npy(path: Path, what: str):
    """Read a .npy file without pickles; every failure is a UsageError naming ``what`` and the path.
    Only regular files are opened (a FIFO would block); callers check the shape first with
    :func:`npy_header` where the size matters."""
    import numpy as np

    array = _read_npy(path, what, lambda f: np.lib.format.read_array(f, allow_pickle=False))
    if array.dtype.byteorder not in ("=", "|") and array.dtype.kind in "fiu":
        array = array.astype(array.dtype.newbyteorder("="))
    # not np.ascontiguousarray: it returns at least 1-D, so a 0-d array would pass as shape (1,)
    return array if array.flags.c_contiguous else array.copy(order="C")


def check_matrix(array, what: str, path: Path) -> None:
    """:func:`check_shape` of a loaded array."""
    check_shape(array.shape, what, path)


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


#: Longest file or folder name (bytes) on Linux file systems (NAME_MAX).
NAME_MAX = 255


def check_writable_parent(path: Path, option: str) -> None:
    """``path`` itself when it exists, else its nearest existing parent, must be a folder this user
    can write into (created folders and written files go there). Checked by creating and removing
    a probe file there: permission bits alone say nothing for root, a read-only mount or /proc.
    A broken or looping symbolic link on the way, or a name longer than the file system takes, is
    refused here too (each would fail only when the output is written)."""
    for part in path.parts:
        if len(os.fsencode(part)) > NAME_MAX:
            raise UsageError(f"{option} {path}: a name longer than {NAME_MAX} bytes")
    for where in (path, *path.parents):
        if where.is_symlink() and not where.exists():
            raise UsageError(f"{option} {path}: {where} is a broken or looping symbolic link")
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


def check_out_file(path: Path, option: str = "--out", suffix: str | None = None) -> None:
    """An output file: not a folder, not a device, pipe or socket (the result is renamed over the
    path: /dev/null would be replaced), its folder writable (:func:`check_writable_parent`), and
    ending in ``suffix`` when given (numpy.save adds .npy to any other name)."""
    if path.is_dir():
        raise UsageError(f"{option} {path} is a folder; give a file name such as C.npy")
    if path.exists() and not path.is_file():
        raise UsageError(f"{option} {path} exists and is not a regular file (a device, pipe or socket)")
    if path.is_symlink() and not path.exists():
        raise UsageError(f"{option} {path} is a broken or looping symbolic link")
    check_writable_parent(path.parent, option)
    if suffix is not None and path.suffix != suffix:
        raise UsageError(f"{option} {path} must end in {suffix}")


def write_outputs(out: Path, files: dict[str, str | Path]) -> None:
    """Write ``files`` (name -> text or source path) into ``out`` all-or-nothing: everything goes
    to a temporary folder first and is then moved into place; a folder this call created is
    removed again when writing fails."""
    check_out_dir(out, files)
    # the topmost folder this call creates, removed again when writing fails
    created = next((p for p in reversed((out, *out.parents)) if not p.exists()), None)
    try:
        out.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=".mxu-", dir=out))
    except OSError as e:
        if created is not None:
            shutil.rmtree(created, ignore_errors=True)
        raise UsageError(f"--out {out}: cannot create: {e.strerror}") from None
    moved_out, moved_in = [], []   # old files set aside, new files put in place
    try:
        for name, content in files.items():
            if isinstance(content, Path):
                shutil.copyfile(content, tmp / name)
            else:
                (tmp / name).write_text(content)
        for name in files:   # set every old file aside first: none is replaced unless all can be
            if (out / name).exists() or (out / name).is_symlink():
                os.replace(out / name, tmp / f"{name}.old")
                moved_out.append(name)
        for name in files:
            os.replace(tmp / name, out / name)
            moved_in.append(name)
    except OSError as e:
        for name in moved_in:
            (out / name).unlink(missing_ok=True)
        for name in moved_out:
            os.replace(tmp / f"{name}.old", out / name)
        shutil.rmtree(tmp, ignore_errors=True)
        if created is not None:
            shutil.rmtree(created, ignore_errors=True)
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
