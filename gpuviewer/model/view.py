"""The range a session opens on: the profiled steps (first to last, with the GPU work they
launched and a small margin), not the whole capture, which often holds seconds of start-up
before a handful of steps. Without steps: everything."""

from __future__ import annotations

import numpy as np

from .categories import Cat
from .trace import Trace

MARGIN = 0.02


# A first step this many times the median of the others, on every rank, is warm-up (the
# analysis' rule, analysis/breakdown.WARMUP_FACTOR): nsys_ddp's 513 ms step 0 took two thirds of
# the first screen and squeezed its 20 ms steps to slivers.
WARMUP_FACTOR = 2.0


def initial_view(trace: Trace) -> tuple[int, int]:
    """The steady steps: the profiled steps without a warm-up first step (steps_view has it)."""
    v0, v1 = steps_view(trace)
    warm = warmup_step(trace)
    if warm is None:
        return v0, v1
    s0 = min(s.start for s in trace.steps if s.step != warm)
    return max(v0, s0 - int((v1 - s0) * MARGIN)), v1


def steps_view(trace: Trace) -> tuple[int, int]:
    """Every profiled step, a warm-up included."""
    got = trace.derived.get("initial_view")  # computed when the cache was written
    if got is None:
        got = trace.derived["initial_view"] = _initial_view(trace)
    return got


def warmup_step(trace: Trace) -> int | None:
    """The first step's number when it is warm-up on every rank (three steps at least)."""
    by_rank: dict[int, list] = {}
    for s in trace.steps:
        by_rank.setdefault(s.rank, []).append(s)
    if not by_rank:
        return None
    first = set()
    for steps in by_rank.values():
        steps = sorted(steps, key=lambda s: s.start)
        if len(steps) < 3:
            return None
        rest = float(np.median([s.end - s.start for s in steps[1:]]))
        if not (rest > 0 and steps[0].end - steps[0].start > WARMUP_FACTOR * rest):
            return None
        first.add(steps[0].step)
    return first.pop() if len(first) == 1 else None


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
    """Step n across every rank that has it: first start to last end (its row of step_windows)."""
    w = step_windows(trace)
    k = int(np.searchsorted(w[:, 0], n))
    return (int(w[k, 1]), int(w[k, 2])) if k < len(w) and w[k, 0] == n else None


# a view shows a step where that step's window fills this share of the view or more (a view
# inside one step names it; a view of several steps none)
SHOWN_FILL = 0.6


def step_windows(trace: Trace) -> np.ndarray:
    """(step, first start, last end) of every step number across its ranks, sorted by step, once a
    session: the step box asks on every move of the view."""
    got = trace.derived.get("step_windows")
    # clock alignment replaces the list (model.align), readers append to it before any view
    if got is None or got[0] is not trace.steps or got[1] != len(trace.steps):
        ranges: dict[int, list[int]] = {}
        for st in trace.steps:
            r = ranges.setdefault(st.step, [st.start, st.end])
            r[0], r[1] = min(r[0], st.start), max(r[1], st.end)
        win = np.array([(n, a, b) for n, (a, b) in sorted(ranges.items())], np.int64).reshape(-1, 3)
        got = trace.derived["step_windows"] = (trace.steps, len(trace.steps), win)
    return got[2]


def step_shown(trace: Trace, t0: int, t1: int) -> int | None:
    """The step the view [t0, t1] shows: the one whose window fills most of the view, where it
    fills SHOWN_FILL of it or more; ties (the ranks' windows overlap) go to the window the view
    covers most of. None for a view of several steps or of none. The step box and the step
    keys ([ and ]) both go by it."""
    w = step_windows(trace)
    if not len(w) or t1 <= t0:
        return None
    inter = np.minimum(w[:, 2], t1) - np.maximum(w[:, 1], t0)
    union = np.maximum(w[:, 2], t1) - np.minimum(w[:, 1], t0)
    fill = inter / (t1 - t0) + 1e-3 * inter / np.maximum(union, 1)
    k = int(np.argmax(fill))
    return int(w[k, 0]) if fill[k] >= SHOWN_FILL else None


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
