"""Numbers other projects' test suites assert on public traces (issue 25, items 11-15), checked
on the same files: the PyTorch TensorBoard plugin (tb_plugin) on its ResNet-50 traces and
HolisticTraceAnalysis (HTA) on its test data."""

import json
import re

import numpy as np
import pytest
from conftest import compat_path, run_cli, trace_path, write_json_gz
from kineto_truth import load_json

from gpuviewer.analysis import intervals as iv
from gpuviewer.analysis.breakdown import breakdown
from gpuviewer.analysis.kernels import is_tensor_core, kernel_stats
from gpuviewer.io.session import load

RESNET = compat_path("pytorch__kineto", "tb_plugin_resnet50_num_workers_0_worker0.1623143089861.pt.trace.json.gz")
ALEXNET = compat_path(
    "facebookresearch__HolisticTraceAnalysis",
    "critical_path",
    "alexnet",
    "benchmark_result_2869224_1695835535_trace.json.gz",
)


@pytest.fixture(scope="module")
def resnet():
    t = load([RESNET], use_cache=False)
    return t, breakdown(t)[0]


# -- item 11: PyTorch 1.8/1.9 record ProfilerStep#N as an `Operator` event -------------------------


def test_operator_profiler_steps_are_steps(resnet):
    t, rb = resnet
    assert [s.step for s in t.steps_of_rank(0)] == [5, 6, 7, 8, 9, 10]
    assert [s.step for s in rb.steps] == [5, 6, 7, 8, 9, 10]
    # every one of the 8,772 kernels is launched inside one of the six steps
    assert sum(s.kernels for s in rb.steps) == 8772


def test_resnet50_step_times_match_tb_plugin(resnet):
    """tb_plugin's end-to-end test on this file: step 5's kernel time 98,598 us and an average
    step time of 177,592 us, where a step runs from its host start (or the previous step's end)
    to the later of its host end and its last GPU op."""
    _, rb = resnet
    assert rb.steps[0].compute_ns == pytest.approx(98_598_000, abs=1_000)
    prev, spans = rb.steps[0].host_start_ns, []
    for s in rb.steps:
        end = max(s.host_end_ns, s.end_ns)
        spans.append(end - max(prev, s.host_start_ns))
        prev = end
    assert np.mean(spans) == pytest.approx(177_592_000, abs=1_000)


def test_operator_steps_in_cli_info():
    p = run_cli("info", RESNET, "--json", "--no-cache")
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["ranks"][0]["steps"] == [5, 6, 7, 8, 9, 10]


def test_trace_without_steps_has_one_window_in_steps_table():
    """HTA's alexnet benchmark has no ProfilerStep and no Optimizer.step range (the autograd-API
    ResNet-50 trace once used here now has its optimizer steps: io/kineto.py): one window, step
    empty (the steps table and `sql ... FROM steps` raised a TypeError on such traces)."""
    import gpuviewer

    path = ALEXNET
    st = gpuviewer.open(path).steps
    assert len(st) == 1 and st["step"].isna().all() and st["kernels"][0] > 10
    p = run_cli("sql", path, "SELECT count(*) AS n, count(step) AS numbered FROM steps", "--json")
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout) == [{"n": 1, "numbered": 0}]


# -- item 15: FP32 SIMT GEMMs (sgemm, implicit_convolve_sgemm) are not Tensor-Core kernels -------


@pytest.mark.parametrize(
    "name",
    [
        "tb_plugin_resnet50_num_workers_0_worker0.1623143089861.pt.trace.json.gz",
        "tb_plugin_resnet50_num_workers_0_worker0.ARRAYFORM.pt.trace.json.gz",
        "tb_plugin_resnet50_autograd_api_num_workers_0_worker0.pt.trace.json.gz",
    ],
)
def test_fp32_resnet50_on_v100_has_no_tensor_core_time(name):
    """tb_plugin asserts 0% Tensor-Core kernel time on these fp32 ResNet-50 runs (was 16-25%:
    volta_sgemm / implicit_convolve_sgemm counted for their "gemm")."""
    t = load([compat_path("pytorch__kineto", name)], use_cache=False)
    ks = kernel_stats(t, breakdown(t)[0])
    assert ks["kernels"] > 8000
    assert ks["tensor_core_share"] == 0.0


def test_tf32_xmma_counts_and_sgemm_does_not():
    """HTA's alexnet (A100): the TF32 cuDNN xmma convolution is the only Tensor-Core kernel;
    ampere_sgemm and ampere_gcgemm (FP32 SIMT) are not. Its share, counted from the JSON with the
    standard library, is the share reported."""
    path = ALEXNET
    events, _ = load_json(path)
    kern = [e for e in events if e.get("ph") == "X" and e.get("cat") == "kernel"]
    total = sum(e["dur"] for e in kern)
    tf32 = sum(e["dur"] for e in kern if "tf32" in e["name"])
    assert any("sgemm" in e["name"] for e in kern) and tf32 > 0
    t = load([path], use_cache=False)
    ks = kernel_stats(t, breakdown(t)[0])
    assert ks["tensor_core_share"] == pytest.approx(tf32 / total, abs=1e-3)
    assert is_tensor_core("volta_h884gemm_64x64_ldg8_nn") and is_tensor_core("nvjet_tst_96x64_64x10_1x2_h_bz_TNN")
    assert not is_tensor_core(
        "sm80_xmma_gemm_f32f32_f32f32_f32_tn_n_tilesize128x128x8_stage3_warpsize2x2x1_ffma_"
        "aligna4_alignc4_execute_kernel__5x_cublas"
    )
    assert not is_tensor_core("void cutlass::Kernel<cutlass_80_simt_sgemm_128x32_8x5_nn_align1>")


def test_fp32_simt_kernels_of_convolutions_are_told_from_matmuls():
    """alexnet's FFT convolutions run ampere_gcgemm (BLAS's 'c': complex single precision, on the
    SIMT units) and cuDNN's scudnn kernels: convolution work, as the op that launched each says
    (found here from the raw JSON). fp32_simt_gemm counts the SIMT GEMM kernels of other ops
    (ampere_sgemm of the linear layers), fp32_simt_conv those of the convolutions; TF32 already
    runs some of its convolutions (an sm80 tf32 kernel), so the conv finding does not offer the
    flag that is already on."""
    from conftest import run_cli_once
    from kineto_truth import launching_ops

    events, _ = load_json(ALEXNET)
    simt = [(k, op) for k, op in launching_ops(events) if re.search(r"[sc]gemm|scudnn", k["name"])]
    conv = [k for k, op in simt if op and "conv" in op.lower()]
    mm = [k for k, op in simt if not (op and "conv" in op.lower())]
    assert conv and mm and any("gcgemm" in k["name"] for k in conv)
    tf32_conv = [e for e in events if e.get("cat") == "kernel" and "tf32" in e["name"] and "fprop" in e["name"]]
    assert tf32_conv
    a = json.loads(run_cli_once("analyze", ALEXNET, "--json").stdout)
    for rule, ks in (("fp32_simt_gemm", mm), ("fp32_simt_conv", conv)):
        f = next(x for x in a["findings"] if x["rule"] == rule)
        assert f["metrics"]["time_ms"] == pytest.approx(sum(k["dur"] for k in ks) / 1e3, abs=0.01), (rule, f)
        assert f["metrics"]["kernels"] == len(ks)
        assert sorted(e["name"] for e in f["metrics"]["evidence"]) == sorted({k["name"] for k in ks})
    f = next(x for x in a["findings"] if x["rule"] == "fp32_simt_conv")
    assert "TF32 is already allowed for convolutions here" in f["title"] and "allow_tf32=True" not in f["title"]


# -- item 12: GPU work of the next step inside a step's window is busy time, not idle --------------


def test_hta_trace_diff_step_1009_idle_without_gpu_work():
    """HTA trace_diff/test, step 1009: work of step 1010 already runs on another stream inside
    1009's window. Idle there is the time with no GPU op at all, ~5.0 ms (was 30.5 ms: only
    1009's own ops were counted busy), utilization ~0.968 (was 0.805); the ops stay 1009's own."""
    t = load(
        [compat_path("facebookresearch__HolisticTraceAnalysis", "trace_diff", "test", "test.json.gz")], use_cache=False
    )
    rb = breakdown(t)[0]
    s = rb.steps[0]
    assert s.step == 1009 and s.ops == 2503
    assert s.idle_ns == pytest.approx(5.0e6, abs=0.1e6)
    assert s.busy_share == pytest.approx(0.968, abs=0.002)
    # the windows still partition the rank's GPU time: the busy of all steps is at most its busy
    c = t.columns
    st = np.asarray(c["start"][rb.ops]).astype(np.int64)
    total = iv.length(iv.union(st, st + np.asarray(c["dur"][rb.ops]).astype(np.int64)))
    assert sum(x.busy_ns for x in rb.steps) <= total


# -- item 13: a single rank's collectives, named and sized from their own arguments ----------------

NCCL_DATA = compat_path("facebookresearch__HolisticTraceAnalysis", "nccl_parser_config", "nccl_data.json.gz")
_DTYPE = {"Float": 4, "Long": 8}


def test_single_rank_nccl_report_from_kernel_arguments():
    """HTA nccl_parser_config: one rank (of 2) with 21 NCCL kernels. No collective can be matched
    without the other rank, yet every kernel shows in `stats --report nccl` by its process group,
    collective, group size, dtype and bytes, as its arguments say (counted here from the JSON)."""
    events, _ = load_json(NCCL_DATA)
    kern = [e for e in events if e.get("ph") == "X" and e.get("cat") == "kernel" and e["name"].startswith("nccl")]
    want: dict = {}
    for e in kern:
        a = e["args"]
        key = (
            f"{a['Process Group Name']} ({a['Process Group Description']})",
            {"allreduce": "AllReduce", "broadcast": "Broadcast"}[a["Collective name"]],
        )
        w = want.setdefault(key, {"kernels": 0, "dur": 0, "bytes": [], "size": a["Group size"]})
        w["kernels"] += 1
        w["dur"] += e["dur"]
        w["bytes"].append(max(a["In msg nelems"], a["Out msg nelems"]) * _DTYPE[a["dtype"]])
    assert len(kern) == 21 and len(want) == 2
    p = run_cli("stats", NCCL_DATA, "--report", "nccl", "--json")
    assert p.returncode == 0, p.stderr
    rows = {(r["group"], r["collective"]): r for r in json.loads(p.stdout)}
    assert set(rows) == set(want)
    for key, w in want.items():
        r = rows[key]
        assert r["kernels"] == w["kernels"] and r["ranks"] == w["size"] == 2
        assert r["kernel_total_ns"] == pytest.approx(w["dur"] * 1000, abs=w["kernels"] * 1000)
        assert r["bytes_med"] == np.median(w["bytes"])
        assert r["matched"] == 0 and r["transfer_total_ns"] is None and r["busbw_gbps"] is None
    assert sum(r["time_pct"] for r in rows.values()) == pytest.approx(100.0)
    # the same rows through SQL, and the text table prints one line per row
    q = run_cli("sql", NCCL_DATA, 'SELECT "group", collective, kernels FROM nccl_sum ORDER BY kernels', "--json")
    assert q.returncode == 0, q.stderr
    assert sorted((r["group"], r["collective"], r["kernels"]) for r in json.loads(q.stdout)) == sorted(
        (*k, w["kernels"]) for k, w in want.items()
    )
    t = run_cli("stats", NCCL_DATA, "--report", "nccl")
    assert t.returncode == 0, t.stderr
    lines = t.stdout.splitlines()
    assert len(lines) == 3 and lines[0].split()[:3] == ["group", "collective", "time_pct"] and "\\x0a" not in t.stdout


def test_nccl_report_without_collectives_is_empty_not_a_traceback():
    p = run_cli("stats", trace_path("kineto", "dataloader_stall.json.gz"), "--report", "nccl")
    assert p.returncode == 0 and p.stdout.strip() == "(no rows)" and "Traceback" not in p.stderr
    p = run_cli("sql", trace_path("kineto", "dataloader_stall.json.gz"), "SELECT count(*) AS n FROM nccl_sum", "--json")
    assert p.returncode == 0 and json.loads(p.stdout) == [{"n": 0}]


# -- item 14: CUPTI range-profiler kernels are drawn on their device (untimed); MTIA device ops are device work

CUPTI_RANGES = compat_path(
    "facebookresearch__HolisticTraceAnalysis", "cupti_profiler", "benchmark_result_924719_1679055439_trace.json.gz"
)


def _device_work(path):
    t = load([path], use_cache=False)
    rb = breakdown(t)[0]
    c = t.columns
    lanes = {(t.lanes[int(ln)].kind, t.lanes[int(ln)].device) for ln in np.unique(np.asarray(c["lane"][rb.ops]))}
    return t, rb, lanes


def test_cupti_range_profiler_kernels_are_drawn_on_the_device_but_not_timed():
    """HTA cupti_profiler: the 77 kernels are recorded as `cuda_profiler_range` events (pid =
    device 0). Kineto's range profiler does not time them: it splits its span evenly among the
    ranges (checked here on the raw file: one duration, end to end). They are drawn on device 0,
    named, and said in a warning; they are not GPU work, so no finding is built from their times
    (it printed "GPU utilization 100%", "bound by: GPU compute", "3521.5 ms in 29 kernels")."""
    events, _ = load_json(CUPTI_RANGES)
    ranges = sorted((e for e in events if e.get("cat") == "cuda_profiler_range"), key=lambda e: e["ts"])
    assert len(ranges) == 77 and len({e["dur"] for e in ranges}) == 1
    assert all(a["ts"] + a["dur"] == b["ts"] for a, b in zip(ranges, ranges[1:]))  # end to end
    t, rb, lanes = _device_work(CUPTI_RANGES)
    assert len(rb.ops) == 0 and sum(s.busy_ns for s in rb.steps) == 0
    c = t.columns
    on = [ln for ln in t.lanes if ln.label == "kernels under CUPTI's range profiler"]
    assert len(on) == 1 and on[0].device == 0
    lane = t.lanes.index(on[0])
    drawn = np.flatnonzero(np.asarray(c["lane"]) == lane)
    assert len(drawn) == 77
    assert {t.name_of(int(i)) for i in drawn} == {e["name"] for e in ranges}
    said = [w for w in t.warnings if "range profiler" in w]
    assert len(said) == 1 and "77 ranges" in said[0] and not [w for w in t.warnings if "not understood" in w]
    p = run_cli("analyze", CUPTI_RANGES, "--no-cache")
    assert p.returncode == 0 and "77 ranges of CUPTI's range profiler" in p.stderr
    assert "no findings" in p.stdout and "GPU compute" not in p.stdout, p.stdout


def _recategorized(tmp_path, cat: str) -> str:
    """The CUPTI trace with its device events put under another category (a copy in tmp_path)."""

    events, meta = load_json(CUPTI_RANGES)
    for e in events:
        if e.get("cat") == "cuda_profiler_range":
            e["cat"] = cat
    out = tmp_path / f"{cat}.json.gz"
    write_json_gz(out, {**meta, "traceEvents": events})
    return str(out)


def test_mtia_device_ops_are_device_lanes(tmp_path):
    """MTIA's device ops (Kineto category `mtia_ccp_events`, pid = device) read as device work."""
    t, rb, lanes = _device_work(_recategorized(tmp_path, "mtia_ccp_events"))
    assert len(rb.ops) == 77 and lanes == {("gpu", 0)} and rb.gpu_utilization > 0.5


def test_category_not_understood_is_said(tmp_path):
    """Events of a category the reader does not know stay visible as CPU slices, and a warning
    names the category and how many there were; `info` prints it."""
    path = _recategorized(tmp_path, "npu_device_op")
    t, rb, _ = _device_work(path)
    assert len(rb.ops) == 0
    said = [w for w in t.warnings if "not understood" in w]
    assert len(said) == 1 and "77 'npu_device_op'" in said[0]
    p = run_cli("info", path, "--no-cache")
    assert p.returncode == 0 and "77 'npu_device_op'" in p.stdout + p.stderr
