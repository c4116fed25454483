"""The JAX/XLA trace reader (issue 27, items 1 and 5): small XLA traces built here, whose
expected kernels, lanes, steps, flows and GPU time are computed from the JSON the test writes,
and the real jax_train_stall trace (its figures counted from the raw file)."""

from __future__ import annotations

import gzip
import json
import os
import random
import re

import pytest
from conftest import run_cli, trace_path, write_json_gz

import gpuviewer
from gpuviewer.io.sniff import sniff

JAX = trace_path("jax", "jax_train_stall.trace.json.gz")
GPU_PID, HOST_PID = 1, 701
COMPUTE, NCCL = 7, 9  # the two stream threads of /device:GPU:0
STEP_US = 1000.0


def _meta(pid, name, tid=None):
    e = {"ph": "M", "pid": pid, "name": name}
    if tid is not None:
        e["tid"] = tid
    return e


def build_trace(steps: int = 3, devices: tuple = (0,), meta_last: bool = False) -> dict:
    """An XLA trace as jax.profiler writes it: a /device:GPU:N process per device with a compute
    and an NCCL stream, a /host:CPU process with a `train` StepTraceAnnotation per step, the
    jit module's run, a Python range and one launch (correlation_id) per GPU op. Each GPU event
    carries "_role" (compute / comm / memcpy / memset) for the test's own counting."""
    meta = [_meta(HOST_PID, "process_name"), _meta(HOST_PID, "thread_name", 42)]
    meta[0]["args"], meta[1]["args"] = {"name": "/host:CPU"}, {"name": "python3"}
    evs = []
    corr = 0
    for d in devices:
        pid = GPU_PID + d
        for m, a in (
            (_meta(pid, "process_name"), f"/device:GPU:{d}"),
            (_meta(pid, "thread_name", COMPUTE), f"Stream #{COMPUTE}(Compute,Memcpy)"),
            (_meta(pid, "thread_name", NCCL), f"Stream #{NCCL}(Nccl)"),
        ):
            m["args"] = {"name": a}
            meta.append(m)
    for k in range(steps):
        t0 = 100.0 + k * STEP_US
        evs.append(
            {
                "ph": "X",
                "pid": HOST_PID,
                "tid": 42,
                "ts": t0,
                "dur": 900.0,
                "name": "train",
                "args": {"step_num": str(k)},
            }
        )
        evs.append({"ph": "X", "pid": HOST_PID, "tid": 42, "ts": t0 + 5, "dur": 400.0, "name": "$train.py:12 update"})
        evs.append(
            {
                "ph": "X",
                "pid": HOST_PID,
                "tid": 42,
                "ts": t0 + 10,
                "dur": 300.0,
                "name": "CommonPjRtLoadedExecutable::Execute (jit_update)",
                "args": {"name": "jit_update"},
            }
        )
        for d in devices:
            pid = GPU_PID + d
            gpu = [
                ("MemcpyH2D", COMPUTE, 100.0, 20.0, "memcpy", "copy-start"),
                ("loop_multiply_fusion", COMPUTE, 130.0, 150.0, "compute", "multiply_fusion"),
                ("Memset 0", COMPUTE, 290.0, 2.0, "memset", "command_buffer"),
                ("nvjet_sm90_tst_128x128_64x6_2x1_v_bz_NNT", COMPUTE, 300.0, 200.0, "compute", "dot.3"),
                ("ncclDevKernel_AllReduce_Sum_bf16_RING_LL", NCCL, 510.0, 80.0, "comm", "all-reduce-start.1"),
                ("all-gather-start.2", NCCL, 600.0, 30.0, "comm", "all-gather-start.2"),
            ]
            for name, stream, dt, dur, role, hlo in gpu:
                corr += 1
                launch = "cuMemcpyAsync" if role == "memcpy" else name  # XLA names a launch by its kernel
                evs.append(
                    {
                        "ph": "X",
                        "pid": HOST_PID,
                        "tid": 42,
                        "ts": t0 + 20 + corr % 7,
                        "dur": 3.0,
                        "name": launch,
                        "args": {"correlation_id": str(corr), "device_id": str(d)},
                    }
                )
                evs.append(
                    {
                        "ph": "X",
                        "pid": pid,
                        "tid": stream,
                        "ts": t0 + dt,
                        "dur": dur,
                        "name": name,
                        "_role": role,
                        "args": {
                            "correlation_id": str(corr),
                            "hlo_module": "jit_update",
                            "hlo_op": hlo,
                            "kernel_details": "regs:26 static_shared:0 dynamic_shared:0 grid:16384,1,1 "
                            "block:128,1,1 occ_pct:100",
                            "theoretical_occupancy_pct": "100",
                        },
                    }
                )
    evs.sort(key=lambda e: e["ts"])
    events = evs + meta if meta_last else meta + evs
    return {"displayTimeUnit": "ns", "metadata": {"highres-ticks": True}, "traceEvents": events + [{}]}


def write(doc: dict, path) -> str:
    """Write the trace without the test's "_role" marks, gzipped as XLA writes it."""
    clean = dict(doc, traceEvents=[{k: v for k, v in e.items() if k != "_role"} for e in doc["traceEvents"]])
    write_json_gz(path, clean)
    return str(path)


def gpu_events(doc: dict, device: int = 0) -> list[dict]:
    return [e for e in doc["traceEvents"] if e.get("ph") == "X" and e["pid"] == GPU_PID + device]


@pytest.fixture(scope="module")
def small(tmp_path_factory):
    doc = build_trace()
    path = write(doc, tmp_path_factory.mktemp("jax") / "node0.trace.json.gz")
    return doc, path, gpuviewer.open([path])


def test_small_trace_is_read_as_jax_with_kernels_by_kind(small):
    doc, path, s = small
    assert sniff(path) == "jax" and s.trace.format == "jax"
    ev = gpu_events(doc)
    roles = [e["_role"] for e in ev]
    k = s.kernels
    assert len(k) == roles.count("compute") + roles.count("comm")
    assert (k["kind"] == "comm").sum() == roles.count("comm")
    assert sorted(k.loc[k["kind"] == "comm", "name"].unique()) == sorted(
        {e["name"] for e in ev if e["_role"] == "comm"}
    )
    copies = s.memops
    assert len(copies) == roles.count("memcpy") + roles.count("memset")
    assert (copies["kind"] == "memset").sum() == roles.count("memset")
    assert s.trace.ranks[0].host == "node0" and s.trace.ranks[0].devices == [0]


def test_small_trace_lanes_are_streams_and_host_threads(small):
    doc, _path, s = small
    lanes = s.trace.lanes
    gpu = {ln.stream: ln for ln in lanes if ln.device == 0 and ln.kind in ("gpu", "comm")}
    assert set(gpu) == {e["tid"] for e in gpu_events(doc)} == {COMPUTE, NCCL}
    assert gpu[NCCL].kind == "comm" and gpu[COMPUTE].kind == "gpu"  # the NCCL stream runs only NCCL
    host = [ln for ln in lanes if ln.device == -1]
    assert {ln.kind for ln in host} == {"cpu", "cuda_api"}
    assert {ln.label for ln in host} == {"python3", "CUDA API · python3"}


def test_small_trace_steps_from_step_trace_annotation(small):
    doc, _path, s = small
    want = [
        (int(e["args"]["step_num"]), round(e["ts"] * 1000), round((e["ts"] + e["dur"]) * 1000))
        for e in doc["traceEvents"]
        if e.get("name") == "train"
    ]
    assert [(st.step, st.start, st.end) for st in s.trace.steps] == want


def test_small_trace_flows_join_launch_and_gpu_op_by_correlation_id(small):
    doc, _path, s = small
    host = {
        e["args"]["correlation_id"]: e["name"]
        for e in doc["traceEvents"]
        if e.get("pid") == HOST_PID and "correlation_id" in e.get("args", {})
    }
    want = sorted(
        (host[e["args"]["correlation_id"]], e["name"]) for e in gpu_events(doc) if e["args"]["correlation_id"] in host
    )
    t = s.trace
    src, dst = t.flows
    got = sorted((t.names[t.columns["name"][a]], t.names[t.columns["name"][b]]) for a, b in zip(src, dst))
    assert got == want and len(want) == len(gpu_events(doc))


def test_small_trace_gpu_time_per_step(small):
    """The analysis' per-step compute, communication and copy time are the JSON's durations; the
    utilization is compute over the step (host start to the next step's start)."""
    doc, _path, s = small
    a = s.analysis.to_json()["ranks"][0]
    steps = [e for e in doc["traceEvents"] if e.get("name") == "train"]
    ev = gpu_events(doc)
    for st, rec in zip(steps, a["steps"]):
        inside = [e for e in ev if st["ts"] <= e["ts"] < st["ts"] + STEP_US]
        assert rec["compute_ns"] == round(sum(e["dur"] for e in inside if e["_role"] == "compute") * 1000)
        # copies and sets, as nsys counts memory operations
        assert rec["memcpy_ns"] == round(sum(e["dur"] for e in inside if e["_role"] in ("memcpy", "memset")) * 1000)
        assert rec["comm_ns"] == round(sum(e["dur"] for e in inside if e["_role"] == "comm") * 1000)
        assert rec["kernels"] == sum(e["_role"] in ("compute", "comm") for e in inside)
        assert rec["comm_kernels"] == sum(e["_role"] == "comm" for e in inside)
    for st, nxt, rec in zip(steps, steps[1:], a["steps"]):
        compute = sum(e["dur"] for e in ev if e["_role"] == "compute" and st["ts"] <= e["ts"] < nxt["ts"])
        assert rec["utilization"] == pytest.approx(compute / (nxt["ts"] - st["ts"]), abs=0.002)


def test_details_show_kernel_details_and_occupancy(small):
    from gpuviewer.io.args import event_args

    doc, _path, s = small
    t = s.trace
    i = int(s.kernels["id"].iloc[0])
    want = next(e for e in gpu_events(doc) if e["ts"] * 1000 == t.columns["start"][i])["args"]
    got = event_args(t, i)
    assert got["kernel_details"] == want["kernel_details"]
    assert got["theoretical_occupancy_pct"] == want["theoretical_occupancy_pct"]


def test_two_gpus_of_one_process_are_devices_of_one_rank(tmp_path):
    doc = build_trace(steps=2, devices=(0, 1))
    s = gpuviewer.open([write(doc, tmp_path / "h.trace.json.gz")])
    assert [r.rank for r in s.trace.ranks] == [0] and s.trace.ranks[0].devices == [0, 1]
    for d in (0, 1):
        want = sum(e["_role"] in ("compute", "comm") for e in gpu_events(doc, d))
        assert (s.kernels["device"] == d).sum() == want


def test_process_names_after_the_first_4kb_still_sniff_as_jax(tmp_path):
    doc = build_trace(steps=6, meta_last=True)
    path = write(doc, tmp_path / "late.trace.json.gz")
    with gzip.open(path, "rb") as f:
        assert b"/device:GPU:0" not in f.read(4096)
    assert sniff(path) == "jax"
    assert len(gpuviewer.open([path]).kernels) == sum(e["_role"] in ("compute", "comm") for e in gpu_events(doc))


def test_kineto_files_are_not_taken():
    from conftest import SAMPLES

    files = [os.path.join(SAMPLES, "ddp", f) for f in sorted(os.listdir(os.path.join(SAMPLES, "ddp")))]
    kinds = {sniff(f) for f in files if f.endswith((".json", ".json.gz"))}
    assert kinds == {"kineto"}


def test_xplane_pb_is_refused_with_the_file_to_open(tmp_path):
    p = tmp_path / "host.xplane.pb"
    p.write_bytes(b"\x0a\x05hello")
    r = run_cli("info", str(p), "--no-cache")
    assert r.returncode == 2
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and str(p) in lines[0] and ".trace.json.gz" in lines[0]
    assert "Traceback" not in r.stderr and os.listdir(tmp_path) == ["host.xplane.pb"]


# -- the real trace -------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def raw():
    with gzip.open(JAX, "rt") as f:
        evs = json.load(f)["traceEvents"]
    procs = {e["pid"]: e["args"]["name"] for e in evs if e.get("ph") == "M" and e.get("name") == "process_name"}
    gpu = [e for e in evs if e.get("ph") == "X" and procs[e["pid"]].startswith("/device:GPU:")]
    return evs, gpu


@pytest.fixture(scope="module")
def real():
    return gpuviewer.open([JAX])


def test_real_trace_gpu_ops_steps_and_flows(raw, real):
    evs, gpu = raw
    assert len(gpu) == 232  # the README's count, from the raw file
    t = real.trace
    ops = [e for e in gpu if not e["name"].startswith(("Memset", "Memcpy"))]
    assert len(real.kernels) == len(ops) and len(real.kernels) + len(real.memops) == len(gpu)
    steps = sorted(
        (int(e["args"]["step_num"]), round(e["ts"] * 1000))
        for e in evs
        if e.get("name") == "train" and "step_num" in e.get("args", {})
    )
    assert len(steps) == 8 and [(st.step, st.start) for st in t.steps] == steps
    launches = {
        e["args"]["correlation_id"]
        for e in evs
        if e.get("ph") == "X" and e not in gpu and "correlation_id" in e.get("args", {})
    }
    assert len(t.flows[0]) == sum(e["args"].get("correlation_id") in launches for e in gpu)


def test_real_trace_analyze_finds_the_step_4_stall():
    r = run_cli("analyze", JAX, "--json")
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    stall = [f for f in d["findings"] if f["step"] == 4 and f["rule"] in ("step_outlier", "host_bound_idle")]
    assert stall and stall[0]["saves_ms"] > 20  # the 30 ms sleep, over 8 steps
    assert d["ranks"][0]["steps"][4]["host_end_ns"] - d["ranks"][0]["steps"][4]["host_start_ns"] > 30e6
    # advice a JAX user can act on: JAX's terms, none of PyTorch's
    for f in d["findings"]:
        assert not any(w in f["advice"] for w in ("DataLoader", "torch", "pin_memory")), f["advice"]
    assert any("jax" in f["advice"].lower() for f in d["findings"])


def test_real_trace_info(raw):
    r = run_cli("info", JAX, "--json")
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    ops = [e for e in raw[1] if not e["name"].startswith(("Memset", "Memcpy"))]
    assert d["format"] == "jax" and d["kernels"] == len(ops)
    assert d["ranks"][0]["devices"] == [0] and d["ranks"][0]["steps"] == list(range(8))


def test_real_trace_stats(raw):
    r = run_cli("stats", JAX, "--report", "kern", "--json")
    assert r.returncode == 0, r.stderr
    rows = json.loads(r.stdout)
    ops = [e for e in raw[1] if not e["name"].startswith(("Memset", "Memcpy"))]
    assert sum(x["instances"] for x in rows) == len(ops)
    assert {x["name"] for x in rows} == {e["name"] for e in ops}


def test_real_trace_sql(raw):
    r = run_cli("sql", JAX, "SELECT count(*) AS n, sum(dur) AS total FROM kernels", "--json")
    assert r.returncode == 0, r.stderr
    row = json.loads(r.stdout)[0]
    ops = [e for e in raw[1] if not e["name"].startswith(("Memset", "Memcpy"))]
    assert row["n"] == len(ops)
    assert row["total"] == pytest.approx(sum(e["dur"] for e in ops) * 1000, abs=len(ops))


def test_real_trace_diff_step_4_against_the_others():
    r = run_cli("diff", JAX, "--steps", "4", "median", "--json")
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    parts = {p["part"]: p for p in d["step_parts"]}
    assert parts["step"]["a_ns"] - parts["step"]["b_ns"] > 25e6 and parts["step"]["significant"]


def test_xla_derived_lines_are_annotations_and_jit_runs_are_steps(tmp_path):
    """A device's "XLA Ops" line repeats its kernels as HLO ops: an annotation lane, not GPU
    work. Without StepTraceAnnotation each run of the jit module is a step."""
    doc = build_trace(steps=4)
    evs = [e for e in doc["traceEvents"] if e.get("name") != "train"]
    ops_tid = 99
    meta = {"ph": "M", "pid": GPU_PID, "tid": ops_tid, "name": "thread_name", "args": {"name": "XLA Ops"}}
    derived = [dict(e, tid=ops_tid, name=e["args"]["hlo_op"], _role="derived") for e in gpu_events(doc)]
    doc = dict(doc, traceEvents=[meta] + evs + derived)
    s = gpuviewer.open([write(doc, tmp_path / "h.trace.json.gz")])
    ann = [ln for ln in s.trace.lanes if ln.kind == "gpu_annotation"]
    assert [(ln.device, ln.stream, ln.label) for ln in ann] == [(0, ops_tid, "XLA Ops")]
    gpu = gpu_events(doc)
    assert len(s.kernels) == sum(e["_role"] in ("compute", "comm") for e in gpu)
    runs = sorted(
        (round(e["ts"] * 1000), round((e["ts"] + e["dur"]) * 1000))
        for e in evs
        if e.get("name") == "CommonPjRtLoadedExecutable::Execute (jit_update)"
    )
    assert [(st.step, st.start, st.end) for st in s.trace.steps] == [(i, a, b) for i, (a, b) in enumerate(runs)]


def test_run_folder_with_the_perfetto_copy_is_one_host(tmp_path):
    """create_perfetto_trace=True writes perfetto_trace.json.gz (the same events, json.dumps'
    spacing, no displayTimeUnit) beside <host>.trace.json.gz: the run folder is one rank."""
    doc = build_trace(steps=2)
    write(doc, tmp_path / "node7.trace.json.gz")
    copy = {k: v for k, v in doc.items() if k != "displayTimeUnit"}
    copy["traceEvents"] = [{k: v for k, v in e.items() if k != "_role"} for e in doc["traceEvents"]]
    write_json_gz(tmp_path / "perfetto_trace.json.gz", copy)
    assert sniff(str(tmp_path / "perfetto_trace.json.gz")) == "jax"
    s = gpuviewer.open([str(tmp_path)])
    assert [(r.rank, r.host) for r in s.trace.ranks] == [(0, "node7")]
    assert len(s.kernels) == sum(e["_role"] in ("compute", "comm") for e in gpu_events(doc))
    assert any("perfetto_trace.json.gz: left out" in w for w in s.trace.warnings)


def test_kernel_launch_configuration_from_kernel_details(raw, real):
    """XLA's kernel_details string gives each kernel's grid, block, registers, shared memory and
    occupancy in the shape Kineto's separate args give them (Session.kernel_launches)."""
    _evs, gpu = raw
    k = real.kernels
    got = real.kernel_launches(k["id"].to_numpy())
    by_start = {round(e["ts"] * 1000): e["args"] for e in gpu if "kernel_details" in e["args"]}
    assert len(got) == len(by_start) == len(k)
    for i, start in zip(k["id"].tolist(), k["start"].tolist()):
        d = dict(f.split(":", 1) for f in by_start[start]["kernel_details"].split())
        want = {
            "grid": tuple(map(int, d["grid"].split(","))),
            "block": tuple(map(int, d["block"].split(","))),
            "regs": int(d["regs"]),
            "shared_bytes": int(d["static_shared"]) + int(d["dynamic_shared"]),
            "occupancy_pct": float(d["occ_pct"]),
        }
        assert got[i] == want


def test_kernel_launch_configuration_of_a_kineto_trace():
    from conftest import SAMPLES

    path = os.path.join(SAMPLES, "ddp", "ddp_rank0.json.gz")
    with gzip.open(path, "rt") as f:
        first = next(e for e in json.load(f)["traceEvents"] if e.get("cat") == "kernel")
    s = gpuviewer.open([path])
    k = s.kernels
    i = int(k.loc[(k["corr"] == first["args"]["correlation"]) & (k["name"] == first["name"]), "id"].item())
    a = first["args"]
    assert s.kernel_launches([i])[i] == {
        "grid": tuple(a["grid"]),
        "block": tuple(a["block"]),
        "regs": a["registers per thread"],
        "shared_bytes": a["shared memory"],
        "occupancy_pct": float(a["est. achieved occupancy %"]),
    }


def test_a_tpu_process_is_drawn_but_not_counted_as_gpu_work(tmp_path):
    doc = build_trace(steps=2)
    tpu = [
        {"ph": "M", "pid": 50, "name": "process_name", "args": {"name": "/device:TPU:0"}},
        {"ph": "M", "pid": 50, "tid": 2, "name": "thread_name", "args": {"name": "XLA Ops"}},
        {"ph": "X", "pid": 50, "tid": 2, "ts": 150.0, "dur": 40.0, "name": "fusion.7"},
        {"ph": "X", "pid": 50, "tid": 3, "ts": 150.0, "dur": 40.0, "name": "fusion.8"},
    ]
    doc = dict(doc, traceEvents=tpu + doc["traceEvents"])
    s = gpuviewer.open([write(doc, tmp_path / "t.trace.json.gz")])
    assert len(s.kernels) == sum(e["_role"] in ("compute", "comm") for e in gpu_events(doc))
    tpu_lanes = [ln for ln in s.trace.lanes if ln.kind == "gpu_annotation"]
    assert sorted(ln.stream for ln in tpu_lanes) == [2, 3]
    assert any("/device:TPU:0: not a GPU" in w for w in s.trace.warnings)


_HOSTILE = [
    b"NaN",
    b"1e400",
    b"-1",
    b"99999999999999999999999999",
    b'"abc"',
    b"[]",
    b"{}",
    b"null",
    b"true",
    b'"\xff\xfe"',
    b"[" * 3000 + b"]" * 3000,
    b'"12.5"',
]
_KEYS = [
    b'"ts":',
    b'"dur":',
    b'"pid":',
    b'"tid":',
    b'"name":',
    b'"args":',
    b'"correlation_id":',
    b'"step_num":',
    b'"hlo_op":',
    b'"ph":',
]


@pytest.mark.parametrize("case", range(30))
def test_mutated_real_trace_opens_or_says_why_in_one_line(tmp_path, case):
    """Seeded mutations of the shared JAX trace (hostile values at XLA's keys, cuts): the reader
    gives a session or one TraceError naming the file, nothing else, and writes nothing beside it."""
    from gpuviewer.io.errors import TraceError
    from gpuviewer.io.session import load

    rnd = random.Random(2700 + case)
    with gzip.open(JAX, "rb") as f:
        d = bytearray(f.read())
    for _ in range(rnd.randint(1, 5)):
        if rnd.random() < 0.8:
            key = rnd.choice(_KEYS)
            j = d.find(key, rnd.randrange(len(d)))
            if j < 0:
                continue
            k = e = j + len(key)
            while e < len(d) and d[e] not in b",}":
                e += 1
            d[k:e] = rnd.choice(_HOSTILE)
        else:
            del d[rnd.randrange(len(d)) :]
    path = tmp_path / "m.trace.json"
    path.write_bytes(bytes(d))
    try:
        t = load([str(path)], use_cache=False)
    except TraceError as e:
        assert str(path) in str(e) and "\n" not in str(e)
    else:
        assert t.n_events <= 669 and len(t.steps) <= 8
    assert os.listdir(tmp_path) == ["m.trace.json"]


def test_correlation_ids_past_32_bits_still_pair_launch_and_kernel(tmp_path):
    doc = build_trace(steps=2)
    for e in doc["traceEvents"]:
        if "correlation_id" in e.get("args", {}):
            e["args"]["correlation_id"] = str(int(e["args"]["correlation_id"]) + (1 << 40))
    s = gpuviewer.open([write(doc, tmp_path / "big_ids.trace.json.gz")])
    t = s.trace
    pairs = sorted((t.names[t.columns["name"][a]], t.names[t.columns["name"][b]]) for a, b in zip(*t.flows))
    host = {
        e["args"]["correlation_id"]: e["name"]
        for e in doc["traceEvents"]
        if e.get("pid") == HOST_PID and "correlation_id" in e.get("args", {})
    }
    assert pairs == sorted((host[e["args"]["correlation_id"]], e["name"]) for e in gpu_events(doc))


def _one_jit_doc(extra_program: str | None) -> dict:
    with gzip.open(JAX, "rt") as f:
        doc = json.load(f)
    if extra_program == "missing":  # one step without its run: not one program in each step
        first = next(e for e in doc["traceEvents"] if e.get("name") == "jit_update:XLA GPU module")
        doc["traceEvents"].remove(first)
    elif extra_program:  # a second jitted program run in each step, right after the first
        runs = [e for e in doc["traceEvents"] if e.get("name") == "jit_update:XLA GPU module"]
        doc["traceEvents"] += [
            dict(e, name=f"{extra_program}:XLA GPU module", ts=e["ts"] + e.get("dur", 0) + 1.0, dur=1.0) for e in runs
        ]
    return doc


@pytest.mark.parametrize("extra", [None, "jit_metrics", "missing"])
def test_one_jit_a_step_is_not_advised_to_be_put_in_one_jit(tmp_path, raw, extra):
    """jax_train_stall runs jit_update once in each step (counted here in the raw file): advice to
    keep the step inside one jax.jit asks for what is done. With a second program in every step
    (the same trace, a jit_metrics run added after each), the advice is given again."""
    evs, _gpu = raw
    starts = sorted(e["ts"] for e in evs if e.get("name") == "train" and "step_num" in e.get("args", {}))
    runs = sorted(e["ts"] for e in evs if e.get("name") == "jit_update:XLA GPU module")
    assert len(runs) == len(starts) == 8
    assert all(a <= r < b for a, r, b in zip(starts, runs, starts[1:] + [float("inf")]))
    path = write(_one_jit_doc(extra), tmp_path / "host0.trace.json.gz")
    s = gpuviewer.open([path])
    low = next(f for f in s.analysis.all_findings() if f.rule == "low_gpu_utilization")
    if extra is None:
        assert "one jax.jit" not in low.advice and "already runs as one jitted program (jit_update" in low.advice
    else:
        assert "inside one jax.jit" in low.advice


def test_xla_convert_fusions_are_not_convolutions(raw):
    """The JAX MLP has no convolution, but XLA names fusions like loop_convert_multiply_fusion_2
    (a dtype convert): they were a 'conv' family (11% of compute) by the '_conv' in their names."""
    _evs, gpu = raw
    converts = [e for e in gpu if "_convert" in e["name"]]
    assert converts and not any(re.search(r"conv(?!ert)", e["name"]) for e in gpu)
    r = run_cli("analyze", JAX, "--json")
    fam = json.loads(r.stdout)["efficiency"]["families"]
    assert not [f for f in fam if f["kind"] == "conv"], [f["name"] for f in fam]


def test_xla_fusions_are_fused_elementwise_or_reductions():
    """XLA names its fused kernels loop_*_fusion (elementwise ops fused into one loop) and
    input_*_fusion (rooted in a reduction): jax_train_stall's loop fusions, 31% of its compute,
    were said as 'other' (helper-113). Every kernel of the real trace has a kind; its loop fusions
    read here from the raw file are fused elementwise, and the efficiency lines say so."""
    from gpuviewer.analysis import kernel_class

    with gzip.open(JAX, "rt") as fh:
        doc = json.load(fh)
    ev = doc["traceEvents"] if isinstance(doc, dict) else doc
    gpu = {e["pid"] for e in ev if e.get("ph") == "M" and "/device:GPU" in str(e.get("args", {}).get("name", ""))}
    names = {e["name"] for e in ev if e.get("ph") == "X" and e.get("pid") in gpu}
    loops = {n for n in names if re.fullmatch(r"loop_\w*fusion(_\d+)?", n)}
    assert loops
    assert {kernel_class.kind(n) for n in loops} == {"fused elementwise"}
    assert kernel_class.kind("input_reduce_fusion_2") == "fused reduction"
    assert kernel_class.kind("input_scatter_fusion") == "fused elementwise"  # named for its root op
    assert kernel_class.kind("loop_add_fusion.3") == "fused elementwise"
    assert kernel_class.kind("loop_fusionist_kernel") != "fused elementwise"  # (a name, not XLA's form)
    assert all(kernel_class.kind(n) != "other" for n in names if not n.startswith("Memset"))
    p = run_cli("analyze", JAX)
    assert p.returncode == 0 and "fused elementwise (work unknown): " in p.stdout, p.stdout[-1500:]
    assert "other (work unknown)" not in p.stdout
