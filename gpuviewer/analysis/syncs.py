"""Host syncs that drain the GPU: a synchronize call (cudaStreamSynchronize, cudaEventSynchronize,
cudaDeviceSynchronize) holds the host until the GPU has done the work queued before it, so the host
cannot queue the next work while the GPU runs; after the call returns the GPU idles until the
host's next launch reaches it. Nsight Systems' expert rules list such calls (cuda_api_sync); here
they are a finding only where the GPU's idle after them costs time, with its what-if (no_syncs):
the host not waiting in them.

The cost that marks the finding is, per sync, the GPU's idle after it up to the time the host
waited in it (a 25 ms sleep after a 0.1 ms sync is the sleep's, host_bound_idle's, not the
sync's). It only decides whether there is a finding: what removing the waits saves is the
replay's, which can be more (a host freed of a chain of waits runs further and further ahead).
"""

from __future__ import annotations

from collections import Counter

import numpy as np

from ..model.categories import LaneKind
from ..model.trace import Trace
from .breakdown import RankBreakdown, launch_calls
from .efficiency import _innermost
from .host import EXPLICIT_SYNC, name_ids, reads_copy
from .host_split import framework_waits
from .rule_base import finding

# the GPU's idle after the syncs, capped at their waits, from a fiftieth of its time: the share
# finding_order.severity calls medium (below it, no fix of them would be worth listing)
COST_SHARE = 0.02


def _sync_calls(trace: Trace, rank: int) -> np.ndarray:
    """The rank's synchronize calls on its CUDA API lanes and its framework waits for the device
    (framework_waits), by start."""
    ids = name_ids(trace, EXPLICIT_SYNC)
    if not len(ids):
        return np.zeros(0, np.int64)
    c = trace.columns
    parts = []
    for i, ln in enumerate(trace.lanes):
        if ln.rank == rank and ln.kind == LaneKind.CUDA_API:
            sl = trace.lane_slice(i)
            at = sl.start + np.flatnonzero(np.isin(np.asarray(c["name"][sl]), ids))
            parts.append(at[~reads_copy(trace, at)])  # the host needs that data: no wait to remove
    # and JAX's block_until_ready, with no CUDA sync call recorded under it
    parts.append(framework_waits(trace, rank, EXPLICIT_SYNC))
    idx = np.concatenate(parts)
    return idx[np.argsort(np.asarray(c["start"][idx]), kind="stable")]


def _idle_after(
    trace: Trace, rb: RankBreakdown, calls: np.ndarray, wait: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per call: the GPU's idle from its return to the rank's next GPU op, that idle up to the
    call's wait (the most a host that had not waited could have filled), and that next op (-1
    where no idle is counted). Syncs that return before the same op share one idle stretch: it is
    counted once, on the first of them (from its return), capped by their waits together; the
    others get 0. 0 also where an op still ran when the call returned, or none follows."""
    c = trace.columns
    ops = rb.ops if rb.ops is not None else np.zeros(0, np.int64)
    idle = np.zeros(len(calls), np.int64)
    cost = np.zeros(len(calls), np.int64)
    nxt = np.full(len(calls), -1, np.int64)
    if not len(ops) or not len(calls):
        return idle, cost, nxt
    s = np.asarray(c["start"][ops]).astype(np.int64)
    o = np.argsort(s, kind="stable")
    s = s[o]
    e = np.maximum.accumulate(s + np.asarray(c["dur"][ops]).astype(np.int64)[o])
    ret = np.asarray(c["start"][calls]).astype(np.int64) + np.asarray(c["dur"][calls]).astype(np.int64)
    p = np.searchsorted(s, ret, side="left")
    ok = p < len(s)
    ok[ok] &= (p[ok] == 0) | (e[np.maximum(p[ok] - 1, 0)] <= ret[ok])
    k = np.flatnonzero(ok)
    if not len(k):
        return idle, cost, nxt
    k = k[np.lexsort((ret[k], p[k]))]  # by the op they precede, the first to return first
    first = np.r_[True, p[k][1:] != p[k][:-1]]
    lead = k[first]
    group_wait = np.add.reduceat(wait[k], np.flatnonzero(first))
    idle[lead] = s[p[lead]] - ret[lead]
    cost[lead] = np.minimum(group_wait, idle[lead])
    nxt[lead] = ops[o[p[lead]]]
    return idle, cost, nxt


def _in_next_launch(trace: Trace, calls: np.ndarray, idle: np.ndarray, nxt: np.ndarray) -> tuple[np.ndarray, list]:
    """Per call with idle after it (to the GPU op nxt, _idle_after's): how much of that idle the
    host spent inside the call that launched nxt (a CUDA graph's launch of 960 nodes takes 1.2 ms,
    and the GPU starts when it returns: launch_graph's idle after its sync was that call, not the
    sync; an audit's finding), and that call's name (None where none)."""
    c = trace.columns
    inside = np.zeros(len(calls), np.int64)
    names: list = [None] * len(calls)
    at = np.flatnonzero((idle > 0) & (nxt >= 0))
    if not len(at):
        return inside, names
    ret = np.asarray(c["start"][calls[at]]).astype(np.int64) + np.asarray(c["dur"][calls[at]]).astype(np.int64)
    for j, (k, lc) in enumerate(zip(at.tolist(), launch_calls(trace, nxt[at]).tolist())):
        if lc < 0:
            continue
        a = int(c["start"][lc])
        b = a + int(c["dur"][lc])
        inside[k] = max(0, min(b, int(ret[j] + idle[k])) - max(a, int(ret[j])))
        names[k] = trace.name_of(lc)
    return inside, names


def _around(trace: Trace, calls: np.ndarray) -> list[str | None]:
    """Per call: the innermost CPU op around it on its thread (None: none recorded)."""
    c = trace.columns
    out: list[str | None] = [None] * len(calls)
    if not len(calls):
        return out
    cpu_lane = {(ln.rank, ln.pid, ln.stream): i for i, ln in enumerate(trace.lanes) if ln.kind == LaneKind.CPU}
    lane = np.asarray(c["lane"][calls])
    none = np.zeros(len(trace.names) + 1, bool)
    for ll in np.unique(lane).tolist():
        ln = trace.lanes[ll]
        target = cpu_lane.get((ln.rank, ln.pid, ln.stream))
        if target is None:
            continue
        at = np.flatnonzero(lane == ll)
        par = _innermost(trace, target, np.asarray(c["start"][calls[at]]).astype(np.int64), none)
        for k, pe in zip(at.tolist(), par.tolist()):
            if pe >= 0:
                out[k] = trace.name_of(pe)
    return out


def _idle_said(per: list, idle_ns: int, gpu_ns: int, per_step: str, whole: bool) -> str:
    """The GPU's idle after the syncs: a step's mean and its share of the steps' GPU time; the
    median step's where one step's idle lifts the mean far above the usual step's (jax_train_stall:
    4.0 ms a step and 82%, 30 ms of it after the sync before step 4's planted sleep, where the
    usual step's is 0.2 ms: the sleep's idle, not the sync's; an audit of the window)."""
    n = len(per)
    mean = f"{idle_ns / 1e6 / n:,.1f} ms{per_step}"
    # the share's base named: next to a capture's saving "of its 618 ms", "of its time" read as
    # that capture's (cloverleaf: 7% is of the GPU's 342 ms from its first op to its last)
    share = f"{idle_ns / max(gpu_ns, 1):.0%} of the GPU's time {'from its first op to its last' if whole else 'in its steps'}"
    if n < 3:
        return f"{mean} ({share})"
    med = float(np.median([p[3] for p in per]))
    if idle_ns / n <= 1.5 * med + 50_000:
        return f"{mean} ({share})"
    med_share = float(np.median([p[3] / max(p[0].gpu_time_ns, 1) for p in per]))
    return (
        f"a median {med / 1e6:,.1f} ms a step ({med_share:.0%} of the median step's GPU time; {mean} on average, "
        "lifted by a host stall after a sync)"
    )


RETURNED_AT_ONCE_NS = 20_000  # a sync call this short found the GPU with nothing left to do


def host_syncs(trace: Trace, rb: RankBreakdown) -> list[dict]:
    """The rank's synchronize calls in its measured steps, where the GPU's idle after them (each up
    to the call's wait) is COST_SHARE of its time or more in most of those steps."""
    steps = rb.measured
    if not steps:
        return []
    calls = _sync_calls(trace, rb.rank)
    if not len(calls):
        return []
    c = trace.columns
    start = np.asarray(c["start"][calls]).astype(np.int64)
    wait = np.asarray(c["dur"][calls]).astype(np.int64)
    idle, cost, nxt = _idle_after(trace, rb, calls, wait)
    per = []  # (step, calls in it, wait, idle, cost)
    for s in steps:
        m = (start >= s.host_start_ns) & (start < s.host_end_ns)
        per.append((s, np.flatnonzero(m), int(wait[m].sum()), int(idle[m].sum()), int(cost[m].sum())))
    costly = [p for p in per if p[4] >= COST_SHARE * max(p[0].gpu_time_ns, 1)]
    if 2 * len(costly) <= len(per) and not (len(per) == 1 and costly):
        return []
    n_steps = len(per)
    sel = np.concatenate([p[1] for p in per])
    count = len(sel)
    gpu_ns = sum(p[0].gpu_time_ns for p in per)
    idle_ns = sum(p[3] for p in per)
    wait_ns = sum(p[2] for p in per)
    whole = steps[0].step is None
    names = Counter(trace.name_of(int(i)) for i in calls[sel])
    around = Counter(a for a in _around(trace, calls[sel]) if a is not None)
    lead_name = ", ".join(n for n, _ in names.most_common(2))
    where = ""
    if around:
        op, k = around.most_common(1)[0]
        if 2 * k >= count:  # say where most of them are called from
            where = f", {'all' if k == count else f'{k:,} of the {count:,}'} in {op}"
    per_step = "" if whole else " a step"
    # calls that returned at once found the GPU drained already: no wait (launch_graph: two a step,
    # one of them 4-7 µs; "waits 2 times a step" was an audit's finding)
    waited = int((wait[sel] >= RETURNED_AT_ONCE_NS).sum())
    times = _times(count, n_steps, whole)
    said_ms = wait_ns  # the time said: of the calls that waited, where some returned at once
    in_them = ""
    if 0 < waited < count:
        # (cloverleaf: '(301.7 ms)' after 'waits in 404 of them' was all 1,312 calls' time, the 404's
        # being 293.8 ms; an audit's finding)
        said_ms = int(wait[sel][wait[sel] >= RETURNED_AT_ONCE_NS].sum())
        in_them = " in those"
        # a step's counts where whole numbers, else the steps' totals (10.5 a step read as "10" beside
        # "waits in 10 of them")
        split = not whole and n_steps > 1
        k = n_steps if split and count % n_steps == 0 and waited % n_steps == 0 else 1
        how_often = f"{count:,} times in the {n_steps} steps" if split and k == 1 else times
        rest = (count - waited) // k
        how = (
            f"calls {lead_name} {how_often}{where}, and waits in {waited // k:,} of them for the GPU to finish its "
            f"queued work (the other{'' if rest == 1 else 's'} returned within {RETURNED_AT_ONCE_NS // 1000} µs)"
        )
    else:
        how = f"waits for the GPU to finish its queued work {times} in {lead_name}{where}"
    title = (
        f"Rank {rb.rank}: the host {how} ({said_ms / 1e6 / n_steps:,.1f} ms{per_step}{in_them}); the GPU, drained, then idles "
        f"until the host's next launch: {_idle_said(per, idle_ns, gpu_ns, per_step, whole)}"
    )
    if 0 < waited < count:
        # the idle follows every sync, those that returned at once too (cloverleaf: 22.4 ms after
        # all 1,312, 14.8 ms after the 404 that waited; 'then idles' read as theirs; an audit)
        after_waited = int(idle[sel][wait[sel] >= RETURNED_AT_ONCE_NS].sum())
        title += (
            f", after all of them, those that returned at once too ({after_waited / 1e6 / n_steps:,.1f} ms{per_step} "
            "after those that waited)"
        )
    # most of that idle inside the next launch call itself: said, with the call
    inside, launched_by = _in_next_launch(trace, calls[sel], idle[sel], nxt[sel])
    in_call = int(inside.sum())
    most = Counter(n for n, x in zip(launched_by, inside.tolist()) if n and x).most_common(1)
    if idle_ns and in_call >= 0.5 * idle_ns and most:
        call = most[0][0]
        title += (
            f", {in_call / 1e6 / n_steps:,.1f} ms{per_step} of it inside that launch call ({call}): a host "
            "that did not wait would make that call while the GPU still runs"
        )
    # the finding shows a usual step's syncs: the costliest's idle may be a stall after it (jax's
    # sync before step 4's planted 30 ms sleep was shown as the sync's evidence; an audit)
    worst = sorted(per, key=lambda p: p[4])[(len(per) - 1) // 2]
    s0 = min(p[0].host_start_ns for p in per)
    s1 = max(p[0].host_end_ns for p in per)
    return [
        finding(
            "host_sync",
            "medium",
            title,
            [rb.rank],
            worst[0].step,
            s0,
            s1,
            {
                "syncs": count,
                "syncs_per_step": round(count / n_steps, 2),
                "syncs_waited": waited,
                "wait_ms_per_step": round(wait_ns / 1e6 / n_steps, 3),
                "idle_after_ms_per_step": round(idle_ns / 1e6 / n_steps, 3),
                "idle_after_share": round(idle_ns / max(gpu_ns, 1), 4),
                "capped_ms_per_step": round(sum(p[4] for p in per) / 1e6 / n_steps, 3),
                "steps": [p[0].step for p in per if p[0].step is not None],
                "calls": [{"name": n, "count": k} for n, k in names.most_common(5)],
                # what a click selects: the sync calls, their wait in these steps
                "evidence": [
                    {"name": n, "count": k, "ms": round(float(wait[sel][_is(trace, calls[sel], n)].sum()) / 1e6, 3)}
                    for n, k in names.most_common(3)
                ],
                "called_in": [{"name": n, "count": k} for n, k in around.most_common(5)],
            },
            impact_ns=sum(p[4] for p in per),
        )
    ]


def _is(trace: Trace, events: np.ndarray, name: str) -> np.ndarray:
    ids = [i for i, n in enumerate(trace.names) if n == name]
    return np.isin(np.asarray(trace.columns["name"][events]), ids)


def _times(n: int, steps: int, whole: bool) -> str:
    if whole or steps <= 1:
        return "once" if n == 1 else f"{n:,} times"
    k = n / steps
    if k == 1:
        return "once a step"
    return f"{k:.0f} times a step" if k == int(k) or k >= 10 else f"{k:.1f} times a step"
