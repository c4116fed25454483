"""Memory series the memory panel draws (no Qt): allocator counters and snapshot replays."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np


@dataclass
class Allocation:
    t_ns: int
    size: int
    addr: int
    frames: list = field(default_factory=list)
    category: str = "other"
    free_ns: int | None = None


@dataclass
class SnapshotSeries:
    device: int
    t: np.ndarray  # int64 ns (Unix epoch)
    allocated: np.ndarray  # bytes after each event
    allocations: list[Allocation]
    source: str = ""
    rank: int = 0

    def categories(self) -> tuple[list[str], np.ndarray, np.ndarray]:
        """Stacked bytes per call-site category over time: (names, t, values[k, n])."""
        names = sorted({a.category for a in self.allocations})
        idx = {n: i for i, n in enumerate(names)}
        ev_t, ev_c, ev_d = [], [], []
        for a in self.allocations:
            ev_t.append(a.t_ns)
            ev_c.append(idx[a.category])
            ev_d.append(a.size)
            if a.free_ns is not None:
                ev_t.append(a.free_ns)
                ev_c.append(idx[a.category])
                ev_d.append(-a.size)
        t = np.array(ev_t, np.int64)
        o = np.argsort(t, kind="stable")
        t, c, d = t[o], np.array(ev_c)[o], np.array(ev_d, np.float64)[o]
        vals = np.zeros((len(names), len(t)))
        for k in range(len(names)):
            vals[k] = np.cumsum(np.where(c == k, d, 0.0))
        vals -= np.minimum(vals.min(axis=1, keepdims=True), 0)
        return names, t, vals

    def allocation_at(self, t_ns: int) -> Allocation | None:
        """The allocation made closest to t_ns (for hover and click)."""
        if not self.allocations:
            return None
        ts = np.array([a.t_ns for a in self.allocations])
        k = int(np.argmin(np.abs(ts - t_ns)))
        return self.allocations[k]


@dataclass
class CategorySeries:
    """Bytes per category over time (a torch memory-timeline export): drawn like a snapshot's
    stacked areas, without per-allocation stacks."""

    device: int
    t: np.ndarray
    allocated: np.ndarray
    names: list[str]
    values: np.ndarray  # [category, time]
    source: str = ""
    rank: int = 0
    allocations: list = field(default_factory=list)
    # bytes the export marks as existing before the profile (time -1): `allocated` includes them
    held_before: int = 0

    def categories(self) -> tuple[list[str], np.ndarray, np.ndarray]:
        return self.names, self.t, self.values

    def allocation_at(self, t_ns: int):
        return None
