"""What a new user sees first: on a 1366x768 laptop (a real xcb window under Xvfb) the window
fits the screen, the status bar shows, and a GPU lane of every rank of a 2-rank session is on
screen; the keyboard help lists every shortcut; toolbar controls explain themselves; opening a
big file shows progress in MB and events with Cancel at once."""

import json
import os
import re
import shutil
import subprocess
import sys

import pytest
from conftest import ROOT, SAMPLES, make_window, trace_path
from procs import children_of, ended
from test_xvfb_smoke import xvfb

LAPTOP = r"""
import json, sys
from PySide6.QtWidgets import QApplication
from PySide6.QtCore import QTimer
app = QApplication(sys.argv[:1])
from gpuviewer.widgets.main_window import MainWindow
w = MainWindow()
w.show()
def check():
    tv = w.timeline
    (x0, x1), (y0, y1) = tv.vb.viewRange()
    avail = w.screen().availableGeometry()
    fg = w.frameGeometry()
    rows = {}
    for r in tv.layout_model.rows:
        if r.kind == "lane" and w.trace.lanes[r.lane].kind in ("gpu", "comm"):
            rows.setdefault(w.trace.lanes[r.lane].rank, []).append([r.y, r.y + r.h])
    sb = w.statusBar()
    print(json.dumps({"screen": [avail.x(), avail.y(), avail.width(), avail.height()],
                      "frame": [fg.x(), fg.y(), fg.width(), fg.height()], "view_rows": [y0, y1],
                      "gpu_rows": rows, "status_bottom": sb.mapTo(w, sb.rect().bottomLeft()).y(),
                      "height": w.height(), "status_visible": sb.isVisible()}))
    app.quit()
w.loader.loaded.connect(lambda *a: QTimer.singleShot(500, check))
w.loader.failed.connect(lambda m: (print("failed", m), app.exit(3)))
w.open_paths([sys.argv[1]])
QTimer.singleShot(90000, lambda: app.exit(4))
sys.exit(app.exec())
"""


@pytest.mark.skipif(shutil.which("Xvfb") is None, reason="Xvfb is not installed (.ci/run installs it)")
def test_a_laptop_screen_shows_every_rank_gpu_and_the_status_bar(tmp_path):
    with xvfb(40, "1366x768x24") as display:
        env = dict(
            os.environ,
            DISPLAY=display,
            QT_QPA_PLATFORM="xcb",
            PYTHONPATH=ROOT,
            GPUVIEWER_CACHE_DIR=str(tmp_path / "cache"),
            XDG_CONFIG_HOME=str(tmp_path / "cfg"),
        )
        p = subprocess.run(
            [sys.executable, "-c", LAPTOP, os.path.join(SAMPLES, "ddp")],
            capture_output=True,
            text=True,
            env=env,
            timeout=180,
        )
    assert p.returncode == 0, p.stdout + p.stderr
    got = json.loads(p.stdout.strip().splitlines()[-1])
    sx, sy, sw, sh = got["screen"]
    fx, fy, fw, fh = got["frame"]
    assert sx <= fx and sy <= fy and fx + fw <= sx + sw and fy + fh <= sy + sh, got  # fits the screen
    assert got["status_visible"] and got["status_bottom"] <= got["height"]
    y0, y1 = got["view_rows"]
    assert set(got["gpu_rows"]) == {"0", "1"}
    for rank, spans in got["gpu_rows"].items():
        # at least one GPU lane of the rank lies inside the rows shown
        assert any(a >= y0 and b <= y1 for a, b in spans), (rank, spans, y0, y1)


def test_keyboard_help_lists_every_shortcut_and_toolbars_have_tooltips(qtbot, tmp_path):
    from PySide6.QtGui import QAction, QKeySequence, QShortcut
    from PySide6.QtWidgets import QToolBar

    from gpuviewer.widgets.shortcuts import collect

    w = make_window(qtbot, tmp_path, size=(1400, 900))
    listed = {k for k, _ in collect(w)}
    keys = [s.toString(QKeySequence.NativeText) for a in w.findChildren(QAction) for s in a.shortcuts()]
    keys += [s.key().toString(QKeySequence.NativeText) for s in w.findChildren(QShortcut)]
    assert keys and set(keys) <= listed
    assert all(v for _k, v in collect(w))  # each says what it does
    for key in ("W / S", "A / D", "M / Shift+M", "?"):
        assert key in listed
    for tb in w.findChildren(QToolBar):
        for a in tb.actions():
            if a.isSeparator():
                continue
            widget = tb.widgetForAction(a)
            tip = a.toolTip() if widget is None or not widget.toolTip() else widget.toolTip()
            assert tip and tip != a.text(), (a.text(), tip)


def test_opening_a_big_file_shows_progress_in_mb_and_events_with_cancel(qtbot, tmp_path, monkeypatch):
    monkeypatch.setenv("GPUVIEWER_CACHE_DIR", str(tmp_path / "cache"))  # a real read, not a cache hit
    w = make_window(qtbot, tmp_path, size=(1400, 900))
    msgs = []
    workers: set[int] = set()

    def seen(_f, m):
        msgs.append(m)
        if w.loader.proc is not None:  # the reader's decode workers, once they exist
            workers.update(children_of(w.loader.proc.pid))

    w.loader.progress.connect(seen)
    w.open_paths([trace_path("kineto", "launch_bound_big.json.gz")])
    assert w.cancel_btn.isVisibleTo(w) and w.progress.isVisibleTo(w)  # at once, before any progress
    qtbot.waitUntil(lambda: bool(workers) and any("MB" in m and "events" in m for m in msgs), timeout=60_000)
    w.cancel_load()
    assert not w.cancel_btn.isVisibleTo(w) and w.trace is None
    # Cancel ends the reader process at once, which cannot shut its pool down: the decode workers
    # it forked end with it (they waited on their queue for ever before, each holding its memory)
    assert all(ended(p) for p in workers), workers


def test_nsys_ddp_opens_on_its_steps_not_the_whole_capture(qtbot, tmp_path):
    import sqlite3

    path = trace_path("nsys", "nsys_ddp.sqlite")
    r = subprocess.run(
        [sys.executable, "-m", "gpuviewer", "info", "--json", path],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=300,
    )
    assert r.returncode == 0, r.stderr
    info = json.loads(r.stdout)
    v0, v1 = info["view"]["start_ns"], info["view"]["end_ns"]
    # the steps from the export itself: NVTX ranges named "step N", on the session's clock
    with sqlite3.connect(f"file:{path}?mode=ro&immutable=1", uri=True) as db:
        rows = db.execute(
            "SELECT e.start, e.end FROM NVTX_EVENTS e LEFT JOIN StringIds s ON s.id = e.textId "
            "WHERE coalesce(e.text, s.value) GLOB 'step [0-9]*'"
        ).fetchall()
        utc = db.execute("SELECT * FROM TARGET_INFO_SESSION_START_TIME").fetchone()
    assert rows
    # step 0 is warm-up (513 ms against ~20 ms steps): the view opens on the steady steps after it
    rows = sorted(rows)
    assert rows[0][1] - rows[0][0] > 10 * (rows[2][1] - rows[2][0])
    s0, s1 = min(a for a, _ in rows[2:]), max(b for _, b in rows)
    if utc is not None and v0 > 10**17:  # the session keeps Unix-epoch ns where the export has them
        s0, s1 = s0 + int(utc[0]), s1 + int(utc[0])
    span = s1 - s0
    assert s0 - 0.05 * span <= v0 <= s0 and s1 <= v1 <= s1 + 0.3 * span, (v0, v1, s0, s1)
    capture = max(r_["end_ns"] for r_ in info["ranks"]) - min(r_["start_ns"] for r_ in info["ranks"])
    assert (v1 - v0) < 0.25 * capture  # the steps are a sliver of the 10 s capture
    w = make_window(qtbot, tmp_path, size=(1400, 900))
    assert w.open_paths([path], block=True)
    t0, t1 = w.timeline.visible_range()
    assert abs(t0 - v0) <= 2 and abs(t1 - v1) <= 2  # the window opens on the same range
    said = w.statusBar().currentMessage()
    assert "warm-up step 0" in said
    qtbot.waitUntil(lambda: w.analysis is not None, timeout=120_000)  # settled: nothing moves the view after the key
    from PySide6.QtCore import Qt

    qtbot.keyClick(w.timeline, Qt.Key_Home, Qt.ShiftModifier)  # the warm-up, one key away
    a0, a1 = w.timeline.visible_range()
    assert a0 <= min(a for a, _ in rows) + (0 if utc is None or v0 < 10**17 else int(utc[0])) and a1 >= t1 - 2
    # the status line's figure is the time left of the view, which the key shows (not the warm-up
    # step's own length, which the findings give in the job's step time)
    m = re.search(r"^Shift\+Home shows the first ([\d,]+) ms, with (most of )?warm-up step 0, left of the view", said)
    hidden = float(m[1].replace(",", ""))
    # 'most of' where a rank's warm-up step (the two earliest 'step N' ranges) ends inside the view
    off = 0 if utc is None or v0 < 10**17 else int(utc[0])
    assert bool(m[2]) == any(b + off > t0 for _, b in rows[:2]), (said, [b + off - t0 for _, b in rows[:2]])
    assert abs(hidden - (t0 - a0) / 1e6) <= 1.0, (said, (t0 - a0) / 1e6)
