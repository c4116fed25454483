"""Queries over the store, as pure functions: range, level of detail, aggregation."""

from __future__ import annotations

from contextlib import contextmanager

import numpy as np

from .trace import Trace


def _lane_arrays(trace: Trace, lane: int) -> dict:
    """Per-lane derived arrays, built once: end times and their running maximum (so a range
    query needs two binary searches even when slices overlap)."""
    c = trace.derived.get(("arr", lane))
    if c is None:
        sl = trace.lane_slice(lane)
        start = np.asarray(trace.columns["start"][sl])
        end = start + np.asarray(trace.columns["dur"][sl])
        c = {"start": start, "end": end, "maxend": np.maximum.accumulate(end) if len(end) else end, "offset": sl.start}
        trace.derived[("arr", lane)] = c
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


def merge_runs(
    start: np.ndarray, end: np.ndarray, q: float, rep: np.ndarray | None = None, weight: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
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
    first = run_firsts(start, maxend, q)
    last = np.concatenate((first[1:] - 1, [n - 1]))
    best = np.maximum.reduceat(weight, first)
    run_id = np.repeat(np.arange(len(first)), np.diff(np.concatenate((first, [n]))))
    cand = np.flatnonzero(weight == best[run_id])
    rc = run_id[cand]  # non-decreasing: the first candidate of each run is where it changes
    pos = np.flatnonzero(np.diff(rc, prepend=-1) != 0)
    return start[first], maxend[last], rep[cand[pos]]


def run_firsts(start: np.ndarray, maxend: np.ndarray, q: float) -> np.ndarray:
    """Where each run merge_runs makes begins (indices into start): a gap of q or more before."""
    return np.concatenate(([0], np.flatnonzero(start[1:] - maxend[:-1] >= q) + 1))


def lod_runs(
    trace: Trace, lane: int, depth: int, t0: int, t1: int, ns_per_px: float
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """What to draw for one (lane, depth) row: runs at most a pixel apart, from the pyramid
    level whose bucket fits ns_per_px. Returns (starts, ends, representative event index)."""
    s, e, rep, _busy = lod_runs_busy(trace, lane, depth, t0, t1, ns_per_px)
    return s, e, rep


def lod_runs_busy(
    trace: Trace, lane: int, depth: int, t0: int, t1: int, ns_per_px: float
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """lod_runs and each run's busy time: the time its events cover (a run merged across gaps
    under a pixel is drawn as one bar; its busy share tells a launch-bound GPU's 23% from a full
    one, which drew as the same solid bar: an audit of the window)."""
    levels = _pyramid(trace, lane, depth)
    k = lod_level(trace, lane, depth, ns_per_px)
    lvl = levels[k]
    if lvl[1] is None:  # zoomed in to the events of a row whose coarse levels came packed
        lvl = levels[k] = _level0(trace, lane, depth)
    s, e, rep = lvl[1], lvl[2], lvl[3]
    maxe = lvl[4] if len(lvl) > 4 else np.maximum.accumulate(e)  # kept with the level: not per frame
    lo = int(np.searchsorted(maxe, t0, side="left"))
    hi = int(np.searchsorted(s, t1, side="right"))
    busy = lvl[5][lo:hi] if len(lvl) > 5 and lvl[5] is not None else e[lo:hi] - s[lo:hi]
    return s[lo:hi], e[lo:hi], rep[lo:hi], busy


def lod_level(trace: Trace, lane: int, depth: int, ns_per_px: float) -> int:
    """The pyramid level to draw a (lane, depth) row at ns_per_px: the coarsest whose runs are
    merged across gaps of at most one pixel (level 0 is the events themselves)."""
    k = 0
    for i, lvl in enumerate(_pyramid(trace, lane, depth)):
        if lvl[0] <= ns_per_px:
            k = i
    return k


# the per-run arrays first (lod_busy: the time a run's events cover), then the index and gaps
LOD_ARRAYS = ("lod_start", "lod_end", "lod_maxend", "lod_rep", "lod_busy", "lod_index", "lod_q")
LOD_RUN_ARRAYS = 5


def lod_pack(trace: Trace, lanes: range | None = None) -> dict[str, np.ndarray]:
    """Every row's coarse levels (and the whole of small rows), packed into flat arrays for the
    cache: the first paint of a cached session then maps them instead of building them.
    lod_index rows: lane, depth, offset, count; lod_q: the level's gap (0 = the events).
    lanes: only these (a session built one file at a time packs each file's lanes)."""
    index: list = []
    qs: list = []
    parts: dict[str, list] = {"start": [], "end": [], "maxend": [], "rep": [], "busy": []}
    off = 0
    for lane in range(len(trace.lanes)) if lanes is None else lanes:
        sl = trace.lane_slice(lane)
        if sl.stop == sl.start:
            continue
        for d in np.unique(np.asarray(trace.columns["depth"][sl])).tolist():
            levels = _pyramid(trace, lane, d)
            trace.derived.pop(("pyr", lane, d), None)  # one row at a time in memory
            keep = levels[1:] if len(levels) > 1 else levels  # a small row: its events
            for q, st, en, rep, mx, busy in keep:
                index.append((lane, d, off, len(st)))
                qs.append(q)
                for k, a in zip(("start", "end", "rep", "maxend", "busy"), (st, en, rep, mx, busy)):
                    parts[k].append(np.asarray(a, np.int64))
                off += len(st)
    out = {f"lod_{k}": (np.concatenate(v) if v else np.zeros(0, np.int64)) for k, v in parts.items()}
    out["lod_index"] = np.array(index, np.int64).reshape(-1, 4)
    out["lod_q"] = np.array(qs, np.float64)
    return out


def lod_attach(trace: Trace, packed: dict[str, np.ndarray]) -> None:
    """Use packed levels (from the cache) for this trace's rows."""
    rows: dict[tuple[int, int], list] = {}
    for (lane, d, off, n), q in zip(packed["lod_index"].tolist(), packed["lod_q"].tolist()):
        rows.setdefault((lane, d), []).append((q, off, n))
    trace.derived["lod_packed"] = (packed, rows)


def _level0(trace: Trace, lane: int, depth: int) -> tuple:
    sl = trace.lane_slice(lane)
    d = np.asarray(trace.columns["depth"][sl])
    idx = np.flatnonzero(d == depth) + sl.start
    s = np.asarray(trace.columns["start"][idx])
    e = s + np.asarray(trace.columns["dur"][idx])
    return (0.0, s, e, idx, np.maximum.accumulate(e) if len(e) else e, e - s)


def _from_pack(trace: Trace, lane: int, depth: int) -> list | None:
    got = trace.derived.get("lod_packed")
    if got is None:
        return None
    packed, rows = got
    spec = rows.get((lane, depth))
    if spec is None:
        return None
    levels = [
        (
            q,
            packed["lod_start"][o : o + n],
            packed["lod_end"][o : o + n],
            packed["lod_rep"][o : o + n],
            packed["lod_maxend"][o : o + n],
            packed["lod_busy"][o : o + n] if "lod_busy" in packed else None,
        )
        for q, o, n in spec
    ]
    sl = trace.lane_slice(lane)
    for lvl in levels:  # a damaged cache: build the row from its events instead
        rep = lvl[3]
        if len(rep) and (int(rep.min()) < sl.start or int(rep.max()) >= sl.stop):
            return None
    if levels[0][0] > 0:  # the events themselves are read from the columns when first needed
        levels.insert(0, (0.0, None, None, None, None, None))
    return levels


def _pyramid(trace: Trace, lane: int, depth: int) -> list:
    """Levels of merged runs for one (lane, depth) row, each from the previous one (merging
    runs at a larger gap equals merging the slices at that gap), q growing 4x a level. A level
    is kept when it at least halves the rectangles of the last kept one."""
    key = ("pyr", lane, depth)
    p = trace.derived.get(key)
    if p is not None:
        return p
    p = _from_pack(trace, lane, depth)
    if p is not None:
        trace.derived[key] = p
        return p
    sl = trace.lane_slice(lane)
    d = np.asarray(trace.columns["depth"][sl])
    idx = np.flatnonzero(d == depth) + sl.start
    s = np.asarray(trace.columns["start"][idx])
    dur = np.asarray(trace.columns["dur"][idx])
    e = s + dur
    levels = [(0.0, s, e, idx, np.maximum.accumulate(e) if len(e) else e, e - s)]
    if len(s) > 64:
        gaps = s[1:] - np.maximum.accumulate(e)[:-1]
        pos = gaps[gaps > 0]
        # below the median gap a level would not halve the rectangles: start there
        q = float(max(np.median(pos), 1.0)) if len(pos) else 1.0
        span = float(e.max() - s.min()) or 1.0
        # cb: each run's busy time, the sum of its members' (one depth's events do not overlap)
        cs, ce, crep, cw, cb = s, e, idx, dur, (e - s).astype(np.int64)
        while q < span and len(cs) > 64:
            first = run_firsts(cs, np.maximum.accumulate(ce), q)
            rs, re, k = merge_runs(cs, ce, q, np.arange(len(cs)), cw)
            cs, ce, crep, cw, cb = rs, re, crep[k], cw[k], np.add.reduceat(cb, first)
            if len(cs) < 0.5 * len(levels[-1][1]):
                levels.append((q, cs, ce, crep, np.maximum.accumulate(ce), cb))
            q *= 4
    trace.derived[key] = levels
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
        sel = np.flatnonzero(lanes == lane)
        rel = idx[sel] - sl.start
        lo, hi = 0, sl.stop - sl.start
        if window is not None:
            # only children inside the window take self time away: the lane's events that reach
            # into it (an event's parent reaches in too, so it lies in the same range)
            a = _lane_arrays(trace, int(lane))
            lo = min(int(np.searchsorted(a["maxend"], window[0], side="left")), int(rel.min()))
            hi = max(int(np.searchsorted(a["start"], window[1], side="right")), int(rel.max()) + 1)
        parent = lane_parents(trace, int(lane))[lo:hi]
        s = np.asarray(cols["start"][sl.start + lo : sl.start + hi])
        e = s + np.asarray(cols["dur"][sl.start + lo : sl.start + hi])
        child_sum = np.zeros(hi - lo, np.int64)
        # a parent outside [lo, hi) has children that end before the window (they add nothing)
        has = (parent >= lo) & (parent < hi)
        if window is None:
            cd = e - s
        else:
            cd = (np.minimum(e, window[1]) - np.maximum(s, window[0])).clip(0)
        np.add.at(child_sum, parent[has] - lo, cd[has])
        out[sel] = np.maximum(0, out[sel] - child_sum[rel - lo])
    return out


@contextmanager
def parents_kept(trace: Trace):
    """Within: self_times keeps each lane's parent array instead of finding it again on every
    call (the analysis asks for many windows of one rank; outside, nothing is held)."""
    if "lane_parents" in trace.derived:  # already inside one: keep what it holds
        yield
        return
    trace.derived["lane_parents"] = {}
    try:
        yield
    finally:
        trace.derived.pop("lane_parents", None)


def lane_parents(trace: Trace, lane: int) -> np.ndarray:
    """Each slice's parent as a position in its lane (trace.lane_slice(lane)), -1 for none; kept
    within parents_kept()."""
    kept = trace.derived.get("lane_parents")
    if kept is not None and lane in kept:
        return kept[lane]
    cols = trace.columns
    sl = trace.lane_slice(lane)
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
    if kept is not None:
        kept[lane] = parent
    return parent


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
    rows = [
        {"name": trace.names[int(n)], "count": int(c), "total_ns": int(t), "self_ns": int(st), "mean_ns": float(t) / c}
        for n, c, t, st in zip(uniq, count, total, self_total)
    ]
    rows.sort(key=lambda r: -r["total_ns"])
    return rows


def longest_named(trace: Trace, name: str, rank: int, t0: int, t1: int) -> int | None:
    """The longest event called `name` on a rank that starts in [t0, t1] (a finding's evidence);
    where none starts there, the one of that name covering most of [t0, t1] (an op around a gap:
    alexnet's 10.8 s cudnn_convolution began before the idle stretch its finding names, and the
    finding selected nothing; an audit of the window)."""
    try:
        nid = trace.names.index(name)
    except ValueError:
        return None
    got = _longest_starting(trace, nid, rank, t0, t1)
    if got is not None:
        return got
    c = trace.columns
    best, best_ov = None, 0
    for ln in trace.lanes_of_rank(rank):
        idx = events_in_range(trace, ln, t0, t1)
        idx = idx[np.asarray(c["name"][idx]) == nid]
        if len(idx):
            s = np.asarray(c["start"][idx]).astype(np.int64)
            ov = np.minimum(s + np.asarray(c["dur"][idx]).astype(np.int64), t1) - np.maximum(s, t0)
            k = int(np.argmax(ov))
            if int(ov[k]) > best_ov:
                best, best_ov = int(idx[k]), int(ov[k])
    return best


def _longest_starting(trace: Trace, nid: int, rank: int, t0: int, t1: int) -> int | None:
    """The longest event of name id nid on a rank that starts in [t0, t1]."""
    c = trace.columns
    best, best_dur = None, -1
    for ln in trace.lanes_of_rank(rank):
        sl = trace.lane_slice(ln)
        st = np.asarray(c["start"][sl])
        lo, hi = int(np.searchsorted(st, t0, side="left")), int(np.searchsorted(st, t1, side="right"))
        hit = np.flatnonzero(np.asarray(c["name"][sl][lo:hi]) == nid)
        if len(hit):
            d = np.asarray(c["dur"][sl][lo:hi])[hit]
            k = int(np.argmax(d))
            if int(d[k]) > best_dur:
                best, best_dur = sl.start + lo + int(hit[k]), int(d[k])
    return best
