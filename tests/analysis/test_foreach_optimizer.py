"""The elementwise finding says which foreach kernels (multi_tensor_apply) its optimizer launched:
only those have fused=True as their fix (gradient clipping's and AMP's unscale run the same
kernels). A kernel is the optimizer's when its launching CUDA call (by correlation id) ran in an
'Optimizer.step#' range. Each check reads the raw file; the variants are the real trace with that
range shortened or renamed."""

from __future__ import annotations

import gzip
import json

import pytest
from conftest import run_cli, trace_path, write_json_gz

SRC = trace_path("kineto", "memory_pressure.json.gz")


def _doc() -> dict:
    with gzip.open(SRC, "rt") as fh:
        return json.load(fh)


def _write(tmp_path, doc: dict):
    path = tmp_path / "memory_pressure.json.gz"
    write_json_gz(path, doc)
    return path


def _analyze(path) -> tuple[dict, dict]:
    """analyze --json's output and its elementwise finding."""
    p = run_cli("analyze", str(path), "--json", "--no-cache")
    assert p.returncode == 0, p.stderr[-2000:]
    out = json.loads(p.stdout)
    (f,) = [f for f in out["findings"] if f["rule"] == "elementwise_bound"]
    return out, f


def _finding(path) -> dict:
    return _analyze(path)[1]


def _split(doc: dict, out: dict | None = None) -> tuple[float, float]:
    """The foreach kernels' time (µs) launched inside and outside the Optimizer.step ranges, from
    the raw events: each kernel's launch by its correlation id, the ranges by name; with out (the
    analysis), only kernels that start in its measured steps' GPU windows."""
    ev = doc["traceEvents"]
    base = doc.get("baseTimeNanoseconds", 0)  # the profiler's clock base: the store's ns add it
    windows = [(s["start_ns"], s["end_ns"]) for s in out["ranks"][0]["steps"] if not s["warmup"]] if out else None
    ranges = [(e["ts"], e["ts"] + e["dur"]) for e in ev if e.get("name", "").startswith("Optimizer.step#")]
    launch = {e["args"]["correlation"]: e["ts"] for e in ev if e.get("cat") == "cuda_runtime"}
    inside = outside = 0.0
    for e in ev:
        if e.get("cat") == "kernel" and "multi_tensor_apply" in e["name"]:
            if windows and not any(a <= base + round(e["ts"] * 1000) < b for a, b in windows):
                continue
            t = launch[e["args"]["correlation"]]
            if any(a <= t <= b for a, b in ranges):
                inside += e["dur"]
            else:
                outside += e["dur"]
    return inside, outside


def test_all_in_the_optimizers_step():
    """memory_pressure's foreach kernels are all AdamW's: launched inside its step range."""
    inside, outside = _split(_doc())
    assert inside > 0 and outside == 0
    f = _finding(SRC)
    assert f["metrics"]["foreach_optimizer_ms"] == f["metrics"]["foreach_ms"] > 0
    assert "launched in the optimizer's step (Optimizer.step#AdamW.step)" in f["title"]
    assert "outside" not in f["title"]


def test_a_range_that_ends_halfway_splits_them(tmp_path):
    """Each Optimizer.step range cut at the launch of the middle one of its foreach kernels: the
    finding's split is the raw one in its measured steps, and the title
    says both parts with only the first given the fused-optimizer fix."""
    doc = _doc()
    ev = doc["traceEvents"]
    launch = {e["args"]["correlation"]: e["ts"] for e in ev if e.get("cat") == "cuda_runtime"}
    starts = sorted(
        launch[e["args"]["correlation"]] for e in ev if e.get("cat") == "kernel" and "multi_tensor_apply" in e["name"]
    )
    for r in ev:
        if r.get("name", "").startswith("Optimizer.step#"):
            mine = [t for t in starts if r["ts"] <= t <= r["ts"] + r["dur"]]
            r["dur"] = mine[len(mine) // 2] - r["ts"] - 0.5  # half a µs before that launch
    out, f = _analyze(_write(tmp_path, doc))
    inside, outside = _split(doc, out)
    assert inside > 0 and outside > 0
    m = f["metrics"]
    assert m["foreach_optimizer_ms"] == pytest.approx(inside / 1e3, abs=0.002)
    assert m["foreach_ms"] - m["foreach_optimizer_ms"] == pytest.approx(outside / 1e3, abs=0.002)
    a = m["foreach_optimizer_ms"] / m["time_ms"]
    b = (m["foreach_ms"] - m["foreach_optimizer_ms"]) / m["time_ms"]
    assert (
        f"{a:.0%} launched in the optimizer's step (Optimizer.step#AdamW.step), for which a fused optimizer"
        in f["title"]
    )
    assert f"; {b:.0%} launched outside the optimizer's step (gradient clipping's" in f["title"]


def test_no_optimizer_range_on_record_says_it_is_not_known(tmp_path):
    """The ranges renamed: whose kernels they are is not known, and the title does not say."""
    doc = _doc()
    for r in doc["traceEvents"]:
        if r.get("name", "").startswith("Optimizer.step#"):
            r["name"] = "my_update"
    f = _finding(_write(tmp_path, doc))
    assert f["metrics"]["foreach_optimizer_ms"] is None
    assert "as an unfused optimizer's or gradient clipping's foreach ops run them" in f["title"]
    assert "launched in the optimizer's step" not in f["title"]
