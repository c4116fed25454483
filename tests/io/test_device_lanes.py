"""Devices other than CUDA GPUs (issue 27, item 4): MTIA (and other accelerators') events on a
device's process get that device's lanes - as kernels where their category says they are device
ops, as slices named in a warning where it is one the reader does not know; a ROCm/HIP trace
keeps its device lanes and kernels. Counts come from the JSON written here and the raw files."""

import gzip
import json
from collections import Counter

import numpy as np
import pytest
from conftest import compat_path, run_cli

import gpuviewer

MI250 = compat_path(
    "facebookresearch__HolisticTraceAnalysis", "amd_trace", "mi250_minitoy_train_ROCm6_2_kineto.json.gz"
)


def _mtia_trace() -> dict:
    """A host thread launching on two MTIA devices (pid = device, as Kineto writes): device 0's
    ops under a category the reader does not know ('mtia_device_op', pid labelled 'MTIA 0'),
    device 1's as MTIA command processor events ('mtia_ccp_events', pid named 'MTIA 1')."""
    ev = [{"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "pid": 10, "tid": 10, "ts": 0, "dur": 2000}]
    for j in range(12):
        t = 10 + j * 100
        ev.append(
            {
                "ph": "X",
                "cat": "mtia_runtime",
                "name": "mtiaLaunchKernel",
                "pid": 10,
                "tid": 10,
                "ts": t,
                "dur": 5,
                "args": {"correlation": 100 + j},
            }
        )
        pid, cat, tid = (0, "mtia_device_op", 3) if j % 3 == 0 else (1, "mtia_ccp_events", 5 + j % 2)
        ev.append(
            {
                "ph": "X",
                "cat": cat,
                "name": f"fused_op_{j}",
                "pid": pid,
                "tid": tid,
                "ts": t + 20,
                "dur": 40,
                "args": {"correlation": 100 + j},
            }
        )
    ev += [
        {"ph": "M", "name": "process_name", "pid": 10, "tid": 0, "args": {"name": "python3"}},
        {"ph": "M", "name": "process_labels", "pid": 10, "tid": 0, "args": {"labels": "CPU"}},
        {"ph": "M", "name": "process_name", "pid": 0, "tid": 0, "args": {"name": "python3"}},
        {"ph": "M", "name": "process_labels", "pid": 0, "tid": 0, "args": {"labels": "MTIA 0"}},
        {"ph": "M", "name": "process_name", "pid": 1, "tid": 0, "args": {"name": "MTIA 1"}},
    ]
    return {"schemaVersion": 1, "traceEvents": ev}


@pytest.fixture(scope="module")
def mtia(tmp_path_factory):
    doc = _mtia_trace()
    p = tmp_path_factory.mktemp("mtia") / "mtia.json"
    p.write_text(json.dumps(doc))
    return str(p), doc["traceEvents"], gpuviewer.open([str(p)], use_cache=False)


def test_mtia_devices_get_device_lanes(mtia):
    _, events, s = mtia
    ccp = [e for e in events if e.get("cat") == "mtia_ccp_events"]
    unknown = [e for e in events if e.get("cat") == "mtia_device_op"]
    # device 1's command-processor ops are kernels on its lanes, one lane a queue (tid)
    assert len(s.kernels) == len(ccp)
    assert set(zip(s.kernels.device, s.kernels.stream)) == {(1, e["tid"]) for e in ccp}
    # device 0's ops of a category not understood: on device 0's lane, not GPU work
    gpu = s.slices_in(kind="gpu")
    dev0 = gpu[gpu.device == 0]
    assert len(dev0) == len(unknown) and set(dev0.stream) == {e["tid"] for e in unknown}
    assert set(dev0.category) == {"other"}
    assert sorted({d for d in s.slices_in(kind="gpu").device}) == [0, 1]
    # the host's launches are on the API lanes and flow to the device ops they launched
    launches = [e for e in events if e["name"] == "mtiaLaunchKernel"]
    assert (s.slices_in(kind="cuda_api").name == "mtiaLaunchKernel").sum() == len(launches)
    src, dst = (np.asarray(x) for x in s.trace.flows)
    assert sorted(dst[np.isin(dst, s.kernels.id.to_numpy())].tolist()) == sorted(s.kernels.id.tolist())


def test_device_events_not_understood_are_named_in_a_warning(mtia):
    path, events, s = mtia
    n = Counter(e.get("cat") for e in events)["mtia_device_op"]
    said = [w for w in s.trace.warnings if "not understood" in w]
    assert len(said) == 1 and f"{n} 'mtia_device_op'" in said[0] and "'MTIA 0'" in said[0]
    p = run_cli("info", path, "--no-cache", "--json")
    assert p.returncode == 0
    info = json.loads(p.stdout)
    assert info["kernels"] == Counter(e.get("cat") for e in events)["mtia_ccp_events"]
    assert info["ranks"][0]["devices"] == [0, 1]
    assert any("'MTIA 0'" in w for w in info["warnings"])


def test_rocm_mi250_keeps_its_device_lanes():
    with gzip.open(MI250) as f:
        events = json.load(f)["traceEvents"]
    s = gpuviewer.open([MI250], use_cache=False)
    ks = [e for e in events if e.get("cat") == "kernel"]
    gpu_work = [e for e in events if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")]
    assert len(s.kernels) == len(ks) > 0
    assert set(zip(s.kernels.device, s.kernels.stream)) == {(e["args"]["device"], e["args"]["stream"]) for e in ks}
    assert sorted(set(s.slices_in(kind="gpu").device)) == sorted({e["pid"] for e in gpu_work})
    assert not [w for w in s.trace.warnings if "not understood" in w]
    # every HIP kernel flows from its hipLaunchKernel / hipExtModuleLaunchKernel
    t = s.trace
    src, dst = (np.asarray(x) for x in t.flows)
    linked = set(dst[np.isin(dst, s.kernels.id.to_numpy())].tolist())
    corr = {e["args"]["correlation"] for e in events if e.get("cat") == "cuda_runtime"}
    assert len(linked) == sum(e["args"].get("correlation") in corr for e in ks)
