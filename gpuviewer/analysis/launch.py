"""Launch overhead, judged per step: how long a rank's GPU idles between its own kernels.

A step is launch-bound when it runs many kernels (50 or more) that are tiny (median under 20 µs,
a few launch costs) and the GPU, between the work of that step, idles in short gaps (under 100 µs:
the launch path, not a stall) at least half as long as it runs work (a third of its working time),
and those gaps are at least a tenth of the step's GPU time. A short gap counts only when the GPU
waited for the launch: the call that launched the op after it returned after the GPU went idle
(an op queued before then waited for something else, such as another stream's collective; an op
with no launch call on record is counted, as nothing says otherwise). Long gaps (a host
stall, a sleep) and communication kernels (a rank spinning while it waits for another) are left
out of both sides, so a stall on one rank does not change the verdict on the same workload: only
the stretches where the GPU is fed kernel after kernel are judged. A rank is launch-bound when
most of its measured steps are.

Kernels launched by a CUDA graph (cudaGraphLaunch / cuGraphLaunch / hipGraphLaunch: one host call
for all the graph's kernels, whose correlation ids point at that call) have no launch of their
own: they are not counted among the step's kernels and the gaps before them are not launch gaps,
so a graph-replayed run of many short kernels is not launch-bound."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import numpy as np

from ..model.categories import Cat, LaneKind
from ..model.trace import Trace
from . import intervals as iv
from .breakdown import RankBreakdown, latest_by_start, launch_calls, launch_ends, launch_times
from .whatif_change import OTHER_WORK_NS

SHORT_GAP_NS = 100_000  # shorter gaps are the launch path; longer ones are the host doing something else
TINY_KERNEL_NS = 20_000  # a kernel this short is over before the host can launch the next few
LAUNCH_SHARE = 1 / 3  # idle between kernels >= half the time working = a third of the working time
MIN_KERNELS = 50  # "many" kernels: a pattern of launches, not a few dependent kernels
MIN_STEP_SHARE = 0.10  # ...and at least this share of the step's GPU time, or it is not worth a finding
GRAPH_LAUNCH = re.compile(r"GraphLaunch")  # cudaGraphLaunch, cuGraphLaunch(_ptsz), hipGraphLaunch


def graph_launched(trace: Trace, ops: np.ndarray) -> np.ndarray:
    """Per GPU op: was it launched by a CUDA graph launch (its flow comes from one)?"""
    ops = np.asarray(ops, np.int64)
    out = np.zeros(len(ops), bool)
    src, dst = (np.asarray(x, np.int64) for x in trace.flows)
    if not len(ops) or not len(dst):
        return out
    d, s = dst, src
    if (dst[1:] < dst[:-1]).any():  # flows are built in event order: sorted by their op already
        o = np.argsort(dst, kind="stable")
        d, s = dst[o], src[o]
    pos = np.minimum(np.searchsorted(d, ops), len(d) - 1)
    hit = d[pos] == ops
    launch_name = np.asarray(trace.columns["name"][s[pos[hit]]])
    # the names of the few distinct launch calls are matched, not every name of the session
    gids = [u for u in np.unique(launch_name).tolist() if GRAPH_LAUNCH.search(trace.names[u])]
    out[hit] = np.isin(launch_name, gids)
    return out


def step_launch(trace: Trace, rb: RankBreakdown, spans: bool = False) -> dict:
    """Per step (key: step number, None for a rank without steps): the step's kernels launched one
    by one (count, total and median duration) and those a CUDA graph launched (graph_kernels),
    and inside its GPU window the time busy with work other than communication and the idle in
    gaps shorter than SHORT_GAP_NS between that work that end at an op launched on its own
    (count, ns, and gap_comm_ns: the part of them NCCL kernels ran in); the longer gaps that end
    at such an op (long_gap_ns, long_gap_comm_ns: the part NCCL kernels ran in; with spans,
    long_gap_spans: each from the work's end to the launch's return, as (starts, ends), and
    long_gap_next: where the op it waited for starts)."""
    c = trace.columns
    ops = rb.ops if rb.ops is not None else np.zeros(0, np.int64)
    if not len(ops):
        return {}
    cat = np.asarray(c["cat"][ops])
    s = np.asarray(c["start"][ops]).astype(np.int64)
    e = s + np.asarray(c["dur"][ops]).astype(np.int64)
    work = cat != Cat.COMM_KERNEL
    busy = iv.union(s[work], e[work])
    comm = iv.union(s[~work], e[~work])  # NCCL kernels may run in the gaps between the other work
    graph = graph_launched(trace, ops)
    # a gap that ends where a graph-launched op starts is the graph's own scheduling, not a launch;
    # per start of an op launched on its own, the latest return of the calls that launched the ops
    # starting there (none on record: counted as late)
    own_i = np.nonzero(work & ~graph)[0]
    own_starts, own_late = latest_by_start(s[own_i], launch_ends(trace, ops[own_i]))
    kern = (cat == Cat.KERNEL) & ~graph
    gkern = (cat == Cat.KERNEL) & graph
    op_step = rb.op_step if rb.op_step is not None else np.zeros(len(ops), np.int64)
    # whether each stretch of work starts with an op launched on its own, asked once: inside a
    # window every stretch but the first starts where it did unclipped (iv.clip, done here with
    # the stretches' indices kept)
    bs, be = busy
    pos = np.minimum(np.searchsorted(own_starts, bs), max(len(own_starts) - 1, 0))
    own_b = own_starts[pos] == bs if len(own_starts) else np.zeros(len(bs), bool)
    # when the op that ends each stretch's leading gap was launched (never, for a stretch that does
    # not start with an op launched on its own)
    late_b = np.where(own_b, own_late[pos] if len(own_late) else 0, np.iinfo(np.int64).min)
    out = {}
    for sb in rb.steps:
        lo = int(np.searchsorted(be, sb.start_ns, side="right"))
        hi = int(np.searchsorted(bs, sb.end_ns, side="left"))
        a, b = np.maximum(bs[lo:hi], sb.start_ns), np.minimum(be[lo:hi], sb.end_ns)
        keep = iv.clipped_kept(a, b, sb.start_ns, sb.end_ns)  # (an op of no duration splits a gap)
        a, b, launched = a[keep], b[keep], late_b[lo:hi][keep]
        g = a[1:] - b[:-1]  # gaps between the work inside the window
        # ...that end at an op whose launch returned after the GPU went idle
        waited = launched[1:] > b[:-1]
        sg = (g > 0) & (g < SHORT_GAP_NS) & waited
        short = g[sg]
        gap_comm = iv.length(iv.intersect((b[:-1][sg], a[1:][sg]), comm)) if len(comm[0]) else 0
        lg = (g >= SHORT_GAP_NS) & waited
        longer = g[lg]  # the host later still: what a launch-free replay also shortens
        mg = lg & (g < OTHER_WORK_NS)  # ...of them, those the replay takes as the host's work between launches
        long_comm = iv.length(iv.intersect((b[:-1][lg], a[1:][lg]), comm)) if len(comm[0]) and lg.any() else 0
        in_step = (op_step == sb.step) if sb.step is not None else np.ones(len(ops), bool)
        d = (e - s)[kern & in_step]
        row: dict[str, Any] = {
            "kernels": int(len(d)),
            "graph_kernels": int((gkern & in_step).sum()),
            "kernel_ns": int(d.sum()),
            "median_kernel_ns": float(np.median(d)) if len(d) else 0.0,
            "busy_ns": int((b - a).sum()),
            "gap_ns": int(short.sum()),
            "gaps": int(len(short)),
            "gap_comm_ns": int(gap_comm),
            "long_gap_ns": int(longer.sum()),
            "long_gap_comm_ns": int(long_comm),
            "mid_gap_ns": int(g[mg].sum()),
            "mid_gaps": int(mg.sum()),
            "long_gaps": int(lg.sum()),
        }
        if spans:  # up to the launch's return: after it the op waited for something else (a recv)
            row["long_gap_spans"] = (b[:-1][lg], np.minimum(launched[1:], a[1:])[lg])
            row["long_gap_next"] = a[1:][lg]  # the op each waited for starts there
        out[sb.step] = row
    return out


def launch_threads(trace: Trace, ops: np.ndarray) -> Callable[[int], tuple[int, int] | None]:
    """A lookup, built once for a rank's GPU ops: the (pid, tid) of the thread whose call launched
    the op other than NCCL's starting at a given time (the latest to return, where several start
    there), the thread a GPU's wait for that op waited on; None where no such op or launch is on
    record. fsdp's backward waits end at launches of the autograd thread while the main thread
    sits in run_backward; naming run_backward for them said the wrong thread's op."""
    c = trace.columns
    work = ops[np.asarray(c["cat"][ops]) != Cat.COMM_KERNEL]  # (the waits are for work other than NCCL's)
    st = np.asarray(c["start"][work]).astype(np.int64)
    o = np.argsort(st, kind="stable")
    st = st[o]
    calls = launch_calls(trace, work[o])
    cs = np.maximum(calls, 0)
    ends = np.where(
        calls >= 0, np.asarray(c["start"][cs]).astype(np.int64) + np.asarray(c["dur"][cs]).astype(np.int64), -1
    )

    def at(t: int) -> tuple[int, int] | None:
        lo, hi = int(np.searchsorted(st, t, side="left")), int(np.searchsorted(st, t, side="right"))
        if hi == lo:
            return None
        k = lo + int(np.argmax(ends[lo:hi]))
        if ends[k] < 0:
            return None
        ln = trace.lanes[int(c["lane"][int(calls[k])])]
        return ln.pid, ln.stream

    return at


def _longer(ms: float, short: float, nccl_share: float) -> str:
    """The waits for a launch of 100 us or more (ms a step), said beside the short ones (ms a step)
    where they are a real part: a replay without launch overhead shortens them too, so its saving is
    more than the short gaps (dataloader_stall: 9.8 ms a step of short gaps, 17.8 ms saved)."""
    if ms < 0.1 or ms < 0.05 * short:
        return ""
    # NCCL kernels running in them (df_index_resolver: 33 of their 98 ms a step, which with the
    # short gaps came to more than the GPU's whole idle time; an audit's finding)
    nccl = f"; NCCL kernels ran in {nccl_share:.0%} of that time" if f"{nccl_share:.0%}" != "0%" else ""
    return (
        f", and {ms:.1f} ms a step more in longer gaps ({SHORT_GAP_NS // 1000} µs or more{nccl}) that end at a launch"
    )


def kernel_figures(xs: list[dict], hit: list, steps: list) -> dict:
    """Of the steps `hit` (step_launch's rows xs) of `steps`: the kernels' mean and median (µs), the
    compute and idle shares of those steps' GPU time (another step's 3 s pageable copy,
    step_outlier's, must not make it "compute 1%"), and ' in 2 of 3 steps' where not all are hit."""
    kernels = sum(x["kernels"] for x in xs)
    w = sum(s.gpu_time_ns for s in hit)
    return {
        "kernels": kernels,
        "mean_k": sum(x["kernel_ns"] for x in xs) / max(kernels, 1) / 1e3,
        "med_k": float(np.median([x["median_kernel_ns"] for x in xs])) / 1e3,
        "idle": sum(s.idle_total_ns for s in hit) / w if w else 0.0,
        "compute": sum(s.compute_ns for s in hit) / w if w else 0.0,
        "where": "" if len(hit) == len(steps) else f" in {len(hit)} of {len(steps)} steps",
    }


def steps_metrics(trace: Trace, rb: RankBreakdown, hit: list, steps: list, coll: float, grads: float | None) -> dict:
    """The launch-bound family's metrics of which steps it holds and what it selects."""
    return {
        "launch_bound_steps": [s.step for s in hit if s.step is not None],
        "steps_judged": len(steps),
        "evidence": _most_launched(trace, rb, {s.step for s in hit}),
        "collectives_per_step": coll,
        "grad_accumulations_per_step": grads,
    }


# the optimizer's zero_grad range (PyTorch's Optimizer.zero_grad#SGD.zero_grad)
ZERO_GRAD = re.compile(r"^Optimizer\.zero_grad#")
ZERO_GRAD_KERNELS = 16  # kernels a step from which zeroing the gradients one by one is said


def zero_grad(trace: Trace, rb: RankBreakdown, hit: list) -> str:
    """Where the optimizer's zero_grad launches a kernel for each gradient (a median of 16 or more
    a step in the steps `hit`): said with its host time and the fix. ARRAYFORM's SGD.zero_grad
    took 12 ms a step launching 161 fill kernels, and its GPU idled between them (an audit)."""
    from .host import name_ids

    ids = name_ids(trace, ZERO_GRAD)
    ops = rb.ops if rb.ops is not None else np.zeros(0, np.int64)
    if not len(ids) or not len(ops) or not hit:
        return ""
    c = trace.columns
    idx = trace.events_of_rank(rb.rank, (LaneKind.CPU,))
    idx = idx[np.isin(np.asarray(c["name"][idx]), ids)]
    if not len(idx):
        return ""
    z0 = np.asarray(c["start"][idx]).astype(np.int64)
    z1 = z0 + np.asarray(c["dur"][idx]).astype(np.int64)
    o = np.argsort(z0)
    z0, z1 = z0[o], z1[o]
    t, linked = launch_times(trace, ops)
    t = t[linked]
    k = np.searchsorted(z0, t, side="right") - 1
    inside = (k >= 0) & (t < z1[np.maximum(k, 0)])
    counts, host = [], []
    for s in hit:
        m = (z0 >= s.host_start_ns) & (z0 < s.host_end_ns)
        counts.append(int((inside & (t >= s.host_start_ns) & (t < s.host_end_ns)).sum()))
        host.append(int((z1[m] - z0[m]).sum()))
    n = float(np.median(counts))
    if n < ZERO_GRAD_KERNELS:
        return ""
    return (
        f"; the optimizer's zero_grad launches {n:,.0f} kernels a step ({np.median(host) / 1e6:.1f} ms of its host "
        "time), one for each gradient it zeroes: zero_grad(set_to_none=True), PyTorch's default since 2.0, "
        "launches none"
    )


def host_split(hit: list) -> str:
    """Of the steps' host time, the framework ops' and the launch calls' shares: where the
    framework's work is most of it, said as what keeps the GPU waiting; else the two shares
    plainly, where the calls are a fifth of it or more (launch_bound_big: 35% in calls, 44% in
    ops, said nowhere, though the rule says it of every other trace; an audit)."""
    host_ns = sum(s.host_end_ns - s.host_start_ns for s in hit)
    fw = sum(s.host_framework_ns for s in hit) / host_ns if host_ns > 0 else 0.0
    # (allocation calls, counted with the launch part, are not launch calls: host_split.ALLOC_CALL)
    calls = sum(s.host_launch_ns - s.host_alloc_ns for s in hit) / host_ns if host_ns > 0 else 0.0
    if fw >= 0.5 and fw >= 2 * calls:
        return (
            f"; its host spends {fw:.0%} of its time in framework ops and {calls:.0%} in "
            "launch calls: the work between launches, more than the calls, keeps the GPU waiting"
        )
    if calls >= 0.2 and fw > 0:
        return f"; its host spends {calls:.0%} of its time in launch calls and {fw:.0%} in framework ops"
    return ""


# autograd's accumulation of a parameter's gradient: one call a parameter a backward
ACCUMULATE_GRAD = re.compile(r"^torch::autograd::AccumulateGrad$")


def _per_gradient(trace: Trace, rb: RankBreakdown, hit: list) -> tuple[str, float, float | None]:
    """Where a launch-bound rank issues as many NCCL collectives a step as autograd accumulates
    gradients (df_index_resolver: 404 all-reduces and 404 AccumulateGrad calls a step, each of
    its parameters' gradients reduced on its own), said with the fix; (clause, collectives a step,
    accumulations a step, None where not counted: under 16 collectives a step or no AccumulateGrad
    on record)."""
    from .host import name_ids

    coll = float(np.median([s.comm_kernels for s in hit]))
    ids = name_ids(trace, ACCUMULATE_GRAD)
    if coll < 16 or not len(ids):
        return "", coll, None
    idx = trace.events_of_rank(rb.rank, (LaneKind.CPU,))
    idx = idx[np.isin(np.asarray(trace.columns["name"][idx]), ids)]
    t = np.sort(np.asarray(trace.columns["start"][idx]).astype(np.int64))
    grads = float(np.median([np.searchsorted(t, s.host_end_ns) - np.searchsorted(t, s.host_start_ns) for s in hit]))
    if not grads or abs(coll - grads) > 0.05 * grads:
        return "", coll, grads
    return (
        f"; {coll:,.0f} of those kernels a step are NCCL collectives, as many as the gradients autograd "
        f"accumulates (AccumulateGrad, {grads:,.0f} a step): a collective for each parameter's gradient, "
        "by the counts; bucketing them (DDP's gradient buckets, or one collective over the flattened "
        "gradients) launches a few instead",
        coll,
        grads,
    )


def is_launch_bound(x: dict, gpu_time_ns: int) -> bool:
    work = x["busy_ns"] + x["gap_ns"]
    return bool(
        x["kernels"] >= MIN_KERNELS
        and x["median_kernel_ns"] < TINY_KERNEL_NS
        and work
        and x["gap_ns"] >= LAUNCH_SHARE * work
        and x["gap_ns"] >= MIN_STEP_SHARE * max(gpu_time_ns, 1)
    )


def is_host_paced(x: dict, gpu_time_ns: int) -> bool:
    """A step whose GPU, fed many kernels, waits for the host's next launch in gaps under a
    millisecond (the launch path and the host's work between launches: what a replay without launch
    overhead removes) at least a third of the time it runs that work or waits so, and a tenth of
    its GPU time, whatever the kernels' size: the host's pace between launches, not one stall, sets
    the step (fsdp: 9 ms a step in gaps under 100 us, 87 ms in longer ones, inside FSDP's backward
    hooks; an audit's finding, as no launch-bound finding was made)."""
    paced = x["gap_ns"] + x.get("mid_gap_ns", 0)
    work = x["busy_ns"] + paced
    return bool(
        x["kernels"] >= MIN_KERNELS
        and work
        and paced >= LAUNCH_SHARE * work
        and paced >= MIN_STEP_SHARE * max(gpu_time_ns, 1)
    )


def launch_share(x: dict) -> float:
    work = x["busy_ns"] + x["gap_ns"]
    return x["gap_ns"] / work if work else 0.0


def _most_launched(trace: Trace, rb: RankBreakdown, steps: set) -> list[dict]:
    """The kernels launched most often in these steps (name, count, total ms): what a click on
    the finding selects, the tiny kernels whose launches the GPU waits for."""
    c = trace.columns
    ops = rb.ops if rb.ops is not None else np.zeros(0, np.int64)
    op_step = rb.op_step if rb.op_step is not None else np.full(len(ops), -1, np.int64)
    steps_arr = np.array([-1 if x is None else x for x in steps], np.int64)
    sel = ops[(np.asarray(c["cat"][ops]) == Cat.KERNEL) & np.isin(op_step, steps_arr)]
    if not len(sel):
        return []
    names = np.asarray(c["name"][sel]).astype(np.int64)
    uk, inv, cnt = np.unique(names, return_inverse=True, return_counts=True)
    tot = np.bincount(inv, weights=np.asarray(c["dur"][sel]).astype(np.float64))
    top = np.lexsort((-tot, -cnt))[:3]
    return [{"name": trace.names[int(uk[k])], "count": int(cnt[k]), "ms": round(float(tot[k]) / 1e6, 3)} for k in top]


def launch_bound(trace: Trace, rb: RankBreakdown, ks: dict, per: dict | None = None) -> list[dict]:
    """per: step_launch's rows, where the caller has them (host_paced.launch_family)."""
    from .rule_base import deferred, finding

    per = step_launch(trace, rb) if per is None else per
    steps = [s for s in rb.measured if s.step in per]
    hit = [s for s in steps if is_launch_bound(per[s.step], s.gpu_time_ns)]
    if not steps or 2 * len(hit) <= len(steps):
        return []  # (a host too slow between launches for a GPU fed long kernels: host_paced.py)
    xs = [per[s.step] for s in hit]
    n = sum(x["kernels"] for x in xs)
    gaps = sum(x["gaps"] for x in xs)
    gap_ns = sum(x["gap_ns"] for x in xs)
    share = gap_ns / max(1, sum(x["busy_ns"] + x["gap_ns"] for x in xs))
    kf = kernel_figures(xs, hit, steps)
    mean_k, med_k, idle, compute, where = kf["mean_k"], kf["med_k"], kf["idle"], kf["compute"], kf["where"]
    mean_gap = gap_ns / max(gaps, 1) / 1e3
    per_step = n / len(hit)
    long_ns = sum(x.get("long_gap_ns", 0) for x in xs)  # the longer gaps that end at a launch
    long_nccl = sum(x.get("long_gap_comm_ns", 0) for x in xs) / max(1, long_ns)  # the part NCCL kernels ran in
    # NCCL kernels running in the gaps (DDP's all-reduces beside the backward): the GPU is not idle
    # there, its other work waits (ddp_long: a third of the gaps' time; an audit's finding)
    comm_in = sum(x.get("gap_comm_ns", 0) for x in xs) / max(gap_ns, 1)
    said = f"{comm_in:.0%}" != "0%"  # (a share that rounds to 0% is not said)
    who = "its work other than NCCL's waits" if said else "the GPU waits"
    nccl = f"; NCCL kernels ran in {comm_in:.0%} of that time" if said else ""
    s0, s1 = min(s.start_ns for s in hit), max(s.end_ns for s in hit)
    title = (
        f"Rank {rb.rank}: launch-bound{where} — {per_step:,.0f} kernels a step of {mean_k:.1f} µs on average "
        f"(median {med_k:.1f} µs); {who} for the next launch {gaps / len(hit):,.0f} times a step, "
        f"{mean_gap:.1f} µs on average (gaps under {SHORT_GAP_NS // 1000} µs{nccl}), {gap_ns / len(hit) / 1e6:.1f} ms "
        f"a step, {share:.0%} of the time it spends running {'that work' if nccl else 'kernels'} or waiting for the next "
        f"launch{_longer(long_ns / len(hit) / 1e6, gap_ns / len(hit) / 1e6, long_nccl)}; "
        f"compute {compute:.0%} of its time{' in them' if where else ''}"
    )
    per_grad, coll, grads = _per_gradient(trace, rb, hit)
    title += per_grad
    # what the host does between launches, where it is mostly the framework's work, not the calls
    # (tp: 89% framework ops, 11% launch calls; 'launch-bound' read as the calls' cost; an audit's)
    # (of the launch-bound steps' host time: step_outlier's 3 s pageable-copy step is not one)
    title += zero_grad(trace, rb, hit) + host_split(hit)
    return [
        deferred(
            finding(
                "launch_bound",
                "high" if share >= 0.5 else "medium",
                title,
                [rb.rank],
                None,
                s0,
                s1,
                {
                    "kernels": n,
                    "kernels_per_step": round(per_step, 1),
                    "mean_kernel_us": round(mean_k, 3),
                    "median_kernel_us": round(med_k, 3),
                    "mean_gap_us": round(mean_gap, 3),
                    "launch_waits_per_step": round(gaps / len(hit), 1),
                    "launch_idle_ms_per_step": round(gap_ns / len(hit) / 1e6, 3),
                    "launch_idle_share": round(share, 4),
                    "launch_gap_nccl_share": round(comm_in, 4),
                    "long_gap_ms_per_step": round(long_ns / len(hit) / 1e6, 3),
                    "long_gap_nccl_share": round(long_nccl, 4),
                    "idle_fraction": round(idle, 4),
                    "compute_share": round(compute, 4),
                    **steps_metrics(trace, rb, hit, steps, coll, grads),
                },
            ),
            {s.step: per[s.step]["gap_ns"] for s in hit},
        )
    ]
