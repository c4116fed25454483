"""Processes a test started, and whether they end (the readers' worker pools)."""

from __future__ import annotations

import glob
import os


def children_of(pid: int) -> set[int]:
    """The process's children, from every thread of it."""
    out: set[int] = set()
    for f in glob.glob(f"/proc/{pid}/task/*/children"):
        try:
            with open(f) as fh:
                out |= {int(x) for x in fh.read().split()}
        except OSError:
            pass
    return out


def ended(pid: int, bound_s: float = 60) -> bool:
    """Whether the process ends, waited for through a descriptor of it (no polling loop; the
    bound only turns a process that never ends into a failure instead of a hung test)."""
    import select

    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        return True
    try:
        p = select.poll()
        p.register(fd, select.POLLIN)
        return bool(p.poll(int(bound_s * 1000))) or not os.path.exists(f"/proc/{pid}")
    finally:
        os.close(fd)
