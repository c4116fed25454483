"""The host's pace between launches: a rank whose GPU, fed many kernels, waits for the host's next
launch in gaps under a millisecond for a good part of its time, though the gaps are too long for
the launch path alone (launch.py's launch-bound needs them under 100 us and the kernels tiny).
The host's work between launches (Python, framework hooks, autograd) is slower than the kernels
it launches: FSDP's backward on fsdp's rank 1 left its GPU waiting 87 ms of a 126 ms step in gaps
of 0.1-4 ms, and no finding said so, while a replay without that work saved 68 ms a step (an
audit's finding). Said as the launch-bound family's finding (rule launch_bound, metrics
host_paced), priced by the same replay."""

from __future__ import annotations

from .breakdown import RankBreakdown
from .launch import (
    SHORT_GAP_NS,
    _per_gradient,
    host_split,
    is_host_paced,
    is_launch_bound,
    kernel_figures,
    launch_bound,
    step_launch,
    steps_metrics,
    zero_grad,
)
from .whatif_change import OTHER_WORK_NS

ADVICE = (
    "The GPU waits for the host between launches: the host's work between kernels (Python, framework "
    "hooks, autograd, module code) takes longer than the kernels it launches. Capture the step in CUDA "
    "graphs or compile it (torch.compile; mode='reduce-overhead' adds CUDA graphs), cut the per-step "
    "Python work (hooks, many small modules; with FSDP, fewer and larger wrapped units), and give each "
    "kernel more work (a larger batch per step)."
)
CUDA_ADVICE = (
    "The GPU waits for the host between launches: the host's work between kernels takes longer than "
    "the kernels it launches. Move that work off the launching thread or before the loop, capture the "
    "repeated launch sequence in a CUDA graph, and give each kernel more work."
)
JAX_ADVICE = (
    "The GPU waits for the host between dispatches: the host's Python between them takes longer than "
    "the work it dispatches. Put the whole step in one jitted function (loops in lax.scan or fori_loop) "
    "so it dispatches once, and give each step more work (a larger batch)."
)


def launch_family(trace, rb: RankBreakdown, ks: dict) -> list[dict]:
    """The launch_bound rule: launch-bound, else host-bound between launches, from one
    step_launch of the rank."""
    per = step_launch(trace, rb)
    return launch_bound(trace, rb, ks, per) or host_paced_rule(trace, rb, per)


def host_paced_rule(trace, rb: RankBreakdown, per: dict) -> list[dict]:
    """The finding where most of the rank's measured steps are host-paced or launch-bound (a rank
    launch_bound did not find launch-bound: its rule runs first)."""
    steps = [s for s in rb.measured if s.step in per]
    hit = [s for s in steps if is_launch_bound(per[s.step], s.gpu_time_ns) or is_host_paced(per[s.step], s.gpu_time_ns)]
    return host_paced(trace, rb, per, steps, hit) if steps and 2 * len(hit) > len(steps) else []


def host_paced(trace, rb: RankBreakdown, per: dict, steps: list, hit: list) -> list[dict]:
    """The finding for the steps `hit` (most of `steps`), from launch.step_launch's rows `per`."""
    from .rule_base import deferred, finding

    xs = [per[s.step] for s in hit]
    n = len(hit)
    short_ns, short_n = sum(x["gap_ns"] for x in xs), sum(x["gaps"] for x in xs)
    mid_ns, mid_n = sum(x.get("mid_gap_ns", 0) for x in xs), sum(x.get("mid_gaps", 0) for x in xs)
    long_ns = sum(x.get("long_gap_ns", 0) for x in xs) - mid_ns  # the waits of 1 ms or more
    long_n = sum(x.get("long_gaps", 0) for x in xs) - mid_n
    paced = short_ns + mid_ns  # what the rule judges (is_host_paced)
    waits = paced + long_ns
    busy = sum(x["busy_ns"] for x in xs)
    share = paced / max(1, busy + paced)
    comm_in = sum(x.get("gap_comm_ns", 0) + x.get("long_gap_comm_ns", 0) for x in xs) / max(waits, 1)
    kf = kernel_figures(xs, hit, steps)
    kernels, mean_k, med_k, compute, where = kf["kernels"], kf["mean_k"], kf["med_k"], kf["compute"], kf["where"]
    said = f"{comm_in:.0%}" != "0%"
    who = "its work other than NCCL's waits" if said else "the GPU waits"
    nccl = f"; NCCL kernels ran in {comm_in:.0%} of that time" if said else ""

    def part(ns: int, k: int, what: str) -> str:
        return f"{ns / n / 1e6:.1f} ms in {k / n:,.0f} {what}"

    parts = [part(short_ns, short_n, f"gaps under {SHORT_GAP_NS // 1000} µs")]
    parts.append(part(mid_ns, mid_n, f"of {SHORT_GAP_NS // 1000} µs to {OTHER_WORK_NS // 1_000_000} ms"))
    if long_n:
        parts.append(part(long_ns, long_n, f"of {OTHER_WORK_NS // 1_000_000} ms or more"))
    title = (
        f"Rank {rb.rank}: host-bound between launches{where} — {who} for the host's next launch "
        f"{waits / n / 1e6:.1f} ms a step ({waits / max(1, busy + waits):.0%} of the time it spends running "
        f"{'that work' if said else 'kernels'} or waiting so{nccl}): {', '.join(parts)}; "
        f"{kernels / n:,.0f} kernels a step of {mean_k:.1f} µs on average (median {med_k:.1f} µs); "
        f"compute {compute:.0%} of its time{' in them' if where else ''}"
    )
    per_grad, coll, grads = _per_gradient(trace, rb, hit)
    title += per_grad + zero_grad(trace, rb, hit) + host_split(hit)
    f = finding(
        "launch_bound",
        "high" if share >= 0.5 else "medium",
        title,
        [rb.rank],
        None,
        min(s.start_ns for s in hit),
        max(s.end_ns for s in hit),
        {
            "host_paced": True,
            "kernels": kernels,
            "kernels_per_step": round(kernels / n, 1),
            "mean_kernel_us": round(mean_k, 3),
            "median_kernel_us": round(med_k, 3),
            "launch_waits_per_step": round((short_n + mid_n) / n, 1),
            "launch_idle_ms_per_step": round(paced / n / 1e6, 3),
            "launch_idle_share": round(share, 4),
            "launch_gap_nccl_share": round(comm_in, 4),
            "short_gap_ms_per_step": round(short_ns / n / 1e6, 3),
            "mid_gap_ms_per_step": round(mid_ns / n / 1e6, 3),
            "long_gap_ms_per_step": round(max(0, long_ns) / n / 1e6, 3),
            "host_wait_ms_per_step": round(waits / n / 1e6, 3),
            "idle_fraction": round(kf["idle"], 4),
            "compute_share": round(compute, 4),
            **steps_metrics(trace, rb, hit, steps, coll, grads),
        },
    )
    f["advice"] = ADVICE
    return [deferred(f, {s.step: per[s.step]["gap_ns"] + per[s.step].get("mid_gap_ns", 0) for s in hit})]
