"""`gpuviewer diff` (issue 14) on the real traces. Expected values are computed here from the raw
Kineto JSON (json + gzip): each GPU op's step is the ProfilerStep#N range that holds the CUDA call
with its correlation id, collectives pair the n-th NCCL kernel of each rank. Metamorphic checks:
a session against itself, or against a copy with every clock moved, is all zeros; swapping A and B
negates every delta."""

from __future__ import annotations

import functools
import gzip
import json
import os
import re
import sys
from collections import defaultdict

import pytest
import shift_gpu
from conftest import run_cli, run_cli_once, trace_path, write_json_gz
from kineto_truth import load_json

K = "kineto"
DDP_CLEAN, DDP_NOP2P = trace_path(K, "ddp_clean"), trace_path(K, "ddp_nop2p")
STRAGGLER = trace_path(K, "gpu_straggler")
OUTLIER = trace_path(K, "step_outlier.json.gz")
SINGLE, PRESSURE = trace_path(K, "single_gpt_train.json.gz"), trace_path(K, "memory_pressure.json.gz")
GPU_CATS = ("kernel", "gpu_memcpy", "gpu_memset")


# -- independent reference, from the raw files -----------------------------------------------


@functools.cache
def _raw(path: str):
    """(GPU events as (name, cat, start_ns, end_ns, step, args)) in time order, steps) of one file."""
    ev, _ = load_json(path)
    steps = sorted(
        (e["ts"], e["ts"] + e["dur"], int(e["name"].split("#")[1]))
        for e in ev
        if e.get("cat") == "user_annotation" and str(e.get("name", "")).startswith("ProfilerStep#")
    )
    launch = {
        e["args"]["correlation"]: e["ts"]
        for e in ev
        if e.get("cat") in ("cuda_runtime", "cuda_driver") and "correlation" in e.get("args", {})
    }
    out = []
    for e in ev:
        if e.get("ph") != "X" or e.get("cat") not in GPU_CATS:
            continue
        t = launch.get(e.get("args", {}).get("correlation"))
        step = next((n for a, b, n in steps if t is not None and a <= t <= b), None)
        s = round(e["ts"] * 1000)
        out.append((e["name"], e["cat"], s, s + round(e["dur"] * 1000), step, e.get("args", {})))
    out.sort(key=lambda x: x[2])
    return out, [n for _, _, n in steps]


def per_step_totals(path: str, steps) -> dict[str, float]:
    """GPU op name -> total duration a step (ns), over the given steps."""
    tot = defaultdict(float)
    for name, _cat, s, e, step, _a in _raw(path)[0]:
        if step in steps:
            tot[name] += (e - s) / len(steps)
    return dict(tot)


def nccl_pairs(rank0: str, rank1: str, steps):
    """In each step, the n-th NCCL kernel of rank 0 with the n-th of rank 1."""
    out = []
    for step in steps:
        k0 = [x for x in _raw(rank0)[0] if x[0].startswith("nccl") and x[4] == step]
        k1 = [x for x in _raw(rank1)[0] if x[0].startswith("nccl") and x[4] == step]
        assert len(k0) == len(k1) > 0
        out += zip(k0, k1)
    return out


def close(x, ref, rel=0.01, abs_ns=2_000):
    return abs(x - ref) <= max(abs_ns, rel * abs(ref))


def diff_json(*args):
    # once a run for the same arguments (DDP_CLEAN against itself is asked twice); the inputs
    # are shared traces or files a test made and no longer changes
    p = run_cli_once("diff", *args, "--json")
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout)


def rank_file(folder: str, rank: int) -> str:
    return os.path.join(folder, f"{os.path.basename(folder)}_rank{rank}.json.gz")


# -- the cases of the issue ------------------------------------------------------------------


def test_ddp_clean_vs_nop2p_allreduce_transfer_is_the_regression():
    d = diff_json(DDP_CLEAN, DDP_NOP2P, "--ranks", "1", "1")
    steps = d["a"]["steps"]
    assert steps == d["b"]["steps"] == [2, 3, 4, 5]
    top = d["collective_totals"][0]
    assert (top["name"], top["group"]) == ("AllReduce", "0 (default_pg)")
    assert top["transfer_significant"] and top["significant"]
    # rank 1's transfer a step and its bus bandwidth, from the raw kernels of both ranks
    for side, folder in (("a", DDP_CLEAN), ("b", DDP_NOP2P)):
        pairs = nccl_pairs(rank_file(folder, 0), rank_file(folder, 1), steps)
        transfer = [max(0, r1[3] - max(r0[2], r1[2])) for r0, r1 in pairs]
        nbytes = sum(int(r1[5]["In msg nelems"]) * 4 for _, r1 in pairs)  # dtype Float
        assert close(top[f"{side}_transfer_ns"], sum(transfer) / len(steps))
        assert top[f"{side}_busbw_gbps"] == pytest.approx(nbytes / sum(transfer), rel=0.01)  # 2 ranks: factor 1
        assert top[f"{side}_count"] == len(pairs) / len(steps)
    # the README's figures: ~1.9 ms a step over NVLink, ~18 ms without P2P
    assert 1.5e6 < top["a_transfer_ns"] < 2.5e6 and 15e6 < top["b_transfer_ns"] < 21e6
    assert top["a_busbw_gbps"] > 5 * top["b_busbw_gbps"]
    # every size of the all-reduce is slower, each significant, and it leads the summary
    assert all(r["transfer_significant"] and r["delta_transfer_ns"] > 0 for r in d["collectives"])
    lead = next(t for t in d["top"] if t["table"] == "collective transfer")
    assert lead["what"].startswith("AllReduce") and lead["delta_ns"] == top["delta_transfer_ns"]
    assert not [t for t in d["top"] if t["table"] == "GPU compute"]
    parts = {r["part"]: r for r in d["step_parts"]}
    assert parts["comm transfer"]["significant"] and not parts["compute"]["significant"]


def test_ddp_both_ranks_pair_by_rank():
    d = diff_json(DDP_CLEAN, DDP_NOP2P)
    assert [(p["a"]["ranks"], p["b"]["ranks"]) for p in d["steps"]] == [([0], [0]), ([1], [1])]
    assert len(d["step_parts_by_rank"]) == 2
    top = d["collective_totals"][0]
    assert top["name"] == "AllReduce" and top["transfer_significant"]
    by_rank = {p["a_ranks"][0]: {r["part"]: r for r in p["parts"]} for p in d["step_parts_by_rank"]}
    pooled = {r["part"]: r for r in d["step_parts"]}
    for part in ("comm transfer", "compute"):  # pooled = the mean over the rank pairs
        assert close(pooled[part]["b_ns"], (by_rank[0][part]["b_ns"] + by_rank[1][part]["b_ns"]) / 2, abs_ns=2)


def test_gpu_straggler_extra_gemm_and_rank0_wait():
    d = diff_json(STRAGGLER, "--ranks", "1", "0")
    steps = d["a"]["steps"]
    assert steps == [2, 3, 4, 5, 6, 7] and d["a"]["ranks"] == [1] and d["b"]["ranks"] == [0]
    r1 = per_step_totals(rank_file(STRAGGLER, 1), steps)
    r0 = per_step_totals(rank_file(STRAGGLER, 0), steps)
    compute = [k for k in d["kernels"] if k["kind"] == "compute"]
    # the top compute excess of rank 1 (A): the GEMM name rank 0 never runs, 6 a step
    gemm = max(compute, key=lambda k: -k["delta_ns"])
    ref = max(r1, key=lambda n: r1[n] - r0.get(n, 0))
    assert gemm["name"] == ref and gemm["name"] not in r0 and "nvjet" in gemm["name"]
    assert gemm["only"] == "a" and gemm["significant"] and gemm["a_count"] == 6 and gemm["b_count"] == 0
    assert close(gemm["a_total_ns"], r1[ref])
    assert compute[0]["name"] == ref  # and it leads the compute kernels by impact
    # rank 0's wait in the all-reduce: the top communication difference
    pairs = nccl_pairs(rank_file(STRAGGLER, 0), rank_file(STRAGGLER, 1), steps)
    wait0 = sum(min(max(a[2], b[2]), a[3]) - a[2] for a, b in pairs) / len(steps)
    top = d["collective_totals"][0]
    assert top["name"] == "AllReduce" and top["wait_significant"] and not top["transfer_significant"]
    assert top["a_wait_ns"] == 0 and close(top["b_wait_ns"], wait0)
    assert 25e6 < top["delta_wait_ns"] < 45e6
    tops = {t["table"]: t for t in d["top"]}
    assert tops["GPU compute"]["what"] == ref and tops["collective wait"]["what"].startswith("AllReduce")
    comm = [k for k in d["kernels"] if k["kind"] == "comm"]
    assert comm[0]["name"].startswith("ncclDevKernel_AllReduce") and comm[0]["delta_ns"] > 25e6


def test_step_outlier_step7_vs_median_pageable_dtoh_leads():
    d = diff_json(OUTLIER, "--steps", "7", "median")
    assert d["a"]["steps"] == [7] and d["b"]["how"] == "median" and 7 not in d["b"]["steps"]
    lead = d["kernels"][0]
    assert lead["name"] == "Memcpy DtoH (Device -> Pageable)" and lead["kind"] == "memcpy"
    assert lead["significant"] and lead["only"] == "a" and lead["b_total_ns"] == 0
    assert close(lead["a_total_ns"], per_step_totals(OUTLIER, [7])[lead["name"]])
    assert 2.5e9 < lead["a_total_ns"] < 3e9
    # first where the step's time went: the host blocked in the copies, the GPU copying (the raw
    # copies' time in step 7), then the op tables' lead: the pageable DtoH copy
    top = {t["table"]: t for t in d["top"]}
    assert [t["table"] for t in d["top"][:2]] == ["step's host time", "step's GPU time"]
    assert top["step's host time"]["what"] == "syncs" and top["step's GPU time"]["what"] == "memcpy/memset"
    raw7 = per_step_totals(OUTLIER, [7])
    copies = sum(v for k, v in raw7.items() if k.startswith(("Memcpy", "Memset")))
    assert close(top["step's GPU time"]["a_ns"], copies, rel=0.001)
    assert top["step's host time"]["a_ns"] >= 0.95 * copies  # the host waited for them
    (op,) = [t for t in d["top"] if t["table"] == "GPU memcpy"]
    assert op["what"] == "Memcpy DtoH (Device -> Pageable)" and d["top"].index(op) == 2
    # the median side: each name's median of the other steps' totals
    others = {s: per_step_totals(OUTLIER, [s]) for s in d["b"]["steps"]}
    gemm = next(k for k in d["kernels"] if k["kind"] == "compute" and k["a_count"] == k["b_count"])
    vals = sorted(o.get(gemm["name"], 0) for o in others.values())
    assert close(gemm["b_total_ns"], vals[len(vals) // 2], rel=0, abs_ns=2)  # 9 steps: the middle one
    assert not gemm["significant"]


def test_same_run_two_halves_nothing_significant():
    """Steps 2-6 against 8-11 of one run (the outlier step left out): no change to call out."""
    d = diff_json(OUTLIER, "--steps", "2-6", "8-11")
    assert d["a"]["steps"] == [2, 3, 4, 5, 6] and d["b"]["steps"] == [8, 9, 10, 11]
    assert d["noise"]["estimated"]
    for table in ("step_parts", "kernels", "host_ops", "collectives"):
        assert not [r for r in d[table] if r["significant"]], table
    assert d["top"] == []


def test_single_vs_memory_pressure_same_kernels_but_every_kernel_slower():
    """The same job, one run holding 128 GB: the same kernels and counts (but one cuBLAS variant),
    and yet every kernel ran ~1.6-1.9x longer in memory_pressure, steadily in every step (the
    raw files say so), so the diff calls the GPU compute out as a regression. Holding memory
    alone would not do that; the GPU of that run was slower."""
    d = diff_json(SINGLE, PRESSURE)
    steps = d["a"]["steps"]
    assert steps == d["b"]["steps"] == [2, 3, 4]
    a, b = per_step_totals(SINGLE, steps), per_step_totals(PRESSURE, steps)
    only = {(k["name"], k["only"]) for k in d["kernels"] if k["only"]}
    assert only == {(n, "a") for n in set(a) - set(b)} | {(n, "b") for n in set(b) - set(a)}
    assert len(only) <= 2
    for k in d["kernels"][:20]:
        assert close(k["a_total_ns"], a.get(k["name"], 0)) and close(k["b_total_ns"], b.get(k["name"], 0))
    parts = {r["part"]: r for r in d["step_parts"]}
    assert parts["compute"]["significant"] and parts["compute"]["b_ns"] > 1.5 * parts["compute"]["a_ns"]
    assert not parts["memcpy/memset"]["significant"]
    assert not d["collectives"]


# -- metamorphic --------------------------------------------------------------------------------


def _assert_all_zero(d, tol_ns=0):
    for table in ("step_parts", "kernels", "host_ops", "collectives", "collective_totals"):
        for r in d[table]:
            assert abs(r["delta_ns"]) <= tol_ns and not r["significant"], (table, r)
    assert d["top"] == []


def test_session_against_itself_is_all_zeros():
    _assert_all_zero(diff_json(DDP_CLEAN, DDP_CLEAN))


def test_moving_b_clock_changes_nothing(tmp_path):
    shifted = tmp_path / "ddp_clean"
    shifted.mkdir()
    for r in (0, 1):  # both ranks 1 s later: another clock, the same run
        shift_gpu.shift(
            rank_file(DDP_CLEAN, r), str(shifted / f"ddp_clean_rank{r}.json.gz"), 1_000_000, everything=True
        )
    moved = diff_json(DDP_CLEAN, str(shifted))
    _assert_all_zero(moved, tol_ns=100)  # µs floats moved by 1e6 round to the ns differently
    same = diff_json(DDP_CLEAN, DDP_CLEAN)
    for table in ("kernels", "host_ops", "collectives"):
        assert len(moved[table]) == len(same[table]) > 0


@functools.cache
def _measured(path: str):
    from gpuviewer.analysis.diff_tables import measure
    from gpuviewer.io.comm_args import collective_args
    from gpuviewer.session import open_session

    t = open_session([path])
    return measure(t, collective_args(t))


def test_swapping_a_and_b_negates_every_delta():
    from gpuviewer.analysis.diff import diff

    ab = diff(_measured(DDP_CLEAN), _measured(DDP_NOP2P))
    ba = diff(_measured(DDP_NOP2P), _measured(DDP_CLEAN))
    for table, key in (
        ("kernels", ("name", "kind")),
        ("host_ops", ("name", "kind")),
        ("collectives", ("group", "name", "bytes")),
        ("step_parts", ("part",)),
    ):
        x = {tuple(r[k] for k in key): r for r in ab[table]}
        y = {tuple(r[k] for k in key): r for r in ba[table]}
        assert x.keys() == y.keys()
        for k, r in x.items():
            assert abs(r["delta_ns"] + y[k]["delta_ns"]) <= 1 and r["significant"] == y[k]["significant"], (table, k)


def test_rank_against_median_of_others_with_two_ranks_is_the_other_rank():
    from gpuviewer.analysis.diff import diff

    m = _measured(STRAGGLER)
    med, one = diff(m, m, ranks=(1, "median")), diff(m, m, ranks=(1, 0))
    assert [(r["name"], r["delta_ns"]) for r in med["kernels"]] == [(r["name"], r["delta_ns"]) for r in one["kernels"]]


# -- output formats and bad input -----------------------------------------------------------------

HOSTILE = '\x1b[31m</td><script>alert("x")</script>|**b**'


def test_html_markdown_text_escape_trace_names(tmp_path):
    with gzip.open(SINGLE, "rt", encoding="utf-8") as f:
        doc = json.load(f)
    victim = "nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_NNT"
    n = 0
    for e in doc["traceEvents"]:
        if e.get("name") == victim:
            e["name"] = HOSTILE
            n += 1
    assert n > 0
    hostile = tmp_path / "hostile.json.gz"
    write_json_gz(hostile, doc)
    out = tmp_path / "d.html"
    p = run_cli("diff", SINGLE, str(hostile), "-o", str(out))
    assert p.returncode == 0, p.stderr
    page = out.read_text(encoding="utf-8")
    assert "<script" not in page and "&lt;script&gt;" in page and "\x1b" not in page
    assert "http://" not in page and "https://" not in page and " src=" not in page and "<link" not in page
    assert "only in A" in page and "only in B" in page
    md = run_cli("diff", SINGLE, str(hostile), "--md")
    assert md.returncode == 0 and "\x1b" not in md.stdout
    assert not re.search(r"(?<!\\)<", md.stdout)  # every < escaped: no tag reaches a renderer
    assert "\\<script\\>" in md.stdout and "\\|\\*\\*b" in md.stdout
    txt = run_cli("diff", SINGLE, str(hostile), "--top", "100")
    assert txt.returncode == 0 and "\x1b" not in txt.stdout and "\\x1b[31m" in txt.stdout


@pytest.mark.parametrize(
    "args, needle",
    [
        (["--ranks", "1", "7"], "no rank 7"),
        (["--ranks", "0", "x"], "--ranks 0 x"),
        (["--steps", "99"], "step 99 is not on rank"),
        (["--steps", "2", "3", "4"], "--steps takes one or two"),
        (["--steps", "two"], "--steps 'two'"),
    ],
)
def test_bad_options_one_line_exit_2(args, needle):
    p = run_cli("diff", STRAGGLER, *args)
    assert p.returncode == 2 and p.stdout == ""
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and needle in lines[0] and "Traceback" not in p.stderr


def test_missing_or_unreadable_file_names_it(tmp_path):
    bad = tmp_path / "broken.json"
    bad.write_text('{"traceEvents": [ {"ph": "X", "name": ')
    for path in (str(tmp_path / "nope.json.gz"), str(bad)):
        p = run_cli("diff", DDP_CLEAN, path)
        assert p.returncode == 2 and "Traceback" not in p.stderr
        lines = p.stderr.strip().splitlines()
        assert len(lines) == 1 and os.path.basename(path) in lines[0]


def test_markdown_and_text_show_the_tables():
    md = run_cli("diff", STRAGGLER, "--ranks", "1", "0", "--md")
    assert md.returncode == 0, md.stderr
    for title in ("## Step time and its parts", "## Collectives", "## GPU ops", "## Host ops", "only in A"):
        assert title in md.stdout
    txt = run_cli("diff", STRAGGLER, "--ranks", "1", "0")
    assert txt.returncode == 0 and "significant" in txt.stdout and "AllReduce" in txt.stdout


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-q"]))


def test_the_memory_peak_of_each_side_is_said():
    """memory_pressure holds 128 GB in one tensor before training: `diff single_gpt_train
    memory_pressure` said nothing of memory. Each side's peak allocated is the raw file's highest
    'Total Allocated' of its [memory] events, in the JSON and the headline."""

    def raw_peak(path):
        events, _ = load_json(path)
        return max(int(e["args"]["Total Allocated"]) for e in events if e.get("name") == "[memory]")

    a, b = trace_path(K, "single_gpt_train.json.gz"), trace_path(K, "memory_pressure.json.gz")
    d = diff_json(a, b)
    assert d["memory_peak_bytes"] == [raw_peak(a), raw_peak(b)]
    assert d["memory_peak_bytes"][1] > 128e9 > 10 * d["memory_peak_bytes"][0]
    p = run_cli_once("diff", a, b)
    gb = [f"{x / 1e9:.2f} GB" for x in d["memory_peak_bytes"]]
    assert f"GPU memory, peak allocated (the ranks' highest): {gb[0]} -> {gb[1]}" in p.stdout
