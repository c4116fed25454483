"""Findings on the real traces match what was planted (../shared/traces/truth.json)."""

import json

import numpy as np
import pytest
from conftest import load_truth, run_cli, run_cli_once, trace_path

from gpuviewer.io.session import load
from gpuviewer.session.analysis import analyze_session

TRUTH = load_truth()
_cache = {}


def findings(path):
    if path not in _cache:
        _cache[path] = analyze_session(load([trace_path(*path.split("/"))])).to_json()
    return _cache[path]


def flat(fs):
    for f in fs:
        yield f
        yield from flat(f.get("children", []))


def rules(a, rule):
    """Every finding of the rule, top-level or a symptom under its cause."""
    return [f for f in flat(a["findings"]) if f["rule"] == rule]


@pytest.mark.parametrize(
    "path,truth_key",
    [
        ("kineto/ddp", "ddp"),
        ("kineto/ddp_long", "ddp_long"),
        (
            "nsys/nsys_ddp.sqlite",
            "ddp_plain (nsys_ddp.sqlite: 10 steps; nsys_ddp_big.sqlite: 30 steps, emit_nvtx, CUDA memory usage)",
        ),
    ],
)
def test_straggler_names_the_planted_rank_and_step(path, truth_key):
    """The planted one-step stall is an episodic straggler finding on top of the rank's usual
    lateness, with its excess over that lateness near the planted sleep, the sleep as evidence,
    and the finding that holds it first in the list."""
    truth = TRUTH[truth_key]
    a = findings(path)
    episodic = [
        f for f in rules(a, "straggler") if f["metrics"]["kind"] == "episodic" and f["step"] == truth["slow_step"]
    ]
    assert len(episodic) == 1, [f["title"] for f in rules(a, "straggler")]
    f = episodic[0]
    assert f["metrics"]["late_rank"] == truth["slow_rank"] == f["ranks"][0]
    assert 0.5 * truth["slow_ms"] <= f["metrics"]["excess_over_usual_ms"] <= 1.5 * truth["slow_ms"]
    assert f["metrics"]["evidence"], "says what on that rank took the time"
    assert "sleep" in f["metrics"]["evidence"][0]["name"]
    assert f["start_ns"] < f["end_ns"]
    # a stall is a cause of its own (never nested under the rank's usual lateness), and the
    # findings are ordered by what fixing them saves in the steps their cause acts in: the
    # stall's step saves more than launch overhead saves in a step of these runs
    assert a["findings"][0] is f, [x["title"] for x in a["findings"]]
    assert f["saves_steps"] == [truth["slow_step"]] and 20 <= f["saves_ms_in_steps"] <= truth["slow_ms"] * 1.02
    # the usual lateness is a persistent finding where the rank is late in most steps without the
    # stall (nsys_ddp, ddp_long); ddp's rank 1 is late only in the stall's step and the next
    persistent = [x for x in rules(a, "straggler") if x["metrics"]["kind"] == "persistent"]
    assert bool(persistent) == (path != "kineto/ddp"), [x["title"] for x in persistent]
    assert f["title"].startswith(f"Step {truth['slow_step']}: rank {truth['slow_rank']} held the other rank back")


def test_dataloader_stall_is_host_bound():
    f = rules(findings("kineto/dataloader_stall.json.gz"), "host_bound_idle")
    assert len(f) == 1
    m = f[0]["metrics"]
    assert 25 <= m["gap_ms_per_step"] <= 36
    assert m["at_step_start"]
    assert "DataLoader" in f[0]["advice"]


def test_launch_bound_big():
    a = findings("kineto/launch_bound_big.json.gz")
    f = rules(a, "launch_bound")
    assert len(f) == 1
    m = f[0]["metrics"]
    assert m["kernels"] == 200_000
    assert 0.7 <= m["mean_kernel_us"] <= 1.2
    assert 10 <= m["mean_gap_us"] <= 16
    assert 0.9 <= m["idle_fraction"] <= 0.97
    assert any(w in f[0]["advice"] for w in ("CUDA graphs", "torch.compile"))


def test_pipeline_bubble_pp_gpu():
    a = findings("kineto/pp_gpu")
    f = rules(a, "pipeline_bubble")
    assert len(f) == 1
    m = f[0]["metrics"]
    assert m["micro_batches"] == TRUTH["pp_gpu"]["micro_batches"] == 8
    assert m["ideal"] == pytest.approx(1 / 9, abs=1e-3)
    st = {s["rank"]: s["bubble_fraction"] for s in m["stages"]}
    assert abs(st[1] - m["ideal"]) < 0.04  # the last stage is near the ideal
    assert st[0] > st[1] + 0.04  # stage 0 waits for the heavier last stage
    assert m["heaviest_rank"] == 1
    assert "waits for the heavier rank 1" in f[0]["title"]
    assert not rules(a, "low_gpu_utilization")  # GPU-bound run


def test_tp_exposed_communication_and_waiting_rank():
    """Tensor parallel: rank 1 waits at all 32 all-reduces of every step for rank 0, whose host
    starts each step later: the exposure is rank 1's, explained by rank 0's lateness."""
    a = findings("kineto/tp")
    f = rules(a, "exposed_communication")
    waiting = [x for x in f if x["metrics"]["waits_every_step"]]
    assert len(waiting) == 1
    assert waiting[0]["metrics"]["collectives_per_step"] == 32
    w = waiting[0]["ranks"][0]
    for c in a["collectives"]:  # the waiting rank waits at least as long as any other on average
        assert c["wait_ms"][str(w)] >= max(c["wait_ms"].values())
    s = rules(a, "straggler")
    assert len(s) == 1 and s[0]["metrics"]["late_rank"] != w and s[0]["metrics"]["kind"] == "persistent"
    assert waiting[0] in s[0]["children"]


def test_single_gpt_train_low_utilization_no_straggler():
    a = findings("kineto/single_gpt_train.json.gz")
    assert rules(a, "low_gpu_utilization")
    assert not rules(a, "straggler")


def test_step_outlier_only_step_7_with_its_cause():
    f = rules(findings("kineto/step_outlier.json.gz"), "step_outlier")
    assert [x["step"] for x in f] == [TRUTH["step_outlier"]["slow_step"]] == [7]
    m = f[0]["metrics"]
    assert 3000 <= m["duration_ms"] <= 3700 and m["median_ms"] < 30
    causes = m["causes"]
    assert "DtoH" in causes[0]["name"] and "Pageable" in causes[0]["name"]
    assert 2500 <= causes[0]["ms"] <= 2900
    names = " ".join(c["name"] for c in causes)
    assert "HtoD" in names  # the copy back
    assert "Pageable" in f[0]["title"]


def test_memory_headroom():
    f = rules(findings("kineto/memory_pressure.json.gz"), "memory_headroom")
    assert len(f) == 1
    m = f[0]["metrics"]
    assert round(m["peak_bytes"] / 1e9, 1) == 133.1
    assert round(m["capacity_bytes"] / 1e9, 1) == 150.1
    assert m["per_step"] and max(p["peak_bytes"] for p in m["per_step"]) <= m["peak_bytes"]
    assert not rules(findings("kineto/dataloader_stall.json.gz"), "memory_headroom")
    # what the capture's first memory record already holds (the 128 GB tensor made before the
    # profiler recorded memory), from the raw file's first GPU [memory] event
    import gzip

    with gzip.open(trace_path("kineto", "memory_pressure.json.gz"), "rt") as fh:
        mem = [
            e for e in json.load(fh)["traceEvents"] if e.get("name") == "[memory]" and e["args"].get("Device Type") == 1
        ]
    first = min(mem, key=lambda e: e["ts"])["args"]["Total Allocated"]
    assert m["allocated_at_first_record_bytes"] == first
    assert f"first memory record already shows {first / 1e9:.1f} GB allocated" in f[0]["title"]


def test_breakdown_adds_up():
    a = findings("kineto/ddp")
    t = load([trace_path("kineto", "ddp")])
    for r in a["ranks"]:
        for s in r["steps"]:
            assert s["busy_ns"] + s["idle_ns"] == s["end_ns"] - s["start_ns"]
            assert s["exposed_comm_ns"] == s["comm_ns"] - s["overlap_ns"]
            assert s["compute_ns"] <= s["busy_ns"] and s["comm_ns"] <= s["busy_ns"]
    # busy of rank 1 equals the union of its GPU ops computed here by brute force (1 µs grid)
    c = t.columns
    from gpuviewer.analysis.breakdown import gpu_ops

    ops = gpu_ops(t, 1)
    s0 = int(c["start"][ops].min())
    grid = np.zeros(int((c["start"][ops] + c["dur"][ops]).max() - s0) // 1000 + 2, bool)
    for st, d in zip(c["start"][ops].tolist(), c["dur"][ops].tolist()):
        grid[(st - s0) // 1000 : (st + d - s0) // 1000] = True
    total_busy = sum(s["busy_ns"] for s in a["ranks"][1]["steps"])
    # steps hold at most the rank's busy time (ops launched before the first recorded step
    # belong to none), and most of it
    assert 0.85 * grid.sum() * 1000 <= total_busy <= 1.02 * grid.sum() * 1000


def test_analyze_cli_json_shape():
    p = run_cli_once("analyze", trace_path("kineto", "ddp"), "--json")
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout)
    assert [r["rank"] for r in out["ranks"]] == [0, 1]
    keys = {"step", "start_ns", "end_ns", "busy_ns", "compute_ns", "comm_ns", "exposed_comm_ns", "idle_ns"}
    assert keys <= set(out["ranks"][0]["steps"][0])
    for f in out["findings"]:
        keys = {
            "rule",
            "severity",
            "title",
            "ranks",
            "step",
            "start_ns",
            "end_ns",
            "metrics",
            "advice",
            "impact_ms",
            "children",
        }
        saving = {
            "saves_ms",
            "saves_ms_per_step",
            "saves_pct",
            "saving",
            "saves_steps",
            "saves_ms_by_step",
            "saves_ms_in_steps",
            "saves_pct_in_steps",
            "steps_profiled",
            "saves_after_above",
            "saves_ms_alone_in_steps",
        }
        # (only where they say something: a saving that comes once the fixes above are made, and
        # what a later fix alone saves step by step)
        assert set(f) == keys or set(f) - {"saves_once_above", "saves_ms_alone_by_step"} == keys | saving, set(f) ^ keys
        assert f["severity"] in ("high", "medium", "low")
    md = run_cli("analyze", trace_path("kineto", "ddp"), "--md")
    assert md.returncode == 0 and md.stdout.startswith("# gpuviewer analysis")
    assert "straggler" in md.stdout
