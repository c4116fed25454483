"""What a click on a finding selects where its rule wrote no evidence rows: low GPU utilization
shows what fills the GPU's time when it is not computing (a screenshot review: it selected
nothing). Qt-free: the session asks, the window shows."""

from __future__ import annotations

import numpy as np

from ..model import intervals as iv
from ..model import queries as q
from ..model.categories import Cat, LaneKind
from ..model.trace import Trace
from .host import covering_op

_GPU_CATS = (Cat.KERNEL, Cat.COMM_KERNEL, Cat.MEMCPY, Cat.MEMSET)


def utilization_evidence(trace: Trace, rank: int, t0: int, t1: int, mostly: str) -> tuple[int, int, int] | None:
    """For a low-utilization finding of `rank` over [t0, t1]: (event, z0, z1), the event to select
    and the time to show. Mostly idle: the GPU's longest idle stretch there, and the host op the
    rank's launching thread spent most of it in (else the GPU op that ends it); mostly copies or
    NCCL: the longest such GPU op. None where the rank has no GPU ops there."""
    c = trace.columns
    lanes = [i for i in trace.lanes_of_rank(rank) if trace.lanes[i].kind in (LaneKind.GPU, LaneKind.COMM)]
    parts = [q.events_in_range(trace, ln, t0, t1) for ln in lanes]
    idx = np.concatenate(parts) if parts else np.zeros(0, np.int64)
    idx = idx[np.isin(np.asarray(c["cat"][idx]), _GPU_CATS)]
    if not len(idx):
        return None
    s = np.asarray(c["start"][idx]).astype(np.int64)
    e = s + np.asarray(c["dur"][idx]).astype(np.int64)
    cat = np.asarray(c["cat"][idx])
    want = Cat.MEMCPY if mostly == "copy" else Cat.COMM_KERNEL if mostly.startswith("nccl") else None
    if want is not None and (cat == want).any():
        k = int(np.argmax(np.where(cat == want, e - s, -1)))
        return int(idx[k]), int(s[k]), int(e[k])
    g = iv.gaps(iv.union(s, e), int(s.min()), int(e.max()))  # between the first op and the last
    glen = g[1] - g[0]
    if not len(glen):
        k = int(np.argmax(e - s))
        return int(idx[k]), int(s[k]), int(e[k])
    j = int(np.argmax(glen))
    g0, g1 = int(g[0][j]), int(g[1][j])
    cov = covering_op(trace, rank, g0, g1)
    if cov is not None:
        return cov[0], g0, g1
    after = np.flatnonzero(s >= g1)
    k = int(after[np.argmin(s[after])])  # the GPU op that ends the idle stretch
    return int(idx[k]), g0, g1
