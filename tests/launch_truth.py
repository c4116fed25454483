"""Launch gaps computed from the raw events (analysis_truth's ranks), independently of gpuviewer:
gaps between stretches of GPU work where the GPU waited for a launch, as the launch-bound and
pipeline sentences define them."""

from __future__ import annotations

import numpy as np
from analysis_truth import COMM, SHORT_GAP_NS, Rank, intersect_length, length, union


def launch_gaps(us: np.ndarray, ue: np.ndarray, op_start: np.ndarray, late_at, longer: bool = False) -> np.ndarray:
    """The launch gaps between stretches of work [us, ue) (sorted, disjoint): gaps under
    SHORT_GAP_NS (longer: of SHORT_GAP_NS or more) where the GPU waited for a launch, that is, the
    op starting the next stretch was launched by a call that returned after the stretch before
    ended (or has no launch on record). late_at(i, t): whether op i's launch returned after t
    (True where it has none)."""
    g = us[1:] - ue[:-1]
    keep = np.zeros(len(g), bool)
    order = np.argsort(op_start, kind="stable")
    starts = op_start[order]
    for j in np.flatnonzero((g >= SHORT_GAP_NS) if longer else ((g > 0) & (g < SHORT_GAP_NS))):
        lo, hi = np.searchsorted(starts, us[j + 1]), np.searchsorted(starts, us[j + 1], side="right")
        keep[j] = any(late_at(int(i), int(ue[j])) for i in order[lo:hi])
    return g[keep]


def rank_waited_gaps(r: Rank, us: np.ndarray, ue: np.ndarray, longer: bool = False) -> tuple:
    """The rank's launch gaps (launch_gaps, over its non-NCCL ops) as (starts, ends, returns):
    where each lies, and when the latest launch among the ops starting the next stretch returned
    (int64 max where one has no launch on record)."""
    work = np.flatnonzero(r.kind != COMM)
    start = r.start[work]
    ret = np.where(r.linked[work], r.launch_end[work], np.iinfo(np.int64).max)
    g = us[1:] - ue[:-1]
    out: tuple[list, list, list] = ([], [], [])
    for j in np.flatnonzero((g >= SHORT_GAP_NS) if longer else ((g > 0) & (g < SHORT_GAP_NS))):
        t = ret[start == us[j + 1]].max(initial=np.iinfo(np.int64).min)
        if t > ue[j]:  # the GPU waited for that launch
            for x, v in zip(out, (ue[j], us[j + 1], t)):
                x.append(int(v))
    return tuple(np.array(x, np.int64) for x in out)


def rank_launch_gaps(r: Rank, us: np.ndarray, ue: np.ndarray, longer: bool = False) -> np.ndarray:
    """The lengths of rank_waited_gaps."""
    gs, ge, _ = rank_waited_gaps(r, us, ue, longer)
    return ge - gs


def rank_host_gaps(r: Rank, us: np.ndarray, ue: np.ndarray, blocked=None) -> int:
    """The longer launch gaps up to the return of the launch the GPU waited for (the whole gap
    where one has no launch on record), less their overlap with blocked (the host's sync calls, as
    union() intervals): the time the GPU waited for a host busy elsewhere, in ns."""
    gs, ge, ret = rank_waited_gaps(r, us, ue, longer=True)
    spans = union(gs, np.minimum(ret, ge))
    return length(spans) - (intersect_length(spans, blocked) if blocked is not None else 0)
