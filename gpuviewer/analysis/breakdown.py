"""Per rank and step: GPU busy, compute, communication, their overlap, exposed communication,
idle, utilization. A GPU op belongs to the step whose window holds its launch (the CUDA API
call with its correlation id); ops with no launch on record go by their own start."""
from __future__ import annotations

from dataclasses import asdict, dataclass, field

import numpy as np

from ..model.categories import Cat, LaneKind
from ..model.trace import Trace
from . import intervals as iv

GPU_LANES = (LaneKind.GPU, LaneKind.COMM)


@dataclass
class StepBreakdown:
    step: int | None
    start_ns: int
    end_ns: int
    busy_ns: int = 0
    compute_ns: int = 0
    comm_ns: int = 0
    memcpy_ns: int = 0
    overlap_ns: int = 0
    exposed_comm_ns: int = 0
    idle_ns: int = 0
    kernels: int = 0
    comm_kernels: int = 0

    @property
    def window_ns(self) -> int:
        return self.end_ns - self.start_ns

    @property
    def utilization(self) -> float:
        return self.busy_ns / self.window_ns if self.window_ns > 0 else 0.0

    def as_dict(self) -> dict:
        d = asdict(self)
        d["utilization"] = round(self.utilization, 4)
        return d


@dataclass
class RankBreakdown:
    rank: int
    steps: list[StepBreakdown] = field(default_factory=list)
    ops: np.ndarray | None = None  # event indices of the rank's GPU work
    op_step: np.ndarray | None = None  # step number of each op (-1: outside every step)

    @property
    def gpu_utilization(self) -> float:
        w = sum(s.window_ns for s in self.steps)
        return sum(s.busy_ns for s in self.steps) / w if w else 0.0

    def total(self, key: str) -> int:
        return sum(getattr(s, key) for s in self.steps)


def gpu_ops(trace: Trace, rank: int) -> np.ndarray:
    lanes = [i for i, ln in enumerate(trace.lanes) if ln.rank == rank and ln.kind in GPU_LANES]
    if not lanes:
        return np.zeros(0, np.int64)
    parts = [np.arange(trace.lane_slice(ln).start, trace.lane_slice(ln).stop) for ln in lanes]
    idx = np.concatenate(parts)
    cat = np.asarray(trace.columns["cat"][idx])
    keep = (cat == Cat.KERNEL) | (cat == Cat.COMM_KERNEL) | (cat == Cat.MEMCPY) | (cat == Cat.MEMSET)
    return idx[keep]


def launch_times(trace: Trace, ops: np.ndarray) -> np.ndarray:
    """Start of the CUDA API call that launched each op (its own start when unknown)."""
    start = np.asarray(trace.columns["start"])
    out = start[ops].copy()
    src, dst = trace.flows
    if len(dst):
        o = np.argsort(dst)
        d_sorted = np.asarray(dst)[o]
        pos = np.searchsorted(d_sorted, ops)
        pos_c = np.minimum(pos, len(d_sorted) - 1)
        hit = d_sorted[pos_c] == ops
        out[hit] = start[np.asarray(src)[o][pos_c[hit]]]
    return out


def rank_breakdown(trace: Trace, rank: int) -> RankBreakdown:
    c = trace.columns
    ops = gpu_ops(trace, rank)
    steps = sorted(trace.steps_of_rank(rank), key=lambda s: s.start)
    rb = RankBreakdown(rank)
    s_all = np.asarray(c["start"][ops]).astype(np.int64)
    e_all = s_all + np.asarray(c["dur"][ops])
    cat = np.asarray(c["cat"][ops])
    if steps:
        launch = launch_times(trace, ops)
        st = np.array([s.start for s in steps], np.int64)
        en = np.array([s.end for s in steps], np.int64)
        k = np.searchsorted(st, launch, side="right") - 1
        inside = (k >= 0) & (launch <= en[np.maximum(k, 0)])
        op_step = np.where(inside, k, -1)
        windows = [(s.step, s.start, s.end) for s in steps]
    else:
        lane_ids = trace.lanes_of_rank(rank)
        lo = min((int(c["start"][trace.lane_slice(i)].min()) for i in lane_ids
                  if trace.lane_slice(i).stop > trace.lane_slice(i).start), default=0)
        hi = int(e_all.max()) if len(e_all) else lo
        op_step = np.zeros(len(ops), np.int64)
        windows = [(None, lo, hi)]
    rb.ops = ops
    rb.op_step = np.array([windows[i][0] if i >= 0 and windows[i][0] is not None else -1
                           for i in op_step], np.int64) if len(op_step) else np.zeros(0, np.int64)
    for i, (step, w0, w1) in enumerate(windows):
        m = op_step == i
        s, e, ct = s_all[m], e_all[m], cat[m]
        end = max(w1, int(e.max())) if len(e) else w1
        busy = iv.union(s, e)
        comp = iv.union(s[ct == Cat.KERNEL], e[ct == Cat.KERNEL])
        comm = iv.union(s[ct == Cat.COMM_KERNEL], e[ct == Cat.COMM_KERNEL])
        mem = (ct == Cat.MEMCPY) | (ct == Cat.MEMSET)
        memcpy = iv.union(s[mem], e[mem])
        overlap = iv.intersect(comp, comm)
        sb = StepBreakdown(step, int(w0), int(end))
        sb.busy_ns = iv.length(busy)
        sb.compute_ns = iv.length(comp)
        sb.comm_ns = iv.length(comm)
        sb.memcpy_ns = iv.length(memcpy)
        sb.overlap_ns = iv.length(overlap)
        sb.exposed_comm_ns = sb.comm_ns - sb.overlap_ns
        sb.idle_ns = max(0, sb.window_ns - sb.busy_ns)
        sb.kernels = int(((ct == Cat.KERNEL) | (ct == Cat.COMM_KERNEL)).sum())
        sb.comm_kernels = int((ct == Cat.COMM_KERNEL).sum())
        rb.steps.append(sb)
    return rb


def breakdown(trace: Trace) -> list[RankBreakdown]:
    return [rank_breakdown(trace, r.rank) for r in trace.ranks]
