"""The host side of a step: time outside synchronize calls, and what took the time."""
from __future__ import annotations

import re

import numpy as np

from ..model import queries as q
from ..model.categories import CAT_LABEL, Cat, LaneKind
from ..model.trace import Trace

# Calls in which the host waits for the GPU (and so for other ranks through it).
SYNC_CALL = re.compile(r"(Stream|Device|Event|Ctx)Synchroni[sz]e|^cudaMemcpy(_v\d+)?$|^cuMemcpy[DH]to[DH](_v2)?$",
                       re.IGNORECASE)
HOST_KINDS = (LaneKind.CPU, LaneKind.CUDA_API, LaneKind.OSRT, LaneKind.NVTX)
# Helper threads blocking in these are idle, not working: never a reason a step was slow.
IDLE_WAIT = re.compile(r"^(poll|ppoll|epoll_wait|epoll_pwait|select|pselect6?|pthread_cond_(timed)?wait|"
                       r"sem_(timed)?wait|futex|pthread_join|read|recv|recvmsg|accept)$")


def sync_name_ids(trace: Trace) -> np.ndarray:
    return np.array([i for i, n in enumerate(trace.names) if SYNC_CALL.search(n)], np.int32)


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
    return {st.step: (st.end - st.start) - iv.length(iv.clip(sync, st.start, st.end))
            for st in trace.steps_of_rank(rank)}


def _per_name(trace: Trace, lanes: list[int], t0: int, t1: int) -> dict[tuple[int, int, int], int]:
    parts = [q.events_in_range(trace, ln, t0, t1) for ln in lanes]
    idx = np.concatenate(parts) if parts else np.zeros(0, np.int64)
    if not len(idx):
        return {}
    c = trace.columns
    contrib = q.self_times(trace, idx, (t0, t1))
    out: dict[tuple[int, int, int], int] = {}
    keys = zip(np.asarray(c["name"][idx]).tolist(), np.asarray(c["cat"][idx]).tolist(),
               np.asarray(c["lane"][idx]).tolist(), contrib.tolist())
    markers = _step_markers(trace)
    for n, ct, ln, v in keys:
        if n in markers:
            continue
        k = (n, ct, ln)
        out[k] = out.get(k, 0) + v
    return out


_STEP_NAME = re.compile(r"^(ProfilerStep#\d+|step[ _#]?\d+)$", re.IGNORECASE)


def _step_markers(trace: Trace) -> set[int]:
    m = trace._lane_cache.get("step_markers")
    if m is None:
        m = trace._lane_cache["step_markers"] = {i for i, n in enumerate(trace.names) if _STEP_NAME.match(n)}
    return m


def explain(trace: Trace, rank: int, window: tuple[int, int], baseline: list[tuple[int, int]],
            kinds=None, top: int = 5) -> list[dict]:
    """What took more time in `window` than in a typical baseline window: per (name, lane),
    self time in the window minus the mean over the baseline windows, largest first."""
    kinds = kinds or HOST_KINDS
    lanes = [i for i, ln in enumerate(trace.lanes) if ln.rank == rank and ln.kind in kinds]
    now = _per_name(trace, lanes, *window)
    base: dict = {}
    for w in baseline:
        for k, v in _per_name(trace, lanes, *w).items():
            base[k] = base.get(k, 0) + v
    nb = max(1, len(baseline))
    rows = []
    for k, v in now.items():
        ex = v - base.get(k, 0) / nb
        if ex > 0:
            rows.append((ex, k, v))
    rows.sort(reverse=True)
    out = []
    for ex, (n, ct, ln), v in rows[:top]:
        lane = trace.lanes[ln]
        out.append({"name": trace.names[n], "category": CAT_LABEL.get(Cat(ct), str(ct)),
                    "lane": (f"GPU {lane.device} · " if lane.device >= 0 else "") + lane.label,
                    "excess_ms": round(ex / 1e6, 3), "ms": round(v / 1e6, 3)})
    return out
