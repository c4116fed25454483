"""Where host work came from, as a finding names it: the host op that issued most of a set of GPU
ops (copy_bound: FSDP's pre-forward issuing the parameter copies of its CPU offload), and whether
a long launch call was its kernel's first launch in the capture (its code loaded once), and whether a
long host op was that op's first call, far longer than its later ones (a one-time set-up)."""

from __future__ import annotations

import re

import numpy as np

from ..model import queries as q
from ..model.categories import LaneKind
from ..model.fmt import short_name
from ..model.trace import Trace
from .breakdown import gpu_ops, launch_calls
from .host import outermost_ops


def issued_in(trace: Trace, ops: np.ndarray) -> tuple[str, int, float, int] | None:
    """The host op (outermost, its module in parentheses left out) that issued most of the copies'
    time, where it issued half of it or more: (name, copies, ms, copies whose launch call is on
    record); None otherwise."""
    if not len(ops):
        return None
    call = launch_calls(trace, ops)
    has = call >= 0
    if not has.any():
        return None
    outer = outermost_ops(trace, call[has])
    dur = np.asarray(trace.columns["dur"][ops[has]]).astype(np.int64)
    per: dict[str, list[int]] = {}
    for e, d in zip(outer.tolist(), dur.tolist()):
        if e >= 0:
            nm = _PARENS.sub("", trace.name_of(e))
            got = per.setdefault(nm, [0, 0])
            got[0] += 1
            got[1] += d
    if not per:
        return None
    name, (n, ns) = max(per.items(), key=lambda kv: kv[1][1])
    total = int(np.asarray(trace.columns["dur"][ops]).astype(np.int64).sum())
    return (name, n, ns / 1e6, int(has.sum())) if 2 * ns >= total else None


_PARENS = re.compile(r"\s*\([^()]*\)$")  # "FSDP::pre_forward (encoder.block.14.layer.1)": the module
FSDP_OFFLOAD_ADVICE = (
    "The GPU spends its time copying in from host memory, and FSDP issues these copies before its "
    "units run. With CPU offload (CPUOffload(offload_params=True)) FSDP keeps the parameters on the "
    "host and copies each unit's in before its forward and backward; the root unit also moves the "
    "inputs to the GPU there. If offload is on and the model fits, turn it off; otherwise shard "
    "across more GPUs, use larger FSDP units or a lower-precision copy (mixed precision's "
    "param_dtype), and prefetch (forward_prefetch, backward_prefetch) so the copies overlap compute."
)


def launched_op(trace: Trace, rank: int, t0: int, t1: int, name: str) -> int | None:
    """The GPU op the longest `name` call of the rank in [t0, t1] launched, or None."""
    c = trace.columns
    try:
        code = trace.names.index(name)
    except ValueError:
        return None
    lanes = [i for i, ln in enumerate(trace.lanes) if ln.rank == rank and ln.kind == LaneKind.CUDA_API]
    parts = [q.events_in_range(trace, ln, t0, t1) for ln in lanes]
    idx = np.concatenate(parts) if parts else np.zeros(0, np.int64)
    idx = idx[np.asarray(c["name"][idx]) == code]
    if not len(idx):
        return None
    call = int(idx[np.argmax(np.asarray(c["dur"][idx]))])
    src, dst = (np.asarray(a, np.int64) for a in trace.flows)
    hit = dst[src == call]
    return int(hit[0]) if len(hit) else None


def first_launch(trace: Trace, rank: int, t0: int, t1: int, name: str) -> str | None:
    """The kernel a long launch call in [t0, t1] launched, where it is that kernel's first run on
    the rank in the capture (its code is loaded at its first launch: HTA's MI250 trace, a 6.5 ms
    hipLaunchKernel); None otherwise."""
    return first_run(trace, rank, launched_op(trace, rank, t0, t1, name))


def first_run(trace: Trace, rank: int, op: int | None) -> str | None:
    """The kernel op's name where it is that kernel's first run on the rank in the capture."""
    c = trace.columns
    if op is None:
        return None
    kname = int(c["name"][op])
    mine = gpu_ops(trace, rank)  # the rank's GPU ops only, not the whole name column
    same = mine[np.asarray(c["name"][mine]) == kname]
    if (np.asarray(c["start"][same]) < int(c["start"][op])).any():
        return None
    return trace.names[kname]


def local_memory_grown(trace: Trace, rank: int, op: int | None) -> tuple[int, int] | None:
    """(bytes before, after) where the kernel op grew its device's local memory (an Nsight Systems
    export's localMemoryTotal, io/nsys.local_memory_growth), else None."""
    if op is None:
        return None
    corr = str(int(trace.columns["corr"][op]))
    for pf in trace.metadata.get("per_file") or []:
        got = ((pf.get("local_memory_growth") or {}).get(str(rank)) or {}).get(corr)
        if got:
            return int(got[0]), int(got[1])
    return None


def other_instances_before(trace: Trace, rank: int, kernel: str) -> int:
    """How many of the rank's GPU ops ran before the first op named `kernel` under another name with
    the same short_name (other template instances: HTA's MI250 trace ran five
    vectorized_elementwise_kernel instances before the add whose first launch loaded its code)."""
    c = trace.columns
    try:
        code = trace.names.index(kernel)
    except ValueError:
        return 0
    mine = gpu_ops(trace, rank)
    names = np.asarray(c["name"][mine])
    st = np.asarray(c["start"][mine]).astype(np.int64)
    at = st[names == code]
    if not len(at):
        return 0
    short = short_name(kernel)
    u = np.unique(names)
    like = np.array([i != code and short_name(trace.names[int(i)]) == short for i in u], bool)
    same_short = np.isin(names, u[like])
    return int((same_short & (st < at.min())).sum())


FIRST_CALL_RATIO = 10.0  # a first call this many times its later calls' median is set-up, not work


def first_call(trace: Trace, rank: int, t0: int, t1: int, name: str) -> tuple[float, float, int, float, float] | None:
    """Where the host op `name` that spans most of [t0, t1] on the rank is that op's first call on
    its thread and takes FIRST_CALL_RATIO times its later calls' median or more: (its ms, the later
    calls' median ms, how many later calls, their least and most ms); None otherwise. Calls nested
    in a call of the same name (a Python frame's recursion, the call's own child) are not calls of
    their own. HTA's alexnet: the first aten::cudnn_convolution took 10.8 s (6.5 s of it in
    cudaFree), the nine after it 0.1-1,049 ms (a median 1.4 ms)."""
    c = trace.columns
    try:
        code = trace.names.index(name)
    except ValueError:
        return None
    best, lane = None, -1
    for ln in (i for i, x in enumerate(trace.lanes) if x.rank == rank and x.kind == LaneKind.CPU):
        ev = q.events_in_range(trace, ln, t0, t1)
        ev = ev[np.asarray(c["name"][ev]) == code]
        if not len(ev):
            continue
        s = np.asarray(c["start"][ev]).astype(np.int64)
        span = np.minimum(s + np.asarray(c["dur"][ev]).astype(np.int64), t1) - np.maximum(s, t0)
        k = int(np.argmax(span))
        if span[k] > 0 and (best is None or span[k] > best[1]):
            best, lane = (int(ev[k]), int(span[k])), ln
    if best is None:
        return None
    sl = trace.lane_slice(lane)  # the thread's events, sorted by start
    every = np.arange(sl.start, sl.stop)[np.asarray(c["name"][sl]) == code]
    s = np.asarray(c["start"][every]).astype(np.int64)
    d = np.asarray(c["dur"][every]).astype(np.int64)
    outer = s >= np.r_[np.iinfo(np.int64).min, np.maximum.accumulate(s + d)[:-1]]  # not inside an earlier one
    every, d = every[outer], d[outer]
    if len(every) < 2 or int(every[0]) != best[0]:
        return None
    later = d[1:]
    med = float(np.median(later))
    if d[0] < FIRST_CALL_RATIO * max(med, 1_000.0):  # later calls under a microsecond say nothing
        return None
    return d[0] / 1e6, med / 1e6, len(later), later.min() / 1e6, later.max() / 1e6
