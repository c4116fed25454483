"""Low GPU utilization beside a slow outlier step (issue 24 audit): one stalled step can hold
most of a rank's idle time (JAX's step 4 sleep: 86% of it), so the finding also says the compute
share of the other steps, the figure a fix of the rest of the loop starts from."""

import collections
import gzip
import json
import re

import pytest
from conftest import trace_path

_SESSIONS: dict = {}


def _findings(path: str) -> list:
    if path not in _SESSIONS:
        from gpuviewer.session import Session

        _SESSIONS[path] = Session.open([path]).analysis.findings
    out, todo = [], list(_SESSIONS[path])
    while todo:
        f = todo.pop()
        out.append(f)
        todo += f.children
    return out


def _low_util(path: str):
    (f,) = [f for f in _findings(path) if f.rule == "low_gpu_utilization"]
    return f


def _raw_shares(path: str) -> tuple[str, float]:
    """From the raw file: the longest ProfilerStep (the outlier) and the other steps' compute
    share: non-NCCL kernels, placed in the step whose host range holds their launch call, over
    the steps' host ranges (in steady state the GPU's step is as long as the host's)."""
    with gzip.open(path, "rb") as f:
        ev = json.load(f)["traceEvents"]
    steps = sorted(
        (e["ts"], e["ts"] + e["dur"], int(e["name"].split("#")[1]))
        for e in ev
        if e.get("cat") == "user_annotation" and e.get("name", "").startswith("ProfilerStep#")
    )
    launch = {
        e["args"]["correlation"]: e["ts"]
        for e in ev
        if e.get("cat") in ("cuda_runtime", "cuda_driver") and "correlation" in e.get("args", {})
    }
    compute: collections.Counter = collections.Counter()
    for e in ev:
        if e.get("cat") != "kernel" or "nccl" in e["name"].lower():
            continue
        t = launch.get(e["args"].get("correlation"))
        for a, b, n in steps:
            if t is not None and a <= t < b:
                compute[n] += e["dur"]
                break
    slow = max(steps, key=lambda s: s[1] - s[0])
    rest = [s for s in steps if s is not slow]
    return str(slow[2]), sum(compute[n] for _, _, n in rest) / sum(b - a for a, b, _ in rest)


def test_step_outlier_says_the_other_steps_share():
    """step_outlier.json.gz: 1% over all steps (step 7's 3.3 s of pageable copies), 22% in the
    other nine, from the raw file."""
    path = trace_path("kineto", "step_outlier.json.gz")
    slow, share = _raw_shares(path)
    f = _low_util(path)
    m = re.search(r"; (\d+)% in the rank's steps other than its slow step (\d+)\)", f.title)
    assert m, f.title
    assert m.group(2) == slow
    assert int(m.group(1)) == pytest.approx(share * 100, abs=1.0)
    assert f.metrics["slow_steps"] == [int(slow)]
    assert f.metrics["utilization_other_steps"] == pytest.approx(share, abs=0.01)
    assert f.metrics["utilization"] < 0.05 < share  # the stall held the idle time
    # the slow step is the one step_outlier names
    (o,) = [x for x in _findings(path) if x.rule == "step_outlier"]
    assert str(o.step) == slow


def test_jax_stall_outside_its_slow_step():
    """The JAX trace's step-4 sleep: 8% over all steps, more than four times that elsewhere; the
    other steps' share is the compute over their GPU time (what each step's utilization says)."""
    f = _low_util(trace_path("jax", "jax_train_stall.trace.json.gz"))
    m = f.metrics
    assert m["slow_steps"] == [4]
    assert m["utilization_other_steps"] > 4 * m["utilization"]
    assert f"{m['utilization_other_steps']:.0%} in the rank's steps other than its slow step 4)" in f.title


@pytest.mark.parametrize("name", ["stall_off.json.gz", "stall_on.json.gz"])
def test_no_outlier_no_clause(name):
    """A stall in every step (stall_on) or none (stall_off): no step stands out, nothing is said
    of other steps (metamorphic: the clause comes with an outlier step only)."""
    f = _low_util(trace_path("whatif", name))
    assert "other than its slow step" not in f.title
    assert "slow_steps" not in f.metrics
    assert not [x for x in _findings(trace_path("whatif", name)) if x.rule == "step_outlier"]


def _busy_trace(path, stall_us: float, gemm_us: float) -> str:
    """Eight steps of two 1 ms GEMMs each, launched by one host thread and synchronised at the
    step's end (the shape of a small training loop); step 4 holds a host sleep of stall_us first.
    A file written here and read by the real reader."""
    ev, corr, t = [], 500, 1000.0
    host = {"pid": 200, "tid": 200}

    def x(cat, name, ts, dur, **args):
        ev.append({"ph": "X", "cat": cat, "name": name, "ts": ts, "dur": dur, **host, "args": args})

    for k in range(8):
        stall = stall_us if k == 4 else 0.0
        span = stall + 2 * gemm_us + 100
        x("user_annotation", f"ProfilerStep#{k}", t, span)
        if stall:
            x("cpu_op", "time.sleep", t + 1, stall - 2)
        g0 = t + stall + 9
        for j in range(2):
            corr += 1
            x("cuda_runtime", "cudaLaunchKernel", t + stall + 5 * j, 4.0, correlation=corr)
            ev.append(
                {
                    "ph": "X",
                    "cat": "kernel",
                    "name": "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64",
                    "pid": 0,
                    "tid": 7,
                    "ts": g0 + j * gemm_us,
                    "dur": gemm_us,
                    "args": {"device": 0, "stream": 7, "correlation": corr},
                }
            )
        x("cuda_runtime", "cudaDeviceSynchronize", t + stall + 10, g0 + 2 * gemm_us - (t + stall + 10) + 2)
        t += span
    with open(path, "w") as f:
        json.dump({"schemaVersion": 1, "traceEvents": ev}, f)
    return str(path)


def _rules(path: str) -> dict:
    from gpuviewer.session import Session

    out, todo = {}, list(Session.open([path]).analysis.findings)
    while todo:
        f = todo.pop()
        out[f.rule] = f
        todo += f.children
    return out


def test_busy_steps_around_one_stall_are_not_low_utilization(tmp_path):
    """The other steps compute 95% of their time: the 30 ms stall of step 4 is the outlier's
    finding, not a low utilization of the rank (whose advice about gaps would mislead); the same
    loop with lighter kernels (the other steps idle most of their time) keeps it, with the clause."""
    busy = _rules(_busy_trace(tmp_path / "busy.json", 30000.0, 1000.0))
    assert "step_outlier" in busy and busy["step_outlier"].step == 4
    assert "low_gpu_utilization" not in busy
    # (90 us GEMMs: idle a third of the other steps, with over 1 ms of GPU work in all, the least
    # rules.utilization judges)
    light = _rules(_busy_trace(tmp_path / "light.json", 30000.0, 90.0))
    f = light["low_gpu_utilization"]
    assert f.metrics["slow_steps"] == [4] and f.metrics["utilization_other_steps"] < 0.7
    assert "in the rank's steps other than its slow step 4)" in f.title
    # metamorphic: the busy loop without its stall has no outlier and no low utilization
    calm = _rules(_busy_trace(tmp_path / "calm.json", 0.0, 1000.0))
    assert "step_outlier" not in calm and "low_gpu_utilization" not in calm
