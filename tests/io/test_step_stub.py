"""The ProfilerStep a capture ends inside (the last p.step() before the profiler's exit, without a
schedule) is not a training step: HTA's MI250 trace counted a 0.05 ms step 2 beside its 9.3 ms step
1 ("from 2 steps"). It is left out of the steps, said in one warning, and kept on the timeline; a
last step with a runtime call in it, and the steps of a host-only capture, are all kept."""

import gzip
import json

import pytest
from conftest import compat_path, trace_path

import gpuviewer
from gpuviewer.session.analysis import analyze_session

MI250 = compat_path(
    "facebookresearch__HolisticTraceAnalysis", "amd_trace", "mi250_minitoy_train_ROCm6_2_kineto.json.gz"
)
RUNTIME = ("cuda_runtime", "cuda_driver")


def _events(path: str) -> list[dict]:
    with gzip.open(path, "rt") as f:
        d = json.load(f)
    return d["traceEvents"] if isinstance(d, dict) else d


def _raw_steps(ev: list[dict]) -> list[tuple[int, float, float, int]]:
    """(step, start µs, end µs, runtime calls starting inside) of the file's ProfilerStep ranges."""
    calls = [e["ts"] for e in ev if e.get("ph") == "X" and e.get("cat") in RUNTIME]
    out = []
    for e in ev:
        n = str(e.get("name", ""))
        if e.get("ph") == "X" and e.get("cat") == "user_annotation" and n.startswith("ProfilerStep#"):
            inside = sum(1 for t in calls if e["ts"] <= t < e["ts"] + e["dur"])
            out.append((int(n.split("#")[1]), e["ts"], e["ts"] + e["dur"], inside))
    return sorted(out, key=lambda s: s[1])


def test_the_step_the_profiler_stopped_in_is_not_counted():
    raw = _raw_steps(_events(MI250))
    # the raw file: two ranges, the last one short and without a single runtime call
    assert [s[0] for s in raw] == [1, 2] and raw[-1][3] == 0 and raw[0][3] > 0
    s = gpuviewer.open(MI250, use_cache=False)
    assert [x.step for x in s.trace.steps] == [1]
    said = [w for w in s.trace.warnings if "where the profiler stopped" in w]
    assert len(said) == 1 and "ProfilerStep#2" in said[0]
    assert f"({(raw[-1][2] - raw[-1][1]) / 1000:,.2f} ms" in said[0]
    # still on the timeline: the range event itself is kept
    assert "ProfilerStep#2" in s.trace.names


def _with_last_step(tmp_path, src: str, calls: list[str]) -> tuple[str, int]:
    """src with one more ProfilerStep after its last event (on the thread of its last step), holding
    the runtime calls named."""
    ev = _events(src)
    steps = [e for e in ev if e.get("cat") == "user_annotation" and str(e.get("name", "")).startswith("ProfilerStep#")]
    last = max(steps, key=lambda e: e["ts"])
    end = max(e["ts"] + e.get("dur", 0) for e in ev if isinstance(e.get("ts"), (int, float)))
    n = int(last["name"].split("#")[1]) + 1
    stub = dict(last, name=f"ProfilerStep#{n}", ts=end + 10, dur=40)
    extra = [stub] + [
        {
            "ph": "X",
            "cat": "cuda_runtime",
            "name": c,
            "pid": last["pid"],
            "tid": last["tid"],
            "ts": end + 20 + i,
            "dur": 1,
        }
        for i, c in enumerate(calls)
    ]
    with gzip.open(src, "rt") as f:
        d = json.load(f)
    d["traceEvents"] = ev + extra
    p = tmp_path / "with_stub.json.gz"
    with gzip.open(p, "wt") as f:
        json.dump(d, f)
    return str(p), n


@pytest.fixture(scope="module")
def original():
    s = gpuviewer.open(trace_path("kineto", "step_outlier.json.gz"), use_cache=False)
    return s.trace, analyze_session(s.trace).to_json()


def test_a_stub_added_after_the_last_step_changes_nothing(tmp_path, original):
    """Metamorphic: the same capture stopped one p.step() later gives the same steps and analysis."""
    trace, before = original
    p, n = _with_last_step(tmp_path, trace_path("kineto", "step_outlier.json.gz"), [])
    s = gpuviewer.open(p, use_cache=False)
    assert [(x.step, x.end - x.start) for x in s.trace.steps] == [(x.step, x.end - x.start) for x in trace.steps]
    assert any(f"ProfilerStep#{n}" in w for w in s.trace.warnings)
    after = analyze_session(s.trace).to_json()
    assert [(f["rule"], f["title"]) for f in after["findings"]] == [(f["rule"], f["title"]) for f in before["findings"]]


def test_a_last_step_with_a_runtime_call_is_a_step(tmp_path, original):
    trace, _ = original
    p, n = _with_last_step(tmp_path, trace_path("kineto", "step_outlier.json.gz"), ["cudaDeviceSynchronize"])
    s = gpuviewer.open(p, use_cache=False)
    assert [x.step for x in s.trace.steps] == [x.step for x in trace.steps] + [n]
    assert not any("profiler stopped" in w for w in s.trace.warnings)


def test_a_host_only_capture_keeps_every_step(tmp_path):
    ev = [
        {
            "ph": "X",
            "cat": "user_annotation",
            "name": f"ProfilerStep#{i}",
            "pid": 1,
            "tid": 1,
            "ts": 1000 * i,
            "dur": 900 if i < 3 else 5,
        }
        for i in range(4)
    ] + [
        {"ph": "X", "cat": "cpu_op", "name": "aten::add", "pid": 1, "tid": 1, "ts": 1000 * i + 10, "dur": 100}
        for i in range(3)
    ]
    p = tmp_path / "host.json"
    p.write_text(json.dumps({"traceEvents": ev}))
    s = gpuviewer.open(str(p), use_cache=False)
    assert [x.step for x in s.trace.steps] == [0, 1, 2, 3]
