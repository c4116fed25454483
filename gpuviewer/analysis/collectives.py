"""Collectives across ranks: NCCL kernels matched by their order within a step, each split
into waiting for the last rank to arrive and the transfer after it."""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..model.categories import Cat
from ..model.trace import Trace
from .breakdown import RankBreakdown


@dataclass
class StepCollectives:
    step: int
    ranks: list[int]
    n: int  # collectives matched in this step
    starts: np.ndarray  # (ranks, n) kernel starts
    ends: np.ndarray
    idx: np.ndarray  # (ranks, n) event indices
    wait_ns: dict[int, int] = field(default_factory=dict)  # per rank: time waiting for others
    last_arrivals: dict[int, int] = field(default_factory=dict)  # per rank: collectives it arrived last at
    transfer_ns: int = 0  # summed over collectives: last arrival -> end (max over ranks)


def comm_kernels_by_step(trace: Trace, rb: RankBreakdown) -> dict[int, np.ndarray]:
    cat = np.asarray(trace.columns["cat"][rb.ops])
    m = cat == Cat.COMM_KERNEL
    ops, steps = rb.ops[m], rb.op_step[m]
    start = np.asarray(trace.columns["start"][ops])
    out = {}
    for s in np.unique(steps):
        if s < 0:
            continue
        sel = steps == s
        o = np.argsort(start[sel], kind="stable")
        out[int(s)] = ops[sel][o]
    return out


def match(trace: Trace, rbs: list[RankBreakdown]) -> list[StepCollectives]:
    if len(rbs) < 2:
        return []
    per_rank = {rb.rank: comm_kernels_by_step(trace, rb) for rb in rbs}
    common = set.intersection(*(set(v) for v in per_rank.values())) if per_rank else set()
    c = trace.columns
    out = []
    ranks = [rb.rank for rb in rbs]
    for step in sorted(common):
        n = min(len(per_rank[r][step]) for r in ranks)
        if n == 0:
            continue
        idx = np.stack([per_rank[r][step][:n] for r in ranks])
        starts = np.asarray(c["start"][idx.ravel()]).reshape(idx.shape).astype(np.int64)
        ends = starts + np.asarray(c["dur"][idx.ravel()]).reshape(idx.shape)
        last = starts.max(axis=0)
        wait = last[None, :] - starts
        sc = StepCollectives(step, ranks, n, starts, ends, idx)
        for k, r in enumerate(ranks):
            sc.wait_ns[r] = int(wait[k].sum())
            sc.last_arrivals[r] = int((starts[k] == last).sum())
        sc.transfer_ns = int(np.maximum(ends.max(axis=0) - last, 0).sum())
        out.append(sc)
    return out
