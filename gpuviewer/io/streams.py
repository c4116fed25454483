"""Byte streams over input files: gzip detected by its magic bytes, never by the name.

isal's igzip decompresses about 1.4x faster than the standard library here (see
engineering.md); zlib is the fallback with the same interface.
"""
from __future__ import annotations

import gzip
from typing import BinaryIO

try:  # optional speed-up
    from isal import igzip as _gz
except ImportError:  # pragma: no cover - exercised only without isal
    _gz = gzip

GZIP_MAGIC = b"\x1f\x8b"
SQLITE_MAGIC = b"SQLite format 3\x00"


def head(path: str, n: int = 16) -> bytes:
    with open(path, "rb") as f:
        return f.read(n)


def is_gzip(path: str) -> bool:
    return head(path, 2) == GZIP_MAGIC


def open_bytes(path: str) -> BinaryIO:
    """Open read-only; transparently decompress gzip."""
    if is_gzip(path):
        return _gz.open(path, "rb")
    return open(path, "rb")


def first_text_bytes(path: str, n: int = 4096) -> bytes:
    """The first n bytes of the (decompressed) content, or b'' when unreadable."""
    try:
        with open_bytes(path) as f:
            return f.read(n)
    except (OSError, EOFError, ValueError):
        return b""
