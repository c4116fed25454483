"""One definition of the step a view shows (model.view.step_shown), for the step box and the
step keys: the step whose window (its ranks' first start to last end, from the raw ProfilerStep
ranges here) fills 60% of the view or more. The keys used the best overlap over the union with no
threshold, so a view of three steps was 'step 3' for ] and no step for the box."""

from __future__ import annotations

import os

from conftest import SAMPLES
from kineto_truth import load_json

import gpuviewer


def _raw_windows() -> dict[int, tuple[int, int]]:
    """step -> (first start, last end) over the ranks, in µs of the raw files."""
    out: dict[int, list[float]] = {}
    folder = os.path.join(SAMPLES, "ddp")
    for name in sorted(os.listdir(folder)):
        events, _ = load_json(os.path.join(folder, name))
        for e in events:
            if str(e.get("name", "")).startswith("ProfilerStep#") and e.get("ph") == "X":
                n = int(e["name"].split("#")[1])
                w = out.setdefault(n, [e["ts"], e["ts"] + e["dur"]])
                w[0], w[1] = min(w[0], e["ts"]), max(w[1], e["ts"] + e["dur"])
    return {n: (a, b) for n, (a, b) in out.items()}


def test_the_step_a_view_shows():
    from gpuviewer.model.view import step_range, step_shown

    raw = _raw_windows()
    s = gpuviewer.open(os.path.join(SAMPLES, "ddp"))
    t = s.trace
    numbers = sorted(raw)
    assert len(numbers) >= 3
    for n in numbers:
        a, b = step_range(t, n)
        assert abs((b - a) / 1e3 - (raw[n][1] - raw[n][0])) < 0.01  # µs
        assert step_shown(t, a, b) == n  # the step's own window
        pad = (b - a) // 4  # 2/3 of the view is the step
        assert step_shown(t, a - pad, b + pad) == n
    first, last = step_range(t, numbers[0]), step_range(t, numbers[-1])
    assert step_shown(t, first[0], last[1]) is None  # several steps: none
    # the keys go by it: from a view of every step, ] goes to the step after the view's middle
    s.set_range(first[0], last[1])
    mid = (first[0] + last[1]) / 2
    after = min((n for n in numbers if step_range(t, n)[0] > mid), default=numbers[-1])
    assert s.step_nav(+1) == after
    assert step_shown(t, *s.view.range) == after
