"""Our own files written atomically: into a temporary file in the same folder, renamed over the
target when complete, removed on any failure; a crash leaves the old file or the new one. The
file gets the mode of any file the user creates (0666 less the umask), not mkstemp's 0600."""
from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from typing import TextIO


def write_path(path: str, produce: Callable[[str], bool], suffix: str = ".tmp",
               before_replace: Callable[[], None] | None = None) -> bool:
    """produce(tmp) writes the file at a temporary path beside `path` (by name, for writers that
    take one, as Qt's); when it returns True the file is renamed over `path`, after
    before_replace() (which may raise to stop it). False, or an error, leaves nothing behind."""
    d = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=".gpuviewer-", suffix=suffix, dir=d)
    os.close(fd)
    try:
        if not produce(tmp):
            return False
        if before_replace is not None:
            before_replace()
        os.chmod(tmp, 0o666 & ~umask())  # a file like any other: mkstemp's 0600 hid reports from the team
        os.replace(tmp, path)
        return True
    finally:
        if os.path.lexists(tmp):
            os.unlink(tmp)


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
