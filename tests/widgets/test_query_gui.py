"""The SQL and Statistics tabs in a real (offscreen) window: queries off the UI thread, errors
shown in the tab, Cancel, rows that select their event, CSV export."""

import csv

import numpy as np
import pandas as pd
import pytest
from conftest import make_window, trace_path


@pytest.fixture
def win(qtbot, tmp_path):
    w = make_window(qtbot, tmp_path, size=(1400, 900))
    assert w.open_paths([trace_path("kineto", "ddp_clean")], block=True)
    w.run_analysis(block=True)
    return w


def _run(qtbot, panel, sql):
    panel.editor.setPlainText(sql)
    panel.run_query()
    qtbot.waitUntil(lambda: panel.run_btn.isEnabled(), timeout=60000)


def test_sql_tab_runs_shows_errors_and_selects_events(qtbot, win):
    panel = win.queries.sql
    c = win.trace.columns
    longest = int(np.argmax(np.where(np.isin(c["cat"], [1, 2]), c["dur"], -1)))  # KERNEL, COMM_KERNEL
    _run(qtbot, panel, "SELECT id, name, dur FROM kernels ORDER BY dur DESC LIMIT 5")
    df = panel.table.frame
    assert len(df) == 5 and int(df["id"][0]) == longest
    assert "5 rows" in panel.status.text()
    panel.table._row(panel.table.model().index(0, 0))
    assert win.timeline.selected == longest
    # a row with a rank and a start time (no id): the event that starts there on that rank
    r = int(win.trace.lanes[int(c["lane"][longest])].rank)
    _run(qtbot, panel, f"SELECT rank, start FROM kernels WHERE id = {longest}")
    win.timeline.select(None)
    panel.table._row(panel.table.model().index(0, 0))
    assert win.timeline.selected is not None
    assert int(c["start"][win.timeline.selected]) == int(c["start"][longest])
    assert int(win.trace.lanes[int(c["lane"][win.timeline.selected])].rank) == r
    # a bad query: DuckDB's words in the tab, the window goes on
    _run(qtbot, panel, "SELECT nope FROM kernels")
    assert "nope" in panel.status.text() and panel.table.frame is not None
    _run(qtbot, panel, "SELECT count(*) AS n FROM slices")
    assert int(panel.table.frame["n"][0]) == len(win.trace)
    assert panel.history_box.count() == 4


def test_sql_cancel_stops_a_long_query(qtbot, win):
    panel = win.queries.sql
    panel.editor.setPlainText("SELECT count(*) FROM slices a, slices b WHERE a.dur + b.dur = 3")
    panel.run_query()
    assert panel.cancel_btn.isEnabled() and not panel.run_btn.isEnabled()
    qtbot.wait(300)
    panel.cancel()
    qtbot.waitUntil(lambda: panel.run_btn.isEnabled(), timeout=60000)
    assert "cancelled" in panel.status.text()
    _run(qtbot, panel, "SELECT 41 + 1 AS x")
    assert int(panel.table.frame["x"][0]) == 42


def test_statistics_tab_per_rank_filter_sort_export(qtbot, win, tmp_path):
    panel = win.queries.stats
    qtbot.waitUntil(lambda: panel.full is not None, timeout=60000)
    every = panel.full
    k = win.trace.columns
    kern = np.isin(k["cat"], [1, 2])
    assert int(every["instances"].sum()) == int(kern.sum())
    panel.rank.setCurrentIndex(2)  # rank 1
    qtbot.waitUntil(lambda: "rank 1" in panel.status.text(), timeout=60000)
    lane_rank = np.array([ln.rank for ln in win.trace.lanes])
    assert int(panel.full["instances"].sum()) == int((kern & (lane_rank[k["lane"]] == 1)).sum())
    panel.filter.setText("nccl")
    shown = panel.table.frame
    assert len(shown) >= 1 and shown["name"].astype(str).str.lower().str.contains("nccl").all()
    # clicking a row: that name's longest instance on rank 1
    name = str(shown["name"].iloc[0])
    nid = win.trace.names.index(name)
    m = (k["name"] == nid) & (lane_rank[k["lane"]] == 1) & kern
    want = int(np.flatnonzero(m)[np.argmax(k["dur"][m])])
    panel.table._row(panel.table.model().index(0, 0))
    assert win.timeline.selected == want
    panel.filter.setText("")
    from PySide6.QtCore import Qt

    panel.table.sortByColumn(list(panel.table.frame.columns).index("instances"), Qt.AscendingOrder)
    counts = list(panel.table.frame["instances"])
    assert counts == sorted(counts)
    out = tmp_path / "kern.csv"
    panel.table.export_csv(str(out))
    back = pd.read_csv(out)
    assert list(back["instances"]) == counts and sorted(p.name for p in tmp_path.iterdir()) == ["kern.csv", "s.ini"]
    with open(out, newline="") as f:
        assert next(csv.reader(f))[0] == "name"
