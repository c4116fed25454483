"""What-if replay (issue 24, item 3): `gpuviewer whatif` against measured counterfactuals (the
pairs in ../shared/traces/whatif, recorded back to back) and numbers read from the raw files here,
never from the code under test."""

import gzip
import json
import statistics

import pytest
from conftest import compat_path, run_cli, trace_path, write_json_gz
from shift_gpu import shift

WHATIF = trace_path("whatif")


def _pairs() -> dict:
    with open(trace_path("whatif", "pairs.json")) as f:
        return json.load(f)


def _whatif(path: str, *opts: str) -> dict:
    r = run_cli("whatif", path, *opts, "--json")
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def _profiler_steps_ms(path: str) -> dict[int, float]:
    """ProfilerStep#N host ranges from the raw Kineto JSON."""
    with gzip.open(path, "rt") as f:
        doc = json.load(f)
    return {
        int(e["name"].split("#")[1]): e["dur"] / 1e3
        for e in doc["traceEvents"]
        if e.get("ph") == "X"
        and e.get("cat") == "user_annotation"
        and str(e.get("name", "")).startswith("ProfilerStep#")
    }


@pytest.fixture(scope="module")
def eager():
    return _whatif(trace_path("whatif", "launch_eager.json.gz"), "--no-launch-overhead")


@pytest.fixture(scope="module")
def stall():
    return _whatif(trace_path("whatif", "stall_on.json.gz"), "--remove-gap", "0:all")


def test_before_is_the_recorded_step(eager, stall):
    """With no change the replay is the recording: each step's 'before' is its ProfilerStep range
    (these runs synchronise at the end of every step, so the GPU is done inside it)."""
    for res, name in ((eager, "launch_eager.json.gz"), (stall, "stall_on.json.gz")):
        raw = _profiler_steps_ms(trace_path("whatif", name))
        assert [s["step"] for s in res["steps"]] == sorted(raw)
        for s in res["steps"]:
            assert s["before_ms"] == pytest.approx(raw[s["step"]], rel=0.02)


def test_no_launch_overhead_predicts_the_cuda_graph_run(eager):
    pairs = _pairs()
    measured = pairs["launch_graph"]["mean_step_ms"]
    after = statistics.mean(s["after_ms"] for s in eager["steps"])
    assert after == pytest.approx(measured, rel=0.25), (after, measured)
    # each step's saving: about the eager run's step minus the graph run's
    saving = pairs["launch_eager"]["mean_step_ms"] - measured
    for s in eager["steps"]:
        assert s["saves_ms"] == pytest.approx(saving, rel=0.25), s
    assert eager["saves_ms"] == pytest.approx(sum(s["saves_ms"] for s in eager["steps"]), abs=1e-3)


def test_removing_the_stall_predicts_the_run_without_it(stall):
    pairs = _pairs()
    measured = pairs["stall_off"]["mean_step_ms"]
    after = statistics.mean(s["after_ms"] for s in stall["steps"])
    assert after == pytest.approx(measured, rel=0.25), (after, measured)
    saving = pairs["stall_on"]["mean_step_ms"] - measured
    for s in stall["steps"]:  # every profiled step
        assert s["saves_ms"] == pytest.approx(saving, rel=0.25), s


def test_ddp_remove_gap_shortens_step_3():
    """Rank 1 sleeps 50 ms before step 3's forward (truth.json); rank 0 waits for it at the
    all-reduce but its host never blocks, so the step gains less than the sleep."""
    res = _whatif(trace_path("kineto", "ddp"), "--remove-gap", "1:3")
    step3 = next(s for s in res["steps"] if s["step"] == 3)
    assert 15 <= step3["saves_ms"] <= 35, step3
    assert 15 <= res["saves_ms"] <= 35, res
    assert res["change"]["kind"] == "remove_gap" and res["change"]["rank"] == 1
    r = run_cli("whatif", trace_path("kineto", "ddp"), "--remove-gap", "1:3")
    assert r.returncode == 0, r.stderr
    row = next(line.split() for line in r.stdout.splitlines() if line.split()[:1] == ["3"])
    assert float(row[1]) == pytest.approx(step3["before_ms"], abs=1e-3)
    assert float(row[2]) == pytest.approx(step3["after_ms"], abs=1e-3)


def test_a_removed_gap_no_op_recorded_says_so():
    """stall_on sleeps ~25 ms a step where the profiler records no op. The removed gap was named
    only where an op filled it; now by the critical path's rule (host.host_did): 'no op was recorded
    for X ms of its Y ms', X the longest stretch of step 3 that the raw file's host events (every
    'X' event on the CPU threads, step markers left out) leave uncovered."""
    import re

    r = run_cli("whatif", trace_path("whatif", "stall_on.json.gz"), "--remove-gap", "0:3")
    assert r.returncode == 0, r.stderr
    m = re.search(r"no op was recorded for ([\d.]+) ms of its ([\d.]+) ms", r.stdout)
    assert m, r.stdout
    with gzip.open(trace_path("whatif", "stall_on.json.gz"), "rt") as f:
        ev = [e for e in json.load(f)["traceEvents"] if e.get("ph") == "X"]
    (st,) = [e for e in ev if e.get("name") == "ProfilerStep#3" and e.get("cat") == "user_annotation"]
    host = sorted(
        (e["ts"], e["ts"] + e["dur"])
        for e in ev
        if e.get("cat") in ("cpu_op", "user_annotation", "cuda_runtime", "python_function")
        and not str(e.get("name", "")).startswith("ProfilerStep#")
        and st["ts"] <= e["ts"] < st["ts"] + st["dur"]
    )
    longest, reach = 0.0, st["ts"]
    for a, b in host:
        longest, reach = max(longest, a - reach), max(reach, b)
    assert float(m[1]) == pytest.approx(longest / 1e3, abs=0.1), (m[1], longest / 1e3)
    assert float(m[1]) <= float(m[2])


@pytest.fixture(scope="module")
def ddp_session():
    from gpuviewer.session import Session

    return Session.open([trace_path("kineto", "ddp")])


CHANGES = [
    ("remove-gap", "0:all"),
    ("remove-gap", "1:3"),
    ("rank-like-median", "1"),
    ("rank-like-median", "0:gpu"),
    ("no-launch-overhead", None),
    ("comm-at-peak", None),
    ("faster", "nccl:50"),
    ("faster", "elementwise:30"),
    ("overlap-comm", "all"),
    ("overlap-comm", "AllReduce"),
]


@pytest.mark.parametrize("change,value", CHANGES)
def test_invariants(ddp_session, change, value):
    res = ddp_session.whatif(change, value)
    before = sum(s.before_ns for s in res.steps)
    assert res.steps and all(s.after_ns > 0 for s in res.steps)
    assert res.saves_ns <= before
    assert res.saves_ns >= -0.01 * before  # making something faster never costs the job time
    js = res.to_json()
    assert js["saves_ms"] == pytest.approx(sum(s["saves_ms"] for s in js["steps"]), abs=1e-3)
    assert set(js["steps"][0]) == {"step", "before_ms", "after_ms", "saves_ms"}


def test_nothing_changed_saves_nothing(ddp_session):
    res = ddp_session.whatif("faster", "elementwise:0")
    assert [s.saves_ns for s in res.steps] == [0] * len(res.steps)


def test_session_api_matches_the_command_line(ddp_session):
    api = ddp_session.whatif("remove-gap", "1:3").to_json()
    cli = _whatif(trace_path("kineto", "ddp"), "--remove-gap", "1:3")
    assert api["steps"] == cli["steps"]


@pytest.mark.parametrize("delta_us,everything", [(2000, False), (1000, True)])
def test_savings_do_not_depend_on_clocks(tmp_path, delta_us, everything):
    """Metamorphic: the GPU running 2 ms further behind its host, or every event moved by a clock
    offset, leaves what removing the stall saves unchanged."""
    moved = str(tmp_path / "stall_moved.json.gz")
    shift(trace_path("whatif", "stall_on.json.gz"), moved, delta_us, everything)
    base = _whatif(trace_path("whatif", "stall_on.json.gz"), "--remove-gap", "0:all")
    other = _whatif(moved, "--remove-gap", "0:all", "--no-cache")
    assert [s["saves_ms"] for s in other["steps"]] == pytest.approx([s["saves_ms"] for s in base["steps"]], abs=0.1)


def test_no_launch_overhead_does_not_depend_on_the_gpu_clock(tmp_path, eager):
    moved = str(tmp_path / "eager_moved.json.gz")
    shift(trace_path("whatif", "launch_eager.json.gz"), moved, 2000)
    other = _whatif(moved, "--no-launch-overhead", "--no-cache")
    assert other["saves_ms"] == pytest.approx(eager["saves_ms"], rel=0.03)


@pytest.mark.parametrize(
    "opts,says",
    [
        (["--remove-gap", "x"], "--remove-gap x"),
        (["--faster", "gemm"], "--faster gemm"),
        (["--faster", "(:20"], "not a regular expression"),
        (["--rank-like-median", "1:disk"], "--rank-like-median 1:disk"),
        (["--comm-at-peak", "--peak-busbw", "nan"], "--peak-busbw nan"),
        (["--remove-gap", "7:3"], "rank 7 is not in this session"),
        (["--remove-gap", "1:99"], "rank 1 has no step 99"),
        (["--overlap-comm", "(nccl"], "not a regular expression"),
        (["--faster", ":50"], "give a NAME_REGEX before the ':'"),
    ],
)
def test_bad_changes_are_one_line(opts, says):
    r = run_cli("whatif", trace_path("kineto", "ddp"), *opts)
    assert r.returncode == 2
    assert says in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert "Traceback" not in r.stderr


def test_unreadable_input_names_the_file(tmp_path):
    bad = tmp_path / "broken.json"
    bad.write_text('{"traceEvents": [')
    r = run_cli("whatif", str(bad), "--no-launch-overhead")
    assert r.returncode == 2 and str(bad) in r.stderr and len(r.stderr.strip().splitlines()) == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == ["broken.json"]  # nothing beside it


@pytest.mark.parametrize("change,value", CHANGES)
def test_replaying_from_the_first_touched_slot_is_the_full_replay(ddp_session, change, value):
    """A what-if recomputes only what follows the first slot its change touches: the same times as
    replaying everything."""
    import numpy as np

    from gpuviewer.analysis import whatif as wi

    g = wi.graph(ddp_session.trace)
    dur, off, _ = wi.apply(g, wi.parse_change(change, value))
    assert np.array_equal(wi.replay(g, dur, off).t, wi.replay(g, dur, off, base=wi.recorded(g)).t)


def test_a_ranks_clock_offset_does_not_change_the_saving(tmp_path):
    """Metamorphic, across ranks: rank 1's every event moved 3 ms (its host's clock off), the ranks
    put on two hosts (--hosts) so gpuviewer aligns their clocks by their collectives: removing the
    stall saves what it saves on the recording."""
    import shutil

    folder = tmp_path / "ddp"
    folder.mkdir()
    shutil.copy(trace_path("kineto", "ddp", "ddp_rank0.json.gz"), folder)
    shift(trace_path("kineto", "ddp", "ddp_rank1.json.gz"), str(folder / "ddp_rank1.json.gz"), 3000, True)
    base = _whatif(trace_path("kineto", "ddp"), "--remove-gap", "1:3")
    moved = _whatif(str(folder), "--remove-gap", "1:3", "--hosts", "0,1", "--no-cache")
    assert [s["saves_ms"] for s in moved["steps"]] == pytest.approx([s["saves_ms"] for s in base["steps"]], abs=0.1)


def _pause_host(src: str, dst: str, pause_us: float) -> float:
    """A copy of a Kineto trace whose host pauses pause_us between two launches in the middle of
    its third ProfilerStep: every event from that moment on starts pause_us later, and the ops
    around it (the step, the op the launches are in) last that much longer. The moment: the end of
    a launch call, with the next call on that thread starting later and no GPU op running then.
    Returns the moment (µs)."""
    with gzip.open(src, "rt") as f:
        doc = json.load(f)
    ev = doc["traceEvents"]
    steps = sorted((e["ts"], e["ts"] + e["dur"]) for e in ev if str(e.get("name", "")).startswith("ProfilerStep#"))
    s0, s1 = steps[2]
    gpu = [
        (e["ts"], e["ts"] + e["dur"])
        for e in ev
        if e.get("ph") == "X" and e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")
    ]
    launches = sorted(
        (e["ts"], e["ts"] + e["dur"])
        for e in ev
        if e.get("cat") == "cuda_runtime" and e.get("name") == "cudaLaunchKernel"
    )
    mid = (s0 + s1) / 2
    t = next(
        b
        for (a, b), (c, _d) in zip(launches, launches[1:])
        if b >= mid and c > b and not any(g0 <= b < g1 for g0, g1 in gpu)
    )
    for e in ev:
        ts = e.get("ts")
        if not isinstance(ts, (int, float)):
            continue
        if ts > t:
            e["ts"] = ts + pause_us
        elif e.get("ph") == "X" and ts + e.get("dur", 0) > t:
            e["dur"] += pause_us
    write_json_gz(dst, doc)
    return t


def test_a_host_pause_between_launches_stays_without_launch_overhead(tmp_path, eager):
    """Metamorphic: launch_eager with its host pausing 5 ms between two launches in one step
    (nothing else changed). Without launch overhead (as CUDA graphs would) the pause is still
    there, work the host does besides launching: that step's time after the change grows (by up
    to the pause), the others' stay. Before, every host gap between two launches was removed,
    a data loader's or a sleep's as well, and the pause vanished from the what-if."""
    paused = str(tmp_path / "paused.json.gz")
    _pause_host(trace_path("whatif", "launch_eager.json.gz"), paused, 5000)
    other = _whatif(paused, "--no-launch-overhead", "--no-cache")
    base = {s["step"]: s for s in eager["steps"]}
    grew = [s for s in other["steps"] if s["after_ms"] - base[s["step"]]["after_ms"] > 1.0]
    assert len(grew) == 1, other["steps"]
    s = grew[0]
    # by up to the pause (less the GPU's queued work it overlaps: 2.9 ms here)
    assert 1.0 < s["after_ms"] - base[s["step"]]["after_ms"] <= 5.5, (s, base[s["step"]])
    assert 4.5 <= s["before_ms"] - base[s["step"]]["before_ms"] <= 5.5


def test_a_step_a_change_makes_longer_is_said_with_its_ends():
    """trace_diff/test with its GEMM kernels 50% faster: the run is about 25 ms shorter, but steps
    1011 and 1012 come out longer (their ends move earlier by less than the ends before them; it
    was so of the no-copies replay until that took the copies' calls away too). Each such step
    gets a note with both shifts, and its extra time is their difference."""
    import re

    p = run_cli(
        "whatif",
        compat_path("facebookresearch__HolisticTraceAnalysis", "trace_diff", "test"),
        "--faster",
        "gemm:50",
        "--json",
    )
    assert p.returncode == 0, p.stderr
    r = json.loads(p.stdout)
    longer = {s["step"]: s for s in r["steps"] if s["saves_ms"] < 0}
    assert longer and r["saves_ms"] > 0
    said = {}
    for n in r["notes"]:
        m = re.match(
            r"step (\d+) ends ([\d.]+) ms earlier, the step before it ([\d.]+) ms earlier: .* takes ([\d.]+) ms longer",
            n,
        )
        if m:
            said[int(m.group(1))] = tuple(float(x) for x in m.groups()[1:])
    assert set(said) == set(longer), (said, longer)
    for step, (own, prev, extra) in said.items():
        assert abs(extra + longer[step]["saves_ms"]) <= 0.002
        assert abs((prev - own) - extra) <= 0.002


def test_a_cuda_graph_runs_own_launch_is_no_launch_overhead():
    """launch_graph replays its kernels from a CUDA graph: its cudaGraphLaunch (over a millisecond a
    step, from the raw file) is the fix already made, not launch overhead a graph would remove (the
    audit: '--no-launch-overhead' promised it 24%)."""
    path = trace_path("whatif", "launch_graph.json.gz")
    with gzip.open(path, "rt") as f:
        ev = json.load(f)["traceEvents"]
    graph = [e["dur"] for e in ev if e.get("ph") == "X" and e.get("name") == "cudaGraphLaunch"]
    steps = _profiler_steps_ms(path)
    assert len(graph) >= len(steps) and statistics.median(graph) > 1000  # µs
    out = _whatif(path, "--no-launch-overhead")
    assert any("cudaGraphLaunch" in n and "kept" in n for n in out["notes"])
    for s in out["steps"]:
        assert s["saves_ms"] <= 0.05 * s["before_ms"], s


def test_faster_says_time_taken_off_and_speed():
    out = _whatif(trace_path("whatif", "stall_on.json.gz"), "--faster", "nvjet:50")
    assert out["change"]["text"] == "GPU ops matching /nvjet/ take 50% less time (2x as fast)"


def test_a_single_rank_has_no_median_rank_to_match():
    r = run_cli("whatif", trace_path("whatif", "stall_on.json.gz"), "--rank-like-median", "0")
    assert r.returncode == 2 and "the session's only rank" in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1, r.stderr
