"""An exclusive lock between processes on a file we write: flock on NAME.lock beside it, held
while the file is read, merged and replaced (io/sidecar.py). The lock file cannot be the target
itself: an atomic save renames a new inode over it, so two savers would lock different files.

The lock file is removed when the lock is released, so no NAME.lock is left beside the user's
files. A waiter that then holds a lock on the removed file sees that the path no longer names
its inode and tries again, so two processes never both believe they hold the lock."""

from __future__ import annotations

import errno
import os
import stat
import time
from collections.abc import Iterator
from contextlib import contextmanager

try:
    import fcntl
except ImportError:  # Windows: no flock; saves are still atomic, only not merged under a lock
    fcntl = None  # type: ignore[assignment]

WAIT_S = 15.0  # another save holds it this long at most in practice (one small JSON file)
_CANNOT_CREATE = (errno.EACCES, errno.EPERM, errno.EROFS)


@contextmanager
def locked(path: str, wait_s: float = WAIT_S) -> Iterator[bool]:
    """Hold the lock of `path` (yields True), or yield False where no lock file can be made (a
    read-only folder: the caller's own write there fails with its own message). OSError when
    another process holds it longer than wait_s."""
    if fcntl is None:
        yield False
        return
    lock = path + ".lock"
    deadline = time.monotonic() + wait_s
    while True:
        try:
            fd = os.open(lock, os.O_RDWR | os.O_CREAT | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC, 0o666)
        except OSError as e:
            if e.errno in _CANNOT_CREATE:
                yield False
                return
            raise OSError(e.errno, f"cannot make the lock file ({e.strerror})", lock) from None
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                raise OSError(errno.EEXIST, "the lock file is not a regular file; left as it is", lock)
            while True:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    if time.monotonic() > deadline:
                        raise OSError(errno.EAGAIN, "another program is saving it; try again", path) from None
                    time.sleep(0.02)
            if _same_file(fd, lock):
                break
        except BaseException:
            os.close(fd)
            raise
        os.close(fd)  # the holder removed it as we waited: lock the new one
    try:
        yield True
    finally:
        try:
            os.unlink(lock)  # while held: see the module's note
        except OSError:
            pass
        os.close(fd)


def _same_file(fd: int, path: str) -> bool:
    try:
        a, b = os.fstat(fd), os.stat(path, follow_symlinks=False)
    except FileNotFoundError:
        return False
    return (a.st_dev, a.st_ino) == (b.st_dev, b.st_ino)
