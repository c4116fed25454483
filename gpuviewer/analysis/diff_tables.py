"""What a diff compares (analysis/diff.py), measured once per session: per rank and step, the
step's parts (from breakdown.py), each GPU op name's total and count, each host op name's total
and count, and each collective's (group, name, bytes) wait, transfer and bytes (from
collectives.py). Long-form pandas tables, one row per (rank, step, key), so two sessions with
different string tables line up by name.

Step attribution is breakdown.py's: a GPU op belongs to the step that launched it; a host op to
the step whose host range holds its start. A host op's total is its inclusive duration (an op
called inside an op of the same name counts twice, as in the profiler's "CPU total").
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from ..model.categories import Cat
from ..model.trace import Trace
from .breakdown import RankBreakdown, breakdown, split_wait
from .collectives import OUTSIDE_STEPS, arg_int, match, rank_comm
from .diff_text import NO_STEP  # the one unit of a rank without steps (kept where no pandas is imported)
from .host import IDLE_WAIT, _step_markers, host_lanes
from .memory import peak_bytes_by_rank

KIND = {Cat.KERNEL: "compute", Cat.COMM_KERNEL: "comm", Cat.MEMCPY: "memcpy", Cat.MEMSET: "memset"}
HOST_KIND = {
    Cat.CPU_OP: "CPU op",
    Cat.COMM_OP: "communication op",
    Cat.CUDA_RUNTIME: "CUDA runtime",
    Cat.CUDA_DRIVER: "CUDA driver",
    Cat.SYNC: "sync",
    Cat.OSRT: "OS runtime",
    Cat.NVTX: "NVTX",
    Cat.USER_ANNOTATION: "user annotation",
}
# Python stack frames are left out: with_stack traces hold tens of thousands, each frame's total
# covers its callees, and the op names under them say the same thing more precisely.
# "step" is the host's step range (what ProfilerStep#N or an NVTX step range measures; the GPU's
# time where a capture has none). The GPU's parts less their overlap add up to "GPU time" (the
# step's GPU window and the idle around it), the host's parts to the step (host_split.host_split)
GPU_PARTS = ("compute", "comm wait", "comm transfer", "memcpy/memset", "GPU idle")
HOST_PARTS = (
    "host: framework ops",
    "host: launch calls",
    "host: launch queue",
    "host: syncs",
    "host: waits",
    "host: no op recorded",
)
PARTS = ("step", "GPU time", *GPU_PARTS, "GPU overlap", *HOST_PARTS)


@dataclass
class Measured:
    ranks: list[int]
    steps: dict[int, list[int]]  # every step of each rank, in time order
    measured: dict[int, list[int]]  # the steps summaries use (no warm-up)
    parts: pd.DataFrame  # rank, step, part, value
    kernels: pd.DataFrame  # rank, step, name, kind, total, count
    host_ops: pd.DataFrame  # rank, step, name, kind, total, count
    # rank, step, group, name, bytes (-1: unknown), count, wait, transfer, nbytes, nranks, matched
    collectives: pd.DataFrame
    # rank -> peak allocated GPU memory of its devices (bytes), where the trace records it
    memory_peak: dict[int, int] = field(default_factory=dict)


def measure(trace: Trace, comm_args: dict[int, dict] | None = None) -> Measured:
    """comm_args: io.comm_args.collective_args(trace) (analysis never reads files)."""
    rbs = breakdown(trace)
    colls = match(trace, rbs, comm_args)
    split_wait(rbs, colls)
    per_kernel = colls.per_kernel()
    parts, kern, host, coll = [], [], [], []
    steps, measured = {}, {}
    for rb in rbs:
        labels = _labels(rb)
        steps[rb.rank] = labels
        measured[rb.rank] = [lab for lab, s in zip(labels, rb.steps) if not s.warmup] or labels
        parts.append(_parts(rb, labels))
        kern.append(_gpu_totals(trace, rb, labels))
        host.append(_host_totals(trace, rb, labels))
        coll.append(_collectives(trace, rb, labels, comm_args or {}, per_kernel))
    return Measured(
        [rb.rank for rb in rbs],
        steps,
        measured,
        _cat(parts, PART_COLS),
        _cat(kern, NAMED_COLS),
        _cat(host, NAMED_COLS),
        _cat(coll, COLL_COLS),
        {r: max(d.values()) for r, d in peak_bytes_by_rank(trace).items() if d},
    )


PART_COLS = ["rank", "step", "part", "value"]
NAMED_COLS = ["rank", "step", "name", "kind", "total", "count"]
COLL_COLS = ["rank", "step", "group", "name", "bytes", "count", "wait", "transfer", "nbytes", "nranks", "matched"]


def _cat(frames: list[pd.DataFrame], columns: list[str]) -> pd.DataFrame:
    frames = [f for f in frames if len(f)]
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=columns)


def _labels(rb: RankBreakdown) -> list[int]:
    return [NO_STEP if s.step is None else int(s.step) for s in rb.steps]


def _parts(rb: RankBreakdown, labels: list[int]) -> pd.DataFrame:
    rows = []
    for lab, s in zip(labels, rb.steps):
        host = s.host_end_ns - s.host_start_ns
        vals = (
            host if host > 0 else s.gpu_time_ns,
            s.gpu_time_ns,
            s.compute_ns,
            s.wait_ns,
            s.transfer_ns,
            s.memcpy_ns,
            s.idle_total_ns,
            # kinds of GPU work at once (NCCL beside compute): the parts above less this are GPU time
            max(0, s.compute_ns + s.comm_ns + s.memcpy_ns - s.busy_ns),
            s.host_framework_ns + s.host_coll_ns,  # (gloo's host collectives: framework here, so the parts add up)
            s.host_launch_ns,
            s.host_queue_ns,
            s.host_sync_ns,
            s.host_wait_ns,
            s.host_idle_ns,
        )
        rows += [(rb.rank, lab, p, int(v)) for p, v in zip(PARTS, vals)]
    return pd.DataFrame(rows, columns=PART_COLS)


def _totals(trace: Trace, rank: int, idx: np.ndarray, pos: np.ndarray, labels: list[int], kinds: dict) -> pd.DataFrame:
    """Total duration and count per (step position, name, category) of the events idx."""
    keep = pos >= 0
    idx, pos = idx[keep], pos[keep]
    c = trace.columns
    name = np.asarray(c["name"][idx]).astype(np.int64)
    cat = np.asarray(c["cat"][idx]).astype(np.int64)
    dur = np.asarray(c["dur"][idx]).astype(np.float64)
    code = (pos.astype(np.int64) * len(trace.names) + name) * 256 + cat
    u, inv = np.unique(code, return_inverse=True)
    tot = np.bincount(inv, weights=dur, minlength=len(u))
    cnt = np.bincount(inv, minlength=len(u))
    p, rest = np.divmod(u, len(trace.names) * 256)
    n, ct = np.divmod(rest, 256)
    lab = np.asarray(labels, np.int64)
    return pd.DataFrame(
        {
            "rank": rank,
            "step": lab[p],
            "name": [trace.names[int(i)] for i in n],
            "kind": [kinds.get(int(k), str(int(k))) for k in ct],
            "total": tot.round().astype(np.int64),
            "count": cnt.astype(np.int64),
        }
    )


def _gpu_totals(trace: Trace, rb: RankBreakdown, labels: list[int]) -> pd.DataFrame:
    ops = rb.ops if rb.ops is not None else np.zeros(0, np.int64)
    st = rb.op_step if rb.op_step is not None else np.zeros(0, np.int64)
    # no steps: every op is in the one window
    pos = np.zeros(len(ops), np.int64) if labels == [NO_STEP] else _positions(labels, st)
    return _totals(trace, rb.rank, ops, pos, labels, KIND)


def _positions(labels: list[int], steps: np.ndarray) -> np.ndarray:
    """Index of each step number in labels (-1: not a step of the rank)."""
    lab = np.asarray(labels, np.int64)
    o = np.argsort(lab, kind="stable")
    k = np.minimum(np.searchsorted(lab[o], steps), len(lab) - 1)
    return np.where(lab[o][k] == steps, o[k], -1)


def _host_totals(trace: Trace, rb: RankBreakdown, labels: list[int]) -> pd.DataFrame:
    lanes = host_lanes(trace, rb.rank)
    if not lanes or not rb.steps:
        return pd.DataFrame()
    idx = np.concatenate([np.arange(trace.lane_slice(ln).start, trace.lane_slice(ln).stop) for ln in lanes])
    c = trace.columns
    cat = np.asarray(c["cat"][idx])
    idx = idx[np.isin(cat, list(HOST_KIND))]
    name = np.asarray(c["name"][idx])
    skip = np.array(sorted(_step_markers(trace) | _idle_waits(trace)), np.int64)
    idx = idx[~np.isin(name, skip)]
    start = np.asarray(c["start"][idx]).astype(np.int64)
    h0 = np.array([s.host_start_ns for s in rb.steps], np.int64)
    h1 = np.array([s.host_end_ns for s in rb.steps], np.int64)
    o = np.argsort(h0, kind="stable")
    k = np.searchsorted(h0[o], start, side="right") - 1
    inside = (k >= 0) & (start < h1[o][np.maximum(k, 0)])
    pos = np.where(inside, o[np.maximum(k, 0)], -1)
    return _totals(trace, rb.rank, idx, pos, labels, HOST_KIND)


def _idle_waits(trace: Trace) -> set[int]:
    """OS calls in which a thread sleeps (poll, futex, ...): idle, not work (host.IDLE_WAIT)."""
    return {i for i, n in enumerate(trace.names) if IDLE_WAIT.match(n)}


def _collectives(
    trace: Trace, rb: RankBreakdown, labels: list[int], comm_args: dict, per_kernel: dict[int, dict]
) -> pd.DataFrame:
    """One row per communication kernel of the rank. A kernel matched across ranks splits into
    its wait for the last rank and its transfer; an unmatched one (a rank opened alone) counts as
    transfer only, and `matched` says so."""
    rows = []
    for (group, step), ks in rank_comm(trace, rb, comm_args).items():
        if step in OUTSIDE_STEPS:  # outside every step: no step's part
            continue
        lab = NO_STEP if labels == [NO_STEP] else step
        for s, e, i, kind, nbytes, *_ in ks:
            pk = per_kernel.get(i)
            wait = pk["wait_ns"] if pk else 0
            n = pk["ranks"] if pk else (arg_int(comm_args.get(i, {}).get("group_size")) or 1)
            rows.append(
                (rb.rank, lab, group, kind, nbytes or -1, 1, wait, (e - s) - wait, nbytes or 0, n, pk is not None)
            )
    f = pd.DataFrame(rows, columns=COLL_COLS)
    return f.groupby(["rank", "step", "group", "name", "bytes"], as_index=False, sort=False).agg(
        {"count": "sum", "wait": "sum", "transfer": "sum", "nbytes": "sum", "nranks": "max", "matched": "min"}
    )
