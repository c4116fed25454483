"""fp32_simt_gemm's prediction against a measured pair (tests/data/whatif_tf32, one H200): the same
fp32 MLP with TF32 off and on, replayed from CUDA graphs (the GPU bound) and eager. A third audit
found "7.4x faster on TF32" for these 7 µs SGEMMs; measured, their Tensor-Core kernels take
3.6-3.9 µs (1.8x), because a GEMM kernel has a fixed cost however small. Every measured figure is
read here from the raw traces; the predictions through the real command line."""

from __future__ import annotations

import gzip
import json
import re
import statistics
from pathlib import Path

import pytest
from conftest import run_cli, run_cli_once, trace_path, write_json_gz

DATA = Path(__file__).resolve().parent.parent / "data" / "whatif_tf32"


def _events(path) -> list[dict]:
    with gzip.open(path, "rt") as fh:
        return json.load(fh)["traceEvents"]


def _median_step_ms(path) -> float:
    steps = [
        e["dur"] / 1e3
        for e in _events(path)
        if e.get("cat") == "user_annotation" and e["name"].startswith("ProfilerStep#")
    ]
    assert len(steps) == 6
    return statistics.median(steps)


def _kernel_us(path, has: str) -> float:
    """The summed durations of the kernels whose name holds `has`."""
    return sum(e["dur"] for e in _events(path) if e.get("cat") == "kernel" and has in e["name"])


def _finding(path) -> dict:
    p = run_cli_once("analyze", str(path), "--json")
    assert p.returncode == 0, p.stderr[-2000:]
    (f,) = [f for f in json.loads(p.stdout)["findings"] if f["rule"] == "fp32_simt_gemm"]
    return f


def _tf32_x(f: dict) -> float:
    return float(re.search(r"or ([\d.]+)x \(TF32\) faster", f["title"]).group(1))


def test_the_graph_runs_saving_is_the_measured_one():
    """launch_graph_fp32 -> launch_graph_tf32: the step's measured time falls by 0.96 ms (medians
    of the six ProfilerSteps). The finding's what-if predicts it within 30%; the speed-up said for
    the SGEMMs is their measured one (SIMT kernels' time over the TF32 ones') within 20%."""
    fp32, tf32 = DATA / "launch_graph_fp32.json.gz", DATA / "launch_graph_tf32.json.gz"
    measured = _median_step_ms(fp32) - _median_step_ms(tf32)
    f = _finding(fp32)
    assert f["saves_ms_per_step"] == pytest.approx(measured, rel=0.3)
    kernel_x = _kernel_us(fp32, "simt_sgemm") / _kernel_us(tf32, "tensorop_s1688gemm")
    assert _tf32_x(f) == pytest.approx(kernel_x, rel=0.2)


def test_the_eager_runs_speed_up_is_the_measured_one_and_alone_it_saves_nothing():
    """../shared launch_eager (fp32) beside launch_eager_tf32: cuBLAS splits K in both (a SIMT or a
    TF32 GEMM kernel, then splitKreduce_kernel), and the finding's speed-up over both kernels'
    time is the measured one within 20%. Launch-bound, the eager step does not get faster with
    TF32 (measured: the medians differ by less than the steps' spread), and the finding says it
    saves under 0.05 ms a step alone."""
    fp32, tf32 = trace_path("whatif", "launch_eager.json.gz"), DATA / "launch_eager_tf32.json.gz"
    f = _finding(fp32)
    split = "splitKreduce_kernel"
    kernel_x = (_kernel_us(fp32, "simt_sgemm") + _kernel_us(fp32, split)) / (
        _kernel_us(tf32, "tensorop_s1688gemm") + _kernel_us(tf32, split)
    )
    assert _tf32_x(f) == pytest.approx(kernel_x, rel=0.2)
    assert f["saves_after_above"] and f["saves_ms_alone_in_steps"] < 0.05
    assert abs(_median_step_ms(fp32) - _median_step_ms(tf32)) < 2.0  # the steps vary 13.5-15.1 ms
    p = run_cli("whatif", fp32, "--faster", "simt_sgemm:86.46", "--fixed-us", "3", "--json")
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["saves_ms"] / 6 < 0.05


def test_the_floor_is_what_moved_the_prediction():
    """Without the fixed 3 µs (--fixed-us 0) the same replay predicts twice the measured saving: the
    figure the audit found wrong. With it, the measured one (the first test)."""
    fp32, tf32 = DATA / "launch_graph_fp32.json.gz", DATA / "launch_graph_tf32.json.gz"
    measured = _median_step_ms(fp32) - _median_step_ms(tf32)
    pct = 100 * (1 - 67 / 494.7)
    got = {}
    for us in ("0", "3"):
        p = run_cli("whatif", str(fp32), "--faster", f"simt_sgemm:{pct!r}", "--fixed-us", us, "--json")
        assert p.returncode == 0, p.stderr
        got[us] = json.loads(p.stdout)["saves_ms"] / 6
    assert got["0"] > 1.8 * measured
    assert got["3"] == pytest.approx(measured, rel=0.3)


def test_gemms_that_are_mostly_the_fixed_cost_get_no_finding(tmp_path):
    """launch_graph with its SIMT SGEMMs cut to 2.5 µs each (a tiny-GEMM inference run; the file
    rewritten here): the 3 µs a Tensor-Core kernel takes anyway leaves nothing to gain, so no
    finding ("about 1.0x faster" would be advice that does nothing). The same file untouched has it."""
    with gzip.open(trace_path("whatif", "launch_graph.json.gz"), "rt") as fh:
        d = json.load(fh)
    n = 0
    for e in d["traceEvents"]:
        if e.get("cat") == "kernel" and "simt_sgemm" in e["name"]:
            e["dur"] = 2.5
            n += 1
    assert n == 1920
    out = tmp_path / "tiny_simt.json.gz"
    write_json_gz(out, d)
    p = run_cli("analyze", str(out), "--json")
    assert p.returncode == 0, p.stderr[-2000:]
    assert not [f for f in json.loads(p.stdout)["findings"] if f["rule"] == "fp32_simt_gemm"]
    assert _finding(trace_path("whatif", "launch_graph.json.gz"))


def test_the_fixed_cost_holds_for_collectives_too():
    """--faster on NCCL kernels with --fixed-us: a collective's transfer is shortened only past its
    first US µs too (a reviewer found the fixed cost ignored there: --fixed-us 1000000 saved the same
    0.9 ms as none)."""
    path = trace_path("kineto", "ddp_nop2p")
    got = {}
    for us in ("0", "1000000"):
        p = run_cli("whatif", path, "--faster", "nccl:90", "--fixed-us", us, "--json")
        assert p.returncode == 0, p.stderr
        got[us] = json.loads(p.stdout)["saves_ms"]
    assert got["0"] > 0.5 and got["1000000"] == pytest.approx(0, abs=0.01)
