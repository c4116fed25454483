"""Interval arithmetic on sorted numpy arrays: unions, intersections, clipping. O(n) after a
sort; no Python loop over events."""

from __future__ import annotations

import numpy as np

Intervals = tuple[np.ndarray, np.ndarray]  # disjoint, sorted (start, end)
EMPTY: Intervals = (np.zeros(0, np.int64), np.zeros(0, np.int64))


def union(start: np.ndarray, end: np.ndarray) -> Intervals:
    if len(start) == 0:
        return EMPTY
    o = np.argsort(start, kind="stable")
    s, e = np.asarray(start)[o].astype(np.int64), np.asarray(end)[o].astype(np.int64)
    maxend = np.maximum.accumulate(e)
    brk = np.flatnonzero(s[1:] > maxend[:-1]) + 1
    first = np.concatenate(([0], brk))
    last = np.concatenate((brk - 1, [len(s) - 1]))
    return s[first], maxend[last]


def length(iv: Intervals) -> int:
    return int((iv[1] - iv[0]).sum()) if len(iv[0]) else 0


def clip(iv: Intervals, t0: int, t1: int) -> Intervals:
    s, e = iv
    if not len(s):
        return EMPTY
    lo = int(np.searchsorted(e, t0, side="right"))
    hi = int(np.searchsorted(s, t1, side="left"))
    if hi <= lo:
        return EMPTY
    cs = np.maximum(s[lo:hi], t0)
    ce = np.minimum(e[lo:hi], t1)
    keep = clipped_kept(cs, ce, t0, t1)
    return cs[keep], ce[keep]


def clipped_kept(cs: np.ndarray, ce: np.ndarray, t0: int, t1: int) -> np.ndarray:
    """Of intervals clipped to [t0, t1]: those left, an interval of no length inside the window
    among them (it adds no length, and the gaps on either side of it are two: ARRAYFORM's 0 µs
    memsets between zero_grad's fills made 75 µs launch gaps read as one 155 µs gap, of the
    'longer gaps' an audit could not find)."""
    return (ce > cs) | ((ce == cs) & (cs > t0) & (cs < t1))


def lengths_in(iv: Intervals, t0: np.ndarray, t1: np.ndarray) -> np.ndarray:
    """The length of iv inside each window [t0[k], t1[k]] (t1 >= t0), all at once: the length
    before t1 less the length before t0."""
    s, e = iv
    if not len(s):
        return np.zeros(len(t0), np.int64)
    before = np.r_[0, np.cumsum(e - s)]

    def upto(t):
        k = np.searchsorted(s, t, side="right")  # intervals starting at or before t
        j = np.maximum(k - 1, 0)
        return before[k] - np.where(k > 0, np.maximum(0, e[j] - np.maximum(t, s[j])), 0)

    return upto(np.asarray(t1, np.int64)) - upto(np.asarray(t0, np.int64))


def intersect(a: Intervals, b: Intervals) -> Intervals:
    """Intersection of two disjoint sorted interval sets."""
    if not len(a[0]) or not len(b[0]):
        return EMPTY
    t = np.concatenate((a[0], a[1], b[0], b[1]))
    da = np.concatenate(
        (np.ones(len(a[0]), np.int64), -np.ones(len(a[1]), np.int64), np.zeros(len(b[0]) + len(b[1]), np.int64))
    )
    db = np.concatenate(
        (np.zeros(len(a[0]) + len(a[1]), np.int64), np.ones(len(b[0]), np.int64), -np.ones(len(b[1]), np.int64))
    )
    o = np.argsort(t, kind="stable")
    t, da, db = t[o], da[o], db[o]
    ca, cb = np.cumsum(da), np.cumsum(db)
    both = (ca[:-1] > 0) & (cb[:-1] > 0)
    s, e = t[:-1][both], t[1:][both]
    keep = e > s
    return union(s[keep], e[keep])


def subtract(a: Intervals, b: Intervals) -> Intervals:
    """a minus b."""
    if not len(a[0]):
        return EMPTY
    if not len(b[0]):
        return a
    inter = intersect(a, b)
    if not len(inter[0]):
        return a
    # a \\ b = gaps of inter inside a: cut each a interval at the intersection pieces
    t = np.concatenate((a[0], a[1], inter[0], inter[1]))
    d = np.concatenate(
        (
            np.ones(len(a[0]), np.int64),
            -np.ones(len(a[1]), np.int64),
            -np.ones(len(inter[0]), np.int64),
            np.ones(len(inter[1]), np.int64),
        )
    )
    o = np.lexsort((d, t))
    t, d = t[o], d[o]
    c = np.cumsum(d)
    on = c[:-1] > 0
    s, e = t[:-1][on], t[1:][on]
    keep = e > s
    return union(s[keep], e[keep])


def gaps(iv: Intervals, t0: int, t1: int) -> Intervals:
    """The parts of [t0, t1] not covered by iv."""
    s, e = clip(iv, t0, t1)
    starts = np.concatenate(([t0], e))
    ends = np.concatenate((s, [t1]))
    keep = ends > starts
    return starts[keep], ends[keep]
