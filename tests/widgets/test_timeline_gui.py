"""The window on real traces, offscreen: keys, selection, details, search, area totals."""

import numpy as np
import pytest
from conftest import make_window, trace_path
from PySide6.QtCore import QPointF, Qt

from gpuviewer.model.categories import LaneKind


@pytest.fixture
def win(qtbot, tmp_path):
    w = make_window(qtbot, tmp_path, size=(1600, 900))
    qtbot.waitExposed(w)
    assert w.open_paths([trace_path("kineto", "ddp")], block=True)
    return w


def test_both_ranks_labelled(win):
    rows = win.timeline.layout_model.rows
    headers = [r for r in rows if r.kind == "header"]
    assert [h.rank for h in headers] == [0, 1]
    assert "NVIDIA H200" in headers[0].label
    labels = [r.label for r in rows if r.kind == "lane"]
    assert any("NCCL" in lab for lab in labels)
    assert "2 ranks" in win.status_files.text()


def test_keys_zoom_and_pan(win, qtbot):
    tv = win.timeline
    tv.setFocus()
    t0, t1 = tv.visible_range()
    qtbot.keyClick(tv, Qt.Key_W)
    a0, a1 = tv.visible_range()
    assert (a1 - a0) == pytest.approx((t1 - t0) / 1.25, rel=1e-3)
    qtbot.keyClick(tv, Qt.Key_D)
    b0, b1 = tv.visible_range()
    assert b0 - a0 == pytest.approx(0.1 * (a1 - a0), rel=1e-2)
    qtbot.keyClick(tv, Qt.Key_A)
    qtbot.keyClick(tv, Qt.Key_S)
    c0, c1 = tv.visible_range()
    assert (c1 - c0) == pytest.approx(t1 - t0, rel=1e-3)
    qtbot.keyClick(tv, Qt.Key_W)
    qtbot.keyClick(tv, Qt.Key_0)
    assert tv.visible_range() == pytest.approx((t0, t1), rel=1e-9)


def _kernel_point(win):
    tv = win.timeline
    t = win.trace
    lane = next(r.lane for r in tv.layout_model.rows if r.kind == "lane" and t.lanes[r.lane].kind == LaneKind.GPU)
    sl = t.lane_slice(lane)
    durs = np.asarray(t.columns["dur"][sl])
    i = sl.start + int(np.argmax(durs))
    return i, lane


def test_click_selects_and_fills_details(win, qtbot):
    tv = win.timeline
    i, lane = _kernel_point(win)
    c = win.trace.columns
    tv.set_range(int(c["start"][i]) - 1000, int(c["start"][i]) + int(c["dur"][i]) + 1000)
    qtbot.wait(10)
    y = tv.layout_model.lane_y(lane) + 0.5
    x = int(c["start"][i]) + int(c["dur"][i]) / 2 - tv.origin
    scene = tv.vb.mapViewToScene(QPointF(x, y))
    view_pt = tv.plot.mapFromScene(scene)
    qtbot.mouseClick(tv.plot.viewport(), Qt.LeftButton, pos=view_pt)
    assert tv.selected == i
    fields = {
        win.details.topLevelItem(k).text(0): win.details.topLevelItem(k).text(1)
        for k in range(win.details.topLevelItemCount())
    }
    # a long C++ name: short first, whole after the fields (a review: 12-40 wrapped lines pushed
    # them out of the pane); its tooltip whole either way
    name = win.trace.name_of(i)
    from gpuviewer.model.fmt import short_name

    assert fields["Name"] == (short_name(name) if len(name) > 100 else name)
    assert fields.get("Full name", name) == name and win.details.topLevelItem(0).toolTip(1) == name
    if "Full name" in fields:
        keys = list(fields)
        assert keys.index("Full name") > keys.index("Duration") > keys.index("Name") == 0
    assert fields["Rank"] == "0"
    assert "Linked" in fields  # the launch that issued this kernel
    args = [
        win.details.topLevelItem(k)
        for k in range(win.details.topLevelItemCount())
        if win.details.topLevelItem(k).text(0) == "Arguments"
    ][0]
    keys = {args.child(k).text(0) for k in range(args.childCount())}
    assert {"correlation", "stream", "device"} <= keys
    # flow arrows from the launch
    assert tv.item.flow_pairs and all(b == i for a, b in tv.item.flow_pairs)
    # F zooms to it, arrows step along the lane
    qtbot.keyClick(tv, Qt.Key_F)
    v0, v1 = tv.visible_range()
    assert v0 <= int(c["start"][i]) and v1 >= int(c["start"][i]) + int(c["dur"][i])
    qtbot.keyClick(tv, Qt.Key_Right)
    assert tv.selected != i and int(c["lane"][tv.selected]) == lane
    assert int(c["start"][tv.selected]) >= int(c["start"][i])


def test_search_counts_matches(win, qtbot):
    tv = win.timeline
    n = tv.run_search("ncclDevKernel")
    want = sum(
        1 for k in np.asarray(win.trace.columns["name"]) if win.trace.names[k].lower().startswith("nccldevkernel")
    )
    assert n == want == 87
    assert "87" in tv.match_label.text()
    first = tv.selected
    tv.step_match(+1)
    assert tv.selected != first
    tv.step_match(-1)
    assert tv.selected == first
    assert tv.run_search(r"^nccl:all_reduce$", regex=True) == sum(
        1 for k in np.asarray(win.trace.columns["name"]) if win.trace.names[k] == "nccl:all_reduce"
    )
    # typing in the search box and pressing Enter
    tv.search.setText("ProfilerStep#")
    qtbot.keyClick(tv.search, Qt.Key_Return)
    want = sum(1 for k in np.asarray(win.trace.columns["name"]) if "profilerstep#" in win.trace.names[k].lower())
    assert len(tv.matches) == want >= 6  # CPU annotations and their GPU projections


def test_area_selection_totals_equal_direct_computation(win, qtbot):
    tv = win.timeline
    t = win.trace
    gpu_rows = [
        r
        for r in tv.layout_model.rows
        if r.kind == "lane" and r.rank == 0 and t.lanes[r.lane].kind in (LaneKind.GPU, LaneKind.COMM)
    ]
    ya, yb = gpu_rows[0].y + 0.1, gpu_rows[-1].y + 0.5
    t0 = t.start_ns + (t.end_ns - t.start_ns) // 4
    t1 = t0 + 30_000_000
    with qtbot.waitSignal(tv.areaSelected):
        lanes = tv.select_area(t0, t1, ya, yb)
    assert sorted(lanes) == sorted(r.lane for r in gpu_rows)
    rows = win.area.rows
    c = t.columns
    m = np.isin(c["lane"], lanes) & (c["start"] <= t1) & (c["start"] + c["dur"] >= t0)
    assert sum(r["count"] for r in rows) == int(m.sum())
    assert sum(r["total_ns"] for r in rows) == int(c["dur"][m].sum())
    assert win.area.table.rowCount() == len(rows)
    assert win.area_dock.isVisible()


def test_step_navigator(win):
    win.goto_step(3)
    t0, t1 = win.timeline.visible_range()
    s3 = [s for s in win.trace.steps if s.step == 3]
    assert t0 <= min(s.start for s in s3) and t1 >= max(s.end for s in s3)
    win.step_nav(+1)
    assert win.step_box.value() == 4
    # moved there another way (a finding, the critical path), the box names the step shown: it kept
    # the number last typed, and typing that number again went nowhere
    s2 = [s for s in win.trace.steps if s.step == 2]
    win.timeline.set_range(min(s.start for s in s2), max(s.end for s in s2))
    assert win.step_box.value() == 2
    # a view of every step names none of them; Enter on the number shown goes to it
    win.timeline.set_range(win.trace.start_ns, win.trace.end_ns)
    assert win.step_box.value() == 2
    win.step_box.lineEdit().returnPressed.emit()
    t0, t1 = win.timeline.visible_range()
    assert (
        t0 <= min(s.start for s in s2)
        and t1 >= max(s.end for s in s2)
        and t1 - t0 < win.trace.end_ns - win.trace.start_ns
    )


def test_collapse_hide_pin(win):
    lm = win.timeline.layout_model
    n = len([r for r in lm.rows if r.kind == "lane"])
    lm.toggle_rank(1)
    assert len([r for r in lm.rows if r.kind == "lane"]) < n
    lm.toggle_rank(1)
    lane = next(r.lane for r in lm.rows if r.kind == "lane")
    lm.hide(lane)
    assert lane not in [r.lane for r in lm.rows]
    lm.show_all()
    other = [r.lane for r in lm.rows if r.kind == "lane"][3]
    lm.toggle_pin(other)
    assert lm.rows[0].label == "Pinned" and lm.rows[1].lane == other
    first, second = [r.lane for r in lm.rows if r.kind == "lane" and r.rank == 0][1:3]
    lm.move(second, -1)
    order = [r.lane for r in lm.rows if r.kind == "lane" and r.rank == 0]
    assert order.index(second) < order.index(first)


def test_unreadable_file_keeps_window_working(win, tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text("this is not a trace")
    assert not win.open_paths([str(bad)], block=True)
    assert "bad.json" in win.last_error
    assert win.trace is not None and win.timeline.item is not None  # previous session still shown


def test_background_loader_with_progress(qtbot, tmp_path):
    w = make_window(qtbot, tmp_path)
    with qtbot.waitSignal(w.loader.loaded, timeout=120_000):
        w.open_paths([trace_path("kineto", "dataloader_stall.json.gz")])
        assert w.cancel_btn.isVisibleTo(w)
    assert w.trace is not None and w.trace.n_events > 10_000
    assert not w.cancel_btn.isVisibleTo(w)
    with qtbot.waitSignal(w.loader.failed, timeout=60_000):
        bad = tmp_path / "bad.json"
        bad.write_text("{}")
        w.open_paths([str(bad)])
    assert "bad.json" in w.last_error


def test_nsys_session_in_window(qtbot, tmp_path):
    w = make_window(qtbot, tmp_path)
    assert w.open_paths([trace_path("nsys", "nsys_ddp.sqlite")], block=True)
    headers = [r for r in w.timeline.layout_model.rows if r.kind == "header"]
    assert [h.rank for h in headers] == [0, 1]
    assert len({s.step for s in w.trace.steps}) == 10


def test_findings_dock_takes_the_timeline_there(qtbot, tmp_path):
    w = make_window(qtbot, tmp_path, size=(1600, 900))
    with qtbot.waitSignal(w.analysisReady, timeout=60_000):
        assert w.open_paths([trace_path("kineto", "ddp")], block=True)
    shown = w.findings.visible_findings()

    # ranked by what fixing them would save (the what-if replay), those without a saving after
    def best(f):  # per step its cause acts in
        got = [x for x in [f.saves_ms_in_steps, *(best(c) for c in f.children)] if x is not None]
        return max(got) if got else None

    saves = [best(x) for x in shown if best(x) is not None]
    assert shown and saves and saves == sorted(saves, reverse=True)
    assert all(best(x) is None for x in shown[len(saves) :])
    assert w.findings.tree.topLevelItemCount() == len(shown)
    assert w.findings.detail.toPlainText().startswith(shown[0].title)  # never empty on open
    # the planted stall: an episodic straggler, a finding of its own, first
    f = shown[0]
    assert f.rule == "straggler" and f.step == 3
    # its saving in the column is the one in its step, which it names
    assert w.findings.tree.topLevelItem(0).text(1) == f"{f.saves_ms_in_steps:.1f} ms (step 3)"
    assert w.findings.choose_finding(f)
    t0, t1 = w.timeline.visible_range()
    assert t0 <= f.start_ns and t1 >= f.end_ns and (t1 - t0) < 2 * (f.end_ns - f.start_ns)
    assert w.timeline.item.highlight == (f.start_ns, f.end_ns, set(f.ranks))
    sel = w.timeline.selected
    assert sel is not None and w.trace.name_of(sel) == f.metrics["evidence"][0]["name"]
    # the selected evidence is on a visible row (its lane was unfolded)
    lane = int(w.trace.columns["lane"][sel])
    row = next(r for r in w.timeline.layout_model.rows if r.kind == "lane" and r.lane == lane)
    assert row.first <= int(w.trace.columns["depth"][sel]) < row.first + row.depths
    # filter
    w.findings.severity.setCurrentIndex(1)
    assert all(x.severity == "high" for x in w.findings.visible_findings())
    w.findings.severity.setCurrentIndex(0)
    w.findings.text.setText("rank 1")
    assert all(1 in x.ranks for x in w.findings.visible_findings())
    # overview stacks add up to each step's GPU time (its window and the idle around it that is its)
    steps, v = w.overview.stacks(0)
    r0 = w.analysis.rank(0)
    for s, row_ in zip(r0["steps"], v):
        gpu_time = s["end_ns"] - s["start_ns"] + s["idle_before_ns"] + s["idle_after_ns"]
        assert row_.sum() == pytest.approx(gpu_time / 1e6, rel=1e-6)
    assert w.overview.table.rowCount() > 0


def test_drop_and_recent_files(qtbot, tmp_path):
    from PySide6.QtCore import QMimeData, QPointF, QUrl
    from PySide6.QtGui import QDropEvent

    w = make_window(qtbot, tmp_path)
    md = QMimeData()
    md.setUrls([QUrl.fromLocalFile(trace_path("kineto", "dataloader_stall.json.gz"))])
    ev = QDropEvent(QPointF(10, 10), Qt.CopyAction, md, Qt.LeftButton, Qt.NoModifier)
    with qtbot.waitSignal(w.loader.loaded, timeout=120_000):
        w.dropEvent(ev)
    assert w.trace is not None and "dataloader_stall" in w.windowTitle()
    labels = [a.text() for a in w.recent_menu.actions()]
    assert labels and "dataloader_stall.json.gz" in labels[0]
    # the recent list survives a restart (same settings file)
    w2 = make_window(qtbot, tmp_path)
    assert [a.text() for a in w2.recent_menu.actions()][:1] == labels[:1]


def test_background_loader_with_a_big_file(qtbot, tmp_path):
    """Files big enough for the reader's worker pool load through the window's reader process
    (a pool inside a daemonic process used to fail)."""
    w = make_window(qtbot, tmp_path, block_analysis=True)
    errors = []
    w.loader.failed.connect(errors.append)
    with qtbot.waitSignal(w.loader.loaded, timeout=300_000):
        w.open_paths([trace_path("kineto", "launch_bound_big.json.gz")])
    assert not errors
    assert w.trace.n_events == 600_053


def test_reader_in_a_daemonic_process_decodes_in_process(tmp_path):
    import multiprocessing as mp

    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    p = ctx.Process(target=_count_in_child, args=(trace_path("kineto", "launch_bound_big.json.gz"), q), daemon=True)
    p.start()
    got = q.get(timeout=300)
    p.join(30)
    assert got == 600_053


def _count_in_child(path, q):
    from gpuviewer.io.session import load

    try:
        q.put(load([path], use_cache=False).n_events)
    except Exception as e:  # noqa: BLE001
        q.put(repr(e))


def test_collective_kernel_shows_wait_and_transfer(qtbot, tmp_path):
    """A collective kernel on the waiting rank: details list its wait (and who came last), its
    transfer and bandwidth; the timeline knows which part to draw lighter."""
    w = make_window(qtbot, tmp_path, size=(1600, 900))
    with qtbot.waitSignal(w.analysisReady, timeout=60_000):
        assert w.open_paths([trace_path("kineto", "ddp")], block=True)
    kc = w.analysis.kernel_collectives
    i, info = max(kc.items(), key=lambda kv: kv[1]["wait_ns"])
    # the wait ends where the last rank's kernel of the same collective starts
    c = w.trace.columns
    partner = [
        j
        for j, v in kc.items()
        if v["step"] == info["step"] and v["order"] == info["order"] and v["group"] == info["group"] and j != i
    ]
    assert partner and info["wait_end_ns"] == max(int(c["start"][j]) for j in partner + [i])
    assert info["wait_ns"] == info["wait_end_ns"] - int(c["start"][i]) > 0
    w.timeline.select(i)
    rows = {
        w.details.topLevelItem(k).text(0): w.details.topLevelItem(k).text(1)
        for k in range(w.details.topLevelItemCount())
    }
    assert "arrived last" in rows["Waiting for others"] and rows["Transfer"]
    assert "busbw" in rows["Bytes"]
    assert i in set(w.timeline.item.wait_idx.tolist())


def test_opens_on_the_profiled_steps(qtbot, tmp_path):
    """nsys_ddp is a 10 s capture whose 10 steps sit at 8.5-9.2 s: the window opens on the
    steps after its warm-up step 0 (from the export's own NVTX 'step N' ranges, read here with
    sqlite3), Shift+Home shows the warm-up too, 0 shows all."""
    import sqlite3

    from PySide6.QtCore import Qt

    path = trace_path("nsys", "nsys_ddp.sqlite")
    con = sqlite3.connect(f"file:{path}?mode=ro&immutable=1", uri=True)
    rows = con.execute(
        "SELECT e.start, e.end FROM NVTX_EVENTS e LEFT JOIN StringIds s ON e.textId = s.id "
        "WHERE COALESCE(e.text, s.value) LIKE 'step %' AND e.end IS NOT NULL"
    ).fetchall()
    con.close()
    assert rows
    w = make_window(qtbot, tmp_path, block_analysis=True, size=(1600, 900))
    assert w.open_paths([path], block=True)
    t0, t1 = w.timeline.visible_range()
    # the trace's axis is the export's axis plus a constant (its utcEpochNs): compare lengths.
    # Step 0 is warm-up (25x the others on both ranks): the window opens on the steps after it
    import statistics

    typical = statistics.median(e - s for s, e in rows)
    steady = [(s, e) for s, e in rows if e - s < 10 * typical]
    assert len(rows) - len(steady) == 2  # step 0 of each rank
    steps_ns = max(e for _, e in rows) - min(s for s, _ in steady)
    assert steps_ns <= (t1 - t0) <= 1.3 * steps_ns
    assert (t1 - t0) < 0.2 * (w.trace.end_ns - w.trace.start_ns)
    qtbot.keyClick(w.timeline, Qt.Key_Home, Qt.ShiftModifier)  # every step, the warm-up with them
    all_ns = max(e for _, e in rows) - min(s for s, _ in rows)
    h0, h1 = w.timeline.visible_range()
    assert all_ns <= (h1 - h0) <= 1.3 * all_ns
    qtbot.keyClick(w.timeline, Qt.Key_0)
    a0, a1 = w.timeline.visible_range()
    assert a0 <= w.trace.start_ns and a1 >= w.trace.end_ns


def test_a_rank_stays_named_at_the_top_wherever_its_lanes_are_scrolled(qtbot, tmp_path):
    """fsdp with rank 0's host lanes open, scrolled a tenth of a row at a time: wherever the view's
    top falls inside a rank's lanes below its header (in a lane or in the space between two), that
    rank's header is pinned at the top. It was not where the top fell between two lanes (a user's
    review of screenshots: fsdp at its bottom scroll position named no rank). The rank is the one
    whose rows are under the pinned band, not the one whose last sliver is in it."""
    w = make_window(qtbot, tmp_path, size=(1366, 728))
    qtbot.waitExposed(w)
    assert w.open_paths([trace_path("kineto", "fsdp")], block=True)
    tv = w.timeline
    lm = tv.layout_model
    lm.state.groups["r0/host"] = False  # rank 0's host lanes open: many rows to scroll through
    lm.state.groups["r1/host"] = False  # and rank 1's: its header can reach the top
    lm.rebuild()
    tv._relayout()
    from gpuviewer.model.layout import HEADER_H

    headers = {r.rank: r for r in lm.rows if r.kind == "header"}
    checked = crossed = 0
    for v in range(0, tv.scroll.maximum() + 1):
        tv.scroll.setValue(v)
        y0 = tv.labels.y_range[0]
        # the rows under the pinned header's band: a sliver of the rank above in the band itself
        # named that rank over the next rank's header and lanes (an audit's screenshot)
        below = [r for r in lm.rows if r.y + r.h >= y0 + HEADER_H]
        first = below[0] if below else None
        hdr = tv.labels.sticky_header()
        nxt = [h for h in headers.values() if y0 < h.y < y0 + HEADER_H]
        if nxt:  # the next rank's header is in the band: nothing pinned over it
            crossed += 1
            assert hdr is None, (v, hdr.label, nxt[0].label)
        if first is None or first.kind == "header" or first.rank < 0 or headers[first.rank].y >= y0:
            continue
        checked += 1
        assert hdr is not None and hdr.rank == first.rank, (v, y0, first.label)
    assert checked > 20 and crossed > 0


def test_a_step_that_fills_the_view_keeps_its_name_at_the_left_edge(qtbot, tmp_path):
    """pp_gpu zoomed to 20 ms inside a 400 ms step: the step's name is drawn, at the view's left
    edge (it was drawn at the step's start, off screen: no step named; or cut, 'tep 2')."""
    from PySide6.QtGui import QPainter

    w = make_window(qtbot, tmp_path, size=(1366, 728))
    qtbot.waitExposed(w)
    assert w.open_paths([trace_path("kineto", "pp_gpu")], block=True)
    tv = w.timeline
    st = next(s for s in w.trace.steps if s.end - s.start > 300e6)
    mid = (st.start + st.end) // 2
    tv.set_range(mid - 10_000_000, mid + 10_000_000)
    tv.plot.grab()  # paint: the steps layer records its calls
    layer = tv.item.steps
    texts = [(a[0], a[2]) for fn, a in layer._calls.calls if fn is QPainter.drawText and len(a) >= 3]
    mine = [r for r, t in texts if t == f"step {st.step}"]
    assert mine, texts
    (x0, _x1), _ = tv.vb.viewRange()
    left = tv.vb.mapViewToDevice(QPointF(x0, 0)).x()
    assert all(r.left() >= left - 1 for r in mine), ([r.left() for r in mine], left)
