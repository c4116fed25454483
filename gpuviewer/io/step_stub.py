"""The ProfilerStep range a capture ends inside: `with profile(...) as p: for ...: train(); p.step()`
without a schedule opens one more ProfilerStep at the last p.step(), which the profiler's exit
closes with nothing recorded in it. Counted as a step it halved medians and made "from N steps"
one too many (HTA's MI250 trace: an empty 0.05 ms step 2 beside a 9.3 ms step 1). Told apart by
what it holds, not by its length: the rank's last step, after every other one has ended, in which
no slice but its own range starts, where every other step holds some. Not judged in a file cut
short (the events after the cut, its own among them, are missing: a real last step looks empty).
"""

from __future__ import annotations

import numpy as np

from ..model.trace import Step


def stopped_step(chunks: list[dict], steps: list[Step], own: np.ndarray) -> Step | None:
    """Of one rank's steps (its file's column chunks: start, name), the last one when nothing but
    its range (names `own`: the ProfilerStep names) starts inside it while something does in every
    other step; None when there is none such."""
    if len(steps) < 2:
        return None
    order = sorted(steps, key=lambda s: (s.start, s.end))
    last = order[-1]
    if last.start < max(s.end for s in order[:-1]):
        return None  # inside or across another step: not the range left open at the end
    if _holds(chunks, own, last.start, last.end):
        return None  # the usual case, told by one pass over the columns
    # empty: a stub only where every other step holds something (the whole sort is paid only here)
    starts = np.sort(
        np.concatenate([np.asarray(c["start"])[~np.isin(c["name"], own)] for c in chunks] or [np.zeros(0, np.int64)])
    )
    held = np.searchsorted(starts, [s.end for s in order[:-1]], "left") - np.searchsorted(
        starts, [s.start for s in order[:-1]], "left"
    )
    if not held.all():  # empty steps elsewhere: this one is like them, not a stub
        return None
    return last


def _holds(chunks: list[dict], own: np.ndarray, lo: int, hi: int) -> bool:
    """Does a slice other than a step's own range start in [lo, hi)?"""
    for c in chunks:
        start = np.asarray(c["start"])
        inside = (start >= lo) & (start < hi)
        if inside.any() and not np.isin(np.asarray(c["name"])[inside], own).all():
            return True
    return False


def duration_words(ns: int) -> str:
    return f"{ns / 1e3:,.0f} us" if ns < 1_000_000 else f"{ns / 1e6:,.2f} ms"
