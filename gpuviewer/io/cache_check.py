"""Checksums of a cache entry's files, and opening them without trusting them.

Every file of an entry (the .npy columns and meta.json) is listed in the entry's sums.json with
its size and checksum, written last when the entry is committed. xxh3_64 hashes 21-27 GB/s here
against 3-4 GB/s for zlib.crc32 (BENCHMARKS.md); crc32 is the fallback without xxhash. A file is
opened only when it is a regular file (lstat, then O_NOFOLLOW|O_NONBLOCK and fstat), so a FIFO or
a device put in its place is never read and never blocks.
"""

from __future__ import annotations

import os
import stat
import zlib

import msgspec

try:  # a well-kept binding of the reference xxHash; the cache works without it (crc32)
    import xxhash
except ImportError:  # pragma: no cover - xxhash is a dependency
    xxhash = None  # type: ignore[assignment]

SUMS = "sums.json"
ALGORITHM = "xxh3_64" if xxhash is not None else "crc32"


class Damaged(Exception):
    """A cache entry's file is missing, short, special or not what was written."""


def open_regular(path: str) -> int:
    """A read-only descriptor of path, which must be a regular file (not a link, FIFO, device)."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        raise Damaged(f"{os.path.basename(path)} is missing") from None
    if not stat.S_ISREG(st.st_mode):
        raise Damaged(f"{os.path.basename(path)} is not a regular file")
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    if not stat.S_ISREG(os.fstat(fd).st_mode):  # replaced between lstat and open
        os.close(fd)
        raise Damaged(f"{os.path.basename(path)} is not a regular file")
    return fd


_BLOCK = 8 << 20  # bytes hashed at a time


def file_sum(path: str, algorithm: str = ALGORITHM) -> tuple[int, str]:
    """(size, checksum) of a regular file, read a block at a time into one buffer: a whole-file
    mapping made every page of the file resident in this process while it was hashed (a 100M-event
    session's 781 MB start column took the reader from 254 to 844 MB at its commit)."""
    if algorithm not in ("xxh3_64", "crc32") or (algorithm == "xxh3_64" and xxhash is None):
        raise Damaged(f"unknown checksum {algorithm!r}")
    fd = open_regular(path)
    try:
        size = os.fstat(fd).st_size
        h = xxhash.xxh3_64() if algorithm == "xxh3_64" else None
        crc = 0
        buf = bytearray(min(_BLOCK, max(size, 1)))
        view = memoryview(buf)
        got = 0
        while got < size:  # the size the file had when opened, as the mapping took it
            n = os.readv(fd, [view[: min(len(buf), size - got)]])
            if n <= 0:
                raise Damaged(f"{os.path.basename(path)} is shorter than it was")
            got += n
            if h is not None:
                h.update(view[:n])
            else:
                crc = zlib.crc32(view[:n], crc)
        return size, (h.hexdigest() if h is not None else f"{crc:08x}")
    finally:
        os.close(fd)


def write_sums(d: str) -> None:
    """sums.json over every file in d (called when the entry is complete, before it is renamed
    into place)."""
    files = {}
    for name in sorted(os.listdir(d)):
        if name != SUMS:
            size, digest = file_sum(os.path.join(d, name))
            files[name] = [size, digest]
    with open(os.path.join(d, SUMS), "wb") as f:
        f.write(msgspec.json.encode({"algorithm": ALGORITHM, "files": files}))
        f.flush()
        os.fsync(f.fileno())


class Sums(msgspec.Struct):
    algorithm: str
    files: dict[str, tuple[int, str]]


def read_sums(d: str) -> Sums:
    fd = open_regular(os.path.join(d, SUMS))
    try:
        with os.fdopen(fd, "rb") as f:
            data = f.read(16 << 20)
    except OSError as e:
        raise Damaged(f"{SUMS}: {e.strerror}") from None
    try:
        return msgspec.json.decode(data, type=Sums)
    except msgspec.DecodeError:
        raise Damaged(f"{SUMS} is not readable") from None


def check_file(d: str, name: str, sums: Sums) -> None:
    """Raise Damaged unless d/name has the size and checksum sums lists for it."""
    want = sums.files.get(name)
    if want is None:
        raise Damaged(f"{name} is not listed in {SUMS}")
    path = os.path.join(d, name)
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        raise Damaged(f"{name} is missing") from None
    if not stat.S_ISREG(st.st_mode):
        raise Damaged(f"{name} is not a regular file")
    size = st.st_size
    if size != want[0]:
        raise Damaged(f"{name} is {size:,} bytes, {want[0]:,} were written")
    if file_sum(path, sums.algorithm) != (want[0], want[1]):
        raise Damaged(f"{name} does not match its checksum")


def verify_entry(d: str) -> Sums:
    """Check every file of an entry (gpuviewer cache --verify, and opening a small entry)."""
    sums = read_sums(d)
    for name in sums.files:
        check_file(d, name, sums)
    extra = set(os.listdir(d)) - set(sums.files) - {SUMS}
    if extra:
        raise Damaged(f"{sorted(extra)[0]} was not written by gpuviewer")
    return sums
