"""The range a session opens on: the profiled steps (first to last, with the GPU work they
launched and a small margin), not the whole capture, which often holds seconds of start-up
before a handful of steps. Without steps: everything."""
from __future__ import annotations

import numpy as np

from .categories import Cat
from .trace import Trace

MARGIN = 0.02


def initial_view(trace: Trace) -> tuple[int, int]:
    got = trace._lane_cache.get("initial_view")  # computed when the cache was written
    if got is None:
        got = trace._lane_cache["initial_view"] = _initial_view(trace)
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
