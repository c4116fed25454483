"""CUDA graphs (issue 27, item 2): kernels a graph launch (cudaGraphLaunch) runs are attributed to
that launch - flows, the launch's step, graph id and node in the arguments - and the launch-bound
rule knows that a graph launch is one launch for all of them. Counts come from the JSON written
here, and from the real torch.cuda.graphs run in ../shared/traces/whatif."""

import gzip
import json

import numpy as np
import pytest
from conftest import compat_path, trace_path

import gpuviewer
from gpuviewer.io.args import event_args

N_KERNELS = 50  # a graph of 50 kernels, replayed once a step
N_STEPS = 4
KERNEL_US, GAP_US = 3.0, 8.0  # short kernels and short gaps: launch-bound when launched one by one
STEP_US = 40 + N_KERNELS * (KERNEL_US + GAP_US) + 50


def _trace(graph: bool) -> dict:
    """ProfilerStep#1..4; in each, 50 kernels on stream 7, launched by one cudaGraphLaunch
    (graph) or by a cudaLaunchKernel each (eager), at the same GPU times either way."""
    ev, corr = [], 1000
    for k in range(N_STEPS):
        t0 = 1000.0 + k * STEP_US
        ev.append(
            {
                "ph": "X",
                "cat": "user_annotation",
                "name": f"ProfilerStep#{k + 1}",
                "pid": 100,
                "tid": 100,
                "ts": t0,
                "dur": STEP_US - 5,
            }
        )
        if graph:
            corr += 1
            ev.append(
                {
                    "ph": "X",
                    "cat": "cuda_runtime",
                    "name": "cudaGraphLaunch",
                    "pid": 100,
                    "tid": 100,
                    "ts": t0 + 10,
                    "dur": 20,
                    "args": {"cbid": 311, "correlation": corr},
                }
            )
            ev.append({"ph": "s", "cat": "ac2g", "name": "ac2g", "id": corr, "pid": 100, "tid": 100, "ts": t0 + 10})
        for j in range(N_KERNELS):
            ts = t0 + 40 + j * (KERNEL_US + GAP_US)
            args = {"device": 0, "stream": 7}
            if graph:
                args.update({"correlation": corr, "graph id": 1, "graph node id": j + 1})
            else:
                corr += 1
                args["correlation"] = corr
                ev.append(
                    {
                        "ph": "X",
                        "cat": "cuda_runtime",
                        "name": "cudaLaunchKernel",
                        "pid": 100,
                        "tid": 100,
                        "ts": ts - 9,
                        "dur": 4,
                        "args": {"cbid": 211, "correlation": corr},
                    }
                )
                ev.append({"ph": "s", "cat": "ac2g", "name": "ac2g", "id": corr, "pid": 100, "tid": 100, "ts": ts - 9})
            ev.append(
                {
                    "ph": "X",
                    "cat": "kernel",
                    "name": f"void gemv_kernel_{j % 5}<float>()",
                    "pid": 0,
                    "tid": 7,
                    "ts": ts,
                    "dur": KERNEL_US,
                    "args": args,
                }
            )
            ev.append(
                {
                    "ph": "f",
                    "cat": "ac2g",
                    "name": "ac2g",
                    "id": args["correlation"],
                    "pid": 0,
                    "tid": 7,
                    "ts": ts,
                    "bp": "e",
                }
            )
    ev.append({"ph": "M", "name": "process_labels", "pid": 0, "tid": 0, "args": {"labels": "GPU 0"}})
    return {"schemaVersion": 1, "traceEvents": ev}


@pytest.fixture(scope="module")
def traces(tmp_path_factory):
    d = tmp_path_factory.mktemp("graphs")
    out = {}
    for name, graph in (("graph", True), ("eager", False)):
        doc = _trace(graph)
        p = d / f"{name}.json"
        p.write_text(json.dumps(doc))
        out[name] = (doc["traceEvents"], gpuviewer.open([str(p)], use_cache=False))
    return out


def _kernels(events):
    return [e for e in events if e.get("cat") == "kernel"]


def test_graph_kernels_lanes_and_steps_from_the_json(traces):
    events, s = traces["graph"]
    ks = _kernels(events)
    assert len(s.kernels) == len(ks) == N_STEPS * N_KERNELS
    assert sorted(set(zip(s.kernels.device, s.kernels.stream))) == sorted(
        {(e["args"]["device"], e["args"]["stream"]) for e in ks}
    )
    steps = [e for e in events if e["name"].startswith("ProfilerStep#")]
    assert s.steps.step.tolist() == [int(e["name"].split("#")[1]) for e in steps]
    # each step's kernels: those whose launch (the graph launch of that correlation) is in the step
    launch_ts = {e["args"]["correlation"]: e["ts"] for e in events if e["name"] == "cudaGraphLaunch"}
    for st, row in zip(steps, s.steps.itertuples()):
        mine = [k for k in ks if st["ts"] <= launch_ts[k["args"]["correlation"]] < st["ts"] + st["dur"]]
        assert row.kernels == len(mine) == N_KERNELS
        # the kernels never overlap: busy time is the sum of their durations
        assert row.busy_ns == pytest.approx(sum(k["dur"] for k in mine) * 1000, abs=len(mine))
        first, last = min(k["ts"] for k in mine), max(k["ts"] + k["dur"] for k in mine)
        assert (row.end - row.start) == pytest.approx((last - first) * 1000, abs=2)
        # busy over a span between the GPU's own window and the host's step with the gap after it
        busy_us = sum(k["dur"] for k in mine)
        assert busy_us / (STEP_US + 1e-3) - 1e-3 <= row.utilization <= busy_us / (last - first) + 1e-3


def test_every_graph_kernel_flows_from_its_graph_launch(traces):
    events, s = traces["graph"]
    t = s.trace
    src, dst = (np.asarray(x) for x in t.flows)
    names = np.asarray(t.columns["name"])
    kernel_ids = s.kernels.id.to_numpy()
    assert sorted(dst.tolist()) == sorted(kernel_ids.tolist())
    assert {t.names[int(n)] for n in names[src]} == {"cudaGraphLaunch"}
    # 50 kernels a launch, as many launches as the JSON has
    _, per_launch = np.unique(src, return_counts=True)
    assert per_launch.tolist() == [N_KERNELS] * sum(e["name"] == "cudaGraphLaunch" for e in events)
    # the launch of each kernel is the call of its correlation id in the JSON
    corr = np.asarray(t.columns["corr"])
    assert (corr[src] == corr[dst]).all()


def test_graph_id_and_node_in_the_details(traces):
    events, s = traces["graph"]
    ks = _kernels(events)
    k = s.kernels.sort_values("start").iloc[7]
    args = event_args(s.trace, int(k.id))
    assert (
        args["graph id"] == ks[7]["args"]["graph id"] and args["graph node id"] == ks[7]["args"]["graph node id"] == 8
    )


def test_graph_launched_kernels_are_not_launch_bound(traces):
    """The same 200 kernels at the same GPU times: launched one by one they are launch-bound;
    replayed by a graph launch they are not (the gaps are the graph's, no launch to remove)."""
    rules = {name: set(s.findings.rule) for name, (_, s) in traces.items()}
    assert "launch_bound" in rules["eager"]
    assert "launch_bound" not in rules["graph"]


def test_graph_launch_is_one_launch_in_the_replay(traces):
    """Removing launch overhead saves at most the one graph launch (its call and its latency) a
    step where a graph launch fed the kernels, while launched one by one it saves the gaps."""
    events, _ = traces["graph"]
    launch = next(e for e in events if e["name"] == "cudaGraphLaunch")
    first = min(e["ts"] for e in _kernels(events) if e["args"]["correlation"] == launch["args"]["correlation"])
    saved = {}
    for name, (_, s) in traces.items():
        r = s.whatif("no-launch-overhead").to_json()
        saved[name] = sum(x["before_ms"] - x["after_ms"] for x in r["steps"])
    assert 0 <= saved["graph"] <= N_STEPS * (first - launch["ts"]) / 1e3 + 1e-3
    assert saved["eager"] > 0.5 * N_STEPS * (N_KERNELS - 1) * GAP_US / 1e3


@pytest.mark.parametrize("name, bound", [("launch_graph", False), ("launch_eager", True)])
def test_real_cuda_graph_run_is_not_launch_bound(name, bound):
    """torch.cuda.graphs replay vs the same kernels launched eagerly (one H200, back to back)."""
    path = trace_path("whatif", f"{name}.json.gz")
    with gzip.open(path) as f:
        events = json.load(f)["traceEvents"]
    s = gpuviewer.open([path], use_cache=False)
    assert len(s.kernels) == sum(e.get("cat") == "kernel" for e in events)
    graph = {e["args"]["correlation"] for e in events if e.get("name") == "cudaGraphLaunch"}
    from_graph = sum(e.get("cat") == "kernel" and e["args"].get("correlation") in graph for e in events)
    t = s.trace
    src = np.asarray(t.flows[0])
    assert (
        int(np.isin(np.asarray(t.columns["name"])[src], [t.names.index("cudaGraphLaunch")] if graph else []).sum())
        == from_graph
    )
    assert ("launch_bound" in set(s.findings.rule)) is bound
    # each profiled step holds the kernels whose launch (graph or kernel launch) is inside it
    launch_ts = {e["args"]["correlation"]: e["ts"] for e in events if e.get("cat") in ("cuda_runtime", "cuda_driver")}
    for row in s.steps.itertuples():
        st = next(e for e in events if e.get("name") == f"ProfilerStep#{row.step}")
        assert row.kernels == sum(
            e.get("cat") == "kernel" and st["ts"] <= launch_ts.get(e["args"]["correlation"], -1) < st["ts"] + st["dur"]
            for e in events
        )
    if not bound:  # the replay of a graph run without launch overhead is never slower than recorded
        assert all(x["after_ms"] <= x["before_ms"] for x in s.whatif("no-launch-overhead").to_json()["steps"])


FLAMEOX = compat_path("morluto__flameox", "nsight-2025.5.2.sqlite")


def test_nsys_whole_graph_launches_are_gpu_work():
    """nsys --cuda-graph-trace=graph: each cudaGraphLaunch ran as one GPU range
    (CUPTI_ACTIVITY_KIND_GRAPH_TRACE) and no kernel rows. Those ranges are GPU work on their
    stream, linked from their launch, with graphId in the details."""
    import sqlite3

    db = sqlite3.connect(f"file:{FLAMEOX}?mode=ro", uri=True)
    kern = db.execute("SELECT deviceId, streamId, correlationId FROM CUPTI_ACTIVITY_KIND_KERNEL").fetchall()
    graphs = db.execute(
        "SELECT deviceId, streamId, correlationId, graphId, start, end FROM CUPTI_ACTIVITY_KIND_GRAPH_TRACE"
    ).fetchall()
    launches = {
        r[0]
        for r in db.execute(
            "SELECT r.correlationId FROM CUPTI_ACTIVITY_KIND_RUNTIME r JOIN StringIds s "
            "ON s.id = r.nameId WHERE s.value LIKE 'cudaGraphLaunch%'"
        )
    }
    db.close()
    s = gpuviewer.open([FLAMEOX], use_cache=False)
    k = s.kernels
    assert len(k) == len(kern) + len(graphs) and len(graphs) > 0
    assert set(zip(k.device, k.stream)) == {(d, st) for d, st, *_ in kern + graphs}
    g = k[k.name.str.startswith("CUDA graph")]
    assert sorted(g.name) == sorted(f"CUDA graph {r[3]}" for r in graphs)
    assert sorted(g.dur) == sorted(r[5] - r[4] for r in graphs)
    t = s.trace
    src, dst = (np.asarray(x) for x in t.flows)
    for row in g.itertuples():
        launch = src[dst == row.id]
        assert len(launch) == 1 and t.names[int(t.columns["name"][launch[0]])] == "cudaGraphLaunch"
        assert row.corr in launches
        args = event_args(t, int(row.id))
        assert args["graphId"] in {r[3] for r in graphs} and args["correlationId"] == row.corr
    # a plain kernel's details still come from the kernel table
    plain = k[~k.name.str.startswith("CUDA graph")].iloc[0]
    assert event_args(t, int(plain["id"]))["correlationId"] == plain["corr"]
    assert any("traced as whole graphs" in w for w in t.warnings)
    # graph creation and instantiation (CUDA_GRAPH_EVENTS) are instants on the CUDA API lane
    db = sqlite3.connect(f"file:{FLAMEOX}?mode=ro", uri=True)
    created = db.execute(
        "SELECT s.value, e.graphId FROM CUDA_GRAPH_EVENTS e JOIN StringIds s ON s.id = e.nameId"
    ).fetchall()
    db.close()
    inst = [(t.names[int(n)], t.lanes[int(ln)].kind) for n, ln in zip(t.instants["name"], t.instants["lane"])]
    assert sorted(inst) == sorted((f"{v} · graph {g}", "cuda_api") for v, g in created)


def test_nsys_node_traced_graph_kernels(tmp_path):
    """nsys --cuda-graph-trace=node: each kernel a graph ran is a kernel row carrying graphId and
    graphNodeId, its correlationId the cudaGraphLaunch's. A copy of the flameox export (in
    tmp_path) with its two whole-graph ranges replaced by such rows, 50 kernels a launch."""
    import shutil
    import sqlite3

    from gpuviewer.analysis.launch import graph_launched

    path = str(tmp_path / "node_trace.sqlite")
    shutil.copyfile(FLAMEOX, path)
    db = sqlite3.connect(path)
    graphs = db.execute(
        "SELECT start, end, deviceId, contextId, streamId, correlationId, globalPid, graphId "
        "FROM CUPTI_ACTIVITY_KIND_GRAPH_TRACE"
    ).fetchall()
    k0 = db.execute("SELECT demangledName, shortName FROM CUPTI_ACTIVITY_KIND_KERNEL LIMIT 1").fetchone()
    for start, end, dev, ctx, stream, corr, gpid, gid in graphs:
        step = (end - start) // N_KERNELS
        db.executemany(
            "INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL (start, end, deviceId, contextId, streamId, correlationId, "
            "globalPid, demangledName, shortName, registersPerThread, gridX, gridY, gridZ, blockX, blockY, blockZ, "
            "staticSharedMemory, dynamicSharedMemory, localMemoryPerThread, localMemoryTotal, gridId, graphNodeId, "
            "graphId) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, 16, 4, 1, 1, 256, 1, 1, 0, 0, 0, 0, ?, ?, ?)",
            [
                (
                    start + j * step,
                    start + j * step + step // 2,
                    dev,
                    ctx,
                    stream,
                    corr,
                    gpid,
                    k0[0],
                    k0[1],
                    1000 + j,
                    7000 + j,
                    gid,
                )
                for j in range(N_KERNELS)
            ],
        )
    db.execute("DELETE FROM CUPTI_ACTIVITY_KIND_GRAPH_TRACE")
    db.commit()
    n_kernel_rows = db.execute("SELECT count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL").fetchone()[0]
    db.close()
    s = gpuviewer.open([path], use_cache=False)
    t = s.trace
    assert len(s.kernels) == n_kernel_rows == 3 + N_KERNELS * len(graphs)
    src, dst = (np.asarray(x) for x in t.flows)
    names = np.asarray(t.columns["name"])
    from_graph = dst[np.asarray([t.names[int(n)] for n in names[src]]) == "cudaGraphLaunch"]
    assert len(from_graph) == N_KERNELS * len(graphs)
    ids = s.kernels.id.to_numpy()
    assert sorted(ids[graph_launched(t, ids)].tolist()) == sorted(from_graph.tolist())
    args = event_args(t, int(from_graph[0]))
    assert args["graphId"] in {g[7] for g in graphs} and args["graphNodeId"] >= 7000
    assert not any("traced as whole graphs" in w for w in t.warnings)
