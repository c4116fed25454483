"""The fast paths of the timeline draw exactly what the plain ones drew: levels of detail mapped
from the cache vs built in memory, a pan and its way back, hover from the drawn runs vs a range
query; a horizontal pan does not repaint the lane labels."""

import numpy as np
import pytest
from conftest import trace_path
from PySide6.QtCore import QEvent, QObject
from PySide6.QtGui import QImage
from PySide6.QtWidgets import QWidget

PATHS = [trace_path("kineto", "ddp_clean"), trace_path("nsys", "nsys_ddp.sqlite")]


def _view(qtbot, trace):
    from gpuviewer.widgets.timeline_view import TimelineView

    v = TimelineView()
    qtbot.addWidget(v)
    v.resize(1400, 800)
    v.set_trace(trace)
    for ln in trace.lanes:
        v.layout_model.state.expanded.add(ln.key)
    v.layout_model.rebuild()
    v._relayout()
    v.show()
    qtbot.waitExposed(v)
    return v


def _image(v) -> QImage:
    img = QImage(v.plot.size(), QImage.Format_ARGB32_Premultiplied)
    QWidget.render(v.plot, img)
    return img


@pytest.mark.parametrize("path", PATHS, ids=lambda p: p.rsplit("/", 1)[-1])
def test_levels_of_detail_from_the_cache_draw_the_same_pixels(qtbot, path):
    from gpuviewer.io.session import load

    load([path])  # writes the cache
    cached = load([path])
    assert cached.metadata.get("from_cache") and "lod_packed" in cached.derived
    built = load([path], use_cache=False)
    assert "lod_packed" not in built.derived
    a, b = _view(qtbot, cached), _view(qtbot, built)
    span = built.end_ns - built.start_ns
    for frac, centre in ((1.0, 0.5), (0.1, 0.6), (0.01, 0.85), (0.0005, 0.85)):
        t0 = built.start_ns + int(span * (centre - frac / 2))
        for v in (a, b):
            v.set_range(t0, t0 + int(span * frac))
        qtbot.wait(1)
        assert _image(a) == _image(b), frac


def test_a_pan_and_back_draws_the_same_pixels(qtbot):
    from gpuviewer.io.session import load

    v = _view(qtbot, load([PATHS[0]]))
    t = v.trace
    t0 = t.start_ns + (t.end_ns - t.start_ns) // 3
    v.set_range(t0, t0 + 20_000_000)
    first = _image(v)
    v.set_range(t0 + 3_000_000, t0 + 23_000_000)
    moved = _image(v)
    v.set_range(t0, t0 + 20_000_000)
    assert _image(v) == first and moved != first


def test_hover_comes_from_the_drawn_runs_and_agrees_with_a_range_query(qtbot, monkeypatch):
    from gpuviewer.io.session import load
    from gpuviewer.model import queries

    v = _view(qtbot, load([PATHS[0]]))
    t = v.trace
    t0 = t.start_ns + (t.end_ns - t.start_ns) // 2
    v.set_range(t0, t0 + 2_000_000)  # 2 ms: every kernel its own rectangle
    _image(v)
    item = v.item
    rng = np.random.default_rng(7)
    c = t.columns
    checked = 0
    (_x0, _x1), (y0, y1) = v.vb.viewRange()
    lanes = [r for r in v.layout_model.visible_rows(y0, y1) if r.kind == "lane" and r.y + 1 <= y1]
    expected = {}
    for _ in range(300):
        row = lanes[int(rng.integers(len(lanes)))]
        x = float(rng.uniform(0, 2_000_000)) + (t0 - v.origin)
        y = row.y + 0.5
        i = item.pick(x, y, 0.0)
        if i is not None and c["start"][i] <= v.origin + x <= c["start"][i] + c["dur"][i]:
            expected[(x, y)] = i
    assert len(expected) > 20

    def no_query(*a, **k):
        raise AssertionError("hover ran a range query")

    monkeypatch.setattr(queries, "events_in_range", no_query)
    for (x, y), i in expected.items():
        got, merged = item.hover_pick(x, y, 0.0)
        # the drawn run holding x: the same event unless several share a pixel (then merged)
        assert got == i or merged
        checked += got == i
    assert checked >= 0.9 * len(expected)


def test_a_merged_runs_busy_time_is_its_events_union(qtbot):
    """Zoomed out, events closer than a pixel are one run, drawn as faint as it is idle; its hover
    says how busy it is. That busy time is the union of the run's events (from the columns)."""
    from gpuviewer.io.session import load

    v = _view(qtbot, load([PATHS[0]]))
    t, c = v.trace, v.trace.columns
    v.set_range(t.start_ns, t.end_ns)
    _image(v)
    item = v.item
    (_x0, _x1), (y0, y1) = v.vb.viewRange()
    lanes = [r for r in v.layout_model.visible_rows(y0, y1) if r.kind == "lane" and r.y + 1 <= y1]
    rng = np.random.default_rng(3)
    seen = 0
    for _ in range(400):
        row = lanes[int(rng.integers(len(lanes)))]
        got, merged = item.hover_pick(float(rng.uniform(0, t.end_ns - t.start_ns)), row.y + 0.5, 0.0)
        if got is None or not merged:
            continue
        r0, r1, busy = item.slices.picked_run
        lane, d = int(c["lane"][got]), int(c["depth"][got])
        sl = t.lane_slice(lane)
        st = np.asarray(c["start"][sl]).astype(np.int64)
        en = st + np.asarray(c["dur"][sl]).astype(np.int64)
        m = (np.asarray(c["depth"][sl]) == d) & (st >= r0) & (en <= r1)
        reach, total = r0, 0
        for a, b in sorted(zip(st[m].tolist(), en[m].tolist())):
            total += max(0, b - max(a, reach))
            reach = max(reach, b)
        assert busy == total and 0 < busy <= r1 - r0, (busy, total, r0, r1)
        seen += 1
    assert seen >= 20


def test_a_horizontal_pan_does_not_repaint_the_lane_labels(qtbot):
    from gpuviewer.io.session import load

    v = _view(qtbot, load([PATHS[0]]))
    v.resize(1400, 260)  # fewer rows than the session has: a vertical scroll moves them
    qtbot.waitUntil(lambda: v.scroll.maximum() > 30, timeout=5000)
    paints = []

    class Count(QObject):
        def eventFilter(self, obj, ev):
            if ev.type() == QEvent.Paint:
                paints.append(obj)
            return False

    f = Count()
    v.labels.installEventFilter(f)
    qtbot.wait(50)
    paints.clear()
    for k in range(6):
        v.pan(0.02 if k % 2 == 0 else -0.02)
        qtbot.wait(10)
    assert paints == []
    v.scroll.setValue(v.scroll.value() + 30)  # a vertical scroll moves them: repainted
    qtbot.waitUntil(lambda: len(paints) > 0, timeout=2000)


def _close_gaps(s, e, gap):
    """Plain merge: runs whose gap is under `gap` become one."""
    out_s, out_e = [int(s[0])], [int(e[0])]
    for a, b in zip(s[1:].tolist(), e[1:].tolist()):
        if a - out_e[-1] < gap:
            out_e[-1] = max(out_e[-1], b)
        else:
            out_s.append(a)
            out_e.append(b)
    return out_s, out_e


def test_summary_rows_merge_from_coarser_levels_to_the_same_runs():
    """A collapsed rank's GPU busy intervals (the union of its GPU kernels, from the real file)
    merged at a zoom's 2-pixel gap give the same runs whether the merge starts from the events'
    intervals or from the coarsest kept level under that gap."""
    from gpuviewer.analysis import intervals as iv
    from gpuviewer.model.categories import LaneKind
    from gpuviewer.render.slices_item import busy_levels, level_for
    from gpuviewer.session import open_session

    t = open_session([trace_path("kineto", "launch_bound_big.json.gz")])
    c = t.columns
    sl = [t.lane_slice(i) for i, ln in enumerate(t.lanes) if ln.kind == LaneKind.GPU]
    st = np.concatenate([np.asarray(c["start"][x]) for x in sl]).astype(np.int64)
    s, e = iv.union(st, st + np.concatenate([np.asarray(c["dur"][x]) for x in sl]).astype(np.int64))
    levels = busy_levels(s, e)
    assert len(levels) >= 3 and len(levels[-1][1]) < len(s) // 10  # coarser levels exist, and help
    for gap in (1_000, 10_000, 50_000, 300_000, 5_000_000, 1e9):
        ls, le = level_for(levels, gap)
        assert _close_gaps(ls, le, gap) == _close_gaps(s, e, gap)
