"""The window's first frame of a session (issue 28): what it does not wait for. In a real process
(offscreen), samples/ddp opened the way `gpuviewer PATH` opens it: when the timeline paints the
session for the first time, DuckDB and pandas are not imported (the SQL tab makes its runner at
the first query) and neither the analysis nor the statistics have started (they start after that
frame); then both finish, and the SQL tab answers a query."""

import json
import os
import subprocess
import sys

from conftest import ROOT, SAMPLES

SCRIPT = r"""
import json, os, sys, threading
from PySide6.QtCore import QEvent, QObject, QSettings, QTimer
from gpuviewer.app.gui import _app
app = _app()
from gpuviewer.widgets.main_window import MainWindow
w = MainWindow(QSettings(sys.argv[2], QSettings.IniFormat))
w.quiet_errors = True
w.show()
out = {}

class First(QObject):
    def eventFilter(self, obj, ev):
        if ev.type() == QEvent.Paint and w.trace is not None and "first" not in out:
            out["first"] = {"modules": sorted(m for m in ("duckdb", "pandas") if m in sys.modules),
                            "analysis": w.session.analysis_ready is not None or "analysis_started" in out,
                            "threads": sorted(t.name for t in threading.enumerate()),
                            "stats": w.queries.stats.full is not None}
        return False

first = First()
w.timeline.plot.viewport().installEventFilter(first)
# the analysis thread says so as it starts
w.controller.analysisBusy.connect(lambda msg: out.setdefault("analysis_started", msg))

def later():
    stats = w.queries.stats
    if w.session is None or w.session.analysis_ready is None or stats.full is None:
        QTimer.singleShot(50, later)  # the analysis and statistics threads are still at work
        return
    sql = w.queries.sql
    sql.editor.setPlainText("select count(*) as n from slices")
    sql.run_query()

    def answered():
        if sql.table.frame is None or not len(sql.table.frame.columns):
            QTimer.singleShot(50, answered)
            return
        out["after"] = {"findings": len(w.findings.findings), "stats_rows": len(stats.full),
                        "sql": int(sql.table.frame.iat[0, 0]), "events": int(w.trace.n_events)}
        print(json.dumps(out))
        app.quit()
    answered()

w.controller.loaded.connect(lambda *a: QTimer.singleShot(0, later))
w.loader.failed.connect(lambda m: (print("failed", m), app.exit(3)))
w.open_paths([sys.argv[1]])
sys.exit(app.exec())
"""


def test_first_frame_waits_for_no_query_engine_analysis_or_statistics(tmp_path):
    env = dict(
        os.environ,
        QT_QPA_PLATFORM="offscreen",
        PYTHONPATH=ROOT,
        GPUVIEWER_CACHE_DIR=str(tmp_path / "cache"),
        XDG_CONFIG_HOME=str(tmp_path / "cfg"),
    )
    p = subprocess.run(
        [sys.executable, "-c", SCRIPT, os.path.join(SAMPLES, "ddp"), str(tmp_path / "s.ini")],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    assert p.returncode == 0, p.stdout + p.stderr
    got = json.loads(p.stdout.strip().splitlines()[-1])
    first, after = got["first"], got["after"]
    assert first["modules"] == [], first
    assert not first["analysis"] and not first["stats"], first
    assert "gpuviewer-query" not in first["threads"], first
    # the deferred work still happens, and SQL answers from the session's own slices
    assert after["findings"] > 0 and after["stats_rows"] > 0
    assert 0 < after["sql"] <= after["events"]
