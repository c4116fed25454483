"""Merging and ranking findings (the reduce's last step): the same finding on several ranks
becomes one finding listing them; a root cause (a late rank) carries the findings it explains
(the waiting ranks' exposed communication, slow steps, imbalance) as children; everything is
ranked by the time it cost."""
from __future__ import annotations

import re

from .breakdown import RankBreakdown
from .rules import finding

_RANK_PREFIX = re.compile(r"^Rank (\d+)(:| GPU)")
_SEVERITY = {"high": 0, "medium": 1, "low": 2}


def order_key(f: dict):
    return (-f["impact_ms"], _SEVERITY[f["severity"]], f["rule"], f["ranks"], -1 if f["step"] is None else f["step"])


def rank_json(rb: RankBreakdown, ks: dict) -> dict:
    ks = dict(ks)
    ks.pop("gaps", None)
    return {"rank": rb.rank, "gpu_utilization": round(rb.gpu_utilization, 4),
            "steps": [s.as_dict() for s in rb.steps], "kernels": ks}


def steps_json(per_step: dict[int, dict]) -> list[dict]:
    out = []
    for step, d in sorted(per_step.items()):
        late = max(d["caused"], key=d["caused"].get)
        out.append({"step": step, "collectives": d["n"],
                    "wait_ms": {str(r): round(v / 1e6, 3) for r, v in d["wait"].items()},
                    "late_rank": late if d["caused"][late] > 0 else None,
                    "wait_caused_ms": {str(r): round(v / 1e6, 3) for r, v in d["caused"].items()}})
    return out


def merge_ranks(found: list[dict]) -> list[dict]:
    """One finding per (rule, step) listing its ranks; the worst rank's numbers in the title
    and every rank's in metrics.per_rank; the impact summed."""
    groups: dict[tuple, list[dict]] = {}
    for f in found:
        # step is a finding's identity only for slow steps; elsewhere it is just its example
        key = (f["rule"], f["step"] if f["rule"] == "step_outlier" else None,
               f["metrics"].get("device") if f["rule"] == "memory_headroom" else None)
        groups.setdefault(key, []).append(f)
    out = []
    for fs in groups.values():
        if len(fs) == 1:
            out.append(fs[0])
            continue
        worst = max(fs, key=lambda f: f["impact_ms"])
        m = dict(worst)
        ranks = sorted(r for f in fs for r in f["ranks"])
        who = rank_list(ranks)
        body = _RANK_PREFIX.sub("", worst["title"]).lstrip(": ")
        if worst["rule"] == "memory_headroom":
            body = "GPU " + body
        m["title"] = f"Ranks {who}: {body} (rank {worst['ranks'][0]}, the worst)"
        m["ranks"] = [worst["ranks"][0]] + [r for r in ranks if r != worst["ranks"][0]]
        m["metrics"] = dict(worst["metrics"], per_rank={str(f["ranks"][0]): f["metrics"] for f in fs})
        m["impact_ms"] = round(sum(f["impact_ms"] for f in fs), 3)
        m["severity"] = min((f["severity"] for f in fs), key=_SEVERITY.get)
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
    ratio = f", {ms / med_ms:.0f}x the median step" if med_ms else ""
    return [finding("warmup", "low", f"Step {step} is warm-up ({ms / 1e6:.0f} ms{ratio}): shown, but left "
                    "out of utilization, outliers and late-rank analysis", [rb.rank for rb, _ in w], step,
                    min(s.start_ns for _, s in w), max(s.end_ns for _, s in w),
                    {"duration_ms": round(ms / 1e6, 3), "median_ms": round(med_ms / 1e6, 3)})]


def straggler_finding(x: dict) -> dict:
    steps = x["steps"]
    metrics = {k: x[k] for k in ("late_rank", "steps", "kind", "wait_caused_ms", "wait_caused_ms_per_step",
                                 "cause", "excess", "lateness_parts_ms", "excess_over_usual_ms", "usual_ms",
                                 "usual_ms_per_step", "evidence", "others_wait_ms", "wait_caused_ms_each",
                                 "excess_over_usual_ms_each", "wait_caused_ms_each_per_step") if k in x}
    metrics["waiting_ranks"] = x["waiting"]
    sev = "high" if x["kind"] == "episodic" or len(steps) > 1 else "medium"
    w0, w1 = x["window"]
    return finding("straggler", sev, x["title"], [x["late_rank"]] + x["waiting"],
                   steps[0] if x["kind"] == "episodic" else None, w0, w1, metrics, impact_ns=x["impact_ns"])


def nest_stalls(roots: list[dict]) -> list[dict]:
    """An episodic stall of a rank that is late anyway sits on top of its persistent lateness:
    it becomes that finding's child, and the title says so."""
    persistent = {f["metrics"]["late_rank"]: f for f in roots if f["metrics"]["kind"] == "persistent"}
    out = []
    for f in roots:
        p = persistent.get(f["metrics"]["late_rank"])
        if f["metrics"]["kind"] == "episodic" and p is not None:
            p["children"].append(f)
            p["title"] += (f"; in step {f['step']} it held them back {f['metrics']['wait_caused_ms_each']:.1f} ms, "
                           f"{f['metrics']['excess_over_usual_ms_each']:.1f} ms more than usual")
        else:
            out.append(f)
    return out


def merge_persistent(roots: list[dict]) -> list[dict]:
    """Ranks that take turns arriving last (each late in a good share of the steps) are one
    lateness of the job: one finding listing who was late when, led by the rank that cost most
    (with any stall of its own as a child)."""
    pers = [f for f in roots if f["metrics"]["kind"] == "persistent"]
    if len(pers) < 2:
        return roots
    pers.sort(key=lambda f: -f["impact_ms"])
    lead = pers[0]
    m = lead["metrics"]
    m["late_ranks"] = {str(f["metrics"]["late_rank"]): f["metrics"]["steps"] for f in pers}
    m["wait_caused_ms"] = round(sum(f["metrics"]["wait_caused_ms"] for f in pers), 3)
    m["wait_caused_ms_per_step"] = {k: v for f in pers for k, v in f["metrics"]["wait_caused_ms_per_step"].items()}
    who = " and ".join(f"rank {f['metrics']['late_rank']} in steps {_steps_text(f['metrics']['steps'])}" for f in pers)
    each = sorted(f["metrics"]["wait_caused_ms_each_per_step"] for f in pers)[len(pers) // 2]
    m["wait_caused_ms_each_per_step"] = each  # the figure the title gives
    lead["title"] = (f"The ranks take turns arriving last at the collectives ({who}): the others wait "
                     f"{each:.1f} ms a step each ({m['wait_caused_ms']:.0f} ms in all)"
                     + lead["title"][lead["title"].index(" in all)") + len(" in all)"):])
    lead["ranks"] = sorted({r for f in pers for r in f["ranks"]}, key=lambda r: (r != m["late_rank"], r))
    for f in pers[1:]:
        lead["children"] += f["children"]
    lead["impact_ms"] = round(sum(f["impact_ms"] for f in pers), 3)
    lead["start_ns"] = min(f["start_ns"] for f in pers)
    lead["end_ns"] = max(f["end_ns"] for f in pers)
    return [f for f in roots if f not in pers[1:]]


def _steps_text(steps: list[int]) -> str:
    steps = sorted(steps)
    if len(steps) > 2 and steps == list(range(steps[0], steps[-1] + 1)):
        return f"{steps[0]}-{steps[-1]}"
    return ", ".join(map(str, steps))


def attach(roots: list[dict], found: list[dict]) -> list[dict]:
    """Findings a cause explains become its children: under a late rank, the waiting ranks'
    exposed communication (when waiting is most of it), slow steps at its steps and compute
    imbalance (its own extra work, or the waiting ranks' kernels slowed by the collectives
    spinning beside them); under a pipeline bubble, the send/recv exposure; under launch-bound
    or host-bound idle, the low utilization of the same ranks."""
    def steps_of(root):
        s = set(root["metrics"]["steps"])
        for c in root["children"]:
            s |= set(c["metrics"].get("steps", []))
        return s

    pipeline = next((f for f in found if f["rule"] == "pipeline_bubble"), None)
    idle_causes = [f for f in found if f["rule"] in ("launch_bound", "host_bound_idle")]
    top = list(roots)
    for f in found:
        parent = None
        for root in sorted(roots, key=lambda r: -r["impact_ms"]):
            late = root["metrics"]["late_rank"]
            if f["rule"] == "exposed_communication" and late not in f["ranks"] \
                    and f["metrics"]["wait_ms_per_step"] >= 0.5 * f["metrics"]["exposed_ms_per_step"]:
                parent = root
            elif f["rule"] == "step_outlier" and f["step"] in steps_of(root):
                parent = root
            elif f["rule"] == "load_imbalance":
                parent = root
            elif f["rule"] in ("low_gpu_utilization", "launch_bound", "host_bound_idle") \
                    and root["metrics"]["cause"] in ("host", "input") and set(f["ranks"]) <= {late} \
                    and root["metrics"]["kind"] == "persistent":
                parent = root  # the late rank's own GPU starves for the same host
            if parent is not None:
                break
        if parent is None and f["rule"] in ("exposed_communication", "load_imbalance") and pipeline is not None:
            parent = pipeline
        if parent is None and f["rule"] == "low_gpu_utilization":
            parent = next((c for c in idle_causes if set(f["ranks"]) <= set(c["ranks"])
                           and c["impact_ms"] >= 0.5 * f["impact_ms"]), None)
        if parent is None:
            top.append(f)
        else:
            parent["children"].append(f)
    return top


def rank_list(ranks: list[int]) -> str:
    """Sorted ranks for a title: runs of three or more as ranges ("0–63", "0–3, 5 and 8–11"),
    so that a finding on every rank of a large job stays one readable line."""
    parts, i = [], 0
    while i < len(ranks):
        j = i
        while j + 1 < len(ranks) and ranks[j + 1] == ranks[j] + 1:
            j += 1
        if j - i >= 2:
            parts.append(f"{ranks[i]}–{ranks[j]}")
        else:
            parts += [str(r) for r in ranks[i:j + 1]]
        i = j + 1
    return parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + f" and {parts[-1]}"
