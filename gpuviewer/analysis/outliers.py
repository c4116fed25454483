"""Step outliers: a step far slower than the rank's others, and what made it slow.

The cause is searched on both sides of the step. On the GPU, the step's GPU time (its window and
the idle before and after it): an op that ran longer than usual (a copy, a collective waiting for
another rank). On the host, the step's host range, through the host op tree: a stall before the
step's first kernel (a sleep, a data loader, a checkpoint) leaves the GPU idle outside its window,
and an enclosing op (the forward, the step itself) only grows because something inside it did.
So each host op is measured with its children (inclusive time, clipped to the step) against its
mean in the other steps, and the cause named is the tightest op that still explains most of the
step's extra time: the deepest one, not the frame around it."""

from __future__ import annotations

import numpy as np

from ..model import queries as q
from ..model.categories import CAT_LABEL, GPU_LANE_KINDS, Cat, LaneKind
from ..model.trace import Trace
from .breakdown import RankBreakdown
from .host import (
    API_CATS,
    COPY_CALL,
    IDLE_WAIT,
    SYNC_CALL,
    _step_markers,
    explain,
    host_lanes,
)
from .launch_queue import launched_before_capture

GPU_CATEGORIES = ("memcpy", "memset", "kernel", "communication")
GPU_LEAD = 0.3  # a GPU op explaining this share of the extra time leads (the copy, the wait in a collective)
HOST_LEAD = 0.5  # a host op must explain most of the extra time to be named its cause
STEP_OWN = "(the step's own range)"  # host_self_excess's name for the step markers' own time
MIN_Z, MIN_RATIO = 3.5, 1.5  # robust z-score and times the median a step must both exceed


def step_outliers(trace: Trace, rb: RankBreakdown) -> list[dict]:
    from .rule_base import finding

    steps, slow, med = _slow(rb)
    out = []
    for s, x, z in slow:
        others = [o for o in steps if o is not s]
        lead, what = cause(trace, rb.rank, s, others, x - med)
        cause_text = ""
        if lead:
            cause_text = f": {lead['name']} {_took(lead)} ({lead['excess_ms']:.1f} ms over its mean in the other steps)"
            # a second GPU op that also explains a real part of the extra time is named too
            # (step_outlier's pageable copy back, 489 ms of the 3.3 s, was in the evidence only)
            also = [w for w in what[1:] if w["category"] in GPU_CATEGORIES and w["excess_ms"] >= 0.1 * (x - med) / 1e6]
            if also and lead["category"] in GPU_CATEGORIES:
                w = also[0]
                cause_text += f", and {w['name']} {_took(w)} ({w['excess_ms']:.1f} ms over)"
            if lead["category"] in GPU_CATEGORIES:
                cause_text += _host_own(trace, rb.rank, s, others, (x - med) / 1e6)
        built = _backlog(steps, s, x - med)
        if built:
            early = _queued_before_capture(trace, rb, s)
            if early:
                # HTA's negative_queue: 872 ops launched before the trace began keep its GPU busy
                # 155 ms into the first step: the backlog came with the capture, not from this step
                cause_text += (
                    f" (its host took about as long as in the other steps; the GPU first ran {early:,} ops launched "
                    f"before the capture began, and ends this step and every later one about {built / 1e6:.0f} ms "
                    "behind its host: most of the extra time is that backlog, not slower work)"
                )
            else:
                cause_text += (
                    f" (its host took about as long as in the other steps; the GPU fell {built / 1e6:.0f} ms behind "
                    "its host in this step and ends every later step about as far behind: most of the extra time is "
                    "that backlog)"
                )
        took = took_text(s.step, x, med)
        out.append(
            finding(
                "step_outlier",
                "high",
                f"Rank {rb.rank}: {took}{cause_text}",
                [rb.rank],
                s.step,
                min(s.start_ns - s.idle_before_ns, s.host_start_ns or s.start_ns),
                max(s.end_ns, s.host_end_ns),
                {
                    "duration_ms": round(x / 1e6, 3),
                    "median_ms": round(med / 1e6, 3),
                    "duration_text": took,  # step_figures restates it in the job's step times
                    "robust_z": round(z, 2),
                    "causes": what,
                },
                impact_ns=x - med,
            )
        )
    return out


def _host_own(trace: Trace, rank: int, s, others: list, excess_ms: float) -> str:
    """Beside GPU ops named as a slow step's cause: the host op whose own time (no op recorded under
    it) grew most, where that is a real part of the extra time (2%, 1 ms or more); the host's calls
    that wait for the GPU (copies, syncs) left out, their time is the GPU ops'. step_outlier's
    what-if removed a 116 ms host gap its sentence never named."""
    if s.host_end_ns <= s.host_start_ns:
        return ""
    rows = host_self_excess(
        trace, rank, (s.host_start_ns, s.host_end_ns), [(o.host_start_ns, o.host_end_ns) for o in others], top=12
    )  # (more than named: the calls that wait for the GPU are dropped first)
    waits = [
        w for w in rows if w["category"] in API_CATS and (SYNC_CALL.search(w["name"]) or COPY_CALL.search(w["name"]))
    ]
    rows = [w for w in rows if w not in waits]
    if not rows or rows[0]["excess_ms"] < max(1.0, 0.02 * excess_ms):
        return ""
    w = rows[0]
    where = (
        "in the step's range with no op recorded under it (code the profiler did not trace)"
        if w["name"] == STEP_OWN
        else f"in {w['name']} with no op recorded under it"
        if w["category"] not in API_CATS
        else f"in {w['name']}"
    )
    return f"; and its host {w['excess_ms']:.1f} ms more {where}"


def took_text(step: int, x: float, med: float) -> str:
    return f"step {step} took {x / 1e6:.0f} ms, {x / med:.1f}x the median {med / 1e6:.1f} ms"


def _slow(rb: RankBreakdown) -> tuple[list, list[tuple], float]:
    """The rank's measured steps, the slow outliers among them as (step, its GPU time, robust
    z), and the median GPU time: a step is slow past MIN_Z and MIN_RATIO x the median (from 5 steps)."""
    steps = [s for s in rb.measured if s.step is not None]
    if len(steps) < 5:
        return steps, [], 0.0
    d = np.array([s.gpu_time_ns for s in steps], np.float64)
    med = float(np.median(d))
    if med <= 0:
        return steps, [], med  # most steps ran nothing on the GPU: no typical step to compare with
    mad = float(np.median(np.abs(d - med))) or 1.0
    slow = []
    for s, x in zip(steps, d):
        z = 0.6745 * (x - med) / mad
        if z >= MIN_Z and x >= MIN_RATIO * med:
            slow.append((s, float(x), float(z)))
    return steps, slow, med


def _backlog(steps: list, s, excess: float) -> float:
    """The backlog (ns) the GPU built in the first step s and carried to the capture's end, where
    that is what makes s long: its host took about as long as in the other steps (within 10% of
    their median), the GPU ends every later step about as far behind its host as it ended s, and
    the extra time is about what it fell behind in s. 0 otherwise. (HTA's negative_queue trace: the GPU ends every step 158-162 ms
    behind its host; the first step's window, 368 ms against 216, holds that backlog, not slower
    work.) A GPU-bound job's first step holds one always; so would a stall there in such a job,
    which is why the finding stays and says so rather than going."""
    rest = steps[1:]
    if s is not steps[0] or not rest or not s.host_end_ns:
        return 0.0
    host = float(np.median([o.host_end_ns - o.host_start_ns for o in rest]))
    lag = s.end_ns - s.host_end_ns  # how far behind its host the GPU ends the step
    built = lag - max(0, s.start_ns - s.host_start_ns)
    later = float(np.median([o.end_ns - o.host_end_ns for o in rest]))
    ok = s.host_end_ns - s.host_start_ns <= 1.1 * host and built > 0 and later >= 0.8 * lag
    return float(built) if ok and excess <= 1.2 * built else 0.0


def _queued_before_capture(trace: Trace, rb: RankBreakdown, s) -> int:
    """How many GPU ops of the rank launched before the capture began (launch_queue.launched_before_capture)
    ran before the step's end: the backlog the capture came with."""
    early = launched_before_capture(trace, rb.rank)
    return sum(int(np.searchsorted(v, s.end_ns)) for v in early.values())


def slow_steps(rb: RankBreakdown) -> list[int]:
    """The steps step_outliers reports as slow outliers of this rank."""
    return [s.step for s, _, _ in _slow(rb)[1]]


def _took(w: dict) -> str:
    return f"{w['ms'] / 1e3:.2f} s" if w["ms"] >= 1000 else f"{w['ms']:.1f} ms"


def cause(trace: Trace, rank: int, s, others: list, excess_ns: float) -> tuple[dict | None, list[dict]]:
    """(the op named as the step's cause, the evidence list led by it). GPU work leads when it
    explains a good part of the extra time (the host calls that waited for it follow); else the
    deepest host op explaining most of it; else whatever grew most."""
    gpu = [
        w
        for w in explain(trace, rank, _gpu_window(s), [_gpu_window(o) for o in others], kinds=GPU_LANE_KINDS, top=10)
        if w["category"] in GPU_CATEGORIES
    ]
    host = (
        host_tree_excess(
            trace, rank, (s.host_start_ns, s.host_end_ns), [(o.host_start_ns, o.host_end_ns) for o in others]
        )
        if s.host_end_ns > s.host_start_ns
        else []
    )
    excess_ms = excess_ns / 1e6
    deepest = tightest(host, HOST_LEAD * excess_ms)
    lead: dict | None
    if gpu and gpu[0]["excess_ms"] >= GPU_LEAD * excess_ms:
        lead = gpu[0]
    elif deepest is not None:
        lead = deepest
    else:
        rows = sorted(gpu + host, key=lambda w: -w["excess_ms"])
        lead = rows[0] if rows else None
    # the evidence: the GPU ops that grew most, then the host ops explaining most of the extra
    # time deepest first (not the frames around them), then the host ops that grew most
    need = HOST_LEAD * excess_ms
    fit = sorted((w for w in host if w["excess_ms"] >= need > 0), key=lambda w: (w["ms"], -w["depth"]))
    host = fit + [w for w in host if w not in fit]
    grew = [w for w in gpu if w is not lead and w["excess_ms"] >= max(0.1, 0.01 * excess_ms)]
    rest = grew[:3] + [w for w in host if w is not lead][:3]
    return lead, ([lead] if lead else []) + rest


def _gpu_window(s) -> tuple[int, int]:
    return s.start_ns - s.idle_before_ns, s.end_ns + s.idle_after_ns


def tightest(rows: list[dict], need_ms: float) -> dict | None:
    """Of the host ops that explain at least need_ms of extra time, the one with the least time
    in the step (an op encloses its children, so the least is the deepest); ties: the deeper."""
    fit = [w for w in rows if w["excess_ms"] >= need_ms and need_ms > 0]
    return min(fit, key=lambda w: (w["ms"], -w["depth"])) if fit else None


def host_tree_excess(
    trace: Trace, rank: int, window: tuple[int, int], baseline: list[tuple[int, int]], top: int = 40
) -> list[dict]:
    """Per host op (name, category, lane): its inclusive time in `window` (its children
    included, clipped to the window; an op inside another of its name counted once) minus its
    mean over the baseline windows, largest first; with the op's least nesting depth."""
    lanes = host_lanes(trace, rank)
    now = _inclusive(trace, lanes, window)
    base: dict = {}
    for w in baseline:
        for k, (v, _d) in _inclusive(trace, lanes, w).items():
            base[k] = base.get(k, 0) + v
    nb = max(1, len(baseline))
    rows = []
    for (name, ct, ln), (v, depth) in now.items():
        ex = v - base.get((name, ct, ln), 0) / nb
        if ex > 0 and not IDLE_WAIT.match(trace.names[name]):
            rows.append((ex, trace.names[name], ct, ln, v, depth))
    rows.sort(key=lambda r: (-r[0], r[1], r[2], r[3]))  # ties by text: ids depend on the files loaded together
    out = []
    for ex, text, ct, ln, v, depth in rows[:top]:
        lane = trace.lanes[ln]
        out.append(
            {
                "name": text,
                "category": CAT_LABEL.get(Cat(ct), str(ct)),
                "lane": lane.label,
                "excess_ms": round(ex / 1e6, 3),
                "ms": round(v / 1e6, 3),
                "depth": int(depth),
            }
        )
    return out


def _inclusive(trace: Trace, lanes: list[int], window: tuple[int, int]) -> dict[tuple[int, int, int], tuple[int, int]]:
    """(name, category, lane) -> (inclusive ns clipped to the window, least depth); measured once
    per window inside host.measured_once (each step is the others' baseline)."""
    memo = trace.derived.get("per_name_memo")
    key = ("inclusive", tuple(lanes), int(window[0]), int(window[1]))
    if memo is not None and key in memo:
        return memo[key]
    t0, t1 = window
    c = trace.columns
    parts = [q.events_in_range(trace, ln, t0, t1) for ln in lanes]
    idx = np.concatenate(parts) if parts else np.zeros(0, np.int64)
    out: dict = {}
    if len(idx):
        s = np.asarray(c["start"][idx]).astype(np.int64)
        incl = (np.minimum(s + np.asarray(c["dur"][idx]).astype(np.int64), t1) - np.maximum(s, t0)).clip(0)
        names = np.asarray(c["name"][idx]).astype(np.int64)
        lane = np.asarray(c["lane"][idx]).astype(np.int64)
        # an op nested in another of its name (recursion) is already in its parent's time
        pname = np.full(len(idx), -1, np.int64)
        all_names = np.asarray(c["name"])
        for ln in np.unique(lane).tolist():
            m = lane == ln
            sl = trace.lane_slice(ln)
            parent = q.lane_parents(trace, ln)[idx[m] - sl.start]
            pname[m] = np.where(parent >= 0, all_names[sl.start + np.maximum(parent, 0)], -1)
        keep = (pname != names) & ~np.isin(names, list(_step_markers(trace))) & (incl > 0)
        cat = np.asarray(c["cat"][idx]).astype(np.int64)[keep]
        names, lane, incl = names[keep], lane[keep], incl[keep]
        depth = np.asarray(c["depth"][idx]).astype(np.int64)[keep]
        n_lanes = max(1, len(trace.lanes))
        uk, inv = np.unique((names * 256 + cat) * n_lanes + lane, return_inverse=True)
        tot = np.bincount(inv, weights=incl).astype(np.int64)
        dmin = np.full(len(uk), np.iinfo(np.int64).max, np.int64)
        np.minimum.at(dmin, inv, depth)
        out = {
            (k // (256 * n_lanes), (k // n_lanes) % 256, k % n_lanes): (v, d)
            for k, v, d in zip(uk.tolist(), tot.tolist(), dmin.tolist())
        }
    if memo is not None:
        memo[key] = out
    return out


def host_self_excess(
    trace: Trace, rank: int, window: tuple[int, int], baseline: list[tuple[int, int]], top: int = 5
) -> list[dict]:
    """Per host op (name, category, lane): its own time in `window` (clipped to it, less the time
    of the ops recorded under it) minus its mean over the baseline windows, largest first. A frame
    whose own time grew holds work no op under it recorded (step_outlier's 116 ms in
    gen.py(127): profiled between two calls, of 3.3 s the copies explain)."""
    lanes = host_lanes(trace, rank)
    now = _own(trace, lanes, window)
    base: dict = {}
    for w in baseline:
        for k, v in _own(trace, lanes, w).items():
            base[k] = base.get(k, 0) + v
    nb = max(1, len(baseline))
    rows = sorted(
        ((v - base.get(k, 0) / nb, k) for k, v in now.items() if v - base.get(k, 0) / nb > 0),
        key=lambda r: (-r[0], trace.names[r[1][0]] if r[1][0] >= 0 else "", r[1][1], r[1][2]),
    )
    return [
        {
            "name": STEP_OWN if name < 0 else trace.names[name],
            "category": CAT_LABEL.get(Cat(ct), str(ct)),
            "lane": trace.lanes[ln].label,
            "excess_ms": round(ex / 1e6, 3),
        }
        for ex, (name, ct, ln) in rows[:top]
        if name < 0 or not IDLE_WAIT.match(trace.names[name])
    ]


def _own(trace: Trace, lanes: list[int], window: tuple[int, int]) -> dict[tuple[int, int, int], int]:
    """(name, category, lane) -> the ops' own ns in the window: clipped to it, less the ops recorded
    under them, a thread's CUDA and OS calls (their own lanes) counted under the op of that thread
    that encloses them (aten::copy_ blocked in cudaMemcpyAsync is not its own time). Step markers share
    one key (-1): ProfilerStep#7's own time is compared with the other steps' markers."""
    t0, t1 = window
    c = trace.columns
    markers = _step_markers(trace)
    # a thread's ops: its CPU lane (Kineto), else its NVTX ranges (Nsight Systems, emit_nvtx)
    cpu_of = {
        (trace.lanes[ln].pid, trace.lanes[ln].stream): ln for ln in lanes if trace.lanes[ln].kind == LaneKind.NVTX
    }
    cpu_of.update(
        {(trace.lanes[ln].pid, trace.lanes[ln].stream): ln for ln in lanes if trace.lanes[ln].kind == LaneKind.CPU}
    )
    per: dict[int, tuple] = {}
    for ln in lanes:
        idx = q.events_in_range(trace, ln, t0, t1)
        if len(idx):
            s = np.asarray(c["start"][idx]).astype(np.int64)
            e = s + np.asarray(c["dur"][idx]).astype(np.int64)
            per[ln] = (idx, s, e, (np.minimum(e, t1) - np.maximum(s, t0)).clip(0))
    # within a lane, each op's time less its children's (queries.self_times); then a thread's calls
    own = {ln: q.self_times(trace, v[0], window) for ln, v in per.items()}
    for ln, (idx, s, e, incl) in per.items():
        lane = trace.lanes[ln]
        host = cpu_of.get((lane.pid, lane.stream))
        if lane.kind in (LaneKind.CUDA_API, LaneKind.OSRT) and host in per:
            # the deepest op of the thread enclosing each call
            _, hs, he, _ = per[host]
            hd = np.asarray(c["depth"][per[host][0]]).astype(np.int64)
            found = np.full(len(idx), -1, np.int64)
            for d in sorted(set(hd.tolist()), reverse=True):
                at = np.flatnonzero(hd == d)
                k = np.searchsorted(hs[at], s, side="right") - 1
                ok = (k >= 0) & (found < 0)
                k = np.maximum(k, 0)
                ok &= he[at[k]] >= e
                found[ok] = at[k[ok]]
            np.subtract.at(own[host], found[found >= 0], incl[found >= 0])
    out: dict = {}
    for ln, (idx, _s, _e, _i) in per.items():
        names = np.asarray(c["name"][idx]).astype(np.int64)
        cats = np.asarray(c["cat"][idx]).astype(np.int64)
        for n, ct, v in zip(names.tolist(), cats.tolist(), own[ln].clip(0).tolist()):
            if v > 0:
                key = (-1 if n in markers else n, ct, ln)
                out[key] = out.get(key, 0) + v
    return out
