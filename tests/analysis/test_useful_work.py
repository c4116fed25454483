"""Useful-work utilization and the critical path in `analyze` (issue 24, items 5 and 2).

"GPU utilization" is the compute share of a rank's GPU time: NCCL kernels spinning while they wait
for another rank, and copies, keep the GPU busy without doing the model's work. Beside it: NCCL
transfer, NCCL waiting, copies, idle; the host's step time split into framework ops, launch calls,
blocking syncs and idle. Every step of `analyze --json` carries its critical path across ranks,
whose segments tile the step, and the job says what bounds it."""

import functools
import gzip
import json
import os
import re
import sqlite3

import analysis_truth as T
import numpy as np
import pytest
from conftest import compat_path, run_cli, run_cli_once, shared_listdir, trace_path

# every shared trace with steps (as tests/analysis/test_critical_path.py: launch_bound_big left out for time),
# and a capture with no step ranges (its whole capture is one step)
TRACES = (
    [os.path.join("kineto", n) for n in shared_listdir(trace_path("kineto")) if n != "launch_bound_big.json.gz"]
    + [os.path.join("nsys", n) for n in shared_listdir(trace_path("nsys"))]
    + [os.path.join("whatif", n) for n in shared_listdir(trace_path("whatif")) if n.endswith(".json.gz")]
)
H100 = compat_path("GindaChen__nsys-ai", "h100_2gpu_1s.sqlite")
_SESSIONS: dict = {}


def _session(path):
    """One opened and analysed session per trace for the whole module."""
    if path not in _SESSIONS:
        from gpuviewer.session import Session

        s = Session.open([path])
        s.run_analysis()
        _SESSIONS[path] = s
    return _SESSIONS[path]


def _measured(r: dict) -> list[dict]:
    return [s for s in r["steps"] if not s["warmup"]] or r["steps"]


def test_ddp_clean_compute_share_is_the_gpu_utilization():
    """ddp_clean rank 0: 77% of its GPU time is busy, but NCCL kernels waiting for rank 1 are most of
    that; its compute share is 25-32%, and that is what "GPU utilization" says."""
    a = _session(trace_path("kineto", "ddp_clean")).analysis
    r = a.rank(0)
    steps = _measured(r)
    gpu_time = sum(s["end_ns"] - s["start_ns"] + s["idle_before_ns"] + s["idle_after_ns"] for s in steps)
    assert r["gpu_utilization"] == pytest.approx(sum(s["compute_ns"] for s in steps) / gpu_time, abs=1e-4)
    assert 0.25 <= r["gpu_utilization"] <= 0.32
    sh = r["utilization_breakdown"]
    assert sh["compute"] == r["gpu_utilization"] and sh["busy"] > 0.7  # busy: NCCL waits counted
    assert sh["nccl_wait"] > 0.4
    assert sh["busy"] + sh["idle"] == pytest.approx(1.0, abs=2e-4)
    for s in steps:
        assert s["utilization"] == pytest.approx(
            s["compute_ns"] / (s["end_ns"] - s["start_ns"] + s["idle_before_ns"] + s["idle_after_ns"]), abs=1e-4
        )
        assert s["busy_share"] >= s["utilization"]


@functools.lru_cache(maxsize=4)
def _raw_events(path: str) -> list[dict]:
    with gzip.open(path, "rt") as f:
        return json.load(f)["traceEvents"]


def _raw_host_window(path: str, step: int) -> tuple[float, float]:
    """The ProfilerStep#N range of a Kineto file, µs."""
    ev = _raw_events(path)
    e = next(e for e in ev if e.get("ph") == "X" and e.get("name") == f"ProfilerStep#{step}")
    return e["ts"], e["ts"] + e["dur"]


def test_host_breakdown_adds_up_to_the_host_step():
    """The host's split (framework ops, launch calls, syncs, idle) tiles each step's host range,
    which is the ProfilerStep range read here from the raw file; launches are on record."""
    a = _session(trace_path("kineto", "ddp_clean")).analysis
    r = a.rank(0)
    for s in r["steps"]:
        parts = (
            s["host_framework_ns"]
            + s["host_launch_ns"]
            + s["host_queue_ns"]
            + s["host_sync_ns"]
            + s["host_wait_ns"]
            + s["host_idle_ns"]
        )
        t0, t1 = _raw_host_window(trace_path("kineto", "ddp_clean", "ddp_clean_rank0.json.gz"), s["step"])
        assert parts == s["host_end_ns"] - s["host_start_ns"]
        assert parts / 1e3 == pytest.approx(t1 - t0, abs=1.0)
        assert s["host_launch_ns"] > 0
        assert s["host_queue_ns"] == 0  # a host-bound run: the GPU is never 1,024 ops behind
    assert sum(r["host_breakdown"].values()) == pytest.approx(1.0, abs=1e-3)


def test_time_under_only_the_frames_around_a_step_is_no_op_recorded():
    """step_outlier's step 7 ends with 116 ms in which its thread records nothing but the script's
    frames around every step (<module>, main, the loop's function): the host line said it as
    framework ops ('no op recorded 0%') beside a finding naming it time with no op recorded
    (helper-113). Recomputed here from the raw file: the step's range less every host event of its
    launching thread (the step's own range and the frames around the whole range left out)."""
    path = trace_path("kineto", "step_outlier.json.gz")
    ev = [e for e in _raw_events(path) if e.get("ph") == "X"]
    tids = {e["tid"] for e in ev if e.get("cat") == "cuda_runtime" and e["name"] == "cudaLaunchKernel"}
    host = [
        e
        for e in ev
        if e["tid"] in tids
        and e.get("cat") in ("cpu_op", "python_function", "user_annotation", "cuda_runtime", "cuda_driver")
        and not e["name"].startswith("ProfilerStep#")
    ]
    r = _session(path).analysis.rank(0)
    worst = max(r["steps"], key=lambda s: s["host_idle_ns"])
    assert worst["step"] == 7
    for s in r["steps"]:
        t0, t1 = _raw_host_window(path, s["step"])
        mine = [
            (max(e["ts"], t0), min(e["ts"] + e["dur"], t1))
            for e in host
            if not (e["ts"] <= t0 and e["ts"] + e["dur"] >= t1)
        ]
        mine = [(a, b) for a, b in mine if b > a]
        unseen_us = (t1 - t0) - T.union_length([a for a, _b in mine], [b for _a, b in mine])
        assert s["host_idle_ns"] / 1e3 == pytest.approx(unseen_us, abs=5 + 0.001 * (t1 - t0)), s["step"]
    assert worst["host_idle_ns"] > 100e6  # the 116 ms after the step's work
    line = run_cli_once("analyze", path).stdout
    assert f"no op recorded {r['host_breakdown']['idle']:.0%}" in line and r["host_breakdown"]["idle"] >= 0.02, line


def test_a_python_sleep_is_a_wait_not_framework_work():
    """dataloader_stall's input pipeline sleeps in Python each step (the tracer's
    '<built-in function sleep>' event, inside the step's Python frames): the host split says it as
    a wait, equal to the sleeps' time in each ProfilerStep read here from the raw file, not as the
    'framework ops 95%' the frames around it made it."""
    path = trace_path("kineto", "dataloader_stall.json.gz")
    a = _session(path).analysis
    r = a.rank(0)
    sleeps = [e for e in _raw_events(path) if e.get("ph") == "X" and e.get("name") == "<built-in function sleep>"]
    assert sleeps
    for s in r["steps"]:
        t0, t1 = (T._ns(t) for t in _raw_host_window(path, s["step"]))
        ivs = [(T._ns(e["ts"]), T._ns(e["ts"]) + T._ns(e["dur"])) for e in sleeps]
        got = T.union_length([max(a, t0) for a, b in ivs], [min(b, t1) for a, b in ivs])
        assert s["host_wait_ns"] == pytest.approx(got, abs=1000 * len(sleeps)), s["step"]
        assert s["host_wait_ns"] > s["host_framework_ns"]  # most of the step, its frames the rest
    host = r["host_breakdown"]
    assert host["wait"] > 0.5 and host["framework"] < 0.5
    line = run_cli_once("analyze", path).stdout
    assert f"waits (sleep, locks, queues, polls) {host['wait']:.0%}" in line, line
    # a trace without Python waits never prints the part (as the launch queue's, never as 0%)
    assert "waits (" not in run_cli_once("analyze", trace_path("kineto", "ddp_clean")).stdout


def test_an_os_sleep_on_the_loops_thread_is_a_wait():
    """nsys_ddp's rank 1 sleeps 50 ms in clock_nanosleep (OS runtime trace) before step 6: its
    host split says it as a wait, equal to the sleeps inside each NVTX 'step N' range of the
    thread that holds them, read here from the raw export; it was 'no op recorded'. The shares
    printed add up to 102% there: the line says so."""
    import sqlite3

    path = trace_path("nsys", "nsys_ddp.sqlite")
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        pid_of = {}
        for (gid,) in db.execute("SELECT DISTINCT globalTid FROM NVTX_EVENTS WHERE text LIKE 'step %'"):
            pid_of[gid] = gid // 0x1000000 % 0x1000000
        steps = db.execute("SELECT globalTid, text, start, end FROM NVTX_EVENTS WHERE text LIKE 'step %'").fetchall()
        sleeps = db.execute(
            "SELECT o.globalTid, o.start, o.end FROM OSRT_API o JOIN StringIds s ON s.id = o.nameId "
            "WHERE s.value IN ('clock_nanosleep', 'nanosleep', 'usleep', 'sleep')"
        ).fetchall()
    finally:
        db.close()
    by_pid = sorted(pid_of.values())
    a = _session(path).analysis
    seen = 0
    for gid, text, t0, t1 in steps:
        rank = by_pid.index(pid_of[gid])
        want = sum(max(0, min(e, t1) - max(s, t0)) for g, s, e in sleeps if g == gid)
        step = next((s for s in a.rank(rank)["steps"] if s["step"] == int(text.split()[1])), None)
        if step is None:  # warm-up left out of the ranks' steps
            continue
        # (all of it but what the other launching threads' recorded calls cover: 0.26 ms of 50.3)
        assert want * 0.98 <= step["host_wait_ns"] <= max(want, 1) * 1.001, (rank, text)
        seen += want > 0
    assert seen >= 1  # the planted sleep
    line = next(ln for ln in run_cli_once("analyze", path).stdout.splitlines() if ln.startswith("rank 1:"))
    assert "waits (sleep, locks, queues, polls)" in line, line
    shares = [int(x) for x in re.findall(r" (\d+)%", line.split("; host:")[0].split(" (they")[0])]
    if sum(shares) >= 102:
        assert f"they add up to {sum(shares)}%" in line, line


def test_a_jax_python_sleep_is_a_wait():
    """JAX's Python tracer names a sleep "$time sleep" (PyTorch's: "<built-in function sleep>"): the
    planted 30 ms sleep of the JAX trace was 'framework ops 86%'. Its step's wait is the sleep's
    time inside that step's host window, from the raw file."""
    path = trace_path("jax", "jax_train_stall.trace.json.gz")
    events = [e for e in _raw_events(path) if e.get("ph") == "X"]
    (sleep,) = [e for e in events if e.get("name") == "$time sleep"]
    t0, t1 = T._ns(sleep["ts"]), T._ns(sleep["ts"]) + T._ns(sleep["dur"])
    r = _session(path).analysis.rank(0)
    got = sum(s["host_wait_ns"] for s in r["steps"])
    inside = sum(
        max(0, min(t1, s["host_end_ns"]) - max(t0, s["host_start_ns"])) for s in r["steps"] if not s.get("warmup")
    )
    assert inside > 20e6  # the planted 30 ms, in a measured step
    assert got == pytest.approx(inside, abs=0.02e6)
    assert r["host_breakdown"]["wait"] > r["host_breakdown"]["framework"]


def _raw_queue_full_us(path: str, t0: float, t1: float) -> float:
    """From the raw Kineto file: the time in [t0, t1] of launch calls made on a full launch queue."""
    calls = T.queue_full_launches(_raw_events(path))
    return sum(max(0.0, min(e["ts"] + e["dur"], t1) - max(e["ts"], t0)) for e in calls)


def test_launch_calls_on_a_full_queue_are_said_apart():
    """pp_gpu is GPU-bound: its hosts spend most of each step inside launch calls that wait for a
    slot in CUDA's launch queue (1,024 ops ahead of the GPU). That is the GPU being behind, not
    launch overhead: the split says it apart, equal to the figure computed here from the raw file.
    The first traced step too: the ~1,000 ops launched before the capture began still fill the
    queue there (they counted as launch overhead: 118 ms of rank 0's step 2, 5-7 ms in the others)."""
    a = _session(trace_path("kineto", "pp_gpu")).analysis
    for rank in (0, 1):
        r = a.rank(rank)
        path = trace_path("kineto", "pp_gpu", f"pp_gpu_rank{rank}.json.gz")
        for s in r["steps"]:
            t0, t1 = _raw_host_window(path, s["step"])
            want = _raw_queue_full_us(path, t0, t1)
            assert s["host_queue_ns"] / 1e3 == pytest.approx(want, rel=0.01, abs=2.0), (rank, s["step"])
            assert s["host_queue_ns"] > 10 * s["host_launch_ns"], (rank, s["step"])
        assert r["host_breakdown"]["queue"] > 0.5
    r = run_cli_once("analyze", trace_path("kineto", "pp_gpu"))
    line = next(ln for ln in r.stdout.splitlines() if ln.startswith("rank 0:"))
    assert f"blocked on a full launch queue {a.rank(0)['host_breakdown']['queue']:.0%}" in line, line


def test_fsdp_prints_compute_share_with_nccl_waiting_beside_it():
    """fsdp rank 0: 100% busy but ~30% computing; the text says the compute share and the NCCL
    waiting beside it, on the rank's line and in the low-utilization finding."""
    r = run_cli("analyze", trace_path("kineto", "fsdp"))
    assert r.returncode == 0, r.stderr
    line = next(ln for ln in r.stdout.splitlines() if ln.startswith("rank 0:"))
    a = _session(trace_path("kineto", "fsdp")).analysis.rank(0)
    assert 0.25 <= a["gpu_utilization"] <= 0.35
    assert line.startswith(
        f"rank 0: GPU utilization {a['gpu_utilization']:.0%} (compute); "
        f"NCCL waiting {a['utilization_breakdown']['nccl_wait']:.0%}"
    )
    assert a["utilization_breakdown"]["nccl_wait"] > 0.5
    assert "bound by: " in r.stdout
    f = next(
        f for f in _session(trace_path("kineto", "fsdp")).analysis.all_findings() if f.rule == "low_gpu_utilization"
    )
    assert "GPU utilization" in f.title and "GPU busy" not in f.title


def test_copies_that_fill_the_capture_are_the_finding():
    """h100_2gpu_1s: 97% of the GPU's time is memcpy (mostly host-to-device) and 2% compute: the top
    finding says copies, with the saving of the what-if that removes them; never "no findings"."""
    r = run_cli("analyze", H100)
    assert r.returncode == 0, r.stderr
    assert "no findings" not in r.stdout and "GPU utilization 99%" not in r.stdout
    a = _session(H100).analysis
    top = a.findings[0]
    assert top.rule == "copy_bound" and top.metrics["copy_share"] >= 0.9
    assert top.saves_ms is not None and top.saves_ms > 0
    # the share is of every copy; the host-to-device ones are most of it, named with their own
    # time, and they come from pinned memory (srcKind 1), so the advice is not "pin your memory"
    con = sqlite3.connect(f"file:{H100}?mode=ro", uri=True)
    per_gpu = con.execute(
        "SELECT deviceId, sum(end - start), sum(CASE WHEN srcKind = 1 THEN end - start ELSE 0 END) "
        "FROM CUPTI_ACTIVITY_KIND_MEMCPY WHERE copyKind = 1 GROUP BY deviceId"
    ).fetchall()
    con.close()
    # the title is the worst rank's: one of the two GPUs' host-to-device time
    assert any(f"host-to-device {htod / 1e6:,.1f} ms of it" in top.title for _d, htod, _p in per_gpu), top.title
    assert all(p >= 0.99 * h for _d, h, p in per_gpu)
    assert "pin_memory=True" not in top.advice
    # where they come from: FSDP's CPU offload, each unit's parameters copied in before its
    # forward (an audit: the finding did not say so). Counted here: the host-to-device copies
    # whose cudaMemcpyAsync ran inside an NVTX range 'FSDP::pre_forward (<module>)' of its thread
    con = sqlite3.connect(f"file:{H100}?mode=ro", uri=True)
    inside = con.execute(
        "SELECT m.deviceId, count(*), sum(m.end - m.start) FROM CUPTI_ACTIVITY_KIND_MEMCPY m "
        "JOIN CUPTI_ACTIVITY_KIND_RUNTIME r ON r.correlationId = m.correlationId AND r.globalTid / 16777216 = m.globalPid / 16777216 "
        "WHERE m.copyKind = 1 AND EXISTS (SELECT 1 FROM NVTX_EVENTS n WHERE n.globalTid = r.globalTid "
        "AND n.start <= r.start AND n.end >= r.end AND n.text LIKE 'FSDP::pre_forward (%') GROUP BY m.deviceId"
    ).fetchall()
    con.close()
    got = top.metrics["issued_in"]
    assert got["name"] == "FSDP::pre_forward"
    assert any(got["copies"] == n and abs(got["ms"] - ns / 1e6) <= 0.01 for _d, n, ns in inside), (got, inside)
    assert f"{got['copies']:,} of its" in top.title and "were issued in FSDP::pre_forward" in top.title
    # of the copies whose launch call is in the capture (116 of a GPU's 225 have none: an audit
    # read "107 of 225" as most copies coming from elsewhere), said beside it
    con = sqlite3.connect(f"file:{H100}?mode=ro", uri=True)
    called = con.execute(
        "SELECT m.deviceId, count(*) FROM CUPTI_ACTIVITY_KIND_MEMCPY m JOIN CUPTI_ACTIVITY_KIND_RUNTIME r "
        "ON r.correlationId = m.correlationId AND r.globalTid / 16777216 = m.globalPid / 16777216 "
        "WHERE m.copyKind = 1 GROUP BY m.deviceId"
    ).fetchall()
    con.close()
    assert any(got["with_launch_call"] == n for _d, n in called), (got, called)
    assert f"({got['copies']:,} of the {got['with_launch_call']:,} whose launch call is on record)" in top.title
    assert "CPUOffload(offload_params=True)" in top.advice
    assert [e["name"] for e in top.metrics["evidence"]][0] == "Memcpy HtoD (Pinned -> Device)"
    # the saving is the what-if's, run here through the session
    res = _session(H100).whatif("no-copies")
    assert top.saves_ms == pytest.approx(res.saves_ns / 1e6, abs=0.01)
    assert "low_gpu_utilization" in {c.rule for c in top.children}
    for r_ in a.ranks:
        assert r_["gpu_utilization"] < 0.05 and r_["utilization_breakdown"]["copy"] > 0.9


_COMPAT = {
    "compat:h100_2gpu_1s": H100,
    # blocking copies: a pageable host-to-device copy ends after its cudaMemcpy returns
    "compat:cloverleaf": compat_path("hpcgroup__pipit", "perlmutter-cloverleaf-cuda.sqlite"),
    "compat:saxpy": compat_path("hpcgroup__pipit", "saxpy-mpi-cuda_nsys_perlmutter0.sqlite"),
}


@pytest.mark.parametrize("name", TRACES + sorted(_COMPAT))
def test_each_step_has_its_critical_path(name):
    """analyze --json's steps[]: each step's critical path tiles it (segments end to end, adding up
    to its duration within 2%), runs to the step's time the what-if replays, and covers every rank's
    host range of the step; the job names what bounds it."""
    path = _COMPAT[name] if name.startswith("compat:") else trace_path(name)
    s = _session(path)
    out = s.analysis.to_json()
    assert out["steps"] and isinstance(out["bound_by"], str) and out["bound_by"]
    before = {st.step: st.before_ns for st in s.whatif("faster", "no kernel has this name:50").steps}
    assert [x["step"] for x in out["steps"]] == sorted(before)
    host_end = {}
    for r in out["ranks"]:
        for st in r["steps"]:
            if st["step"] is not None:
                host_end[st["step"]] = max(host_end.get(st["step"], 0), st["host_end_ns"])
    for st in out["steps"]:
        segs = st["critical_path"]
        dur = st["end_ns"] - st["start_ns"]
        assert segs[0]["start_ns"] == st["start_ns"] and segs[-1]["end_ns"] == st["end_ns"]
        assert all(a["end_ns"] == b["start_ns"] for a, b in zip(segs, segs[1:]))
        assert abs(sum(x["end_ns"] - x["start_ns"] for x in segs) - dur) <= 0.02 * dur
        assert dur == before[st["step"]]
        assert st["end_ns"] >= host_end.get(st["step"], 0)
        assert st["bound_by"] and {x["resource"] for x in segs} <= {"host", "gpu", "comm", "copy", "idle"}


SAXPY = compat_path("hpcgroup__pipit", "saxpy-mpi-cuda_nsys_perlmutter0.sqlite")


def test_blocking_copies_are_waited_for_by_their_own_call():
    """saxpy (nsys 2021): 15 pageable copies, each made by a blocking cudaMemcpy on the one host
    thread. A device-to-host call waits for its own copy; a host-to-device call stages its data
    the copy's whole length. The no-copies replay takes both away (copies take no time, nor their
    calls: data kept on the GPU, or pinned and asynchronous): it saves at least all the copies'
    time, within 3% (the raw file's durations summed: an audit's estimate, 285 ms, where it saved
    the device-to-host copies' 98.8 ms alone), and at most the calls' time (374 ms). Before that:
    the call's own copy was not among the ops it waited for, and the export's second record of
    every call (cudaMemcpy around cudaMemcpy_v3020, one correlation id) kept its host time: 0.07
    of 285 ms. Each call is read once: the CUDA API events are the distinct (thread, correlation
    id, name) of the raw runtime rows."""
    db = sqlite3.connect(f"file:{SAXPY}?mode=ro", uri=True)
    try:
        copies = sum(e - s for s, e in db.execute("SELECT start, end FROM CUPTI_ACTIVITY_KIND_MEMCPY"))
        # device-to-host (copyKind 2): the call returns after its copy ends; a pageable
        # host-to-device copy's call returns once the data is staged, before the copy ends
        d2h = sum(e - s for s, e in db.execute("SELECT start, end FROM CUPTI_ACTIVITY_KIND_MEMCPY WHERE copyKind = 2"))
        n_copies = db.execute("SELECT count(*) FROM CUPTI_ACTIVITY_KIND_MEMCPY").fetchone()[0]
        # the calls' time: each call once (the outer cudaMemcpy record, not its _v3020 twin)
        in_calls = db.execute(
            "SELECT sum(r.end - r.start) FROM CUPTI_ACTIVITY_KIND_RUNTIME r JOIN StringIds s ON s.id = r.nameId "
            "WHERE s.value = 'cudaMemcpy'"
        ).fetchone()[0]
        strings = dict(db.execute("SELECT id, value FROM StringIds"))
        calls = {
            (g, c, re.sub(r"_v\d+$", "", strings[n])) if c else (g, -i, strings[n])
            for i, (g, c, n) in enumerate(
                db.execute("SELECT globalTid, correlationId, nameId FROM CUPTI_ACTIVITY_KIND_RUNTIME")
            )
        }
    finally:
        db.close()
    s = _session(SAXPY)
    res = s.whatif("no-copies")
    assert n_copies == 15 and copies > 250e6 and d2h > 90e6
    assert 0.97 * copies <= res.saves_ns <= in_calls, (res.saves_ns / 1e6, copies / 1e6, in_calls / 1e6)
    from gpuviewer.model.categories import Cat

    cat = np.asarray(s.trace.columns["cat"])
    n_api = int(((cat == Cat.CUDA_RUNTIME) | (cat == Cat.CUDA_DRIVER)).sum())
    assert n_api == len(calls), (n_api, len(calls))


ARRAYFORM = compat_path("pytorch__kineto", "tb_plugin_resnet50_num_workers_0_worker0.ARRAYFORM.pt.trace.json.gz")


def test_a_data_loader_stall_before_a_pageable_copy_is_removed_by_its_what_if():
    """tb_plugin's ResNet-50 (2020 format): each step's GPU idles ~50 ms while the host runs the
    DataLoader, then a pageable cudaMemcpyAsync stages the 19 MB batch and its copy starts 250 us
    into the 2.5 ms call. Removing the host gap saves, in each step, between 90% and 100% of the
    GPU's idle before that copy (the raw file: the copy's start less the end of the
    GPU op before it). Before, the copy was taken to wait for its stream, not its call, and every
    step saved 0."""
    with gzip.open(ARRAYFORM, "rt") as f:
        ev = json.load(f)
    gpu = sorted(
        (e["ts"], e["ts"] + e["dur"], e["name"], e.get("args", {}).get("bytes", 0))
        for e in ev
        if e.get("ph") == "X" and e.get("cat") in ("Kernel", "Memcpy", "Memset")
    )
    idle = []
    for k, (s, _e, name, nbytes) in enumerate(gpu):
        if name.startswith("Memcpy HtoD") and nbytes > 10_000_000 and k:
            idle.append((s - max(x[1] for x in gpu[:k])) * 1000)  # ns
    res = _session(ARRAYFORM).whatif("remove-gap", "0:all")
    saves = [st.before_ns - st.after_ns for st in res.steps]
    assert len(saves) == len(idle) == 6  # one batch copy a step
    for got, want in zip(saves, idle):
        assert 0.9 * want <= got <= want * 1.001, (got / 1e6, want / 1e6)


def test_a_capture_without_cuda_calls_says_what_its_host_ops_did():
    """HTA's distributed_info_unavailable: CPU ops only, no CUDA call on record. Its host line
    said 'framework ops 0% ... no op recorded 100%' (the breakdown read only threads that launch
    GPU work, here none); the ops cover 98.7% of its one step (the raw file: the union of its ops
    inside the ProfilerStep range, the range itself left out)."""
    path = compat_path("facebookresearch__HolisticTraceAnalysis", "distributed_info_unavailable")
    f = os.path.join(path, os.listdir(path)[0])
    with gzip.open(f, "rt") as fh:
        ev = json.load(fh)["traceEvents"]
    step = next(e for e in ev if str(e.get("name", "")).startswith("ProfilerStep#"))
    s0, s1 = step["ts"], step["ts"] + step["dur"]
    spans = sorted(
        (max(e["ts"], s0), min(e["ts"] + e["dur"], s1))
        for e in ev
        if e.get("ph") == "X" and e is not step and e["ts"] < s1 and e["ts"] + e["dur"] > s0
    )
    covered, reach = 0.0, s0
    for a, b in spans:
        if b > reach:
            covered += b - max(a, reach)
            reach = b
    share = covered / (s1 - s0)
    p = run_cli("analyze", path)
    assert p.returncode == 0, p.stderr
    m = re.search(r"host: framework ops (\d+)%.*no op recorded (\d+)%", p.stdout)
    assert m, p.stdout
    assert abs(int(m.group(1)) / 100 - share) <= 0.015 and abs(int(m.group(2)) / 100 - (1 - share)) <= 0.015, (
        m.group(0),
        share,
    )


def test_copies_that_are_most_of_the_gpus_work_are_a_finding():
    """saxpy: the GPU idles 66% of the time for its host (MPI), and of what it does, copies are
    3.2x its compute: 15 blocking pageable copies (26% of its time) against 8% of kernels. No
    finding said so (the rule wanted copies at 30% of the time); it is copy_bound now, its saving
    the no-copies replay's (all of the copies' time: the host waits for each). Shares against the
    raw file: the copies' and kernels' time over the GPU's first op to its last."""
    db = sqlite3.connect(f"file:{SAXPY}?mode=ro", uri=True)
    try:
        cp = [(s, e) for s, e in db.execute("SELECT start, end FROM CUPTI_ACTIVITY_KIND_MEMCPY")]
        kn = [(s, e) for s, e in db.execute("SELECT start, end FROM CUPTI_ACTIVITY_KIND_KERNEL")]
    finally:
        db.close()
    span = max(e for _s, e in cp + kn) - min(s for s, _e in cp + kn)
    copy, comp = sum(e - s for s, e in cp) / span, sum(e - s for s, e in kn) / span
    out = json.loads(run_cli_once("analyze", SAXPY, "--json").stdout)
    f = next(f for f in out["findings"] if f["rule"] == "copy_bound")
    m = re.search(
        r"copies fill (\d+)% of the GPU's time \(([\d,.]+) ms[^;]*\);(?: its [^;]*;)? compute (\d+)%", f["title"]
    )
    assert m, f["title"]
    assert abs(int(m.group(1)) / 100 - copy) <= 0.006 and abs(int(m.group(3)) / 100 - comp) <= 0.006, (
        f["title"],
        copy,
        comp,
    )
    assert abs(float(m.group(2).replace(",", "")) - sum(e - s for s, e in cp) / 1e6) <= 0.05
    assert 0 < f["saves_ms"] <= 1.01 * sum(e - s for s, e in cp) / 1e6  # the calls' few us beyond their copies
    assert out["findings"][0] is f  # the largest saving


def test_no_copies_takes_away_copy_calls_only():
    """HTA's negative_queue: besides its memcpy and memset calls, 20 cudaGraphLaunch calls launch
    graphs whose first node is a memset; a review found --no-copies zeroed those too (a graph's
    launch overhead, not a copy's). The calls taken away are exactly the memcpy/memset calls whose
    correlation id has a copy or memset in the raw file."""

    d = compat_path("facebookresearch__HolisticTraceAnalysis", "negative_queue_length_values_check")
    with gzip.open(os.path.join(d, "rank0.json.gz"), "rt") as fh:
        ev = [e for e in json.load(fh)["traceEvents"] if e.get("ph") == "X"]
    ops = {(e.get("args") or {}).get("correlation") for e in ev if e.get("cat") in ("gpu_memcpy", "gpu_memset")}
    calls = [
        e for e in ev if e.get("cat") == "cuda_runtime" and (e.get("args") or {}).get("correlation") in ops - {None}
    ]
    copy_calls = [e for e in calls if re.search(r"memcpy|memset", e["name"], re.I)]
    assert len(calls) > len(copy_calls) and any(e["name"] == "cudaGraphLaunch" for e in calls)
    r = run_cli("whatif", d, "--no-copies", "--json")
    assert r.returncode == 0, r.stderr
    note = next(n for n in json.loads(r.stdout)["notes"] if "memory copies and sets set to 0" in n)
    assert note.endswith(f"and the {len(copy_calls):,} calls that issued them"), (note, len(copy_calls))


def _union(iv_list: list[tuple[float, float]]) -> list[tuple[float, float]]:
    """Disjoint sorted intervals (µs) covering those given (analysis_truth.union, in ns)."""
    s, e = T.union([T._ns(a) for a, _b in iv_list], [T._ns(b) for _a, b in iv_list])
    return [(a / 1e3, b / 1e3) for a, b in zip(s.tolist(), e.tolist())]


def _minus(u: list[tuple[float, float]], v: list[tuple[float, float]]) -> list[tuple[float, float]]:
    """u less v: each interval of u less what v (sorted by start) covers of it."""
    return [g for a, b in u for g in T.gaps(v, a, b)]


def test_python_code_with_no_op_under_it_is_said_apart_within_framework_ops():
    """ddp_clean's host line said 'framework ops 84%' where about a quarter of the host's time has
    no aten op or CUDA call under it, only the Python tracer's frames (helper-115). The share is
    said within framework ops; recomputed here from the raw rank file: per measured step, on the
    launching thread, frames and ranges (not those around the whole step, nor the step's own
    range) less CUDA calls, less aten ops, less the time under annotated ranges alone."""
    path = trace_path("kineto", "ddp_clean", "ddp_clean_rank1.json.gz")
    ev = [e for e in _raw_events(path) if e.get("ph") == "X"]
    tids = {e["tid"] for e in ev if e.get("cat") == "cuda_runtime" and e["name"] == "cudaLaunchKernel"}
    a = _session(trace_path("kineto", "ddp_clean")).analysis
    r = a.rank(1)
    got = total = 0.0
    for s in _measured(r):
        t0, t1 = _raw_host_window(path, s["step"])

        def of(cats):
            return _union(
                [
                    (max(e["ts"], t0), min(e["ts"] + e["dur"], t1))
                    for e in ev
                    if e["tid"] in tids
                    and e.get("cat") in cats
                    and not e["name"].startswith("ProfilerStep#")
                    and e["ts"] < t1
                    and e["ts"] + e["dur"] > t0
                    and not (e["ts"] <= t0 and e["ts"] + e["dur"] >= t1)
                ]
            )

        calls = of(("cuda_runtime", "cuda_driver"))
        fw = _minus(of(("cpu_op", "python_function", "user_annotation")), calls)
        ops = of(("cpu_op",))
        note_only = _minus(fw, _union(ops + of(("python_function",))))
        py_only = _minus(_minus(fw, ops), note_only)
        got += sum(b - a for a, b in py_only)
        total += t1 - t0
    share = got / total
    assert share > 0.1  # a real part of the host's time
    assert r["host_python_only"] == pytest.approx(share, abs=0.01)
    line = run_cli_once("analyze", trace_path("kineto", "ddp_clean")).stdout
    assert f"{r['host_python_only']:.0%} in Python code with no op or call under it" in line, line


def test_the_loop_threads_wait_in_run_backward_is_said():
    """Kineto records no OS calls: ddp_clean's main thread sits in run_backward while the autograd
    thread runs the backward, 64-71% of each step, and the host line said nothing of it where nsys
    says the same wait (helper-115). Recomputed from the raw rank files: the run_backward calls on
    the thread holding the ProfilerStep ranges, inside the measured steps, over their time."""
    a = _session(trace_path("kineto", "ddp_clean")).analysis
    line = run_cli_once("analyze", trace_path("kineto", "ddp_clean")).stdout
    for rank in (0, 1):
        path = trace_path("kineto", "ddp_clean", f"ddp_clean_rank{rank}.json.gz")
        ev = [e for e in _raw_events(path) if e.get("ph") == "X"]
        loop = {e["tid"] for e in ev if e["name"].startswith("ProfilerStep#")}
        back = [
            e
            for e in ev
            if e["tid"] in loop and e["name"].startswith("<built-in method run_backward of torch._C._EngineBase")
        ]
        r = a.rank(rank)
        got = total = 0.0
        for s in _measured(r):
            t0, t1 = _raw_host_window(path, s["step"])
            got += sum(max(0.0, min(e["ts"] + e["dur"], t1) - max(e["ts"], t0)) for e in back)
            total += t1 - t0
        assert got / total > 0.5
        assert r["host_loop_wait"] == pytest.approx(got / total, abs=0.01)
        said = re.search(
            rf"^rank {rank}: .*in autograd's run_backward, (\d+)% of the host time: its other threads' work", line, re.M
        )
        assert said and int(said[1]) == round(100 * r["host_loop_wait"]), line
