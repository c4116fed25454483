"""Cross-stream waits the host recorded (analysis/depgraph.py): PyTorch makes one stream wait for
another with a cudaEventRecord on the first and a cudaStreamWaitEvent for the second, one call
after the other on one thread (ProcessGroupNCCL: the NCCL stream waits for the compute queued
before a collective; work.wait(): the compute stream waits for the collective). The calls' streams
and events are not in the trace, so each pair is read by the launches around it: the op launched
last on the thread before the record is the work the event marks, and the op launched first after
the wait is the work that waits. Without these edges an op whose launch came late (a host-bound
job) showed no wait on the other stream, and removing launch overhead let DDP's first all-reduce
start before the backward kernels it waits for (ddp_nop2p: a step of 18 ms predicted where the
all-reduces alone take 18 ms and the compute around them 5.7)."""

from __future__ import annotations

import re

import numpy as np

from ..model.trace import Trace
from .host import name_ids

RECORD = re.compile(r"^(cuda|hip)EventRecord(WithFlags)?(_v\d+|_ptsz)?$")
WAIT = re.compile(r"^(cuda|hip)StreamWaitEvent(_v\d+|_ptsz)?$")


def recorded_waits(
    trace: Trace,
    nodes: np.ndarray,
    name: np.ndarray,
    lane: np.ndarray,
    rec_s: np.ndarray,
    rec_e: np.ndarray,
    launch_node: np.ndarray,
    gpu: np.ndarray,
    tol_ns: int,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Of one rank (its host nodes `nodes` in time order, its GPU nodes `gpu`): the (op before,
    op after, offset) of each recorded wait whose two ops are on different streams. The offset is
    the recorded slack where the op started within tol_ns of the other's end, else 0 (its launch
    came later); a pair whose op after started before the op before ended is no such wait (the
    guess of its ops is wrong) and is left out."""
    rec_ids, wait_ids = name_ids(trace, RECORD), name_ids(trace, WAIT)
    none = np.zeros(0, np.int64)
    if not len(rec_ids) or not len(wait_ids) or not len(gpu) or not len(nodes):
        return none, none, none
    linked = gpu[launch_node[gpu] >= 0]
    if not len(linked):
        return none, none, none
    # each launching call's first and last op (a graph launch feeds many: its last to start is taken,
    # which may be on another stream than the one the event was recorded on: a guess, as the whole
    # pairing is; several waits after one record each make an edge, and each is counted)
    by = np.lexsort((rec_s[linked], launch_node[linked]))
    calls, first_at = np.unique(launch_node[linked][by], return_index=True)
    last_at = np.r_[first_at[1:], len(by)] - 1
    first_op, last_op = linked[by][first_at], linked[by][last_at]
    nm = name[nodes]
    u, v = [], []
    for ln in np.unique(lane[nodes]).tolist():
        on = lane[nodes] == ln
        seq = nodes[on]
        is_rec, is_wait = np.isin(nm[on], rec_ids), np.isin(nm[on], wait_ids)
        k = np.searchsorted(calls, seq)
        is_launch = (k < len(calls)) & (calls[np.minimum(k, len(calls) - 1)] == seq)
        if not is_wait.any() or not is_rec.any() or not is_launch.any():
            continue
        pos = np.arange(len(seq))
        recs, launches, waits = pos[is_rec], pos[is_launch], pos[is_wait]
        r = np.searchsorted(recs, waits) - 1  # the record before each wait
        lb = np.searchsorted(launches, waits) - 1  # the launch before it
        la = np.searchsorted(launches, waits)  # and after
        ok = (r >= 0) & (la < len(launches))
        rp = recs[np.maximum(r, 0)]
        # the record and the wait one after the other: no launch between them
        ok &= (lb < 0) | (launches[np.maximum(lb, 0)] < rp)
        before = np.searchsorted(launches, rp) - 1  # the launch before the record
        ok &= before >= 0
        if not ok.any():
            continue
        kb = np.searchsorted(calls, seq[launches[before[ok]]])
        ka = np.searchsorted(calls, seq[launches[la[ok]]])
        u.append(last_op[kb])
        v.append(first_op[ka])
    if not u:
        return none, none, none
    a, b = np.concatenate(u), np.concatenate(v)
    gap = rec_s[b] - rec_e[a]
    keep = (lane[a] != lane[b]) & (gap >= 0)
    a, b, gap = a[keep], b[keep], gap[keep]
    return a, b, np.where(gap <= tol_ns, gap, 0)
