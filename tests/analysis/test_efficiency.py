"""Issue 26, items 1-3: FLOPs and bytes from shapes (hand-computed), kernels attached to their ops,
the device's roofs, families, MFU per step; `analyze --json` "efficiency" and `stats --report
efficiency` on real traces through the real command line."""

from __future__ import annotations

import gzip
import json
import os

import pytest
from conftest import compat_path, run_cli, run_cli_once, trace_path
from kineto_truth import load_json

from gpuviewer.analysis.flops import op_work
from gpuviewer.analysis.kernel_class import tensor_cores
from gpuviewer.model.peaks import lookup, overridden

BF, F = "c10::BFloat16", "float"


# -- shapes in, FLOPs out (each figure worked by hand in the comment) -----------------------


def test_matmul_family_flops_by_hand():
    # mm [64,32] x [32,16]: 2*64*16*32 = 65,536; bytes (64*32 + 32*16 + 64*16) * 2 = 7,168
    w = op_work("aten::mm", [[64, 32], [32, 16]], [BF, BF], ["", ""])
    assert (w.kind, w.flops, w.bytes, w.precision) == ("gemm", 65_536, 7_168, "bf16")
    # addmm bias [16], [64,32] x [32,16]: the same 65,536
    assert op_work("aten::addmm", [[16], [64, 32], [32, 16], [], []], [BF, BF, BF, "Scalar", "Scalar"]).flops == 65_536
    # bmm [4,8,16] x [4,16,32]: 2*4*8*32*16 = 32,768
    assert op_work("aten::bmm", [[4, 8, 16], [4, 16, 32]], [F, F]).flops == 32_768
    # baddbmm self [4,8,32], [4,8,16] x [4,16,32]: 32,768; fp32
    w = op_work("aten::baddbmm", [[4, 8, 32], [4, 8, 16], [4, 16, 32]], [F, F, F])
    assert (w.flops, w.precision) == (32_768, "fp32")
    # matmul [2,3,8,16] x [16,4] broadcast: batch 6, 2*6*8*4*16 = 6,144
    assert op_work("aten::matmul", [[2, 3, 8, 16], [16, 4]], [F, F]).flops == 6_144
    # linear input [8,512,1024], weight [3072,1024]: 2*4096*3072*1024 = 25,769,803,776
    assert op_work("aten::linear", [[8, 512, 1024], [3072, 1024], [3072]], [F, F, F]).flops == 25_769_803_776
    assert op_work("aten::mm", [[64, 32], [31, 16]], [BF, BF]) is None  # K disagrees: no work, no guess


def test_convolution_flops_by_hand():
    # conv2d input [2,3,32,32], weight [16,3,3,3], stride 1, padding 1: out 32x32;
    # 2*2*16*(32*32)*3*(3*3) = 1,769,472
    w = op_work(
        "aten::conv2d",
        [[2, 3, 32, 32], [16, 3, 3, 3], [16], [], [], [], []],
        [F, F, F, "ScalarList", "ScalarList", "ScalarList", "Scalar"],
        ["", "", "", "[1, 1]", "[1, 1]", "[1, 1]", "1"],
    )
    assert (w.kind, w.flops) == ("conv", 1_769_472)
    # stride 2, no padding, groups 2: input [1,4,9,9], weight [8,2,3,3]: out 4x4;
    # 2*1*8*16*2*9 = 4,608
    dims = [[1, 4, 9, 9], [8, 2, 3, 3], [], [], [], [], [], [], []]
    conc = ["", "", "", "[2, 2]", "[0, 0]", "[1, 1]", "False", "[0, 0]", "2"]
    assert (
        op_work(
            "aten::convolution",
            dims,
            [F, F, "", "ScalarList", "ScalarList", "ScalarList", "Scalar", "ScalarList", "Scalar"],
            conc,
        ).flops
        == 4_608
    )
    # its backward with both gradients (output_mask [True, True, False]): 2 x 4,608 = 9,216
    bdims = [[1, 8, 4, 4], [1, 4, 9, 9], [8, 2, 3, 3], [], [], [], [], [], [], [], []]
    bconc = ["", "", "", "[8]", "[2, 2]", "[0, 0]", "[1, 1]", "False", "[0, 0]", "2", "[True, True, False]"]
    assert op_work("aten::convolution_backward", bdims, [F] * 3 + [""] * 8, bconc).flops == 9_216
    bconc[10] = "[False, True, False]"  # the weight's gradient only
    assert op_work("aten::convolution_backward", bdims, [F] * 3 + [""] * 8, bconc).flops == 4_608


def test_attention_flops_by_hand():
    q = [8, 16, 512, 64]  # B, H, L, E
    # 4*B*H*L*S*E = 4*8*16*512*512*64 = 8,589,934,592; causal halves it
    full = 4 * 8 * 16 * 512 * 512 * 64
    args = [q, q, q, [], [], [], [], []]
    types = [BF, BF, BF, "", "Scalar", "Scalar", "", "Scalar"]
    assert (
        op_work("aten::scaled_dot_product_attention", args, types, ["", "", "", "", "0.", "False", "", "False"]).flops
        == full
    )
    w = op_work("aten::scaled_dot_product_attention", args, types, ["", "", "", "", "0.", "True", "", "False"])
    assert (w.kind, w.flops, w.precision) == ("attention", full / 2, "bf16")
    # flash forward takes [B, L, H, E]: the same work
    qf = [8, 512, 16, 64]
    conc = [""] * 7 + ["0.", "True", "False", ""]
    assert (
        op_work("aten::_flash_attention_forward", [qf, qf, qf] + [[]] * 8, [BF] * 3 + [""] * 8, conc).flops == full / 2
    )
    # cuDNN backward (is_causal is argument 14): 2.5 x the causal forward
    bconc = [""] * 11 + ["512", "512", "0.", "True", ""]
    bdims = [q, q, q, q, q, [8, 16, 512, 1]] + [[]] * 10
    w = op_work("aten::_scaled_dot_product_cudnn_attention_backward", bdims, [BF] * 5 + [F] + [""] * 10, bconc)
    assert w.flops == 2.5 * full / 2
    # efficient attention: custom_mask_type 1 (causal) at argument 9
    econc = [""] * 9 + ["1", "False", ""]
    assert (
        op_work("aten::_efficient_attention_forward", [qf, qf, qf] + [[]] * 9, [BF] * 3 + [""] * 9, econc).flops
        == full / 2
    )


def test_elementwise_and_norm_count_bytes_only():
    # add [8,512,1024] + [8,512,1024] fp32: read 2 x 16 MiB, write 16 MiB = 50,331,648 bytes
    w = op_work("aten::add", [[8, 512, 1024], [8, 512, 1024], []], [F, F, "Scalar"])
    assert (w.kind, w.flops, w.bytes) == ("elementwise", 0, 3 * 8 * 512 * 1024 * 4)
    # layer norm input [8,512,1024] fp32, weight and bias [1024]: read 16 MiB + 8 KiB, write 16 MiB
    w = op_work("aten::native_layer_norm", [[8, 512, 1024], [], [1024], [1024], []], [F, "ScalarList", F, F, "Scalar"])
    assert (w.kind, w.flops, w.bytes) == ("norm", 0, (2 * 8 * 512 * 1024 + 2 * 1024) * 4)
    assert op_work("aten::unknown_op", [[4, 4]], [F]) is None
    assert op_work("aten::_foreach_add_", [[], [], []], ["TensorList", "float", "Scalar"]) is None  # no shapes


def test_tensor_core_names():
    assert (
        tensor_cores(
            "sm80_xmma_gemm_f32f32_f32f32_f32_tn_n_tilesize64x256x8_stage3_warpsize1x4x1_ffma_aligna4_"
            "alignc4_execute_kernel__5x_cublas"
        )
        is False
    )
    assert tensor_cores("volta_sgemm_128x64_nn") is False
    assert (
        tensor_cores(
            "sm80_xmma_gemm_f32f32_tf32f32_f32_nn_n_tilesize128x128x16_stage4_warpsize2x2x1_tensor16x8x8"
            "_execute_kernel__5x_cublas"
        )
        is True
    )
    assert tensor_cores("nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_NNT") is True
    assert (
        tensor_cores(
            "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1_execute_"
            "segment_k_off_kernel__5x_cublas"
        )
        is True
    )
    assert tensor_cores("void at::native::vectorized_elementwise_kernel<4>") is None


def test_peaks_table_matches_device_names():
    assert lookup("NVIDIA H200").model == "H200 SXM" and lookup("NVIDIA H200").peak("bf16") == 989.4
    assert lookup("NVIDIA H100 80GB HBM3").model == "H100 SXM"
    assert lookup("NVIDIA H100 PCIe").model == "H100 PCIe"
    assert lookup("NVIDIA A100-SXM4-40GB").model == "A100 SXM 40GB"
    assert lookup("A100-PCIE-40GB").model == "A100 PCIe 40GB"
    # a name without its memory size: the device's memory tells the 40 GB part (lower bandwidth)
    assert lookup("NVIDIA A100-PG509-200").model == "A100 SXM 80GB"
    assert lookup("NVIDIA A100-PG509-200", 42_297_524_224).model == "A100 SXM 40GB"
    assert lookup("NVIDIA A100-PG509-200", 42_297_524_224).gbps < lookup("NVIDIA A100-PG509-200").gbps
    assert lookup("NVIDIA A100 80GB PCIe", 42e9).model == "A100 PCIe 80GB"  # the name says 80
    assert lookup("NVIDIA A100-PCIE", 85e9).model == "A100 PCIe 80GB"
    assert lookup("NVIDIA H200", 40e9).model == "H200 SXM"  # only the A100 rows come in two sizes
    # a bare "NVIDIA H100" with more than an SXM's 80 GB (a Kineto docs trace: 102,085,492,736 B)
    # keeps the SXM roofs but says they are assumed; 80 GB ones, and names that say, are not flagged
    assert "its 102 GB of memory" in (lookup("NVIDIA H100", 102_085_492_736).identified or "")
    assert overridden(lookup("NVIDIA H100", 102_085_492_736), 800.0).identified is None  # the user's peak
    mi = lookup("AMD Radeon Graphics", 68_702_699_520, {"warpSize": 64, "numSms": 104})
    assert mi.identified and overridden(mi, 150.0).identified == mi.identified  # how it was told still holds
    assert lookup("NVIDIA H100 80GB HBM3", 85_045_035_008).identified is None
    assert lookup("NVIDIA H100", None).identified is None and lookup("NVIDIA GH200 480GB", 102e9).identified is None
    assert lookup("NVIDIA L4").model == "L4" and lookup("NVIDIA L40S").model == "L40S"
    assert lookup("AMD Instinct MI300X").model == "MI300X"
    unknown = lookup("GeForce GTX 1060 with Max-Q Design")
    assert unknown.model is None and unknown.peak("bf16") is None
    assert overridden(unknown, 100.0, 900.0).peak("bf16") == 100.0 and overridden(unknown, None, 900.0).gbps == 900.0


# -- real traces through the command line ----------------------------------------------------


@pytest.fixture(scope="module")
def gpt():
    path = trace_path("kineto", "single_gpt_train.json.gz")
    p = run_cli_once("analyze", path, "--json")  # the run's one analysis of it, shared by modules
    assert p.returncode == 0, p.stderr
    return path, json.loads(p.stdout)["efficiency"]


def _raw_gemm_flops(path: str) -> tuple[float, int]:
    """2*M*N*K over the trace's aten::mm and aten::addmm ops, read from the raw JSON."""
    with gzip.open(path, "rt") as f:
        events = json.load(f)["traceEvents"]
    total, n = 0.0, 0
    for e in events:
        a = e.get("args") or {}
        if e.get("name") == "aten::mm":
            (m, k), (_, nn) = a["Input Dims"][:2]
        elif e.get("name") == "aten::addmm":
            (m, k), (_, nn) = a["Input Dims"][1:3]
        else:
            continue
        total += 2.0 * m * nn * k
        n += 1
    return total, n


def test_gpt_families_mfu_and_flops_add_up(gpt):
    path, eff = gpt
    assert eff["device"] == "NVIDIA H200" and eff["peaks"]["model"] == "H200 SXM"
    steps = eff["steps"]
    assert steps and all(0 < s["mfu"] < 1 and s["flops"] > 0 for s in steps)
    for s in steps:
        print(f"rank {s['rank']} step {s['step']}: MFU {s['mfu']:.1%}, {s['tflops']:.1f} TFLOP/s")
    fams = eff["families"]
    gemm = [f for f in fams if f["kind"] == "gemm" and f["flops"] is not None]
    assert gemm
    for f in gemm:
        assert 0 < f["tflops"] <= f["peak_tflops"], f
    # every FLOP of the ops with work lands in exactly one family
    assert sum(f["flops"] or 0 for f in fams) == pytest.approx(eff["ops"]["flops"], rel=1e-9)
    # and the GEMM family holds exactly the raw trace's mm/addmm work (each op launched its GEMM)
    raw, n = _raw_gemm_flops(path)
    assert sum(f["flops"] for f in gemm) == pytest.approx(raw, rel=1e-9)
    assert sum(f["ops"] for f in gemm) == n
    # MFU's FLOPs per step add up to at most the ops' FLOPs (the steps hold the profiled work)
    assert sum(s["flops"] for s in steps) <= eff["ops"]["flops"] * (1 + 1e-9)
    assert eff["ops"]["unknown_kernels"] < eff["ops"]["kernels"] and eff["ops"]["unknown_names"]


def test_analyze_text_prints_mfu_per_step(gpt):
    p = run_cli("analyze", gpt[0])
    assert p.returncode == 0, p.stderr
    lines = [ln for ln in p.stdout.splitlines() if "MFU" in ln]
    assert len(lines) == len(gpt[1]["steps"])


def test_h100_fp32_simt_gemms_named_without_tensor_cores():
    p = run_cli("stats", compat_path("GindaChen__nsys-ai", "h100_2gpu_1s.sqlite"), "--report", "efficiency", "--json")
    assert p.returncode == 0, p.stderr
    rows = json.loads(p.stdout)
    simt = [r for r in rows if r["top_kernel"] and "gemm_f32f32" in r["top_kernel"]]
    assert simt and all(
        r["tensor_cores"] is False and "no Tensor Cores" in r["family"] and r["precision"] == "fp32" for r in simt
    )
    assert simt[0] is rows[0]  # the SIMT GEMMs take most of the GPU's time


def test_without_shapes_the_families_still_say_where_compute_time_went():
    """An nsys export records no op shapes, so no kernel's work is known; the families are still
    said (the efficiency was left out, and mfu_2gpu's flash attention, half its compute time, was
    mentioned nowhere). The attention family's share against the raw export (sqlite3): the
    flash kernels' time over every non-NCCL kernel's (the capture is its one step)."""
    import sqlite3

    path = compat_path("GindaChen__nsys-ai", "mfu_2gpu_before.sqlite")
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        rows = db.execute(
            "SELECT s.value, k.end - k.start FROM CUPTI_ACTIVITY_KIND_KERNEL k JOIN StringIds s ON s.id = k.shortName"
        ).fetchall()
    finally:
        db.close()
    compute = [(n, d) for n, d in rows if not n.lower().startswith("nccl")]
    flash = sum(d for n, d in compute if "flash" in n) / sum(d for _n, d in compute)
    p = run_cli_once("analyze", path, "--json")
    assert p.returncode == 0, p.stderr
    eff = json.loads(p.stdout)["efficiency"]
    att = next(f for f in eff["families"] if f["name"].startswith("attention"))
    share = att["time_ns"] / sum(f["time_ns"] for f in eff["families"])
    assert abs(share - flash) <= 0.005, (att, flash)
    assert att["top_kernels"][0].startswith("flash_fwd")
    text = run_cli_once("analyze", path).stdout
    assert f"attention, Tensor Cores (work unknown): {flash:.0%} of compute-kernel time" in text
    assert "efficiency: device unknown (peak unknown)" in text
    assert " step " not in text.split("efficiency:")[1]  # no line per step of unknown work


def test_cudnn_attention_named_f16_is_not_called_fp16():
    """cuDNN's generated SDPA kernels say "f16" for either 16-bit type: nsys_single's program runs
    them on bf16 (its kernels name BFloat16, never Half, in the raw export), so "attention fp16"
    was false. The family says 16-bit; the Kineto trace of the same program, with shapes, says bf16."""
    import analysis_truth as T

    path = trace_path("nsys", "nsys_single.sqlite")
    names = T.nsys_kernel_names(path, "demangledName")
    sdpa = {n for n in names if "sdpa" in n}
    assert sdpa and all("_f16_" in n for n in sdpa)
    assert any("BFloat16" in n for n in names) and not any("Half" in n for n in names)
    eff = json.loads(run_cli_once("analyze", path, "--json").stdout)["efficiency"]
    att = next(f for f in eff["families"] if f["kind"] == "attention")
    assert att["precision"] == "16-bit" and att["name"].startswith("attention 16-bit, Tensor Cores"), att
    assert not any(f["precision"] == "fp16" for f in eff["families"])
    # cuBLAS's names keep their word: f16f16 is fp16 (bf16 kernels say bf16)
    from gpuviewer.analysis.kernel_class import precision

    assert precision("sm90_xmma_gemm_f16f16_f16f32_f32_tn_n_tilesize128x128x64") == "fp16"
    assert precision(next(iter(sdpa))) == "16-bit"


def test_peak_override_and_bad_values():
    path = trace_path("kineto", "single_gpt_train.json.gz")
    p = run_cli("stats", path, "--report", "efficiency", "--json", "--peak-tflops", "500", "--peak-gbps", "1000")
    assert p.returncode == 0, p.stderr
    rows = json.loads(p.stdout)
    assert all(r["peak_tflops"] in (None, 500.0) for r in rows) and any(r["peak_tflops"] == 500.0 for r in rows)
    bad = run_cli("analyze", path, "--peak-tflops", "-3")
    assert bad.returncode == 2 and bad.stderr.strip().count("\n") == 0 and "--peak-tflops -3" in bad.stderr


@pytest.mark.parametrize(
    "parts", [("kineto", "ddp"), ("kineto", "pp_gpu"), ("kineto", "fsdp"), ("whatif", "launch_eager.json.gz")]
)
def test_shared_traces_with_shapes(parts):
    """More shared traces recorded with shapes: MFU per step, GEMM and attention rates under the
    H200's roofs, every op's FLOPs in one family; the eager MLP's fp32 GEMMs ran without Tensor Cores."""
    import gpuviewer

    s = gpuviewer.open(trace_path(*parts))
    eff = s.analysis.efficiency
    assert eff and eff["peaks"]["model"] == "H200 SXM"
    assert eff["steps"] and all(0 < st["mfu"] < 1 for st in eff["steps"] if not st["warmup"])
    for st in eff["steps"]:
        print(f"{'/'.join(parts)} rank {st['rank']} step {st['step']}: MFU {st['mfu']:.1%}")
    fams = eff["families"]
    for f in fams:
        if f["kind"] in ("gemm", "attention", "conv") and f["tflops"]:
            assert f["tflops"] <= f["peak_tflops"], f
    assert sum(f["flops"] or 0 for f in fams) == pytest.approx(eff["ops"]["flops"], rel=1e-9)
    assert {st["rank"] for st in eff["steps"]} == set(s.ranks)
    if parts[0] == "whatif":
        gemm = [f for f in fams if f["kind"] == "gemm" and f["flops"]]
        assert gemm and all(f["precision"] == "fp32" and f["tensor_cores"] is False for f in gemm)


def test_garbage_shapes_give_no_work_and_never_raise():
    """Arguments as a damaged or hostile trace may carry them: every rule returns Work or None."""
    import random

    from gpuviewer.analysis.flops import RULES

    rng = random.Random(26)
    atoms = [
        0,
        -1,
        1,
        2**62,
        3.5,
        True,
        None,
        "",
        "x",
        "[1, 2]",
        "((((",
        "1e999",
        [],
        [[]],
        [-3, 4],
        [[1, 2], [3]],
        {"a": 1},
        [2**40, 2**40, 2**40, 2**40],
    ]
    for name in sorted(RULES):
        for _ in range(40):
            dims = [rng.choice(atoms) for _ in range(rng.randint(0, 16))]
            types = [rng.choice([BF, F, "Scalar", "", None, 7, [BF]]) for _ in range(rng.randint(0, 16))]
            conc = [
                rng.choice(["", "True", "[1, 1]", "2", "[0]", "x" * 300, None, 5]) for _ in range(rng.randint(0, 16))
            ]
            w = op_work(name, dims, types, conc)
            assert w is None or (w.flops >= 0 and w.bytes >= 0), (name, dims, types, conc, w)
    assert op_work("aten::mm", "not a list", None, None) is None
    # a 0-d tensor is one element: fill_ of a float scalar tensor writes its 4 bytes (reads none)
    assert op_work("aten::fill_", [[], []], [F, "Scalar"], ["", "1."]).bytes == 4


def test_damaged_shapes_in_a_real_trace(tmp_path):
    """The GPT trace with the arguments of every other matmul/attention op damaged: analyze still
    answers (exit 0, no traceback), the damaged ops counted as work unknown, none of them guessed."""
    import random

    rng = random.Random(7)
    with gzip.open(trace_path("kineto", "single_gpt_train.json.gz"), "rt") as f:
        doc = json.load(f)
    junk = [None, "x", 5, [[-1, 2]], [["a"]], [[2**70, 3]], {"k": []}, [[1e308]], []]  # none a valid shape
    damaged = 0
    for e in doc["traceEvents"]:
        a = e.get("args")
        if isinstance(a, dict) and e.get("name") in ("aten::mm", "aten::addmm", "aten::_cudnn_attention_forward"):
            damaged += 1
            if damaged % 2:
                a["Input Dims"] = rng.choice(junk)
                a["Concrete Inputs"] = rng.choice(junk)
                a["Input type"] = rng.choice(junk)
    out = tmp_path / "damaged.json"
    out.write_text(json.dumps(doc))
    p = run_cli("analyze", str(out), "--json", "--no-cache")
    assert p.returncode == 0 and "Traceback" not in p.stderr, p.stderr
    eff = json.loads(p.stdout)["efficiency"]
    assert eff["ops"]["unknown"] >= (damaged + 1) // 2  # every damaged op (the odd ones) is unknown
    assert sum(f["flops"] or 0 for f in eff["families"]) == pytest.approx(eff["ops"]["flops"], rel=1e-9)


def test_alexnet_a100_names_simt_and_tf32_kernels():
    """HTA's AlexNet on an A100 (no shapes): cuBLAS sgemm and cuDNN scudnn kernels are fp32 without
    Tensor Cores, the implicit-GEMM tf32 convolutions use them; the device is matched to the table."""
    p = run_cli(
        "stats",
        compat_path("facebookresearch__HolisticTraceAnalysis", "critical_path", "alexnet"),
        "--report",
        "efficiency",
        "--json",
    )
    assert p.returncode == 0, p.stderr
    rows = {r["top_kernel"]: r for r in json.loads(p.stdout)}
    sgemm = next(r for k, r in rows.items() if "sgemm" in k)
    assert sgemm["family"].startswith("gemm") and (sgemm["precision"], sgemm["tensor_cores"]) == ("fp32", False)
    scudnn = [r for k, r in rows.items() if "scudnn" in k]
    assert scudnn and all(r["precision"] == "fp32" and r["tensor_cores"] is False for r in scudnn)
    tf32 = next(r for k, r in rows.items() if "tf32" in k and "fprop" in k)
    assert (tf32["precision"], tf32["tensor_cores"]) == ("tf32", True) and tf32["family"].startswith("conv")


def test_an_a100_named_without_its_size_is_told_by_its_memory():
    """HTA's alexnet trace: 'NVIDIA A100-PG509-200' with totalGlobalMem 42.3 GB (read from the
    raw file here) is the 40 GB part; the efficiency line printed 'A100 SXM 80GB'."""
    path = compat_path(
        "facebookresearch__HolisticTraceAnalysis",
        "critical_path",
        "alexnet",
        "benchmark_result_2869224_1695835535_trace.json.gz",
    )
    _events, meta = load_json(path)
    mem = {p["totalGlobalMem"] for p in meta["deviceProperties"]}
    assert max(mem) < 60e9
    p = run_cli("analyze", path, "--no-cache")
    assert p.returncode == 0 and "(A100 SXM 40GB," in p.stdout and "80GB" not in p.stdout, p.stdout


def test_a_step_whose_model_work_is_unknown_says_mfu_unknown():
    """tb_plugin's ResNet-50 (no Concrete Inputs recorded: the convolutions' work cannot be read):
    its steps printed '0.00 TFLOP of matmul/conv/attention work ... MFU at least 0.0%', read as a
    measured zero. Each step now says its MFU is unknown and how much work is known: the fc
    layer's matmuls, from the raw Input Dims of the step's aten::addmm and aten::mm ops (2·M·N·K)."""
    import re

    path = compat_path("pytorch__kineto", "tb_plugin_resnet50_num_workers_0_worker0.1623143089861.pt.trace.json.gz")
    ev, _meta = load_json(path)
    steps = sorted(
        (e["ts"], e["ts"] + e["dur"], int(e["name"].split("#")[1]))
        for e in ev
        if str(e.get("name", "")).startswith("ProfilerStep#")
    )
    known = {}
    for s0, s1, n in steps:
        fl = 0
        for e in ev:
            if e.get("ph") == "X" and e.get("name") in ("aten::addmm", "aten::mm") and s0 <= e["ts"] < s1:
                d = [x for x in e["args"]["Input Dims"] if x]
                a, b = (d[1], d[2]) if e["name"] == "aten::addmm" else (d[0], d[1])
                fl += 2 * a[0] * a[1] * b[1]
        known[n] = fl
    out = run_cli("analyze", path).stdout
    assert "0.00 TFLOP" not in out
    lines = re.findall(
        r"rank 0 step (\d+): the work of \d+ of its matmul/conv/attention kernels is unknown "
        r"\(the others': ([\d.]+) GFLOP\): MFU unknown",
        out,
    )
    assert len(lines) >= 5, out
    for step, gflop in lines:
        assert abs(float(gflop) - known[int(step)] / 1e9) <= 0.006, (step, gflop, known[int(step)])


def test_ranks_running_unequal_work_are_said_so():
    """gpu_straggler's rank 1 runs six planted 8192^3 GEMMs a step that rank 0 does not: its MFU
    (17-24%) read as 3.4x rank 0's efficiency on the same model. The text says the ranks' work
    differs, by the ratio of their GEMM work read here from the raw files (mm/addmm shapes)."""
    import re

    folder = trace_path("kineto", "gpu_straggler")
    raw = [_raw_gemm_flops(os.path.join(folder, f"gpu_straggler_rank{r}.json.gz"))[0] for r in (0, 1)]
    text = run_cli_once("analyze", folder).stdout
    said = re.search(r"rank 1 runs ([\d.]+)x the matmul/conv/attention work of rank 0 a step", text)
    assert said, text
    assert float(said[1]) == pytest.approx(raw[1] / raw[0], abs=0.15)
    assert "each rank's MFU counts the work it ran" in text
    # ranks doing their share of one model (tensor parallel) are not called unequal
    assert "the work it ran" not in run_cli_once("analyze", trace_path("kineto", "tp")).stdout


def test_advice_does_not_ask_for_tensor_cores_already_used():
    """nsys_single's matmuls run on Tensor Cores already (cuBLAS's nvjet and cuDNN's wgmma kernels,
    read here from the raw export), as do the JAX trace's GEMMs; the low-utilization advice said
    '(larger batch, AMP so Tensor Cores are used)'. It asks no more; the V100 ResNet-50, whose
    convolutions run fp32 on the SIMT units, keeps it."""
    import analysis_truth as T

    path = trace_path("nsys", "nsys_single.sqlite")
    names = set(T.nsys_kernel_names(path))
    mm = {n for n in names if "nvjet" in n or "gemm" in n or "sdpa" in n}
    assert mm and all("nvjet" in n or "wgmma" in n for n in mm), mm
    for p in (path, trace_path("jax")):
        out = json.loads(run_cli_once("analyze", p, "--json").stdout)
        advice = [f["advice"] for f in _flat(out["findings"])]
        assert advice and not any("so Tensor Cores are used" in a for a in advice), (p, advice)
    resnet = compat_path("pytorch__kineto", "tb_plugin_resnet50_num_workers_0_worker0.1623143089861.pt.trace.json.gz")
    out = json.loads(run_cli_once("analyze", resnet, "--json").stdout)
    assert any("AMP so Tensor Cores are used" in f["advice"] for f in _flat(out["findings"]))


def _flat(fs):
    for f in fs:
        yield f
        yield from _flat(f["children"])


def test_the_families_line_says_kernels_go_with_their_launching_op():
    """HTA's MI250 trace: a direct_copy elementwise kernel launched inside aten::addmm is in the 'gemm
    fp32' family, as the efficiency groups kernels by the op that launched them where the op's work
    is known. The line read as if families were the kernels' own kinds; it now says the grouping.
    The launching op is found here from the raw events (correlation id, then the ops around the call)."""
    path = compat_path(
        "facebookresearch__HolisticTraceAnalysis", "amd_trace", "mi250_minitoy_train_ROCm6_2_kineto.json.gz"
    )
    events, _ = load_json(path)
    launch = {
        e["args"]["correlation"]: e
        for e in events
        if e.get("cat") == "cuda_runtime" and "correlation" in (e.get("args") or {})
    }
    ops = [e for e in events if e.get("cat") == "cpu_op" and e.get("ph") == "X"]
    copies = [e for e in events if e.get("cat") == "kernel" and "direct_copy_kernel_cuda" in e["name"]]

    def around(call):  # the ops on the call's thread that hold it
        return {
            o["name"]
            for o in ops
            if (o["pid"], o["tid"]) == (call["pid"], call["tid"])
            and o["ts"] <= call["ts"]
            and call["ts"] + call["dur"] <= o["ts"] + o["dur"]
        }

    in_addmm = [k for k in copies if "aten::addmm" in around(launch[k["args"]["correlation"]])]
    assert in_addmm
    out = json.loads(run_cli_once("analyze", path, "--json").stdout)
    gemm = [f for f in out["efficiency"]["families"] if f["kind"] == "gemm"]
    assert any(in_addmm[0]["name"] in f["top_kernels"] for f in gemm)
    p = run_cli_once("analyze", path)
    (line,) = [ln for ln in p.stdout.splitlines() if ln.startswith("efficiency:")]
    assert "each in its launching op's family where its work is known" in line, line
