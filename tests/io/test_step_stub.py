"""The ProfilerStep a capture ends inside (the last p.step() before the profiler's exit, without a
schedule) is not a training step: HTA's MI250 trace counted an empty 0.05 ms step 2 beside its
9.3 ms step 1 ("from 2 steps"). It is left out of the steps, said in one warning, and kept on the
timeline. Kept as steps: a last step holding any event (a runtime call, a kernel alone), one that
starts before another step ends, one among other empty steps, and the last step of a file cut
short (the cut removed what it held)."""

import gzip
import json

import numpy as np
import pytest
from conftest import compat_path, trace_path, write_json_gz

import gpuviewer
from gpuviewer.session.analysis import analyze_session

MI250 = compat_path(
    "facebookresearch__HolisticTraceAnalysis", "amd_trace", "mi250_minitoy_train_ROCm6_2_kineto.json.gz"
)
OUTLIER = trace_path("kineto", "step_outlier.json.gz")
STOPPED = "before the profiler's exit leaves"


def _doc(path: str) -> dict:
    with gzip.open(path, "rt") as f:
        return json.load(f)


def _raw_steps(ev: list[dict]) -> list[tuple[int, float, float, int]]:
    """(step, start µs, end µs, other complete events starting inside) of the ProfilerStep ranges."""
    xs = [e for e in ev if e.get("ph") == "X"]
    out = []
    for e in xs:
        n = str(e.get("name", ""))
        if e.get("cat") == "user_annotation" and n.startswith("ProfilerStep#"):
            a, b = e["ts"], e["ts"] + e["dur"]
            inside = sum(1 for o in xs if a <= o["ts"] < b and not str(o.get("name", "")).startswith("ProfilerStep#"))
            out.append((int(n.split("#")[1]), a, b, inside))
    return sorted(out, key=lambda s: s[1])


def _warned(trace) -> list[str]:
    return [w for w in trace.warnings if STOPPED in w]


def test_the_step_the_profiler_stopped_in_is_not_counted():
    raw = _raw_steps(_doc(MI250)["traceEvents"])
    # the raw file: two ranges, the last one after the first and holding nothing
    assert [s[0] for s in raw] == [1, 2] and raw[1][1] >= raw[0][2] and raw[1][3] == 0 and raw[0][3] > 0
    t = gpuviewer.open(MI250, use_cache=False).trace
    assert [x.step for x in t.steps] == [1]
    said = _warned(t)
    assert len(said) == 1 and "ProfilerStep#2" in said[0], t.warnings
    assert f"({raw[1][2] - raw[1][1]:,.0f} us" in said[0]
    # still on the timeline: its range is a slice of the store
    assert np.count_nonzero(t.columns["name"] == t.names.index("ProfilerStep#2")) == 1


def _write(tmp_path, doc: dict, name: str = "t.json.gz") -> str:
    p = tmp_path / name
    write_json_gz(p, doc)
    return str(p)


def _with_stub(tmp_path, inside: list[dict], *, at: float | None = None, first: bool = False) -> tuple[str, int]:
    """step_outlier with one more ProfilerStep (40 µs, on its last step's thread) starting `at` µs
    (default: after its last event), holding the events `inside` (their ts relative to its start);
    placed first in the event list when `first`."""
    d = _doc(OUTLIER)
    ev = d["traceEvents"]
    steps = [e for e in ev if e.get("cat") == "user_annotation" and str(e.get("name", "")).startswith("ProfilerStep#")]
    last = max(steps, key=lambda e: e["ts"])
    end = max(e["ts"] + e.get("dur", 0) for e in ev if isinstance(e.get("ts"), (int, float)))
    n = int(last["name"].split("#")[1]) + 1
    t0 = end + 10 if at is None else at
    stub = dict(last, name=f"ProfilerStep#{n}", ts=t0, dur=40)
    extra = [stub] + [dict(e, ts=t0 + e["ts"]) for e in inside]
    d["traceEvents"] = extra + ev if first else ev + extra
    return _write(tmp_path, d), n


@pytest.fixture(scope="module")
def original():
    t = gpuviewer.open(OUTLIER, use_cache=False).trace
    return t, analyze_session(t).to_json()


@pytest.mark.parametrize("first", [False, True], ids=["appended", "first_in_file"])
def test_an_empty_stub_after_the_last_step_changes_nothing(tmp_path, original, first):
    """Metamorphic: the same capture stopped one p.step() later (its range anywhere in the file)
    gives the same steps and findings."""
    t0, before = original
    p, n = _with_stub(tmp_path, [], first=first)
    t = gpuviewer.open(p, use_cache=False).trace
    assert [(x.step, x.end - x.start) for x in t.steps] == [(x.step, x.end - x.start) for x in t0.steps]
    assert len(_warned(t)) == 1 and f"ProfilerStep#{n}" in _warned(t)[0]
    after = analyze_session(t).to_json()
    assert [(f["rule"], f["title"]) for f in after["findings"]] == [(f["rule"], f["title"]) for f in before["findings"]]


@pytest.mark.parametrize(
    "held",
    [
        {"ph": "X", "cat": "cuda_runtime", "name": "cudaDeviceSynchronize", "ts": 5, "dur": 1},
        {"ph": "X", "cat": "cpu_op", "name": "aten::empty", "ts": 5, "dur": 1},
        # a kernel alone, no launch on record (GPU work still running from the step before)
        {"ph": "X", "cat": "kernel", "name": "k", "ts": 5, "dur": 1, "args": {"device": 0, "stream": 7}},
    ],
    ids=["runtime_call", "cpu_op", "kernel_alone"],
)
def test_a_last_step_holding_an_event_is_a_step(tmp_path, original, held):
    t0, _ = original
    raw = _doc(OUTLIER)["traceEvents"]
    host = next(e for e in raw if str(e.get("name", "")).startswith("ProfilerStep#"))
    where = {"pid": host["pid"], "tid": host["tid"]} if held["cat"] != "kernel" else {"pid": 0, "tid": 7}
    p, n = _with_stub(tmp_path, [dict(held, **where)])
    t = gpuviewer.open(p, use_cache=False).trace
    assert [x.step for x in t.steps] == [x.step for x in t0.steps] + [n]
    assert not _warned(t)


def _steps_doc(spans: list[tuple[int, int]], held: list[int]) -> list[dict]:
    """ProfilerStep#i over spans[i] (µs), with a launch and its kernel 10 µs into each step in held."""
    ev = [
        {"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{i}", "pid": 1, "tid": 1, "ts": a, "dur": b - a}
        for i, (a, b) in enumerate(spans)
    ]
    for i in held:
        t = spans[i][0] + 10
        ev += [
            {
                "ph": "X",
                "cat": "cuda_runtime",
                "name": "cudaLaunchKernel",
                "pid": 1,
                "tid": 1,
                "ts": t,
                "dur": 5,
                "args": {"correlation": i + 1},
            },
            {
                "ph": "X",
                "cat": "kernel",
                "name": "k",
                "pid": 0,
                "tid": 7,
                "ts": t + 10,
                "dur": 50,
                "args": {"device": 0, "stream": 7, "correlation": i + 1},
            },
        ]
    return ev


def test_a_last_step_inside_another_is_a_step(tmp_path):
    """Step 2 starts inside step 1 and holds nothing: not a range left open after the others."""
    p = tmp_path / "nested.json"
    p.write_text(json.dumps({"traceEvents": _steps_doc([(1000, 1900), (2000, 2900), (2800, 2805)], [0, 1])}))
    t = gpuviewer.open(str(p), use_cache=False).trace
    assert [x.step for x in t.steps] == [0, 1, 2] and not _warned(t)
    p.write_text(json.dumps({"traceEvents": _steps_doc([(1000, 1900), (2000, 2900), (2950, 2955)], [0, 1])}))
    assert [x.step for x in gpuviewer.open(str(p), use_cache=False).trace.steps] == [0, 1]  # after it: a stub


def test_an_empty_last_step_among_empty_steps_is_a_step(tmp_path):
    """Nothing tells a stub from the empty steps before it: all are kept."""
    ev = [
        {
            "ph": "X",
            "cat": "user_annotation",
            "name": f"ProfilerStep#{i}",
            "pid": 1,
            "tid": 1,
            "ts": 1000 * i,
            "dur": 900,
        }
        for i in range(4)
    ] + [{"ph": "X", "cat": "cpu_op", "name": "aten::add", "pid": 1, "tid": 1, "ts": 10, "dur": 100}]
    p = tmp_path / "host.json"
    p.write_text(json.dumps({"traceEvents": ev}))
    t = gpuviewer.open(str(p), use_cache=False).trace
    assert [x.step for x in t.steps] == [0, 1, 2, 3] and not _warned(t)


def test_the_last_step_of_a_file_cut_short_is_kept(tmp_path):
    """A file cut while written keeps the ranges written before the cut; what its last step held
    was written after (Kineto writes the steps' ranges before the GPU events) and is lost, so that
    step looks empty. It is still a step: the cut, not the profiler, emptied it."""
    ev = _steps_doc([(1000, 1900), (2000, 2900), (3000, 3900)], [0, 1, 2])
    text = json.dumps({"traceEvents": ev})
    cut = text[: text.index('"ts": 3010')]  # inside the last step's launch call
    p = tmp_path / "cut.json"
    p.write_text(cut)
    t = gpuviewer.open(str(p), use_cache=False).trace
    assert any("ends early" in w for w in t.warnings), t.warnings
    assert [x.step for x in t.steps] == [0, 1, 2] and not _warned(t)
    # the same file whole, the last step's events removed: a stub
    p.write_text(json.dumps({"traceEvents": _steps_doc([(1000, 1900), (2000, 2900), (3000, 3900)], [0, 1])}))
    assert [x.step for x in gpuviewer.open(str(p), use_cache=False).trace.steps] == [0, 1]


def test_a_step_running_past_the_record_window_ends_at_it():
    """HTA's triton_example: ProfilerStep#1 was closed 13.3 s after Kineto's 'Record Window End'
    instant, 1.8 ms after it began, so its host time read '100% no op recorded'. The step ends at
    the window's end (from the raw file: its start and the instant, in microseconds), said in one
    warning; the other shared traces' steps all end inside their windows and are untouched."""
    path = compat_path("facebookresearch__HolisticTraceAnalysis", "triton_example", "triton_example.json.gz")
    ev = _doc(path)["traceEvents"]
    (win,) = [e["ts"] for e in ev if e.get("name") == "Record Window End"]
    (st,) = [e for e in ev if str(e.get("name", "")).startswith("ProfilerStep#")]
    t = gpuviewer.open(path).trace
    (s,) = t.steps_of_rank(0)
    assert abs((s.end - s.start) - (win - st["ts"]) * 1000) <= 1_000, (s, win - st["ts"])
    said = [w for w in t.warnings if "past the profiler's record window" in w]
    over = (st["ts"] + st["dur"] - win) / 1e3
    assert len(said) == 1 and "ProfilerStep#1" in said[0] and f"{over:,.2f} ms" in said[0], (said, over)
    a = analyze_session(t)
    assert a.ranks[0]["host_breakdown"]["framework"] > 0.5  # the recorded 1.8 ms: mostly ops
    for name in ("ddp", "ddp_clean"):
        other = gpuviewer.open(trace_path("kineto", name)).trace
        assert not [w for w in other.warnings if "record window" in w]
