"""host_bound_idle: the GPU idles between its ops because the host has not launched the next one
(a data loader, a blocking copy, a sleep, a first launch): each step's longest idle gap, what the
host did in it, and whether that is a one-time cost. A gap whose next op had been launched before
it began is not the host's."""

from __future__ import annotations

import numpy as np

from ..model.categories import Cat, LaneKind
from ..model.fmt import format_bytes, short_name
from ..model.trace import Trace
from . import intervals as iv
from .breakdown import RankBreakdown, launch_calls
from .host import API_CATS, COPY_CALL, HOST_KINDS, covering_op, explain, recorded_in, recorded_ns
from .issuers import (
    first_call,
    first_launch,
    first_run,
    launched_op,
    local_memory_grown,
    other_instances_before,
)
from .rule_base import WHOLE_CAPTURE_ADVICE, deferred, finding

HOST_GAP_MIN_NS = 1_000_000  # gaps shorter than 1 ms are launch gaps, not host stalls
# below a millisecond of GPU time a share is a few launches' latency, not how the GPU is used
MIN_GPU_TIME_NS = 1_000_000


def _busy(trace: Trace, rb: RankBreakdown):
    c = trace.columns
    s = np.asarray(c["start"][rb.ops]).astype(np.int64)
    return iv.union(s, s + np.asarray(c["dur"][rb.ops]))


def host_bound(trace: Trace, rb: RankBreakdown) -> list[dict]:
    """The largest GPU idle gap of each step (>= 1 ms): the host did something else. A capture
    that marks no steps is one step (its step None): its largest gap is said as the capture's, not
    as a step's (HTA's alexnet benchmark: 10.0 s of its 12.9 s in one cuDNN convolution's host time)."""
    if not rb.steps:
        return []
    whole = rb.steps[0].step is None
    busy = _busy(trace, rb)
    per_step = []
    # steps with GPU work only: a step without any (a capture's last ProfilerStep cut to a 0.05 ms
    # stub, HTA's MI250 trace) has no gap between GPU work, and halved the typical gap there
    fed = [s for s in rb.measured if s.busy_ns > 0]
    if not fed:
        return []
    queued = _queued_gaps(trace, rb)
    stretches = iv.EMPTY  # a whole capture's: every idle stretch that waits for the host
    for s in fed:
        g = iv.gaps(busy, s.start_ns - s.idle_before_ns, s.end_ns + s.idle_after_ns)
        glen = g[1] - g[0]
        big = glen >= HOST_GAP_MIN_NS
        # a gap whose next GPU op had been launched before it began is no wait for the host
        # (HTA's negative_queue: a memset queued by cudaGraphLaunch 66 ms before each 64 ms gap,
        # while the host waited in a blocking copy for the GPU)
        big[big] = ~queued(g[0][big], g[1][big])
        if whole:
            stretches = (g[0][big], g[1][big])
        if big.any():
            k = int(np.flatnonzero(big)[np.argmax(glen[big])])
            per_step.append((s, int(glen[k]), int(g[0][k]), int(g[1][k]), int(glen[big].sum())))
        else:
            per_step.append((s, 0, s.start_ns, s.start_ns, 0))
    typical = float(np.median([p[1] for p in per_step]))
    med_window = float(np.median([s.gpu_time_ns for s in fed]))
    least = max(2 * HOST_GAP_MIN_NS, 0.15 * med_window)
    if typical < least:
        return []
    # the step whose largest gap is closest to the typical one is the evidence; not one whose gap
    # is a kernel's first launch where the gap recurs in the other steps without it (its one-time
    # cost would make the finding low and unpriced, the gap of every other step with it)
    ranked = sorted(per_step, key=lambda p: abs(p[1] - typical))
    s, _, g0, g1, _ = ranked[0]
    if not whole and len(per_step) > 1 and _first_launch_gap(trace, rb.rank, g0, g1):
        if float(np.median([p[1] for p in per_step if p[0] is not s])) >= least:
            s, _, g0, g1, _ = next(
                (p for p in ranked[1:] if not _first_launch_gap(trace, rb.rank, p[2], p[3])), ranked[0]
            )
    what = explain(trace, rb.rank, (g0, g1), [], top=3)
    # "at the start of the step": the gap opens in its first 5% (an input pipeline before the
    # step's work); one opening 20% into the step, after kernels ran, is not that
    at_start = (
        np.median([(p[2] - (p[0].start_ns - p[0].idle_before_ns)) / max(p[0].gpu_time_ns, 1) for p in per_step]) < 0.05
    )
    share = typical / med_window
    # the op named is where the host spent the gap, or the gap is said to be unrecorded host time
    # (stall_on: a 25 ms sleep no op records; naming the 0.06 ms aten::copy_ after it was false)
    gap = g1 - g0
    unseen = gap - recorded_ns(trace, rb.rank, g0, g1)
    # a runtime call that takes most of the gap is named, not the op around it (HTA's MI250 trace:
    # aten::add_ held one 6.5 ms hipLaunchKernel); its fix is that call at its usual time
    api, outer = _runtime_call(what, gap)
    named = None
    extra: dict = {}  # a whole capture's stretches like its longest (_unseen_alike)
    first = None
    warm = None  # the op around the gap is its first call, far longer than its later ones
    if api is not None:
        around = f", inside {outer}" if outer else ""
        op = launched_op(trace, rb.rank, g0, g1, api["name"]) if "launch" in api["name"].lower() else None
        first = first_run(trace, rb.rank, op)
        which = short_name(first) if first else ""
        if first and other_instances_before(trace, rb.rank, first):
            which = f"this instance of {which} (other instances of it ran before)"
        # (not 'loads its code' alone: extra-p's ex-gpu vector_dot's 3 ms first launch grew the
        # device's local memory from 127 MB to 1.9 GB, which the export records; an audit's). What
        # the kernel itself needs is not said: the export's localMemoryPerThread is 0 for it
        # (helper-120), the total is what grew
        grown = local_memory_grown(trace, rb.rank, op) if first else None
        hint = (
            f" (the first launch of {which} in the capture: a launch takes microseconds; this one grew the "
            f"GPU's local memory from {format_bytes(grown[0])} to {format_bytes(grown[1])} (the export's "
            "localMemoryTotal at its launch, above every kernel's before it), which the driver does while the "
            "call waits; a kernel's first launch may also load its code: one-time costs)"
            if grown
            else f" (the first launch of {which} in the capture: a launch takes microseconds; a kernel's first "
            "also loads its code, and grows the GPU's local memory where it needs more than the kernels "
            "before it: one-time costs)"
            if first
            else " (a launch call takes microseconds; one this long waited in the runtime, as it does when it "
            "loads a kernel's code at its first launch)"
            if "launch" in api["name"].lower()
            else ""
        )
        # a whole capture only: with steps, one step's first call says nothing of the median gap
        warm = first_call(trace, rb.rank, g0, g1, outer) if outer and not first and whole else None
        who = f": the host was in {api['name']} for {api['ms']:,.1f} ms of the {gap / 1e6:,.1f} ms{around}{hint}"
        who += _first_call_hint(warm)
        # another runtime call that holds a real part of the same gap, named too (HTA's alexnet:
        # a 3,055.6 ms cudaLaunchKernel beside cudaFree's 6,533.7 ms of a 10 s gap; an audit's)
        more = next(
            (w for w in what if w is not api and w["category"] in API_CATS and w["ms"] * 1e6 >= 0.2 * gap), None
        )
        if more is not None:
            who += f", and in {more['name']} for {more['ms']:,.1f} ms"
        named = {"name": api["name"], "excess_ms": api["excess_ms"], "lane": api["lane"]}
        if not whole and len(per_step) > 1:
            # the steps whose own longest gap is spent in the same call, with its extra time there:
            # a recurring gap's fix is priced in those steps, each by its own extra
            named["steps"] = _steps_in_call(trace, rb.rank, per_step, api["name"])
    elif (cov := covering_op(trace, rb.rank, g0, g1)) is not None:
        # the op the host was inside for most of the gap, children included (a DataLoader's
        # __next__: 50.7 of 51.2 ms, of which its own self time is 25.2 ms)
        outer = trace.name_of(cov[0])
        where = "" if whole else _which_steps(trace, rb.rank, per_step, outer, s.step)
        warm = first_call(trace, rb.rank, g0, g1, outer) if whole else None
        who = f": {where}the host was in {outer} for {cov[1] / 1e6:,.1f} ms of its {gap / 1e6:,.1f} ms gap"
        who += _first_call_hint(warm) + _loader_kind(outer)
    elif what and what[0]["ms"] * 1e6 >= 0.5 * gap:
        # how much of the gap, said (profile1: init_data covers 14.7 ms of its 21.1 ms; an audit's)
        who = f": the host was in {what[0]['name']} for {what[0]['ms']:,.1f} ms of the {gap / 1e6:,.1f} ms"
    elif unseen >= 0.5 * gap:
        who = (
            f": {'' if whole else _which_unseen(trace, rb.rank, per_step, s.step)}its host ran no recorded op for "
            f"{unseen / 1e6:,.1f} ms of the "
            f"{gap / 1e6:.1f} ms (time the profiler did not see: a sleep, I/O or untraced code)"
        )
        if whole:
            alike = _unseen_alike(trace, rb.rank, stretches, (g0, g1))
            who += alike[0]
            extra = alike[1]
    elif what:
        who = f": its host's longest op in it was {what[0]['name']} ({what[0]['ms']:.1f} ms of the {gap / 1e6:.1f} ms)"
    else:
        who = ""
    lead = _before_gpu(trace, rb.rank, fed[0].start_ns, typical) if whole else ""
    f = deferred(
        finding(
            "host_bound_idle",
            # a kernel's first launch is paid once, not a step (its advice says to profile after
            # warm-up); a toy's idle GPU (under 1 ms of GPU work: HTA's cuda_event_sync, 372 us of
            # kernels) is judged by nothing that says how a GPU is used, as utilization is not
            "low"
            if first or warm or sum(x.busy_ns for x in fed) < MIN_GPU_TIME_NS
            else "high"
            if share > 0.3
            else "medium",
            (
                f"Rank {rb.rank}: the trace marks no steps; the GPU's longest idle stretch, {typical / 1e6:,.1f} ms "
                f"of the {fed[0].window_ns / 1e6:,.1f} ms from its first op to its last, waits for the host{who}{lead}"
                if whole
                else f"Rank {rb.rank}: the GPU sits idle {typical / 1e6:.1f} ms a step "
                f"{'at the start of the step ' if at_start else ''}waiting for the host{who}"
            ),
            [rb.rank],
            s.step,
            g0,
            g1,
            {
                "gap_ms_per_step": round(typical / 1e6, 3),
                "share_of_step": round(share, 4),
                "gaps_ms": [round(p[1] / 1e6, 3) for p in per_step],
                "at_step_start": bool(at_start),
                "host_activity": what,
                "host_unrecorded_ms": round(unseen / 1e6, 3),
                **({"named_op": named} if named else {}),
                **({"one_time": True, "first_launch_of": first} if first else {}),
                **({"one_time": True, "first_call_of": outer} if warm else {}),
                **({"whole_capture": True} if whole else {}),
                **extra,
            },
        ),
        {p[0].step: p[4] for p in per_step},
    )
    if whole:
        f["advice"] = WHOLE_CAPTURE_ADVICE[trace.format == "nsys"]
    elif first:
        f["advice"] = FIRST_LAUNCH_ADVICE
    elif api is not None and COPY_CALL.search(api["name"]):
        f["advice"] = BLOCKING_COPY_ADVICE
    elif not at_start:  # not an input pipeline's gap (HTA's negative_queue trace: a blocking copy mid-step)
        f["advice"] = MID_STEP_IDLE_ADVICE
    return [f]


QUEUED_TOL_NS = 20_000  # ops starting this soon after a gap's end end it too (depgraph.XDEP_TOL_NS)


def _queued_gaps(trace: Trace, rb: RankBreakdown):
    """A test of GPU idle gaps (starts, ends) of the rank: whether every GPU op that ends each one
    (starting at its end or within QUEUED_TOL_NS of it, on any stream) had its launch call return
    before the gap began: the GPU had work and waited on something else (a dependency not on
    record, an event, a graph's host node). False where any of them has no launch on record, or
    one launched in the gap (the host it waited for)."""
    c = trace.columns
    ops = rb.ops if rb.ops is not None else np.zeros(0, np.int64)
    starts = np.asarray(c["start"][ops]).astype(np.int64)
    order = np.argsort(starts, kind="stable")
    ops, starts = ops[order], starts[order]
    call = launch_calls(trace, ops)
    known = call >= 0
    ret = np.full(len(ops), np.iinfo(np.int64).max, np.int64)  # when each op's launch call returned
    ret[known] = np.asarray(c["start"][call[known]]).astype(np.int64) + np.asarray(c["dur"][call[known]])

    def test(g0: np.ndarray, g1: np.ndarray) -> np.ndarray:
        lo = np.searchsorted(starts, g1, side="left")
        hi = np.searchsorted(starts, np.asarray(g1) + QUEUED_TOL_NS, side="right")
        return np.array([hi[k] > lo[k] and bool((ret[lo[k] : hi[k]] <= g0[k]).all()) for k in range(len(g1))], bool)

    return test


def _unseen_alike(trace: Trace, rank: int, stretches, longest: tuple[int, int]) -> tuple[str, dict]:
    """A capture without steps: the other idle stretches (1 ms or more, waiting for the host) that
    its host, like in the longest, spent mostly outside any recorded op, said with their total
    (saxpy's 4 stretches of 172-196 ms, 545.7 ms unrecorded of 723.6 ms idle, read as one stall;
    an audit's), and those figures for the metrics."""
    a, b = stretches
    if len(a) < 2:
        return "", {}
    unseen = (b - a) - recorded_in(trace, rank, a, b)
    alike = 2 * unseen >= b - a
    others = alike & ~((a == longest[0]) & (b == longest[1]))
    n = int(others.sum())
    if not n:
        return "", {}
    lens = np.sort((b - a)[others])[::-1]
    listed = ", ".join(f"{x / 1e6:,.1f}" for x in lens[:4]) + (", ..." if n > 4 else "")
    idle_ns, unseen_ns = int((b - a)[alike].sum()), int(unseen[alike].sum())
    text = (
        f"; {n} more idle stretch{'es' if n > 1 else ''} ({listed} ms) {'are' if n > 1 else 'is'} like it, the host "
        f"mostly outside any recorded op: {n + 1} stretches, {idle_ns / 1e6:,.1f} ms of GPU idle time, "
        f"{unseen_ns / 1e6:,.1f} ms of which the host spent in no recorded op"
    )
    return text, {
        "stretches_alike": n + 1,
        "idle_alike_ms": round(idle_ns / 1e6, 3),
        "unrecorded_alike_ms": round(unseen_ns / 1e6, 3),
    }


def _steps_in_call(trace: Trace, rank: int, per_step: list, name: str) -> dict[str, float]:
    """{step: the call's extra ms} for the steps whose longest gap the host spent mostly in `name`."""
    out = {}
    for p in per_step:
        if p[1] >= HOST_GAP_MIN_NS:
            api, _outer = _runtime_call(explain(trace, rank, (p[2], p[3]), [], top=3), p[3] - p[2])
            if api is not None and api["name"] == name:
                out[str(p[0].step)] = float(api["excess_ms"])
    return out


def _which_steps(trace: Trace, rank: int, per_step: list, outer: str, shown) -> str:
    """'in step 4 ', or where the other steps' longest gaps are inside the same op too, 'in every
    step (3 of 3; step 4 shown) ' / 'in 5 of 8 steps (step 4 shown) ' (dataloader_stall: its sleep
    opens all 3 steps, and 'in step 4' read as a one-off stall; an audit's finding)."""
    same = sum(
        1 for p in per_step if (c := covering_op(trace, rank, p[2], p[3])) is not None and trace.name_of(c[0]) == outer
    )
    return _steps_said(same, len(per_step), shown)


def _which_unseen(trace: Trace, rank: int, per_step: list, shown) -> str:
    """As _which_steps, for a gap most of which no op was recorded in: stall_on's host sleeps
    unrecorded before every one of its 6 steps, and 'in step 2' read as a one-off (an audit)."""
    same = sum(1 for p in per_step if p[3] > p[2] and 2 * recorded_ns(trace, rank, p[2], p[3]) <= p[3] - p[2])
    return _steps_said(same, len(per_step), shown)


def _steps_said(same: int, n: int, shown) -> str:
    """'in step 4 ', 'in every step (3 of 3; step 4 shown) ' or 'in 5 of 8 steps (step 4 shown) ':
    of n steps, `same` hold the same gap."""
    if same <= 1 or n <= 1:
        return f"in step {shown} "
    return (
        f"in every step ({same} of {n}; step {shown} shown) "
        if same == n
        else f"in {same} of {n} steps (step {shown} shown) "
    )


def _first_launch_gap(trace: Trace, rank: int, g0: int, g1: int) -> bool:
    """Whether the host spent most of [g0, g1] in a launch call that was its kernel's first launch."""
    api, _outer = _runtime_call(explain(trace, rank, (g0, g1), [], top=3), g1 - g0)
    return bool(api and "launch" in api["name"].lower() and first_launch(trace, rank, g0, g1, api["name"]))


def _first_call_hint(warm: tuple[float, float, int, float, float] | None) -> str:
    """What says that the op around a gap is its first call and far longer than its later ones:
    their range with the median, as one long later call (alexnet's second convolution, 1,049 ms
    against a median 1.4) is likely set-up too and a median alone hid it."""
    if warm is None:
        return ""
    ms, med, n, lo, hi = warm

    def t(x: float) -> str:
        return f"{x:,.1f} ms" if x >= 0.05 else "under 0.05 ms"

    later = (
        f"its later call takes {t(med)}"
        if n == 1
        else f"its {n} later calls take {t(lo)} to {t(hi)}, a median {t(med)}"
    )
    return f" (its first call on its thread in the capture, {t(ms)}; {later}: likely set-up, paid at first calls)"


# the gap is a copy call the host waits in: a read of a GPU value or a copy from pageable memory
BLOCKING_COPY_ADVICE = (
    "The host waits in a copy call: a copy to the host (.item(), .cpu(), .tolist(), .to('cpu'), printing "
    "or logging a GPU tensor) or from pageable memory blocks it until the GPU has reached the copy, and "
    "the GPU then idles until the host's next launch. Keep such values on the GPU and read them every N "
    "steps, or copy into pinned memory with non_blocking=True and read it a step later."
)
MID_STEP_IDLE_ADVICE = (
    "The GPU drains while the host is busy elsewhere within the step (what it was in is the evidence): "
    "move that work off the step's path (another thread or process, or every N steps), or queue enough "
    "GPU work before it that the GPU stays busy meanwhile."
)


FIRST_LAUNCH_ADVICE = (
    "A kernel's first launch loads its code (and compiles it, where the binary has PTX only for this "
    "GPU): a one-time cost that no later step pays, so it is not priced as a step's saving. Profile "
    "after a warm-up step (torch.profiler's schedule with warmup=1 or more); with CUDA, "
    "CUDA_MODULE_LOADING=EAGER loads every kernel at start-up instead of at its first launch."
)


def _runtime_call(rows: list[dict], span: int) -> tuple[dict | None, str | None]:
    """Of explain()'s rows for a span: the runtime call that took half of it or more, and the name
    of the host op around it (the first row, when it is not a runtime call itself)."""
    api = next((w for w in rows if w["category"] in API_CATS and w["ms"] * 1e6 >= 0.5 * span), None)
    if api is None or rows[0] is api or rows[0]["category"] in API_CATS:
        return api, None
    return api, rows[0]["name"]


def _first_cuda_call(trace: Trace, rank: int) -> int | None:
    """The rank's first CUDA runtime call (an event index): the runtime makes the context at its
    first call; a driver query before it (profile1's cuDeviceGetLuid) makes none."""
    c = trace.columns
    best = None
    for i, ln in enumerate(trace.lanes):
        lo, hi = int(trace.lane_offsets[i]), int(trace.lane_offsets[i + 1])
        if ln.rank != rank or ln.kind != LaneKind.CUDA_API or lo >= hi:
            continue
        rt = np.flatnonzero(np.asarray(c["cat"][lo:hi]) == Cat.CUDA_RUNTIME)
        if len(rt) and (best is None or int(c["start"][lo + int(rt[0])]) < best[0]):
            best = (int(c["start"][lo + int(rt[0])]), lo + int(rt[0]))
    return None if best is None else best[1]


def _before_gpu(trace: Trace, rank: int, first_op: int, longest: float) -> str:
    """A capture without steps: the host time before the GPU's first op, and the op that took
    most of it, where it outlasts the longest idle stretch between ops (HTA's alexnet: 30.5 s
    before its first kernel, 29.9 s of it in one cudaDeviceGetStreamPriorityRange, the CUDA
    context made at the process's first CUDA call); "" otherwise."""
    # each lane's events are sorted by start: its first one with a duration opens it (a zero-length
    # mark is none: Nsight Systems' own "OS runtime libraries profiling started", 16 ms before
    # ex-gpu's first call, was taken as its host's first op; an audit's finding)
    c = trace.columns
    firsts = []
    for i, ln in enumerate(trace.lanes):
        lo, hi = int(trace.lane_offsets[i]), int(trace.lane_offsets[i + 1])
        if ln.rank != rank or ln.kind not in HOST_KINDS or lo >= hi:
            continue
        timed = np.flatnonzero(np.asarray(c["dur"][lo : min(hi, lo + 64)]) > 0)
        if len(timed):
            firsts.append(lo + int(timed[0]))
    if not firsts:
        return ""
    t0 = int(c["start"][firsts].min())
    lead = first_op - t0
    if lead <= longest:
        return ""
    rows = explain(trace, rank, (t0, first_op), [], top=3)
    api, outer = _runtime_call(rows, lead)  # named, inside the op around it, as host_bound names one
    most = ""
    if api is not None:
        most = f", {api['ms']:,.1f} ms of that in {api['name']}" + (f" inside {outer}" if outer else "")
        first = _first_cuda_call(trace, rank)
        # that one call, not calls of its name summed (ex-gpu's 210 ms cudaMalloc, profile1's 205 ms
        # cudaStreamCreate: the others of their names took microseconds)
        if (
            first is not None
            and trace.name_of(first) == api["name"]
            and int(trace.columns["dur"][first]) >= 0.5 * api["ms"] * 1e6
        ):
            most += " (the process's first CUDA runtime call: it creates the CUDA context)"
    elif rows and rows[0]["ms"] * 1e6 >= 0.5 * lead:
        most = f", {rows[0]['ms']:,.1f} ms of that in {rows[0]['name']}"
    return f"; the GPU's first op came {lead / 1e6:,.1f} ms after the host's first recorded op{most}"


def _loader_kind(name: str) -> str:
    """What a PyTorch DataLoader's iterator says of its set-up, where its name tells: the
    single-process one (PyTorch's for num_workers=0) loads every batch on the training loop's own
    thread (resnet50's stall named it and not the fix; an audit)."""
    if "_SingleProcessDataLoaderIter" in name:
        return " (the DataLoader loads in the training process itself, num_workers=0: no worker prepares the next batch meanwhile)"
    return ""
