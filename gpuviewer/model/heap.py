"""The process's heap after a big open: glibc keeps freed memory for reuse instead of giving it
back, so a session's peak stayed its resident size. Measured on 10M events (6M slices): a
Kineto reader's pieces arrive as thousands of arrays of ~50 KB each, which live on the heap; once
joined into the session's columns they are freed, but 200+ MB stayed resident. trim() gives the
free pages back (a no-op off glibc). Fixing the mmap threshold instead (mallopt) also kept the
peak down but cost 20-30% more CPU on launch_bound_big (every piece then faulted in fresh pages).
"""

from __future__ import annotations

import ctypes

_libc = None


def _c():
    global _libc
    if _libc is None:
        try:
            # the process's own symbols (libc among them): ctypes.util.find_library would fork
            # a subprocess, copying a process of hundreds of MB
            lib = ctypes.CDLL(None)
            _libc = lib if hasattr(lib, "malloc_trim") else False
        except (OSError, AttributeError):
            _libc = False
    return _libc


def trim() -> None:
    """Give the heap's free pages back to the system (a few ms)."""
    lib = _c()
    if lib:
        lib.malloc_trim(0)
