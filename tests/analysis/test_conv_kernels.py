"""GEMM kernels a convolution launched are convolution work, and cuDNN's batch-norm kernels are
norm work (an expert audit of HTA's fp32 ResNet-50 on a V100: 117.0 of the 117.3 ms called "FP32
matmuls" were volta_sgemm kernels of aten::cudnn_convolution and convolution_backward, and the
bn_fw_tr / bn_bw kernels, 18% of kernel time, were "other"). Checked against each kernel's
launching op found here from the raw file: the launch call by correlation id, then the innermost
CPU op on its thread around it."""

import re

import pytest
from conftest import compat_path, run_cli_once
from kineto_truth import launching_ops, load_json

RESNET = compat_path(
    "facebookresearch__HolisticTraceAnalysis", "ns_resolution_trace", "rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz"
)


@pytest.fixture(scope="module")
def resnet():
    events, _ = load_json(RESNET)
    p = run_cli_once("analyze", RESNET, "--json")
    return launching_ops(events), p


def test_gemm_kernels_of_convolutions_are_convolution_work(resnet):
    import json

    kernels, p = resnet
    # (with the cuBLAS split-K reduces that finish some of them: part of the same GEMM's work)
    sgemm = [(k, op) for k, op in kernels if re.search(r"sgemm|splitKreduce", k["name"])]
    by_conv = sum(k["dur"] for k, op in sgemm if op and "conv" in op.lower()) * 1e3
    by_mm = sum(k["dur"] for k, op in sgemm if not (op and "conv" in op.lower())) * 1e3
    assert by_conv > 100e6 and by_mm < 1e6  # the audit's 117.0 of 117.3 ms (this file: all steps)
    d = json.loads(p.stdout)
    fam = d["efficiency"]["families"]
    gemm_simt = sum(f["time_ns"] for f in fam if f["kind"] == "gemm" and f["tensor_cores"] is False)
    conv_simt = sum(f["time_ns"] for f in fam if f["kind"] == "conv" and f["tensor_cores"] is False)
    assert gemm_simt == pytest.approx(by_mm, rel=0.02, abs=1e4)
    assert conv_simt >= by_conv * 0.99
    (f,) = [f for f in d["findings"] if f["rule"] == "fp32_simt_conv"]
    assert f["title"].startswith("FP32 convolutions without Tensor Cores: ") and "of convolution time" in f["title"]
    assert "fp16 autocast" in f["title"] and "allow_tf32" not in f["title"]  # a V100: fp16 Tensor Cores only
    assert f["metrics"]["time_ms"] >= by_conv / 1e6 * 0.99
    # the matmuls' own SIMT GEMMs are under 1% of kernel time: no finding of their own
    total = sum(k["dur"] for k, _ in kernels) * 1e3
    assert by_mm < 0.01 * total and not [f for f in d["findings"] if f["rule"] == "fp32_simt_gemm"]


def test_cudnn_batch_norm_kernels_are_norm_work(resnet):
    import json

    kernels, p = resnet
    bn = sum(k["dur"] for k, _ in kernels if re.match(r"(void )?cudnn::bn_(fw|bw)", k["name"])) * 1e3
    assert bn > 50e6
    fam = json.loads(p.stdout)["efficiency"]["families"]
    norm = sum(f["time_ns"] for f in fam if f["kind"] == "norm")
    assert norm >= bn * 0.99


def test_each_simt_finding_replays_its_own_kernels():
    """One kernel name can run both kinds of work (a ResNet's volta_sgemm: its convolutions and its
    linear layer). alexnet has both findings: their what-if changes take disjoint kernels, each as
    many as its finding counts (one rank: the efficiency saw every kernel)."""
    from gpuviewer.io.session import load
    from gpuviewer.session.analysis import analyze_session

    path = compat_path(
        "facebookresearch__HolisticTraceAnalysis",
        "critical_path",
        "alexnet",
        "benchmark_result_2869224_1695835535_trace.json.gz",
    )
    a = analyze_session(load([path]))
    got = {}
    for f in a.findings:
        for x in [f, *f.children]:
            if x.rule in ("fp32_simt_gemm", "fp32_simt_conv"):
                (ch,) = x.fix
                got[x.rule] = (set(int(e) for e in ch.events), x.metrics["kernels"])
    assert set(got) == {"fp32_simt_gemm", "fp32_simt_conv"}
    (g, ng), (c, nc) = got["fp32_simt_gemm"], got["fp32_simt_conv"]
    assert not g & c and len(g) == ng and len(c) == nc


@pytest.mark.parametrize(
    "name",
    [
        "tb_plugin_resnet50_num_workers_0_worker0.ARRAYFORM.pt.trace.json.gz",
        "tb_plugin_resnet50_autograd_api_num_workers_0_worker0.pt.trace.json.gz",
    ],
)
def test_a_volta_run_without_device_properties_is_offered_fp16_only(name):
    """tb_plugin's ResNet-50 traces record no deviceProperties; their cuDNN / cuBLAS kernels are
    built for Volta (volta_scudnn_*, volta_sgemm_*) and none for a newer architecture, so the GPU
    has fp16 Tensor Cores only: the advice offers fp16 autocast, never bf16 or TF32 (it offered
    'bf16 autocast or allow_tf32=True ... 13.9x' as on an H100 NVL, an expert audit)."""
    import json

    path = compat_path("pytorch__kineto", name)
    ev, meta = load_json(path)
    assert not meta.get("deviceProperties")
    kernels = {e["name"] for e in ev if e.get("ph") == "X" and e.get("cat") in ("Kernel", "kernel")}
    assert any(n.startswith("volta_") for n in kernels)
    assert not any(re.search(r"(^|[^a-z0-9])(ampere|turing|hopper|sm_?[89]\d|sm_?1\d\d)_", n, re.I) for n in kernels)
    p = run_cli_once("analyze", path, "--json")
    assert p.returncode == 0, p.stderr[-2000:]
    f = next(f for f in json.loads(p.stdout)["findings"] if f["rule"] == "fp32_simt_conv")
    assert "fp16 autocast" in f["title"] and "bf16" not in f["title"].split("(with a GradScaler")[0]
    assert "allow_tf32" not in f["title"] and "V100" in f["title"]
    assert "compute capability 7.x" in f["title"]
    # the advice too (an audit: it told a V100 user to train in bf16 or let cuDNN use TF32)
    assert "float16" in f["advice"] and "GradScaler" in f["advice"]
    assert "bf16 (" not in f["advice"] and "bfloat16" not in f["advice"] and "allow_tf32" not in f["advice"]


AUTOGRAD = compat_path("pytorch__kineto", "tb_plugin_resnet50_autograd_api_num_workers_0_worker0.pt.trace.json.gz")


@pytest.mark.parametrize("which", ["device recorded", "device not recorded"])
def test_fp32_convolution_engines_on_a_volta_are_simt(resnet, which):
    """A V100 has no TF32: its Tensor Cores take fp16 inputs only, so cuDNN's fp32 engines
    (dgrad_engine<float, ...>, wgrad_alg0_engine<float, ...>), whose names say no Tensor Core,
    run on the SIMT units like implicit_convolve_sgemm (an audit: 54% printed where 67% of the
    kernel time was FP32 convolution). Against the raw file: every kernel a convolution op
    launched whose name computes in float (a "<float" template, an sgemm or scudnn), split-K
    reductions and Winograd transforms (no matrix multiply) left out. The same where the device
    is not recorded and the kernels are built for Volta at the newest (tb_plugin's autograd_api
    ResNet-50: 50% said, the other half the same engines, an audit)."""
    import json

    if which == "device recorded":
        kernels, p = resnet
    else:
        events, _ = load_json(AUTOGRAD)
        kernels, p = launching_ops(events), run_cli_once("analyze", AUTOGRAD, "--json")
    fp32_conv = sum(
        k["dur"]
        for k, op in kernels
        if op
        and "conv" in op.lower()
        and re.search(r"<float|sgemm|scudnn", k["name"])
        and not re.search(r"reduce|winograd(Forward|Wgrad)|WinogradTiles", k["name"])
    )
    d = json.loads(p.stdout)
    assert ("V100" in d["efficiency"]["device"]) == (which == "device recorded")
    fam = d["efficiency"]["families"]
    conv_simt = sum(f["time_ns"] for f in fam if f["kind"] == "conv" and f["tensor_cores"] is False)
    if which == "device recorded":
        assert conv_simt == pytest.approx(fp32_conv * 1e3, rel=0.01)
    else:
        # its steps (from one Optimizer.step to the next) hold half its kernels: compared as the
        # share of the float convolution kernels' time on the SIMT units (it was 50%: 0.93 here,
        # over the whole file, 0.955 in the steps)
        floats = sum(
            k["dur"]
            for k, op in kernels
            if op and "conv" in op.lower() and re.search(r"<float|sgemm|scudnn", k["name"])
        )
        fp32_fam = sum(f["time_ns"] for f in fam if f["kind"] == "conv" and f.get("precision") == "fp32")
        assert conv_simt / fp32_fam == pytest.approx(fp32_conv / floats, abs=0.03)
    left = [f for f in fam if f["kind"] == "conv" and f.get("precision") == "fp32" and f["tensor_cores"] is None]
    assert all(re.search(r"reduce|winograd", k, re.I) for f in left for k in f["top_kernels"]), left


def test_a_convolutions_transform_kernels_are_said_beside_its_share(resnet):
    """The V100 ResNet-50 (fp32, no TF32 on the device): 'FP32 convolutions without Tensor Cores: 92% of
    convolution time' left out its cuDNN Winograd transforms and wgrad reductions, FP32 and off the
    Tensor Cores too.
    The title gives the share with them, their time read here from the raw file (the what-if still
    speeds up only the matrix kernels)."""
    import json

    kernels, p = resnet
    # cuDNN's Winograd transforms and wgrad reductions (its scudnn_winograd matrix kernels are in the
    # SIMT family already)
    wino = [k for k, _ in kernels if re.search(r"winograd_nonfused|generateWinogradTiles|reduce_wgrad", k["name"])]
    assert wino and all("<float" in k["name"] for k in wino)  # FP32, on a GPU without TF32
    winograd = sum(k["dur"] for k in wino) / 1e3
    (f,) = [f for f in json.loads(p.stdout)["findings"] if f["rule"] == "fp32_simt_conv"]
    said = re.search(r"; (\d+)% with the ([\d.]+) ms of FP32 helper kernels around them", f["title"])
    assert said, f["title"]
    # the measured steps' share of the file's (the warm-up step's left out): most of it, never more
    assert 0.5 * winograd <= float(said[2]) <= winograd
    assert int(said[1]) > int(re.search(r"Tensor Cores: (\d+)% of convolution time", f["title"])[1])


ALEXNET = compat_path(
    "facebookresearch__HolisticTraceAnalysis",
    "critical_path",
    "alexnet",
    "benchmark_result_2869224_1695835535_trace.json.gz",
)


def test_cudnn_fft_convolution_transforms_are_convolution_helpers_not_reductions():
    """HTA's A100 AlexNet runs some convolutions through cuDNN's FFT algorithm: fft2d_r2c / fft2d_c2r
    transforms beside ampere_gcgemm kernels. An argument type in their names, cudnn::reduced_divisor,
    made them a "reduction 5%" family, and the FP32 convolution share left them out. They are the
    convolutions' FP32 helpers: said beside the share (their time from the raw file), and no
    reduction family remains (the trace runs no reduction kernel)."""
    import json

    events, _ = load_json(ALEXNET)
    fft = [e for e in events if e.get("cat") == "kernel" and re.match(r"void fft2d_[rc]2[rc]_", e["name"])]
    assert fft and all("cudnn::reduced_divisor" in e["name"] for e in fft)
    fft_ms = sum(e["dur"] for e in fft) / 1e3
    assert not [e for e in events if e.get("cat") == "kernel" and re.search(r"reduce_|reduction", e["name"])]
    out = json.loads(run_cli_once("analyze", ALEXNET, "--json").stdout)
    assert not [r for r in out["efficiency"]["families"] if r["kind"] == "reduction"]
    (f,) = [f for f in out["findings"] if f["rule"] == "fp32_simt_conv"]
    said = re.search(r"; (\d+)% with the ([\d.]+) ms of FP32 helper kernels around them", f["title"])
    assert said, f["title"]
    # the capture is the whole file here (no steps): every FFT kernel is in it, with the FP32 helpers
    # of other names (the FFT convolutions' only other kernels are their gcgemm matrix kernels)
    assert abs(float(said[2]) - fft_ms) <= 0.05 + 0.05 * fft_ms
