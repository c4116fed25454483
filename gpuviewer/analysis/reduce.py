"""The cross-rank reduce: the ranks' maps (rankmap.RankPart) -> the analysis, with no events.

Steps: the job's warm-up (a first step slow on every rank), collectives matched across ranks
(the n-th collective of a group in a step), each rank's wait split from its transfer, the wait
each rank caused, the per-rank findings settled (their time lost on the critical path needs the
waits) and merged across ranks, late ranks, pipeline, imbalance, then findings nested under
their causes and ranked. analyze(trace) in findings.py is this over map_rank of every rank; the
Dask driver (gpuviewer/scale) is this over map_rank of every file's ranks, after align_parts
put the hosts on one clock.
"""

from __future__ import annotations

import copy
import dataclasses

from ..model.plain import plain
from . import rules as R
from .breakdown import RankBreakdown, set_caused, split_wait
from .collectives import Collectives, alone_summary, match_arrivals, world_of
from .links import slow_links
from .merge import (
    attach,
    merge_persistent,
    merge_ranks,
    order_key,
    rank_json,
    steps_json,
    straggler_finding,
    thin_data,
    warmup_finding,
)
from .pipeline import comm_nouns
from .rankmap import RankPart
from .results import Analysis, Finding
from .stragglers import late_ranks


def reduce(
    parts: list[RankPart],
    *,
    hosts: dict[int, str | None] | None = None,
    alignment: dict | None = None,
    extra_findings: list[dict] | None = None,
    comm: dict | None = None,
    topology: tuple | None = None,
) -> Analysis:
    """parts: one per rank (any order). hosts: rank -> host; alignment: how their clocks were
    put on one axis (a late rank across unaligned hosts is said to be uncertain). extra_findings
    and comm: what a topology adds (findings.analyze); topology: (Topology, rank -> GPU names),
    the links collective bandwidth is compared with. Returns the Analysis: what `analyze --json`
    prints (to_json), with the matched collectives and breakdowns for the window and summaries."""
    parts = sorted(parts, key=lambda p: p.rank)
    by_rank = {p.rank: p for p in parts}
    rbs = [
        RankBreakdown(
            p.rank,
            [dataclasses.replace(s) for s in p.steps],
            n_ops=p.n_ops,
            unplaced=getattr(p, "unplaced", 0),
            unplaced_kernels=getattr(p, "unplaced_kernels", True),
            host_ops_recorded=getattr(p, "host_ops_recorded", True),
            host_longest_call=getattr(p, "host_longest_call", None),
        )
        for p in parts
    ]  # (getattr: parts pickled before these fields existed)
    # warm-up is a property of the job: a first step slow on every rank
    keep_warm = len(rbs) < 2 or all(rb.steps and rb.steps[0].warmup for rb in rbs if rb.steps)
    if not keep_warm:
        for rb in rbs:
            for s in rb.steps:
                s.warmup = False
    world = world_of(p.info.get("world_size") for p in parts)
    colls = match_arrivals({p.rank: p.arrivals for p in parts}, [p.rank for p in parts], world)
    split_wait(rbs, colls)
    per_step = colls.per_step()
    set_caused(rbs, per_step)
    per_rank: list[dict] = []
    matched = {r for ins in colls.instances for r in ins.ranks}  # ranks matched with another at a collective
    unsplit = nccl_unsplit(rbs, matched, world)
    # (n, world): a part of the job's ranks, said in the NCCL note of a rank matched with others
    # (a rank matched with none says that none of its peers' arrivals is on record)
    part = (len(rbs), int(world)) if world and world > len(rbs) else None
    for rb, p in zip(rbs, parts):
        # the map's findings as the job's warm-up decided (rankmap computed both answers)
        found = copy.deepcopy(p.rules["warmup"] if keep_warm else p.rules.get("no_warmup", p.rules["warmup"]))
        per_rank += R.RANK_RULES["low_gpu_utilization"](rb, rb.rank in unsplit, part if rb.rank in matched else None)
        per_rank += R.RANK_RULES["unattributed_ops"](rb)
        per_rank += [R.settle(f, rb) for name in R.SETTLED for f in found[name]]
        nouns = comm_nouns(p.pipeline)
        per_rank += [_with_comm_kernels(f, p) for f in R.RANK_RULES["exposed_communication"](rb, nouns)]
        per_rank += found["step_outlier"]
        per_rank += found.get("copy_bound", [])  # (get: parts mapped before the rule existed)
        per_rank += found.get("host_sync", [])
        per_rank += copy.deepcopy(p.memory)
    findings = merge_ranks(per_rank)
    findings += warmup_finding(rbs)
    hosts = hosts if hosts is not None else {p.rank: None for p in parts}
    roots = [straggler_finding(x) for x in late_ranks(by_rank, rbs, colls.collectives_only(), hosts, alignment)]
    facts = {p.rank: p.pipeline for p in parts}
    for rule in R.JOB_RULES.values():
        findings += rule(facts, rbs)
    members: dict[str, set] = {}
    for ins in colls.instances:
        members.setdefault(ins.group, set()).update(ins.ranks)
    findings += slow_links(
        colls.summary(), {g: sorted(v) for g, v in members.items()}, {p.rank: p.info for p in parts}, hosts, topology
    )
    findings += extra_findings or []
    findings = attach(merge_persistent(roots), findings)
    _op_ranges(findings, parts, rbs)
    kept = {p.rank: k for p in parts if (k := (p.info or {}).get("host_events_kept")) is not None}
    for f in findings:
        if f["rule"] == "all_to_all" and set(f["ranks"]) & set(kept):
            # 'no send or receive op' from a host trace the filter left 1% of (HTA's trace_filter)
            f["title"] += "; from host traces sampled or filtered after they were written: an op may have been left out"
    findings = thin_data(findings, rbs, world, kept)
    # no rank marks a step (as the session's note and the savings decide it: the trace has none)
    if any(rb.steps for rb in rbs) and not any(s.step is not None for rb in rbs for s in rb.steps):
        _capture_not_high(findings)
    findings.sort(key=order_key)
    for f in findings:
        f["children"].sort(key=order_key)
    out = plain(
        {
            "ranks": [
                _kept(
                    _unsplit(
                        rank_json(rb, by_rank[rb.rank].kernels),
                        rb.rank in unsplit,
                        part if rb.rank in matched else None,
                    ),
                    by_rank[rb.rank].info,
                )
                for rb in rbs
            ],
            "findings": findings,
            # and those the session holds one member of: what one rank's trace can say of them
            "collectives": colls.summary() + alone_summary({p.rank: p.arrivals for p in parts}),
            "collective_steps": steps_json(per_step),
        }
    )
    return Analysis(
        out["ranks"],
        [Finding.from_json(f) for f in out["findings"]],
        plain(comm),
        out["collectives"],
        out["collective_steps"],
        int(colls.unmatched),
        # the window draws and details each collective kernel (by event index of the
        # trace the parts were mapped from); summaries write the breakdowns and matches
        kernel_collectives=colls.per_kernel(),
        breakdowns=rbs,
        matched=colls,
    )


def _capture_not_high(findings: list[dict]) -> None:
    """A session that marks no steps rates no finding high: its one "step" is the whole capture,
    and one capture does not show that it stands for a training loop's steady state (an audit:
    h100_2gpu_1s's copies, 79% of a 1 s window of a run). Here, so a `--dask` run says the same."""
    for f in findings:
        if f["severity"] == "high":
            f["severity"] = "medium"
        _capture_not_high(f["children"])


def arrivals_rows(colls: Collectives) -> list[tuple]:
    """One row per member kernel of each matched collective: (rank, group, kind, step, order,
    bytes, start_ns, end_ns, wait_ns, transfer_ns, late_rank) — the summary's collectives table,
    as the SQL table has them: step None for one outside every step."""
    rows = []
    for ins in colls.instances + colls.outside:
        waits = ins.waits()
        for k, r in enumerate(ins.ranks):
            w = int(waits[k])
            rows.append(
                (
                    r,
                    ins.group,
                    ins.kind,
                    ins.step_no,
                    ins.order,
                    ins.bytes,
                    int(ins.starts[k]),
                    int(ins.ends[k]),
                    w,
                    max(0, int(ins.ends[k]) - int(ins.starts[k]) - w),
                    ins.late_rank,
                )
            )
    return rows


def _with_comm_kernels(f: dict, p: RankPart) -> dict:
    """Exposed communication's evidence: the collective kernels that took the most of the rank's
    GPU time in the step the finding shows (the map's comm_names), so a click on the finding
    selects the longest kernel of the first of them there. The rule sees the rank's breakdown only."""
    per_name = p.table("comm_names").get(f["step"]) if f["step"] is not None and "comm_names" in p.tables else {}
    top = sorted(((ns, n) for n, ns in per_name.items()), reverse=True)[:3]
    if top:
        # the time of all its kernels in that step (20.1 ms of ddp's 14 all-reduces read as one kernel's)
        where = f"all its kernels in step {f['step']}"
        f["metrics"]["evidence"] = [{"name": n, "ms": round(ns / 1e6, 3), "where": where} for ns, n in top]
    return f


OP_RANGES_A_STEP = 500  # NVTX ranges a step from which their cost is said (an op's each, not a step's few)
PY_CALLS_A_STEP = 1000  # Python calls traced a step from which their tracing's cost is said


def _op_ranges(findings: list[dict], parts, rbs: list[RankBreakdown]) -> None:
    """Where a rank's capture holds an NVTX range for every op (torch.autograd.profiler.emit_nvtx:
    nsys_ddp_big, 3,500 a step), the host-time findings say that their push and pop are in it
    (the same job without them: 19 ms host steps against 24; an audit's finding); so where the
    profiler's Python tracer recorded many calls a step (with_stack: fsdp's rank 1, about 28,000),
    whose tracing is host time too (an audit of the host-bound finding)."""
    measured = {rb.rank: [s.step for s in rb.measured] for rb in rbs}
    for key, floor, rules, said in (
        (
            "nvtx_ranges",
            OP_RANGES_A_STEP,
            ("launch_bound", "pipeline_launch_bound", "host_bound_idle"),
            "NVTX ranges a step on rank {r} (as emit_nvtx does, one for every op), whose push and pop are in "
            "the host's time: profile without them to size this",
        ),
        (
            "python_calls",
            PY_CALLS_A_STEP,
            ("launch_bound", "pipeline_launch_bound"),  # the host's pace, not one long gap (a sleep)
            "Python calls a step on rank {r} (the profiler's Python tracer, as with_stack=True records), whose "
            "tracing is in the host's time: profile without it to size this",
        ),
    ):
        rate = {p.rank: _rate(p.info or {}, key, measured.get(p.rank, [])) for p in parts}
        top = max(rate, key=rate.__getitem__) if rate else None
        if top is None or rate[top] < floor:
            continue
        stack = list(findings)
        while stack:  # (symptoms included: the savings may lift one to the top)
            f = stack.pop()
            stack += f["children"]
            if f["rule"] in rules:
                r = f["ranks"][0] if f["ranks"] and rate.get(f["ranks"][0], 0) >= floor else top
                f["title"] += f"; the capture records {rate[r]:,.0f} " + said.format(r=r)
                f["metrics"][f"{key}_per_step"] = round(rate[r], 1)


def _rate(info: dict, key: str, steps: list) -> float:
    """A rank's NVTX ranges or Python calls a measured step: those beginning in its measured host
    steps, a step; the capture's over its measured steps where the steps are not the host's (a
    rank without step ranges) or a part from before they were counted."""
    per = info.get("in_steps") or {}
    got = [per[str(k)][key] for k in steps if str(k) in per]
    if got and len(got) == len(steps):
        return sum(got) / len(got)
    return info.get(key, 0) / max(1, len(steps))


def nccl_unsplit(rbs: list[RankBreakdown], matched: set[int], world: int | None = None) -> set[int]:
    """The ranks with NCCL kernels none of which was matched with another rank's (one rank's
    trace of a job), and every rank with NCCL kernels where the session holds fewer ranks than
    the job's world size (HTA's trace_filter: 2 of 128; the time after the last of the two arrived
    may be waiting for any of the other 126, not transfer; an audit's finding): their NCCL time is
    not split into waiting and transfer. matched: the ranks matched with another at a collective."""
    part = bool(world and world > len(rbs))
    return {rb.rank for rb in rbs if rb.total("comm_ns") > 0 and (part or rb.rank not in matched)}


def _kept(row: dict, info: dict) -> dict:
    """A rank whose trace was sampled or filtered: the share of its host events it holds, which
    its line says beside the host's shares (model.fmt.utilization_line)."""
    if (k := info.get("host_events_kept")) is not None:
        row["host_events_kept"] = round(k, 4)
    return row


def _unsplit(row: dict, unsplit: bool, partial: tuple[int, int] | None = None) -> dict:
    """Its row says so ("nccl_split": false; "nccl_ranks": [ranks on record, world size] where the
    session holds a part of the job), so its line does not print "NCCL waiting 0%" as if measured
    (model.fmt.utilization_line)."""
    if unsplit:
        row["nccl_split"] = False
        if partial:
            row["nccl_ranks"] = list(partial)
    return row
