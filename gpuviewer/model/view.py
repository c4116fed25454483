"""The range a session opens on: the profiled steps (first to last, with the GPU work they
launched and a small margin), not the whole capture, which often holds seconds of start-up
before a handful of steps. Without steps: everything."""
from __future__ import annotations

import numpy as np

from .categories import Cat
from .trace import Trace

MARGIN = 0.02


def initial_view(trace: Trace) -> tuple[int, int]:
    got = trace.derived.get("initial_view")  # computed when the cache was written
    if got is None:
        got = trace.derived["initial_view"] = _initial_view(trace)
    return got


def _initial_view(trace: Trace) -> tuple[int, int]:
    if not trace.steps:
        return trace.start_ns, trace.end_ns
    s0 = min(s.start for s in trace.steps)
    s1 = max(s.end for s in trace.steps)
    c = trace.columns
    if len(c["start"]):
        # GPU work launched inside the steps runs on after them when the GPU is behind
        cat = np.asarray(c["cat"])
        gpu = (cat == Cat.KERNEL) | (cat == Cat.COMM_KERNEL) | (cat == Cat.MEMCPY) | (cat == Cat.MEMSET)
        start = np.asarray(c["start"])
        inside = gpu & (start >= s0) & (start <= s1)
        if inside.any():
            s1 = max(s1, int((start[inside] + np.asarray(c["dur"])[inside]).max()))
    pad = int((s1 - s0) * MARGIN)
    return max(trace.start_ns, s0 - pad), min(trace.end_ns, s1 + pad)


def step_range(trace: Trace, n: int) -> tuple[int, int] | None:
    """Step n across every rank that has it: first start to last end."""
    same = [s for s in trace.steps if s.step == n]
    return (min(s.start for s in same), max(s.end for s in same)) if same else None


def next_step(trace: Trace, mid: float, direction: int) -> int | None:
    """The step after (direction > 0) or before the middle of the view, by the first rank's steps."""
    if not trace.steps or not trace.ranks:
        return None
    r0 = trace.ranks[0].rank
    ordered = sorted((s for s in trace.steps if s.rank == r0), key=lambda s: s.start)
    if not ordered:
        return None
    if direction > 0:
        return next((s for s in ordered if s.start > mid), ordered[-1]).step
    return next((s for s in reversed(ordered) if s.end < mid), ordered[0]).step
