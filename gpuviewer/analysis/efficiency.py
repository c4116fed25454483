"""Are the kernels any good: the work each GPU kernel did (from the shapes of the CPU op that
launched it), its rate against the device's roofs, Tensor-Core use, and MFU per step.

Each compute kernel is attached to the CPU op that launched it: the launch call (correlation id)
and, on the CPU lane of the same thread, the innermost op around the launch that has a work rule
(flops.RULES: aten::addmm inside aten::linear, the cuDNN attention op inside
scaled_dot_product_attention); without one, the innermost op around it. An op's FLOPs and bytes are
shared by its kernels in proportion to their durations. Kernels whose op has no shapes or no rule
(and kernels with no launch on record: Nsight Systems exports, CUDA-graph replays) are counted as
work unknown, and grouped by what their names say.

A family is (kind, precision, Tensor Cores, work known): kind and precision from the op (its
first floating-point input) or else from the kernel's name; Tensor-Core use from the names of the
op's kernels (kernel_class). An fp32 op whose kernels use Tensor Cores ran in tf32.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..model.categories import Cat, LaneKind
from ..model.peaks import Peaks
from ..model.trace import Trace
from ..model.work_ops import ruled_names
from . import kernel_class
from .breakdown import launch_calls
from .flops import FLOP_KINDS, op_work

ShapesFetcher = Callable[[Trace, np.ndarray], dict]  # io.op_shapes.op_shapes


def _uniq(a: np.ndarray) -> np.ndarray:
    """Sorted distinct values: np.unique's hash path took 0.1 s for 200,000 ids here, a sort 0.01 s."""
    a = np.sort(a)
    return a[np.r_[True, a[1:] != a[:-1]]] if len(a) else a


@dataclass
class Efficiency:
    peaks: Peaks
    families: list[dict]
    steps: list[dict] = field(default_factory=list)
    ops: dict = field(default_factory=dict)  # counts: ops with work, unknown ops and kernels
    # per compute kernel (kept for the window's details, not printed)
    kernel: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64), repr=False)
    kernel_op: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64), repr=False)  # -1: none
    kernel_flops: np.ndarray = field(default_factory=lambda: np.zeros(0), repr=False)  # nan: unknown
    kernel_bytes: np.ndarray = field(default_factory=lambda: np.zeros(0), repr=False)
    kernel_family: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64), repr=False)  # into families
    op_shape: dict = field(default_factory=dict, repr=False)  # matmul op -> (M, N, K, batch)

    @property
    def has_work(self) -> bool:
        """Something worth saying: shapes gave work, matrix kernels ran without Tensor Cores, or at
        least which kinds of kernel the compute time went to (an nsys export records no shapes:
        mfu_2gpu's flash attention, 53% of it, was said nowhere)."""
        return bool(self.ops.get("with_work") or self.families) or any(
            f["tensor_cores"] is False for f in self.families
        )

    def to_json(self) -> dict:
        return {
            "device": self.peaks.device,
            "peaks": self.peaks.to_json(),
            "steps": self.steps,
            "families": self.families,
            "ops": self.ops,
        }


def _named_device(trace: Trace) -> tuple[int, int, str] | None:
    """(rank, device, name) of the first rank's first device whose name the trace recorded."""
    return next(
        (
            (r.rank, dev, p["name"])
            for r in trace.ranks
            for dev, p in sorted(r.device_props.items())
            if isinstance(p.get("name"), str) and p["name"]
        ),
        None,
    )


def device_name(trace: Trace) -> str | None:
    """The GPU's name as the trace recorded it (Kineto deviceProperties, nsys TARGET_INFO_GPU): of
    the first rank's first device that has one."""
    d = _named_device(trace)
    return d[2] if d is not None else None


def device_props(trace: Trace) -> dict | None:
    """The recorded properties of the device device_name() names (Kineto deviceProperties)."""
    d = _named_device(trace)
    return next((r.device_props.get(d[1]) for r in trace.ranks if r.rank == d[0]), None) if d is not None else None


def device_memory(trace: Trace) -> int | None:
    """Bytes of memory of the device device_name() names (memory.capacity_bytes), None if not recorded."""
    from .memory import capacity_bytes

    d = _named_device(trace)
    return capacity_bytes(trace, d[0], d[1]) if d is not None else None


# aten::convolution, _convolution, cudnn_convolution, convolution_backward, conv2d, conv_transpose2d
# (lower case, as ATen names them: not HF's Conv1D, a linear layer, nor 'convert')
_CONV_OP = re.compile(r"convolution|(?<![A-Za-z])conv(?:\d|_)")


def _kind_of(by_name: str, by_conv: int) -> str:
    """A kernel's kind: its name's, a GEMM a convolution launched being convolution work."""
    return "conv" if by_conv and by_name == "gemm" else by_name


def conv_launched(trace: Trace, kernels: np.ndarray, parent: np.ndarray | None = None) -> np.ndarray:
    """Per kernel (sorted event indices): did a convolution op launch it? parent: their launching
    ops where already found (launch_parents), else found here for these kernels only."""
    if parent is None:
        _, parent = launch_parents(trace, kernels=kernels)
    out = np.zeros(len(kernels), bool)
    has = parent >= 0
    if has.any():
        ids, inv = np.unique(np.asarray(trace.columns["name"])[parent[has]], return_inverse=True)
        out[has] = np.array([bool(_CONV_OP.search(trace.names[int(i)])) for i in ids], bool)[inv]
    return out


def launch_parents(
    trace: Trace, rank: int | None = None, kernels: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """(compute kernels, the CPU op that launched each or -1), event indices; rank: that rank's
    kernels only (each kernel's op is found on its own: the same answer for them, 1/64 of the
    work at 64 ranks); kernels: these kernels only (sorted event indices)."""
    c = trace.columns
    if kernels is None:
        kernels = np.flatnonzero(np.asarray(c["cat"]) == Cat.KERNEL)
    if rank is not None:
        kernels = kernels[trace.lane_rank_array()[np.asarray(c["lane"])[kernels]] == rank]
    parent = np.full(len(kernels), -1, np.int64)
    if not len(kernels) or not len(trace.flows[0]):
        return kernels, parent
    launch = launch_calls(trace, kernels)  # the flows sorted once per session, not once per call
    ruled = ruled_names(trace)
    lane = np.asarray(c["lane"])
    cpu_lane = {(ln.rank, ln.pid, ln.stream): i for i, ln in enumerate(trace.lanes) if ln.kind == LaneKind.CPU}
    where = np.flatnonzero(launch >= 0)
    lanes_of = lane[launch[where]]
    for ll in _uniq(lanes_of).tolist():
        ln = trace.lanes[ll]
        target = cpu_lane.get((ln.rank, ln.pid, ln.stream))
        if ln.kind == LaneKind.CPU:
            target = ll
        if target is None:
            continue
        sel = where[lanes_of == ll]
        parent[sel] = _innermost(trace, target, np.asarray(c["start"])[launch[sel]], ruled)
    return kernels, parent


def _launched(trace: Trace, kernels: np.ndarray) -> np.ndarray:
    """Per kernel: is the CUDA call that launched it on record (a flow ends at it)?"""
    dst = np.asarray(trace.flows[1], np.int64)
    if not len(kernels) or not len(dst):
        return np.zeros(len(kernels), bool)
    return np.isin(kernels, dst)


def _innermost(trace: Trace, lane: int, t: np.ndarray, ruled: np.ndarray) -> np.ndarray:
    """For each time t, the CPU op on the lane around it: the deepest with a work rule, else the
    deepest. Ops of one depth never overlap, so one binary search a depth finds the candidate."""
    c = trace.columns
    sl = trace.lane_slice(lane)
    ops = np.flatnonzero(np.asarray(c["cat"][sl]) == Cat.CPU_OP) + sl.start
    best = np.full(len(t), -1, np.int64)
    best_ruled = np.full(len(t), -1, np.int64)
    if not len(ops):
        return best
    depth = np.asarray(c["depth"])[ops]
    start, end = np.asarray(c["start"])[ops], np.asarray(c["start"])[ops] + np.asarray(c["dur"])[ops]
    name = np.asarray(c["name"])[ops]
    for d in _uniq(depth).tolist():  # shallow to deep: deeper ones overwrite
        m = depth == d
        s, e, idx, rn = start[m], end[m], ops[m], ruled[name[m]]
        p = np.searchsorted(s, t, side="right") - 1
        pc = np.maximum(p, 0)
        inside = (p >= 0) & (e[pc] >= t)
        best = np.where(inside, idx[pc], best)
        best_ruled = np.where(inside & rn[pc], idx[pc], best_ruled)
    return np.where(best_ruled >= 0, best_ruled, best)


def _first_ruled_ops(trace: Trace, ruled: np.ndarray, n: int = 16) -> np.ndarray:
    """The n CPU ops with a work rule that come first in their files."""
    c = trace.columns
    ops = np.flatnonzero(np.asarray(c["cat"]) == Cat.CPU_OP)
    ops = ops[ruled[np.asarray(c["name"])[ops]]]
    if len(ops) > n:
        ops = ops[np.argpartition(np.asarray(c["src"])[ops], n)[:n]]
    return np.sort(ops)


# kernels of a matmul or convolution that do no matrix multiply: split-K reductions adding up
# partial results, cuDNN's Winograd transforms of the data, filters and outputs
_NOT_MATRIX = re.compile(r"reduce|splitk|winograd(?:forward|wgrad)|winogradtiles", re.IGNORECASE)


def compute(
    trace: Trace, shapes: ShapesFetcher, peaks: Peaks, steps: list[dict] | None = None, rank: int | None = None
) -> Efficiency:
    """steps: per rank and step the GPU window {rank, step, start_ns, end_ns, warmup} and the GPU
    idle around it {idle_before_ns, idle_after_ns} (the analysis' breakdown); None: families only.
    rank: that rank's kernels only."""
    c = trace.columns
    ruled = ruled_names(trace)
    # a profiler records shapes on every op or on none: ask about a few ops with a rule first,
    # and attach kernels to their ops only when shapes were recorded (no use otherwise)
    probe = _first_ruled_ops(trace, ruled)
    recorded = bool(len(probe)) and bool(shapes(trace, probe))
    # with no op of a work rule in the trace the kernels' ops are still named (HTA's
    # triton_example: an Inductor op with shapes recorded read 'no shapes recorded')
    if recorded or not len(probe):
        kernels, parent = launch_parents(trace, rank)
    else:
        kernels = np.flatnonzero(np.asarray(c["cat"]) == Cat.KERNEL)
        parent = np.full(len(kernels), -1, np.int64)
    if rank is not None:
        keep = trace.lane_rank_array()[np.asarray(c["lane"])[kernels]] == rank
        kernels, parent = kernels[keep], parent[keep]
        steps = [s for s in steps or [] if s["rank"] == rank] or None
    in_steps = bool(steps)
    if steps:
        keep = _in_measured_steps(trace, kernels, steps)
        kernels, parent = kernels[keep], parent[keep]
    dur = np.asarray(c["dur"])[kernels].astype(np.float64)
    names = np.asarray(c["name"])[kernels]
    # the ops with a rule get their shapes read; an op with shapes and a rule has work
    ops = _uniq(parent[parent >= 0])
    ruled_ops = ops[ruled[np.asarray(c["name"])[ops]]] if len(ops) else ops
    got = shapes(trace, ruled_ops) if len(ruled_ops) else {}
    work = {}
    for i, a in got.items():
        w = op_work(trace.names[int(c["name"][i])], a.get("dims"), a.get("types"), a.get("concrete"))
        if w is not None:
            work[i] = w
    # per-name facts, looked up by the kernels' name ids
    uniq = np.flatnonzero(np.bincount(names, minlength=1))  # name ids: a lookup, no sort
    pos = np.zeros(len(trace.names) + 1, np.int64)
    pos[uniq] = np.arange(len(uniq))
    inv = pos[names]
    nm = [trace.names[int(u)] for u in uniq.tolist()]
    k_kind = [kernel_class.kind(n) for n in nm]
    k_prec = [kernel_class.precision(n) for n in nm]
    tcs = [kernel_class.tensor_cores(n) for n in nm]
    arch = kernel_class.newest_arch(nm) if not peaks.model else None
    if (peaks.model and peaks.tflops.get("fp32") and not peaks.tflops.get("tf32")) or (arch and arch[0] == 7):
        # a device without TF32 (Volta, Turing; Pascal has no Tensor Cores; where the device is not
        # recorded, one whose newest kernels are volta_* / turing_*): its Tensor Cores take
        # fp16 inputs only, so an fp32 matmul or convolution kernel whose name says neither runs on
        # the SIMT units (the V100's cudnn dgrad_engine<float, ...>: a third of ResNet-50's time)
        # (not the kernels of a matmul or convolution that multiply no matrices: _NOT_MATRIX)
        tcs = [
            False if tc is None and pr == "fp32" and kd in ("gemm", "conv") and not _NOT_MATRIX.search(n) else tc
            for tc, pr, kd, n in zip(tcs, k_prec, k_kind, nm)
        ]
    tc_code = np.array([{True: 2, False: 1, None: 0}[tc] for tc in tcs], np.int8)[inv]
    fam_inv = kernel_class.follow_split_k(tc_code, nm, inv, np.asarray(c["lane"])[kernels])
    # a GEMM kernel a convolution launched is convolution work (cuDNN runs convolutions as
    # volta_sgemm, implicit GEMM or FFT gcgemm kernels): a matmul's advice does not apply to it.
    # Asked of the GEMM-named kernels only (their launching ops found where shapes were not)
    by_conv = np.zeros(len(kernels), np.int64)
    gemm_named = np.array([k == "gemm" for k in k_kind], bool)[inv] if len(kernels) else np.zeros(0, bool)
    gk = np.flatnonzero(gemm_named)
    if len(gk):
        by_conv[gk] = conv_launched(trace, kernels[gk], parent[gk] if recorded else None)
    # an op's kernels: their total time (shares) and Tensor-Core verdict together
    has_op = np.array([p in work for p in parent.tolist()], bool) if work else np.zeros(len(kernels), bool)
    op_ids, op_inv = np.unique(np.where(has_op, parent, -1), return_inverse=True)
    op_dur = np.bincount(op_inv, weights=dur, minlength=len(op_ids))
    op_n = np.bincount(op_inv, minlength=len(op_ids))
    op_tc = np.zeros(len(op_ids), np.int8)
    np.maximum.at(op_tc, op_inv, tc_code)
    share = np.where(op_dur[op_inv] > 0, dur / np.where(op_dur[op_inv] > 0, op_dur[op_inv], 1), 1.0 / op_n[op_inv])
    w_flops = np.array([work[o].flops if o in work else np.nan for o in op_ids.tolist()])
    w_bytes = np.array([work[o].bytes if o in work else np.nan for o in op_ids.tolist()])
    k_flops = np.where(has_op, w_flops[op_inv] * share, np.nan)
    k_bytes = np.where(has_op, w_bytes[op_inv] * share, np.nan)
    # family of each kernel: (kind, precision, tc, known)
    keys: dict[tuple, int] = {}
    fam = np.empty(len(kernels), np.int64)
    op_key = {}
    # the precision an op's kernels' names say (volta_sgemm: fp32), where its types are not
    # recorded (PyTorch 1.7-1.8's 'Input type': [])
    op_prec: dict[int, str] = {}
    if any(o in work and work[o].precision is None for o in op_ids.tolist()):
        op_prec = {int(j): p for j, x in zip(op_inv.tolist(), inv.tolist()) if (p := k_prec[x])}
    for j, o in enumerate(op_ids.tolist()):
        if o in work:
            w = work[o]
            wp = w.precision or op_prec.get(j)
            prec = "tf32" if wp == "fp32" and op_tc[j] == 2 and w.kind in FLOP_KINDS else wp
            op_key[j] = keys.setdefault((w.kind, prec, int(op_tc[j]), True), len(keys))
    uk = np.flatnonzero(~has_op)
    if len(uk):
        combo, cinv = np.unique((fam_inv[uk] * 3 + tc_code[uk]) * 2 + by_conv[uk], return_inverse=True)
        ck = np.array(
            [
                keys.setdefault((_kind_of(k_kind[x // 6], x % 2), k_prec[x // 6], x // 2 % 3, False), len(keys))
                for x in combo.tolist()
            ],
            np.int64,
        )
        fam[uk] = ck[cinv]
    kk = np.flatnonzero(has_op)
    if len(kk):
        op_fam = np.array([op_key.get(j, -1) for j in range(len(op_ids))], np.int64)
        fam[kk] = op_fam[op_inv[kk]]
    families = _families(trace, keys, fam, kernels, dur, k_flops, k_bytes, parent, has_op, peaks)
    row_of = np.zeros(max(len(keys), 1), np.int64)  # family id -> its row in the sorted families
    for r, f in enumerate(families):
        row_of[f.pop("_id")] = r
    known_ops = [o for o in ops.tolist() if o in work]
    top_unknown = _unknown_ops(trace, ops, work, parent, has_op, dur)
    n_unknown_k = int((~has_op).sum())
    # a kernel whose launch call is not on record (it ran from a launch before the capture began)
    # has no op at all: said apart from the ops whose shapes or rule fall short
    orphan = ~has_op & ~_launched(trace, kernels)
    eff = Efficiency(
        peaks,
        families,
        ops={
            "with_work": len(known_ops),
            "with_shapes": len(got),
            "flops": float(sum(work[o].flops for o in known_ops)),
            "unknown": int(len(ops) - len(known_ops)),
            "unknown_names": top_unknown,
            "unknown_kernels": n_unknown_k,
            "unknown_time_ns": int(dur[~has_op].sum()),
            "unknown_no_launch_kernels": int(orphan.sum()),
            "unknown_no_launch_ns": int(dur[orphan].sum()),
            "kernels": int(len(kernels)),
            "shapes_recorded": bool(got),
            # the kernels' ops with a work rule (only theirs are read for shapes): with none, the
            # work is unknown for want of a rule, not of shapes (HTA's triton_example: an Inductor op)
            "ruled_ops": int(len(ruled_ops)),
            "in_measured_steps": in_steps,
        },
        kernel=kernels,
        kernel_op=np.where(has_op, parent, -1),
        kernel_flops=k_flops,
        kernel_bytes=k_bytes,
        kernel_family=row_of[fam] if len(fam) else fam,
        op_shape={o: w.shape for o, w in work.items() if w.shape is not None},
    )
    if steps and any(w.flops > 0 for w in work.values()):  # MFU needs model FLOPs (shapes of matmuls...)
        flop_kind = np.array([k[0] in FLOP_KINDS for k in keys], bool)  # by family id (keys in id order)
        eff.steps = _steps(trace, kernels, k_flops, steps, peaks, flop_kind[fam] & ~has_op)
    return eff


def _in_measured_steps(trace: Trace, kernels: np.ndarray, steps: list[dict]) -> np.ndarray:
    """Per kernel: does it start inside a measured step's GPU window on its rank (a warm-up
    step's only where no step is measured)? The families describe the steady state: the warm-up's
    autotuning and its GPU tail (pp_gpu: 1,661 kernels, 338 ms, running before the first measured
    step from launches before the capture) are not the workload's mix."""
    measured = [s for s in steps if not s.get("warmup")] or steps
    rank_of = trace.lane_rank_array()[np.asarray(trace.columns["lane"])[kernels]]
    start = np.asarray(trace.columns["start"])[kernels].astype(np.int64)
    keep = np.zeros(len(kernels), bool)
    for r in {s["rank"] for s in measured}:
        w = sorted((int(s["start_ns"]), int(s["end_ns"])) for s in measured if s["rank"] == r)
        ws, we = np.array([x[0] for x in w], np.int64), np.array([x[1] for x in w], np.int64)
        mine = np.flatnonzero(rank_of == r)
        k = np.searchsorted(ws, start[mine], side="right") - 1
        ok = k >= 0
        ok[ok] = start[mine][ok] < we[k[ok]]
        keep[mine[ok]] = True
    return keep


def _families(trace, keys, fam, kernels, dur, k_flops, k_bytes, parent, has_op, peaks: Peaks) -> list[dict]:
    n = len(keys)
    time_ns = np.bincount(fam, weights=dur, minlength=n)
    count = np.bincount(fam, minlength=n)
    flops = np.bincount(fam, weights=np.nan_to_num(k_flops), minlength=n)
    byts = np.bincount(fam, weights=np.nan_to_num(k_bytes), minlength=n).astype(np.float64)
    byts[np.bincount(fam, weights=has_op & np.isnan(k_bytes), minlength=n) > 0] = np.nan
    names = np.asarray(trace.columns["name"])[kernels]
    out = []
    for (kind, prec, tc, known), f in keys.items():
        m = fam == f
        t = float(time_ns[f])
        fl, by = (float(flops[f]), None if np.isnan(byts[f]) else float(byts[f])) if known else (None, None)
        tcb = {2: True, 1: False, 0: None}[tc]
        label = (
            kind
            + (f" {prec}" if prec else "")
            + {2: ", Tensor Cores", 1: ", no Tensor Cores (SIMT)", 0: ""}[tc]
            + ("" if known else " (work unknown)")
        )
        top = np.bincount(names[m], weights=dur[m]) if m.any() else np.zeros(0)
        tops = [trace.names[int(i)] for i in np.argsort(-top, kind="stable")[:3] if top[i] > 0]
        row: dict[str, Any]
        row = {
            "name": label,
            "kind": kind,
            "kernels": int(count[f]),
            "ops": int(len(_uniq(parent[m & has_op]))),
            "flops": fl,
            "bytes": by,
            "time_ns": int(round(t)),
            "tflops": None,
            "gbps": None,
            "intensity": None,
            "peak_tflops": None,
            "pct_of_peak": None,
            "pct_of_bandwidth": None,
            "precision": prec,
            "tensor_cores": tcb,
            "bound": None,
            "top_kernels": tops,
            "_id": f,
        }
        if fl is not None and t > 0:  # bytes None too where an op's types are not on record (flops._bytes)
            row["tflops"] = fl / t / 1e3  # FLOP/ns = GFLOP/s
            roof = _roof(peaks, kind, prec, tcb, fl)
            if roof:
                row["peak_tflops"] = roof
                row["pct_of_peak"] = 100.0 * row["tflops"] / roof
        if fl is not None and by is not None and t > 0:
            row["gbps"] = by / t  # B/ns = GB/s
            row["intensity"] = fl / by if by > 0 else None
            if peaks.gbps:
                row["pct_of_bandwidth"] = 100.0 * row["gbps"] / peaks.gbps
            if fl == 0:
                row["bound"] = "memory"
            elif roof and peaks.gbps and by > 0:
                row["bound"] = "compute" if fl / by >= roof * 1e3 / peaks.gbps else "memory"
        out.append(row)
    out.sort(key=lambda r: (-r["time_ns"], r["name"]))
    return out


def _roof(peaks: Peaks, kind: str, prec: str | None, tc: bool | None, flops: float) -> float | None:
    """The compute roof of a family: its precision's Tensor-Core peak, the fp32 SIMT peak for fp32
    without Tensor Cores; None for bytes-only families."""
    if not flops:
        return None
    if prec == "fp32":
        return peaks.peak("tf32" if tc is True else "fp32")
    if prec in ("bf16", "fp16", "16-bit", "fp8") and tc is False:
        return peaks.peak("fp32")
    return peaks.peak(prec)


def step_gpu_time_ns(s: dict) -> int:
    """An analysis step dict's GPU time: its window and the GPU idle around it that belongs to
    the step (StepBreakdown.gpu_time_ns, the denominator of the rank lines' shares)."""
    return s["end_ns"] - s["start_ns"] + (s.get("idle_before_ns") or 0) + (s.get("idle_after_ns") or 0)


def _steps(trace: Trace, kernels, k_flops, steps: list[dict], peaks: Peaks, flop_unknown) -> list[dict]:
    """Model FLOPs per rank and step: the kernels' shares that start in the step's GPU window,
    over the step's GPU time: the window and the GPU idle around it that belongs to the step (a host
    stalled before the step's work is part of the step's time: MFU is the throughput of the run,
    not of its busy stretches; stall_on's 29.7 ms steps are 4 ms windows). flop_unknown: matmul,
    conv or attention kernels whose work is unknown (MFU is then a floor)."""
    c = trace.columns
    rank_of = trace.lane_rank_array()[np.asarray(c["lane"])[kernels]]
    start = np.asarray(c["start"])[kernels]
    fl = np.nan_to_num(k_flops)
    known = ~np.isnan(k_flops)
    ref_prec, ref = peaks.mfu_reference
    out = []
    for s in steps:
        m = (rank_of == s["rank"]) & (start >= s["start_ns"]) & (start < s["end_ns"])
        t = step_gpu_time_ns(s)
        f = float(fl[m].sum())
        out.append(
            {
                "rank": s["rank"],
                "step": s["step"],
                "warmup": bool(s.get("warmup")),
                "time_ns": int(t),
                "flops": f,
                "kernels_with_work": int((m & known).sum()),
                "kernels": int(m.sum()),
                "tflops": f / t / 1e3 if t > 0 else None,
                "mfu": f / t / 1e3 / ref if t > 0 and ref else None,
                "mfu_of": ref_prec,
                "flop_kernels_unknown": int((m & flop_unknown).sum()),
            }
        )
    return out


def _unknown_ops(trace: Trace, ops: np.ndarray, work: dict, parent: np.ndarray, has_op: np.ndarray, dur) -> list:
    """The launching ops whose work is unknown, by name: how many and their kernels' time (ms),
    the five that launched the most kernel time first (not the most ops: HTA's trace_diff test
    listed aten::nan_to_num's 65 ops while torch.compile's CompiledFunctionBackward, a few ops a
    step, launched a third of its compute-kernel time)."""
    c = trace.columns
    unknown = ops[~np.isin(ops, np.fromiter(work, np.int64, len(work)))]
    if not len(unknown):
        return []
    names = np.asarray(c["name"])[unknown]
    un_names, un_inv, un_n = np.unique(names, return_inverse=True, return_counts=True)
    k = np.flatnonzero(~has_op & (parent >= 0))
    at = np.searchsorted(unknown, parent[k])  # (ops and unknown are sorted)
    ok = (at < len(unknown)) & (unknown[np.minimum(at, len(unknown) - 1)] == parent[k])
    ns = np.bincount(un_inv[at[ok]], weights=np.asarray(dur)[k[ok]], minlength=len(un_names))
    order = np.lexsort((-un_n, -ns))[:5]
    return [
        {"name": trace.names[int(un_names[i])], "ops": int(un_n[i]), "ms": round(float(ns[i]) / 1e6, 3)}
        for i in order.tolist()
    ]
