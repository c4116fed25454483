"""The host's step, split: what the threads that launch a rank's GPU work spent each step in
(framework ops, launch calls, calls made with the launch queue full, syncs, waits, nothing on
record), exclusive and in that order, so the parts add up to the step. The events of each part
are found once (host_events) for the split and for what a Compare window outlines."""

from __future__ import annotations

import re

import numpy as np

from ..model.categories import Cat, LaneKind
from ..model.trace import Trace
from . import intervals as iv
from .host import (
    HOST_SYNC_OP,
    OS_WAIT,
    PY_WAIT,
    THREAD_WAIT,
    _flows_by_src,
    _launching_threads,
    _step_markers,
    name_ids,
    sync_name_ids,
)
from .launch_queue import queue_full_calls

# an asynchronous copy call that lasts this long, most of it while its copy ran, blocked the host
# on it (a copy to or from pageable memory): counted with the syncs, not as a launch
_ASYNC_COPY = re.compile(r"memcpy.*async", re.IGNORECASE)
BLOCKING_COPY_NS = 50_000
# collectives run on the host by gloo (record_function "gloo:all_reduce" on the gloo threads): the
# host communicating, not framework work (HTA's cpu_only: 85% of its step, read as 'framework ops')
# ...and MPI's calls on the launching thread (nsys's MPI trace: saxpy's MPI_Send and MPI_Recv, 16% of
# its span, said as 'framework ops' once their domain's lane was matched to the thread; an audit)
# (MPI's set-up and bookkeeping calls, MPI_Init's 645 ms in saxpy, are not communication)
HOST_COLL = re.compile(r"^(gloo:|MPI_(?!(Init|Finalize|Initialized|Finalized|Comm_|Get_|Wtime|Wtick|Error)))")
# NVTX domains of the libraries under the framework (nsys traces cuBLAS's and cuDNN's calls, NCCL's
# API): their ranges sit inside ops and calls already counted, and a capture with no op ranges of
# its own keeps 'framework ops: none on record' (nsys_single's cublasCreate_v2; a review)
LIBRARY_DOMAIN = re.compile(
    r"^(cuBLAS|cuBLASLt|cuDNN|NCCL|cuFFT|cuSPARSE|cuSOLVER|cuRAND|NVSHMEM|TensorRT|nvJPEG|NPP)\b", re.I
)
# CUDA calls that allocate or free memory (device, pinned host, virtual): start-up and memory work,
# no launch, said apart from the launches they are counted with (extra-p's profile1: 29 of its
# 31 ms of "launch calls" were cudaHostAlloc, cudaFreeHost, cudaMalloc and cudaFree)
ALLOC_CALL = re.compile(
    r"^(cu(da)?|hip)(Malloc|Free|HostAlloc|HostMalloc|HostFree|HostRegister|HostUnregister|MemAlloc|MemFree|MemCreate|MemMap|MemUnmap"
    r"|MemRelease|MemAddressReserve|MemAddressFree|MemHostAlloc|MemHostRegister|MemHostUnregister|MemSetAccess"
    r"|MemPool(Create|Destroy|TrimTo))(?![a-z])"
)


def _blocking_copies(trace: Trace, api: np.ndarray) -> np.ndarray:
    """Per CUDA API call in api: an async memcpy call of BLOCKING_COPY_NS or more that waited for
    its copy: half of it or more beside the copy, or returning right after the copy ended."""
    c = trace.columns
    names = np.asarray(c["name"][api]).astype(np.int64)
    out = np.zeros(len(api), bool)
    cand = np.flatnonzero(
        np.isin(names, name_ids(trace, _ASYNC_COPY)) & (np.asarray(c["dur"][api]) >= BLOCKING_COPY_NS)
    )
    if not len(cand):
        return out
    src, dst = _flows_by_src(trace)
    ev = api[cand].astype(np.int64)
    k = np.minimum(np.searchsorted(src, ev), max(len(src) - 1, 0))
    ok = (src[k] == ev) if len(src) else np.zeros(len(ev), bool)
    op = dst[k[ok]]
    c0 = np.asarray(c["start"][ev[ok]]).astype(np.int64)
    c1 = c0 + np.asarray(c["dur"][ev[ok]]).astype(np.int64)
    o0 = np.asarray(c["start"][op]).astype(np.int64)
    o1 = o0 + np.asarray(c["dur"][op]).astype(np.int64)
    # most of the call ran while its copy did (a long pageable copy: a DtoH returns after it, an
    # HtoD as its last staged chunk is sent, a little before it ends); or the call returned right
    # after its copy ended (a pageable DtoH behind queued work: .item(), .cpu() wait for the queue,
    # the copy itself takes microseconds at the end), depgraph's BLOCKED_NS rule for one op
    beside = 2 * (np.minimum(c1, o1) - np.maximum(c0, o0)) >= c1 - c0
    after = (c1 >= o1) & (c1 - o1 <= np.maximum(BLOCKING_COPY_NS, (c1 - c0) // 20))
    out[cand[ok][beside | after]] = True
    return out


def _loop_threads(trace: Trace, lanes: list[int]) -> set[tuple[int, int]]:
    """(pid, tid) of the threads among lanes that hold the step ranges: the training loop's."""
    c = trace.columns
    marks = np.fromiter(_step_markers(trace), np.int64)
    if not len(marks):
        return set()
    return {
        (trace.lanes[i].pid, trace.lanes[i].thread)  # (step ranges in a named NVTX domain too)
        for i in lanes
        if trace.lanes[i].kind in (LaneKind.CPU, LaneKind.NVTX)
        and np.isin(np.asarray(c["name"][trace.lane_slice(i)]), marks).any()
    }


def _loop_thread_osrt(trace: Trace, lanes: list[int]) -> np.ndarray:
    """The OS-call events of the loop's threads among lanes (its sleep is the host's; another
    launching thread's poll may beside unrecorded work of the loop); of every thread in lanes
    where no step range is on record."""
    osrt = [i for i in lanes if trace.lanes[i].kind == LaneKind.OSRT]
    if not osrt:  # no OS runtime trace (every Kineto trace): no step range to look for
        return np.zeros(0, np.int64)
    loop = _loop_threads(trace, lanes)
    parts = [
        np.arange(trace.lane_slice(i).start, trace.lane_slice(i).stop)
        for i in osrt
        if not loop or (trace.lanes[i].pid, trace.lanes[i].stream) in loop
    ]
    return np.concatenate(parts) if parts else np.zeros(0, np.int64)


def host_events(trace: Trace, rank: int) -> dict[str, np.ndarray]:
    """Event indices of each host part of the rank's launching threads ("framework", "launch",
    "queue", "sync", "wait", "coll", the parts host_split counts; "alloc": the launch part's
    allocation calls (ALLOC_CALL); "os_wait": the
    loop's OS calls that wait, "thread_wait": those waiting on another thread), before the split
    makes them exclusive: a launch call inside a framework op is in both lists."""
    c = trace.columns
    threads = _launching_threads(trace, rank)
    lanes = [
        i
        for i, ln in enumerate(trace.lanes)
        if ln.rank == rank
        and (ln.pid, ln.thread) in threads
        and not (ln.kind == LaneKind.NVTX and LIBRARY_DOMAIN.match(ln.domain))
        and ln.kind in (LaneKind.CPU, LaneKind.CUDA_API, LaneKind.NVTX, LaneKind.OSRT)
    ]

    def of(kind):
        parts = [
            np.arange(trace.lane_slice(i).start, trace.lane_slice(i).stop) for i in lanes if trace.lanes[i].kind in kind
        ]
        return np.concatenate(parts) if parts else np.zeros(0, np.int64)

    api = of((LaneKind.CUDA_API,))
    is_sync = np.isin(np.asarray(c["name"][api]), sync_name_ids(trace)) | _blocking_copies(trace, api)
    cpu = of((LaneKind.CPU, LaneKind.NVTX))
    waits = name_ids(trace, HOST_SYNC_OP)
    cpu_sync = cpu[np.isin(np.asarray(c["name"][cpu]), waits)] if len(waits) else cpu[:0]
    cpu = cpu[~np.isin(np.asarray(c["name"][cpu]), list(_step_markers(trace)))]
    gloo = name_ids(trace, HOST_COLL)
    coll = cpu[np.isin(np.asarray(c["name"][cpu]), gloo)] if len(gloo) else cpu[:0]
    cpu = cpu[~np.isin(cpu, coll)] if len(coll) else cpu
    blocked = name_ids(trace, PY_WAIT)
    py_wait = cpu[np.isin(np.asarray(c["name"][cpu]), blocked)] if len(blocked) else cpu[:0]
    full = queue_full_calls(trace, rank)
    calls = api[~is_sync]
    alloc_ids = name_ids(trace, ALLOC_CALL)
    out = {
        "alloc": calls[np.isin(np.asarray(c["name"][calls]), alloc_ids)] if len(alloc_ids) else calls[:0],
        "framework": cpu,
        "launch": calls[~np.isin(calls, full)],
        "queue": full,
        "sync": np.concatenate([api[is_sync], cpu_sync]),
        "wait": py_wait,
        "coll": coll,
        "os_wait": np.zeros(0, np.int64),
        "thread_wait": np.zeros(0, np.int64),
    }
    os_ids, th_ids = name_ids(trace, OS_WAIT), name_ids(trace, THREAD_WAIT)
    osrt = _loop_thread_osrt(trace, lanes) if len(os_ids) or len(th_ids) else np.zeros(0, np.int64)
    if len(osrt):
        names = np.asarray(c["name"][osrt])
        out["os_wait"] = osrt[np.isin(names, os_ids)]
        out["thread_wait"] = osrt[np.isin(names, th_ids)]
    if not len(out["thread_wait"]) and len(threads) > 1:
        # no OS trace (Kineto): the loop's thread waits for autograd's in run_backward while that
        # one runs the backward (ddp_clean's main thread, 64-71% of its steps, said nowhere; an audit)
        out["thread_wait"] = _loop_backward(trace, lanes)
    return out


# PyTorch's autograd engine call from Python: the calling thread waits in it for the engine's
# device threads (a CPU-only graph it runs itself)
BACKWARD_WAIT = re.compile(r"^<built-in method run_backward of torch\._C\._EngineBase\b")


def _loop_backward(trace: Trace, lanes: list[int]) -> np.ndarray:
    """The run_backward calls on the loop's threads among lanes (_loop_threads)."""
    ids = name_ids(trace, BACKWARD_WAIT)
    loop = _loop_threads(trace, lanes) if len(ids) else set()
    c = trace.columns
    parts = [
        trace.lane_slice(i).start + np.flatnonzero(np.isin(np.asarray(c["name"][trace.lane_slice(i)]), ids))
        for i in lanes
        if trace.lanes[i].kind == LaneKind.CPU and (trace.lanes[i].pid, trace.lanes[i].stream) in loop
    ]
    return np.concatenate(parts) if parts else np.zeros(0, np.int64)


def host_split(
    trace: Trace, rank: int, windows: list[tuple[int, int]], info: dict | None = None
) -> list[tuple[int, int, int, int, int, int, int, int, int, int, int, int]]:
    """Per host step window: (framework, launch, queue, sync, wait, idle, idle_thread,
    annotation_only, coll, loop_wait, python_only, alloc) ns of the threads that launch the rank's GPU work (coll: collectives gloo
    runs on the host, HOST_COLL, after sync, queue and launch and before the rest; those a CPU-only
    capture's gloo threads record count, as its every thread does). sync: blocking synchronize calls, blocking copies and framework
    calls that wait for the device (JAX's block_until_ready, device_get); queue: launch calls
    made with the launch queue full (queue_full_calls); launch: the other CUDA API calls; wait:
    Python calls that block (PY_WAIT: sleep, locks, queues) outside those; framework: Python and
    framework ops (CPU ops, NVTX ranges; the step's own range left out) outside all of them;
    idle: nothing on record. Exclusive, in that order: they add up to the window. OS calls that
    wait (OS_WAIT) count as wait where nothing else is on record; idle_thread: the part of idle in
    which the loop's thread waits for another thread (THREAD_WAIT); annotation_only: the part of
    framework inside annotated ranges alone (record_function: no op under them on record);
    loop_wait: all the loop's thread waits on another thread (THREAD_WAIT), other threads' work
    meanwhile or not; python_only: the part of framework inside Python frames alone (the Python
    tracer's events, no op, range or call under them); alloc: the part of launch in calls that
    allocate or free memory (ALLOC_CALL)."""
    c = trace.columns
    ev = host_events(trace, rank)
    if info is not None:  # whether any framework op or range is on record (info["ops"]: how many)
        info["ops"] = len(ev["framework"])
        info["events"] = ev  # (longest_call reads them again, not classified twice)

    def ivs(idx):
        s = np.asarray(c["start"][idx]).astype(np.int64)
        return iv.union(s, s + np.asarray(c["dur"][idx]).astype(np.int64))

    sync = ivs(ev["sync"])
    queue = _less(ivs(ev["queue"]), sync)
    launch = _less(ivs(ev["launch"]), sync, queue)
    coll = _less(ivs(ev["coll"]), sync, launch, queue)
    alloc = iv.intersect(launch, ivs(ev["alloc"])) if len(ev["alloc"]) else iv.EMPTY
    py_wait = _less(ivs(ev["wait"]), sync, launch, queue, coll)
    # a framework op or range around a whole window (the script's frames, the training loop's
    # function) says nothing of what the host did in it: its time under none else is 'no op
    # recorded' (step_outlier's 116 ms after the step's work was said as framework, beside a
    # finding naming it time with no op under it; an audit). Those ops are at least as long as
    # the shortest window: the rest are one union for every window.
    fw_ev = ev["framework"]
    dur = np.asarray(c["dur"][fw_ev]).astype(np.int64)
    # (a window of no length holds nothing: it must not turn the rule off for the others)
    shortest = min((t1 - t0 for t0, t1 in windows if t1 > t0), default=0)
    long_ = dur >= shortest if shortest > 0 else np.zeros(len(fw_ev), bool)
    o0 = np.asarray(c["start"][fw_ev[long_]]).astype(np.int64)
    o1 = o0 + dur[long_]
    cat = np.asarray(c["cat"][fw_ev])
    # of framework: inside a user's or the framework's annotated ranges alone (record_function,
    # '## backward ##', Optimizer.step#...): Python ran there, no op of it is on record; ...and
    # inside Python frames alone (the Python tracer's, with_stack): no framework op, range or call
    # under them on record (ddp_clean rank 1: 24% of its host time, said as framework ops; an audit)
    notes, py = cat == Cat.USER_ANNOTATION, cat == Cat.PYTHON
    proper = ~py & ~notes  # ops (aten, NVTX, collectives): neither frames nor annotated ranges
    # each kind's short events as one union for every window, its long ones kept apart
    fw_all, ops_all, nonpy_all = (ivs(fw_ev[m & ~long_]) for m in (np.ones(len(fw_ev), bool), ~notes, proper))
    outer_op, outer_nonpy = ~notes[long_], proper[long_]
    os_all, thread_all = ivs(ev["os_wait"]), ivs(ev["thread_wait"])
    oth = iv.union(*(np.concatenate([x[i] for x in (sync, launch, queue, py_wait, coll)]) for i in (0, 1)))
    out: list = [None] * len(windows)
    # windows that overlap none of each other are computed together: each part as one interval
    # set over all of them, measured in each window (a window at a time cost 0.3 s at 64 ranks)
    for ks in _disjoint_sets(windows):
        # (a window ending before it starts is one of no length, as _disjoint_sets takes it)
        t0 = np.array([windows[k][0] for k in ks], np.int64)
        t1 = np.array([max(windows[k]) for k in ks], np.int64)
        inside = iv.union(t0, t1)
        # the long ops in a window but not around the whole of it, cut to it: as the windows are
        # disjoint, only the first and the last window an op reaches into can be such a window
        lo = np.searchsorted(t1, o0, side="right")  # the first window ending after it starts
        hi = np.searchsorted(t0, o1, side="left") - 1  # the last starting before it ends
        i = np.flatnonzero(lo <= hi)
        two = i[lo[i] < hi[i]]
        op_i, op_k = np.r_[i, two], np.r_[lo[i], hi[two]]
        ok = ~((o0[op_i] <= t0[op_k]) & (o1[op_i] >= t1[op_k]))
        op_i, op_k = op_i[ok], op_k[ok]
        p0, p1 = np.maximum(o0[op_i], t0[op_k]), np.minimum(o1[op_i], t1[op_k])

        def cut(u, k, p0=p0, p1=p1, op_i=op_i, inside=inside):  # a union in the windows, with its long ops
            m = k[op_i]
            return _with(iv.intersect(u, inside), p0[m], p1[m])

        every = np.ones(len(o0), bool)
        fw = iv.subtract(cut(fw_all, every), oth)
        note_only = iv.subtract(fw, cut(ops_all, outer_op))
        # (frames with annotated ranges around, no op under either; the ranges alone are note_only)
        py_only = iv.subtract(iv.subtract(fw, cut(nonpy_all, outer_nonpy)), note_only) if py.any() else iv.EMPTY
        # the OS's waits only where nothing else is on record (a framework op around a sleep keeps it)
        os_c = iv.intersect(os_all, inside)
        os_wait = _less(os_c, oth, fw) if len(os_c[0]) else iv.EMPTY
        py_w = _with(py_wait, *os_wait)
        tw_c = iv.intersect(thread_all, inside)
        thread_wait = _less(tw_c, oth, os_wait, fw) if len(tw_c[0]) else iv.EMPTY
        a, b, e, d, w, th, n, g, lw, po, al = (
            iv.lengths_in(x, t0, t1)
            for x in (fw, launch, queue, sync, py_w, thread_wait, note_only, coll, tw_c, py_only, alloc)
        )
        idle = np.maximum(0, (t1 - t0) - a - b - e - d - w - g)
        cols = (
            a,
            b,
            e,
            d,
            w,
            idle,
            np.minimum(th, idle),
            np.minimum(n, a),
            g,
            lw,
            np.minimum(po, a),
            np.minimum(al, b),
        )
        for j, row in enumerate(zip(*(x.tolist() for x in cols))):
            out[ks[j]] = row
    return out


def _disjoint_sets(windows: list[tuple[int, int]]) -> list[list[int]]:
    """The windows' indices in sets of windows that overlap none of each other, each by start
    (steps' windows: one set; a window of no length or less is one of no length)."""
    sets: list[list[int]] = []
    ends: list[int] = []
    for k in sorted(range(len(windows)), key=lambda k: windows[k][0]):
        t0, t1 = windows[k][0], max(windows[k])
        j = next((j for j, end in enumerate(ends) if end <= t0), None)
        if j is None:
            sets.append([k])
            ends.append(t1)
        else:
            sets[j].append(k)
            ends[j] = t1
    return sets


def _with(u, s: np.ndarray, e: np.ndarray):
    """The union u with the intervals (s, e)."""
    if not len(s):
        return u
    return iv.union(np.concatenate([u[0], s]), np.concatenate([u[1], e]))


def _less(a, *others):
    """The intervals a less each of others, in turn."""
    for b in others:
        a = iv.subtract(a, b)
    return a


def framework_waits(trace: Trace, rank: int, rx: re.Pattern) -> np.ndarray:
    """Framework calls named by rx (HOST_SYNC_OP: JAX's block_until_ready, device_get) on the
    rank's threads that launch GPU work, where no CUDA call of their thread is on record inside
    them (one that is, a synchronize, is the wait itself), by start: JAX records no CUDA sync
    call under its waits."""
    ids = name_ids(trace, rx)
    if not len(ids):
        return np.zeros(0, np.int64)
    c = trace.columns
    out = []
    for t in _launching_threads(trace, rank):
        lanes = [i for i, ln in enumerate(trace.lanes) if ln.rank == rank and (ln.pid, ln.stream) == t]
        api = [np.asarray(c["start"][trace.lane_slice(i)]) for i in lanes if trace.lanes[i].kind == LaneKind.CUDA_API]
        calls = np.sort(np.concatenate(api).astype(np.int64)) if api else np.zeros(0, np.int64)
        for i in lanes:
            if trace.lanes[i].kind != LaneKind.CPU:
                continue
            sl = trace.lane_slice(i)
            ev = sl.start + np.flatnonzero(np.isin(np.asarray(c["name"][sl]), ids))
            a = np.asarray(c["start"][ev]).astype(np.int64)
            b = a + np.asarray(c["dur"][ev]).astype(np.int64)
            out.append(ev[np.searchsorted(calls, a, side="left") == np.searchsorted(calls, b, side="left")])
    idx = np.concatenate(out) if out else np.zeros(0, np.int64)
    return idx[np.argsort(np.asarray(c["start"][idx]), kind="stable")]


def longest_call(trace: Trace, ev: dict, t0: int, t1: int, part_ns: int) -> tuple[str, int] | None:
    """(name, ns inside [t0, t1]) of the launch part's longest call (no allocation, no call on a
    full queue), where it holds a quarter or more of part_ns (that part's time less its
    allocations) and a millisecond or more: a capture without steps holds its start-up, where one
    first launch loading its module can be most of it (HTA's alexnet: one 3,055.6 ms
    cudaLaunchKernel, 24% of its span, said as launch calls beside 78 others of 0.99 ms; an audit).
    ev: the rank's host_events, as host_split classified them."""
    x = np.setdiff1d(ev["launch"], np.concatenate([ev["alloc"], ev["queue"]]))
    if not len(x) or part_ns <= 0:
        return None
    c = trace.columns
    s = np.asarray(c["start"][x]).astype(np.int64)
    d = np.minimum(s + np.asarray(c["dur"][x]).astype(np.int64), t1) - np.maximum(s, t0)
    k = int(np.argmax(d))
    if d[k] < max(1_000_000, 0.25 * part_ns):
        return None
    return trace.names[int(c["name"][x[k]])], int(d[k])
