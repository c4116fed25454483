"""What fixing a finding's cause would save: its what-if (whatif.py) replayed on the session's
dependency model, so the cost of a finding is the time the job would save, counted once per
wall-clock event, not a sum of the waits it caused on every rank.

A finding names its cause through its rule and metrics; CAUSES maps a rule to the change that
removes that cause (the stall's host gap removed, the late rank keeping pace with the median of
the others, no launch overhead as CUDA graphs would give, the heaviest rank's GPU work as the
median's, the collectives overlapped with the compute before them). Findings that describe a
symptom (low utilization, where a cause is found) or a cost no replay can remove (warm-up,
memory, the idle of a capture that marks no steps) get no saving: `saves_ms` stays None and
nothing is said.

What a fix saves is said for the steps its change acts in (a stall in one step: that step; a
launch overhead: every step), and findings are ordered by it: the question is what to fix first
and how much faster the steps it touches get, with how many steps those are beside it. A one-off
stall averaged over the profiled steps would shrink with the length of the capture. Severity
follows the same figure, as a share of the median profiled step (severity()), so a finding listed
first is never labelled below one listed after it.

The top-level findings are a sequence of fixes (_sequence): each one's saving is what its fix adds
to the fixes of those listed before it, so together they never claim more than a step's time (a
stall and the launch overhead around it overlap in that step), and a persistent late rank listed
after its own stall does not claim the stall's after-effect again. Nested findings (symptoms,
alternative fixes) say what their fix alone saves.

Needs the session's events (the dependency model); a Dask reduce or a summary has none, so their
findings carry no saving and keep the order of their time lost.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ..model.fmt import number_list
from ..model.trace import Trace
from . import usual_op
from .depgraph import COPY, KERNEL
from .finding_order import best_saving, minor_last, order_by_saving, severity
from .idle_gaps import launch_path, name_the_idle, name_the_waits
from .results import Analysis, Finding
from .step_figures import restate
from .whatif import Change, apply, graph, recorded, recorded_begin, replay, step_times
from .whatif_change import EVEN_SPLIT

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


def _named_host_op(trace: Trace, g, f: Finding, rank: int | None = None, recurring: bool = False) -> list[Change]:
    """A stall whose title names the host op that took longer than usual ("sleep took 50 ms more
    than usual") is fixed by that op taking its usual time (usual_op), not by removing the step's
    longest host gap: in ddp_nop2p that was a 2 ms gap beside run_backward's extra 8 ms. So is a
    host-bound gap that was one long runtime call (rank: the finding's, not a late rank;
    recurring: in each step whose gap was that call, by its extra there, where there are several)."""
    named, r = f.metrics.get("named_op"), f.metrics.get("late_rank") if rank is None else rank
    if not isinstance(named, dict) or r is None or f.step is None:
        return []
    per = {int(k): float(v) for k, v in (named.get("steps") or {}).items()} if recurring else {}
    if len(per) < 2:
        per = {int(f.step): float(named.get("excess_ms") or 0.0)}
    name = str(named.get("name"))
    out = [
        ch
        for st, ex in sorted(per.items())
        if (ch := usual_op.change(trace, g, int(r), st, name, ex, named.get("lane"))) is not None
    ]
    if len(out) > 1:  # one phrase for the fix, not one a step
        cut = sum(ch.cut_ns for ch in out) / 1e6
        out[0].label = (
            f"rank {r}'s {usual_op.ADDRESS.sub('', name)} at its usual time in each of the {len(out)} steps "
            f"its gap was that call ({cut:.1f} ms less host work in all)"
        )
        for ch in out[1:]:
            ch.label = ""
    return out


def _outlier_host_op(trace: Trace, g, f: Finding) -> list[Change]:
    """An outlier step whose named cause is a host op (JAX's '$time sleep 30.1 ms') is fixed by
    that op taking its usual time, where it is host work (not a call waiting for the GPU): half its
    extra time or more is host work the model can shorten."""
    causes = f.metrics.get("causes") or []
    lead = causes[0] if causes else None
    if not lead or lead.get("category") in _GPU_CAUSES or f.step is None or not f.ranks:
        return []
    if "nccl" in str(lead.get("name")).lower() or lead.get("category") == "communication":
        return []  # a collective's extra time is waiting for another rank (the straggler findings')
    excess = float(lead.get("excess_ms") or 0.0)
    if excess < 0.5 * max(0.0, (f.metrics.get("duration_ms") or 0.0) - (f.metrics.get("median_ms") or 0.0)):
        return []  # not named as the step's cause
    ch = usual_op.change(trace, g, int(f.ranks[0]), int(f.step), str(lead.get("name")), excess, lead.get("lane"))
    return [ch] if ch is not None and ch.cut_ns >= 0.5 * excess * 1e6 else []


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
    if r is None:
        return []
    label = EVEN_SPLIT.format(rank=r) if f.rule == "load_imbalance" else None  # moves work: an upper bound
    return [Change("rank_like_median", rank=int(r), part="gpu", label=label)]


# rule -> the changes that remove its cause
CAUSES: dict[str, Callable[[Finding], list[Change]]] = {
    "straggler": _straggler,
    # a capture that marks no steps has no usual time for the op that filled its gap, and no steady
    # state to replay: its one-time start-up is not a step's cost (said, not priced)
    # nor is the first launch of a kernel, which loads its code once (said, not priced)
    "host_bound_idle": lambda f: [] if f.metrics.get("whole_capture") or f.metrics.get("one_time") else _gap(f),
    "step_outlier": _gap,
    "launch_bound": lambda f: [Change("no_launch_overhead")],
    "pipeline_launch_bound": lambda f: [Change("no_launch_overhead")],
    # collectives at the link's speed (what P2P over it would give at best)
    "slow_link": lambda f: [Change("comm_at_peak", peak_gbps=float(f.metrics["link_gbps"]))],
    "load_imbalance": _heaviest,
    "slow_gpu": _heaviest,
    "copy_bound": lambda f: [Change("no_copies")],
    "host_sync": lambda f: [Change("no_syncs", rank=r) for r in _ranks(f)],
    "low_gpu_utilization": lambda f: [Change("no_launch_overhead")],
    # communication not hidden behind compute: the collectives overlapped with it (an upper bound,
    # overlap_comm.py); in a host-bound job that saves nothing, which is what a user should hear
    # before reworking DDP buckets or FSDP prefetch
    "exposed_communication": lambda f: [Change("overlap_comm")],
}


EVERY_RANK = ", on every rank, not only the finding's"  # said where the change does more than it names


def _fix_key(saving: str | None) -> str | None:
    """The change a saving text names, whatever it says of the ranks (one change, one cause)."""
    return saving.removesuffix(EVERY_RANK) if saving is not None else None


def _what(changes: list[Change]) -> str:
    gaps = [ch for ch in changes if ch.kind == "remove_gap"]
    rest = [d for d in (ch.describe() for ch in changes if ch.kind != "remove_gap") if d]
    if len(gaps) > 1:
        ranks = sorted({ch.rank for ch in gaps if ch.rank is not None})  # every remove_gap names its rank
        steps = sorted({ch.step for ch in gaps if ch.step is not None})
        who = f"rank {ranks[0]}" if len(ranks) == 1 else "ranks " + ", ".join(map(str, ranks))
        when = (
            "every step"
            if any(ch.step is None for ch in gaps)
            else (f"step {steps[0]}" if len(steps) == 1 else "steps " + ", ".join(map(str, steps)))
        )
        return "; ".join([f"remove the longest host gap of {who} in {when}", *rest])
    return "; ".join([*(ch.describe() for ch in gaps), *rest])


# an outlier step's causes that are GPU work of its own (a pageable copy, a kernel), not waiting
_GPU_CAUSES = ("memcpy", "memset", "kernel")


def _slow_ops(g, f: Finding) -> list[Change]:
    """An outlier step whose excess is GPU work (step_outlier: a 2.7 s pageable copy) is fixed by
    that work taking its usual time, not by a host gap: each such cause's ops on the finding's
    ranks in that step shortened by its excess over its mean in the other steps. A collective's
    excess is waiting for another rank, left to the straggler findings."""
    if f.step is None:
        return []
    out = []
    # a cause worth fixing holds a tenth of the step's excess at least (not two GEMMs 0.2 ms slower)
    floor = 0.1 * max(0.0, (f.metrics.get("duration_ms") or 0.0) - (f.metrics.get("median_ms") or 0.0))
    on = (g.kind >= KERNEL) & (g.kind <= COPY) & (g.step == int(f.step)) & np.isin(g.rank, _ranks(f))
    for c in f.metrics.get("causes") or []:
        name, ms, excess = c.get("name"), c.get("ms") or 0.0, c.get("excess_ms") or 0.0
        if (
            c.get("category") not in _GPU_CAUSES
            or not name
            or name.lower().startswith("nccl")
            or excess <= floor
            or ms <= 0
        ):
            continue
        ids = [i for i, nm in enumerate(g.names) if nm == name]
        nodes = np.flatnonzero(on & np.isin(g.name, ids))
        if len(nodes):
            out.append(
                Change(
                    "faster",
                    events=g.ev[nodes],
                    pct=min(100.0, 100.0 * excess / ms),
                    label=f"{name} of step {f.step} as long as in the other steps",
                    label_whole=True,
                )
            )
    return out


def _touched_steps(g, dur: np.ndarray, off: np.ndarray, steps) -> list[int]:
    """The steps a change acts in: those holding a node whose duration it changed or the node an
    edge it changed leads to (a host gap belongs to the step of the call after it)."""
    node = np.r_[np.flatnonzero(dur != g.dur), g.e_dst[off != g.e_off] // 2]
    hit = set(np.unique(g.step[node]).tolist()) if len(node) else set()
    return [s for s in steps if s in hit]


def _merge(a: np.ndarray, b: np.ndarray, rec: np.ndarray) -> np.ndarray:
    """Two sets of changes to the same recorded values together: what one changed it keeps, and
    where both changed a value the lesser. Not a plain minimum with the recording: a change may
    also lengthen (no launch overhead spaces a stream's ops at their usual back-to-back gap, and
    starts a kernel no sooner than the quickest launch), and a minimum with the recording dropped
    that: analyze claimed 10.7 ms a step for launch_eager where `whatif --no-launch-overhead`
    replays 10.0 (the CUDA-graph run measured 9.4)."""
    in_a, in_b = a != rec, b != rec
    out = np.where(in_b, b, a)
    both = in_a & in_b
    out[both] = np.minimum(a[both], b[both])
    return out


def _changed(
    g, changes: list[Change], args: dict[int, dict] | None, notes: list[str] | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """Durations and edge offsets with every change applied to the recording's (_merge); args: the
    NCCL kernels' collective arguments (overlap_comm tells sends by them); notes: the changes'
    notes are added to it."""
    if len(changes) == 1:  # the common case: the change as applied, nothing to merge
        d, o, said = apply(g, changes[0], args)
        if notes is not None:
            notes += said
        return d, o
    dur, off = g.dur.copy(), g.e_off.copy()
    for ch in changes:
        d, o, said = apply(g, ch, args)
        if notes is not None:
            notes += said
        dur, off = _merge(dur, d, g.dur), _merge(off, o, g.e_off)
    return dur, off


def _host_basis(ch: Change, steps: set[int]) -> str:
    """What a late rank keeping pace rests on, from its replay: its host work a step and the
    others' (medians over the measured steps the change scaled, named where not all of steps:
    nsys_ddp's 20.8 vs 16.4 ms were of warm-up step 0 and steps 3-9, read as every step's), so
    the saving can be checked."""
    got = [x for x in ch.host_scaled if x[0] in steps]
    if not got:
        return ""
    mine = float(np.median([m for _, m, _ in got])) / 1e6
    theirs = float(np.median([t for _, _, t in got])) / 1e6
    which = {s for s, _, _ in got}
    where = (
        f" in step{'s' if len(which) > 1 else ''} {number_list(sorted(which))}, where it works longer than theirs"
        if len(which) < len(steps)
        else ""
    )
    # medians of different steps: the steps' own differences said where they differ (ddp_long:
    # 48.9 against 43.7 ms, yet 0.4 ms more in the median step; an audit's finding)
    diffs = {st: (m - t) / 1e6 for st, m, t in got}
    diff = float(np.median(list(diffs.values())))
    paired = f"; step by step, a median {diff:.1f} ms more" if abs(mine - theirs - diff) >= 0.5 else ""
    lo, hi = min(diffs.values()), max(diffs.values())
    if len(diffs) > 1 and hi >= 2 * max(diff, 0.05) and hi - diff >= 1.0:
        # each step is scaled to the others' in it: one step far apart from the median said
        # (tp: 58.1 against 35.3 ms in step 2, 6 ms apart in the others; 'a median 56.8 ms,
        # the others' 50.5 ms' hid it and its saving; an audit)
        top = max(diffs, key=lambda x: diffs[x])
        span = f"{lo:.1f} to {hi:.1f} ms" if lo >= 0 else f"{-lo:.1f} ms less to {hi:.1f} ms"
        paired = (
            f"{paired} ({span}, the most in step {top})"
            if paired
            else f"; step by step {span} more, the most in step {top}"
        )
    return (
        f" (rank {ch.rank}'s host works a median {mine:.1f} ms a step{where}, the others' {theirs:.1f} ms{paired}; "
        "waits for the GPU left out)"
    )


class _Start:
    """What a saving is measured against: the recording, or the recording with the fixes of the
    findings listed before (durations, offsets and the step times they give)."""

    def __init__(
        self, g, rec, base: dict[int, int], args: dict[int, dict] | None = None, capture: bool = False
    ) -> None:
        self.g, self.rec, self.base, self.args = g, rec, base, args
        # the one "step" is a whole capture without step marks: its time is said with the saving
        self.capture_ms = round(sum(base.values()) / 1e6, 3) if capture and len(base) == 1 else None
        self.dur, self.off, self.times = g.dur, g.e_off, base
        self.fixed = 0  # how many findings' fixes it holds
        # each step as the findings listed so far leave it, as their sentences add up: recorded
        # less their savings (what a later saving's share is of)
        self.left = {k: float(v) for k, v in base.items()}
        # one yardstick for every finding's severity: the recorded median step (a share of each
        # finding's own steps would rank a later, smaller saving above an earlier, larger one)
        self.median_step = float(np.median(list(base.values()))) if base else 0.0
        # a fix acts in the measured steps: a warm-up step kept as recorded (made shorter, it moved
        # the next step's start earlier, and that step, its end held by other work, took longer:
        # nsys_ddp's keep-pace fix 'saved' -1.5 ms in step 1 from a shorter step 0)
        warm = [s_ for s_ in g.steps() if s_ not in base]
        self.warm_node = np.isin(g.step, warm)  # all False where no step is warm-up
        self.warm_edge = self.warm_node[g.e_dst // 2]
        self._kept: dict[int, tuple] = {}  # _own's, by the id of the list of changes

    def _own(self, changes: list[Change]) -> tuple[np.ndarray, np.ndarray, list[int]]:
        """A finding's changes applied to the recording (warm-up steps kept as recorded) and the
        steps they act in: the same each time _sequence measures it again on later fixes, so
        kept (as the values that differ from the recording's: a few megabytes a finding at 64
        ranks), with the list itself, so its id names no other list while kept (launch_path's
        one-off lists too, unused again: a start lives for one analysis)."""
        g = self.g
        got = self._kept.get(id(changes))
        if got is not None and got[0] is changes:
            _, dn, dv, en, ev, acted = got
            dur, off = g.dur.copy(), g.e_off.copy()
            dur[dn], off[en] = dv, ev
            return dur, off, acted
        dur, off = _changed(g, changes, self.args)
        if self.warm_node.any():
            dur = np.where(self.warm_node, g.dur, dur)
            off = np.where(self.warm_edge, g.e_off, off)
        acted = _touched_steps(g, dur, off, sorted(self.base)) or sorted(self.base)
        dn, en = np.flatnonzero(dur != g.dur), np.flatnonzero(off != g.e_off)
        self._kept[id(changes)] = (changes, dn, dur[dn], en, off[en], acted)
        return dur, off, acted

    def floor(self, state: tuple) -> tuple[np.ndarray, np.ndarray, dict[int, int]]:
        """The first fix made as later fixes are measured on it: each value the least of the fix's
        and the recording's, replayed (the same rule as measure's on top of earlier fixes, so a
        later saving is measured against the times it is combined with)."""
        g, base = self.g, self.base
        dur, off = np.minimum(state[0], g.dur), np.minimum(state[1], g.e_off)
        after = step_times(g, replay(g, dur, off, base=self.rec), recorded_begin(g))
        return dur, off, {s: after.get(s, base[s]) for s in base}

    def measure(self, f: Finding, changes: list[Change]) -> tuple[np.ndarray, np.ndarray, dict[int, int]]:
        """Set f's saving (its changes on top of this start); returns the durations, offsets and
        step times with them."""
        g, base = self.g, self.base
        own_dur, own_off, acted = self._own(changes)
        if self.fixed:
            # on top of earlier fixes: the least of each value (what a fix lengthens is left out:
            # exact for the first finding, an approximation after it; merging exactly made two
            # fixes that help each other list out of order, ddp_nop2p's link and elementwise)
            dur = np.minimum(np.minimum(own_dur, g.dur), self.dur)
            off = np.minimum(np.minimum(own_off, g.e_off), self.off)
        else:  # against the recording: the change as the whatif command applies it
            dur, off = own_dur, own_off
        after = step_times(g, replay(g, dur, off, base=self.rec), recorded_begin(g))
        before = self.times
        per = {s: before.get(s, base[s]) - after.get(s, before.get(s, base[s])) for s in base}
        saved = max(0, sum(per.values()))
        in_acted = max(0, sum(per[s] for s in acted)) if saved > 0 else 0
        n, total = len(base), sum(base.values())
        f.saves_ms = round(saved / 1e6, 3)
        f.saves_ms_per_step = round(saved / 1e6 / n, 3)
        f.saves_pct = round(saved / total, 4) if total else 0.0
        f.saves_steps = list(acted)  # (the kept list is _own's, shared by every measure of these changes)
        f.saves_ms_by_step = {str(s): round(v / 1e6, 3) for s, v in sorted(per.items())}
        f.saves_ms_in_steps = round(in_acted / 1e6 / len(acted), 3)
        acted_base = sum(self.left.get(s, base[s]) for s in acted)
        f.saves_pct_in_steps = round(in_acted / acted_base, 4) if acted_base else 0.0
        f.steps_profiled = n
        f.saves_after_above = self.fixed > 0
        f.capture_ms = self.capture_ms
        f.saving = _what(changes)
        late = next((ch for ch in changes if ch.kind == "rank_like_median"), None)
        if late is not None:
            f.saving += _host_basis(late, set(base))
        ranks = set(self.g.host_nodes)
        if any(ch.kind == "no_launch_overhead" for ch in changes) and len(ranks) > 1 and not ranks <= set(f.ranks):
            # the replay takes the overhead off every rank: tp's 46 ms needs both, its finding
            # names rank 0 (an expert audit: rank 0's alone saves about 6 ms)
            f.saving += EVERY_RANK
        f.severity = severity(f.saves_ms_in_steps * 1e6 / self.median_step if self.median_step else 0.0)
        return dur, off, {s: after.get(s, before.get(s, base[s])) for s in base}


def attach_savings(trace: Trace, analysis: Analysis, args: dict[int, dict] | None = None) -> None:
    """Set saves_ms (over the profiled steps), saves_ms_per_step, saves_pct and saving (the change,
    in words) on every finding whose cause has a change, with the steps the change acts in and
    what it saves in them (saves_steps, saves_ms_by_step, saves_ms_in_steps: a stall in one step
    saves its time in that step, not a third of it in each of three), then order the findings by
    that (_sequence: the top-level ones as fixes made one after another)."""
    wanted = [f for f in analysis.all_findings() if f.rule in CAUSES or f.fix]
    if not wanted:
        return
    if len(trace) > MAX_EVENTS:
        analysis.notes.append(
            f"what fixing each finding would save is not computed for sessions over "
            f"{MAX_EVENTS:,} events ({len(trace):,} here)"
        )
        return
    try:
        g = graph(trace, args)
    except (ValueError, IndexError) as e:  # a session the model cannot hold (no steps, no launches)
        analysis.notes.append(f"what fixing each finding would save is not computed: {e}")
        return
    for r, a in sorted(g.gpu_ahead.items()):  # said where the findings are read, not only by whatif
        analysis.notes.append(
            f"rank {r}'s GPU clock runs {a / 1e6:.2f} ms ahead of its host's (a device-wide sync returned before "
            "the work launched before it ended): the critical paths and savings take its GPU times that much earlier"
        )
    rec = recorded(g)
    # the steps the analysis measures: a warm-up step's one-time costs are no fix's saving
    warm = {s.step for rb in analysis.breakdowns for s in rb.steps if s.warmup}
    times = step_times(g, rec)
    base = {k: v for k, v in times.items() if k not in warm}
    if trace.steps:  # (a capture without steps is one "step", whose sentences say so)
        restate(analysis, times, base)
    if not base:  # nothing to re-time: said, not silently absent
        analysis.notes.append("what fixing each finding would save is not computed: no profiled steps to replay")
        return
    start = _Start(g, rec, base, args, capture=not trace.steps)
    changes_of: dict[int, list[Change]] = {}
    top = {id(f) for f in analysis.findings}
    explained = any(f.rule in CAUSES and f.rule != "low_gpu_utilization" for f in analysis.findings)
    for f in wanted:
        if f.rule == "low_gpu_utilization":
            # a GPU mostly idle that no finding explains (memory_pressure: 41% idle, in gaps longer
            # than launch_bound's, the host loop on the critical path): priced as the launches
            # without host time between them (CUDA graphs, torch.compile). Where a cause is
            # found (a late rank, a stall, launch-bound), its fix is what to price; and a capture
            # without a training loop's steps (one whole-capture step: set-up, autotuning, a
            # benchmark's host work) is no launch overhead to remove
            if explained or len(base) < 2 or id(f) not in top or f.metrics.get("mostly") != "idle":
                continue
            # what the launch path alone saves, beside the bound: on nccl_parser_config most of
            # the bound is the host's framework work in gaps of 0.1-1 ms, not launches
            name_the_idle(trace, analysis.breakdowns, f, launch_path(f, start.measure))
        if f.metrics.get("host_paced") and len(base) >= 2:  # as low utilization's, said of the host's pace
            name_the_waits(trace, analysis.breakdowns, f, launch_path(f, start.measure))
        changes = f.fix or CAUSES[f.rule](f)
        if f.rule == "step_outlier":
            changes = (_outlier_host_op(trace, g, f) or changes) + _slow_ops(g, f)
        if f.rule == "straggler" and not f.fix:
            changes = _named_host_op(trace, g, f) or changes
        if f.rule == "host_bound_idle" and f.ranks and not f.metrics.get("one_time"):
            # the gap was one long runtime call (not time between host ops): that call at its usual
            # time, in its step, or in each step whose gap was that call too (removing the host gap
            # instead left the call's time: 0.2 of 6.5 ms a step)
            changes = _named_host_op(trace, g, f, rank=int(f.ranks[0]), recurring=True) or changes
        if not changes:
            continue
        try:
            start.measure(f, changes)  # each alone, against the recording
        except ValueError:  # the change does not apply (a rank or step the model lacks)
            continue
        f.saves_ms_alone_in_steps, f.saves_ms_alone_by_step = f.saves_ms_in_steps, f.saves_ms_by_step
        changes_of[id(f)] = changes
    _promote(analysis, changes_of)
    _one_fix_once(analysis)
    _sequence(analysis.findings, start, changes_of)
    _unmeasured(analysis.findings, None)
    minor_last(analysis.findings)
    for f in analysis.findings:
        order_by_saving(f.children)


def _sequence(fs: list[Finding], start: _Start, changes_of: dict[int, list[Change]]) -> None:
    """Order the top-level findings as a user would fix them: first the one whose fix saves most
    in the steps it acts in (or a cause nested under it does), then, with that fix made, the one
    that saves most on top of it, and so on. Each one's saving is what its fix adds to those
    listed before it (said in its text), so the top-level savings add up to what all of them
    together save, never more than a step's time: causes that overlap in a step (a stall and the
    launch overhead around it) are not counted twice. Findings without a saving of their own are
    placed by their children's; those with none keep their order at the end."""
    done: list[Finding] = []
    pending = [f for f in fs if id(f) in changes_of]
    made: dict[int, tuple] = {}  # a candidate's durations, offsets and step times on the current start
    while pending:
        f = max(pending, key=lambda x: (best_saving(x) or 0.0, -fs.index(x)))
        if start.fixed:
            # its causes and symptoms with their own fix: measured on the same fixes above (alone,
            # gpu_straggler's rank-1 GPU "would not make the steps measurably faster" under a late
            # rank saving 5.8 ms once the launch overhead is gone); the alone figure kept beside
            _chained_children(f, start, changes_of)
            start.dur, start.off, start.times = made.get(id(f)) or start.measure(f, changes_of[id(f)])
        else:  # the first: its saving is the one measured alone against the recording (attach_savings)
            dur, off, _acted = start._own(changes_of[id(f)])
            start.dur, start.off, start.times = start.floor((dur, off))
        start.fixed += 1
        for k, v in (f.saves_ms_by_step or {}).items():
            if int(k) in start.left:
                start.left[int(k)] -= v * 1e6
        done.append(f)
        pending.remove(f)
        # every other saving measured again on top of it: one fix can make another's larger (no
        # launch overhead leaves the GPU's kernels on the critical path), so none is kept stale
        made = {id(x): start.measure(x, changes_of[id(x)]) for x in pending}
    # findings whose saving is their children's: where that saving falls among the sequence
    for f in sorted(
        (f for f in fs if id(f) not in changes_of and best_saving(f) is not None),
        key=lambda x: -(best_saving(x) or 0.0),
    ):
        at = next((i for i, x in enumerate(done) if (best_saving(x) or 0.0) < (best_saving(f) or 0.0)), len(done))
        done.insert(at, f)
    rest = [f for f in fs if f not in done]
    fs[:] = done + rest


def _chained_children(f: Finding, start: _Start, changes_of: dict[int, list[Change]]) -> None:
    for c in f.children:
        if id(c) in changes_of:
            alone = c.saves_ms_alone_in_steps, c.saves_ms_alone_by_step
            start.measure(c, changes_of[id(c)])
            c.saves_ms_alone_in_steps, c.saves_ms_alone_by_step = alone
            c.saves_beside_cause = True
        _chained_children(c, start, changes_of)


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


# what keeps a GPU from computing: a cause with its own fix, nested under a late rank because the
# same host starves both (merge.attach)
_OWN_CAUSES = ("launch_bound", "host_bound_idle", "copy_bound")


def _promote(analysis: Analysis, changes_of: dict[int, list[Change]]) -> None:
    """A cause nested under another finding whose own fix saves more than that finding's fix
    becomes a top-level finding: tp's late rank 0 (keeping pace saves 11.5 ms a step) held its
    launch-bound GPU (no launch overhead saves 46.2 ms) as if it were a symptom, so the larger fix
    read as a detail of the smaller. Placed after its old parent; _sequence orders them."""
    out: list[Finding] = []
    for f in analysis.findings:
        out.append(f)
        if f.saves_ms_in_steps is None:
            continue
        for c in list(f.children):
            if (
                c.rule in _OWN_CAUSES
                and id(c) in changes_of
                and _fix_key(c.saving) != _fix_key(f.saving)
                and (c.saves_ms_in_steps or 0.0) > f.saves_ms_in_steps
            ):
                f.children.remove(c)
                out.append(c)
    analysis.findings[:] = out


def _one_fix_once(analysis: Analysis) -> None:
    """Top-level findings that one and the same change fixes (launch-bound ranks and a
    launch-bound pipeline stage) are one cause: the later nests under the first, so a saving is
    never counted twice at the top."""
    first: dict[str, Finding] = {}
    kept = []
    for f in analysis.findings:
        key = _fix_key(f.saving)
        holder = first.get(key) if key is not None else None
        if holder is None:
            if key is not None:
                first[key] = f
            kept.append(f)
        else:
            holder.children.append(f)
    analysis.findings[:] = kept
