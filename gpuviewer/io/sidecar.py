"""The annotations sidecar: <trace>.gpuviewer.json beside the trace (for a folder: inside it),
or in the user data directory when that folder is read-only. Written atomically: a temporary
file in the same folder, flushed and fsynced, then renamed over the old one, so a crash at any
point leaves either the previous file or the new one, never a torn one. The trace itself is
never written."""
from __future__ import annotations

import hashlib
import os
import tempfile
import time

import msgspec

from ..model.annotations import AnnotationDoc, AnnotationError
from .errors import TraceError

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


def load_doc(path: str) -> AnnotationDoc:
    try:
        with open(path, "rb") as f:
            data = f.read()
    except FileNotFoundError:
        return AnnotationDoc()
    except OSError as e:
        raise TraceError(path, f"cannot read the annotations ({e.strerror})") from None
    try:
        return AnnotationDoc.from_json(msgspec.json.decode(data))
    except msgspec.DecodeError as e:
        raise TraceError(path, f"the annotations file is not valid JSON ({e})") from None
    except AnnotationError as e:
        raise TraceError(path, f"the annotations file is not valid: {e}") from None


def save_doc(path: str, doc: AnnotationDoc) -> None:
    folder = os.path.dirname(path)
    os.makedirs(folder, exist_ok=True)
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
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
