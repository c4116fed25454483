"""Our own files written atomically: into a temporary file in the same folder, renamed over the
target when complete, removed on any failure; a crash leaves the old file or the new one."""
from __future__ import annotations

import os
import tempfile
from typing import Callable, TextIO


def write_with(path: str, write: Callable[[TextIO], None]) -> None:
    """Call write(f) on a temporary UTF-8 text file, then rename it to path."""
    d = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=".gpuviewer-", suffix=".tmp", dir=d)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as f:
            os.fchmod(f.fileno(), 0o666 & ~_umask())  # a file like any other: mkstemp's 0600 hid reports from the team
            write(f)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def write_text(path: str, text: str) -> None:
    write_with(path, lambda f: f.write(text))


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask
