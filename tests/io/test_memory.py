"""Memory: peaks against direct computations, snapshots through the restricted unpickler,
the memory panel under the timeline."""

import gzip
import json
import os
import pickle
import sqlite3

import numpy as np
import pytest
from conftest import COMPAT, make_window, run_cli, trace_path

from gpuviewer.io.errors import TraceError
from gpuviewer.io.memsnap import read_snapshot


def test_info_memory_peak_kineto_equals_max_total_allocated():
    path = trace_path("kineto", "memory_pressure.json.gz")
    p = run_cli("info", path, "--json")
    out = json.loads(p.stdout)
    doc = json.loads(gzip.open(path).read())
    want = max(
        e["args"]["Total Allocated"]
        for e in doc["traceEvents"]
        if e.get("name") == "[memory]" and e.get("args", {}).get("Device Type") == 1
    )
    assert out["ranks"][0]["memory_peak_bytes"] == {"0": want}
    assert round(want / 1e9, 1) == 133.1


def test_info_memory_peak_nsys_equals_running_sum():
    path = trace_path("nsys", "nsys_ddp_big.sqlite")
    out = json.loads(run_cli("info", path, "--json").stdout)
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    rows = db.execute(
        "SELECT (globalPid >> 24) & 16777215, deviceId, bytes, memoryOperationType "
        "FROM CUDA_GPU_MEMORY_USAGE_EVENTS ORDER BY start"
    ).fetchall()
    kpid = dict(db.execute("SELECT deviceId, (globalPid >> 24) & 16777215 FROM CUPTI_ACTIVITY_KIND_KERNEL GROUP BY 1"))
    for r in out["ranks"]:
        pid = kpid[r["devices"][0]]
        for dev, peak in r["memory_peak_bytes"].items():
            vals = np.cumsum([b if op == 0 else -b for p_, d, b, op in rows if p_ == pid and d == int(dev)])
            assert peak == int(vals.max())


def test_snapshot_replay_and_frames():
    (s,) = read_snapshot(trace_path("memory", "single_gpt_memsnap.pickle"))
    raw = pickle.load(open(trace_path("memory", "single_gpt_memsnap.pickle"), "rb"))  # trusted test data
    entries = raw["device_traces"][0]
    allocs = [e for e in entries if e["action"] == "alloc"]
    assert len(s.allocations) == len(allocs)
    assert s.allocations[0].frames == allocs[0]["frames"]
    # the curve is the running sum of alloc - free_completed
    run = np.cumsum(
        [
            e["size"] if e["action"] == "alloc" else -e["size"]
            for e in entries
            if e["action"] in ("alloc", "free_completed")
        ]
    )
    assert s.allocated.max() == run.max() - min(0, run.min())
    names, t, vals = s.categories()
    assert "activations (forward)" in names and "optimizer state" in names
    assert np.allclose(vals.sum(axis=0).max(), s.allocated.max(), rtol=0.01)


def test_analyze_of_a_snapshot_says_it_is_drawn_not_analysed():
    """`analyze` of a snapshot alone printed only 'no findings', read as a clean bill of health:
    it says the snapshot is not analysed, with its allocations counted here from the raw pickle."""
    path = trace_path("memory", "single_gpt_memsnap.pickle")
    raw = pickle.load(open(path, "rb"))  # trusted test data
    allocs = [e for e in raw["device_traces"][0] if e["action"] == "alloc"]
    r = run_cli("analyze", path)
    assert r.returncode == 0, r.stderr
    note = next(ln for ln in r.stdout.splitlines() if ln.startswith("note: single_gpt_memsnap.pickle"))
    assert f"({len(allocs):,} allocations, device 0," in note and "not analysed" in note, note
    # beside a trace, the trace is analysed and the snapshot's note says the same
    r = run_cli("analyze", path, trace_path("kineto", "single_gpt_train.json.gz"), "--json")
    assert r.returncode == 0, r.stderr
    notes = json.loads(r.stdout)["notes"]
    assert any(n.startswith("single_gpt_memsnap.pickle: the memory snapshot is drawn") for n in notes), notes


def test_compat_snapshot_opens():
    (s,) = read_snapshot(os.path.join(COMPAT, "MAGMA27__assignment2-systems", "memory_snapshot.pickle"))
    assert len(s.allocations) == 1721


def test_malicious_pickle_is_refused(tmp_path):
    class Evil:
        def __reduce__(self):
            return (os.system, ("touch " + str(tmp_path / "pwned"),))

    p = tmp_path / "evil.pickle"
    p.write_bytes(pickle.dumps({"device_traces": [[Evil()]]}))
    with pytest.raises(TraceError) as e:
        read_snapshot(str(p))
    assert "refused" in str(e.value)
    assert not (tmp_path / "pwned").exists()
    r = run_cli("info", str(p))
    assert r.returncode == 2 and "refused" in r.stderr and not (tmp_path / "pwned").exists()


def test_memory_panel_under_the_timeline(qtbot, tmp_path):
    w = make_window(qtbot, tmp_path, size=(1600, 1000))
    assert w.open_paths([trace_path("kineto", "memory_pressure.json.gz")], block=True)
    assert w.memory_dock.isVisible()
    m = w.memory
    names = {(s["rank"], s["device"], s["name"]) for s in m.series}
    assert {(0, 0, "allocated"), (0, 0, "reserved")} <= names
    assert "peak 133.1 GB of 150.1 GB" in m.info.text() and "headroom 17.0 GB" in m.info.text()
    # same time axis: zooming the timeline moves the memory plot
    w.timeline.zoom(4.0)
    x0, x1 = w.timeline.vb.viewRange()[0]
    assert m.plots[0].getViewBox().viewRange()[0] == pytest.approx([x0, x1], abs=2.0)  # within 2 ns
    # value under the cursor is the counter's step value
    s = next(s for s in m.series if s["name"] == "allocated")
    k = len(s["x"]) // 2
    got = dict(((x["name"]), v) for x, v in m.value_at(s["x"][k]))
    assert got["allocated"] == pytest.approx(s["y"][k])
    # a click sets a cursor on the timeline
    with qtbot.waitSignal(m.cursorMoved):
        m.cursorMoved.emit(w.trace.start_ns + 1000)
    assert w.timeline.item.cursor_ns == w.trace.start_ns + 1000


def test_snapshot_session_window(qtbot, tmp_path):
    w = make_window(qtbot, tmp_path)
    assert w.open_paths([trace_path("memory", "single_gpt_memsnap.pickle")], block=True)
    assert w.memory.has_data()
    snap = next(s for s in w.memory.series if s["name"] == "snapshot")
    w.memory.show_allocation(snap["x"][len(snap["x"]) // 2])
    assert "MB" in w.memory.frames.toHtml()


def test_torch_memory_timeline_export():
    path = os.path.join(COMPAT, "facebookresearch__HolisticTraceAnalysis", "memory_analysis", "memory_timeline.raw.gz")
    from gpuviewer.io.memtimeline import CATEGORIES, read_memory_timeline

    s = read_memory_timeline(path)
    rows = json.loads(gzip.open(path).read())
    for cat in {r[3] for r in rows}:
        want = np.cumsum([r[2] for r in sorted(rows, key=lambda r: r[0] if r[0] >= 0 else -1) if r[3] == cat])
        k = s.names.index(CATEGORIES[cat])
        assert s.values[k].max() == want.max()
    assert s.values.sum(axis=0).min() >= 0
    out = json.loads(run_cli("info", path, "--json").stdout)
    assert out["format"] == "torch-memory-timeline"
    # the peak is a total, with what existed before the profile (time -1 rows) said beside it: the
    # note said "2.87 GiB more than when its record starts", 0.31 GiB of which was there then
    ordered = sorted(rows, key=lambda r: r[0] if r[0] >= 0 else -1)
    total = np.cumsum([r[2] for r in ordered])
    before = sum(r[2] for r in rows if r[0] < 0)
    assert before > 0
    note = next(n for n in json.loads(run_cli("analyze", path, "--json").stdout)["notes"] if "memory timeline" in n)
    assert (
        f"up to {total.max() / 2**30:.2f} GiB allocated, {before / 2**30:.2f} GiB already when its record starts"
        in note
    )
