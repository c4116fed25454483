"""A step's length said once, the same way everywhere: the job's step time (from the dependency
replay, as steps[] and the what-if lines give it), not one rank's GPU window.

The rules measure a step on each rank: its GPU window with the idle around it. That is what
finds a slow step, but it is not the step's time: ddp_long's rank 1 spans 84 ms in step 6 while
the job's step 6 takes 79.4 ms (the window starts before the other rank ends step 5), and the
what-if line beside it said "39.3 ms (49%)" of the 79.4. Once the replay has the job's step times
the findings that say how long a step took are restated in them; where the job's step is not
itself slow (a rank's GPU ran long, hidden by the others), the rank's figure is kept and named as
the rank's, beside the step's own."""

from __future__ import annotations

import statistics

from .merge import warmup_text
from .outliers import MIN_RATIO, took_text
from .results import Analysis


def restate(analysis: Analysis, times: dict[int, int], measured: dict[int, int]) -> None:
    """times: every step's time (ns) in the replay with no change, warm-up included; measured:
    those of the profiled steps (no warm-up), whose median is the usual step."""
    if not measured:
        return
    med = float(statistics.median(measured.values()))
    for f in analysis.all_findings():
        old = f.metrics.get("duration_text")  # the rule's, in the rank's figures (kept: a Dask run says it)
        if f.step is None or f.step not in times or not isinstance(old, str) or old not in f.title or med <= 0:
            continue
        job = float(times[f.step])
        if f.rule == "warmup":
            new = warmup_text(job, med)
        elif f.rule == "step_outlier":
            new = _outlier_text(f.step, job, med, f.metrics)
        else:
            continue
        f.title = f.title.replace(old, new, 1)
        f.metrics.update(job_duration_text=new, job_step_ms=round(job / 1e6, 3), job_median_ms=round(med / 1e6, 3))


def _outlier_text(step: int, job: float, med: float, m: dict) -> str:
    if job >= MIN_RATIO * med:
        return took_text(step, job, med)
    # the rank's GPU window is long, the step is not (nsys_ddp_big's rank 1 spans 41 ms in step 1,
    # the job's step 1 takes 27.1): say both, each for what it is
    x, rmed = float(m.get("duration_ms") or 0.0), float(m.get("median_ms") or 0.0)
    ratio = f", {x / rmed:.1f}x its median {rmed:.1f} ms" if rmed > 0 else ""
    return (
        f"the GPU's step {step} lasted {x:.0f} ms (its first op to its last, with the idle around them){ratio} "
        # "the step itself" read as the rank's own step range (38.7 ms there, an audit): it is the job's
        f"(step {step}'s time for the job: {job / 1e6:.0f} ms, {job / med:.1f}x the median {med / 1e6:.1f} ms)"
    )
