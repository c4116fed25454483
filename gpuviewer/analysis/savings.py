"""What fixing a finding's cause would save: its what-if (whatif.py) replayed on the session's
dependency model, so the cost of a finding is the time the job would save, counted once per
wall-clock event, not a sum of the waits it caused on every rank.

A finding names its cause through its rule and metrics; CAUSES maps a rule to the change that
removes that cause (the stall's host gap removed, the late rank keeping pace with the median of
the others, no launch overhead as CUDA graphs would give, the heaviest rank's GPU work as the
median's). Findings that describe a symptom (low utilization, exposed communication) or a cost
no replay can remove (warm-up, memory) get no saving: `saves_ms` stays None and nothing is said.

Needs the session's events (the dependency model); a Dask reduce or a summary has none, so their
findings carry no saving and keep the order of their time lost.
"""
from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ..model.trace import Trace
from .results import Analysis, Finding
from .whatif import Change, apply, graph, recorded, replay, step_times

# Larger sessions are left without savings for now: building and replaying their model takes
# seconds per finding (say so, never a silent absence).
MAX_EVENTS = 3_000_000


def _ranks(f: Finding) -> list[int]:
    return [int(r) for r in f.ranks]


def _straggler(f: Finding) -> list[Change]:
    late = f.metrics.get("late_rank")
    if late is None:
        return []
    if f.step is not None:  # one stall: its host gap in that step removed
        return [Change("remove_gap", rank=int(late), step=int(f.step))]
    return [Change("rank_like_median", rank=int(late))]  # a persistent late rank keeps pace


def _steps(f: Finding) -> list[int | None]:
    """The steps a finding is about: the ones its metrics list when it recurs, else its own step
    (None: every step)."""
    listed: list[int | None] = [int(s) for s in f.metrics.get("steps") or [] if isinstance(s, (int, float))]
    if len(listed) > 1:
        return listed
    gaps = [g for g in f.metrics.get("gaps_ms") or [] if isinstance(g, (int, float))]
    if sum(g >= 1.0 for g in gaps) > 1:  # a host-bound gap that recurs: every step's
        return [None]
    return [None if f.step is None else int(f.step)]


def _gap(f: Finding) -> list[Change]:
    return [Change("remove_gap", rank=r, step=s) for r in _ranks(f) for s in _steps(f)]


def _heaviest(f: Finding) -> list[Change]:
    r = f.metrics.get("heaviest_rank")
    return [] if r is None else [Change("rank_like_median", rank=int(r), part="gpu")]


# rule -> the changes that remove its cause
CAUSES: dict[str, Callable[[Finding], list[Change]]] = {
    "straggler": _straggler,
    "host_bound_idle": _gap,
    "step_outlier": _gap,
    "launch_bound": lambda f: [Change("no_launch_overhead")],
    "pipeline_launch_bound": lambda f: [Change("no_launch_overhead")],
    # collectives at the link's speed (what P2P over it would give at best)
    "slow_link": lambda f: [Change("comm_at_peak", peak_gbps=float(f.metrics["link_gbps"]))],
    "load_imbalance": _heaviest,
    "slow_gpu": _heaviest,
    "copy_bound": lambda f: [Change("no_copies")],
}


def _what(changes: list[Change]) -> str:
    if len(changes) > 1 and all(ch.kind == "remove_gap" for ch in changes):
        ranks = sorted({ch.rank for ch in changes if ch.rank is not None})  # every remove_gap names its rank
        steps = sorted({ch.step for ch in changes if ch.step is not None})
        who = f"rank {ranks[0]}" if len(ranks) == 1 else "ranks " + ", ".join(map(str, ranks))
        when = "every step" if any(ch.step is None for ch in changes) else \
            (f"step {steps[0]}" if len(steps) == 1 else "steps " + ", ".join(map(str, steps)))
        return f"remove the longest host gap of {who} in {when}"
    return "; ".join(ch.describe() for ch in changes)


def attach_savings(trace: Trace, analysis: Analysis, args: dict[int, dict] | None = None) -> None:
    """Set saves_ms (over the profiled steps), saves_ms_per_step, saves_pct and saving (the change,
    in words) on every finding whose cause has a change, then order the top-level findings by
    what they save (those without a saving after, in their order)."""
    wanted = [f for f in analysis.all_findings() if f.rule in CAUSES or f.fix]
    if not wanted:
        return
    if len(trace) > MAX_EVENTS:
        analysis.notes.append(f"what fixing each finding would save is not computed for sessions over "
                              f"{MAX_EVENTS:,} events ({len(trace):,} here)")
        return
    try:
        g = graph(trace, args)
    except (ValueError, IndexError) as e:  # a session the model cannot hold (no steps, no launches)
        analysis.notes.append(f"what fixing each finding would save is not computed: {e}")
        return
    rec = recorded(g)
    # the steps the analysis measures: a warm-up step's one-time costs are no fix's saving
    warm = {s.step for rb in analysis.breakdowns for s in rb.steps if s.warmup}
    base = {k: v for k, v in step_times(g, rec).items() if k not in warm}
    if not base:  # nothing to re-time: said, not silently absent
        analysis.notes.append("what fixing each finding would save is not computed: no profiled steps to replay")
        return
    total_base = sum(base.values())
    n = len(base)
    for f in wanted:
        changes = f.fix or CAUSES[f.rule](f)
        if not changes:
            continue
        dur, off = g.dur.copy(), g.e_off.copy()
        try:
            for ch in changes:  # each change only shortens: together, the least of each
                d, o, _notes = apply(g, ch)
                np.minimum(dur, d, out=dur)
                np.minimum(off, o, out=off)
        except ValueError:  # the change does not apply (a rank or step the model lacks)
            continue
        after = step_times(g, replay(g, dur, off, base=rec))
        saved = max(0, sum(base[s] - after.get(s, base[s]) for s in base))
        f.saves_ms = round(saved / 1e6, 3)
        f.saves_ms_per_step = round(saved / 1e6 / n, 3)
        f.saves_pct = round(saved / total_base, 4) if total_base else 0.0
        f.saving = _what(changes)
        f.severity = severity(f.saves_pct)
    _one_fix_once(analysis)
    _unmeasured(analysis.findings, None)
    _order(analysis.findings)


_RANK = {"low": 0, "medium": 1, "high": 2}


def _unmeasured(fs: list[Finding], parent: str | None) -> None:
    """Severity follows the saving also where no what-if measures one: such a finding is never
    "high" (nothing says fixing it saves much), and a symptom never outranks its cause."""
    for f in fs:
        if f.saves_ms is None:
            cap = "medium" if parent is None else min(parent, "medium", key=_RANK.__getitem__)
            if _RANK.get(f.severity, 0) > _RANK[cap]:
                f.severity = cap
        _unmeasured(f.children, f.severity if f.severity in _RANK else None)


def _one_fix_once(analysis: Analysis) -> None:
    """Top-level findings that one and the same change fixes (launch-bound ranks and a
    launch-bound pipeline stage) are one cause: the later nests under the first, so a saving is
    never counted twice at the top."""
    first: dict[str, Finding] = {}
    kept = []
    for f in analysis.findings:
        holder = first.get(f.saving) if f.saving is not None else None
        if holder is None:
            if f.saving is not None:
                first[f.saving] = f
            kept.append(f)
        else:
            holder.children.append(f)
    analysis.findings[:] = kept


def severity(share: float) -> str:
    """A finding's severity from what fixing it saves: a tenth of the steps' time or more is
    high, a fiftieth medium, less low (so no "high" finding saves nothing)."""
    return "high" if share >= 0.10 else "medium" if share >= 0.02 else "low"


def _best(f: Finding) -> float | None:
    """The most a finding or a cause nested under it saves (None: nothing in it has a saving)."""
    got = [x for x in [f.saves_ms, *(_best(c) for c in f.children)] if x is not None]
    return max(got) if got else None


def _order(fs: list[Finding]) -> None:
    """What a fix would save first, at every level (a finding by the most it or anything under it
    saves); ties and findings without a saving keep the analysis' order."""
    order = {id(f): i for i, f in enumerate(fs)}
    fs.sort(key=lambda f: (_best(f) is None, -(_best(f) or 0.0), order[id(f)]))
    for f in fs:
        _order(f.children)
