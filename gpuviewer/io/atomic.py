"""Our own files written atomically, every one of them (outputs, images, reports, the annotations
sidecar, converted and exported traces in the cache): into a temporary file in the same folder,
flushed to disk, renamed over the target when complete, removed on any failure; a crash or a
power cut leaves the old file or the new one. The file gets the mode of any file the user creates
(0666 less the umask), not mkstemp's 0600, or the mode asked for. Folders written whole (the
column cache, a .gvsum summary) are renamed into place by their writers."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from typing import TextIO


def write_path(
    path: str,
    produce: Callable[[str], bool],
    suffix: str = ".tmp",
    before_replace: Callable[[], None] | None = None,
    mode: int | None = None,
) -> bool:
    """produce(tmp) writes the file at a temporary path beside `path` (by name, for writers that
    take one, as Qt's or a program's); when it returns True the file is flushed to disk, given
    `mode` (default 0666 less the umask) and renamed over `path`, after before_replace() (which
    may raise to stop it). False, or an error, leaves nothing behind."""
    d = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=".gpuviewer-", suffix=suffix, dir=d)
    os.close(fd)
    try:
        if not produce(tmp):
            return False
        _fsync(tmp)  # else a power cut after the rename can leave an empty file in its place
        if before_replace is not None:
            before_replace()
        # a file like any other: mkstemp's 0600 hid reports from the team
        os.chmod(tmp, 0o666 & ~umask() if mode is None else mode)
        os.replace(tmp, path)
        return True
    finally:
        if os.path.lexists(tmp):
            os.unlink(tmp)


def _fsync(path: str) -> None:
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_with(path: str, write: Callable[[TextIO], object]) -> None:
    """Call write(f) on a temporary UTF-8 text file, then rename it to path."""

    def produce(tmp: str) -> bool:
        with open(tmp, "w", encoding="utf-8", newline="") as f:
            write(f)
        return True

    write_path(path, produce)


def write_text(path: str, text: str) -> None:
    write_with(path, lambda f: f.write(text))


def umask() -> int:
    """The process's umask (read by setting it and putting it back)."""
    mask = os.umask(0)
    os.umask(mask)
    return mask
