"""The host side of a step: time outside synchronize calls, and what took the time."""

from __future__ import annotations

import re
from contextlib import contextmanager

import numpy as np

from ..model import queries as q
from ..model.categories import CAT_LABEL, GPU_WORK, Cat, LaneKind
from ..model.trace import Trace
from . import intervals as iv

# Calls in which the host waits for the GPU (and so for other ranks through it).
SYNC_CALL = re.compile(
    r"(Stream|Device|Event|Ctx)Synchroni[sz]e|^cudaMemcpy(_v\d+)?$|^cuMemcpy[DH]to[DH](_v2)?$", re.IGNORECASE
)
# ...of them, the synchronize calls: the host waits for queued work, not for a copy's data
# (JAX's block_until_ready waits for queued work too; its device_get reads data, as .item() does)
EXPLICIT_SYNC = re.compile(r"(Stream|Device|Event|Ctx)Synchroni[sz]e|\bblock_until_ready\b", re.IGNORECASE)
# a CUDA copy call: a synchronize call right after one reads the copy's result (.item(), .cpu())
COPY_CALL = re.compile(r"memcpy", re.IGNORECASE)
# Framework calls that block until the device is done (JAX records no CUDA sync call under them)
HOST_SYNC_OP = re.compile(r"\bblock_until_ready\b|\bdevice_get\b")
HOST_KINDS = (LaneKind.CPU, LaneKind.CUDA_API, LaneKind.OSRT, LaneKind.NVTX)
API_CATS = (CAT_LABEL[Cat.CUDA_RUNTIME], CAT_LABEL[Cat.CUDA_DRIVER])  # explain()'s "category" of the runtime calls
# Helper threads blocking in these are idle, not working: never a reason a step was slow.
IDLE_WAIT = re.compile(
    r"^(poll|ppoll|epoll_wait|epoll_pwait|select|pselect6?|pthread_cond_(timed)?wait|"
    r"sem_(timed)?wait|futex|pthread_join|read|recv|recvmsg|accept)$"
)

# OS calls (nsys's OS runtime trace) in which a launching thread sleeps or waits for I/O or another
# process: the host waiting, where nothing else of it is on record (nsys_ddp's planted 50 ms
# clock_nanosleep). Not condition variables, mutexes or joins: there the thread waits for another
# of the process's threads, which may be working unrecorded (the main thread during backward)
OS_WAIT = re.compile(r"^(clock_)?nanosleep$|^u?sleep$|^(poll|ppoll|epoll_wait|epoll_pwait|select|pselect6?|accept4?)$")
# ...and those in which it waits for another of the process's threads: said apart, inside the idle
THREAD_WAIT = re.compile(
    r"^(pthread_cond_(timed)?wait|pthread_mutex_(timed)?lock|pthread_join|sem_(timed)?wait|futex)$"
)

# Python calls in which the launching thread blocks (the Python tracer's events: with_stack or
# experimental_config): a sleep, a lock, a queue or a worker process's pipe, as a DataLoader's
# main thread waits for its next batch. Their time is the host waiting, not framework work.
PY_WAIT = re.compile(
    r"^<built-in (function|method) sleep\b|^time\.sleep$|"
    r"^<built-in method acquire of _thread\.R?lock object|^<method 'acquire' of '_thread\.R?lock' objects>$|"
    r"(^|/)threading\.py\(\d+\): wait$|(^|/)queue\.py\(\d+\): get$|"
    r"(^|/)multiprocessing/connection\.py\(\d+\): (_?poll|wait|_?recv(_bytes)?)$|(^|/)selectors\.py\(\d+\): select$|"
    # JAX's Python tracer names them "$module function" / "$file.py:line function" ("$time sleep")
    r"^\$time sleep$|^\$(threading|queue|selectors)\.py:\d+ (wait|get|select)$|^\$connection\.py:\d+ (_?poll|wait|_?recv)"
)


def name_ids(trace: Trace, rx: re.Pattern) -> np.ndarray:
    """Ids of the trace's names that rx searches true, kept with the trace per pattern (every
    rank's map and the dependency model ask, and matching every name takes 40 ms at 64 ranks)."""
    memo = trace.derived.setdefault("name_ids", {})
    got = memo.get(rx.pattern)
    if got is None or got[0] != len(trace.names):
        got = memo[rx.pattern] = (
            len(trace.names),
            np.array([i for i, n in enumerate(trace.names) if rx.search(n)], np.int32),
        )
    return got[1]


def sync_name_ids(trace: Trace) -> np.ndarray:
    """Ids of the names that are blocking syncs."""
    return name_ids(trace, SYNC_CALL)


def reads_copy(trace: Trace, idx: np.ndarray) -> np.ndarray:
    """Of synchronize calls (event indices): whether each reads a copy's result, the call before
    it on its lane being an async copy (PyTorch's .item() and .cpu() are a cudaMemcpyAsync and a
    cudaStreamSynchronize). The host needs that data, so such a wait is no drained queue to
    remove: the host_sync finding (syncs.py) and `whatif --no-syncs` (through the dependency
    model) both leave it, by this one test."""
    idx = np.asarray(idx, np.int64)
    out = np.zeros(len(idx), bool)
    copy_ids = name_ids(trace, COPY_CALL)
    if not len(idx) or not len(copy_ids):
        return out
    c = trace.columns
    prev = idx - 1  # events are sorted by lane, then start: the one before on the same lane
    ok = prev >= 0
    ok[ok] = np.asarray(c["lane"][prev[ok]]) == np.asarray(c["lane"][idx[ok]])
    out[ok] = np.isin(np.asarray(c["name"][prev[ok]]), copy_ids)
    return out


def sync_intervals(trace: Trace, rank: int) -> tuple[np.ndarray, np.ndarray]:
    from . import intervals as iv

    c = trace.columns
    lanes = [i for i, ln in enumerate(trace.lanes) if ln.rank == rank and ln.kind == LaneKind.CUDA_API]
    if not lanes:
        return iv.EMPTY
    idx = np.concatenate([np.arange(trace.lane_slice(ln).start, trace.lane_slice(ln).stop) for ln in lanes])
    ids = sync_name_ids(trace)
    idx = idx[np.isin(np.asarray(c["name"][idx]), ids)]
    s = np.asarray(c["start"][idx]).astype(np.int64)
    return iv.union(s, s + np.asarray(c["dur"][idx]))


def nonsync_ns(trace: Trace, rank: int) -> dict[int, int]:
    """Per step: window length minus time spent in synchronize calls."""
    from . import intervals as iv

    sync = sync_intervals(trace, rank)
    return {
        st.step: (st.end - st.start) - iv.length(iv.clip(sync, st.start, st.end)) for st in trace.steps_of_rank(rank)
    }


@contextmanager
def measured_once(trace: Trace):
    """Within: each (lanes, window)'s time per name and each lane's nesting are measured once
    (a rank's map asks for the same step windows from several rules); outside, nothing is kept."""
    if "per_name_memo" in trace.derived:  # already inside one: keep its memo
        yield
        return
    with q.parents_kept(trace):
        trace.derived["per_name_memo"] = {}
        try:
            yield
        finally:
            trace.derived.pop("per_name_memo", None)


def _per_name(trace: Trace, lanes: list[int], t0: int, t1: int) -> dict[tuple[int, int, int], int]:
    memo = trace.derived.get("per_name_memo")
    key = (tuple(lanes), int(t0), int(t1))
    if memo is not None and key in memo:
        return memo[key]
    out = _measure_per_name(trace, lanes, t0, t1)
    if memo is not None:
        memo[key] = out
    return out


def _measure_per_name(trace: Trace, lanes: list[int], t0: int, t1: int) -> dict[tuple[int, int, int], int]:
    parts = [q.events_in_range(trace, ln, t0, t1) for ln in lanes]
    idx = np.concatenate(parts) if parts else np.zeros(0, np.int64)
    if not len(idx):
        return {}
    c = trace.columns
    contrib = q.self_times(trace, idx, (t0, t1))
    names = np.asarray(c["name"][idx]).astype(np.int64)
    keep = ~np.isin(names, list(_step_markers(trace)))
    names, contrib = names[keep], contrib[keep]
    cat = np.asarray(c["cat"][idx][keep]).astype(np.int64)
    lane = np.asarray(c["lane"][idx][keep]).astype(np.int64)
    if not len(names):
        return {}
    # grouped in numpy: a window can hold a million events (one key: name, category, lane)
    n_lanes = max(1, len(trace.lanes))
    key = (names * 256 + cat) * n_lanes + lane
    uk, inv = np.unique(key, return_inverse=True)
    tot = np.bincount(inv, weights=contrib).astype(np.int64)  # exact: sums stay below 2**53 ns
    return {(k // (256 * n_lanes), (k // n_lanes) % 256, k % n_lanes): v for k, v in zip(uk.tolist(), tot.tolist())}


_STEP_NAME = re.compile(r"^(ProfilerStep#\d+|step[ _#]?\d+)$", re.IGNORECASE)


def _step_markers(trace: Trace) -> set[int]:
    m = trace.derived.get("step_markers")
    if m is None:
        m = trace.derived["step_markers"] = {i for i, n in enumerate(trace.names) if _STEP_NAME.match(n)}
    return m


def recorded_ns(trace: Trace, rank: int, t0: int, t1: int) -> int:
    """How much of [t0, t1] the rank's host spent inside any recorded op (a step marker and a
    helper thread's idle wait left out): the rest is time the profiler did not see (a sleep or
    I/O without an op around it), so no op may be named as what the host was doing then."""
    from ..model.intervals import clip, length

    parts = [q.events_in_range(trace, ln, t0, t1) for ln in host_lanes(trace, rank)]
    idx = np.concatenate(parts) if parts else np.zeros(0, np.int64)
    if not len(idx):
        return 0
    return length(clip(_recorded_union(trace, idx), int(t0), int(t1)))


def host_lanes(trace: Trace, rank: int) -> list[int]:
    """The rank's host lanes (threads, CUDA API, OS runtime, NVTX)."""
    return [i for i, ln in enumerate(trace.lanes) if ln.rank == rank and ln.kind in HOST_KINDS]


def _recorded_union(trace: Trace, idx: np.ndarray):
    """The union of the events idx that are host work on record: a helper thread's idle wait and
    a step marker left out."""
    from ..model.intervals import union

    idle = trace.derived.get("idle_wait_names")  # matched once per session, not once per rank
    if idle is None:
        idle = trace.derived["idle_wait_names"] = {i for i, n in enumerate(trace.names) if IDLE_WAIT.match(n)}
    c = trace.columns
    idx = idx[~np.isin(np.asarray(c["name"][idx]).astype(np.int64), list(idle | _step_markers(trace)))]
    st = np.asarray(c["start"][idx]).astype(np.int64)
    return union(st, st + np.asarray(c["dur"][idx]).astype(np.int64))


def recorded_in(trace: Trace, rank: int, t0: np.ndarray, t1: np.ndarray) -> np.ndarray:
    """recorded_ns of many windows at once: one union of the rank's recorded host ops, measured in
    each window (a capture's every idle stretch, where a window at a time rereads the lanes)."""
    from ..model.intervals import lengths_in

    parts = [np.arange(trace.lane_slice(i).start, trace.lane_slice(i).stop) for i in host_lanes(trace, rank)]
    idx = np.concatenate(parts) if parts else np.zeros(0, np.int64)
    return lengths_in(_recorded_union(trace, idx), t0, t1)


def explain(
    trace: Trace, rank: int, window: tuple[int, int], baseline: list[tuple[int, int]], kinds=None, top: int = 5
) -> list[dict]:
    """What took more time in `window` than in a typical baseline window: per (name, lane),
    self time in the window minus the mean over the baseline windows, largest first."""
    kinds = kinds or HOST_KINDS
    lanes = [i for i, ln in enumerate(trace.lanes) if ln.rank == rank and ln.kind in kinds]
    base: dict = {}
    for w in baseline:
        for k, v in _per_name(trace, lanes, *w).items():
            base[k] = base.get(k, 0) + v
    return _excess_rows(trace, _per_name(trace, lanes, *window), base, len(baseline), top)


def thread_activity(trace: Trace, rank: int, t0: int, t1: int, top: int = 1) -> list[dict]:
    """explain() rows of [t0, t1] on the host lanes (CPU ops, CUDA API, OS runtime, NVTX) of the
    rank's threads that launch GPU work, waits that idle a thread (IDLE_WAIT) left out: what the
    step's host did, not a helper thread blocked in pthread_cond_wait meanwhile."""
    rows = _excess_rows(trace, _per_name(trace, feeding_lanes(trace, rank), t0, t1), {}, 0, top + 8)
    return [r for r in rows if not IDLE_WAIT.match(r["name"])][:top]


# a host op this many times longer than the gap it covers is the script's outer frame, not what
# the host did in the gap (tp: a 172.9 ms 'profiled' function over a 3.2 ms gap)
COVER_MAX = 4


def covering_op(
    trace: Trace,
    rank: int,
    t0: int,
    t1: int,
    share: float = 0.5,
    max_times: float | None = None,
    thread: tuple[int, int] | None = None,
) -> tuple[int, int] | None:
    """The innermost recorded op of the rank's host (CPU threads; a step marker left out) that
    spans at least `share` of [t0, t1], as (event, ns of the window it spans); None when none does.
    Its wall time, children included: a DataLoader's __next__ spans 50.7 ms of a 51.2 ms gap while
    its own self time is 25.2 ms. thread: (pid, tid) to search alone (the thread that made a
    wait's late launch), else every thread that launches GPU work."""
    # a loader worker's or watchdog's op is not the step's
    feeding = {thread} if thread is not None else _launching_threads(trace, rank)
    lanes = [
        i
        for i, ln in enumerate(trace.lanes)
        if ln.rank == rank and ln.kind == LaneKind.CPU and (ln.pid, ln.stream) in feeding
    ]
    parts = [q.events_in_range(trace, ln, t0, t1) for ln in lanes]
    idx = np.concatenate(parts) if parts else np.zeros(0, np.int64)
    if not len(idx) or t1 <= t0:
        return None
    c = trace.columns
    s = np.asarray(c["start"][idx]).astype(np.int64)
    span = np.minimum(s + np.asarray(c["dur"][idx]).astype(np.int64), t1) - np.maximum(s, t0)
    ok = (span >= share * (t1 - t0)) & ~np.isin(np.asarray(c["name"][idx]), list(_step_markers(trace)))
    if max_times is not None:  # not an outer frame many times the window (COVER_MAX)
        ok &= np.asarray(c["dur"][idx]).astype(np.int64) <= max_times * (t1 - t0)
    if not ok.any():
        return None
    cand = idx[ok]
    # the innermost: the shortest op (on one thread a child is shorter than its parent). Not the
    # deepest: depths of different threads do not compare (nccl_parser_config's main thread, 5 deep
    # in '## backward ##' while the autograd thread runs AccumulateGrad at depth 1 through the gap)
    dur = np.asarray(c["dur"][cand]).astype(np.int64)
    k = int(np.lexsort((-np.asarray(c["depth"][cand]).astype(np.int64), dur))[0])
    return int(cand[k]), int(span[ok][k])


def host_did(trace: Trace, rank: int, t0: int, t1: int) -> tuple[str | None, int, bool] | None:
    """What the rank's host did in [t0, t1], the one rule for every place that names it (the
    critical path's host work, the what-if's removed gap): (None, ns, False) where no op was
    recorded for half of it or more (a sleep the profiler did not see: naming an op would be
    false); else the op or call with the most own time where it holds a quarter or more (a planted
    sleep, the autograd engine's backward: not the step function around them), with its callees'
    time where it also spans half of the window (a DataLoader's __next__ spans 68.8 ms of a 69.0 ms
    gap, 46.3 ms of it its own time); else the innermost op spanning half of it, unless the
    script's outer frame (COVER_MAX times the window); else None. The flag: ns is the op's own
    time while it spans more of the window, its callees' time left out (fsdp's lm_step: 77.0 ms of
    its own in a 120.9 ms stretch it spans whole; said as such, where '77.0 ms of it' read as the
    op's length beside a 124.6 ms op; an audit of the window)."""
    n = t1 - t0
    if n <= 0:
        return None
    unseen = n - recorded_ns(trace, rank, t0, t1)
    if unseen >= 0.5 * n:
        return None, unseen, False
    cov = covering_op(trace, rank, t0, t1, max_times=COVER_MAX)
    covered = (trace.name_of(cov[0]), cov[1], False) if cov is not None else None
    rows = thread_activity(trace, rank, t0, t1, top=12)
    if rows and rows[0]["ms"] * 1e6 >= 0.25 * n:
        name = rows[0]["name"]
        if covered is not None and covered[0] == name:
            return covered
        # its own time on every thread of the rank, beside what its events span: an op that runs
        # on two threads at once, or calls nothing, is said by its span
        own = int(round(own_by_name(rows)[name] * 1e6))
        span = _spans(trace, rank, name, t0, t1)
        if span > 1.05 * own + 100_000:
            return name, int(round(rows[0]["ms"] * 1e6)), True
        # else what its events span of the window (resnet50's aten::add_: 13.5 ms, where one
        # thread's own time said 13.1; an audit)
        return name, span or own, False
    return covered


def own_by_name(rows: list[dict]) -> dict[str, float]:
    """thread_activity's rows (one a name and thread) as ms of own time a name, over the threads."""
    by: dict[str, float] = {}
    for r in rows:
        by[r["name"]] = by.get(r["name"], 0.0) + r["ms"]
    return by


def _spans(trace: Trace, rank: int, name: str, t0: int, t1: int) -> int:
    """ns of [t0, t1] that events of this name on the rank's launching threads span (their union)."""
    c = trace.columns
    parts = [q.events_in_range(trace, ln, t0, t1) for ln in feeding_lanes(trace, rank)]
    idx = np.concatenate(parts) if parts else np.zeros(0, np.int64)
    if len(idx):
        try:
            nid = trace.names.index(name)
        except ValueError:
            return 0
        idx = idx[np.asarray(c["name"][idx]) == nid]
    if not len(idx):
        return 0
    s = np.maximum(np.asarray(c["start"][idx]).astype(np.int64), t0)
    e = np.minimum(np.asarray(c["start"][idx]).astype(np.int64) + np.asarray(c["dur"][idx]).astype(np.int64), t1)
    return int(iv.length(iv.union(s, np.maximum(s, e))))


_NAMED_CATS = np.array([Cat.CPU_OP, Cat.USER_ANNOTATION, Cat.NVTX, Cat.COMM_OP], np.int64)


def outermost_ops(trace: Trace, calls: np.ndarray) -> np.ndarray:
    """Per call (an event index), the outermost recorded op or NVTX range of its thread around
    it, a step marker left out (-1: none): where the work was issued from, as a user names it
    (h100_2gpu_1s's copies: 'FSDP::pre_forward (encoder.block.14.layer.1)', where the innermost
    is aten::copy_)."""
    c = trace.columns
    out = np.full(len(calls), -1, np.int64)
    if not len(calls):
        return out
    markers = np.zeros(len(trace.names) + 1, bool)
    markers[list(_step_markers(trace))] = True
    host: dict[tuple[int, int, int], list[int]] = {}
    for i, ln in enumerate(trace.lanes):
        if ln.kind in (LaneKind.CPU, LaneKind.NVTX):
            host.setdefault((ln.rank, ln.pid, ln.stream), []).append(i)
    lane_of = np.asarray(c["lane"][calls]).astype(np.int64)
    t = np.asarray(c["start"][calls]).astype(np.int64)
    for ll in np.unique(lane_of).tolist():
        ln = trace.lanes[ll]
        at = np.flatnonzero(lane_of == ll)
        best_depth = np.full(len(at), np.iinfo(np.int64).max)
        for hl in host.get((ln.rank, ln.pid, ln.stream), []):
            sl = trace.lane_slice(hl)
            idx = np.arange(sl.start, sl.stop)
            # ops and ranges a user named, not a Python stack frame (with_stack: the outermost is
            # the script's '<module>') nor a step marker
            idx = idx[~markers[np.asarray(c["name"][sl])] & np.isin(np.asarray(c["cat"][sl]), _NAMED_CATS)]
            depth = np.asarray(c["depth"][idx]).astype(np.int64)
            start = np.asarray(c["start"][idx]).astype(np.int64)
            end = start + np.asarray(c["dur"][idx]).astype(np.int64)
            for d in np.unique(depth).tolist():  # shallow first: the first hit at each call is kept
                m = depth == d
                s_, e_, ix = start[m], end[m], idx[m]
                p = np.searchsorted(s_, t[at], side="right") - 1
                pc = np.maximum(p, 0)
                hit = (p >= 0) & (e_[pc] >= t[at]) & (d < best_depth)
                out[at[hit]] = ix[pc[hit]]
                best_depth[hit] = d
    return out


def lane_words(lane) -> str:
    """A host lane as the evidence names it ("thread 948 (python3)", "GPU 0 · CUDA API ...")."""
    return (f"GPU {lane.device} · " if lane.device >= 0 else "") + lane.label


def explain_steps(trace: Trace, rank: int, top: int = 5) -> dict[int, list[dict]]:
    """What the rank's host did in each step beyond its usual: per (name, category, lane), its self
    time in the step minus its median over the rank's other steps, for every step at once (the map
    computes this, since only the reduce knows which steps were stalls). The median, not the mean:
    another slow step among the others must not make a slow op look usual (ddp_nop2p's steps 2 and
    3 are both slow; against their mean run_backward was "8 ms more than usual" in step 3, against
    the ordinary steps 11-14 ms). Each step's times are measured once, not once per other step."""
    steps = trace.steps_of_rank(rank)
    lanes = host_lanes(trace, rank)
    per = [_per_name(trace, lanes, x.start, x.end) for x in steps]
    keys = sorted({k for p in per for k in p})
    col = {k: i for i, k in enumerate(keys)}
    m = np.zeros((len(keys), len(steps)), np.float64)  # an op absent from a step took 0 there
    for j, p in enumerate(per):
        for key, v in p.items():
            m[col[key], j] = v
    out: dict[int, list[dict]] = {}
    for k, st in enumerate(steps):
        if st.step in out:
            continue  # a step number seen twice: its first window, as explain's callers take it
        others = [j for j, x in enumerate(steps) if x.step != st.step]
        usual = np.median(m[:, others], axis=1) if others and len(keys) else np.zeros(len(keys))
        base = {kk: float(u) for kk, u in zip(keys, usual) if u > 0}
        out[st.step] = _excess_rows(trace, per[k], base, 1, top)
    return out


def _excess_rows(trace: Trace, now: dict, base: dict, n_base: int, top: int) -> list[dict]:
    nb = max(1, n_base)
    rows = []
    for k, v in now.items():
        ex = v - base.get(k, 0) / nb
        if ex > 0:
            # ties broken by the name's text, not its id: ids depend on which files were loaded
            # together, and a rank's map must not
            rows.append((ex, (trace.names[k[0]], k[1], k[2]), v, k[0]))
    rows.sort(reverse=True)
    out = []
    for ex, (_nm, ct, ln), v, n in rows[:top]:
        lane = trace.lanes[ln]
        out.append(
            {
                "name": trace.names[n],
                "category": CAT_LABEL.get(Cat(ct), str(ct)),
                "lane": lane_words(lane),
                "excess_ms": round(ex / 1e6, 3),
                "ms": round(v / 1e6, 3),
            }
        )
    return out


def _flows_by_src(trace: Trace) -> tuple[np.ndarray, np.ndarray]:
    """The flows (launch -> op) sorted by their source event, once per session: every rank's map
    searches them."""
    got = trace.derived.get("flows_by_src")
    if got is None or len(got[0]) != len(trace.flows[0]):
        src = np.asarray(trace.flows[0]).astype(np.int64)
        order = np.argsort(src, kind="stable")
        got = trace.derived["flows_by_src"] = (src[order], np.asarray(trace.flows[1]).astype(np.int64)[order])
    return got


def launch_flows(trace: Trace) -> tuple[np.ndarray, np.ndarray]:
    """The flows that end on GPU work (kernels, copies, memsets), sorted by their source, once per
    session. An nsys export also links cudaEventQuery to its GPU-side 'Event Sync' record (NCCL's
    watchdog thread polls that way and launches nothing) and cudaStreamWaitEvent to its event's."""
    got = trace.derived.get("launch_flows")
    if got is None or got[0] != len(trace.flows[0]):
        src, dst = _flows_by_src(trace)
        cat = np.asarray(trace.columns["cat"][dst]) if len(dst) else np.zeros(0, np.uint8)
        work = np.isin(cat, GPU_WORK)
        got = trace.derived["launch_flows"] = (len(trace.flows[0]), src[work], dst[work])
    return got[1], got[2]


def launch_sources(trace: Trace) -> np.ndarray:
    """Sorted source events of the flows that end on GPU work (launch_flows)."""
    return launch_flows(trace)[0]


def feeding_lanes(trace: Trace, rank: int) -> list[int]:
    """The rank's host lanes (CPU ops, CUDA API, OS runtime, NVTX) of the threads that launch its
    GPU work."""
    feeding = _launching_threads(trace, rank)
    return [
        i
        for i, ln in enumerate(trace.lanes)
        if ln.rank == rank and ln.kind in HOST_KINDS and (ln.pid, ln.thread) in feeding
    ]


def _launching_threads(trace: Trace, rank: int) -> set[tuple[int, int]]:
    """(pid, tid) of the rank's threads that launched GPU work (all its CUDA API threads when no
    launch is on record): a data loader's worker or the NCCL watchdog does not feed the step (the
    watchdog's cudaEventQuery flows to an 'Event Sync' record, not to GPU work)."""
    api = [i for i, ln in enumerate(trace.lanes) if ln.rank == rank and ln.kind == LaneKind.CUDA_API]
    src = launch_sources(trace)
    out = set()
    for ln in api:
        sl = trace.lane_slice(ln)
        if np.searchsorted(src, np.int64(sl.stop)) > np.searchsorted(src, np.int64(sl.start)):
            out.add((trace.lanes[ln].pid, trace.lanes[ln].stream))
    if out or api:
        return out or {(trace.lanes[ln].pid, trace.lanes[ln].stream) for ln in api}
    # no CUDA call on record (a CPU-only capture): the threads with recorded ops, so the host's
    # time is said as what its ops did, not as '100% no op recorded' beside 98% covered by ops
    return {(ln.pid, ln.stream) for ln in trace.lanes if ln.rank == rank and ln.kind == LaneKind.CPU}


def flows_by_dst(trace: Trace) -> tuple[np.ndarray, np.ndarray]:
    """The flows' destinations sorted, and their sources in that order; kept with the trace (every
    rank's map asks twice: sorting a million flows each time was a fifth of a 64-rank map)."""
    src, dst = trace.flows
    got = trace.derived.get("flows_by_dst")
    if got is None or len(got[0]) != len(dst):
        o = np.argsort(dst, kind="stable")
        # int64, as the op indices searched in them: numpy would cast a million int32s per search
        got = trace.derived["flows_by_dst"] = (np.asarray(dst)[o].astype(np.int64), np.asarray(src)[o].astype(np.int64))
    return got
