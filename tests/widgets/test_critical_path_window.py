"""The critical path in the window (issue 24 item 2): on samples/ddp and the shared kineto/ddp,
a real main window offscreen, opened once per trace. The outline drawn for the step shown is
Session.critical_paths() of a session opened apart (its segments, at the x and lane rows the view
box maps them to); each step's path sums to the step's duration measured from the trace's step
windows; the Critical path tab lists the segments with "bound by"; a click on one goes to it;
toggling off removes the layer (no pixel of its colour left in the picture)."""

import re
import zlib

import numpy as np
import pytest
from conftest import SAMPLES, make_window, trace_path
from PySide6.QtCore import QPointF

TRACES = {"samples/ddp": f"{SAMPLES}/ddp", "kineto/ddp": trace_path("kineto", "ddp")}


@pytest.fixture(scope="module", params=sorted(TRACES))
def opened(request, qapp, tmp_path_factory):
    """(window, critical paths from a session opened apart): one window per trace."""
    from PySide6.QtCore import QSettings

    from gpuviewer.session import Session
    from gpuviewer.widgets.main_window import MainWindow

    path = TRACES[request.param]
    w = MainWindow(QSettings(str(tmp_path_factory.mktemp("settings") / "s.ini"), QSettings.IniFormat))
    w.quiet_errors = True
    w.controller.block_analysis = True
    w.resize(1366, 768)
    w.show()
    assert w.open_paths([path], block=True)
    qapp.processEvents()
    cps = Session.open([path]).critical_paths()
    yield w, cps, path
    w.close()


def _paint(w, qapp):
    qapp.processEvents()
    return w.timeline.grab().toImage()  # paints every layer now


def _show(w, qapp, step: int, on: bool = True):
    w.critical.action.setChecked(on)
    w.goto_step(step)
    return _paint(w, qapp)


def _red(img) -> int:
    from gpuviewer.render.critical_path_item import PATH_COLOR

    a = np.frombuffer(img.convertToFormat(img.Format.Format_RGB32).constBits(), np.uint32)
    return int((a & 0xFFFFFF == PATH_COLOR.rgb() & 0xFFFFFF).sum())


def test_each_step_path_sums_to_the_step_from_the_trace_windows(opened):
    w, cps, _ = opened
    trace = w.trace
    steps = sorted({s.step for s in trace.steps})
    end = {n: max(s.end for s in trace.steps if s.step == n) for n in steps}
    # the first step from where its last rank began it (a rank that starts early waits for that one)
    first = {n: max(s.start for s in trace.steps if s.step == n) for n in steps}
    assert len(cps) >= 3
    for n, cp in cps.items():
        before = [m for m in steps if m < n]
        want = end[n] - (end[before[-1]] if before else first[n])  # the latest rank's step end to end
        total = sum(s.end_ns - s.start_ns for s in cp.segments)
        assert abs(total - want) <= 0.02 * want, (n, total, want)
        # in order, end to end: every moment of the step on exactly one segment
        assert all(a.end_ns == b.start_ns for a, b in zip(cp.segments, cp.segments[1:]))


def test_the_outline_is_the_sessions_critical_path_at_its_times_and_lanes(opened, qapp):
    w, cps, _ = opened
    from gpuviewer.model.categories import LaneKind

    tv = w.timeline
    lanes = w.trace.lanes
    kinds = {
        "host": {LaneKind.CPU, LaneKind.CUDA_API},
        "gpu": {LaneKind.GPU},
        "copy": {LaneKind.GPU},
        "comm": {LaneKind.COMM, LaneKind.GPU},
        "idle": {ln.kind for ln in lanes},
    }
    for n, cp in sorted(cps.items()):
        _show(w, qapp, n)
        layer = tv.item.critical
        drawn, pv = layer.drawn, layer.critical_path
        t0, t1 = w.session.view.range
        want = [s for s in cp.segments if s.end_ns >= t0 and s.start_ns <= t1]
        got = [i for i in drawn["index"].tolist() if int(pv.step[i]) == n]
        assert [(int(pv.start[i]), int(pv.end[i]), int(pv.rank[i]), pv.what[i]) for i in got] == [
            (s.start_ns, s.end_ns, s.rank, s.what) for s in want
        ], n
        assert len(want) == len(cp.segments)  # the step shown whole
        rows = {r.lane: r for r in tv.layout_model.rows if r.kind == "lane"}
        groups = {(r.rank, r.group.split("/", 1)[1]): r for r in tv.layout_model.rows if r.kind == "group"}
        for k, i in enumerate(drawn["index"].tolist()):
            s = pv.start[i] - tv.origin
            x = tv.vb.mapViewToDevice(QPointF(float(s), 0.0)).x()
            if drawn["x0"][k] > 0:  # not clipped at the view's left edge
                assert abs(drawn["x0"][k] - x) < 1.0
            ln = lanes[int(pv.lane[i])]
            res = ("host", "gpu", "comm", "copy", "idle")[int(pv.res[i])]
            assert ln.rank == int(pv.rank[i]) and ln.kind in kinds[res], (res, ln)
            row = rows.get(int(pv.lane[i])) or groups.get((ln.rank, "host")) or groups.get((ln.rank, ln.kind))
            y = tv.vb.mapViewToDevice(QPointF(0.0, row.y)).y()
            assert abs(drawn["y"][k] - (y + 1)) < 1.0


def test_gpu_segments_sit_on_a_stream_that_ran_work_then(opened, qapp):
    w, cps, _ = opened
    from gpuviewer.model import queries as q

    pv = None
    for n, cp in cps.items():
        _show(w, qapp, n)
        pv = w.timeline.item.critical.critical_path
    for i in np.flatnonzero(np.isin(pv.res, [1, 2, 3])).tolist():  # gpu, comm, copy
        assert len(q.events_in_range(w.trace, int(pv.lane[i]), int(pv.start[i]), int(pv.end[i])))


def _analysis_text(listed: str) -> str:
    """A row's text as the analysis says it: the tab adds a selected op's length where it is
    longer than its part of the segment (test_finding_selects checks that against the raw file)."""
    return re.sub(r"; the op: [\d.,]+ ms\)", ")", listed)


def test_the_step_details_list_its_path_and_a_click_goes_to_a_segment(opened, qapp):
    w, cps, _ = opened
    panel = w.critical.panel
    for n, cp in sorted(cps.items()):
        _show(w, qapp, n, on=False)
        assert panel.step == n
        assert f"Step {n}" in panel.head.text() and f"bound by <b>{cp.bound_by()}</b>" in panel.head.text()
        # the path's largest part by rank and resource, from its segments
        by: dict = {}
        for x in cp.segments:
            by[x.rank, x.resource] = by.get((x.rank, x.resource), 0) + x.end_ns - x.start_ns
        (r, res), ns = max(by.items(), key=lambda kv: kv[1])
        assert f"on the path: rank {r} {res} {ns / cp.duration_ns:.0%}" in panel.head.text()
        t = panel.tree
        listed = [[t.topLevelItem(k).text(c) for c in range(6)] for k in range(t.topLevelItemCount())]
        assert [(int(r[1]), r[2], _analysis_text(r[3])) for r in listed] == [
            (s.rank, s.resource, s.what) for s in cp.segments
        ]
        for r, s in zip(listed, cp.segments):
            assert r[4] == f"{(s.end_ns - s.start_ns) / 1e6:,.3f} ms"
            assert r[5] == f"{100 * (s.end_ns - s.start_ns) / cp.duration_ns:.1f}%"
    # the last step's longest segment, clicked: the view is on it, its rank highlighted, outline on
    seg = max(cp.segments, key=lambda s: s.end_ns - s.start_ns)
    k = cp.segments.index(seg)
    panel.tree.itemClicked.emit(panel.tree.topLevelItem(k), 0)
    qapp.processEvents()
    a, b = w.session.view.range
    assert a <= seg.start_ns and seg.end_ns <= b and (b - a) < 1.5 * (seg.end_ns - seg.start_ns)
    assert w.session.view.highlight == (seg.start_ns, seg.end_ns, {seg.rank})
    assert w.critical.action.isChecked() and w.timeline.item.critical.has_content()
    assert panel.step == n  # still this step's list
    # its lane unfolded (a host segment's thread lay in its rank's folded Host group) and in view
    v = w.critical.view
    i = next(
        j
        for j in range(len(v.start))
        if (int(v.start[j]), int(v.end[j]), int(v.rank[j])) == (seg.start_ns, seg.end_ns, seg.rank)
    )
    tl = w.timeline
    y = tl.layout_model.lane_y(int(v.lane[i]))
    assert y is not None, (seg.resource, w.trace.lanes[int(v.lane[i])].label)
    y0 = tl.scroll.value() / 10.0
    ev = int(v.event[i])
    if ev >= 0:  # the op the segment names: selected, on the segment's lane, its row in view
        # (the path says an op without its object's address, as the findings do)
        said = re.sub(r" (?:object )?at 0x[0-9a-fA-F]+", "", w.trace.name_of(ev))
        assert w.session.view.selected == ev and said in seg.what
        assert int(w.trace.columns["lane"][ev]) == int(v.lane[i]) or seg.resource != "host"
        a, b = tl.event_rows(ev)
        assert y0 <= a and b <= y0 + tl._rows_visible(), (a, b, y0)
    else:
        assert y0 <= y < y0 + tl._rows_visible(), (y, y0)


def test_the_selected_op_is_drawn_whole_over_the_outline_and_the_tint(opened, qapp):
    """A segment clicked selects the op it names; that op is drawn in its own colour over the
    step's range tint and the path's outline (kineto/ddp: the segment starts inside the 50 ms
    sleep, and the outline's edge crossed its name, half of it tinted; a review). A pixel row
    across the op, above its name, is the op's colour from edge to edge."""
    from PySide6.QtGui import QImage
    from PySide6.QtWidgets import QWidget

    from gpuviewer.render.colors import COLORS, SHADES
    from gpuviewer.render.critical_path_item import PATH_COLOR

    w, cps, _ = opened
    n, cp = max(cps.items(), key=lambda kv: max(s.end_ns - s.start_ns for s in kv[1].segments))
    _show(w, qapp, n, on=True)
    seg = max(cp.segments, key=lambda s: s.end_ns - s.start_ns)
    panel = w.critical.panel
    panel.tree.itemClicked.emit(panel.tree.topLevelItem(cp.segments.index(seg)), 0)
    qapp.processEvents()
    ev = w.session.view.selected
    assert ev is not None and w.timeline.item.critical.has_content()
    tl, c = w.timeline, w.trace.columns
    img = QImage(tl.plot.size(), QImage.Format_RGB32)
    QWidget.render(tl.plot, img)
    start, end = int(c["start"][ev]), int(c["start"][ev]) + int(c["dur"][ev])
    box = tl.vb.mapRectToDevice(tl.vb.boundingRect())
    x0 = max(tl.vb.mapViewToDevice(QPointF(float(start - tl.origin), 0.0)).x(), box.left())
    x1 = min(tl.vb.mapViewToDevice(QPointF(float(end - tl.origin), 0.0)).x(), box.right())
    yd = tl.layout_model.depth_y(int(c["lane"][ev]), int(c["depth"][ev]))
    top = tl.vb.mapViewToDevice(QPointF(0.0, yd)).y()
    sy = tl.vb.mapViewToDevice(QPointF(0.0, yd + 1)).y() - top
    name = w.trace.names[int(c["name"][ev])]
    shade = zlib.crc32(name.encode("utf-8", "replace")) % SHADES
    want = COLORS[int(c["cat"][ev]) * SHADES + shade].rgb() & 0xFFFFFF
    red = PATH_COLOR.rgb() & 0xFFFFFF
    inside = [
        img.pixel(x, y) & 0xFFFFFF
        for y in range(int(top + 0.08 * sy) + 2, int(top + 0.92 * sy) - 1)
        for x in range(int(x0) + 3, int(x1) - 3)
    ]
    assert inside and red not in inside  # the outline's edge does not cross the op
    # right of its name, the op's own colour, untinted
    after = int(x0) + 3 + tl.item.fm.horizontalAdvance(name) + 6
    xs = range(after, int(x1) - 4)
    assert len(xs) > 20  # the op is wide on screen: the case the review saw
    got = [img.pixel(x, int(top + sy / 2)) & 0xFFFFFF for x in xs]
    assert all(g == want for g in got), sorted({hex(g) for g in got if g != want})
    if seg.start_ns > start:  # the outline's edge falls inside the op: hidden under it
        xe = int(tl.vb.mapViewToDevice(QPointF(float(seg.start_ns - tl.origin), 0.0)).x())
        assert int(x0) + 4 < xe < int(x1) - 4


def test_a_header_click_sorts_the_path_by_its_numbers(opened, qapp):
    """Duration sorts by the segment's length (not the text: '9.9 ms' after '10.0 ms'), longest
    first on a second click; # brings the path's order back."""
    from PySide6.QtCore import Qt

    w, cps, _ = opened
    n, cp = max(cps.items(), key=lambda kv: len(kv[1].segments))
    _show(w, qapp, n, on=False)
    t = w.critical.panel.tree
    lengths = sorted((s.end_ns - s.start_ns for s in cp.segments), reverse=True)
    t.sortByColumn(4, Qt.DescendingOrder)
    got = [float(t.topLevelItem(k).text(4).split()[0].replace(",", "")) for k in range(t.topLevelItemCount())]
    assert got == [round(x / 1e6, 3) for x in lengths]
    t.sortByColumn(0, Qt.AscendingOrder)
    assert [_analysis_text(t.topLevelItem(k).text(3)) for k in range(t.topLevelItemCount())] == [
        s.what for s in cp.segments
    ]


def test_toggling_off_removes_the_layer(opened, qapp):
    w, cps, _ = opened
    n = sorted(cps)[1]
    on = _show(w, qapp, n, on=True)
    assert _red(on) > 200
    assert w.timeline.item.critical.has_content()
    off = _show(w, qapp, n, on=False)
    assert not w.timeline.item.critical.has_content() and w.timeline.item.critical.critical_path is None
    assert _red(off) == 0
    # the key: C on the timeline toggles it; typed into the search box it is a letter
    from PySide6.QtCore import Qt
    from PySide6.QtTest import QTest

    w.activateWindow()
    w.timeline.plot.setFocus()
    QTest.keyClick(w.timeline.plot, Qt.Key_C)
    assert w.critical.action.isChecked() and w.timeline.item.critical.has_content()
    w.timeline.search.setFocus()
    QTest.keyClick(w.timeline.search, Qt.Key_C)
    assert w.critical.action.isChecked() and w.timeline.search.text().endswith("c")
    w.timeline.search.clear()
    w.timeline.plot.setFocus()
    QTest.keyClick(w.timeline.plot, Qt.Key_C)
    assert not w.critical.action.isChecked() and not w.timeline.item.critical.has_content()


def test_paths_placed_off_the_ui_thread(qtbot, tmp_path, qapp):
    """The window's own flow: the analysis on its worker, the lanes placed on another thread."""
    w = make_window(qtbot, tmp_path, size=(1366, 768))
    w.critical.action.setChecked(True)
    assert w.open_paths([f"{SAMPLES}/ddp"], block=True)
    assert "running" in w.critical.panel.head.text() or w.critical.view is not None
    w.controller.wait_for_analysis()
    qapp.processEvents()  # analysisReady delivered: the placing thread starts
    w.critical.wait()
    assert w.critical.view is not None and len(w.critical.view) > 0
    assert w.timeline.item.critical.critical_path is w.critical.view
    img = _paint(w, qapp)
    assert w.critical.panel.step is not None and _red(img) > 0
    w.settings.sync()
    again = make_window(qtbot, tmp_path)  # the same settings file: the choice is remembered
    assert again.critical.action.isChecked() and again.critical.panel.outline.isChecked()
    # ...and said while a trace is shown with it, with a link that hides it (a review: a trace
    # opened with red boxes over every step, nothing saying why)
    badge = again.critical.badge
    assert badge.isHidden()  # no trace yet
    assert again.open_paths([f"{SAMPLES}/ddp"], block=True)
    assert not badge.isHidden() and "critical path" in badge.text() and "hide" in badge.text()
    badge.linkActivated.emit("off")
    assert not again.critical.action.isChecked() and badge.isHidden()
    again.critical.action.setChecked(True)
    assert not badge.isHidden()


def test_collapsed_ranks_carry_the_outline_on_their_summary_row(opened, qapp):
    w, cps, _ = opened
    tv = w.timeline
    n = sorted(cps)[-1]
    tv.collapse_ranks(True)
    try:
        _show(w, qapp, n)
        layer = tv.item.critical
        pv, drawn = layer.critical_path, layer.drawn
        assert sum(int(pv.step[i]) == n for i in drawn["index"].tolist()) == len(cps[n].segments)
        headers = {r.rank: r for r in tv.layout_model.rows if r.kind == "header"}
        for k, i in enumerate(drawn["index"].tolist()):
            y = tv.vb.mapViewToDevice(QPointF(0.0, headers[int(pv.rank[i])].y)).y()
            assert abs(drawn["y"][k] - (y + 1)) < 1.0
    finally:
        tv.collapse_ranks(False)


def test_export_image_pictures_the_outline_as_shown(opened, qapp, tmp_path):
    from PySide6.QtGui import QImage

    w, cps, _ = opened
    n = sorted(cps)[1]
    for on in (True, False):
        _show(w, qapp, n, on=on)
        out = tmp_path / f"t{on}.png"
        assert w.export_image(str(out))
        assert (_red(QImage(str(out))) > 200) is on


def test_going_to_a_step_lists_that_step_where_a_stall_overlaps_the_next(qtbot, tmp_path, qapp):
    """nsys_ddp: a rank stalls in step 6, so the other rank's step 7 starts ~56 ms before step 6's
    path ends; the box, [ and ] still list the step they go to."""
    w = make_window(qtbot, tmp_path, block_analysis=True, size=(1366, 768))
    assert w.open_paths([trace_path("nsys", "nsys_ddp.sqlite")], block=True)
    qapp.processEvents()
    view = w.critical.view
    steps = sorted(view.steps)
    assert len(steps) >= 5
    for n in steps:
        w.goto_step(n)
        assert w.critical.panel.step == n
    w.goto_step(steps[0])
    for _ in steps[1:]:
        w.step_nav(+1)  # ]: the step it went to is in the box
        assert w.critical.panel.step == w.step_box.value()


def test_every_step_can_be_picked_and_the_timeline_goes_there(opened, qapp):
    """The tab lists the step in view and says so; its step list holds every step with a path
    (Session.critical_paths of a session opened apart), and picking one lists that step's path
    and takes the timeline to it (a user saw one step listed, with no sign that others exist)."""
    w, cps, _path = opened
    panel = w.critical.panel
    combo = panel.steps
    assert (not combo.isHidden()) == (len(cps) > 1)
    assert [combo.itemData(i) for i in range(combo.count())] == sorted(cps)
    for i in range(combo.count()):
        n = combo.itemData(i)
        combo.activated.emit(i)
        qapp.processEvents()
        assert panel.step == n and f"Step {n}" in panel.head.text()
        assert "the step most in view" in panel.head.text()
        t0, t1 = w.session.view.range
        cp = cps[n]
        mid = (cp.start_ns + cp.end_ns) // 2
        assert t0 <= mid <= t1, (n, t0, t1, cp.start_ns, cp.end_ns)
        assert panel.tree.topLevelItemCount() == len(panel.view.rows(n))


def test_with_several_steps_in_view_the_list_says_which_it_shows(opened, qapp):
    """The whole capture in view said 'Step 3 (the step most in view)' beside every step (an
    audit of the window): with several steps wholly in view it lists the longest of them (by the
    paths' own windows) and says so."""
    w, cps, _ = opened
    if len(cps) < 2:
        pytest.skip("one step")
    a = min(cp.start_ns for cp in cps.values()) - 1_000_000
    b = max(cp.end_ns for cp in cps.values()) + 1_000_000
    w.session.set_range(a, b)
    qapp.processEvents()
    panel = w.critical.panel
    v = w.critical.view
    inside = [n for n, (lo, hi) in v.windows.items() if a <= lo and hi <= b and n in v.steps]
    assert len(inside) >= 2
    # the longest path of a profiled step (from the session's own critical paths: cps)
    profiled = [n for n in inside if not v.steps[n].warmup] or inside
    assert panel.step == max(profiled, key=lambda n: (cps[n].duration_ns, -n))
    assert f"(the longest path of the {len(inside)} steps in view" in panel.head.text()


def test_the_steps_in_view_count_follows_the_view(opened, qapp):
    """The header kept 'of the 5 steps in view' after a zoom out to more steps when the longest
    stayed the same (helper-111): the count is the view's, and 'warm-up aside' only where a
    warm-up step is among them."""
    w, cps, _ = opened
    v = w.critical.view
    if len([n for n in v.steps if not v.steps[n].warmup]) < 2:
        pytest.skip("fewer than two profiled steps")
    panel = w.critical.panel
    wins = sorted((lo, hi, n) for n, (lo, hi) in v.windows.items() if n in v.steps)
    for k in (2, len(wins)):
        a, b = wins[0][0] - 1, wins[k - 1][1] + 1
        w.session.set_range(a, b)
        qapp.processEvents()
        inside = [n for lo, hi, n in wins if a <= lo and hi <= b]
        assert f"the {len(inside)} steps in view" in panel.head.text(), (k, panel.head.text())
        warm = any(v.steps[n].warmup for n in inside)
        assert ("warm-up aside" in panel.head.text()) == (warm and not v.steps[panel.step].warmup)


def test_a_capture_without_steps_is_listed_as_the_capture_its_durations_whole(qtbot, tmp_path, qapp):
    """HTA's alexnet marks no steps: the tab said 'Step 0' and cut its 29,935 ms start-up row to
    '29,93…98 ms' in a column sized for '0.012 ms' (helper-116). It says 'The capture (no steps)'
    and every duration is drawn whole (the column at least as wide as its widest value). The raw
    file has no ProfilerStep range."""
    import gzip
    import json
    import os

    from conftest import compat_path

    folder = compat_path("facebookresearch__HolisticTraceAnalysis", "critical_path", "alexnet")
    (name,) = os.listdir(folder)
    with gzip.open(os.path.join(folder, name), "rt") as fh:
        assert not any(str(e.get("name", "")).startswith("ProfilerStep#") for e in json.load(fh)["traceEvents"])
    w = make_window(qtbot, tmp_path, block_analysis=True, size=(1366, 768))
    assert w.open_paths([folder], block=True)
    qapp.processEvents()
    w.critical.action.setChecked(True)
    w.critical.wait()
    qapp.processEvents()
    panel = w.critical.panel
    assert "The capture (no steps)" in panel.head.text() and "Step 0" not in panel.head.text()
    tree = panel.tree
    fm = tree.fontMetrics()
    texts = [tree.topLevelItem(k).text(4) for k in range(tree.topLevelItemCount())]
    assert any(float(t.split()[0].replace(",", "")) > 10_000 for t in texts)  # the start-up's row
    assert tree.columnWidth(4) >= max(fm.horizontalAdvance(t) for t in texts) + 8
    # the verdict is judged without the start-up, the rows are not: the head says both (saxpy's
    # 512 ms cudaHostRegister, before the GPU's first op, read as judged; a review)
    head = panel.head.text()
    assert "start-up and teardown, in its path, left out" in head
    assert "the path, its time and shares: the whole capture, start-up and teardown included" in head
    total = sum(float(t.split()[0].replace(",", "")) for t in texts)
    assert f"{total:,.2f} ms" in head or abs(total - float(head.split(" · ")[1].split()[0].replace(",", ""))) < 0.05


def test_boxes_of_one_row_within_a_few_pixels_are_drawn_as_one():
    """A run of tiny kernels on the path was a comb of outlined boxes whose halos cut the names
    under them into fragments (a review): boxes of one row that touch or lie within MERGE_PX of
    each other are drawn as one, those farther apart or on another row are not."""
    import numpy as np

    from gpuviewer.render.critical_path_item import MERGE_PX, _merged

    # (row 100's 15-16 box lies inside 10-20: the run's right edge is its widest box's)
    x0 = np.array([0.0, 10.0, 15.0, 21.0, 60.0, 5.0, 12.0 + MERGE_PX + 0.5])
    x1 = np.array([9.0, 20.0, 16.0, 30.0, 70.0, 12.0, 40.0])
    y = np.array([100.0, 100.0, 100.0, 100.0, 100.0, 120.0, 120.0])
    h = np.full(7, 18.0)
    got = sorted(zip(*(a.tolist() for a in _merged(x0, x1, y, h))))
    # (x, y, w, h): row 100's first three are one box, 60-70 its own; row 120's two stay apart
    assert got == [
        (0.0, 100.0, 30.0, 18.0),
        (5.0, 120.0, 7.0, 18.0),
        (12.0 + MERGE_PX + 0.5, 120.0, 40.0 - 15.5, 18.0),
        (60.0, 100.0, 10.0, 18.0),
    ]
