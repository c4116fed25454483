"""The order findings are listed in: what fixing them saves first (savings.py measures it), the
findings without a what-if by their evidence beside them, the notes last; and a finding's severity
from its saving."""

from __future__ import annotations

from .results import Finding


def severity(share: float) -> str:
    """A finding's severity from what fixing it saves a step it acts in, as a share of the median
    profiled step: a tenth or more is high, a fiftieth medium, less low (so no "high" finding saves
    nothing, and the label falls with the findings' order)."""
    return "high" if share >= 0.10 else "medium" if share >= 0.02 else "low"


NOTES = ("thin_data", "warmup", "all_to_all")  # say how to read the rest, judge nothing


def minor_last(fs: list[Finding]) -> None:
    """Top level: a finding whose fix saves under 2% of a step ('low') is listed after the findings
    without a what-if that the evidence rates medium or high (memory_pressure's 89%-full GPU
    came third, under 'fuse elementwise ops: 0.1 ms'); one saving under 1% (nothing a user would
    measure) after the low ones too, but for the notes (HTA's alexnet led with TF32 matmuls for
    0.9 ms of a 42.9 s capture above the start-up that fills it; an audit); each group keeps its
    order, so the savings still add up in the order listed."""

    # the measured ones under 1% from the last up (a saving 'with the findings above fixed' keeps
    # every finding it was measured after above it)
    tiny: set[int] = set()
    for f in reversed(fs):
        if best_saving(f) is None:
            continue
        if f.severity != "low" or _best_pct(f) >= 0.01:
            break
        tiny.add(id(f))

    def group(f: Finding) -> int:
        if f.severity != "low":
            return 0 if best_saving(f) is not None else 1
        if best_saving(f) is None:
            return 5 if f.rule in NOTES else 3
        return 4 if id(f) in tiny else 2

    fs[:] = sorted(fs, key=group)  # stable


def _best_pct(f: Finding) -> float:
    """The most f or a cause under it saves, as a share of the steps it acts in."""
    got = [x for x in [f.saves_pct_in_steps, *(_best_pct(c) for c in f.children)] if x is not None]
    return max(got) if got else 0.0


def best_saving(f: Finding) -> float | None:
    """The most a finding or a cause nested under it saves in the steps its cause acts in, per
    such step (None: nothing in it has a saving): what a user asks first, how much faster the
    steps it touches get; how many steps those are is said beside it."""
    got = [x for x in [f.saves_ms_in_steps, *(best_saving(c) for c in f.children)] if x is not None]
    return max(got) if got else None


def order_by_saving(fs: list[Finding]) -> None:
    """What a fix would save first, at every level (a finding by the most it or anything under it
    saves); ties and findings without a saving keep the analysis' order."""
    order = {id(f): i for i, f in enumerate(fs)}
    fs.sort(key=lambda f: (best_saving(f) is None, -(best_saving(f) or 0.0), order[id(f)]))
    for f in fs:
        order_by_saving(f.children)
