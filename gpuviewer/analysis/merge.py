"""Merging and ranking findings (the reduce's last step): the same finding on several ranks
becomes one finding listing them; a root cause (a late rank) carries the findings it explains
(the waiting ranks' exposed communication, slow steps, imbalance) as children; everything is
ranked by the time it cost."""

from __future__ import annotations

import re

import numpy as np

from ..model.fmt import number_list
from ..model.numbered import kept_range
from .breakdown import RankBreakdown
from .rule_base import WHOLE_CAPTURE_IDLE_ADVICE, finding

_RANK_PREFIX = re.compile(r"^Rank (\d+)(:| GPU)")
_SEVERITY = {"high": 0, "medium": 1, "low": 2}
# The figure each per-rank rule's title leads with: a merged finding shows the rank where it is
# worst (and says "the worst"), so the rank named must be the extreme of that figure, not the
# rank that cost most time on the critical path (a waiting rank can cost nothing and be worst).
# (Candidates in order: the first metric every rank's finding has.)
HEADLINE = {
    "low_gpu_utilization": (("utilization",), min),
    "launch_bound": (("launch_idle_share", "idle_fraction"), max),
    "host_bound_idle": (("gap_ms_per_step",), max),
    "exposed_communication": (("exposed_ms_per_step",), max),
    "step_outlier": (("duration_ms",), max),
    "memory_headroom": (("fraction",), max),
    "unattributed_ops": (("ops",), max),
    "copy_bound": (("copy_share",), max),
    "host_sync": (("idle_after_share",), max),
}
# rules.exposed's wait clause claimed the wait was part of the exposed communication, but the
# collectives wait partly while compute runs beside them (their wait can exceed it)


def order_key(f: dict):
    return (-f["impact_ms"], _SEVERITY[f["severity"]], f["rule"], f["ranks"], -1 if f["step"] is None else f["step"])


def rank_json(rb: RankBreakdown, ks: dict) -> dict:
    ks = dict(ks)
    ks.pop("gaps", None)
    # gpu_utilization is the compute share; the rest of the GPU's and the host's time beside it
    return {
        "rank": rb.rank,
        "gpu_utilization": round(rb.gpu_utilization, 4),
        "utilization_breakdown": {k: round(v, 4) for k, v in rb.shares().items()},
        "host_breakdown": {k: round(v, 4) for k, v in rb.host_shares().items()},
        # a part of host_breakdown's idle: the loop's thread waiting for another of its threads
        "host_thread_wait": round(rb.host_thread_wait_share(), 4),
        # all the loop's thread waits on another of its threads (they may work meanwhile)
        "host_loop_wait": round(rb.host_loop_wait_share(), 4),
        # a part of host_breakdown's framework: annotated ranges with no op under them on record
        "host_annotation_only": round(rb.host_annotation_share(), 4),
        # a part of host_breakdown's framework: Python frames alone, no op or call under them
        "host_python_only": round(rb.host_python_share(), 4),
        # a part of host_breakdown's launch, only where there is some: calls allocating or freeing memory
        **({"host_alloc_calls": round(a, 4)} if (a := rb.host_alloc_share()) > 0 else {}),
        # a part of utilization_breakdown's nccl_transfer, only where the rank has such kernels:
        # NCCL kernels matched with no other rank's (their wait not told apart)
        **({"nccl_unmatched": round(u, 4)} if (u := rb.nccl_unmatched_share()) > 0 else {}),
        # said only where none is (nsys_single: no op ranges, only the steps')
        **({} if rb.host_ops_recorded else {"host_ops_recorded": False}),
        # a capture without steps: its launch part's one long call, where it holds much of it
        **(
            {
                "host_longest_call": {
                    "name": rb.host_longest_call[0],
                    "ms": round(rb.host_longest_call[1] / 1e6, 3),
                    "share": round(
                        rb.host_longest_call[1] / max(1, rb.steps[0].host_end_ns - rb.steps[0].host_start_ns), 4
                    ),
                }
            }
            if rb.host_longest_call
            else {}
        ),
        "steps": [s.as_dict() for s in rb.steps],
        "kernels": ks,
    }


def steps_json(per_step: dict[int, dict]) -> list[dict]:
    out = []
    for step, d in sorted(per_step.items()):
        late = max(d["caused"], key=d["caused"].get)
        out.append(
            {
                "step": step,
                "collectives": d["n"],
                "wait_ms": {str(r): round(v / 1e6, 3) for r, v in d["wait"].items()},
                "late_rank": late if d["caused"][late] > 0 else None,
                "wait_caused_ms": {str(r): round(v / 1e6, 3) for r, v in d["caused"].items()},
            }
        )
    return out


def _worst(fs: list[dict]) -> dict:
    names, pick = HEADLINE.get(fs[0]["rule"], ((), max))
    name = next((n for n in names if all(isinstance(f["metrics"].get(n), (int, float)) for f in fs)), None)
    if name is None:
        return max(fs, key=lambda f: f["impact_ms"])
    best = pick(f["metrics"][name] for f in fs)
    return max((f for f in fs if f["metrics"][name] == best), key=lambda f: f["impact_ms"])


def _held_by_nccl(fs: list[dict], worst: dict) -> str:
    """Of a launch-bound finding over several ranks: the other ranks whose launch gaps NCCL kernels
    mostly ran in, said (gpu_straggler's rank 0: its GPU in all-reduces waiting for rank 1 through
    72% of its gaps; 'Ranks 0 and 1: launch-bound' read as both GPUs idle; an audit's finding)."""
    if worst["rule"] != "launch_bound":
        return ""
    held = [
        (f["ranks"][0], share)
        for f in fs
        if f is not worst and (share := f["metrics"].get("launch_gap_nccl_share") or 0.0) >= 0.5
    ]
    return "".join(
        f"; on rank {r}, NCCL kernels ran in {share:.0%} of those gaps (its GPU held by collectives there, not idle)"
        for r, share in sorted(held)
    )


def _other_causes(fs: list[dict], worst: dict) -> str:
    """Of a slow step over several ranks: each other rank whose step was slow for another cause,
    said (nsys_ddp's 'Ranks 0 and 1: step 6 took 70 ms: clock_nanosleep 50.3 ms' is rank 1's; rank
    0's step 6 ran as long from its host's start to its GPU work's end, its all-reduce waiting for
    rank 1, while its host step took 17 ms; an audit)."""
    if worst["rule"] != "step_outlier":
        return ""
    lead = ((worst["metrics"].get("causes") or [{}])[0]).get("name")
    out = []
    for f in sorted(fs, key=lambda f: f["ranks"][0]):
        c = (f["metrics"].get("causes") or [{}])[0]
        if f is worst or not c.get("name") or c.get("name") == lead:
            continue
        what = f"{c['name']} {c.get('excess_ms', 0.0):,.1f} ms over its mean in the other steps"
        if c.get("category") == "communication":
            what += " (a collective: its wait for the other ranks in it)"
        out.append(f"; on rank {f['ranks'][0]}, {f['metrics'].get('duration_text', '')}: {what}")
    return "".join(out)


def _other_kind(fs: list[dict], worst: dict) -> str:
    """Of a launch-bound finding over several ranks: the ranks of the family's other kind, named
    (pp's rank 0 is host-bound between launches, gaps of 0.1-1 ms, its rank 1 launch-bound, and
    one title said both were the latter; a review)."""
    if worst["rule"] != "launch_bound":
        return ""
    paced = bool(worst["metrics"].get("host_paced"))
    other = sorted(f["ranks"][0] for f in fs if bool(f["metrics"].get("host_paced")) != paced)
    if not other:
        return ""
    kind = "launch-bound (gaps under 100 µs)" if paced else "host-bound between launches (gaps of 100 µs to 1 ms)"
    return f"; rank{'s' if len(other) > 1 else ''} {rank_list(other)} {kind} instead"


def merge_ranks(found: list[dict]) -> list[dict]:
    """One finding per (rule, step) listing its ranks; the worst rank's numbers (by the figure
    its title leads with, HEADLINE) in the title and every rank's in metrics.per_rank; the
    impact summed."""
    groups: dict[tuple, list[dict]] = {}
    for f in found:
        # step is a finding's identity only for slow steps; elsewhere it is just its example
        key = (
            f["rule"],
            f["step"] if f["rule"] == "step_outlier" else None,
            f["metrics"].get("device") if f["rule"] == "memory_headroom" else None,
        )
        groups.setdefault(key, []).append(f)
    out = []
    for fs in groups.values():
        if len(fs) == 1:
            out.append(fs[0])
            continue
        worst = _worst(fs)
        m = dict(worst)
        ranks = sorted(r for f in fs for r in f["ranks"])
        who = rank_list(ranks)
        body = _RANK_PREFIX.sub("", worst["title"]).lstrip(": ")
        if worst["rule"] == "memory_headroom":
            body = "GPU " + body
        m["title"] = (
            f"Ranks {who}: {body} (rank {worst['ranks'][0]}, the worst)"
            + _held_by_nccl(fs, worst)
            + _other_kind(fs, worst)
            + _other_causes(fs, worst)
        )
        m["ranks"] = [worst["ranks"][0]] + [r for r in ranks if r != worst["ranks"][0]]
        m["metrics"] = dict(worst["metrics"], per_rank={str(f["ranks"][0]): f["metrics"] for f in fs})
        m["impact_ms"] = round(sum(f["impact_ms"] for f in fs), 3)
        m["severity"] = min((f["severity"] for f in fs), key=_SEVERITY.__getitem__)
        m["start_ns"] = min(f["start_ns"] for f in fs)
        m["end_ns"] = max(f["end_ns"] for f in fs)
        out.append(m)
    return out


def warmup_finding(rbs: list[RankBreakdown]) -> list[dict]:
    w = [(rb, s) for rb in rbs for s in rb.steps if s.warmup]
    if not w:
        return []
    step = w[0][1].step
    ms = max(s.window_ns for _, s in w)
    med = [x.window_ns for rb in rbs for x in rb.measured]
    med_ms = sorted(med)[len(med) // 2] if med else 0
    said = warmup_text(ms, med_ms)
    back = [(rb, s) for rb, s in w if s.backlog_warm]
    if back:  # (breakdown._mark_backlog) work of the step before, not a slow first step
        rb, s = max(back, key=lambda x: x[1].backlog_ns)  # one rank's figures: the most held
        who = f"rank {rb.rank}: " if len(w) > 1 else ""
        title = (
            f"Step {step} starts while GPU work launched before the capture still runs ({who}{s.backlog_ops:,} ops, "
            f"{s.backlog_ns / 1e6:.1f} ms of its {s.window_ns / 1e6:.1f} ms GPU window): shown, but left out of "
            "utilization, outliers, savings and late-rank analysis"
        )
    else:
        title = f"Step {step} is warm-up ({said}): shown, but left out of utilization, outliers and late-rank analysis"
    return [
        finding(
            "warmup",
            "low",
            title,
            [rb.rank for rb, _ in w],
            step,
            min(s.start_ns for _, s in w),
            max(s.end_ns for _, s in w),
            {"duration_ms": round(ms / 1e6, 3), "median_ms": round(med_ms / 1e6, 3), "duration_text": said},
        )
    ]


def warmup_text(ms: float, med_ms: float) -> str:
    return f"{ms / 1e6:.0f} ms" + (f", {ms / med_ms:.0f}x the median step" if med_ms else "")


def straggler_finding(x: dict) -> dict:
    steps = x["steps"]
    metrics = {
        k: x[k]
        for k in (
            "late_rank",
            "late_group",
            "steps",
            "kind",
            "wait_caused_ms",
            "longest_wait_ms",
            "wait_caused_ms_per_step",
            "cause",
            "excess",
            "lateness_parts_ms",
            "host_work_excess_ms",
            "lag_steps",
            "explained_named",
            "excess_over_usual_ms",
            "usual_ms",
            "usual_ms_per_step",
            "next_step",
            "next_step_wait_ms",
            "usual_from_steps",
            "wait_caused_ms_usual",
            "evidence",
            "named_op",
            "others_wait_ms",
            "wait_caused_ms_each",
            "excess_over_usual_ms_each",
            "wait_caused_ms_each_per_step",
            "waiting_host_sync_ms",
        )
        if k in x
    }
    metrics["waiting_ranks"] = x["waiting"]
    sev = "high" if x["kind"] == "episodic" or len(steps) > 1 else "medium"
    w0, w1 = x["window"]
    late = [x["late_rank"]] + [r for r in x.get("late_group", []) if r != x["late_rank"]]
    return finding(
        "straggler",
        sev,
        x["title"],
        late + x["waiting"],
        steps[0] if x["kind"] == "episodic" else None,
        w0,
        w1,
        metrics,
        impact_ns=x["impact_ns"],
    )


def _group(f: dict) -> tuple:
    """A straggler finding's late ranks: one, or several arriving together."""
    m = f["metrics"]
    return tuple(m.get("late_group") or [m["late_rank"]])


def _late_text(f: dict) -> str:
    g = _group(f)
    return f"rank {g[0]}" if len(g) == 1 else f"ranks {rank_list(list(g))} together"


def merge_persistent(roots: list[dict]) -> list[dict]:
    """Ranks that take turns arriving last (each late in a good share of the steps) are one
    lateness of the job: one finding listing who was late when, led by the rank that cost most
    (with any stall of its own as a child)."""
    pers = [f for f in roots if f["metrics"]["kind"] == "persistent"]
    # the lead's explanation with its rank and steps named (stragglers._persistent), for here only
    named = {id(f): f["metrics"].pop("explained_named", "") for f in pers}
    if len(pers) < 2:
        return roots
    # led by the rank that cost most in its late steps that hold no stall and follow none: a
    # stall is its own finding (ddp_long: rank 1 led by the 80 ms its sleep's steps caused, where
    # rank 0, late in four clean steps, caused 111 ms against rank 1's 54; an audit's finding)
    pers.sort(key=lambda f: -f["metrics"]["wait_caused_ms_usual"])
    lead = pers[0]
    m = lead["metrics"]
    m["late_ranks"] = {str(r): f["metrics"]["steps"] for f in pers for r in _group(f)}
    m["wait_caused_ms"] = round(sum(f["metrics"]["wait_caused_ms"] for f in pers), 3)
    m["wait_caused_ms_per_step"] = {k: v for f in pers for k, v in f["metrics"]["wait_caused_ms_per_step"].items()}
    who = " and ".join(f"{_late_text(f)} in steps {number_list(f['metrics']['steps'])}" for f in pers)
    # the median over every step of the merged lateness of what each waiting rank waited (not one
    # late rank's figure: ddp_long's 28.9 was rank 1's, against 28.1 over its 8 steps)
    each = round(
        float(
            np.median(
                [
                    v / max(1, len(f["metrics"].get("waiting_ranks") or []))
                    for f in pers
                    for v in f["metrics"]["wait_caused_ms_per_step"].values()
                ]
            )
        ),
        3,
    )
    m["wait_caused_ms_each_per_step"] = each  # the figure the title gives
    # the lead's explanation, with several late ranks and their steps listed before it, names the
    # rank and the steps its figures are of ('its host starts the steps' read as every rank's
    # steps; ddp_long's 'those steps' as 6-9, whose lag grew 5.2 ms a step, where the 1.6 ms was
    # steps 8 and 9's)
    rest = named[id(lead)]
    # the steps that hold a stall or follow one: their waits are the stall's finding's too
    usual = {str(s) for f in pers for s in (f["metrics"].get("usual_from_steps") or f["metrics"]["steps"])}
    stalled = sorted(int(k) for k in m["wait_caused_ms_per_step"] if k not in usual)
    of_stall = sum(v for k, v in m["wait_caused_ms_per_step"].items() if k not in usual)
    if stalled:
        m["wait_caused_ms_stall_steps"] = {"steps": stalled, "ms": round(of_stall, 3)}
    beside = (
        f", {of_stall:.0f} ms of it in step{'s' if len(stalled) > 1 else ''} {number_list(stalled)}, which hold a "
        "stall or follow one"
        if stalled and of_stall >= 0.5
        else ""
    )
    lead["title"] = (
        f"The ranks take turns arriving last at the collectives ({who}): the others wait "
        f"{each:.1f} ms a step each ({m['wait_caused_ms']:.0f} ms in all{beside})" + rest
    )
    lead["ranks"] = sorted({r for f in pers for r in f["ranks"]}, key=lambda r: (r != m["late_rank"], r))
    for f in pers[1:]:
        lead["children"] += f["children"]
    lead["impact_ms"] = round(sum(f["impact_ms"] for f in pers), 3)
    lead["start_ns"] = min(f["start_ns"] for f in pers)
    lead["end_ns"] = max(f["end_ns"] for f in pers)
    return [f for f in roots if f not in pers[1:]]


def attach(roots: list[dict], found: list[dict]) -> list[dict]:
    """Findings a cause explains become its children: under a late rank, the waiting ranks'
    exposed communication (when waiting is most of it), slow steps at its steps and compute
    imbalance (its own extra work, or the waiting ranks' kernels slowed by the collectives
    spinning beside them, SM contention); under a pipeline bubble, the send/recv exposure; under launch-bound,
    host-bound idle or copy-bound, the low utilization of the same ranks."""

    def steps_of(root):
        s = set(root["metrics"]["steps"])
        for c in root["children"]:
            s |= set(c["metrics"].get("steps", []))
        return s

    pipeline = next((f for f in found if f["rule"] == "pipeline_bubble"), None)
    # what keeps the GPU from computing: its time is then idle (launches, the host) or copies
    idle_causes = [f for f in found if f["rule"] in ("launch_bound", "host_bound_idle", "copy_bound")]
    top = list(roots)
    for f in found:
        parent = None
        for root in sorted(roots, key=lambda r: -r["impact_ms"]):
            late = set(_group(root))
            if (
                f["rule"] == "exposed_communication"
                and not late & set(f["ranks"])
                and f["metrics"]["wait_ms_per_step"] >= 0.5 * f["metrics"]["exposed_ms_per_step"]
            ):
                parent = root
            elif f["rule"] == "step_outlier" and f["step"] in steps_of(root):
                # a slow step is the symptom of the stall in that step, where there is one
                parent = next(
                    (
                        x
                        for x in roots
                        if x["metrics"]["kind"] == "episodic"
                        and x["step"] == f["step"]
                        and set(_group(x)) <= set(f["ranks"])
                    ),
                    root,
                )
            elif f["rule"] == "load_imbalance":
                parent = root
            elif (
                f["rule"] == "sm_contention"
                and f["metrics"].get("heaviest_rank") not in late
                and (f["metrics"].get("wait_ms_per_step") or 0.0) > 0
            ):
                # the waiting rank's kernels slowed by its collectives spinning beside them: a
                # symptom of the wait for the late rank, fixed with it (nsys_ddp's rank 0, rated
                # medium above the straggler while the step waits for rank 1 anyway; an audit)
                parent = root
            elif (
                f["rule"] == "low_gpu_utilization"
                and f["metrics"].get("mostly") == "nccl_wait"
                and set(f["ranks"]) - late
                and root["metrics"]["kind"] == "persistent"
            ):
                # its worst rank's GPU mostly waits in collectives for the late rank
                # (gpu_straggler's rank 0, NCCL waiting 74%, was filed under launch-bound)
                parent = root
            elif (
                f["rule"] in ("low_gpu_utilization", "launch_bound", "host_bound_idle")
                and root["metrics"]["cause"] in ("host", "input")
                and set(f["ranks"]) <= late
                and root["metrics"]["kind"] == "persistent"
            ):
                parent = root  # the late rank's own GPU starves for the same host
            if parent is not None:
                break
        if parent is None and f["rule"] in ("exposed_communication", "load_imbalance") and pipeline is not None:
            parent = pipeline
        if parent is None and f["rule"] == "low_gpu_utilization":
            parent = next(
                (
                    c
                    for c in idle_causes
                    if set(f["ranks"]) <= set(c["ranks"]) and c["impact_ms"] >= 0.5 * f["impact_ms"]
                ),
                None,
            )
        if parent is None:
            top.append(f)
        else:
            if f["rule"] == "step_outlier" and parent["rule"] == "straggler":
                _waited_for(f, parent)
            if f["rule"] == "low_gpu_utilization" and parent["metrics"].get("whole_capture"):
                f["advice"] = WHOLE_CAPTURE_IDLE_ADVICE
            parent["children"].append(f)
    return top


def _waited_for(f: dict, root: dict) -> None:
    """A waiting rank's slow step whose extra time is its collectives, under the late rank that
    held it back there: the collectives' time is said as waiting for that rank (nsys_ddp_big's
    rank 1 spans 41 ms in step 1, 17.1 ms of it in a broadcast waiting for rank 0, late from its
    warm-up: not slow communication)."""
    m = root["metrics"]
    waited = (m.get("others_wait_ms") or {}).get(str(f["ranks"][0]))
    causes = f["metrics"].get("causes") or []
    excess = (f["metrics"].get("duration_ms") or 0.0) - (f["metrics"].get("median_ms") or 0.0)
    if (
        set(f["ranks"]) & set(_group(root))
        or not waited
        or not causes
        or causes[0].get("category") != "communication"
        or waited < 0.5 * excess
    ):
        return
    late = rank_list(list(_group(root)))
    who = f"rank {late}" if len(_group(root)) == 1 else f"ranks {late}"
    f["title"] += f"; its collectives waited {waited:.1f} ms in this step for {who}, late there (the cause above)"
    f["metrics"]["waited_for"] = {"ranks": list(_group(root)), "ms": waited}


THIN_STEPS = 4  # fewer measured steps than this: a median or share over them says little
# rules whose figures are medians or shares over the measured steps
_PER_STEP_RULES = (
    "low_gpu_utilization",
    "host_bound_idle",
    "launch_bound",
    "exposed_communication",
    "straggler",
    "load_imbalance",
    "pipeline_bubble",
)
THIN_ADVICE = (
    "Findings from a part of the job, or from few steps, may not hold for the rest. Profile "
    "every rank (or at least one per host and the slowest), and at least four steady steps "
    "after warm-up (torch.profiler schedule active >= 4; nsys over several NVTX steps)."
)


def _among_these(findings: list[dict], n: int, world: int) -> None:
    """A wait for other ranks measured among the session's ranks only is at least that: said so
    where the job has more (trace_filter: 'collectives wait a median 15.9 ms a step for other
    ranks' with 2 of 128 ranks on record, beside a rank line saying waiting and transfer are not
    told apart there; an audit)."""
    for f in findings:
        if f["rule"] == "exposed_communication" and " for other ranks" in f["title"]:
            f["title"] = f["title"].replace(
                " for other ranks", f" for the other ranks on record ({n} of the job's {world}: at least that)", 1
            )
        _among_these(f["children"], n, world)


def thin_data(
    findings: list[dict], rbs: list[RankBreakdown], world_size: int | None, kept: dict[int, float] | None = None
) -> list[dict]:
    """Say when the data is thin: the session holds fewer ranks than the job's world size (as
    the trace records it), fewer than THIN_STEPS measured steps, or ranks whose traces were
    sampled or filtered (kept: rank -> the share of its host events it holds); findings whose
    figures are taken over steps say from how many (" (from 3 steps)")."""
    n_steps = {rb.rank: sum(1 for s in rb.measured if s.step is not None) for rb in rbs}

    def note(f: dict) -> None:
        n = min((n_steps[r] for r in f["ranks"] if r in n_steps), default=0)
        if f["rule"] in _PER_STEP_RULES and 0 < n < THIN_STEPS:
            f["metrics"]["steps_measured"] = n
            if f"of {n} steps" not in f["title"]:
                f["title"] += f" (from {n} step{'s' if n > 1 else ''})"
        for c in f["children"]:
            note(c)

    for f in findings:
        note(f)
    said = []
    ranks = [rb.rank for rb in rbs]
    if world_size and world_size > len(rbs):
        n = len(rbs)
        _among_these(findings, n, world_size)
        said.append(
            f"the session holds {n} of the job's {world_size} ranks (the world size its traces record)"
            + (
                ": no other rank's arrivals at the collectives, so waits are not told apart from transfers"
                if n == 1
                else f": late ranks, waits and imbalance are judged among these {n} only"
            )
        )
    stepped = [n for n in n_steps.values() if n]
    if stepped and min(stepped) < THIN_STEPS:
        n = min(stepped)
        warm = " (warm-up left out)" if any(s.warmup for rb in rbs for s in rb.steps) else ""
        said.append(
            f"{n} step{'s' if n > 1 else ''} measured{warm}: per-step figures are from {n} step"
            + ("s" if n > 1 else "")
        )
    kept = kept or {}
    if kept:
        # (said in a finding, not only among the reader's warnings, which the window keeps behind a
        # status-bar link: HTA's trace filter's output read as a whole trace there)
        share = kept_range(kept.values())
        many = len(kept) > 1
        said.append(
            f"rank{'s' if many else ''} {rank_list(sorted(kept))}: {'their traces hold' if many else 'its trace holds'} "
            f"{share} of the host events the profiler numbered (sampled or filtered after it was written): "
            "host idle time and the host's shares are of what is left"
        )
    if not said:
        return findings
    spans = [(s.start_ns, s.end_ns) for rb in rbs for s in rb.steps]
    return findings + [
        {
            "rule": "thin_data",
            "severity": "low",
            "title": "Thin data: " + "; ".join(said),
            "ranks": ranks,
            "step": None,
            "start_ns": min((a for a, _ in spans), default=0),
            "end_ns": max((b for _, b in spans), default=0),
            "metrics": {
                "ranks_in_session": len(rbs),
                "world_size": world_size,
                "steps_measured": min(stepped) if stepped else 0,
                **({"host_events_kept": {str(r): round(v, 4) for r, v in sorted(kept.items())}} if kept else {}),
            },
            "advice": THIN_ADVICE,
            "impact_ms": 0.0,
            "children": [],
        }
    ]


def rank_list(ranks: list[int]) -> str:
    """Ranks for a title: runs of three or more as ranges ("0–63", "0–3, 5 and 8–11"), so that a
    finding on every rank of a large job stays one readable line."""
    return number_list(ranks, "–")
