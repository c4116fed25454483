"""A Kineto capture made without the profiler's schedule records no ProfilerStep ranges; its
iterations are still marked by torch.optim's own 'Optimizer.step#SGD.step' ranges. HTA's
step_based_trace was read as one whole-capture step ('130 kernels a step' over five iterations):
the steps are now the spans from one optimizer step's end to the next's, checked here against the
raw file's ranges."""

import gzip
import json

import pytest
from conftest import compat_path, run_cli

import gpuviewer

HTA = compat_path(
    "facebookresearch__HolisticTraceAnalysis", "with_gpu_user_annotation", "step_based_trace_2543932.json.gz"
)
# PyTorch 1.8's autograd profiler: the range is an 'Operator' event, not a user annotation
TB = compat_path("pytorch__kineto", "tb_plugin_resnet50_autograd_api_num_workers_0_worker0.pt.trace.json.gz")


def _raw_optimizer_steps(path: str, cat: str) -> list[tuple[int, int]]:
    with gzip.open(path, "rt") as f:
        d = json.load(f)
    ev = d["traceEvents"] if isinstance(d, dict) else d
    got = [
        (round(e["ts"] * 1000), round((e["ts"] + e["dur"]) * 1000))
        for e in ev
        if e.get("ph") == "X" and e.get("cat") == cat and str(e.get("name", "")).startswith("Optimizer.step#")
    ]
    return sorted(got)


@pytest.mark.parametrize(("path", "cat"), [(HTA, "user_annotation"), (TB, "Operator")], ids=["hta", "tb_plugin"])
def test_steps_run_from_one_optimizer_step_to_the_next(path, cat):
    raw = _raw_optimizer_steps(path, cat)
    assert len(raw) >= 5
    s = gpuviewer.open(path)
    steps = sorted(s.trace.steps, key=lambda x: x.start)
    assert [x.step for x in steps] == list(range(1, len(raw)))
    t0 = steps[0].start - raw[0][1]  # the session's clock base
    for x, prev, cur in zip(steps, raw, raw[1:]):
        assert abs(x.start - t0 - prev[1]) <= 1 and abs(x.end - t0 - cur[1]) <= 1


def test_analyze_says_where_the_steps_come_from():
    r = run_cli("analyze", HTA, "--json")
    assert r.returncode == 0, r.stderr
    a = json.loads(r.stdout)
    raw = _raw_optimizer_steps(HTA, "user_annotation")
    assert [s["step"] for s in a["steps"]] == list(range(1, len(raw)))
    assert any("no ProfilerStep ranges" in n and "Optimizer.step" in n for n in a["notes"]), a["notes"]
