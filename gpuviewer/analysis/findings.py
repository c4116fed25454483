"""Rules that turn the measurements into findings: a place on the timeline, the numbers
behind it, and advice in the terms of the bottleneck guide."""
from __future__ import annotations

import re

import numpy as np

from ..model.categories import Cat, LaneKind
from ..model.plain import plain
from ..model.trace import Trace
from . import intervals as iv
from .breakdown import RankBreakdown, breakdown
from .collectives import StepCollectives, match
from .host import explain, nonsync_ns
from .kernels import kernel_stats
from .memory import allocated_counters, capacity_bytes, peaks_per_step

LOW_UTILIZATION = 0.70  # the guide's threshold
HOST_GAP_MIN_NS = 1_000_000  # gaps shorter than 1 ms are launch gaps, not host stalls
MEM_HEADROOM_WARN = 0.80

ADVICE = {
    "low_gpu_utilization": "The GPU waits for work most of the step. Find what the host does in the gaps "
                           "(see the other findings): feed it faster (DataLoader workers, pin_memory, GPU-side "
                           "preprocessing), launch less often (torch.compile, CUDA graphs), or give it more "
                           "work per launch (larger batch, AMP so Tensor Cores are used).",
    "host_bound_idle": "The GPU drains while the host is busy elsewhere at the start of the step: an input "
                       "pipeline that is too slow. Use DataLoader(num_workers>0, pin_memory=True, "
                       "persistent_workers=True, prefetch_factor), move preprocessing to the GPU, and "
                       "overlap the next batch's copy (non_blocking=True) with this step's compute.",
    "launch_bound": "Many tiny kernels separated by about the launch cost: the CPU cannot launch fast "
                    "enough. Fuse them (torch.compile), capture the step in CUDA graphs, use fused "
                    "optimizers (foreach/fused AdamW), and use bigger tensors per kernel (batch more).",
    "exposed_communication": "Communication is not hidden behind compute. Overlap it: DDP bucket size "
                             "(bucket_cap_mb), gradient accumulation with no_sync, FSDP prefetch; keep "
                             "tensor parallel inside an NVLink domain; fix the late rank first if one "
                             "rank waits in every collective.",
    "straggler": "One rank arrived late and every other rank waited for it in the collectives. Look at "
                 "what that rank's host did (the evidence): data loading, logging, checkpointing, "
                 "garbage collection, a slow node. Balance the work or move the stall off the step.",
    "step_outlier": "One step is far slower than the rest. Look for synchronous host-device copies "
                    "(.cpu(), .item(), pageable memory), allocator churn (cudaMalloc/cudaFree after "
                    "empty_cache), checkpointing or evaluation inside the step; pin memory and keep "
                    "tensors on the GPU.",
    "pipeline_bubble": "Pipeline stages sit idle at the ramp-up and ramp-down. Use more micro-batches "
                       "(bubble = (p-1)/(m+p-1)), an interleaved 1F1B schedule, and balance the layers "
                       "so no stage is heavier than the others (the last stage holds the LM head and loss).",
    "load_imbalance": "Ranks do unequal work, so the fast ones wait for the slow one at every "
                      "collective. Balance the partition (layers per pipeline stage, sequence lengths "
                      "per data-parallel rank) or move extra work off the slow rank.",
    "topology_split": "The communication group crosses slow paths (another NVLink island, a PCIe "
                      "host bridge, the inter-socket link). Keep tensor parallel and the chattiest "
                      "groups inside an NVLink domain; place ranks so each group maps to one island; "
                      "check NCCL_P2P_LEVEL and that P2P is not disabled.",
    "memory_headroom": "Peak allocated memory is close to the device's capacity: an OOM risk and "
                       "allocator thrash. Use activation checkpointing, a smaller micro-batch, 8-bit "
                       "optimizers or sharded optimizer state (ZeRO/FSDP), and free tensors held "
                       "outside the step.",
}


def _finding(rule, severity, title, ranks, step, start, end, metrics) -> dict:
    return {"rule": rule, "severity": severity, "title": title, "ranks": [int(r) for r in ranks],
            "step": None if step is None else int(step), "start_ns": int(start), "end_ns": int(end),
            "metrics": plain(metrics), "advice": ADVICE[rule]}


def _span(rb: RankBreakdown) -> tuple[int, int]:
    return (min(s.start_ns for s in rb.steps), max(s.end_ns for s in rb.steps)) if rb.steps else (0, 0)


def analyze(trace: Trace) -> dict:
    rbs = breakdown(trace)
    colls = match(trace, rbs)
    findings: list[dict] = []
    kstats = {rb.rank: kernel_stats(trace, rb) for rb in rbs}
    for rb in rbs:
        findings += _utilization(rb)
        findings += _host_bound(trace, rb)
        findings += _launch_bound(rb, kstats[rb.rank])
        findings += _exposed(trace, rb, colls)
        findings += _step_outliers(trace, rb)
        findings += _memory(trace, rb.rank)
    findings += _stragglers(trace, rbs, colls)
    findings += _pipeline(trace, rbs)
    findings += _imbalance(trace, rbs, colls)
    topo = getattr(trace, "topology", None)
    comm = None
    if topo is not None:
        from .topology import comm_stats, topology_findings
        findings += topology_findings(trace, topo)
        comm = comm_stats(trace)
    order = {"high": 0, "medium": 1, "low": 2}
    findings.sort(key=lambda f: (order[f["severity"]], f["rule"], f["ranks"], f["step"] or -1))
    ranks = []
    for rb in rbs:
        ks = dict(kstats[rb.rank])
        ks.pop("gaps", None)
        ranks.append({"rank": rb.rank, "gpu_utilization": round(rb.gpu_utilization, 4),
                      "steps": [{"step": s.step, "start_ns": s.start_ns, "end_ns": s.end_ns,
                                 "busy_ns": s.busy_ns, "compute_ns": s.compute_ns, "comm_ns": s.comm_ns,
                                 "overlap_ns": s.overlap_ns, "exposed_comm_ns": s.exposed_comm_ns,
                                 "memcpy_ns": s.memcpy_ns, "idle_ns": s.idle_ns,
                                 "utilization": round(s.utilization, 4)} for s in rb.steps],
                      "kernels": ks})
    return {"ranks": ranks, "findings": findings, "comm": comm,
            "collectives": [{"step": c.step, "matched": c.n,
                             "wait_ms": {str(r): round(w / 1e6, 3) for r, w in c.wait_ns.items()},
                             "last_arrivals": {str(r): n for r, n in c.last_arrivals.items()},
                             "transfer_ms": round(c.transfer_ns / 1e6, 3)} for c in colls]}


# -- rules ---------------------------------------------------------------------------------------
def _utilization(rb: RankBreakdown) -> list[dict]:
    u = rb.gpu_utilization
    if not rb.steps or u >= LOW_UTILIZATION or rb.ops is None or not len(rb.ops):
        return []  # no GPU work recorded (a CPU-only trace, a memory snapshot) says nothing
    s0, s1 = _span(rb)
    return [_finding("low_gpu_utilization", "high" if u < 0.4 else "medium",
                     f"Rank {rb.rank}: GPU busy {u:.0%} of the time (below {LOW_UTILIZATION:.0%})",
                     [rb.rank], None, s0, s1,
                     {"utilization": round(u, 4), "busy_ms": round(rb.total("busy_ns") / 1e6, 3),
                      "window_ms": round(sum(s.window_ns for s in rb.steps) / 1e6, 3),
                      "idle_ms": round(rb.total("idle_ns") / 1e6, 3)})]


def _busy(trace: Trace, rb: RankBreakdown):
    c = trace.columns
    s = np.asarray(c["start"][rb.ops]).astype(np.int64)
    return iv.union(s, s + np.asarray(c["dur"][rb.ops]))


def _host_bound(trace: Trace, rb: RankBreakdown) -> list[dict]:
    """The largest GPU idle gap of each step (>= 1 ms): the host did something else."""
    if not rb.steps or rb.steps[0].step is None:
        return []
    busy = _busy(trace, rb)
    per_step = []
    for s in rb.steps:
        g = iv.gaps(busy, s.start_ns, s.end_ns)
        glen = g[1] - g[0]
        big = glen >= HOST_GAP_MIN_NS
        if big.any():
            k = int(np.argmax(glen))
            per_step.append((s, int(glen[k]), int(g[0][k]), int(g[1][k]), int(glen[big].sum())))
        else:
            per_step.append((s, 0, s.start_ns, s.start_ns, 0))
    typical = float(np.median([p[1] for p in per_step]))
    med_window = float(np.median([s.window_ns for s in rb.steps]))
    if typical < max(2 * HOST_GAP_MIN_NS, 0.15 * med_window):
        return []
    # the step whose largest gap is closest to the typical one is the evidence
    s, glen, g0, g1, _ = min(per_step, key=lambda p: abs(p[1] - typical))
    what = explain(trace, rb.rank, (g0, g1), [], top=3)
    at_start = np.median([(p[2] - p[0].start_ns) / max(p[0].window_ns, 1) for p in per_step]) < 0.25
    share = typical / med_window
    who = f": the host was in {what[0]['name']}" if what else ""
    return [_finding("host_bound_idle", "high" if share > 0.3 else "medium",
                     f"Rank {rb.rank}: the GPU sits idle {typical / 1e6:.1f} ms a step "
                     f"{'at the start of the step ' if at_start else ''}waiting for the host{who}",
                     [rb.rank], s.step, g0, g1,
                     {"gap_ms_per_step": round(typical / 1e6, 3), "share_of_step": round(share, 4),
                      "gaps_ms": [round(p[1] / 1e6, 3) for p in per_step],
                      "at_step_start": bool(at_start), "host_activity": what})]


def _launch_bound(rb: RankBreakdown, ks: dict) -> list[dict]:
    n = ks["kernels"]
    if not rb.steps or n < 1000:
        return []
    u = rb.gpu_utilization
    gaps = ks.get("gaps")
    if gaps is None or not len(gaps):
        return []
    short = gaps[gaps < 100_000]  # < 100 µs: the launch path, not a stall
    idle = rb.total("idle_ns")
    short_share = float(short.sum() / idle) if idle else 0.0
    mean_k, mean_gap = ks["mean_kernel_us"], float(short.mean() / 1e3) if len(short) else 0.0
    if not (u < LOW_UTILIZATION and ks["median_kernel_us"] < 20 and short_share >= 0.5
            and mean_gap >= 0.5 * ks["median_kernel_us"]):
        return []
    s0, s1 = _span(rb)
    return [_finding("launch_bound", "high" if u < 0.3 else "medium",
                     f"Rank {rb.rank}: launch-bound — {n:,} kernels of {mean_k:.1f} µs on average "
                     f"separated by {mean_gap:.1f} µs; the GPU is idle {1 - u:.0%} of the time",
                     [rb.rank], None, s0, s1,
                     {"kernels": n, "mean_kernel_us": round(mean_k, 3), "mean_gap_us": round(mean_gap, 3),
                      "median_kernel_us": round(ks["median_kernel_us"], 3),
                      "idle_fraction": round(1 - u, 4), "idle_in_short_gaps": round(short_share, 4)})]


def _exposed(trace: Trace, rb: RankBreakdown, colls: list[StepCollectives]) -> list[dict]:
    steps = [s for s in rb.steps if s.comm_ns > 0]
    if not steps:
        return []
    exposed = float(np.median([s.exposed_comm_ns for s in rb.steps]))
    window = float(np.median([s.window_ns for s in rb.steps]))
    share = exposed / window if window else 0.0
    if share < 0.10 or exposed < 1_000_000:
        return []
    per_step = int(np.median([s.comm_kernels for s in rb.steps]))
    waits = [c.wait_ns.get(rb.rank, 0) for c in colls]
    waits_every_step = bool(colls) and all(
        c.wait_ns.get(rb.rank, 0) >= max(c.wait_ns.values()) and c.wait_ns.get(rb.rank, 0) > 0 for c in colls)
    worst = max(rb.steps, key=lambda s: s.exposed_comm_ns)
    title = (f"Rank {rb.rank}: {exposed / 1e6:.1f} ms a step of communication not overlapped with compute "
             f"({share:.0%} of the step; {per_step} collectives a step)")
    if waits_every_step:
        title += " — it waits in them every step"
    return [_finding("exposed_communication", "high" if share > 0.3 else "medium", title, [rb.rank],
                     worst.step, worst.start_ns, worst.end_ns,
                     {"exposed_ms_per_step": round(exposed / 1e6, 3), "share": round(share, 4),
                      "comm_ms_per_step": round(float(np.median([s.comm_ns for s in rb.steps])) / 1e6, 3),
                      "collectives_per_step": per_step, "waits_every_step": waits_every_step,
                      "wait_ms_per_step": round(float(np.median(waits)) / 1e6, 3) if waits else 0.0})]


def _stragglers(trace: Trace, rbs: list[RankBreakdown], colls: list[StepCollectives]) -> list[dict]:
    """Per step, the rank whose host took longer than usual outside synchronize calls while the
    others did not. (The waiting rank blocks in a synchronize, often a step later, so its step
    is as long as the straggler's: step length alone names the wrong rank.)"""
    if len(rbs) < 2:
        return []
    ns = {rb.rank: nonsync_ns(trace, rb.rank) for rb in rbs}
    steps = sorted(set.intersection(*(set(v) for v in ns.values())))
    if len(steps) < 2:
        return []
    by_step = {c.step: c for c in colls}
    out = []
    for step in steps:
        excess = {}
        for r, v in ns.items():
            others = [v[s] for s in steps if s != step]
            excess[r] = v[step] - float(np.median(others))
        med_len = float(np.median([ns[r][step] for r in ns]))
        thr = max(5e6, 0.25 * med_len)
        r = max(excess, key=excess.get)
        rest = max(v for k, v in excess.items() if k != r)
        if excess[r] < thr or excess[r] - rest < thr:
            continue
        sc = by_step.get(step)
        if sc is not None and sc.last_arrivals.get(r, 0) < max(sc.last_arrivals.values()):
            continue  # collectives say another rank arrived last
        st = next(s for s in trace.steps_of_rank(r) if s.step == step)
        base = [(s.start, s.end) for s in trace.steps_of_rank(r) if s.step != step]
        what = explain(trace, r, (st.start, st.end), base, top=3)
        waiting = [k for k in ns if k != r]
        delay = excess[r]
        cause = f": {what[0]['name']} took {what[0]['excess_ms']:.0f} ms more than usual" if what else ""
        out.append(_finding("straggler", "high", f"Step {step}: rank {r} held the others back by "
                            f"{delay / 1e6:.1f} ms{cause}", [r] + waiting, step, st.start, st.end,
                            {"delay_ms": round(delay / 1e6, 3), "straggler": r, "waiting_ranks": waiting,
                             "host_ms_outside_sync": round(ns[r][step] / 1e6, 3),
                             "others_wait_ms": {str(k): round(sc.wait_ns.get(k, 0) / 1e6, 3) for k in waiting}
                             if sc else {}, "evidence": what}))
    return out


def _step_outliers(trace: Trace, rb: RankBreakdown) -> list[dict]:
    steps = [s for s in rb.steps if s.step is not None]
    if len(steps) < 5:
        return []
    d = np.array([s.window_ns for s in steps], np.float64)
    med = float(np.median(d))
    mad = float(np.median(np.abs(d - med))) or 1.0
    out = []
    for s, x in zip(steps, d):
        z = 0.6745 * (x - med) / mad
        if z < 3.5 or x < 1.5 * med:
            continue
        base = [(o.start_ns, o.end_ns) for o in steps if o is not s]
        what = explain(trace, rb.rank, (s.start_ns, s.end_ns), base,
                       kinds=tuple(LaneKind.ORDER), top=25)
        # Lead with GPU work when it explains a good part of the extra time (the copy, the wait
        # in a collective); the host calls that waited for it follow.
        gpu = [w for w in what if w["category"] in ("memcpy", "memset", "kernel", "communication")]
        excess = (x - med) / 1e6
        lead = gpu[0] if gpu and gpu[0]["excess_ms"] >= 0.3 * excess else (what[0] if what else None)
        what = ([lead] if lead else []) + [w for w in what if w is not lead][:5]
        cause = f": {lead['name']} {lead['ms'] / 1e3:.2f} s" if lead and lead["ms"] >= 1000 else \
            (f": {lead['name']} {lead['ms']:.1f} ms" if lead else "")
        out.append(_finding("step_outlier", "high", f"Rank {rb.rank}: step {s.step} took {x / 1e6:.0f} ms, "
                            f"{x / med:.0f}x the median {med / 1e6:.1f} ms{cause}", [rb.rank], s.step,
                            s.start_ns, s.end_ns,
                            {"duration_ms": round(x / 1e6, 3), "median_ms": round(med / 1e6, 3),
                             "robust_z": round(z, 2), "causes": what}))
    return out


_SEND = re.compile(r"^nccl:send\b")


def _pipeline(trace: Trace, rbs: list[RankBreakdown]) -> list[dict]:
    """Ranks joined by send/recv: per stage and step, the bubble = time the stage's GPU does not
    compute (idle or in send/recv) / window, next to the ideal (p-1)/(m+p-1)."""
    if len(rbs) < 2:
        return []
    c = trace.columns
    names = trace.names
    sendrecv_k = {i for i, n in enumerate(names) if "SendRecv" in n or re.search(r"nccl\w*Kernel_(Send|Recv)", n)}
    send_ops = np.array([i for i, n in enumerate(names) if _SEND.match(n)], np.int32)
    if not sendrecv_k and not len(send_ops):
        return []
    per_stage = []
    m_est = []
    for rb in rbs:
        kn = np.asarray(c["name"][rb.ops])
        if not np.isin(kn, list(sendrecv_k)).any():
            return []  # not every rank exchanges point-to-point: no pipeline
        cpu = [i for i, ln in enumerate(trace.lanes) if ln.rank == rb.rank and ln.kind == LaneKind.CPU]
        sends = []
        for st in trace.steps_of_rank(rb.rank):  # the CPU step window: send ops it issued
            n = 0
            for ln in cpu:
                sl = trace.lane_slice(ln)
                ls = np.asarray(c["start"][sl])
                lo, hi = np.searchsorted(ls, st.start), np.searchsorted(ls, st.end)
                n += int(np.isin(np.asarray(c["name"][sl.start + lo:sl.start + hi]), send_ops).sum())
            sends.append(n)
        if sends:
            m_est.append(int(np.median(sends)))
        # The stage's GPU window of a step runs from its first to its last op; inside it, time
        # not computing is idle or waiting in send/recv: the bubble.
        cat = np.asarray(c["cat"][rb.ops])
        s_all = np.asarray(c["start"][rb.ops]).astype(np.int64)
        e_all = s_all + np.asarray(c["dur"][rb.ops])
        bubbles, comps = [], []
        for s in rb.steps:
            mk = rb.op_step == (s.step if s.step is not None else -1)
            if not mk.any():
                continue
            w0, w1 = int(s_all[mk].min()), int(e_all[mk].max())
            k = mk & (cat == Cat.KERNEL)
            comp = iv.length(iv.union(s_all[k], e_all[k]))
            bubbles.append(1 - comp / max(w1 - w0, 1))
            comps.append(comp)
        per_stage.append((rb.rank, float(np.mean(bubbles)) if bubbles else 0.0,
                          float(np.mean(comps)) if comps else 0.0))
    p = len(rbs)
    m = min(m_est) if m_est and min(m_est) > 0 else None
    if m is None:
        ks = [int(np.median([s.comm_kernels for s in rb.steps])) for rb in rbs]
        m = max(1, min(ks) // 2)
    ideal = (p - 1) / (m + p - 1)
    heavy = max(per_stage, key=lambda x: x[2])
    worst = max(per_stage, key=lambda x: x[1])
    s0 = min(s.start_ns for rb in rbs for s in rb.steps)
    s1 = max(s.end_ns for rb in rbs for s in rb.steps)
    title = (f"Pipeline of {p} stages, {m} micro-batches: bubble "
             + ", ".join(f"stage {i} {b:.0%}" for i, (_, b, _) in enumerate(per_stage))
             + f" (ideal {ideal:.1%})")
    if worst[0] != heavy[0] and worst[1] > ideal * 1.2:
        title += f"; rank {worst[0]} waits for the heavier rank {heavy[0]}"
    sev = "high" if worst[1] > 2 * ideal else "medium"
    return [_finding("pipeline_bubble", sev, title, [r for r, _, _ in per_stage], None, s0, s1,
                     {"micro_batches": m, "stages": [{"rank": r, "bubble_fraction": round(b, 4),
                                                      "compute_ms_per_step": round(cm / 1e6, 3)}
                                                     for r, b, cm in per_stage],
                      "ideal": round(ideal, 4), "heaviest_rank": heavy[0]})]


def _imbalance(trace: Trace, rbs: list[RankBreakdown], colls: list[StepCollectives]) -> list[dict]:
    if len(rbs) < 2:
        return []
    steps = sorted(set.intersection(*({s.step for s in rb.steps} for rb in rbs)) - {None})
    if not steps:
        return []
    comp = {rb.rank: {s.step: s.compute_ns for s in rb.steps} for rb in rbs}
    ratios, heaviest = [], []
    for st in steps:
        v = {r: comp[r][st] for r in comp}
        hi = max(v, key=v.get)
        lo = min(v.values())
        ratios.append((v[hi] - lo) / v[hi] if v[hi] else 0.0)
        heaviest.append(hi)
    late = None
    if colls and len(colls) >= 2:
        lasts = [max(c.last_arrivals, key=c.last_arrivals.get) for c in colls]
        if len(set(lasts)) == 1 and all(c.last_arrivals[lasts[0]] >= 0.8 * c.n for c in colls):
            late = lasts[0]
    imbalanced = float(np.median(ratios)) >= 0.10 and len(set(heaviest)) == 1
    if not imbalanced and late is None:
        return []
    r_heavy = heaviest[0] if imbalanced else late
    others = [rb.rank for rb in rbs if rb.rank != r_heavy]
    s0 = min(s.start_ns for rb in rbs for s in rb.steps)
    s1 = max(s.end_ns for rb in rbs for s in rb.steps)
    parts = []
    if imbalanced:
        parts.append(f"rank {r_heavy} computes {np.median(ratios):.0%} more than the lightest rank in every step")
    if late is not None:
        w = np.median([sum(c.wait_ns.get(k, 0) for k in others) for c in colls]) / 1e6
        parts.append(f"rank {late} arrives last at the collectives in every step (the others wait "
                     f"{w:.1f} ms a step)")
    return [_finding("load_imbalance", "medium", "Load imbalance: " + "; ".join(parts), [r_heavy] + others,
                     None, s0, s1,
                     {"compute_ms_per_step": {str(r): round(float(np.median(list(comp[r].values()))) / 1e6, 3)
                                              for r in comp},
                      "imbalance": round(float(np.median(ratios)), 4), "heaviest_rank": heaviest[0],
                      "late_rank": late})]


def _memory(trace: Trace, rank: int) -> list[dict]:
    out = []
    for cnt in allocated_counters(trace):
        if cnt.rank != rank:
            continue
        cap = capacity_bytes(trace, rank, cnt.device)
        if not cap:
            continue
        k = int(np.argmax(cnt.v))
        peak = int(cnt.v[k])
        frac = peak / cap
        if frac < MEM_HEADROOM_WARN:
            continue
        per_step = peaks_per_step(trace, rank, cnt.device)
        t = int(cnt.t[k])
        out.append(_finding("memory_headroom", "high" if frac >= 0.85 else "medium",
                            f"Rank {rank} GPU {cnt.device}: peak {peak / 1e9:.1f} GB allocated of "
                            f"{cap / 1e9:.1f} GB ({frac:.0%}); only {(cap - peak) / 1e9:.1f} GB headroom",
                            [rank], None, t - 1_000_000, t + 1_000_000,
                            {"peak_bytes": peak, "capacity_bytes": cap, "headroom_bytes": cap - peak,
                             "fraction": round(frac, 4), "device": cnt.device,
                             "per_step": per_step}))
    return out
