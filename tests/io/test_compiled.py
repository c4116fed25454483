"""torch.compile traces (issue 27, item 3): Triton kernels launched through cuLaunchKernelEx are
compute kernels named by their Inductor names, their launches are launches (flows, steps, the
launch-bound rule), compiled regions are host ranges, and no fused Triton kernel is of an
unknown kind. Counts come from the JSON written here and from HTA's triton_example."""

import gzip
import json
from collections import Counter

import numpy as np
import pytest
from conftest import compat_path

import gpuviewer
from gpuviewer.analysis import kernel_class

TRITON = [
    "triton_poi_fused_add_mul_0",
    "triton_red_fused_sum_1",
    "triton_per_fused_native_layer_norm_2",
    "triton_tem_fused_mm_3",
]
MM = "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1_execute_segment_k_off"
REGIONS = ["Torch-Compiled Region: 0/0", "CompiledFunction", "## Call CompiledFxGraph fq3xkz7 ##"]
N_STEPS, PER_STEP = 3, 15  # 15 rounds of the four Triton kernels and one extern matmul a step
KERNEL_US, GAP_US = 3.0, 8.0


def _trace() -> dict:
    ev, corr, t = [], 500, 1000.0
    host = {"pid": 200, "tid": 200}

    def x(cat, name, ts, dur, **args):
        ev.append({"ph": "X", "cat": cat, "name": name, "ts": ts, "dur": dur, **host, "args": args})

    def launch(api, cat, kname, ts):
        nonlocal corr
        corr += 1
        x(cat, api, ts, 4.0, correlation=corr)
        ev.append({"ph": "s", "cat": "ac2g", "name": "ac2g", "id": corr, **host, "ts": ts})
        k0 = ts + 9
        ev.append(
            {
                "ph": "X",
                "cat": "kernel",
                "name": kname,
                "pid": 0,
                "tid": 7,
                "ts": k0,
                "dur": KERNEL_US,
                "args": {"device": 0, "stream": 7, "correlation": corr},
            }
        )
        ev.append({"ph": "f", "cat": "ac2g", "name": "ac2g", "id": corr, "pid": 0, "tid": 7, "ts": k0, "bp": "e"})

    for k in range(N_STEPS):
        n = PER_STEP * (len(TRITON) + 1)
        span = 20 + n * (KERNEL_US + GAP_US) + 20
        x("user_annotation", f"ProfilerStep#{k + 1}", t, span + 20)
        x("cpu_op", "TorchDynamo Cache Lookup", t + 2, 5)
        x("cpu_op", REGIONS[0], t + 8, span)
        x("cpu_op", REGIONS[1], t + 9, span - 2)
        x("user_annotation", REGIONS[2], t + 10, span - 4)
        ts = t + 20
        for _ in range(PER_STEP):
            for name in TRITON + [MM]:
                if name == MM:
                    x("cpu_op", "aten::mm", ts - 0.5, 6)
                    launch("cudaLaunchKernel", "cuda_runtime", name, ts)
                else:
                    x("cpu_op", name, ts - 0.5, 6, kernel_backend="triton")
                    launch("cuLaunchKernelEx", "cuda_driver", name, ts)
                ts += KERNEL_US + GAP_US
        t += span + 40
    ev.append({"ph": "M", "name": "process_labels", "pid": 0, "tid": 0, "args": {"labels": "GPU 0"}})
    return {"schemaVersion": 1, "traceEvents": ev}


@pytest.fixture(scope="module")
def compiled(tmp_path_factory):
    doc = _trace()
    p = tmp_path_factory.mktemp("compiled") / "compiled.json"
    p.write_text(json.dumps(doc))
    return doc["traceEvents"], gpuviewer.open([str(p)], use_cache=False)


def test_triton_kernels_are_compute_kernels(compiled):
    events, s = compiled
    ks = [e for e in events if e.get("cat") == "kernel"]
    k = s.kernels
    assert len(k) == len(ks)
    assert Counter(k.name) == Counter(e["name"] for e in ks)
    assert set(k.kind) == {"compute"}
    assert set(zip(k.device, k.stream)) == {(e["args"]["device"], e["args"]["stream"]) for e in ks}


def test_cuLaunchKernelEx_launches_are_launches(compiled):
    """Flows from each cuLaunchKernelEx to its Triton kernel; the launch is a CUDA API call."""
    events, s = compiled
    t = s.trace
    src, dst = (np.asarray(x) for x in t.flows)
    names = np.asarray(t.columns["name"])
    src_name = [t.names[int(n)] for n in names[src]]
    dst_name = [t.names[int(n)] for n in names[dst]]
    want = Counter(e["name"] for e in events if e.get("cat") == "kernel" and e["name"].startswith("triton_"))
    assert Counter(d for a, d in zip(src_name, dst_name) if a == "cuLaunchKernelEx") == want
    api = s.slices_in(kind="cuda_api")
    assert (api.name == "cuLaunchKernelEx").sum() == sum(e["name"] == "cuLaunchKernelEx" for e in events)


def test_compiled_regions_are_host_ranges(compiled):
    events, s = compiled
    cpu = s.slices_in(kind="cpu")
    for name in REGIONS:
        assert (cpu.name == name).sum() == sum(e["name"] == name for e in events) == N_STEPS
    # ... never GPU work
    assert not set(REGIONS) & set(s.kernels.name)


def test_steps_and_busy_time_from_the_json(compiled):
    events, s = compiled
    steps = [e for e in events if e["name"].startswith("ProfilerStep#")]
    ks = [e for e in events if e.get("cat") == "kernel"]
    launch_ts = {
        e["args"]["correlation"]: e["ts"] for e in events if e["name"] in ("cuLaunchKernelEx", "cudaLaunchKernel")
    }
    assert s.steps.step.tolist() == [int(e["name"].split("#")[1]) for e in steps]
    for st, row in zip(steps, s.steps.itertuples()):
        mine = [k for k in ks if st["ts"] <= launch_ts[k["args"]["correlation"]] < st["ts"] + st["dur"]]
        assert row.kernels == len(mine)
        assert row.busy_ns == pytest.approx(sum(k["dur"] for k in mine) * 1000, abs=len(mine))


def test_many_short_triton_launches_are_launch_bound(compiled):
    """75 kernels of 3 us a step, 8 us apart, each launched on its own: launch-bound."""
    _, s = compiled
    assert "launch_bound" in set(s.findings.rule)


def test_no_fused_triton_kernel_is_of_unknown_kind(compiled):
    events, s = compiled
    kinds = {n: kernel_class.kind(n) for n in TRITON}
    assert kinds == {
        TRITON[0]: "fused elementwise",
        TRITON[1]: "fused reduction",
        TRITON[2]: "fused reduction",
        TRITON[3]: "gemm",
    }
    fam = s.efficiency().families
    triton_time = sum(e["dur"] for e in events if e.get("cat") == "kernel" and e["name"].startswith("triton_")) * 1000
    named = [f for f in fam if any(k.startswith("triton_") for k in f["top_kernels"])]
    assert named and all(f["kind"] != "other" for f in named)
    assert sum(f["time_ns"] for f in fam if f["kind"] != "other") >= triton_time - len(events)
    text = " ".join(s.findings.title)
    assert "unknown" not in text.lower()
    # already fused: no advice to fuse them with torch.compile
    assert "torch.compile" not in text


TRITON_EXAMPLE = compat_path("facebookresearch__HolisticTraceAnalysis", "triton_example", "triton_example.json.gz")


def test_hta_triton_example():
    with gzip.open(TRITON_EXAMPLE) as f:
        events = json.load(f)["traceEvents"]
    s = gpuviewer.open([TRITON_EXAMPLE], use_cache=False)
    ks = [e for e in events if e.get("cat") == "kernel"]
    assert len(s.kernels) == len(ks) and set(s.kernels.kind) == {"compute"}
    assert {kernel_class.kind(n) for n in s.kernels.name} == {"fused elementwise"}
    t = s.trace
    src, dst = (np.asarray(x) for x in t.flows)
    launches = {t.names[int(t.columns["name"][i])] for i in src[np.isin(dst, s.kernels.id.to_numpy())]}
    assert launches == {e["name"] for e in events if e.get("cat") == "cuda_driver"} == {"cuLaunchKernel"}
    regions = [e for e in events if e["name"].startswith("Torch-Compiled Region")]
    cpu = s.slices_in(kind="cpu")
    assert (cpu.name.str.startswith("Torch-Compiled Region")).sum() == len(regions) > 0
