"""The annotations sidecar: <trace>.gpuviewer.json beside the trace (for a folder: inside it),
or in the user data directory when that folder is read-only. Written atomically: a temporary
file in the same folder, flushed and fsynced, then renamed over the old one, so a crash at any
point leaves either the previous file or the new one, never a torn one. The trace itself is
never written.

Reading is defensive: only a regular file (a FIFO would block), at most
limits.max_sidecar_bytes, checked against the schema (model.annotations); any bad annotation
rejects the whole file, with a message naming it. A file that could not be read whole (or
was cut at limits.max_annotations) is remembered, and the next save first moves it aside as
NAME.damaged-YYYYmmdd-HHMMSS, so the user's data is never overwritten."""
from __future__ import annotations

import errno
import hashlib
import os
import stat
import tempfile
import time

import msgspec

from ..model.annotations import AnnotationDoc, AnnotationError
from .errors import TraceError
from .limits import max_annotations, max_sidecar_bytes

SUFFIX = ".gpuviewer.json"


def sidecar_path(paths: list[str]) -> str:
    first = os.path.abspath(paths[0])
    if os.path.isdir(first):
        beside = os.path.join(first, "annotations" + SUFFIX)
        folder = first
    else:
        beside = first + SUFFIX
        folder = os.path.dirname(first)
    if len(paths) > 1:  # a session of several files: name it after all of them
        key = hashlib.sha256("\n".join(sorted(os.path.abspath(p) for p in paths)).encode()).hexdigest()[:12]
        beside = os.path.join(folder, f"session-{key}{SUFFIX}")
    if os.path.exists(beside) or os.access(folder, os.W_OK):
        return beside
    return _user_path(paths)


def _user_path(paths: list[str]) -> str:
    import platformdirs
    root = os.environ.get("GPUVIEWER_DATA_DIR") or platformdirs.user_data_dir("gpuviewer", appauthor=False)
    key = hashlib.sha256("\n".join(sorted(os.path.abspath(p) for p in paths)).encode()).hexdigest()[:24]
    return os.path.join(root, "annotations", key + SUFFIX)


# sidecar path -> why it was not read whole: the next save moves that file aside first
_unread: dict[str, str] = {}


def problem(path: str) -> str | None:
    """Why the last load_doc(path) did not read the whole file (None when it did)."""
    return _unread.get(os.path.abspath(path))


def load_doc(path: str, missing_ok: bool = True) -> AnnotationDoc:
    key = os.path.abspath(path)
    _unread.pop(key, None)
    try:
        doc = _read_doc(path, missing_ok)
    except TraceError as e:
        if os.path.lexists(path):
            _unread[key] = e.problem
        raise
    if doc.warnings:
        _unread[key] = "; ".join(doc.warnings)
    return doc


def _read_doc(path: str, missing_ok: bool) -> AnnotationDoc:
    limit = max_sidecar_bytes()
    try:
        # O_NONBLOCK: a FIFO put there after the check below still cannot block the open
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        if missing_ok:
            return AnnotationDoc()
        raise TraceError(path, "no such annotations file") from None
    except OSError as e:
        raise TraceError(path, f"cannot read the annotations ({e.strerror})") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise TraceError(path, "the annotations file is not a regular file")
        if st.st_size > limit:
            raise TraceError(path, f"the annotations file is too large ({st.st_size:,} bytes > {limit:,}; "
                             "raise GPUVIEWER_MAX_SIDECAR_BYTES to read it)")
        with os.fdopen(fd, "rb", closefd=False) as f:
            data = f.read(limit + 1)
    except OSError as e:
        raise TraceError(path, f"cannot read the annotations ({e.strerror})") from None
    finally:
        os.close(fd)
    if len(data) > limit:  # it grew after the size check
        raise TraceError(path, f"the annotations file is too large (over {limit:,} bytes)")
    try:
        return AnnotationDoc.from_json(msgspec.json.decode(data), limit=max_annotations())
    except msgspec.DecodeError as e:
        raise TraceError(path, f"the annotations file is not valid JSON ({e})") from None
    except RecursionError:  # msgspec stops at Python's recursion limit
        raise TraceError(path, "the annotations file is not valid: nested too deeply") from None
    except AnnotationError as e:
        raise TraceError(path, f"the annotations file is not valid: {e}") from None


def move_aside(path: str) -> str:
    """Rename a sidecar that was not read whole to NAME.damaged-YYYYmmdd-HHMMSS (never over an
    existing file); returns the new name."""
    base = f"{path}.damaged-{time.strftime('%Y%m%d-%H%M%S')}"
    new, n = base, 1
    while os.path.lexists(new):
        n += 1
        new = f"{base}-{n}"
    os.rename(path, new)
    return new


def save_doc(path: str, doc: AnnotationDoc) -> str | None:
    """Returns the name a damaged previous file was moved to, if it was."""
    folder = os.path.dirname(path)
    os.makedirs(folder, exist_ok=True)
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        st = None
    if st is not None and not (stat.S_ISREG(st.st_mode) or stat.S_ISLNK(st.st_mode)):
        raise OSError(errno.EEXIST, "not a regular file; left as it is", path)
    moved = None
    if st is not None and os.path.abspath(path) in _unread:
        moved = move_aside(path)
    _unread.pop(os.path.abspath(path), None)
    data = msgspec.json.format(msgspec.json.encode(doc.to_json()), indent=1)
    fd, tmp = tempfile.mkstemp(prefix=".gpuviewer-", suffix=".tmp", dir=folder)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        pause = os.environ.get("GPUVIEWER_TEST_PAUSE_BEFORE_RENAME")  # crash-safety test hook
        if pause:
            time.sleep(float(pause))
        os.replace(tmp, path)
        return moved
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
