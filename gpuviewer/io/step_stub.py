"""The ProfilerStep range a capture ends inside: `with profile(...) as p: for ...: train(); p.step()`
without a schedule opens one more ProfilerStep at the last p.step(), which the profiler's exit cuts
a few microseconds later. It holds nothing of the training loop, yet counted as a step it halved
medians and made "from N steps" one too many (HTA's MI250 trace: a 0.05 ms step 2 beside a
9.3 ms step 1). Told apart by what it lacks, not by its length: the rank's last step, with not one
runtime call (launch, copy, sync) starting inside it, where an earlier step has some. A host-only
job (no runtime call in any step) keeps every step."""

from __future__ import annotations

import numpy as np

from ..model.categories import Cat
from ..model.trace import Step

_RUNTIME = np.array([Cat.CUDA_RUNTIME, Cat.CUDA_DRIVER], np.int32)


def stopped_step(chunks: list[dict], steps: list[Step]) -> Step | None:
    """Of one rank's steps (its file's column chunks: start, cat), the last one when it is where
    the profiler stopped; None when there is none such."""
    if len(steps) < 2:
        return None
    starts = np.sort(
        np.concatenate([np.asarray(c["start"])[np.isin(c["cat"], _RUNTIME)] for c in chunks] or [np.zeros(0, np.int64)])
    )
    if not len(starts):
        return None
    order = sorted(steps, key=lambda s: (s.start, s.step))
    last = order[-1]

    def calls(s: Step) -> int:
        return int(np.searchsorted(starts, s.end, "left") - np.searchsorted(starts, s.start, "left"))

    if calls(last) or not any(calls(s) for s in order[:-1]):
        return None
    return last
