"""Where the first profiled step begins (analysis/step_windows.py): at the host start of the rank
that begins it last, moved later only by as much as that rank's GPU was still behind, which is
never more than the step's first op waited after its own launch. Expected times are read from the
raw events here, not from the code under test."""

import gzip
import json

import pytest
from conftest import shift_gpu_clock, trace_path, write_json_gz

LAUNCHES = 50  # a step
PROLOGUE_US = 1000  # host work before a step's first launch
KERNEL_US = 400  # each kernel: 50 of them are 20 ms of GPU work a 10 ms host step queues


def _x(cat: str, name: str, pid: int, tid: int, ts: int, dur: int, **args) -> dict:
    """A complete ('X') Kineto event."""
    return {"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": tid, "ts": ts, "dur": dur, "args": args}


def _gpu_behind_after_an_idle_start(path) -> str:
    """One rank, four 10 ms host steps, each a 1 ms prologue, then 50 launches 100 us apart of
    400 us kernels: the GPU is idle as step 1 begins (its first kernel starts 5 us after its
    launch) and falls 10 ms further behind every step, so nearly every launch waits 300 us or more
    (the rank's quickest launches are far slower than a launch takes)."""
    ev, gpu_free, corr = [], 0, 0
    for s in range(1, 5):
        t0 = (s - 1) * 10_000
        ev.append(_x("user_annotation", f"ProfilerStep#{s}", 1, 1, t0, 10_000))
        ev.append(_x("cpu_op", "prologue", 1, 1, t0, PROLOGUE_US))
        for j in range(LAUNCHES):
            corr += 1
            at = t0 + PROLOGUE_US + 100 * j
            ev.append(_x("cuda_runtime", "cudaLaunchKernel", 1, 1, at, 5, correlation=corr))
            start = max(at + 5, gpu_free)
            gpu_free = start + KERNEL_US
            ev.append(_x("kernel", "gemm", 0, 7, start, KERNEL_US, correlation=corr, device=0, stream=7))
    p = path / "idle_start.json.gz"
    write_json_gz(p, {"traceEvents": ev})
    return str(p)


def _raw_first_step_us(path: str) -> float:
    """From the raw events: the first step's ProfilerStep start to the last end of the kernels
    launched inside it."""
    with gzip.open(path, "rt") as f:
        ev = json.load(f)["traceEvents"]
    a, b = next((e["ts"], e["ts"] + e["dur"]) for e in ev if e["name"] == "ProfilerStep#1")
    launched = {e["args"]["correlation"] for e in ev if e["cat"] == "cuda_runtime" and a <= e["ts"] <= b}
    return max(e["ts"] + e["dur"] for e in ev if e["cat"] == "kernel" and e["args"]["correlation"] in launched) - a


def test_a_gpu_idle_as_the_first_step_begins_is_not_behind(tmp_path):
    """The rank's launches are slow everywhere else, but the first step's first kernel starts 5 us
    after its launch: the step starts at the host's start, not later by the host's prologue (the
    cap was the first op's start less the host's: the step lost 0.6 ms, its prologue less 5 us
    being over the quickest launch latency)."""
    from gpuviewer.session import Session

    path = _gpu_behind_after_an_idle_start(tmp_path)
    s = Session.open([path], use_cache=False)
    cp = s.critical_paths()[1]
    assert cp.duration_ns / 1e3 == pytest.approx(_raw_first_step_us(path), abs=10)


def test_a_lag_on_a_rank_that_starts_early_does_not_move_the_first_step(tmp_path):
    """tp: rank 1's host begins step 2 22.9 ms before rank 0's; its GPU runs 18-24 ms behind it
    (its quickest launches wait that long). Its GPU clock 5 ms later makes its lag look 5 ms longer,
    which must not move the step: it begins where rank 0, the last, begins it (58.11 ms both; the
    lag of every rank counted made it 56.58)."""
    from gpuviewer.session import Session

    folder = trace_path("kineto", "tp")
    shift_gpu_clock(folder, tmp_path, 1, 5000)
    before = Session.open([folder]).critical_paths()
    after = Session.open([str(tmp_path)], use_cache=False).critical_paths()
    assert after[2].duration_ns == pytest.approx(before[2].duration_ns, rel=0.002)
