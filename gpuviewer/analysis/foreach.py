"""Where foreach kernels (multi_tensor_apply) were launched: inside an optimizer's step or not.

PyTorch's unfused optimizers (the default foreach AdamW, SGD...) run multi_tensor_apply kernels,
and so do gradient clipping (clip_grad_norm_'s norms and scaling) and AMP's unscale. Only the
optimizer's have a one-line fix (fused=True), so a finding that names it says which of them the
trace shows: a kernel is the optimizer's when the CUDA call that launched it ran inside an
'Optimizer.step#...' range (PyTorch's profiler records one around every optimizer step) on its
rank. Where no such range is on record (Nsight Systems exports, older profilers) that is unknown.
"""

from __future__ import annotations

import re
from collections import Counter

import numpy as np

from ..model.categories import LaneKind
from ..model.trace import Trace
from .breakdown import launch_times

OPTIMIZER_STEP = "Optimizer.step#"
FOREACH = re.compile(r"multi_tensor_apply")
# a fused optimizer's own kernels run through multi_tensor_apply too (PyTorch's fused Adam/AdamW/SGD:
# FusedOptimizerTensorListMetadata, Fused*Functor; apex's and TransformerEngine's FusedAdam)
FUSED_ALREADY = re.compile(r"FusedOptimizer|Fused\w*Functor|fused_adam|FusedAdam", re.IGNORECASE)


def unfused_foreach(trace: Trace, names: np.ndarray) -> np.ndarray:
    """Per kernel (its name id): a foreach kernel not of a fused optimizer."""
    if not len(names):
        return np.zeros(0, bool)
    ids, inv = np.unique(names, return_inverse=True)
    keep = [bool(FOREACH.search(trace.names[int(i)])) and not FUSED_ALREADY.search(trace.names[int(i)]) for i in ids]
    return np.array(keep, bool)[inv]


def optimizer_kernels(trace: Trace, kernels: np.ndarray) -> tuple[np.ndarray, list[str]] | None:
    """(per kernel: launched inside an optimizer step range of its rank, the ranges' names by
    count), or None where the trace holds no such range. A kernel whose launch is not on record
    counts as not inside."""
    ids = [i for i, n in enumerate(trace.names) if n.startswith(OPTIMIZER_STEP)]
    if not ids:
        return None
    c = trace.columns
    lane_rank = trace.lane_rank_array()
    host = np.array([ln.kind in (LaneKind.CPU, LaneKind.NVTX) for ln in trace.lanes], bool)
    name = np.asarray(c["name"])
    ranges = np.flatnonzero(np.isin(name, ids))
    ranges = ranges[host[np.asarray(c["lane"])[ranges]]]
    inside = np.zeros(len(kernels), bool)
    if not len(ranges) or not len(kernels):
        return (inside, []) if len(ranges) else None
    t, has = launch_times(trace, kernels)
    t = t.astype(np.int64)
    k_rank = lane_rank[np.asarray(c["lane"])[kernels]]
    r_rank = lane_rank[np.asarray(c["lane"])[ranges]]
    r_start = np.asarray(c["start"])[ranges].astype(np.int64)
    r_end = r_start + np.asarray(c["dur"])[ranges].astype(np.int64)
    for r in np.unique(k_rank[has]).tolist():
        m = r_rank == r
        if not m.any():
            continue
        o = np.argsort(r_start[m], kind="stable")
        s, e = r_start[m][o], np.maximum.accumulate(r_end[m][o])
        sel = np.flatnonzero(has & (k_rank == r))
        p = np.searchsorted(s, t[sel], side="right") - 1
        inside[sel] = (p >= 0) & (e[np.maximum(p, 0)] >= t[sel])
    names = [n for n, _ in Counter(trace.names[int(i)] for i in name[ranges]).most_common()]
    return inside, names


def foreach_clause(share: float, in_opt: float | None, names: list[str]) -> str:
    """The elementwise finding's clause on its foreach kernels: share of its time in them, in_opt
    of that time launched in an optimizer's step (None: not known)."""
    fused = "fused=True, as in torch.optim.AdamW(..., fused=True)"
    if in_opt is None:
        return (
            f"; {share:.0%} of that time is foreach kernels (multi_tensor_apply, as an unfused optimizer's "
            "or gradient clipping's foreach ops run them), fused across tensors already: for an "
            f"optimizer's, a fused optimizer is the fix ({fused})"
        )
    where = f" ({', '.join(names[:2])})" if names else ""
    out_share = share - in_opt
    if out_share < 0.05 * share:
        return (
            f"; {share:.0%} of that time is foreach kernels (multi_tensor_apply) launched in the optimizer's "
            f"step{where}, fused across tensors already: a fused optimizer is the fix ({fused})"
        )
    outside = "launched outside the optimizer's step (gradient clipping's, AMP's unscale or other foreach ops)"
    if in_opt < 0.05 * share:
        return f"; {share:.0%} of that time is foreach kernels (multi_tensor_apply) {outside}, fused across tensors already"
    return (
        f"; {share:.0%} of that time is foreach kernels (multi_tensor_apply), fused across tensors already: "
        f"{in_opt:.0%} launched in the optimizer's step{where}, for which a fused optimizer is the fix "
        f"({fused}); {out_share:.0%} {outside}"
    )
