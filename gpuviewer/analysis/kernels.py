"""Kernel statistics: top kernels by total time, Tensor-Core share, launch statistics."""

from __future__ import annotations

from functools import lru_cache

import numpy as np

from ..model.categories import Cat
from ..model.trace import Trace
from .breakdown import RankBreakdown
from .kernel_class import tensor_cores


@lru_cache(maxsize=1 << 16)  # every rank of a job names the same kernels: 15% of a 64-rank map
def is_tensor_core(name: str) -> bool:
    """A Tensor-Core kernel by its name: kernel_class.tensor_cores, the one set of these rules."""
    return tensor_cores(name) is True


def kernel_stats(trace: Trace, rb: RankBreakdown, top: int = 15) -> dict:
    c = trace.columns
    ops = rb.ops if rb.ops is not None else np.zeros(0, np.int64)
    cat = np.asarray(c["cat"][ops])
    k = ops[(cat == Cat.KERNEL) | (cat == Cat.COMM_KERNEL)]
    if not len(k):
        return {
            "kernels": 0,
            "top": [],
            "tensor_core_share": 0.0,
            "mean_kernel_us": 0.0,
            "mean_gap_us": 0.0,
            "total_kernel_ns": 0,
        }
    names = np.asarray(c["name"][k])
    dur = np.asarray(c["dur"][k]).astype(np.int64)
    start = np.asarray(c["start"][k]).astype(np.int64)
    total = int(dur.sum())
    uniq, inv = np.unique(names, return_inverse=True)
    tot = np.bincount(inv, weights=dur)
    cnt = np.bincount(inv)
    text = [trace.names[int(u)] for u in uniq]
    # ties broken by the name's text, not its id (ids depend on which files were loaded together)
    order = sorted(range(len(uniq)), key=lambda i: (-tot[i], text[i]))[:top]
    rows = [
        {
            "name": text[i],
            "count": int(cnt[i]),
            "total_ns": int(tot[i]),
            "mean_ns": float(tot[i] / cnt[i]),
            "share": float(tot[i] / total) if total else 0.0,
        }
        for i in order
    ]
    tc_names = np.array([is_tensor_core(t) for t in text])
    tc = float(tot[tc_names].sum() / total) if total else 0.0
    # launch statistics on compute kernels: gaps between consecutive kernels on the same lane
    lanes = np.asarray(c["lane"][k])
    o = np.lexsort((start, lanes))
    s, e, ln = start[o], start[o] + dur[o], lanes[o]
    same = ln[1:] == ln[:-1]
    gap = (s[1:] - e[:-1])[same]
    gap = gap[gap >= 0]
    return {
        "kernels": int(len(k)),
        "top": rows,
        "tensor_core_share": round(tc, 4),
        "mean_kernel_us": float(dur.mean() / 1e3),
        "median_kernel_us": float(np.median(dur) / 1e3),
        "mean_gap_us": float(gap.mean() / 1e3) if len(gap) else 0.0,
        "median_gap_us": float(np.median(gap) / 1e3) if len(gap) else 0.0,
        "total_kernel_ns": total,
        "gaps": gap,
    }
