"""Sentences a third audit of analyze's text (six inputs, each checked against the raw file with
its own scripts) found false or misleading, each checked here against the raw events."""

from __future__ import annotations

import re
import statistics
from pathlib import Path

import pytest
from conftest import analyzed_json as _json
from conftest import analyzed_text as _text
from conftest import flat_findings, raw_events, trace_path

DATA = Path(__file__).resolve().parent.parent / "data"


def test_a_saving_the_replay_moves_between_steps_is_not_called_unmeasurable():
    """sync.json.gz's fused elementwise, with the syncs fixed above it, replays steps 2-4 shorter
    and 5-7 longer: 'the other 3 steps it acts in not measurably' hid the longer ones. Where any
    step it acts in gets 0.05 ms or more longer, the text gives the average over the steps."""
    path = DATA / "whatif_sync_copy" / "sync.json.gz"
    (f,) = [f for f in flat_findings(_json(path)["findings"]) if f["rule"] == "elementwise_bound"]
    by = f["saves_ms_by_step"]
    assert min(by.values()) <= -0.05 < max(by.values())  # the case: some steps longer in the replay
    line = next(ln for ln in _text(path).splitlines() if "the elementwise and norm kernels fused" in ln)
    assert "not measurably" not in line
    assert f"({f['saves_ms']:.1f} ms over the 6 profiled steps)" in line


def test_exposed_communications_share_is_the_median_of_the_steps_shares():
    """pp rank 0: '69.3 ms a step (61% of the step)' divided the median step's exposed time by
    another step's length; its steps hold 54%, 68% and 79% (the raw SendRecv union over each
    step's window, an audit's figure), and the title says their median."""
    out = _json(trace_path("kineto", "pp"))
    steps = [s for s in out["ranks"][0]["steps"] if not s["warmup"]]
    shares = [s["exposed_comm_ns"] / (s["end_ns"] - s["start_ns"]) for s in steps]
    assert max(shares) - min(shares) > 0.2  # steps that differ: the case the old ratio got wrong
    (f,) = [f for f in flat_findings(out["findings"]) if f["rule"] == "exposed_communication" and f["ranks"] == [0]]
    assert f["metrics"]["share"] == pytest.approx(statistics.median(shares), abs=5e-4)
    assert f"(a median {statistics.median(shares):.0%} of the step;" in f["title"]


def test_copy_time_with_memsets_says_so_and_the_direction_apart():
    """copy.json.gz: 'host-to-device copies fill 53% of the GPU's time (90.0 ms)' counted 0.3 ms of
    memsets as host-to-device copies; the raw H2D time is said apart."""
    path = DATA / "whatif_sync_copy" / "copy.json.gz"
    ev = raw_events(path)
    h2d = sum(e["dur"] for e in ev if e.get("cat") == "gpu_memcpy" and "HtoD" in e["name"]) / 1e3
    sets = sum(e["dur"] for e in ev if e.get("cat") == "gpu_memset") / 1e3
    assert sets >= 0.05
    (f,) = [f for f in _json(path)["findings"] if f["rule"] == "copy_bound"]
    assert f["metrics"]["copy_ms"] == pytest.approx(h2d + sets, abs=0.05)
    assert f"copies and memsets fill {f['metrics']['copy_share']:.0%} of the GPU's time" in f["title"]
    assert f"host-to-device {h2d:,.1f} ms of it)" in f["title"]


def test_the_rank_lines_host_share_says_blocking_copies_beside_syncs():
    """copy.json.gz: 'syncs 71%' sent the audit looking for synchronize calls; 53 of the points are
    the pageable copies' calls (the raw cudaMemcpyAsync time is most of it)."""
    path = DATA / "whatif_sync_copy" / "copy.json.gz"
    ev = raw_events(path)
    steps = sum(e["dur"] for e in ev if e.get("cat") == "user_annotation" and e["name"].startswith("ProfilerStep#"))
    copies = sum(e["dur"] for e in ev if e.get("cat") == "cuda_runtime" and e["name"] == "cudaMemcpyAsync")
    syncs = sum(e["dur"] for e in ev if e.get("cat") == "cuda_runtime" and "Synchronize" in e["name"])
    assert copies > syncs
    line = next(ln for ln in _text(path).splitlines() if ln.startswith("rank 0:"))
    share = int(re.search(r"syncs and blocking copies (\d+)%", line).group(1))
    assert share / 100 == pytest.approx((copies + syncs) / steps, abs=0.03)


def test_a_split_k_reduce_joins_its_gemms_family():
    """launch_graph_tf32 (no ops on record: a CUDA graph's replay): cuBLAS's splitKreduce_kernel,
    whose name says 'float', was its own family 'gemm fp32, Tensor Cores' beside the TF32 GEMMs it
    finishes; it joins their family (its kernels' raw time with theirs)."""
    path = DATA / "whatif_tf32" / "launch_graph_tf32.json.gz"
    ev = raw_events(path)
    steps = [
        (e["ts"], e["ts"] + e["dur"])
        for e in ev
        if e.get("cat") == "gpu_user_annotation" and e["name"].startswith("ProfilerStep#")
    ]
    kernels = [e for e in ev if e.get("cat") == "kernel" and any(a <= e["ts"] < b for a, b in steps)]
    gemm = [e for e in kernels if "tensorop_s1688gemm" in e["name"] or "splitKreduce" in e["name"]]
    fams = _json(path)["efficiency"]["families"]
    gemm_fams = [r for r in fams if r["kind"] == "gemm"]
    assert len(gemm_fams) == 1 and gemm_fams[0]["tensor_cores"] is True
    assert gemm_fams[0]["kernels"] == len(gemm)
    assert gemm_fams[0]["time_ns"] / 1e3 == pytest.approx(sum(e["dur"] for e in gemm), rel=1e-3)


def test_the_elementwise_time_says_how_many_steps_it_is_summed_over():
    """'24.1 ms in 810 kernels' read as a step's: it is the measured steps' sum (6 here)."""
    path = DATA / "whatif_sync_copy" / "base.json.gz"
    (f,) = [f for f in _json(path)["findings"] if f["rule"] == "elementwise_bound"]
    m = f["metrics"]
    assert f"{m['time_ms']:.1f} ms in {m['kernels']:,} kernels in 6 steps" in f["title"]
