"""A folded deep lane (a Python stack, with_stack=True) shows COLLAPSED_ROWS of its rows: not the
frames around the whole capture (<module>, main, the training function: four full-width bars over
every step; an audit of the window) but the run of rows under them that covers the most time,
below rows that only repeat the one above (a step's frame, then <lambda> and lm_step inside it).
Picking, hover, the selection's outline and revealing a hidden row all follow the rows shown.
single_gpt_train's main thread, its frames' names and nesting from the raw file."""

import gzip
import json

import numpy as np
import pytest
from conftest import trace_path
from PySide6.QtGui import QImage
from PySide6.QtWidgets import QWidget

from gpuviewer.model.layout import COLLAPSED_ROWS

GPT = trace_path("kineto", "single_gpt_train.json.gz")


@pytest.fixture(scope="module")
def raw_outer():
    """The raw file's python_function frames of the thread holding ProfilerStep#2 that span 90%
    or more of that thread's recorded time: the frames around the whole capture."""
    with gzip.open(GPT, "rt") as fh:
        ev = [e for e in json.load(fh)["traceEvents"] if e.get("ph") == "X"]
    tid = next(e["tid"] for e in ev if e["name"] == "ProfilerStep#2")
    mine = [e for e in ev if e["tid"] == tid and e.get("cat") in ("python_function", "user_annotation", "cpu_op")]
    lo = min(e["ts"] for e in mine)
    hi = max(e["ts"] + e["dur"] for e in mine)
    outer = {e["name"] for e in mine if e["cat"] == "python_function" and e["dur"] >= 0.9 * (hi - lo)}
    # each step's frame and the frames inside it that each fill their parent (98% or more, one
    # child): <lambda> and lm_step repeat ProfilerStep#N's bounds
    chain, under = set(), set()
    for st in (e for e in mine if e["name"].startswith("ProfilerStep#")):
        parent = st
        while True:
            kids = [
                e
                for e in mine
                if e is not parent
                and parent["ts"] <= e["ts"]
                and e["ts"] + e["dur"] <= parent["ts"] + parent["dur"]
                and e["dur"] >= 0.98 * parent["dur"]
            ]
            if not kids:
                break
            chain.add(parent["name"])
            parent = max(kids, key=lambda e: e["dur"])
        chain.add(parent["name"])
        under |= {
            e["name"]
            for e in mine
            if parent["ts"] <= e["ts"] and e["ts"] + e["dur"] <= parent["ts"] + parent["dur"] and e is not parent
        }
    return tid, outer, chain, under


@pytest.fixture
def view(qtbot):
    from gpuviewer.io.session import load
    from gpuviewer.widgets.timeline_view import TimelineView

    v = TimelineView()
    qtbot.addWidget(v)
    v.resize(1400, 900)
    v.set_trace(load([GPT]))
    v.show()
    qtbot.waitExposed(v)
    return v


def _lane_row(v, tid):
    t = v.trace
    lane = next(i for i, ln in enumerate(t.lanes) if ln.kind == "cpu" and str(ln.stream) == str(tid))
    return lane, next(r for r in v.layout_model.rows if r.kind == "lane" and r.lane == lane)


def test_a_folded_python_lane_shows_the_rows_under_its_outer_frames(view, raw_outer, qtbot):
    v = view
    tid, outer, chain, under = raw_outer
    assert len(outer) >= 3  # <module>, main, the training function
    lane, row = _lane_row(v, tid)
    t, c = v.trace, v.trace.columns
    sl = t.lane_slice(lane)
    depth = np.asarray(c["depth"][sl])
    names = [t.name_of(sl.start + k) for k in range(sl.stop - sl.start)]
    assert row.depths == COLLAPSED_ROWS and row.first >= len(outer)
    shown = {n for n, d in zip(names, depth) if row.first <= d < row.first + row.depths}
    assert not shown & outer  # none of the capture-wide frames...
    # ...nor the step's frame and those repeating its bounds (ProfilerStep#N, <lambda>, lm_step:
    # three rows of one frame's bounds; a review), but what runs in them
    assert {"gen.py(160): <lambda>", "gen.py(134): lm_step"} <= chain and any(
        n.startswith("ProfilerStep#") for n in chain
    )
    assert not shown & chain
    assert "Optimizer.step#AdamW.step" in shown and any(n.startswith("nn.Module: GPT") for n in shown)
    assert len(shown & under) >= 0.9 * len(shown)
    assert row.hidden_rows == int(depth.max()) + 1 - row.depths
    # a pick in the first row shown gives an event of that depth; the selection's outline sits there
    v.set_range(t.start_ns, t.end_ns)
    img = QImage(v.plot.size(), QImage.Format_ARGB32_Premultiplied)
    QWidget.render(v.plot, img)
    at = sl.start + int(np.flatnonzero(depth == row.first)[0])
    x = (int(c["start"][at]) + int(c["dur"][at]) // 2) - v.origin
    got = v.item.pick(x, row.y + 0.5, 0.0)
    assert got is not None and int(c["depth"][got]) == row.first
    hov, _merged = v.item.hover_pick(x, row.y + 0.5, 0.0)
    assert hov is not None and int(c["depth"][hov]) == row.first
    rows = v.event_rows(at)
    assert rows == (row.y, row.y + 1.0)
    # selecting a frame above the rows shown unfolds the lane: every row, from depth 0
    top = sl.start + int(np.flatnonzero(depth == 0)[0])
    v.select(top)
    v._on_selection(top)
    lane, row = _lane_row(v, tid)
    assert row.first == 0 and row.hidden_rows == 0 and row.depths == int(depth.max()) + 1
