"""Hostile inputs to the newer commands (issue 30, items 6 and 7): each input is a real trace
with one field changed, built here; each run is the real CLI in a child process (tests/hostile.py)
and asserts the exit code, no traceback (a traceback inside a Qt slot or paint counts: it is on
the child's stderr), and what the user is told."""
from __future__ import annotations

import gzip
import json
import os
import pickle

import pytest

from conftest import SAMPLES
from hostile import assert_clean, run

STALL = os.path.join(SAMPLES, "dataloader_stall.json.gz")


@pytest.fixture(scope="module")
def stall_events():
    with gzip.open(STALL) as f:
        return json.load(f)


def _write(folder, name: str, d: dict) -> str:
    p = os.path.join(str(folder), name)
    with open(p, "w") as f:
        json.dump(d, f)  # allow_nan: NaN and Infinity are written as JavaScript spells them
    return p


def _renumber_steps(d: dict, f) -> dict:
    out = dict(d, traceEvents=[dict(e) for e in d["traceEvents"]])
    for e in out["traceEvents"]:
        n = str(e.get("name", ""))
        if n.startswith("ProfilerStep#"):
            e["name"] = f"ProfilerStep#{f(int(n.split('#')[1]))}"
    return out


# -- screenshot: absurd step numbers ------------------------------------------------------------

def test_screenshot_with_steps_past_32_bits(tmp_path, stall_events):
    """Step numbers that fit int64 but not the window's 32-bit step box: the window renders, the
    box is disabled (its tooltip says why), and the steps are still steps."""
    p = _write(tmp_path, "huge_steps.json", _renumber_steps(stall_events, lambda n: 999_999_999_999_999_990 + n))
    out = tmp_path / "shot.png"
    r = run("screenshot", p, "-o", str(out), "--no-cache")
    assert_clean(r)
    assert out.stat().st_size > 10_000
    info = run("info", p, "--json", "--no-cache")
    assert_clean(info)
    assert json.loads(info.stdout)["ranks"][0]["steps"] == [999_999_999_999_999_992, 999_999_999_999_999_993,
                                                             999_999_999_999_999_994]


def test_window_step_box_with_steps_past_32_bits(qtbot, tmp_path, stall_events):
    from conftest import make_window
    p = _write(tmp_path, "mixed_steps.json", _renumber_steps(stall_events, lambda n: n if n != 3 else 10 ** 17))
    w = make_window(qtbot, tmp_path, block_analysis=True)
    w.open_paths([p])
    qtbot.waitUntil(lambda: w.trace is not None, timeout=60_000)
    assert not w.step_box.isEnabled()
    assert "[ and ]" in w.step_box.toolTip()
    w.step_nav(1)  # stepping with ] past the box's range neither raises nor moves the box
    assert w.step_box.value() == 0


# -- screenshot: garbage memory counters --------------------------------------------------------

def test_screenshot_with_garbage_memory_counters(tmp_path, stall_events):
    """[memory] samples of inf, negative, 1e300 and NaN bytes: skipped with one warning; the
    window renders; the peak is the true peak of the sane samples."""
    d = dict(stall_events, traceEvents=[dict(e) for e in stall_events["traceEvents"]])
    garbage = [float("inf"), -5e9, 1e300, float("nan")]
    sane_peak, k, broken = 0, 0, 0
    for e in d["traceEvents"]:
        if e.get("name") == "[memory]" and e["args"].get("Device Type") == 1:  # GPU samples
            e["args"] = dict(e["args"])
            if k % 2:
                e["args"]["Total Allocated"] = g = garbage[(k // 2) % 4]
                broken += g == g  # NaN reads as a missing sample, not a broken one
            else:
                sane_peak = max(sane_peak, e["args"]["Total Allocated"])
            k += 1
    p = _write(tmp_path, "garbage_memory.json", d)
    out = tmp_path / "shot.png"
    r = run("screenshot", p, "-o", str(out), "--no-cache")
    assert_clean(r)
    assert out.stat().st_size > 10_000
    info = run("info", p, "--json", "--no-cache")
    assert_clean(info)
    js = json.loads(info.stdout)
    assert js["ranks"][0]["memory_peak_bytes"] == {"0": sane_peak}
    bad = [w for w in js["warnings"] if "[memory] byte counts" in w]
    assert len(bad) == 1 and f" {broken:,} [memory]" in bad[0], js["warnings"]
    rep = run("report", p, "-o", str(tmp_path / "r.html"), "--no-cache")
    assert_clean(rep)


# -- memory snapshots that share one list many times --------------------------------------------

def _shared_snapshot(path: str, devices: int, entries: int) -> None:
    """A few KB that name one allocation list for many devices and one frames list for every
    entry: the shape of a pickle that expands far beyond its size."""
    frames = [{"filename": "model.py", "line": 1, "name": "forward"} for _ in range(3)]
    entry = {"action": "alloc", "addr": 1, "size": 512, "time_us": 1000, "frames": frames}
    with open(path, "wb") as f:
        pickle.dump({"device_traces": [[entry] * entries] * devices, "segments": []}, f, protocol=4)


def test_shared_snapshot_lists_are_replayed_once(tmp_path):
    from gpuviewer.io.memsnap import read_snapshot
    p = str(tmp_path / "shared.pickle")
    _shared_snapshot(p, 270, 3000)
    assert os.path.getsize(p) < 12_000
    series = read_snapshot(p)
    assert [s.device for s in series] == list(range(270))
    assert all(s.allocations is series[0].allocations for s in series)  # one replay, shared
    allocs = series[0].allocations
    assert len(allocs) == 3000 and allocs[0].category == "activations (forward)"
    assert all(a.frames is allocs[0].frames for a in allocs)  # one frames list, not 3000 copies


def test_screenshot_of_shared_snapshot_is_bounded(tmp_path):
    """Before: a 7 KB pickle of 270 devices x 3000 shared entries took 59 s and 679 MB to
    screenshot (replay once per reference, a legend relaid out per curve); now about 10 s and
    450 MB on the 2-core VM. Here 100 devices: clean, and the peak RSS stays bounded."""
    p = str(tmp_path / "shared.pickle")
    _shared_snapshot(p, 100, 3000)
    out = tmp_path / "shot.png"
    r = run("screenshot", p, "-o", str(out), "--no-cache")
    assert_clean(r)
    assert out.stat().st_size > 10_000
    assert r.rss_mb < 600, r.rss_mb


def test_memory_panel_leaves_legend_empty_past_four_curves(qtbot, tmp_path):
    from gpuviewer.session import open_session
    from gpuviewer.widgets.memory_panel import MemoryPanel
    p = str(tmp_path / "shared.pickle")
    _shared_snapshot(p, 6, 50)
    trace = open_session([p], use_cache=False)
    panel = MemoryPanel()
    qtbot.addWidget(panel)
    panel.set_trace(trace, trace.start_ns)
    assert len(panel.series) >= 6
    assert panel.plots[0].plotItem.legend.items == []
