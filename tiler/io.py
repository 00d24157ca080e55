"""Reading and writing files. Every file tiler reads (profiles, spaces, CSV tables, profiler files, manifests,
exports, libraries) goes through `read_limited`: a regular file of at most FILE_BYTES_MAX bytes (a device such as
/dev/zero, a pipe or a larger file is refused with one line before it is read past the limit).

Writing: every output of tiler (`--export`, `--out`, `--library`, `calibrate --out`, `--manifest`) goes
through `write_text` / `write_bytes`.

The rules, the same for every flag:
- atomic: the text goes to a temporary file in the target's folder, which is then renamed over the target
  (`os.replace`); a failed write (full disk, permission, interrupted) leaves the old file, or none, and no
  temporary file behind;
- missing parent folders are created (`--export out/run1/t.json` makes `out/run1/`);
- a path that names a folder (ends with `/`, or is an existing directory) is refused: tiler never invents a file
  name inside a folder;
- a path that exists and is not a regular file (`/dev/stdout`, `/dev/null`, a named pipe) is written in place,
  not replaced (a device cannot be renamed over);
- a symbolic link is followed: its target is replaced, the link stays;
- any failure is a `TilerError` naming the parameter, the path and the reason:
  `export: /x/y.json: cannot write: No space left on device` (the CLI turns `export:` into `--export:`).
"""

from __future__ import annotations

import contextlib
import os
import stat
from pathlib import Path

from .errors import TilerError

__all__ = ["FILE_BYTES_MAX", "check_writable", "read_limited", "write_bytes", "write_text"]

# The largest file tiler reads: a library of 10,000 sweep rows is about 50 MB; 256 MiB of JSON or CSV becomes well
# over the 1 GB a command may use once parsed, so a larger file is refused before it is read (README, "Limits").
FILE_BYTES_MAX = 256 * 2**20


def read_limited(path: str | os.PathLike, limit: int | None = None) -> bytes:
    """The bytes of a regular file of at most `limit` bytes. Raises OSError for a missing or unreadable file and
    ValueError (its text the reason, one line) for a device, a pipe or a folder, or a file larger than `limit`
    (read no further than limit + 1 bytes, so a file that grows while read is caught too)."""
    limit = FILE_BYTES_MAX if limit is None else limit
    with open(path, "rb") as f:
        st = os.fstat(f.fileno())
        if stat.S_ISDIR(st.st_mode):
            raise ValueError("it is a folder, not a file")
        if not stat.S_ISREG(st.st_mode):  # /dev/zero, a pipe: reading would never end
            raise ValueError("not a regular file")
        if st.st_size > limit:
            raise ValueError(f"{st.st_size} bytes; at most {limit} ({limit // 2**20} MiB)")
        data = f.read(limit + 1)
    if len(data) > limit:
        raise ValueError(f"more than {limit} bytes ({limit // 2**20} MiB)")
    return data


def _prefix(what: str | None, path) -> str:
    return f"{what}: {path}" if what else str(path)


def _why(exc: OSError) -> str:
    return exc.strerror or str(exc)


def check_writable(path: str | os.PathLike, what: str | None = None, make_parent: bool = False) -> Path:
    """Refuse, before any work, a path that cannot take a file: empty, ending with a separator, an existing
    folder, one whose parent is (or would have to be made below) a file, or whose folder exists and is not
    writable. `make_parent`: create the missing folders now (a command that puts other files there first).
    Returns the path to write (a symbolic link resolved to its target). A full disk is found out by writing."""
    text = os.fspath(path)
    if not isinstance(text, str):
        text = os.fsdecode(text)
    if not text.strip():
        raise TilerError(f"{what or 'path'}: empty path; give a file name")
    if text.endswith(("/", os.sep)) or (os.altsep and text.endswith(os.altsep)):
        raise TilerError(f"{_prefix(what, text)}: names a folder (ends with '/'); give a file name")
    p = Path(text)
    if p.is_symlink():
        p = Path(os.path.realpath(p))
    if p.is_dir():
        raise TilerError(f"{_prefix(what, text)}: is a folder; give a file name")
    for parent in p.parents:  # the nearest existing ancestor must be a folder
        if parent.exists():
            if not parent.is_dir():
                raise TilerError(f"{_prefix(what, text)}: cannot write: {parent} is not a folder")
            break
        if parent.is_symlink():  # a dangling link where a folder would have to be created
            raise TilerError(f"{_prefix(what, text)}: cannot write: {parent} is a broken link")
    if make_parent:
        try:
            p.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise TilerError(f"{_prefix(what, text)}: cannot create folder {p.parent}: {_why(exc)}") from None
    exists = p.exists()
    folder = p.parent if p.parent.exists() else None
    if (exists and not os.access(p, os.W_OK)) or (
        not exists and folder is not None and not os.access(folder, os.W_OK | os.X_OK)
    ):
        raise TilerError(f"{_prefix(what, text)}: cannot write: Permission denied")
    return p


def write_bytes(path: str | os.PathLike, data: bytes, what: str | None = None) -> Path:
    """Write `data` to `path` atomically (see the module docstring); returns the path written."""
    p = check_writable(path, what)
    where = _prefix(what, os.fspath(path))
    try:
        st = p.stat()
    except OSError:
        st = None
    if st is not None and not stat.S_ISREG(st.st_mode):  # a device or a pipe: written in place
        try:
            with open(p, "wb") as f:
                f.write(data)
        except OSError as exc:
            raise TilerError(f"{where}: cannot write: {_why(exc)}") from None
        return p
    try:
        p.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise TilerError(f"{where}: cannot create folder {p.parent}: {_why(exc)}") from None
    tmp = p.with_name(f".{p.name}.{os.getpid()}.{os.urandom(4).hex()}.tmp")
    fd = -1
    try:
        # 0o666 less the umask, as a plain open() would create it; an existing file keeps its mode
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
        if st is not None:
            os.chmod(fd, stat.S_IMODE(st.st_mode))
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        os.fsync(fd)
        os.close(fd)
        fd = -1
        os.replace(tmp, p)
    except OSError as exc:
        raise TilerError(f"{where}: cannot write: {_why(exc)}") from None
    finally:
        if fd >= 0:
            os.close(fd)
        with contextlib.suppress(OSError):  # the temp file is gone once renamed into place
            os.unlink(tmp)
    return p


def write_text(path: str | os.PathLike, text: str, what: str | None = None) -> Path:
    """Write `text` (UTF-8) to `path` atomically; `what` names the parameter in an error (`export`, `--out`)."""
    return write_bytes(path, text.encode("utf-8"), what)
