"""`whatif --no-syncs` and `--no-copies` against measured runs (tests/data/whatif_sync_copy, one
H200, README there): the same GPU-bound training step with a synchronize call after every layer,
with its input copied from pageable memory every step, and with neither. Every measured figure is
read here from the raw traces; the predictions come through the real command line."""

from __future__ import annotations

import gzip
import json
import statistics
from pathlib import Path

import pytest
from conftest import run_cli_once

DATA = Path(__file__).resolve().parent.parent / "data" / "whatif_sync_copy"


def _events(name: str) -> list[dict]:
    with gzip.open(DATA / name, "rt") as fh:
        return json.load(fh)["traceEvents"]


def _steps(events: list[dict]) -> list[dict]:
    steps = [e for e in events if e.get("cat") == "user_annotation" and e["name"].startswith("ProfilerStep#")]
    assert len(steps) == 6
    return sorted(steps, key=lambda e: e["ts"])


def _median_step_ms(name: str) -> float:
    return statistics.median(e["dur"] / 1e3 for e in _steps(_events(name)))


def _cli_json(*args: str) -> dict:
    p = run_cli_once(*args, "--json")
    assert p.returncode == 0, p.stderr[-2000:]
    return json.loads(p.stdout)


def _top(name: str) -> dict:
    return _cli_json("analyze", str(DATA / name))["findings"][0]


@pytest.mark.parametrize(
    ("name", "change", "rule"),
    [("sync.json.gz", ["--no-syncs", "all"], "host_sync"), ("copy.json.gz", ["--no-copies"], "copy_bound")],
)
def test_the_replay_predicts_the_run_without_the_cause(name, change, rule):
    """Each step of the run with the cause, replayed without it, takes about the measured step of
    the run without it (medians of the six ProfilerSteps: 13.4 ms), within 10%; the saving is the
    measured difference of the medians within 25% (syncs: 3.7 ms measured, copies: 15.0 ms), and
    the top finding is the cause's, saving the same as the what-if."""
    base = _median_step_ms("base.json.gz")
    measured = _median_step_ms(name) - base
    w = _cli_json("whatif", str(DATA / name), *change)
    assert len(w["steps"]) == 6
    for s in w["steps"]:
        assert s["after_ms"] == pytest.approx(base, rel=0.10), s
    saves = statistics.median(s["saves_ms"] for s in w["steps"])
    assert saves == pytest.approx(measured, rel=0.25)
    top = _top(name)
    assert top["rule"] == rule
    assert top["saves_ms_per_step"] == pytest.approx(saves, rel=0.1)


def test_the_sync_finding_counts_the_calls_in_the_raw_trace():
    """host_sync's count is the raw file's cudaDeviceSynchronize calls inside the profiled steps
    (16 in the forward, 16 from the backward's hooks, and the loop's own), a step."""
    ev = _events("sync.json.gz")
    steps = _steps(ev)
    calls = [e for e in ev if e.get("cat") == "cuda_runtime" and e["name"] == "cudaDeviceSynchronize"]
    per = [sum(1 for c in calls if s["ts"] <= c["ts"] < s["ts"] + s["dur"]) for s in steps]
    assert min(per) >= 32
    top = _top("sync.json.gz")
    assert top["metrics"]["syncs"] == sum(per)
    # (and those that waited, over 20 µs: per step where whole numbers, else the steps' totals)
    waited = [sum(1 for c in calls if s["ts"] <= c["ts"] < s["ts"] + s["dur"] and c["dur"] >= 20) for s in steps]
    if 0 < sum(waited) < sum(per):
        n = len(steps)
        each = sum(per) % n == 0 and sum(waited) % n == 0
        said = (
            f"calls cudaDeviceSynchronize {sum(per) // n} times a step"
            if each
            else f"calls cudaDeviceSynchronize {sum(per):,} times in the {n} steps"
        )
        assert said in top["title"] and f"waits in {sum(waited) // (n if each else 1):,} of them" in top["title"], top[
            "title"
        ]
    else:
        assert f"{sum(per) // 6} times a step in cudaDeviceSynchronize" in top["title"]


def test_the_base_run_has_neither_finding():
    """Without syncs or copies neither rule fires on the same step (no false positive from the
    loop's one synchronize a step, which the GPU-bound step hides)."""
    rules = {f["rule"] for f in _cli_json("analyze", str(DATA / "base.json.gz"))["findings"]}
    assert not rules & {"host_sync", "copy_bound"}
