"""The window on a 1366x768 laptop (issue 28): a real xcb window under Xvfb, opened on
samples/ddp once for the module. The timeline's lanes keep >= 55% of the window's height; every
finding that selects an event leaves that event's rectangle inside the lanes' viewport, below the
rank header pinned at the top; no findings header or severity badge is elided; Ctrl+F focuses the
search from another panel; M types a note in place (no modal dialog), Esc drops it; a click that
only brings focus back to the timeline keeps the selection. Offscreen: Collapse / Expand all ranks,
and an 8-rank session on a small window opening compact with its late rank open."""

import json
import os
import shutil
import subprocess
import sys

import pytest
from conftest import ROOT, SAMPLES, make_window, trace_path

SCRIPT = r'''
import json, sys

def main():
    from PySide6.QtCore import QPoint, QSettings, Qt, QTimer
    from PySide6.QtGui import QFontMetrics
    from PySide6.QtTest import QTest
    from PySide6.QtWidgets import QApplication, QTreeWidgetItemIterator
    app = QApplication(sys.argv[:1])
    assert app.platformName() == "xcb", app.platformName()
    from gpuviewer.widgets.findings_panel import SeverityBadge
    from gpuviewer.widgets.main_window import MainWindow
    w = MainWindow(QSettings(sys.argv[2], QSettings.IniFormat))
    w.quiet_errors = True
    w.show()
    out = {}

    def lanes_rect(tv):
        """The lanes' viewport (the view box, axes excluded) in the timeline's coordinates."""
        r = tv.vb.mapRectToDevice(tv.vb.rect())
        tl = tv.plot.viewport().mapTo(tv, r.topLeft().toPoint())
        return [tl.x(), tl.y(), tl.x() + r.width(), tl.y() + r.height()]

    def misaligned(tv):
        """Per row in view: how far (px, in the window) its label is drawn from its lane."""
        import pyqtgraph as pg
        y0, y1 = tv.labels.y_range
        out = []
        for row in tv.layout_model.visible_rows(y0, y1):
            if row.y < y0:
                continue  # scrolled partly away: the label's row is clipped, or the sticky header
            lane = tv.plot.viewport().mapTo(w, tv.vb.mapViewToDevice(pg.Point(0, row.y)).toPoint()).y()
            label = tv.labels.mapTo(w, QPoint(0, int(round(tv.labels._to_dev(row.y))))).y()
            out.append([row.label, label - lane])
        return out

    def layout():
        tv = w.timeline
        out["label_offsets"] = misaligned(tv)
        out["window"] = [w.width(), w.height()]
        out["lanes_h"] = tv.vb.height()
        out["details_open_at_start"] = w.details_dock.isVisible()
        tree = w.findings.tree
        hd = tree.header()
        fm = QFontMetrics(hd.font())
        out["headers"] = [[tree.headerItem().text(c), fm.horizontalAdvance(tree.headerItem().text(c)), hd.sectionSize(c)]
                          for c in range(tree.columnCount())]
        badges = []
        it = QTreeWidgetItemIterator(tree)
        while it.value() is not None:
            item = it.value()
            idx = tree.indexFromItem(item, 0)
            badges.append([item.text(0), SeverityBadge.needed(item.text(0), tree.fontMetrics()),
                           tree.visualRect(idx).width()])
            it += 1
        out["badges"] = badges
        lfm = QFontMetrics(tv.labels.font_head)
        out["rank_headers"] = [[r.label, lfm.horizontalAdvance("\u25be " + r.label) + 8, tv.labels.width()]
                               for r in tv.layout_model.rows if r.kind == "header"]
        # every finding that selects an event: is the event inside the lanes' viewport?
        shown = []

        def flat(fs):
            for f in fs:
                yield f
                yield from flat(f.children)
        for f in flat(w.findings.findings):
            w.session.select(None)
            w.findings.choose_finding(f)
            app.processEvents()
            i = tv.selected
            if i is None:
                continue
            r = tv.event_rect(i)
            sticky = tv.labels.sticky_header()
            shown.append({"rule": f.rule, "event": w.trace.name_of(i), "rect": [r.left(), r.top(), r.right(), r.bottom()],
                          "lanes": lanes_rect(tv), "sticky_rank": sticky.rank if sticky is not None else None,
                          "sticky_bottom": tv.labels.mapTo(tv, QPoint(0, int(tv.labels._sticky_bottom()))).y()
                          if sticky is not None else None, "label_offsets": misaligned(tv),
                          "rank": w.trace.lanes[int(w.trace.columns["lane"][i])].rank})
        out["findings"] = shown
        late = next(f for f in flat(w.findings.findings) if f.rule == "straggler")
        w.findings.choose_finding(late)  # the late rank's event selected for what follows
        out["details_open_after"] = w.details_dock.isVisible()
        QTimer.singleShot(0, keys)

    def keys():
        tv = w.timeline
        w.activateWindow()
        # Ctrl+F from the findings table
        w.findings.tree.setFocus()
        app.processEvents()
        QTest.keyClick(w.findings.tree, Qt.Key_F, Qt.ControlModifier)
        app.processEvents()
        out["ctrl_f_focus"] = QApplication.focusWidget() is tv.search
        # / from the lane labels' side of the timeline (the timeline holds focus)
        tv.setFocus()
        QTest.keyClick(tv, Qt.Key_Slash)
        out["slash_focus"] = QApplication.focusWidget() is tv.search
        # M: typed in place; Esc drops it
        sel = tv.selected
        before = len(w.doc.annotations)
        tv.setFocus()
        QTest.keyClick(tv, Qt.Key_M)
        out["m_modal"] = QApplication.activeModalWidget() is not None
        out["m_editor_focus"] = QApplication.focusWidget() is tv.note_edit and tv.note_edit.isVisible()
        QTest.keyClicks(tv.note_edit, "rank 1 sleeps here")
        QTest.keyClick(tv.note_edit, Qt.Key_Return)
        out["m_added"] = [a.text for a in w.doc.annotations[before:]]
        out["m_editor_hidden"] = not tv.note_edit.isVisible()
        tv.setFocus()
        QTest.keyClick(tv, Qt.Key_M)
        QTest.keyClicks(tv.note_edit, "dropped")
        QTest.keyClick(tv.note_edit, Qt.Key_Escape)
        out["esc_count"] = len(w.doc.annotations) - before
        # a click on empty lanes that brings focus back keeps the selection; the next one clears it
        tv.search.setFocus()
        app.processEvents()
        x0, x1 = tv.vb.viewRange()[0]
        y0, y1 = tv.vb.viewRange()[1]
        empty = None
        for k in range(1, 40):
            for j in range(1, 20):
                x, y = x0 + (x1 - x0) * k / 40, y0 + (y1 - y0) * j / 20
                if tv.item.pick(x, y, tv._tol()) is None and tv.layout_model.row_at(y) is not None:
                    empty = (x, y)
                    break
            if empty:
                break
        out["keeps_sel"] = None
        if empty is not None:
            import pyqtgraph as pg
            p = tv.vb.mapViewToDevice(pg.Point(*empty)).toPoint()
            vp = tv.plot.viewport()
            QTest.mouseClick(vp, Qt.LeftButton, Qt.NoModifier, p)
            app.processEvents()
            out["keeps_sel"] = tv.selected == sel and sel is not None
            out["focus_back"] = QApplication.focusWidget() is tv
            QTest.mouseClick(vp, Qt.LeftButton, Qt.NoModifier, p)
            app.processEvents()
            out["second_click_clears"] = tv.selected is None
        out["sel"] = sel
        print("RESULT " + json.dumps(out), flush=True)
        app.quit()

    def analysed(_a):
        QTimer.singleShot(0, lambda: QTimer.singleShot(0, layout))  # the docks sized on the next turns
    w.analysisReady.connect(analysed)
    w.loader.failed.connect(lambda m: (print("failed", m), app.exit(3)))
    w.open_paths([sys.argv[1]])
    sys.exit(app.exec())

if __name__ == "__main__":
    main()
'''


def _start_xvfb(screen: str):
    """A private X server; -displayfd says its display once it accepts clients (no waiting)."""
    r, wfd = os.pipe()
    proc = subprocess.Popen(
        ["Xvfb", "-displayfd", str(wfd), "-screen", "0", screen, "-nolisten", "tcp"],
        pass_fds=(wfd,),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    os.close(wfd)
    with os.fdopen(r) as f:
        num = f.readline().strip()
    return proc, f":{num}"


@pytest.fixture(scope="module")
def laptop(tmp_path_factory):
    if shutil.which("Xvfb") is None:
        pytest.skip("Xvfb is not installed (.ci/run installs it)")
    tmp = tmp_path_factory.mktemp("laptop")
    proc, display = _start_xvfb("1366x768x24")
    try:
        script = tmp / "laptop.py"
        script.write_text(SCRIPT)
        env = dict(
            os.environ, DISPLAY=display, QT_QPA_PLATFORM="xcb", PYTHONPATH=ROOT, XDG_CONFIG_HOME=str(tmp / "cfg")
        )
        data = tmp / "ddp"  # a copy: the window saves its notes beside the trace
        shutil.copytree(os.path.join(SAMPLES, "ddp"), data)
        p = subprocess.run(
            [sys.executable, str(script), str(data), str(tmp / "s.ini")], capture_output=True, text=True, env=env
        )
    finally:
        proc.terminate()
        proc.wait()
    assert p.returncode == 0, p.stdout + p.stderr
    line = next(x for x in p.stdout.splitlines() if x.startswith("RESULT "))
    return json.loads(line[len("RESULT ") :])


def test_the_lanes_keep_most_of_a_laptop_screen(laptop):
    w, h = laptop["window"]
    assert h <= 768 and w <= 1366
    assert laptop["lanes_h"] / h >= 0.55, laptop
    assert not laptop["details_open_at_start"] and laptop["details_open_after"]  # opens on a selection


def test_a_finding_shows_its_event_inside_the_viewport(laptop):
    shown = laptop["findings"]
    # the late rank's findings select its host op (rank 1 in step 3 of samples/ddp)
    assert any(s["rule"] == "straggler" and s["rank"] == 1 for s in shown), shown
    for s in shown:
        if s["rule"] == "low_gpu_utilization":
            continue  # shows its GPU's idle lanes, the host event selected below them (test_finding_scroll)
        x0, y0, x1, y1 = s["rect"]
        lx0, ly0, lx1, ly1 = s["lanes"]
        assert ly0 <= y0 and y1 <= ly1 + 1, s  # vertically inside the lanes
        assert x1 >= lx0 and x0 <= lx1, s  # and (partly, when longer than the view) in the time range
        if s["sticky_rank"] is not None:  # its rank named at the top, the event below that header
            assert s["sticky_rank"] == s["rank"] and y0 >= s["sticky_bottom"] - 1, s


def test_each_label_is_beside_its_lane(laptop):
    """Every row's name is drawn level with its lane, at open and after each finding scrolled the
    lanes (the labels sit in a splitter: a label column placed by the timeline's own coordinates
    put every name a row below its lane)."""
    views = [laptop["label_offsets"]] + [s["label_offsets"] for s in laptop["findings"]]
    assert laptop["label_offsets"], "no row in view"
    for rows in views:
        for label, off in rows:
            assert abs(off) <= 1, (label, off)


def test_no_header_or_severity_is_elided(laptop):
    for text, need, size in laptop["headers"]:
        assert need + 8 <= size, (text, need, size)
    assert laptop["badges"] and {b[0] for b in laptop["badges"]} >= {"high", "medium"}
    for text, need, width in laptop["badges"]:
        assert need <= width, (text, need, width)
    for label, need, width in laptop["rank_headers"]:
        assert need <= width, (label, need, width)


def test_keys_search_and_inline_notes(laptop):
    assert laptop["ctrl_f_focus"] and laptop["slash_focus"]
    assert not laptop["m_modal"] and laptop["m_editor_focus"]
    assert laptop["m_added"] == ["rank 1 sleeps here"] and laptop["m_editor_hidden"]
    assert laptop["esc_count"] == 1  # Esc dropped the second note


def test_a_click_that_brings_focus_back_keeps_the_selection(laptop):
    assert laptop["sel"] is not None
    assert laptop["keeps_sel"] and laptop["focus_back"], {k: laptop.get(k) for k in ("sel", "keeps_sel", "focus_back")}
    assert laptop["second_click_clears"]


@pytest.fixture(scope="module")
def eight_ranks(tmp_path_factory):
    from make_hosts import make

    out = tmp_path_factory.mktemp("eight")
    make(
        trace_path("kineto", "ddp", "ddp_rank0.json.gz"),
        str(out),
        ranks=8,
        hosts=2,
        offsets_us=[0, 0],
        late_rank=5,
        late_ms=25,
    )
    return str(out)


def test_collapse_and_expand_all_ranks(qtbot, tmp_path, eight_ranks):
    w = make_window(qtbot, tmp_path, block_analysis=True, size=(1600, 1000))
    assert w.open_paths([eight_ranks], block=True)
    ranks = {r.rank for r in w.trace.ranks}
    lm = w.timeline.layout_model
    assert lm.state.collapsed_ranks == set()  # a large window: every rank open
    actions = {a.text(): a for a in w.menuBar().actions()[2].menu().actions()}
    actions["Collapse all ranks"].trigger()
    assert lm.state.collapsed_ranks == ranks
    assert all(r.kind == "header" for r in lm.rows) and len(lm.rows) == len(ranks)
    assert w.session.view.lanes.collapsed_ranks == ranks  # the session's view state, saved with notes
    actions["Expand all ranks"].trigger()
    assert lm.state.collapsed_ranks == set() and any(r.kind == "lane" for r in lm.rows)


def test_a_small_window_opens_eight_ranks_compact_with_the_late_rank_open(qtbot, tmp_path, eight_ranks):
    w = make_window(qtbot, tmp_path, block_analysis=True, size=(1366, 728))
    assert w.open_paths([eight_ranks], block=True)
    # the highest-ranked finding that names a late rank: the planted one, rank 5
    late = next(
        f.metrics["late_rank"] for f in w.session.analysis_ready.findings if f.metrics.get("late_rank") is not None
    )
    assert late == 5
    want = {5}
    lm = w.timeline.layout_model
    assert lm.state.collapsed_ranks == {r.rank for r in w.trace.ranks} - want
    # the open rank's lanes are on the first screen
    y0, y1 = w.timeline.vb.viewRange()[1]
    assert any(r.kind == "lane" and r.rank in want and r.y < y1 for r in lm.rows)


def test_search_reveals_its_match_and_long_lane_names_are_whole_in_tooltips(qtbot, tmp_path):
    from PySide6.QtCore import QEvent, QPoint
    from PySide6.QtGui import QHelpEvent
    from PySide6.QtWidgets import QApplication, QToolTip

    w = make_window(qtbot, tmp_path, block_analysis=True, size=(1366, 728))
    data = tmp_path / "ddp"  # a copy: the view is saved beside the trace
    shutil.copytree(os.path.join(SAMPLES, "ddp"), data)
    assert w.open_paths([str(data)], block=True)
    tv = w.timeline
    # the planted sleep, found by name: its rectangle inside the lanes, under its rank's header
    assert tv.run_search("function sleep") >= 1
    i = int(tv.matches[tv.match_pos])
    rank = w.trace.lanes[int(w.trace.columns["lane"][i])].rank
    r = tv.event_rect(i)
    vb = tv.vb.mapRectToDevice(tv.vb.rect())
    top = tv.plot.viewport().mapTo(tv, vb.topLeft().toPoint()).y()
    assert top <= r.top() and r.bottom() <= top + vb.height() + 1, (r, top, vb.height())
    sticky = tv.labels.sticky_header()
    bottom = tv.labels.mapTo(tv, QPoint(0, int(tv.labels._sticky_bottom()))).y()
    assert sticky is None or (sticky.rank == rank and r.top() >= bottom - 1)
    # its details: the field column no wider than its names need, every value whole in its tooltip
    name = w.trace.name_of(i)
    d = w.details
    assert d.topLevelItem(0).text(1) == name and d.topLevelItem(0).toolTip(1) == name
    fm, vw = d.fontMetrics(), d.viewport().width()
    word = max(fm.horizontalAdvance(x) + indent for x, indent in d.field_words())
    assert d.columnWidth(0) <= max(110, int(vw * 0.42), min(word + 14, int(vw * 0.6))) + 1
    # choosing a finding never scrolls the table sideways (the severity stays in view)
    w.findings.set_findings(w.session.analysis_ready.findings)
    w.findings.choose(len(w.findings.findings) - 1)
    assert w.findings.tree.horizontalScrollBar().value() == 0
    # the label column: sized to its labels at open, narrower by dragging; then names elide in
    # the middle and the tooltip holds the whole name
    assert tv.labels.width() >= min(tv.labels.wanted_width(), tv.width() // 4) - 4
    tv.split.setSizes([130, tv.width() - 130])
    tv.split.splitterMoved.emit(130, 1)  # as a drag says it: kept through the window's resizes
    QApplication.processEvents()
    fm = tv.labels.fontMetrics()
    lm = tv.layout_model
    y0, y1 = tv.labels.y_range
    row = next(
        x
        for x in lm.visible_rows(y0, y1)
        if x.kind == "lane" and x.y >= y0 and fm.horizontalAdvance(x.label) > tv.labels.width()
    )
    y = int(tv.labels._to_dev(row.y + 0.5))
    pos = QPoint(10, y)
    ev = QHelpEvent(QEvent.ToolTip, pos, tv.labels.mapToGlobal(pos))
    QApplication.sendEvent(tv.labels, ev)
    assert QToolTip.text() == row.label


def test_dock_sizes_are_remembered_per_screen(qtbot, tmp_path):
    from PySide6.QtCore import Qt
    from PySide6.QtWidgets import QApplication

    a = make_window(qtbot, tmp_path, block_analysis=True, size=(1366, 728))
    QApplication.processEvents()
    default_h = a.findings_dock.height()
    a.resizeDocks([a.findings_dock], [default_h + 120], Qt.Vertical)
    QApplication.processEvents()
    chosen = a.findings_dock.height()
    assert chosen > default_h + 60
    a.close()  # saves the geometry and the docks for this screen
    b = make_window(qtbot, tmp_path, block_analysis=True)  # the same settings file
    b.show()
    QApplication.processEvents()
    assert b.docks_restored and abs(b.findings_dock.height() - chosen) <= 4, (b.findings_dock.height(), chosen)


def test_a_window_made_taller_takes_the_large_layout(qtbot, tmp_path):
    from PySide6.QtWidgets import QApplication

    w = make_window(qtbot, tmp_path, block_analysis=True, size=(1366, 728))
    assert w.open_paths([trace_path("kineto", "memory_pressure.json.gz")], block=True)
    QApplication.processEvents()
    tabbed = w.tabifiedDockWidgets(w.findings_dock)
    assert w.memory_dock in tabbed and not w.timeline.plot.getAxis("bottom").isVisible()
    import re

    peak = re.search(r"peak ([\d.]+ GB)", w.memory.info.text()).group(1)  # what the panel says
    assert w.memory_dock.windowTitle() == f"Memory · peak {peak}"  # folded to its tab, it says its peak
    w.resize(1600, 1100)
    QApplication.processEvents()
    assert w.memory_dock not in w.tabifiedDockWidgets(w.findings_dock)  # a strip under the timeline
    assert w.memory_dock.isVisible() and w.timeline.plot.getAxis("bottom").isVisible()
    assert w.memory_dock.windowTitle() == "Memory"


def test_a_note_is_edited_in_place_in_the_list(qtbot, tmp_path):
    from PySide6.QtCore import Qt
    from PySide6.QtWidgets import QApplication, QLineEdit

    w = make_window(qtbot, tmp_path, block_analysis=True, size=(1366, 728))
    data = tmp_path / "ddp"
    shutil.copytree(os.path.join(SAMPLES, "ddp"), data)
    assert w.open_paths([str(data)], block=True)
    w.mark(text="first words")
    panel = w.annotations
    item = panel.tree.topLevelItem(0)
    panel.tree.setCurrentItem(item)
    panel._edit()  # the Edit button: an editor in the row, no dialog
    QApplication.processEvents()
    editor = panel.tree.findChild(QLineEdit)
    assert editor is not None and editor.isVisible() and QApplication.activeModalWidget() is None
    editor.selectAll()
    qtbot.keyClicks(editor, "second words")
    qtbot.keyClick(editor, Qt.Key_Return)
    QApplication.processEvents()  # the delegate commits on the next turn of the event loop
    assert w.doc.annotations[0].text == "second words"
    assert w.timeline.item.annotations[0].text == "second words"


def test_the_sql_tab_gets_room_and_findings_give_it_back(qtbot, tmp_path):
    from PySide6.QtWidgets import QApplication

    w = make_window(qtbot, tmp_path, block_analysis=True, size=(1366, 728))
    QApplication.processEvents()
    before = w.findings_dock.height()
    sql = w.queries.sql_dock
    sql.raise_()
    QApplication.processEvents()
    assert sql.height() >= 0.35 * w.height() > before, (sql.height(), before, w.height())
    w.findings_dock.raise_()
    QApplication.processEvents()
    assert abs(w.findings_dock.height() - before) <= 4
