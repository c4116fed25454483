"""Each step's window in a replay: when it ends (the last of its ranks' host step ends and GPU
ops) and when the first one began (where its last rank began it, on the GPU's time where a GPU
runs far behind its host). Apart from whatif.py, which replays the changes."""

from __future__ import annotations

from typing import Any

import numpy as np

from . import depgraph as dg

# a whatif.Replay (its slot times .t); not imported: whatif imports this module
Replay = Any


def step_ends(g: dg.DepGraph, rp: Replay, begin: int | None = None) -> tuple[list[int], np.ndarray, np.ndarray, float]:
    """Steps, each step's end (the last of its ranks' host step ends and GPU ops), and the time
    the first step began: where its last rank began it (the analogue of later steps, which start
    where the one before ended on every rank; a rank that starts early waits for the last at the
    step's first collective: tp's first step was 81 ms from the earliest start, where each rank's
    takes 57-58), on its GPU's time where the GPU runs far behind (_gpu_lag); `begin`, the
    recording's, for a replay with a change: work before the first step that a change moves
    earlier belongs to no step, and must not make the first step look longer."""
    steps = g.steps()
    if not steps:
        return [], np.zeros(0, np.int64), np.zeros(0, np.int64), 0
    ends = np.full(len(steps), np.iinfo(np.int64).min, np.int64)
    pos = {s: k for k, s in enumerate(steps)}
    if getattr(g, "_gpu_ends", None) is None:
        # the end slots of each step's GPU ops, grouped by step once per model (every replay asks)
        gpu = np.flatnonzero((g.kind >= dg.KERNEL) & (g.kind <= dg.COPY) & (g.step >= 0))
        k = np.minimum(np.searchsorted(np.array(steps), g.step[gpu]), len(steps) - 1)
        ok = np.array(steps)[k] == g.step[gpu]
        gpu, k = gpu[ok], k[ok]
        o = np.argsort(k, kind="stable")
        uk, at = np.unique(k[o], return_index=True)
        g._gpu_ends = (2 * gpu[o] + 1, uk, at)
    slots, uk, at = g._gpu_ends
    if len(slots):
        ends[uk] = np.maximum(ends[uk], np.maximum.reduceat(rp.t[slots], at))

    starts0: dict[int, int] = {}  # rank -> its host's start of the first step
    for r, m in g.marks.items():
        for s, (a, b) in m.items():
            ends[pos[s]] = max(ends[pos[s]], rp.t[2 * b])
            if s == steps[0]:
                starts0[r] = int(rp.t[2 * a])
    first = None
    if starts0 and g.whole:  # a capture without steps runs from its first op on any rank
        first = min(starts0.values())
    elif starts0:
        last = max(starts0, key=lambda r: (starts0[r], r))
        first = starts0[last] + _gpu_lag(g, rp, last, steps[0])
    ends = np.maximum.accumulate(ends)
    if begin is None:
        begin = int(first if first is not None else ends[0])
    starts = np.r_[begin, ends[:-1]]
    return steps, starts, ends, begin


def _gpu_lag(g: dg.DepGraph, rp: Replay, rank: int, step: int) -> int:
    """How far a rank's GPU runs behind its host as it begins the first step: where even its
    quickest launches wait far longer than a launch takes (LAUNCH_MAX_NS), that quickest latency
    (the queue the GPU keeps; a clock offset a device-wide sync shows is taken off first:
    gpu_clock), but never more than the step's first op waited after its own launch (a GPU idle
    as the step begins, or one that only waits at collectives, is not behind). The GPU's part of
    the first step starts that much after the host's, as later steps start where the one before
    ended on the GPU. Without it
    pp_gpu's first step took in a 164-198 ms backlog of unprofiled steps: 617.8 ms, where its
    ranks' take 395-402. Asked only of the rank whose host begins the step last: another rank's
    GPU behind its earlier start may be its clock's offset alone, which must not move the step
    (tp with rank 1's GPU clock 5 ms later made step 2 1.5 ms shorter)."""
    lag = g.launch_floor.get(rank, 0)
    if lag <= dg.LAUNCH_MAX_NS:
        return 0
    lk = np.flatnonzero(g.e_kind == dg.E_LAUNCH)
    op = g.e_dst[lk] >> 1
    sel = (g.rank[op] == rank) & (g.step[op] == step)
    if not sel.any():
        return 0
    at = rp.t[2 * op[sel]]
    k = int(np.argmin(at))
    own = int(at[k] - rp.t[g.e_src[lk[sel]][k]])
    return int(min(lag, max(0, own)))
