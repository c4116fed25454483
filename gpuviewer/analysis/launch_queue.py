"""The device's launch queue: launch calls made while it was full (the host blocked on the GPU,
not paying launch overhead), and the GPU ops launched before the capture began that wait in it
(host_split's queue part, outliers' first step)."""

from __future__ import annotations

import re

import numpy as np

from ..model.categories import GPU_LANE_KINDS, GPU_WORK, LaneKind
from ..model.trace import Trace
from .host import flows_by_dst, launch_flows, name_ids

# CUDA queues at most about 1,024 launched ops a device ahead of the GPU (its streams share the
# queue); a launch made with that many of the device's launched ops not yet started waits for a
# slot: the host is blocked on the GPU (a GPU-bound run), not paying launch overhead. The traces
# show the count pinned at 1,024-1,033 through such runs (compute and NCCL streams together; no
# single stream's count reaches it) and the calls made there lasting milliseconds, not microseconds.
LAUNCH_QUEUE_DEPTH = 1024
QUEUE_HIDDEN = 32  # queue entries a trace may not show as GPU ops (event records, stream waits)


# the calls that put an op in the launch queue (CUDA's and ROCm's HIP spellings)
LAUNCH_CALL = re.compile(
    r"^(cu(da)?|hip)(LaunchKernel|ExtLaunchKernel|ModuleLaunchKernel|LaunchCooperativeKernel|GraphLaunch"
    r"|Memcpy\w*Async|Memset\w*Async)"
)


def _unlinked_tail(trace: Trace, rank: int, linked: np.ndarray) -> np.ndarray:
    """The rank's launch calls after its last one with its op on record, none of theirs on record:
    ops the capture ended before (h100_2gpu_1s: 20 calls of 2.4-110 ms at its end, the queue full,
    said as launch calls; an audit). Sorted event indices."""
    ids = name_ids(trace, LAUNCH_CALL)
    if not len(ids) or not len(linked):
        return np.zeros(0, np.int64)
    c = trace.columns
    last = int(np.asarray(c["start"][linked]).max())
    out = []
    for i, ln in enumerate(trace.lanes):
        if ln.rank == rank and ln.kind == LaneKind.CUDA_API:
            sl = trace.lane_slice(i)
            x = np.arange(sl.start, sl.stop, dtype=np.int64)
            x = x[np.isin(np.asarray(c["name"][sl]), ids) & (np.asarray(c["start"][sl]).astype(np.int64) > last)]
            out.append(x[~np.isin(x, linked)])
    return np.sort(np.concatenate(out)) if out else np.zeros(0, np.int64)


def queue_full_calls(trace: Trace, rank: int) -> np.ndarray:
    """Indices of the rank's launch calls made while LAUNCH_QUEUE_DEPTH or more of the ops launched
    onto the same device had not started on the GPU (from the launch -> op flows; a process that
    drives several GPUs has a queue for each)."""
    src, dst = launch_flows(trace)
    api = [trace.lane_slice(i) for i, ln in enumerate(trace.lanes) if ln.rank == rank and ln.kind == LaneKind.CUDA_API]
    parts = [slice(*np.searchsorted(src, [sl.start, sl.stop])) for sl in api]
    calls = np.concatenate([src[p] for p in parts]) if parts else np.zeros(0, np.int64)
    if len(calls) <= LAUNCH_QUEUE_DEPTH:
        return np.zeros(0, np.int64)
    ops = np.concatenate([dst[p] for p in parts])
    start = trace.columns["start"]
    called, began = (np.asarray(start[x]).astype(np.int64) for x in (calls, ops))
    lane_device = np.array([ln.device for ln in trace.lanes], np.int64)
    device = lane_device[np.asarray(trace.columns["lane"][ops]).astype(np.int64)]
    early = launched_before_capture(trace, rank)
    full = []
    devices = np.unique(device)
    if len(devices) == 1:  # (one device: the unlinked calls' ops are its; several: not guessed)
        tail = _unlinked_tail(trace, rank, calls)
        if len(tail):  # their ops never start inside the capture: pending to its end
            calls = np.concatenate([calls, tail])
            called = np.concatenate([called, np.asarray(start[tail]).astype(np.int64)])
            began = np.concatenate([began, np.full(len(tail), np.iinfo(np.int64).max)])
            device = np.concatenate([device, np.full(len(tail), devices[0])])
    for d in devices:
        on = device == d
        order = np.argsort(called[on], kind="stable")
        # an op cannot start before its launch: those started by a call's start were launched before it
        pending = np.arange(len(order)) - np.searchsorted(np.sort(began[on]), called[on][order], side="right")
        # and the ops launched before the capture began, not yet started, wait in the queue too
        # (pp_gpu's first traced step: about 1,000 of them; without them its calls blocked on
        # the full queue counted as launch overhead)
        e = early.get(int(d))
        if e is not None:
            pending += len(e) - np.searchsorted(e, called[on][order], side="right")
        # the queue also holds entries no GPU op shows (event records, stream waits): where the
        # count tops out a little under the depth, that ceiling is the full queue (HTA's V100
        # ns_resolution trace: 700 launch calls of over 100 µs, every one at 1,021 pending, the
        # count's maximum; an audit's finding)
        top = int(pending.max()) if len(pending) else 0
        depth = top if LAUNCH_QUEUE_DEPTH - QUEUE_HIDDEN <= top < LAUNCH_QUEUE_DEPTH else LAUNCH_QUEUE_DEPTH
        full.append(calls[on][order][pending >= depth])
    return np.unique(np.concatenate(full))


def launched_before_capture(trace: Trace, rank: int) -> dict[int, np.ndarray]:
    """{device: sorted starts} of the rank's GPU ops (kernels, copies, memsets) launched before the
    capture began: those with no launch on record that run on their stream ahead of its first op
    whose launch is on record (a stream without any launch on record tells nothing). The launch
    queue counts them (queue_full_calls), a slow first step says them (outliers)."""
    d_sorted = flows_by_dst(trace)[0]
    c = trace.columns
    out: dict[int, list] = {}
    for i, ln in enumerate(trace.lanes):
        if ln.rank != rank or ln.kind not in GPU_LANE_KINDS:
            continue
        sl = trace.lane_slice(i)
        if sl.stop <= sl.start:
            continue
        st = np.asarray(c["start"][sl]).astype(np.int64)
        work = np.isin(np.asarray(c["cat"][sl]), GPU_WORK)
        launched = np.zeros(sl.stop - sl.start, bool)  # the lane's events that a flow points at
        a, b = np.searchsorted(d_sorted, [sl.start, sl.stop])
        launched[d_sorted[a:b] - sl.start] = True
        launched &= work
        if not launched.any():  # no launches on record on this stream: nothing tells
            continue
        first = int(st[launched].min())
        out.setdefault(int(ln.device), []).append(st[work & ~launched & (st < first)])
    return {d: np.sort(np.concatenate(x)) for d, x in out.items()}
