"""The analysis of an opened session: the NCCL kernels' arguments fetched from the source files
(io) handed to the analysis (which never reads files). The window, the command line and reports
all analyse through here, so they agree."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from ..model.trace import Trace

if TYPE_CHECKING:
    from ..analysis.results import Analysis


EFFICIENCY_RANKS = 8


def analyze_session(trace: Trace, *, peak_tflops: float | None = None, peak_gbps: float | None = None) -> Analysis:
    """The analysis, each finding with what fixing its cause would save (analysis.savings), and the
    kernels' efficiency where there is something to say (peak_*: the device's roofs, overridden)."""
    a, args = _analyze(trace, savings=False)
    # reading op shapes costs about 0.3 s a rank (their arguments decoded from the files): past
    # EFFICIENCY_RANKS ranks one rank stands for the job here, said in the notes
    rank = None if len(trace.ranks) <= EFFICIENCY_RANKS else min(r.rank for r in trace.ranks)
    eff = efficiency_of(trace, a, rank=rank, peak_tflops=peak_tflops, peak_gbps=peak_gbps)
    a.efficiency = eff.to_json() if eff.has_work else None
    if rank is not None and a.efficiency is not None:
        a.notes.append(
            f"efficiency (TFLOP/s, MFU) measured on rank {rank} of {len(trace.ranks)} ranks; "
            "`gpuviewer stats --report efficiency` measures every rank"
        )
    # the efficiency findings join before the savings: each is a what-if on the same replay
    from ..analysis.efficiency_findings import findings
    from ..analysis.savings import attach_savings

    a.findings.extend(findings(trace, eff, a))
    if a.efficiency is not None:
        from ..analysis.rule_base import drop_tensor_core_hint

        drop_tensor_core_hint(a.all_findings(), a.efficiency.get("families") or [])
    attach_savings(trace, a, args)
    _capture_not_high(trace, a)
    return a


def efficiency_of(
    trace: Trace,
    analysis: Analysis | None = None,
    *,
    rank: int | None = None,
    peak_tflops: float | None = None,
    peak_gbps: float | None = None,
):
    """analysis.efficiency.Efficiency: the ops' shapes read from the sources (io.op_shapes), the
    device's roofs from model.peaks; MFU per step where the analysis' step windows are given."""
    from ..analysis.efficiency import compute, device_memory, device_name, device_props
    from ..io.op_shapes import op_shapes
    from ..model.peaks import lookup, overridden

    peaks = overridden(lookup(device_name(trace), device_memory(trace), device_props(trace)), peak_tflops, peak_gbps)
    steps = None
    if analysis is not None:
        steps = [
            {
                "rank": r["rank"],
                **{k: s.get(k) for k in ("step", "start_ns", "end_ns", "warmup", "idle_before_ns", "idle_after_ns")},
            }
            for r in analysis.ranks
            for s in r.get("steps") or []
            if s.get("end_ns") is not None
        ]
    return compute(trace, op_shapes, peaks, steps, rank)


def measure_for_diff(trace: Trace):
    """What `gpuviewer diff` and the Compare window compare (analysis.diff_tables.measure), and
    the NCCL kernels' arguments it used (the window finds a collective's kernels with them)."""
    from ..analysis.diff_tables import measure
    from ..io.comm_args import collective_args

    args = collective_args(trace)
    return measure(trace, args), args


def analyze_keeping_parts(trace: Trace) -> Analysis:
    """analyze_session, also keeping the ranks' maps in Analysis.parts (`analyze --summary`
    writes them: the same tables a Dask run writes)."""
    return _analyze(trace, keep_parts=True)[0]


def _analyze(trace: Trace, keep_parts: bool = False, savings: bool = True) -> tuple[Analysis, dict]:
    """The map/reduce analysis with the NCCL kernels' and events' arguments from the files, and
    each finding's what-if saving (analysis.savings; savings False: left to the caller), with the
    NCCL arguments."""
    from ..analysis.findings import analyze
    from ..analysis.savings import attach_savings
    from ..io.args import event_args
    from ..io.comm_args import collective_args
    from ..io.mem_args import memop_bytes

    args = collective_args(trace)
    a = analyze(trace, args, event_args, keep_parts=keep_parts, mem_bytes=memop_bytes)
    from ..analysis.advice_jax import for_framework

    for_framework(a, trace)  # JAX's own terms, not PyTorch's
    from ..analysis.advice_cuda import for_plain_cuda

    for_plain_cuda(a, trace)  # CUDA's, for a program that is neither
    a.notes.extend(_partial_notes(trace) + _step_notes(trace) + _rank_notes(trace) + _memory_notes(trace))
    a.warnings = list(trace.warnings)
    if savings:
        attach_savings(trace, a, args)
        _capture_not_high(trace, a)  # the savings rate findings anew
    return a, args


def _capture_not_high(trace: Trace, a: Analysis) -> None:
    """A capture that marks no steps rates no finding high, once the savings (which rate findings
    by what fixing them saves) and the efficiency findings are in; the reduce rates the rules'
    findings so for a `--dask` run, which has neither."""
    if trace.steps or not len(trace) or not trace.ranks:
        return
    for f in a.all_findings():
        if f.severity == "high":
            f.severity = "medium"


def _partial_notes(trace: Trace) -> list[str]:
    """A file that ends early (cut while written or copied) is read up to the cut, and said in a
    reader warning; the findings of what was read come first in the window and the reports, so
    they say it there too: a GPU whose events were written after the cut looks idle."""
    import os

    from ..io.chrome_json import ENDS_EARLY

    cut = [w.split(": ", 1)[0] for w in trace.warnings if ENDS_EARLY in w]
    if not cut:
        return []
    names = ", ".join(os.path.basename(c) for c in cut[:3]) + (f" and {len(cut) - 3} more" if len(cut) > 3 else "")
    return [
        f"read in part: {names} {'ends' if len(cut) == 1 else 'end'} early (see the warnings), so the findings "
        "describe only what was written before the cut: events written after it (often the GPU's, which the "
        "profiler writes last) are missing, and their time reads as idle"
    ]


def _memory_notes(trace: Trace) -> list[str]:
    """What the findings leave out: a memory snapshot or timeline read with the session is drawn
    (the window's memory panel), not analysed; alone it has no GPU work, and "no findings" would
    read as a clean bill of health."""
    import os

    out = []
    for s in trace.snapshots:
        what = "memory snapshot" if s.allocations else "memory timeline"
        many = f"{len(s.allocations):,} allocations, " if s.allocations else ""
        name = os.path.basename(s.source) or "a memory file"
        held = getattr(s, "held_before", 0)
        # a timeline counts what existed before the profile (its time -1 rows) in its totals: its
        # peak is said as a total, with that part (HTA's memory_analysis: 2.87 GiB, 0.31 before)
        peak = (
            f"up to {s.allocated.max() / 2**30:.2f} GiB allocated, {held / 2**30:.2f} GiB already when its record starts"
            if held > 0
            else f"up to {s.allocated.max() / 2**30:.2f} GiB more allocated than when its record starts"
        )
        out.append(
            f"{name}: the {what} is drawn in the window's memory panel "
            f"({many}device {s.device}, {peak}), not analysed: the findings come from a profiler trace of the run "
            "(PyTorch profiler, Nsight Systems, JAX)"
            if len(s.allocated)
            else f"{name}: the {what} holds no allocation"
        )
    return out


def _rank_notes(trace: Trace) -> list[str]:
    """Files that record no rank (no distributedInfo): the rank they are shown as is the reader's
    number, not the job's (HTA's distributed_info_unavailable: 'rank 0' read as the job's rank 0; an
    audit's finding)."""
    unnamed = [
        (os.path.basename(pf["path"]), pf["rank"])
        for pf in trace.metadata.get("per_file") or []
        if "file_rank" in pf and pf["file_rank"] is None and "rank" in pf
    ]
    # said only of a job's files: a one-GPU run records no rank and needs none
    from ..model.categories import is_nccl_name

    collective = any(n.startswith(("nccl:", "c10d::", "gloo:")) or is_nccl_name(n) for n in trace.names)
    if not unnamed or not collective:
        return []
    said = ", ".join(f"{name} as rank {r}" for name, r in unnamed[:4]) + (" ..." if len(unnamed) > 4 else "")
    files = f"{len(unnamed)} files record" if len(unnamed) > 1 else "1 file records"
    return [
        f"ranks: {files} no rank (no distributedInfo) though the job runs collectives, shown by the order read: {said}"
    ]


def _step_notes(trace: Trace) -> list[str]:
    """Where the steps come from when the profiler recorded no ProfilerStep (io/kineto.py), or
    that there are none: then the whole capture is measured as one step, what the findings call
    "the capture"."""
    from ..io.kineto import OPTIMIZER_STEP

    if not trace.steps and len(trace) and trace.ranks:
        return [
            "steps: the trace marks none (no ProfilerStep, Optimizer.step or step range), so the whole capture "
            "is measured as one step, from its first CUDA call or GPU op to the last one's end (what the findings "
            "call the capture); no finding is rated high, as one capture without steps does not show that it stands "
            "for a training loop's steady state"
        ]

    if trace.format != "kineto" or not trace.steps or any(n.startswith("ProfilerStep#") for n in trace.names):
        return []
    if not any(OPTIMIZER_STEP.match(n) for n in trace.names):
        return []
    return [
        "steps: the trace has no ProfilerStep ranges (a capture without the profiler's schedule); each step is "
        "taken from one Optimizer.step's end to the next's, the iteration before the first one left out"
    ]
