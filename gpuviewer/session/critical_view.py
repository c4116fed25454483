"""Each step's critical path as the window shows it (Qt-free): the segments of the analysis'
steps[].critical_path (analysis.critical_path, computed with the analysis on its worker), each
placed on the timeline lane that ran it, as flat arrays a render layer draws without a Python
loop per segment, and each step's rows for its details (rank, resource, what, duration, share).

A segment names its rank and resource, not a lane: host segments go to the host thread (CPU or
CUDA API lane) whose events cover most of the segment, gpu/copy to the busiest GPU stream there,
comm to the busiest NCCL (else GPU) stream; an idle segment (a gap: nothing covers it) goes to
the lane of the path beside it on the same rank, else the rank's first GPU stream. Where the
segment names an op ('host work (clock_nanosleep 49.3 ms of it) ...', 'cudaMalloc (and 68 more)'),
that op's longest stretch inside the segment on the rank is its event (the window selects it) and
its lane the segment's: nsys_ddp's planted sleep was outlined on an empty autograd thread's CUDA API
lane while the clock_nanosleep it names lay in the folded OS runtime group (an audit of the window).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import numpy as np

from ..analysis.critical_path import OWN
from ..analysis.stragglers import ADDRESS
from ..model.categories import GPU_LANE_KINDS, LaneKind
from ..model.trace import Trace

RESOURCES = ("host", "gpu", "comm", "copy", "idle")
_LANES_OF = {
    "host": (LaneKind.CPU, LaneKind.CUDA_API),
    "gpu": (LaneKind.GPU,),
    "copy": (LaneKind.GPU,),
    "comm": (LaneKind.COMM, LaneKind.GPU),
}
# where a segment's named op may lie: the host's threads and their OS calls, or the GPU's streams
_NAMED_IN = {"host": (LaneKind.CPU, LaneKind.CUDA_API, LaneKind.OSRT, LaneKind.NVTX)}
_OP_OF_HOST_WORK = re.compile(
    r"^host work \((.+?)(?:" + re.escape(OWN) + r")? (\d+(?:\.\d+)?) ms of it(; the op: [\d.]+ ms)?\)"
)
_TAILS = (" (and ", " transfer (last arrival", " returns")
_BEFORE = (" queued ", " waits for ")  # 'X queued 3.1 ms behind ...', 'X waits for Y on another stream'


@dataclass
class StepPath:
    step: int
    start_ns: int
    end_ns: int
    bound_by: str
    first: int  # index of its first segment in PathView's arrays
    count: int
    warmup: bool = False

    @property
    def duration_ns(self) -> int:
        return self.end_ns - self.start_ns


@dataclass
class PathView:
    """Every step's segments in path order, flat: start/end (ns), rank, res (index into
    RESOURCES), lane (-1: none found), step, what; steps by number."""

    start: np.ndarray
    end: np.ndarray
    rank: np.ndarray
    res: np.ndarray
    lane: np.ndarray
    step: np.ndarray
    what: list[str]
    steps: dict[int, StepPath] = field(default_factory=dict)
    bound_by: str | None = None
    windows: dict[int, tuple[int, int]] = field(default_factory=dict)  # step -> its ranks' first start, last end
    event: np.ndarray | None = None  # per segment, the event of the op it names (-1: none)
    said: dict[int, str] = field(default_factory=dict)  # a segment's text as the tab lists it, where not `what`
    whole: bool = False  # the session marks no steps: its one 'step' is the whole capture

    def __len__(self) -> int:
        return len(self.start)

    def step_at(self, t_ns: int) -> StepPath | None:
        """The step whose path holds time t (the nearest step's when t lies outside them all)."""
        if not self.steps:
            return None
        for sp in self.steps.values():
            if sp.start_ns <= t_ns < sp.end_ns:
                return sp
        return min(self.steps.values(), key=lambda sp: min(abs(sp.start_ns - t_ns), abs(sp.end_ns - t_ns)))

    def step_in(self, t0: int, t1: int) -> StepPath | None:
        """The step a view of [t0, t1] shows: the one whose window on the timeline (its ranks'
        steps, first start to last end) matches the view best (overlap over union), so going to
        a step lists that step even where a stalled rank's step reaches into the next path's
        time; the step at the view's middle when no window meets the view."""
        best, score = None, 0.0
        for n, (lo, hi) in self.windows.items():
            inter = min(hi, t1) - max(lo, t0)
            if n in self.steps and inter > 0:
                sc = inter / (max(hi, t1) - min(lo, t0))
                if sc > score:
                    best, score = self.steps[n], sc
        return best if best is not None else self.step_at((t0 + t1) // 2)

    def rows(self, step: int) -> list[dict]:
        """The step's segments in order: rank, resource, what, start/end (ns), duration (ms),
        share of the step, lane, and index (into the arrays)."""
        sp = self.steps.get(step)
        if sp is None:
            return []
        total = max(sp.duration_ns, 1)
        out = []
        for i in range(sp.first, sp.first + sp.count):
            d = int(self.end[i] - self.start[i])
            out.append(
                {
                    "index": i,
                    "rank": int(self.rank[i]),
                    "resource": RESOURCES[int(self.res[i])],
                    "what": self.said.get(i, self.what[i]),
                    "start_ns": int(self.start[i]),
                    "end_ns": int(self.end[i]),
                    "duration_ms": d / 1e6,
                    "share": d / total,
                    "lane": int(self.lane[i]),
                    "event": int(self.event[i]) if self.event is not None else -1,
                }
            )
        return out


def _int(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and -(1 << 62) <= v <= (1 << 62)


def _step_ok(st) -> bool:
    return (
        isinstance(st, dict)
        and _int(st.get("step"))
        and _int(st.get("start_ns"))
        and _int(st.get("end_ns"))
        and isinstance(st.get("critical_path") or [], list)
    )


def _segment_ok(s) -> bool:
    return (
        isinstance(s, dict)
        and _int(s.get("rank"))
        and _int(s.get("start_ns"))
        and _int(s.get("end_ns"))
        and isinstance(s.get("resource"), str)
        and isinstance(s.get("what", ""), str)
    )


def path_view(trace: Trace, analysis) -> PathView | None:
    """The analysis' critical paths placed on the trace's lanes; None when it has none (a
    session over the model's size, or without launches: analysis.notes says why)."""
    steps = getattr(analysis, "steps", None) or []
    if not steps or not isinstance(steps, list):
        return None
    segs: list[tuple[int, dict]] = []
    sps: dict[int, StepPath] = {}
    for st in steps:
        if not _step_ok(st):  # a summary's analysis.json is the user's file: skip what is not a step
            continue
        cp = [s for s in st.get("critical_path") or [] if _segment_ok(s)]
        sps[int(st["step"])] = StepPath(
            int(st["step"]),
            int(st["start_ns"]),
            int(st["end_ns"]),
            str(st.get("bound_by") or ""),
            len(segs),
            len(cp),
            bool(st.get("warmup")),
        )
        segs.extend((int(st["step"]), s) for s in cp)
    n = len(segs)
    start = np.fromiter((s["start_ns"] for _, s in segs), np.int64, n)
    end = np.fromiter((s["end_ns"] for _, s in segs), np.int64, n)
    rank = np.fromiter((s["rank"] for _, s in segs), np.int64, n)
    res = np.fromiter(
        (RESOURCES.index(s["resource"]) if s["resource"] in RESOURCES else 4 for _, s in segs), np.int8, n
    )
    step = np.fromiter((k for k, _ in segs), np.int64, n)
    view = PathView(
        start,
        end,
        rank,
        res,
        np.full(n, -1, np.int64),
        step,
        [s.get("what", "") for _, s in segs],
        sps,
        getattr(analysis, "bound_by", None),
    )
    view.whole = not trace.steps
    for st in trace.steps:
        lo, hi = view.windows.get(st.step, (st.start, st.end))
        view.windows[st.step] = (min(lo, st.start), max(hi, st.end))
    _place(trace, view)
    _name_events(trace, view)
    return view


def named_op(what: str) -> str | None:
    """The op a segment's text names, None where it names none: 'host work (NAME 49.3 ms of it)
    before ...' gives NAME ('no op recorded' none), 'NAME (and 68 more)', 'NAME returns', 'NAME
    transfer (...)' give NAME; 'host work before X', 'launch of X' and a stream gap name the op the
    path goes on to, not what it did, and give none."""
    m = _OP_OF_HOST_WORK.match(what)
    if m is not None:
        return None if m.group(1).startswith("no op recorded") else m.group(1)
    if what.startswith(("host work", "launch of ", "stream gap before ", "?")) or not what:
        return None
    for tail in _BEFORE:  # the segment is the time before that op: its event is the one after it
        if tail in what:
            return what[: what.find(tail)] or None
    cut = min((k for k in (what.find(t) for t in _TAILS) if k > 0), default=len(what))
    return what[:cut] or None


def _name_events(trace: Trace, view: PathView) -> None:
    """view.event (and view.lane where found): each segment's named op, its event on the rank
    overlapping the segment most (module docstring)."""
    n = len(view)
    view.event = np.full(n, -1, np.int64)
    want: dict[tuple[int, str, str], list[int]] = {}  # (rank, resource kind, op) -> segments
    for i in range(n):
        op = named_op(view.what[i])
        if op is not None:
            res = RESOURCES[int(view.res[i])]
            want.setdefault((int(view.rank[i]), "host" if res == "host" else "gpu", op), []).append(i)
    if not want:
        return
    ids: dict[str, list[int]] = {}  # a name as the path says it (an object's address left out) -> ids
    for k, nm in enumerate(trace.names):
        ids.setdefault(ADDRESS.sub("", nm), []).append(k)
    c = trace.columns
    for (r, where, op), segs in want.items():
        nid = ids.get(op)
        if nid is None:
            continue
        kinds = _NAMED_IN.get(where, GPU_LANE_KINDS)
        hits = []
        for ln, lane in enumerate(trace.lanes):
            if lane.rank != r or lane.kind not in kinds:
                continue
            sl = trace.lane_slice(ln)
            at = sl.start + np.flatnonzero(np.isin(np.asarray(c["name"][sl]), nid))
            hits.append(at)
        at = np.concatenate(hits) if hits else np.zeros(0, np.int64)
        if not len(at):
            continue
        s = np.asarray(c["start"][at], np.int64)
        e = s + np.asarray(c["dur"][at], np.int64)
        for i in segs:
            if any(t in view.what[i] for t in _BEFORE):
                # the time before the op: the one of its name starting nearest the segment's end
                # (the model's GPU times may be shifted by a clock offset; an earlier one of its
                # name could overlap the segment: helper-111)
                view.event[i] = int(at[np.argmin(np.abs(s - int(view.end[i])))])
                continue
            ov = np.minimum(e, view.end[i]) - np.maximum(s, view.start[i])
            k = int(np.argmax(ov))
            if ov[k] > 0:
                view.event[i] = int(at[k])
                if where == "host":  # the thread that did it (a GPU run keeps its busiest stream)
                    view.lane[i] = int(c["lane"][at[k]])
                    said = _op_length_said(view.what[i], int(e[k] - s[k]))
                    if said != view.what[i]:  # (what stays the analysis' text: the outline's)
                        view.said[i] = said


def _op_length_said(what: str, dur_ns: int) -> str:
    """'host work (sleep 34.2 ms of it) ...' beside a selected 50.1 ms sleep read as two lengths
    of one op (an audit of the window): where the op the click selects is longer than its part
    in the segment, its length is said too ('sleep 34.2 ms of it; the op: 50.1 ms')."""
    m = _OP_OF_HOST_WORK.match(what)
    if m is None or m.group(3) or dur_ns / 1e6 < 1.05 * float(m.group(2)) + 0.1:
        return what
    return f"{what[: m.end() - 1]}; the op: {dur_ns / 1e6:.1f} ms{what[m.end() - 1 :]}"


def _coverage(trace: Trace, lane: int, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """How much of each [a, b) the lane's events cover (their union, ns)."""
    sl = trace.lane_slice(lane)
    s = np.asarray(trace.columns["start"][sl], np.int64)
    if not len(s) or not len(a):
        return np.zeros(len(a), np.int64)
    e = s + np.asarray(trace.columns["dur"][sl], np.int64)
    o = np.argsort(s, kind="stable")
    s, e = s[o], e[o]
    # the union as disjoint blocks: a block starts where an event begins after every earlier end
    run = np.maximum.accumulate(e)
    new = np.ones(len(s), bool)
    new[1:] = s[1:] > run[:-1]
    bs = s[new]
    be = np.maximum.reduceat(run, np.flatnonzero(new))
    cum = np.concatenate([[0], np.cumsum(be - bs)])

    def covered(t):
        k = np.searchsorted(bs, t, side="right") - 1
        kk = np.maximum(k, 0)
        inside = np.clip(t - bs[kk], 0, be[kk] - bs[kk])
        return np.where(k >= 0, cum[kk] + inside, 0)

    return covered(b) - covered(a)


def _place(trace: Trace, view: PathView) -> None:
    """view.lane for every segment (module docstring)."""
    lanes_of: dict[tuple[int, str], list[int]] = {}
    for i, ln in enumerate(trace.lanes):
        lanes_of.setdefault((ln.rank, ln.kind), []).append(i)
    for r in np.unique(view.rank).tolist():
        for res, kinds in _LANES_OF.items():
            idx = np.flatnonzero((view.rank == r) & (view.res == RESOURCES.index(res)))
            if not len(idx):
                continue
            cands = [ln for k in kinds for ln in lanes_of.get((r, k), [])]
            if not cands:
                continue
            cov = np.stack([_coverage(trace, ln, view.start[idx], view.end[idx]) for ln in cands])
            best = np.argmax(cov, axis=0)  # ties: the first, a CPU thread before its CUDA API lane
            view.lane[idx] = np.where(cov.max(axis=0) > 0, np.asarray(cands)[best], -1)
    # what nothing covers (idle gaps, host time between calls): the lane beside it on the path
    for sp in view.steps.values():
        lo, hi = sp.first, sp.first + sp.count
        for i in range(lo, hi):
            if view.lane[i] >= 0:
                continue
            r = view.rank[i]
            near = [j for j in (i - 1, i + 1) if lo <= j < hi and view.rank[j] == r and view.lane[j] >= 0]
            if near:
                view.lane[i] = view.lane[near[0]]
                continue
            kinds = (LaneKind.CPU, LaneKind.CUDA_API) if RESOURCES[view.res[i]] == "host" else GPU_LANE_KINDS
            first = [ln for k in kinds for ln in lanes_of.get((int(r), k), [])]
            if first:
                view.lane[i] = max(first, key=lambda ln: trace.lane_slice(ln).stop - trace.lane_slice(ln).start)
