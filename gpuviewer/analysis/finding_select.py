"""What a click on a finding selects where its rule wrote no evidence rows: low GPU utilization
shows what fills the GPU's time when it is not computing (a screenshot review: it selected
nothing). Qt-free: the session asks, the window shows."""

from __future__ import annotations

import numpy as np

from ..model import intervals as iv
from ..model import queries as q
from ..model.categories import Cat
from ..model.trace import Trace
from .breakdown import gpu_ops
from .host import COVER_MAX, IDLE_WAIT, _step_markers, covering_op, feeding_lanes
from .launch import launch_threads


def utilization_evidence(trace: Trace, rank: int, t0: int, t1: int, mostly: str) -> tuple[int, int, int] | None:
    """For a low-utilization finding of `rank` over [t0, t1] (its steps with the idle before and
    after them): (event, z0, z1), the event to select and the time to show. Mostly copies or NCCL:
    the longest such GPU op. Mostly idle: the GPU's longest idle stretch there and what the
    launching threads did in it (the host event with the most own time in it, waits that idle a
    thread left out; else an op covering it, not many times longer), else the GPU op that ends
    it. None where the rank has no GPU ops there."""
    c = trace.columns
    idx, s, e = _ops_in(trace, rank, t0, t1)
    if not len(idx):
        return None
    cat = np.asarray(c["cat"][idx])
    # the copy share counts memsets with memcpys (breakdown's memcpy_ns)
    want = (Cat.MEMCPY, Cat.MEMSET) if mostly == "copy" else (Cat.COMM_KERNEL,) if mostly.startswith("nccl") else ()
    pick = np.isin(cat, want)
    if pick.any():
        k = int(np.argmax(np.where(pick, e - s, -1)))
        return int(idx[k]), int(s[k]), int(e[k])
    # the window's edges count: idle before the step's first op or after its last is idle too
    g = iv.gaps(iv.union(s, e), min(int(t0), int(s.min())), max(int(t1), int(e.max())))
    glen = g[1] - g[0]
    if not len(glen):
        k = int(np.argmax(e - s))
        return int(idx[k]), int(s[k]), int(e[k])
    j = int(np.argmax(glen))
    g0, g1 = int(g[0][j]), int(g[1][j])
    host = _host_in(trace, rank, g0, g1)
    if host is not None:
        return host, g0, g1
    after = np.flatnonzero(s >= g1)
    if not len(after):  # the idle runs to the window's end: the op before it
        k = int(np.argmax(e))
        return int(idx[k]), g0, g1
    k = int(after[np.argmin(s[after])])  # the GPU op that ends the idle stretch
    return int(idx[k]), g0, g1


def _ops_in(trace: Trace, rank: int, t0: int, t1: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The rank's GPU ops that reach into [t0, t1]: their indices, starts and ends."""
    c = trace.columns
    idx = gpu_ops(trace, rank)
    s = np.asarray(c["start"][idx]).astype(np.int64)
    e = s + np.asarray(c["dur"][idx]).astype(np.int64)
    keep = (e > t0) & (s < t1)
    return idx[keep], s[keep], e[keep]


def _host_in(trace: Trace, rank: int, g0: int, g1: int) -> int | None:
    """The host event of the rank's launching threads with the most own time in [g0, g1], where it
    is half the gap or more (a sleep, a blocking call), waits that idle a thread and events many
    times longer than the gap left out; else the innermost op covering half the gap, where it is
    not many times longer either."""
    lanes = feeding_lanes(trace, rank)
    parts = [q.events_in_range(trace, ln, g0, g1) for ln in lanes]
    ev = np.concatenate(parts) if parts else np.zeros(0, np.int64)
    c = trace.columns
    if len(ev):
        names = np.asarray(c["name"][ev]).astype(np.int64)
        idle = {i for i, n in enumerate(trace.names) if IDLE_WAIT.match(n)} | _step_markers(trace)
        ev = ev[~np.isin(names, list(idle)) & (np.asarray(c["dur"][ev]) <= COVER_MAX * (g1 - g0))]
    if len(ev):
        own = q.self_times(trace, ev, (g0, g1))
        k = int(np.argmax(own))
        if 2 * int(own[k]) >= g1 - g0:
            return int(ev[k])
    cov = covering_op(trace, rank, g0, g1, max_times=COVER_MAX)
    return cov[0] if cov is not None else None


def paced_evidence(trace: Trace, rank: int, t0: int, t1: int, op: str | None) -> tuple[int, int, int] | None:
    """For a host-paced finding of `rank` over [t0, t1]: (event, z0, z1), the GPU's longest wait
    there that the host op the finding names first (`op`, as idle_gaps names it: the innermost op
    spanning half the wait) ran through, and that op; else utilization_evidence's longest wait. The
    longest wait alone showed fsdp's optimizer (_use_grad) beside a title naming FSDP's _unshard."""
    from .idle_gaps import op_label

    if op:
        idx, s, e = _ops_in(trace, rank, t0, t1)
        if len(s):
            g0, g1 = iv.gaps(iv.union(s, e), int(t0), int(t1))
            order = np.argsort(-(np.asarray(g1) - np.asarray(g0)), kind="stable")[:MAX_TRIED]
            thread_at = launch_threads(trace, idx)
            for j in order.tolist():
                a, b = int(g0[j]), int(g1[j])
                if b - a < 100_000:
                    break
                got = covering_op(trace, rank, a, b, thread=thread_at(b))  # as idle_gaps
                if got is not None and op_label(trace, got[0]) == op:
                    return got[0], a, b
    return utilization_evidence(trace, rank, t0, t1, "idle")


MAX_TRIED = 200  # the longest waits tried for the named op: each is a search of the host's lanes
