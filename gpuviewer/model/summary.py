"""Counts and ranges per rank: what `gpuviewer info` reports."""

from __future__ import annotations

from typing import Any

import numpy as np

from .categories import Cat
from .trace import Trace


def summarize(trace: Trace) -> dict:
    cols = trace.columns
    lane_rank = trace.lane_rank_array()
    inst_rank = lane_rank[trace.instants["lane"]] if len(trace.instants["lane"]) else np.zeros(0, np.int32)
    # lane by lane (each lane is one slice of the columns): per-event masks and an end column over
    # the whole session would allocate ~2 GB at 100M events
    per: dict[int, dict[str, Any]] = {
        info.rank: {"events": 0, "kernels": 0, "nccl": 0, "starts": [], "ends": []} for info in trace.ranks
    }
    kernels = 0
    for lane in range(len(trace.lanes)):
        sl = trace.lane_slice(lane)
        if sl.stop == sl.start:
            continue
        cat = np.asarray(cols["cat"][sl])
        n_kernels = int(((cat == Cat.KERNEL) | (cat == Cat.COMM_KERNEL)).sum())
        kernels += n_kernels
        acc = per.get(int(lane_rank[lane]))
        if acc is None:
            continue
        start = np.asarray(cols["start"][sl])
        acc["events"] += sl.stop - sl.start
        acc["kernels"] += n_kernels
        acc["nccl"] += int((cat == Cat.COMM_KERNEL).sum())
        acc["starts"].append(int(start.min()))
        acc["ends"].append(int((start + np.asarray(cols["dur"][sl])).max()))
    ranks = []
    for info in trace.ranks:
        acc = per[info.rank]
        mi = inst_rank == info.rank
        starts, ends = acc["starts"], acc["ends"]
        if mi.any():
            starts.append(trace.instants["t"][mi].min())
            ends.append(trace.instants["t"][mi].max())
        ranks.append(
            {
                "rank": info.rank,
                "events": int(acc["events"] + mi.sum()),
                "kernels": acc["kernels"],
                "nccl_kernels": acc["nccl"],
                "lanes": len(trace.lanes_of_rank(info.rank)),
                "devices": [int(d) for d in info.devices],
                "steps": [s.step for s in trace.steps_of_rank(info.rank)],
                "start_ns": int(min(starts)) if starts else 0,
                "end_ns": int(max(ends)) if ends else 0,
            }
        )
    return {
        "format": trace.format,
        "files": list(trace.metadata.get("files", [])),
        "events": int(trace.n_events),
        "kernels": kernels,
        "ranks": ranks,
    }
