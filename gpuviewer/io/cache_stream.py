"""A session's cache written a part at a time (io/out_of_core.py): each column is one .npy file
that grows by appends, so no column of the whole session is ever held in memory.

The files are the ones cache.store() writes and cache.load() memory-maps: a .npy header of a
fixed length (its shape is only known at the end, so the header is written last, over the
room left for it), then the data. Appends go through write(), not a writable mapping, so the
written pages sit in the page cache, not in this process's resident memory. Everything is
written into a temporary folder that cache.commit() renames into place; abort() removes it.
"""

from __future__ import annotations

import os
import shutil
import struct

import numpy as np

from . import cache

HEADER_LEN = 128  # what np.save writes for a 1-D array (a multiple of 64 bytes)
_CHUNK = 1 << 22  # rows a pass reads at a time (32 MB of int64)


def npy_header(dtype, n: int) -> bytes:
    """A version 1.0 .npy header for a 1-D array of n items, padded to HEADER_LEN bytes."""
    d = np.dtype(dtype)
    body = f"{{'descr': {d.str!r}, 'fortran_order': False, 'shape': ({n:d},), }}".encode("latin1")
    pad = HEADER_LEN - 10 - len(body) - 1
    if pad < 0:
        raise ValueError("npy header too long")
    return b"\x93NUMPY\x01\x00" + struct.pack("<H", HEADER_LEN - 10) + body + b" " * pad + b"\n"


class Column:
    """One growing .npy file."""

    def __init__(self, path: str, dtype) -> None:
        self.path = path
        self.dtype = np.dtype(dtype)
        self.n = 0
        self.f = open(path, "w+b")
        self.f.write(b"\0" * HEADER_LEN)

    def append(self, a: np.ndarray) -> int:
        """Append a's items (cast to the column's dtype); returns the position of the first."""
        at = self.n
        a = np.ascontiguousarray(a, dtype=self.dtype)
        self.f.write(a.data.cast("B"))  # a.data: memoryview(a), which numpy types only for 3.12+
        self.n += len(a)
        return at

    def close(self) -> None:
        if self.f.closed:
            return
        self.f.seek(0)
        self.f.write(npy_header(self.dtype, self.n))
        self.f.close()

    def add(self, lo: int, hi: int, delta: int) -> None:
        """Add delta to items [lo, hi) (a file's clock offset, known only after every file)."""
        if hi <= lo:
            return
        self.f.flush()
        m = np.memmap(self.path, self.dtype, "r+", offset=HEADER_LEN + lo * self.dtype.itemsize, shape=(hi - lo,))
        m += delta
        m.flush()
        del m

    def chunks(self):
        """The column's items, _CHUNK at a time, read (not mapped: resident memory stays one chunk)."""
        self.f.flush()
        with open(self.path, "rb") as f:
            f.seek(HEADER_LEN)
            for lo in range(0, self.n, _CHUNK):
                yield np.fromfile(f, self.dtype, min(_CHUNK, self.n - lo))


class PartStore:
    """The temporary folder of a session's cache and its growing columns."""

    def __init__(self) -> None:
        self.tmp = cache.new_tmp()
        self.cols: dict[str, Column] = {}
        sweep(os.path.dirname(self.tmp), keep=self.tmp)

    def column(self, name: str, dtype) -> Column:
        c = self.cols.get(name)
        if c is None:
            c = self.cols[name] = Column(os.path.join(self.tmp, f"{name}.npy"), dtype)
        return c

    def append(self, name: str, a: np.ndarray, dtype=None) -> int:
        return self.column(name, a.dtype if dtype is None else dtype).append(a)

    def length(self, name: str) -> int:
        c = self.cols.get(name)
        return 0 if c is None else c.n

    def save(self, name: str, a: np.ndarray) -> None:
        """A small array written whole."""
        np.save(os.path.join(self.tmp, f"{name}.npy"), np.ascontiguousarray(a))

    def load(self, name: str) -> np.ndarray:
        return np.load(os.path.join(self.tmp, f"{name}.npy"))

    def narrow(self, name: str, dtype) -> None:
        """Rewrite a finished column as a narrower dtype (flows: int32 below 2**31 events, as
        TraceBuilder.finish stores them), a chunk at a time."""
        old = self.cols.pop(name)
        old.close()
        os.replace(old.path, old.path + ".wide")
        new = self.column(name, dtype)
        with open(old.path + ".wide", "rb") as f:
            f.seek(HEADER_LEN)
            for lo in range(0, old.n, _CHUNK):
                new.append(np.fromfile(f, old.dtype, min(_CHUNK, old.n - lo)))
        os.unlink(old.path + ".wide")

    def commit(self, meta: dict) -> str:
        for c in self.cols.values():
            c.close()
        return cache.commit(self.tmp, meta)

    def abort(self) -> None:
        for c in self.cols.values():
            try:
                c.f.close()
            except OSError:
                pass
        shutil.rmtree(self.tmp, ignore_errors=True)


def sweep(root: str, keep: str, max_age: float = cache.STALE_S) -> list[str]:
    """Remove temporary folders of builds left behind (cache.sweep)."""
    return cache.sweep(root, keep, max_age)
