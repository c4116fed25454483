"""Reading a small file a user or another program put there (an annotations sidecar, a summary's
JSON, a query file, the head of an output about to be replaced): only a regular file, never
blocking, never more than a limit. The open is non-blocking and the type is checked on the open
descriptor, so a FIFO or device swapped in after any earlier check cannot block or flood the
read. Callers say what went wrong in their own words; this module only tells them which case."""

from __future__ import annotations

import os
import stat


class NotRegular(Exception):
    """The path is a folder, FIFO, device or socket (mode: its st_mode)."""

    def __init__(self, mode: int) -> None:
        super().__init__("not a regular file")
        self.mode = mode

    @property
    def folder(self) -> bool:
        return stat.S_ISDIR(self.mode)


class TooLarge(Exception):
    """More than the limit: size is the file's size when known before reading, None when it grew
    past the limit while being read."""

    def __init__(self, size: int | None) -> None:
        super().__init__("too large")
        self.size = size


def read_regular(path: str, limit: int, whole: bool = True) -> tuple[bytes, os.stat_result]:
    """(the file's bytes, its stat after reading). whole: TooLarge beyond `limit`; else the first
    `limit` bytes. OSError (FileNotFoundError among them) from opening or reading passes through."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NOCTTY", 0))
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise NotRegular(st.st_mode)
        if whole and st.st_size > limit:
            raise TooLarge(st.st_size)
        with os.fdopen(fd, "rb", closefd=False) as f:
            data = f.read(limit + 1 if whole else limit)
        after = os.fstat(fd)
    finally:
        os.close(fd)
    if whole and len(data) > limit:
        raise TooLarge(None)
    return data, after
