"""Issue 24, item 4: a finding's cost is what fixing its cause would save (a what-if replay of the
session's dependency model), counted once per wall-clock event; the findings are ordered by it.

Checked against measured counterfactuals (../shared/traces/whatif: runs recorded with and without
a cause, their step times in pairs.json), against the planted stall of the DDP trace, and against
invariants on every shared trace (a saving is never negative nor above the time of the steps;
the top-level savings together never exceed it). Every analysis is the real CLI's JSON."""
import json
import os

import pytest
from conftest import TRACES, run_cli, shared_listdir, trace_path

_cache: dict[str, dict] = {}


def analyze(*parts: str) -> dict:
    p = trace_path(*parts)
    if p not in _cache:
        r = run_cli("analyze", p, "--json")
        assert r.returncode == 0, r.stderr
        _cache[p] = json.loads(r.stdout)
    return _cache[p]


def pairs() -> dict:
    with open(trace_path("whatif", "pairs.json")) as f:
        return json.load(f)


def step_ms(a: dict) -> float:
    """The profiled steps' total time (ms), from the analysis' own step windows (host or GPU,
    whichever is longer: the replay's step is the rank's whole step)."""
    per_step: dict[int, float] = {}
    for r in a["ranks"]:
        for s in r["steps"]:
            if s.get("warmup") or s["step"] is None:
                continue
            t0 = min(s["start_ns"], s["host_start_ns"])
            t1 = max(s["end_ns"], s["host_end_ns"])
            per_step[s["step"]] = max(per_step.get(s["step"], 0.0), (t1 - t0) / 1e6)
    return sum(per_step.values())


def test_removing_the_stall_saves_what_the_run_without_it_measured():
    p = pairs()
    a = analyze("whatif", "stall_on.json.gz")
    top = a["findings"][0]
    measured = p["stall_on"]["mean_step_ms"] - p["stall_off"]["mean_step_ms"]  # 26.1 ms a step
    assert top["rule"] == "host_bound_idle" and top["saves_ms_per_step"] is not None
    assert abs(top["saves_ms_per_step"] - measured) <= 0.25 * measured, (top["saves_ms_per_step"], measured)
    assert "every step" in top["saving"]


def test_no_launch_overhead_saves_what_the_cuda_graph_run_measured():
    p = pairs()
    a = analyze("whatif", "launch_eager.json.gz")
    top = a["findings"][0]
    measured = p["launch_eager"]["mean_step_ms"] - p["launch_graph"]["mean_step_ms"]  # 9.4 ms a step
    assert top["rule"] == "launch_bound"
    assert abs(top["saves_ms_per_step"] - measured) <= 0.25 * measured, (top["saves_ms_per_step"], measured)


def test_the_planted_sleep_saves_what_an_independent_estimate_says():
    """ddp: rank 1 sleeps before step 3 (truth.json); fixing it saves 15-35 ms over the run (the
    waiting rank's host blocked about 22 ms), once, not once per waiting rank."""
    a = analyze("kineto", "ddp")
    flat = [f for top in a["findings"] for f in [top, *top["children"]]]
    stall = next(f for f in flat if f["rule"] == "straggler" and f["step"] == 3)
    assert 15 <= stall["saves_ms"] <= 35, stall["saves_ms"]
    assert "step 3" in stall["saving"] and "rank 1" in stall["saving"]
    # the same stall is not counted again by its after-effect: the persistent late rank saves no
    # more than the stall does (rank 1 is otherwise as fast as rank 0)
    pers = next(f for f in a["findings"] if f["rule"] == "straggler" and f["step"] is None)
    assert pers["saves_ms"] <= stall["saves_ms"] * 1.2 + 1.0


def best(f: dict):
    """The most a finding or a cause nested under it saves (None: nothing)."""
    got = [x for x in [f.get("saves_ms"), *(best(c) for c in f["children"])] if x is not None]
    return max(got) if got else None


@pytest.mark.parametrize("parts", [("kineto", "ddp"), ("kineto", "tp"), ("nsys", "nsys_ddp.sqlite")])
def test_findings_are_ordered_by_what_they_save(parts):
    """At every level, by the most a finding or anything nested under it saves; those without a
    saving after; severity follows the saving (no "high" finding that saves nothing)."""
    def check(fs):
        keys = [best(f) for f in fs]
        with_saving = [k for k in keys if k is not None]
        assert with_saving == sorted(with_saving, reverse=True)
        assert all(k is None for k in keys[len(with_saving):])
        for f in fs:
            if f.get("saves_ms") is not None and f["saves_pct"] < 0.02:
                assert f["severity"] == "low", f["title"]
            if f.get("saves_ms") is None:  # nothing measured: never "high"
                assert f["severity"] != "high", f["title"]
            check(f["children"])
    check(analyze(*parts)["findings"])


TRACE_PATHS = [os.path.join("kineto", n) for n in shared_listdir(os.path.join(TRACES, "kineto"))
               if n != "launch_bound_big.json.gz"] + \
              [os.path.join("nsys", n) for n in shared_listdir(os.path.join(TRACES, "nsys")) if n.endswith(".sqlite")] + \
              [os.path.join("whatif", n) for n in shared_listdir(os.path.join(TRACES, "whatif")) if n.endswith(".json.gz")]


@pytest.mark.parametrize("rel", TRACE_PATHS)
def test_savings_are_bounded_by_the_steps(rel):
    a = analyze(*rel.split(os.sep))
    total = step_ms(a)
    flat = [f for top in a["findings"] for f in [top, *top["children"]]]
    for f in flat:
        if f.get("saves_ms") is None:
            continue
        assert 0 <= f["saves_ms"] <= total * 1.02 + 0.01, (f["rule"], f["saves_ms"], total)
        assert 0 <= f["saves_pct"] <= 1.0
        assert f["saving"] and f["saves_ms_per_step"] <= f["saves_ms"] + 1e-9
    top_sum = sum(f["saves_ms"] for f in a["findings"] if f.get("saves_ms") is not None)
    assert top_sum <= total * 1.02 + 0.01, (top_sum, total)
