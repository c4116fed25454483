"""The process's heap after a big open: glibc keeps freed memory for reuse instead of giving it
back, so a session's peak stayed its resident size. Measured on 10M events (6M slices): a
Kineto reader's pieces arrive as thousands of arrays of ~50 KB each, which live on the heap; once
joined into the session's columns they are freed, but 200+ MB stayed resident. And glibc's
dynamic mmap threshold moves up to the size of the last large array freed, after which arrays of
tens of MB are carved from the heap too and stay. Both are undone here (no-ops off glibc).
"""
from __future__ import annotations

import ctypes
import ctypes.util

_M_MMAP_THRESHOLD = -3
MMAP_THRESHOLD = 256 << 10  # arrays from this size on get pages of their own, returned when freed
_libc = None
_tuned = False


def _c():
    global _libc
    if _libc is None:
        try:
            lib = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
            _libc = lib if hasattr(lib, "malloc_trim") and hasattr(lib, "mallopt") else False
        except OSError:
            _libc = False
    return _libc


def big_arrays_off_heap() -> None:
    """Fix the mmap threshold (once per process): a big array freed is given back at once."""
    global _tuned
    lib = _c()
    if lib and not _tuned:
        _tuned = True
        lib.mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD)


def trim() -> None:
    """Give the heap's free pages back to the system (a few ms)."""
    lib = _c()
    if lib:
        lib.malloc_trim(0)
