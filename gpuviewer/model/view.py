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
    """Step n across every rank that has it: first start to last end."""
    same = [s for s in trace.steps if s.step == n]
    return (min(s.start for s in same), max(s.end for s in same)) if same else None


def step_shown(trace: Trace, t0: int, t1: int) -> int | None:
    """The step the view [t0, t1] shows: the one whose range (step_range) it matches best, by the
    share of the union of the two that they have in common; None when it overlaps no step."""
    best, score = None, 0.0
    for n in sorted({s.step for s in trace.steps}):
        rng = step_range(trace, n)
        if rng is None:
            continue
        common = min(t1, rng[1]) - max(t0, rng[0])
        if common <= 0:
            continue
        share = common / (max(t1, rng[1]) - min(t0, rng[0]))
        if share > score:
            best, score = n, share
    return best


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
