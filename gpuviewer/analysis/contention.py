"""Unequal GPU compute across ranks, and why: more work, or the same work run slower.

One rank computing more than another in every step is load imbalance only when it runs more or
other kernels. When the heavy rank runs the same kernels (names and counts per step) as the
lightest, its kernels are slower: if most of the extra time is in kernels that ran beside its own
communication kernels, they shared the SMs with NCCL kernels spinning while the rank waited for
the others (SM contention, a symptom of the wait); otherwise the GPU itself is slower."""

from __future__ import annotations

import numpy as np

from ..model.categories import Cat
from ..model.fmt import short_name
from ..model.trace import Trace
from . import intervals as iv
from .breakdown import RankBreakdown

SAME_WORK = 0.01  # kernel counts per name differing by at most 1% of the step's kernels: the same work
IMBALANCE = 0.10  # the heavy rank computes at least this share more than the lightest


def _covered_before(a: np.ndarray, b: np.ndarray, t: np.ndarray) -> np.ndarray:
    """For each time in t, the length of the disjoint sorted intervals [a, b) before it."""
    if not len(a):
        return np.zeros(len(t), np.int64)
    cum = np.concatenate(([0], np.cumsum(b - a)))
    k = np.searchsorted(a, t, side="right")
    j = np.maximum(k - 1, 0)
    return cum[j] + np.where(k > 0, np.clip(t - a[j], 0, b[j] - a[j]), 0)


def kernel_mix(trace: Trace, rb: RankBreakdown) -> dict:
    """Per step: compute kernel name -> [count, total ns, count and ns of those that ran more
    than half their time beside the rank's own communication kernels]."""
    c = trace.columns
    ops = rb.ops if rb.ops is not None else np.zeros(0, np.int64)
    if not len(ops) or rb.op_step is None:
        return {}
    cat = np.asarray(c["cat"][ops])
    s = np.asarray(c["start"][ops]).astype(np.int64)
    d = np.asarray(c["dur"][ops]).astype(np.int64)
    comm = iv.union(s[cat == Cat.COMM_KERNEL], s[cat == Cat.COMM_KERNEL] + d[cat == Cat.COMM_KERNEL])
    k = cat == Cat.KERNEL
    s, d, step, name = s[k], d[k], rb.op_step[k], np.asarray(c["name"][ops])[k].astype(np.int64)
    beside = 2 * (_covered_before(*comm, s + d) - _covered_before(*comm, s)) > d
    out: dict = {}
    key = step * (1 << 32) + name  # one pass over (step, name) pairs
    uk, inv = np.unique(key, return_inverse=True)
    cols = (
        np.bincount(inv),
        np.bincount(inv, weights=d),
        np.bincount(inv, weights=beside),
        np.bincount(inv, weights=d * beside),
    )
    for i, kk in enumerate(uk):
        st = int(kk >> 32)
        if st < 0:
            continue
        out.setdefault(st, {})[trace.names[int(kk & 0xFFFFFFFF)]] = [int(x[i]) for x in cols]
    return out


def _same_work(a: dict, b: dict) -> bool:
    n = sum(v[0] for v in a.values())
    diff = sum(abs(a.get(k, [0])[0] - b.get(k, [0])[0]) for k in set(a) | set(b))
    return n > 0 and diff <= SAME_WORK * n


def _how_heavier(mix: dict, rows: list) -> str:
    """What the heavy rank's extra compute is, medians over the steps: kernels the light rank does
    not run, more kernels, or the same kernels running longer (trace_filter's rank 1: fewer
    kernels, 552 a step against 577, its embedding kernels longer: an uneven shard, not 'other or
    more kernels'). Empty where a step's kernels are not on record."""
    if not all(st in mix[hi] and st in mix[lo] for st, hi, lo, _, _ in rows):
        return ""
    new, n_hi, n_lo, both = [], [], [], []
    # per kernel and step: its extra time on the heavy rank, the part its extra launches make at the
    # light rank's mean duration, and its launches on each (pp_gpu's last stage: its LM head's GEMMs,
    # 56 launches a step against 48, were said to be "the same kernels running longer"); medians
    # over the steps throughout, as the counts printed are
    per: dict[str, list[tuple]] = {}
    for st, hi, lo, _, _ in rows:
        h, lt = mix[hi][st], mix[lo][st]
        new.append(sum(v[1] for k, v in h.items() if k not in lt))
        n_hi.append(sum(v[0] for v in h.values()))
        n_lo.append(sum(v[0] for v in lt.values()))
        # the kernels both run: the heavy rank's time, the light one's, and the light one's beside
        # its own NCCL kernels
        both.append(
            (
                sum(v[1] for k, v in h.items() if k in lt),
                sum(v[1] for k, v in lt.items() if k in h),
                sum(v[3] for k, v in lt.items() if k in h),
            )
        )
        for k, v in h.items():
            if k in lt:
                per.setdefault(k, []).append(
                    (v[1] - lt[k][1], (v[0] - lt[k][0]) * lt[k][1] / max(lt[k][0], 1), v[0], lt[k][0])
                )
    med = {k: [float(np.median([x[j] for x in xs])) for j in range(4)] for k, xs in per.items() if len(xs) == len(rows)}
    longer = {k: m[0] for k, m in med.items()}
    extra = float(np.median([x[4] for x in rows]))
    kh, kl = int(np.median(n_hi)), int(np.median(n_lo))
    if float(np.median(new)) >= 0.5 * extra:
        said = f" and runs kernels the lightest rank does not ({float(np.median(new)) / 1e6:.1f} ms a step of them)"
        hi_t, lo_t, lo_beside = (float(np.median([b[j] for b in both])) for j in range(3))
        if lo_t > 1.05 * hi_t and lo_beside > 0.5 * lo_t:
            # the light rank's share runs beside its NCCL kernels spinning while it waits, slower:
            # compared with it the extra work reads smaller (gpu_straggler: the same kernels 14.2 ms
            # a step there, 12.1 on rank 1; its six planted GEMMs 7.6 ms; an audit)
            said += (
                f"; on the kernels both run it takes {hi_t / 1e6:.1f} ms a step, the lightest rank "
                f"{lo_t / 1e6:.1f} ms, most of them beside that rank's NCCL kernels (sharing its SMs while it "
                "waits for the others): the lightest rank's compute is inflated by its waits"
            )
        return said
    if kh > (1 + SAME_WORK) * kl:
        return f" and runs more kernels ({kh:,} a step vs {kl:,})"
    top = [(k, x) for k, x in sorted(longer.items(), key=lambda kv: -kv[1])[:2] if x > 0]
    more_of = [k for k, _ in top if med[k][2] > med[k][3]]  # launched more often, as printed
    if top and more_of and sum(max(0.0, med[k][1]) for k, _ in top) >= 0.5 * sum(x for _, x in top):
        # most of their extra time is extra launches: more work, not slower kernels
        def launches(k: str) -> str:
            return f"{short_name(k)} +{longer[k] / 1e6:.1f} ms ({med[k][2]:,.0f} launches a step vs {med[k][3]:,.0f})"

        in_all = (
            f"though fewer kernels in all: {kh:,} a step vs {kl:,}"
            if kh < kl
            else f"{kh:,} kernels a step vs {kl:,} in all"
        )
        return (
            f": it launches some kernels more often ({in_all}), most in "
            f"{', '.join(launches(k) for k in more_of)} (more work on it: layers or a part of the model only it "
            "runs, or an uneven split)"
        )
    named = ", ".join(f"{short_name(k)} +{x / 1e6:.1f} ms" for k, x in top)
    return (
        f": kernels both ranks run take longer on it (it runs {kh:,} kernels a step, the lightest rank {kl:,}), "
        f"most in {named} a step (more work in each kernel, or a slower GPU)"
        if top
        else ""
    )


def compare_work(facts: dict[int, dict], rbs: list[RankBreakdown]) -> list[dict]:
    """One rank computes clearly more than the lightest in every step: load imbalance when it
    runs other work, SM contention or a slower GPU when it runs the same kernels."""
    from .rule_base import critical, finding

    if len(rbs) < 2:
        return []
    steps = sorted(s for s in set.intersection(*({s.step for s in rb.measured} for rb in rbs)) if s is not None)
    comp = {rb.rank: {s.step: s.compute_ns for s in rb.measured} for rb in rbs}
    rows = []
    for st in steps:
        v = {r: comp[r][st] for r in comp}
        hi, lo = max(v, key=v.__getitem__), min(v, key=v.__getitem__)
        if v[lo] <= 0:
            continue  # a rank that computed nothing in this step: no ratio to speak of
        rows.append((st, hi, lo, (v[hi] - v[lo]) / v[hi] if v[hi] else 0.0, v[hi] - v[lo]))
    if not rows or float(np.median([x[3] for x in rows])) < IMBALANCE or len({x[1] for x in rows}) != 1:
        return []
    r_heavy = rows[0][1]
    others = [rb.rank for rb in rbs if rb.rank != r_heavy]
    s0 = min(s.start_ns for rb in rbs for s in rb.measured)
    s1 = max(s.end_ns for rb in rbs for s in rb.measured)
    ratio = float(np.median([x[3] for x in rows]))
    extra = 1 / (1 - ratio) - 1 if ratio < 1 else 0.0
    per_rank = {str(r): round(float(np.median(list(comp[r].values()))) / 1e6, 3) for r in comp}
    lost = {st: ex for st, _, _, _, ex in rows}
    rb_heavy = next(rb for rb in rbs if rb.rank == r_heavy)
    mix = {r: (facts.get(r) or {}).get("kernels") or {} for r in comp}
    same = all(st in mix[hi] and st in mix[lo] and _same_work(mix[hi][st], mix[lo][st]) for st, hi, lo, _, _ in rows)
    base = {"compute_ms_per_step": per_rank, "imbalance": round(ratio, 4), "heaviest_rank": r_heavy}
    if not same:
        return [
            finding(
                "load_imbalance",
                "medium",
                # the heavy rank is the same in every step; the share is the steps' median (pp_gpu:
                # +10.5% in one step, 11% the median), so it is said as one
                f"Load imbalance: rank {r_heavy} computes more than the lightest rank in every step, a median "
                # (the figures are each rank's own median: their ratio need not be the share, an
                # audit read pp_gpu's 351.8 vs 314.7 as 12%, not 11%)
                f"{extra:.0%} more (the ranks' medians: {per_rank[str(r_heavy)]:.1f} ms vs "
                f"{min(per_rank.values()):.1f} ms of GPU compute a step){_how_heavier(mix, rows)}",
                [r_heavy] + others,
                None,
                s0,
                s1,
                base,
                impact_ns=sum(lost.values()),
            )
        ]
    # the same kernels: where is the extra time? per name, against the light rank's mean duration
    ex_beside, ex_all, n_beside = [], [], []
    by_name: dict[str, float] = {}
    for st, hi, lo, _, _ in rows:
        h, light = mix[hi][st], mix[lo][st]
        eb = ea = 0.0
        for nm, (cnt, ns, bc, bns) in h.items():
            mean = light[nm][1] / light[nm][0] if light.get(nm, [0])[0] else ns / max(cnt, 1)
            eb += bns - bc * mean
            ea += ns - cnt * mean
            by_name[nm] = by_name.get(nm, 0.0) + (bns - bc * mean) / len(rows)
        ex_beside.append(eb)
        ex_all.append(ea)
        n_beside.append(sum(v[2] for v in h.values()))
    eb, ea = float(np.median(ex_beside)), float(np.median(ex_all))
    kernels = int(np.median([sum(v[0] for v in mix[r_heavy][st].values()) for st, *_ in rows]))
    light_rank = rows[0][2]
    wait = float(np.median([s.wait_ns for s in rb_heavy.measured]))
    top = sorted(by_name.items(), key=lambda x: -x[1])[:3]
    m = dict(
        base,
        kernels_per_step=kernels,
        extra_ms_per_step=round(ea / 1e6, 3),
        beside_comm_extra_ms_per_step=round(eb / 1e6, 3),
        beside_comm_kernels_per_step=int(np.median(n_beside)),
        wait_ms_per_step=round(wait / 1e6, 3),
        slowed_kernels=[{"name": n, "extra_ms_per_step": round(x / 1e6, 3)} for n, x in top if x > 0],
    )
    head = (
        f"rank {r_heavy} runs the same {kernels:,} kernels a step as rank {light_rank}, but they take "
        f"{extra:.0%} longer ({per_rank[str(r_heavy)]:.1f} ms vs {per_rank[str(light_rank)]:.1f} ms of GPU compute)"
    )
    if ea > 0 and eb >= 0.5 * ea:
        spin = f", which spin {wait / 1e6:.1f} ms a step waiting for other ranks" if wait >= 500_000 else ""
        return [
            finding(
                "sm_contention",
                "medium",
                f"SM contention, not load imbalance: {head}; {eb / 1e6:.1f} ms of the {ea / 1e6:.1f} ms extra "
                f"is in the {int(np.median(n_beside)):,} kernels that run beside its own communication "
                f"kernels{spin}",
                [r_heavy] + others,
                None,
                s0,
                s1,
                m,
                impact_ns=critical(rb_heavy, lost),
            )
        ]
    return [
        finding(
            "slow_gpu",
            "medium",
            f"Slower GPU, not load imbalance: {head}, and not while it communicates",
            [r_heavy] + others,
            None,
            s0,
            s1,
            m,
            impact_ns=sum(lost.values()),
        )
    ]
