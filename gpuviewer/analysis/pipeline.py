"""Pipeline parallelism, told apart from its look-alikes.

NCCL runs point-to-point traffic as SendRecv kernels, and so does all-to-all (MoE, TorchRec's
sharded embeddings): a SendRecv kernel alone is no pipeline. A pipeline is ranks joined by
point-to-point sends and receives (c10d's `nccl:send A->B` / `nccl:recv B<-A`, NCCL's
`ncclSend`/`ncclRecv` ranges) that are not part of an all-to-all, whose peers form a chain of
stages, each sending or receiving in every step. SendRecv kernels launched by all-to-all ops
(`nccl:all_to_all`, `c10d::alltoall_base_`) are named as such.

A stage's time in a step that is not computing is split in two: the idle between its own kernels
that ends at a launch (the launch path, launch.py; in gaps of 100 µs or more only the part its
host was not blocked in a sync: the host's own work), and the rest (waiting in send/recv for
another stage, or a host blocked waiting for it): the bubble the schedule causes is only the
second. When the stage the others wait for (the one
with the most compute and launch gaps) is launch-bound, the pipeline is launch-bound: more
micro-batches would add launches, not hide them."""

from __future__ import annotations

import re
from typing import Any

import numpy as np

from ..model.categories import Cat, LaneKind
from ..model.trace import Trace
from . import intervals as iv
from . import launch as L
from .breakdown import RankBreakdown
from .host_split import host_events

_SENDRECV = re.compile(r"SendRecv|nccl\w*Kernel_(Send|Recv)")
_SEND = re.compile(r"^(?:nccl:send\b|ncclSend$)")
_RECV = re.compile(r"^(?:nccl:recv\b|ncclRecv$)")
_A2A = re.compile(r"^(?:nccl:all_?to_?all|c10d::all_?to_?all|ncclAllToAll)", re.IGNORECASE)
_EDGE = re.compile(r"(\d+)\s*(->|<-)\s*(\d+)")
HOST_KINDS = (LaneKind.CPU, LaneKind.NVTX)


def _name_ids(trace: Trace) -> dict:
    found = trace.derived.get("p2p_name_ids")
    if found is None:  # once per trace, not once per rank
        names = trace.names
        ids = {
            key: np.array([i for i, n in enumerate(names) if rx.search(n)], np.int64)
            for key, rx in (("kernel", _SENDRECV), ("send", _SEND), ("recv", _RECV), ("a2a", _A2A))
        }
        found = trace.derived["p2p_name_ids"] = ids
    return found


def pipeline_facts(trace: Trace, rb: RankBreakdown) -> dict:
    """The map's part: whether the rank's GPU ran SendRecv kernels; per host step the
    point-to-point sends and receives its host issued outside all-to-all ops, and its all-to-all
    ops; the peers named in the send/recv ops; per step its launch gaps (launch.step_launch)."""
    c = trace.columns
    ids = _name_ids(trace)
    r = next((x for x in trace.ranks if x.rank == rb.rank), None)
    out: dict[str, Any] = {
        "p2p_names": bool(len(ids["kernel"])),
        "p2p_kernels": False,
        "sends": [],
        "recvs": [],
        "a2a": [],
        "a2a_name": None,
        "edges": [],
        "world_size": getattr(r, "world_size", None),
        "launch": {},
    }
    if not out["p2p_names"]:
        return out
    ops = rb.ops if rb.ops is not None else np.zeros(0, np.int64)
    out["p2p_kernel_count"] = int(np.isin(np.asarray(c["name"][ops]), ids["kernel"]).sum())
    out["comm_kernel_count"] = int((np.asarray(c["cat"][ops]) == Cat.COMM_KERNEL).sum())
    out["p2p_kernels"] = out["p2p_kernel_count"] > 0
    if not out["p2p_kernels"]:
        return out
    out["launch"] = L.step_launch(trace, rb, spans=True)
    _host_gaps(trace, rb.rank, out["launch"])
    steps = sorted(trace.steps_of_rank(rb.rank), key=lambda s: s.start)
    out["stepped"] = bool(steps)
    # without step ranges the whole capture is one window
    st0 = np.array([s.start for s in steps] if steps else [np.iinfo(np.int64).min], np.int64)
    st1 = np.array([s.end for s in steps] if steps else [np.iinfo(np.int64).max], np.int64)
    n_win = len(st0)
    lanes = []
    for i, ln in enumerate(trace.lanes):
        if ln.rank == rb.rank and ln.kind in HOST_KINDS:
            sl = trace.lane_slice(i)
            st = np.asarray(c["start"][sl]).astype(np.int64)
            lanes.append(
                (
                    ln.kind,
                    np.asarray(c["name"][sl]).astype(np.int64),
                    st,
                    st + np.asarray(c["dur"][sl]).astype(np.int64),
                )
            )
    # the rank's all-to-all ops on every host lane (NCCL's own ranges of the grouped sends may sit
    # on another lane of the thread than the op that issued them)
    a_s = np.concatenate([x[2][np.isin(x[1], ids["a2a"])] for x in lanes] or [np.zeros(0, np.int64)])
    a_e = np.concatenate([x[3][np.isin(x[1], ids["a2a"])] for x in lanes] or [np.zeros(0, np.int64)])
    a_s, a_e = iv.union(a_s, a_e)
    per_kind: dict = {}
    edges = set()
    for kind, nm, s, e in lanes:
        a2a = np.isin(nm, ids["a2a"])
        if a2a.any():  # count an all-to-all once: c10d::alltoall_base_ holds nccl:all_to_all
            w = np.flatnonzero(a2a)
            o = w[np.lexsort((-e[w], s[w]))]
            reach = np.maximum.accumulate(e[o])
            nested = np.r_[False, s[o][1:] < reach[:-1]]
            outer = a2a.copy()
            outer[o[nested]] = False
        else:
            outer = a2a
        # a send inside an all-to-all (NCCL's ranges of its grouped sends) belongs to it
        k_in = np.searchsorted(a_s, s, side="right") - 1
        inside = (k_in >= 0) & (s < a_e[np.maximum(k_in, 0)]) if len(a_s) else np.zeros(len(s), bool)
        acc = per_kind.setdefault(kind, [np.zeros(n_win, np.int64) for _ in range(3)])
        for j, m in enumerate((np.isin(nm, ids["send"]) & ~inside, np.isin(nm, ids["recv"]) & ~inside, outer)):
            if m.any():
                k = np.searchsorted(st0, s[m], side="right") - 1
                ok = (k >= 0) & (s[m] <= st1[np.maximum(k, 0)])
                acc[j] += np.bincount(k[ok], minlength=n_win)
        if a2a.any():  # the op that names the collective (nccl:all_to_all) rather than its c10d wrapper
            names = [trace.names[int(x)] for x in np.unique(nm[a2a])] + ([out["a2a_name"]] if out["a2a_name"] else [])
            out["a2a_name"] = min(names, key=lambda n: (not n.startswith("nccl"), n))
        for n in np.unique(nm[np.isin(nm, ids["send"]) & ~inside]):
            hit = _EDGE.search(trace.names[int(n)])
            if hit and hit.group(2) == "->":
                edges.add((int(hit.group(1)), int(hit.group(3))))
    # the same op on two host lanes (a CPU op and its NVTX range) is counted once: the larger
    for j, key in enumerate(("sends", "recvs", "a2a")):
        counts = [v[j] for v in per_kind.values()]
        out[key] = [int(x) for x in np.max(counts, axis=0)] if counts else []
    out["edges"] = sorted(edges)
    return out


def comm_nouns(f: dict) -> tuple[str, str]:
    """What a rank's NCCL kernels are called in a sentence (a count of them, and what waits): a
    pipeline stage's SendRecv kernels are sends and receives, not collectives (pp: '16 collectives
    a step' were point-to-point transfers); all-to-all's are collectives. f: pipeline_facts."""
    p2p = f.get("p2p_kernel_count", 0) if f.get("p2p_kernels") and not sum(f.get("a2a") or []) else 0
    if not p2p:
        return "collectives", "its collectives"
    if p2p >= f.get("comm_kernel_count", p2p):
        return "send/receive kernels", "its sends and receives"
    return "NCCL kernels", "its NCCL kernels"


def _host_gaps(trace: Trace, rank: int, launch: dict) -> None:
    """Per step, host_gap_ns: the GPU's longer gaps that end at a launch (launch.step_launch), up
    to the launch's return, less the time its host was blocked in a sync: a host busy elsewhere
    (its own work, a sleep), not the schedule. A gap the host spent in a sync is left in the
    bubble: a host that waits for the GPU (a recv's result) launches late because of the other
    stage. The spans are dropped (the map's facts stay plain numbers)."""
    ev = host_events(trace, rank)
    c = trace.columns
    s = np.asarray(c["start"][ev["sync"]]).astype(np.int64)
    held = iv.union(s, s + np.asarray(c["dur"][ev["sync"]]).astype(np.int64))
    for x in launch.values():
        x["host_gap_ns"] = iv.length(iv.subtract(x.pop("long_gap_spans"), held))


def stage_chain(facts: dict[int, dict], ranks: list[int]) -> list[int] | None:
    """The ranks in stage order when their send/recv peers form one chain (each rank next to at
    most two others, all connected, no cycle); the rank order when no peers are named; None when
    the named peers form no chain."""
    if not all(facts[r]["edges"] for r in ranks):
        return list(ranks)
    held = set(ranks)
    adj: dict[int, set[int]] = {r: set() for r in ranks}
    for r in ranks:
        for a, b in facts[r]["edges"]:
            if a in held and b in held and a != b:
                adj[a].add(b)
                adj[b].add(a)
    n_edges = sum(len(v) for v in adj.values()) // 2
    ends = [r for r in ranks if len(adj[r]) == 1]
    if any(len(v) > 2 for v in adj.values()) or n_edges != len(ranks) - 1 or len(ends) != 2:
        return None
    order, prev = [min(ends)], None
    while len(order) < len(ranks):
        nxt = [x for x in adj[order[-1]] if x != prev]
        if not nxt:
            return None
        prev = order[-1]
        order.append(nxt[0])
    return order


def _per_step(facts: dict, key: str) -> int:
    v = facts[key]
    return int(np.median(v)) if v else 0


def _span(ns: list[int]) -> str:
    """Counts of the ranks for a sentence: "33", or "32-34" where they differ."""
    return str(min(ns)) if min(ns) == max(ns) else f"{min(ns)}-{max(ns)}"


def all_to_all(facts: dict[int, dict], rbs: list[RankBreakdown]) -> list[dict]:
    """SendRecv kernels where the host issues no send or receive outside all-to-all ops: said, so
    they are not read as a pipeline."""
    from .rule_base import finding

    ranks = [
        rb.rank
        for rb in rbs
        if facts[rb.rank]["p2p_kernels"]
        and sum(facts[rb.rank]["a2a"])
        and not sum(facts[rb.rank]["sends"]) + sum(facts[rb.rank]["recvs"])
    ]
    if not ranks:
        return []
    f0 = facts[ranks[0]]
    mine = [s for rb in rbs if rb.rank in ranks for s in rb.measured]
    world = max((facts[r]["world_size"] or 0) for r in ranks)
    held = f"; the session holds {len(rbs)} of its {world} ranks" if world > len(rbs) else ""
    ns = [_per_step(facts[r], "a2a") for r in ranks]
    n = int(np.median(ns))
    count = _span(ns)
    per = "a step" if all(facts[r].get("stepped") for r in ranks) else "in the capture"
    kern = ""
    if per != "a step" and all(facts[r].get("p2p_kernel_count") for r in ranks):
        # the host calls the capture cut at its edges can differ from the kernels that ran: both said
        kern = f"; {_span([int(facts[r]['p2p_kernel_count']) for r in ranks])} SendRecv kernels{' each' if len(ranks) > 1 else ''}"
    who = (
        "Rank " + str(ranks[0]) if len(ranks) == 1 else "Ranks " + ", ".join(map(str, ranks[:-1])) + f" and {ranks[-1]}"
    )
    return [
        finding(
            "all_to_all",
            "low",
            # not "the SendRecv kernels are all-to-all exchanges": HTA's trace_filter runs 5 a step,
            # 2 of them its all-to-alls', 3 its all-reduces' and all-gather's
            # (nor 'outside the all-to-all exchanges' alone: read as every SendRecv kernel being one)
            f"{who}: the SendRecv kernels are not a pipeline's: the host issues no send or receive op outside "
            f"collectives (the all-to-all exchanges, {f0['a2a_name']}, "
            f"{count} {'calls ' if kern else ''}{per}{' on each rank' if len(ranks) > 1 else ''}, and any other "
            f"collective NCCL runs as SendRecv kernels{kern}){held}",
            ranks,
            None,
            min(s.start_ns for s in mine),
            max(s.end_ns for s in mine),
            {
                "all_to_all_per_step" if per == "a step" else "all_to_all": n,
                "op": f0["a2a_name"],
                "world_size": world or None,
                "ranks_held": len(rbs),
            },
        )
    ]


def pipeline(facts: dict[int, dict], rbs: list[RankBreakdown]) -> list[dict]:
    """Per stage and step, its bubble (time not computing and not waiting for its host, over
    its window) next to the ideal (p-1)/(m+p-1); or, when the stage the others wait for is
    launch-bound, that. facts: rank -> pipeline_facts() of its map."""
    from .rule_base import finding

    if len(rbs) < 2 or not any(facts[rb.rank]["p2p_names"] for rb in rbs):
        return []
    for rb in rbs:
        f = facts[rb.rank]
        if not f["p2p_kernels"] or not (sum(f["sends"]) + sum(f["recvs"])):
            return []  # a rank without point-to-point sends or receives of its own: no pipeline
        if not all(a + b for a, b in zip(f["sends"], f["recvs"])):
            return []  # a stage exchanges micro-batches in every step
    by_rank = {rb.rank: rb for rb in rbs}
    order = stage_chain(facts, [rb.rank for rb in rbs])
    if order is None:
        return []
    per_stage: list[dict[str, Any]] = []
    for r in order:
        rb, lp = by_rank[r], facts[r]["launch"]
        st = [x for x in rb.measured if x.window_ns > 0]
        gap = [lp[x.step]["gap_ns"] if x.step in lp else 0 for x in st]
        host = [lp[x.step].get("host_gap_ns", 0) if x.step in lp else 0 for x in st]
        bub = [max(0, x.window_ns - x.compute_ns - g - h) / x.window_ns for x, g, h in zip(st, gap, host)]
        per_stage.append(
            {
                "rank": r,
                "bubble": float(np.mean(bub)) if bub else 0.0,
                "launch": float(np.mean([g / x.window_ns for x, g in zip(st, gap)])) if st else 0.0,
                "host": float(np.mean([h / x.window_ns for x, h in zip(st, host)])) if st else 0.0,
                "compute": float(np.mean([x.compute_ns for x in st])) if st else 0.0,
                "own": float(np.mean([x.compute_ns + g for x, g in zip(st, gap)])) if st else 0.0,
                # in send/recv kernels waiting for the other stage (the last rank's arrival)
                "waiting": float(np.mean([x.wait_ns / x.window_ns for x in st])) if st else 0.0,
                "launch_ns": gap,
                "steps": st,
            }
        )
    p = len(order)
    m_est = [_per_step(facts[r], "sends") for r in order if _per_step(facts[r], "sends") > 0]
    if m_est:
        m = min(m_est)
    else:
        m = max(1, min(int(np.median([s.comm_kernels for s in by_rank[r].measured])) for r in order) // 2)
    ideal = (p - 1) / (m + p - 1)
    s0 = min(s.start_ns for rb in rbs for s in rb.measured)
    s1 = max(s.end_ns for rb in rbs for s in rb.measured)
    slow = max(per_stage, key=lambda x: x["own"])
    lp = facts[slow["rank"]]["launch"]
    lb = [x for x in slow["steps"] if x.step in lp and L.is_launch_bound(lp[x.step], x.gpu_time_ns)]
    stages = [
        {
            "rank": x["rank"],
            "bubble_fraction": round(x["bubble"], 4),
            "launch_gap_fraction": round(x["launch"], 4),
            "host_gap_fraction": round(x["host"], 4),
            "compute_ms_per_step": round(x["compute"] / 1e6, 3),
        }
        for x in per_stage
    ]
    rest = ", ".join(f"stage {i} {x['bubble']:.0%}" for i, x in enumerate(per_stage))
    if slow["steps"] and 2 * len(lb) > len(slow["steps"]):
        i = order.index(slow["rank"])
        xs = [lp[x.step] for x in lb]
        k = sum(x["kernels"] for x in xs) / len(xs)
        med = float(np.median([x["median_kernel_ns"] for x in xs])) / 1e3
        host_part = (
            f" and {slow['host']:.0%} more in longer gaps waiting for a launch while its host was not in a sync"
            if slow["host"] >= 0.005
            else ""
        )
        title = (
            f"Pipeline of {p} stages, {m} micro-batches, launch-bound: stage {i} (rank {slow['rank']}), the "
            f"busiest stage (compute and launch gaps), idles {slow['launch']:.0%} of its step in gaps under "
            f"{L.SHORT_GAP_NS // 1000} µs that end at a launch ({k:,.0f} kernels a step, median {med:.1f} µs)"
            f"{host_part}; the rest, not computing and not waiting for its host: "
            + ", ".join(
                f"stage {j} {x['bubble']:.0%}"
                + (
                    f" ({x['waiting']:.0%} waiting in send/recv for the other stage{_mostly_in(x['steps'])})"
                    if x["waiting"] >= 0.01
                    else ""
                )
                for j, x in enumerate(per_stage)
            )
            # (pp: stage 0's 71% was 'the bubble' beside an ideal 11.1%, read as a schedule to
            # change, where it waits for the slower, launch-bound stage 1; an audit's finding)
            + f" (the schedule's own bubble, ideally {ideal:.1%}, is not told apart from waiting for a slower stage)"
        )
        impact = float(sum(slow["launch_ns"]))
        return [
            finding(
                "pipeline_launch_bound",
                "high",
                title,
                order,
                None,
                s0,
                s1,
                {
                    "micro_batches": m,
                    "stages": stages,
                    "ideal": round(ideal, 4),
                    "launch_bound_rank": slow["rank"],
                    "kernels_per_step": round(k, 1),
                    "median_kernel_us": round(med, 3),
                },
                impact_ns=impact,
            )
        ]
    heavy = max(per_stage, key=lambda x: x["compute"])
    worst = max(per_stage, key=lambda x: x["bubble"])
    title = f"Pipeline of {p} stages, {m} micro-batches: bubble {rest} (ideal {ideal:.1%})"
    if worst["rank"] != heavy["rank"] and worst["bubble"] > ideal * 1.2:
        title += f"; rank {worst['rank']} waits for the heavier rank {heavy['rank']}"
    n_steps = max(1, min(len(rb.measured) for rb in rbs))
    windows = float(np.median([s.window_ns for rb in rbs for s in rb.measured]))
    impact = sum(max(0.0, x["bubble"] - ideal) for x in per_stage) * windows * n_steps
    return [
        finding(
            "pipeline_bubble",
            "high" if worst["bubble"] > 2 * ideal else "medium",
            title,
            order,
            None,
            s0,
            s1,
            {"micro_batches": m, "stages": stages, "ideal": round(ideal, 4), "heaviest_rank": heavy["rank"]},
            impact_ns=impact,
        )
    ]


def _mostly_in(steps: list) -> str:
    """', most of it in step N' where one step holds three quarters of the stage's send/recv wait
    (pp's stage 1: 29.2 ms in step 2, 0.3 and 0.6 ms in the others, said as a steady 8%; an
    audit), else ''."""
    waits = [(x.wait_ns, x.step) for x in steps]
    total = sum(w for w, _ in waits)
    if len(waits) < 2 or total <= 0:
        return ""
    w, step = max(waits, key=lambda t: t[0])
    return f", most of it in step {step}" if w >= 0.75 * total and step is not None else ""
