"""Queries over the store, as pure functions: range, level of detail, aggregation."""
from __future__ import annotations

import numpy as np

from .trace import Trace


def _lane_arrays(trace: Trace, lane: int) -> dict:
    """Per-lane derived arrays, built once: end times and their running maximum (so a range
    query needs two binary searches even when slices overlap)."""
    c = trace._lane_cache.get(("arr", lane))
    if c is None:
        sl = trace.lane_slice(lane)
        start = np.asarray(trace.columns["start"][sl])
        end = start + np.asarray(trace.columns["dur"][sl])
        c = {"start": start, "end": end, "maxend": np.maximum.accumulate(end) if len(end) else end,
             "offset": sl.start}
        trace._lane_cache[("arr", lane)] = c
    return c


def events_in_range(trace: Trace, lane: int, t0: int, t1: int) -> np.ndarray:
    """Global indices of the lane's events that intersect [t0, t1] (sorted by start)."""
    a = _lane_arrays(trace, lane)
    lo = int(np.searchsorted(a["maxend"], t0, side="left"))
    hi = int(np.searchsorted(a["start"], t1, side="right"))
    if hi <= lo:
        return np.zeros(0, np.int64)
    idx = np.arange(lo, hi)
    idx = idx[a["end"][lo:hi] >= t0]
    return idx + a["offset"]


def merge_runs(start: np.ndarray, end: np.ndarray, q: float, rep: np.ndarray | None = None,
               weight: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Merge slices (or runs) separated by gaps < q. Returns (run starts, run ends, the index
    (into rep, default 0..n-1) of the heaviest member of each run, which gives the run its
    colour and name). weight defaults to the duration. O(n), no sort."""
    n = len(start)
    rep = np.arange(n) if rep is None else rep
    if n == 0:
        z = np.zeros(0, np.int64)
        return z, z, z
    weight = (end - start) if weight is None else weight
    maxend = np.maximum.accumulate(end)
    brk = np.flatnonzero(start[1:] - maxend[:-1] >= q) + 1
    first = np.concatenate(([0], brk))
    last = np.concatenate((brk - 1, [n - 1]))
    best = np.maximum.reduceat(weight, first)
    run_id = np.repeat(np.arange(len(first)), np.diff(np.concatenate((first, [n]))))
    cand = np.flatnonzero(weight == best[run_id])
    rc = run_id[cand]  # non-decreasing: the first candidate of each run is where it changes
    pos = np.flatnonzero(np.diff(rc, prepend=-1) != 0)
    return start[first], maxend[last], rep[cand[pos]]


def lod_runs(trace: Trace, lane: int, depth: int, t0: int, t1: int, ns_per_px: float
             ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """What to draw for one (lane, depth) row: runs at most a pixel apart, from the pyramid
    level whose bucket fits ns_per_px. Returns (starts, ends, representative event index)."""
    q, s, e, rep = _pyramid(trace, lane, depth)[lod_level(trace, lane, depth, ns_per_px)]
    maxe = np.maximum.accumulate(e) if len(e) else e
    lo = int(np.searchsorted(maxe, t0, side="left"))
    hi = int(np.searchsorted(s, t1, side="right"))
    return s[lo:hi], e[lo:hi], rep[lo:hi]


def lod_level(trace: Trace, lane: int, depth: int, ns_per_px: float) -> int:
    """The pyramid level to draw a (lane, depth) row at ns_per_px: the coarsest whose runs are
    merged across gaps of at most one pixel (level 0 is the events themselves)."""
    k = 0
    for i, (q, _s, _e, _r) in enumerate(_pyramid(trace, lane, depth)):
        if q <= ns_per_px:
            k = i
    return k


def _pyramid(trace: Trace, lane: int, depth: int) -> list:
    """Levels of merged runs for one (lane, depth) row, each from the previous one (merging
    runs at a larger gap equals merging the slices at that gap), q growing 4x a level. A level
    is kept when it at least halves the rectangles of the last kept one."""
    key = ("pyr", lane, depth)
    p = trace._lane_cache.get(key)
    if p is not None:
        return p
    sl = trace.lane_slice(lane)
    d = np.asarray(trace.columns["depth"][sl])
    idx = np.flatnonzero(d == depth) + sl.start
    s = np.asarray(trace.columns["start"][idx])
    dur = np.asarray(trace.columns["dur"][idx])
    e = s + dur
    levels = [(0.0, s, e, idx)]
    if len(s) > 64:
        gaps = s[1:] - np.maximum.accumulate(e)[:-1]
        pos = gaps[gaps > 0]
        # below the median gap a level would not halve the rectangles: start there
        q = float(max(np.median(pos), 1.0)) if len(pos) else 1.0
        span = float(e.max() - s.min()) or 1.0
        cs, ce, crep, cw = s, e, idx, dur
        while q < span and len(cs) > 64:
            rs, re, k = merge_runs(cs, ce, q, np.arange(len(cs)), cw)
            cs, ce, crep, cw = rs, re, crep[k], cw[k]
            if len(cs) < 0.5 * len(levels[-1][1]):
                levels.append((q, cs, ce, crep))
            q *= 4
    trace._lane_cache[key] = levels
    return levels


def self_times(trace: Trace, idx: np.ndarray, window: tuple[int, int] | None = None) -> np.ndarray:
    """Self time of each event = duration minus the time covered by its direct children.
    With a window, durations are first clipped to it (self time inside the window)."""
    cols = trace.columns
    if window is None:
        out = np.asarray(cols["dur"][idx]).astype(np.int64).copy()
    else:
        s0 = np.asarray(cols["start"][idx]).astype(np.int64)
        out = (np.minimum(s0 + np.asarray(cols["dur"][idx]), window[1]) - np.maximum(s0, window[0])).clip(0)
    lanes = np.asarray(cols["lane"][idx])
    for lane in np.unique(lanes):
        sl = trace.lane_slice(int(lane))
        s = np.asarray(cols["start"][sl])
        e = s + np.asarray(cols["dur"][sl])
        d = np.asarray(cols["depth"][sl]).astype(np.int64)
        # parent of each slice: the nearest enclosing slice above it. Usually one level up; where
        # partially overlapping slices (Kineto annotations) pushed rows down, further up.
        parent = np.full(len(s), -1, np.int64)
        maxd = int(d.max()) if len(d) else 0
        rows = [np.flatnonzero(d == k) for k in range(maxd + 1)]
        for depth in range(1, maxd + 1):
            todo = rows[depth]
            for up_depth in range(depth - 1, -1, -1):
                if not len(todo):
                    break
                up = rows[up_depth]
                if not len(up):
                    continue
                pos = np.searchsorted(s[up], s[todo], side="right") - 1
                ok = pos >= 0
                cand = up[np.maximum(pos, 0)]
                ok &= e[cand] >= e[todo]
                parent[todo[ok]] = cand[ok]
                todo = todo[~ok]
        child_sum = np.zeros(len(s), np.int64)
        has = parent >= 0
        if window is None:
            cd = e - s
        else:
            cd = (np.minimum(e, window[1]) - np.maximum(s, window[0])).clip(0)
        np.add.at(child_sum, parent[has], cd[has])
        sel = np.flatnonzero(lanes == lane)
        out[sel] = np.maximum(0, out[sel] - child_sum[idx[sel] - sl.start])
    return out


def aggregate(trace: Trace, lanes: list[int], t0: int, t1: int) -> list[dict]:
    """Per name over events of `lanes` that intersect [t0, t1]: count, total, self, mean (ns),
    sorted by total descending (what an area selection shows)."""
    parts = [events_in_range(trace, ln, t0, t1) for ln in lanes]
    idx = np.concatenate(parts) if parts else np.zeros(0, np.int64)
    if not len(idx):
        return []
    names = np.asarray(trace.columns["name"][idx])
    dur = np.asarray(trace.columns["dur"][idx]).astype(np.int64)
    selft = self_times(trace, idx)
    uniq, inv = np.unique(names, return_inverse=True)
    count = np.bincount(inv)
    total = np.bincount(inv, weights=dur)
    self_total = np.bincount(inv, weights=selft)
    rows = [{"name": trace.names[int(n)], "count": int(c), "total_ns": int(t), "self_ns": int(st),
             "mean_ns": float(t) / c} for n, c, t, st in zip(uniq, count, total, self_total)]
    rows.sort(key=lambda r: -r["total_ns"])
    return rows
