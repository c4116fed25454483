"""The annotations sidecar: <trace>.gpuviewer.json beside the trace (for a folder: inside it),
or in the user data directory when that folder is read-only. The trace itself is never written.

Saving never loses another session's work: under a lock (io/file_lock.py) the file is read
again, merged with this session's annotations by id (model/annotation_merge.py), and written
atomically: a temporary file in the same folder, flushed and fsynced, then renamed over the old
one, so a crash at any point leaves either the previous file or the new one. The file keeps its
mode (a new one gets the user's umask, like any file they make); a sidecar that is a symbolic
link stays one and its target is written.

Reading is defensive: only a regular file (a FIFO would block), at most
limits.max_sidecar_bytes, checked against the schema (model.annotations); any bad annotation
rejects the whole file, with a message naming it. A file that could not be read is moved aside
by the next save as NAME.damaged-YYYYmmdd-HHMMSS, so the user's data is never overwritten.
Annotations beyond limits.max_annotations are not shown (a warning says so) but are saved back
untouched."""

from __future__ import annotations

import errno
import hashlib
import os
import stat
import time
from typing import NamedTuple

import msgspec

from ..model.annotation_merge import apply, merge, stamp_changes
from ..model.annotations import AnnotationDoc, AnnotationError
from .atomic import write_path
from .bounded import NotRegular, TooLarge, read_regular
from .errors import TraceError
from .file_lock import locked
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


def load_doc(path: str, missing_ok: bool = True, keep_rest: bool = False) -> AnnotationDoc:
    """The annotations of a file (empty when it is missing and missing_ok). Past
    limits.max_annotations the rest are not read, or with keep_rest=True (a sidecar that will be
    saved: Notes.open_for) kept hidden and remembered as read, so a save merges with them."""
    key = os.path.abspath(path)
    _unread.pop(key, None)
    try:
        return _read_doc(path, missing_ok, max_annotations(), keep_rest)
    except TraceError as e:
        if os.path.lexists(path):
            _unread[key] = e.problem
        raise


def _read_doc(path: str, missing_ok: bool, max_notes: int | None, keep_rest: bool = True) -> AnnotationDoc:
    limit = max_sidecar_bytes()
    try:
        data, st = read_regular(path, limit)
    except FileNotFoundError:
        if missing_ok:
            return AnnotationDoc()
        raise TraceError(path, "no such annotations file") from None
    except OSError as e:
        raise TraceError(path, f"cannot read the annotations ({e.strerror})") from None
    except NotRegular:
        raise TraceError(path, "the annotations file is not a regular file") from None
    except TooLarge as e:
        if e.size is None:  # it grew after the size check
            raise TraceError(path, f"the annotations file is too large (over {limit:,} bytes)") from None
        raise TraceError(
            path,
            f"the annotations file is too large ({e.size:,} bytes > {limit:,}; "
            "raise GPUVIEWER_MAX_SIDECAR_BYTES to read it)",
        ) from None
    stamp = _stamp(st)
    try:
        doc = AnnotationDoc.from_json(msgspec.json.decode(data), limit=max_notes, keep_rest=keep_rest)
    except msgspec.DecodeError as e:
        raise TraceError(path, f"the annotations file is not valid JSON ({e})") from None
    except RecursionError:  # msgspec stops at Python's recursion limit
        raise TraceError(path, "the annotations file is not valid: nested too deeply") from None
    except AnnotationError as e:
        raise TraceError(path, f"the annotations file is not valid: {e}") from None
    doc.disk_stamp = stamp if doc.base is not None else None
    return doc


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


class Saved(NamedTuple):
    messages: list[str]  # for the user: a damaged previous file moved aside, conflicts settled
    changed: bool  # the document took annotations or changes from another session


def save_doc(path: str, doc: AnnotationDoc) -> Saved:
    """Merge `doc` with the file as it is now and write the result; `doc` then equals what was
    written (it gains the annotations another session saved). OSError when the file cannot be
    written or is something we must not replace."""
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    target = _target(path)
    contents = stamp_changes(doc)
    with locked(target):
        messages = []
        try:
            st = os.stat(target)
        except FileNotFoundError:
            st = None
        try:
            if st is None:
                theirs = None  # no file (never saved, or removed): nothing to merge with
            elif doc.base is not None and doc.disk_stamp == _stamp(st):
                theirs = None  # as this session last read or wrote it: ours are the merge
            else:
                theirs = _read_doc(target, True, None)
        except TraceError as e:
            if target != os.path.abspath(path):
                raise OSError(
                    errno.EEXIST, f"links to a file that is not valid annotations ({e.problem}); left as it is", path
                ) from None
            messages.append(f"The damaged annotations file was kept as {move_aside(target)}")
            theirs = None
        merged = merge(doc, theirs, contents)
        written = AnnotationDoc(merged.annotations, doc.view)
        stamp = _write(target, msgspec.json.format(msgspec.json.encode(written.to_json()), indent=1))
    apply(doc, merged.annotations, max_annotations())
    doc.disk_stamp = stamp
    _unread.pop(os.path.abspath(path), None)
    return Saved(messages + merged.messages, merged.took_theirs)


def _stamp(st: os.stat_result) -> tuple:
    # an atomic save renames a new inode over the file: any other writer changes this
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)


def _target(path: str) -> str:
    """The file a save writes: the path itself, or for a symbolic link the file it names (the
    link stays a link). Something else there (a FIFO, a folder, a link to nothing) is refused."""
    path = os.path.abspath(path)
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return path
    if stat.S_ISLNK(st.st_mode):
        target = os.path.realpath(path)
        try:
            st = os.lstat(target)
        except FileNotFoundError:
            raise OSError(errno.ENOENT, "a link to a file that does not exist; left as it is", path) from None
        path = target
    if not stat.S_ISREG(st.st_mode):
        raise OSError(errno.EEXIST, "not a regular file; left as it is", path)
    return path


def _write(path: str, data: bytes) -> tuple:
    """Atomically (io.atomic), keeping the file's mode (a new one: 0666 less the umask, so that
    teammates keep read access to a shared trace folder); returns the new file's _stamp (taken
    before the rename: after it, and out of the lock, another writer's file could be there)."""
    try:
        mode: int | None = stat.S_IMODE(os.stat(path).st_mode)
    except FileNotFoundError:
        mode = None
    stamps = []

    def produce(tmp: str) -> bool:
        # by descriptor, never through a link put in the temporary file's place
        fd = os.open(tmp, os.O_WRONLY | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC)
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            stamps.append(_stamp(os.fstat(f.fileno())))  # a rename keeps the inode, size and mtime
        return True

    def before_replace() -> None:
        pause = os.environ.get("GPUVIEWER_TEST_PAUSE_BEFORE_RENAME")  # crash-safety test hook
        if pause:
            time.sleep(float(pause))

    write_path(path, produce, before_replace=before_replace, mode=mode)
    return stamps[0]
