"""A late rank's lateness in words: the parts it splits into (its host starting the step later,
its host taking longer to the launch, its kernel waiting longer in the GPU's queue) and the host
ops that ran longer, as the straggler findings say them (stragglers._why measures them)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from ..model.fmt import number_list, under_ms

if TYPE_CHECKING:
    from .collectives import Collectives

EXPLAINS = 0.25  # a host op named as a stall's reason took at least this share of its extra wait more
CARRIED_SHARE = 0.1  # an op's extra time a step under this share of the carried lag is a trifle beside it
SPREAD_SHARE = 0.5  # an op holding less of the host's extra work than this: the extra is spread over the step
# _why's figures beside the lateness parts (which add up to the lateness; these do not)
HOST_WORK, LAG_STEPS = "host_work_excess_ms", "lag_steps"


def beside(split: dict) -> tuple[dict, dict]:
    """(the lateness parts, the figures beside them) of _why's split."""
    keys = (HOST_WORK, LAG_STEPS)
    return {k: v for k, v in split.items() if k not in keys}, {k: split[k] for k in keys if k in split}


def explain_split(cause: str, split: dict, excess: list[dict], whose: str = "its", steps: list | None = None) -> str:
    """whose: the late rank as the sentence names it ("its", "rank 1's"); steps: the steps its
    figures are of, named (a merged finding lists several ranks' steps before it), else 'the
    steps' of the finding's own."""
    # an op's extra time a step feeds what the rank adds to its lateness each step (the lag's
    # growth, a later launch, a longer queue): it stands out at a quarter of that. A lag that does
    # not grow is an offset from before the capture, and an op under a tenth of it is a trifle
    # beside it (a growing lag's size grows with the capture's length: not compared)
    added = sum(max(0.0, split.get(k, 0.0)) for k in ("step_start_growth", "host_to_launch", "gpu_queue"))
    steady = split.get("step_start_growth", 0.0) < 0.5
    carried = max(0.0, split.get("step_start_median", 0.0)) if steady else 0.0
    small = bool(excess) and (excess[0]["ms"] < EXPLAINS * added or excess[0]["ms"] < CARRIED_SHARE * carried)
    # "most extra host time: cudaLaunchKernel +0.1 ms" beside a 14 ms lag explained nothing
    top = f" ({excess[0]['name']} +{excess[0]['ms']:.1f} ms)" if excess and not small else ""
    if cause == "gpu":
        return (
            f"{whose} GPU is busy longer: at the collective that waits longest for it each step, its kernel waits "
            f"{split['gpu_queue']:.1f} ms more in the GPU's queue after its launch{top}"
        )
    lag = split.get(LAG_STEPS) or []
    named = f"steps {number_list(steps)}" if steps else "the steps"
    between = (
        f"from step {lag[0]} to step {lag[-1]}" if steps and len(lag) == 2 else "from its first late step to its last"
    )
    bits = []
    if split["step_start"] >= 0.5:
        grow = split.get("step_start_growth", 0.0)
        rate = (
            # a swing over twice its net change: no rate, its range (stragglers._why)
            f"it varied, between {split['step_start_min']:.1f} and {split['step_start_max']:.1f} ms"
            if "step_start_min" in split
            # the lag's change from its first late step to its last over the steps between: an
            # average (tp's grew 22.8 then 6.1 ms), said as one
            else f"it grew {grow:.1f} ms a step on average"
            if grow >= 0.05
            else f"it shrank {-grow:.1f} ms a step on average"
            if grow <= -0.05
            else "it did not grow"
        )
        bits.append(
            f"{whose} host starts {named} {split['step_start_median']:.1f} ms after the others' in the median step "
            f"(a lag carried over from the step before; {between} {rate})"
        )
    if split["host_to_launch"] >= 0.5:
        # measured at one collective a step (_why): said so, not as every collective's delay. The
        # op is given as its reason only where its extra time fits in it: tp's "takes 1.4 ms longer
        # ... (nn.Module: GPT_0 +9.5 ms)" named an op whose extra time went mostly elsewhere (the
        # lag grew 14.5 ms a step); it is then said on its own, after
        fits = bool(top) and excess[0]["ms"] <= 1.1 * split["host_to_launch"]
        bits.append(
            f"takes {split['host_to_launch']:.1f} ms longer from the step's start to launching the collective "
            f"that waits longest for it{top if fits else ''}"
        )
    what = " and ".join(bits) if bits else f"{whose} host launches the collective that waits longest for it later" + top
    more = split.get(HOST_WORK, 0.0)
    if top and top not in what and excess[0]["ms"] < SPREAD_SHARE * more:
        # one op's extra time beside a host slower everywhere (gpu_straggler: DDP's forward +4.2
        # ms of +12.5, its backward +4.2 and its optimizer +2.8 beside it; an audit's finding)
        what += (
            f"; {whose} host works {more:.1f} ms a step longer than the others' in ops and launch calls (syncs and "
            f"waits left out), spread over the step: the most in one op, {excess[0]['name']} +{excess[0]['ms']:.1f} "
            "ms a step on average"
        )
    elif top and top not in what:
        # (an op's extra time is the steps' mean: tp's GPT_0 +11.0, +6.9, +10.5 said as +9.5, beside
        # the medians the line gives elsewhere; an audit)
        what += f"; most extra host time: {excess[0]['name']} +{excess[0]['ms']:.1f} ms a step on average"
    elif small:
        what += (
            f"; no one op of its host stands out (the most extra host time: {excess[0]['name']} "
            f"+{excess[0]['ms']:.1f} ms a step on average)"
        )
    return ("input: " if cause == "input" else "") + what


def blocked_clause(rbs, waiting: list[int], steps: list, each: float) -> tuple[str, float | None]:
    """Beside the waits (NCCL kernels spinning on the waiting ranks' GPUs): how long the waiting
    ranks' hosts block in syncs a step (median of the steps, mean over those ranks), where that is
    under half the waits. ddp_clean's rank 0 waits 36.5 ms a step on its GPU while its host blocks
    0.03 ms; fsdp's rank 0 107.7 ms while its host blocks 22.7: 'waits' read as the rank's lost
    time, which the what-if then contradicted with a few ms (helper-102)."""
    by = {rb.rank: {s.step: s for s in rb.steps} for rb in rbs if rb.rank in waiting}
    per = [  # (a step no waiting rank holds is left out, not counted as no sync)
        sum(by[r][x].host_sync_ns for r in by if x in by[r]) / sum(1 for r in by if x in by[r])
        for x in steps
        if any(x in by[r] for r in by)
    ]
    if not per or not by or each <= 0:
        return "", None
    blocked = float(np.median(per))
    if blocked >= 0.5 * each:
        return "", None
    gpu = "the waiting rank's GPU, whose host" if len(waiting) == 1 else "the waiting ranks' GPUs, whose hosts"
    verb = "blocks" if len(waiting) == 1 else "block"
    if blocked <= 0:
        return f"; those waits are NCCL kernels spinning on {gpu} {verb} in no sync in the median step", 0.0
    # (from the ns, as the metric is: _ms's 3 places first said 5.949949 ms as 6.0)
    said = under_ms(blocked) if blocked < 1e6 else f"{blocked / 1e6:.1f} ms"
    return (
        f"; those waits are NCCL kernels spinning on {gpu} {verb} {said} in syncs in the median step",
        round(blocked / 1e6, 6),
    )


def halves_clause(colls: Collectives, g: tuple, steps: list[int]) -> str:
    """The late steps in which the ranks g came last at no more than half of the collectives, said
    (ddp_nop2p's step 5: last at 7 of its 14, 'arrives last in 4 of 4 steps' read as every one;
    an audit). Late there by the waits it caused, which were the longer."""
    gs, want = set(g), set(steps)
    n: dict[int, int] = {}
    k: dict[int, int] = {}
    for ins in colls.instances:  # (one pass: thousands of collectives over dozens of steps)
        if ins.step in want:
            n[ins.step] = n.get(ins.step, 0) + 1
            k[ins.step] = k.get(ins.step, 0) + (ins.late_rank in gs)
    got = [f"step {s} at {k[s]} of its {n[s]}" for s in steps if s in n and 2 * k[s] <= n[s]]
    if not got:
        return ""
    return f" (in {', '.join(got)} only, where the waits {'it' if len(g) == 1 else 'they'} caused were the longer)"
