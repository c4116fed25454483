"""Move ranks' events by their host's clock correction (offset, and drift over time). Within a
lane every event moves by the same amount up to a drift of parts per million, so the columns
stay sorted; derived per-lane data (levels of detail) is dropped and rebuilt."""

from __future__ import annotations

import numpy as np

from .trace import Counter, Step, Trace


def apply_offsets(trace: Trace, shift_of_rank) -> None:
    """shift_of_rank(rank, times ndarray) -> ns to add (float ndarray or scalar)."""
    ranks = [r.rank for r in trace.ranks]
    lane_rank = trace.lane_rank_array()
    c = trace.columns
    start = np.array(c["start"], dtype=np.int64)  # a writable copy (the cache maps files read-only)
    for lane, ln in enumerate(trace.lanes):  # events are grouped by lane: one slice each
        sl = trace.lane_slice(lane)
        if sl.stop > sl.start:
            start[sl] += np.rint(shift_of_rank(ln.rank, start[sl])).astype(np.int64)
    c["start"] = start
    it = np.array(trace.instants["t"], dtype=np.int64)
    if len(it):
        ir = lane_rank[np.asarray(trace.instants["lane"])]
        for r in ranks:
            m = ir == r
            if m.any():
                it[m] += np.rint(shift_of_rank(r, it[m])).astype(np.int64)
    trace.instants["t"] = it
    trace.steps = [
        Step(
            s.rank,
            s.step,
            s.start + int(round(float(shift_of_rank(s.rank, s.start)))),
            s.end + int(round(float(shift_of_rank(s.rank, s.end)))),
        )
        for s in trace.steps
    ]
    trace.counters = [
        Counter(
            k.rank,
            k.device,
            k.name,
            np.asarray(k.t, np.int64) + np.rint(shift_of_rank(k.rank, np.asarray(k.t))).astype(np.int64),
            k.v,
        )
        for k in trace.counters
    ]
    keep = {k: v for k, v in trace.derived.items() if k == "collective_args"}  # not about time
    trace.derived.clear()
    trace.derived.update(keep)
    trace._span = None
