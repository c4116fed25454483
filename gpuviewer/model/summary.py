"""Counts and ranges per rank: what `gpuviewer info` reports."""
from __future__ import annotations

import numpy as np

from .categories import Cat
from .trace import Trace


def summarize(trace: Trace) -> dict:
    cols = trace.columns
    lane_rank = trace.lane_rank_array()
    ev_rank = lane_rank[cols["lane"]] if len(cols["lane"]) else np.zeros(0, np.int32)
    inst_rank = lane_rank[trace.instants["lane"]] if len(trace.instants["lane"]) else np.zeros(0, np.int32)
    cat = cols["cat"]
    is_kernel = (cat == Cat.KERNEL) | (cat == Cat.COMM_KERNEL)
    is_nccl = cat == Cat.COMM_KERNEL
    end = cols["start"] + cols["dur"]
    ranks = []
    for info in trace.ranks:
        m = ev_rank == info.rank
        mi = inst_rank == info.rank
        starts = [cols["start"][m].min()] if m.any() else []
        ends = [end[m].max()] if m.any() else []
        if mi.any():
            starts.append(trace.instants["t"][mi].min())
            ends.append(trace.instants["t"][mi].max())
        ranks.append({
            "rank": info.rank,
            "events": int(m.sum() + mi.sum()),
            "kernels": int((is_kernel & m).sum()),
            "nccl_kernels": int((is_nccl & m).sum()),
            "lanes": len(trace.lanes_of_rank(info.rank)),
            "devices": [int(d) for d in info.devices],
            "steps": [s.step for s in trace.steps_of_rank(info.rank)],
            "start_ns": int(min(starts)) if starts else 0,
            "end_ns": int(max(ends)) if ends else 0,
        })
    return {
        "format": trace.format,
        "files": list(trace.metadata.get("files", [])),
        "events": int(trace.n_events),
        "kernels": int(is_kernel.sum()),
        "ranks": ranks,
    }
