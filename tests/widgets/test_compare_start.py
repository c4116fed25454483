"""Compare from the main window (issue 28, item 9 and the Compare half of item 4) on real traces:
the window opens at once and reads the other run itself with a progress bar and Cancel; runs are
named after their folder or their files' common prefix (not B's first file); a folder is
accepted; Cancel stops the worker and closes the window; on a real 1366x768 screen (xcb under
Xvfb) the window fits inside the screen."""

import glob
import json
import os
import shutil
import subprocess
import sys

import pytest
from conftest import ROOT, make_window, trace_path
from PySide6.QtCore import Qt
from test_laptop_window import _start_xvfb

from gpuviewer.session import Session


@pytest.fixture(scope="module")
def clean():
    return Session.open(trace_path("kineto", "ddp_clean"))


def _wait(qtbot, cw):
    qtbot.waitUntil(lambda: cw.comparison is not None or cw.error is not None, timeout=180_000)
    assert cw.error is None, cw.error


def test_compare_with_files_reads_them_with_progress_and_names_the_run(qtbot, tmp_path, clean):
    from gpuviewer.widgets.compare_actions import compare_with

    w = make_window(qtbot, tmp_path, block_analysis=True, size=(1366, 728))
    w.controller.set_session(clean)
    files = sorted(glob.glob(os.path.join(trace_path("kineto", "ddp_nop2p"), "*.json.gz")))
    assert len(files) == 2
    cw = compare_with(w, files)  # the files of run B, as File > Compare with… picks them
    seen = []
    cw._bridge.progress.connect(lambda f, m: seen.append((f, m, cw.bar.value())))
    # at once: the window, what it compares, a bar and Cancel
    assert cw.isVisible() and cw.bar.isVisible() and cw.cancel_btn.isVisible()
    assert cw.windowTitle() == "Compare: ddp_clean vs ddp_nop2p"  # the common prefix, not ddp_nop2p_rank0.json.gz
    _wait(qtbot, cw)
    fracs = [f for f, _m, _v in seen]
    assert fracs == sorted(fracs) and fracs[-1] == 1.0 and len(seen) >= 5
    assert any(m.startswith("reading B") for _f, m, _v in seen) and any("comparing" in m for _f, m, _v in seen)
    assert not cw.bar.isVisible() and not cw.cancel_btn.isVisible() and cw.body.isVisible()
    assert cw.sessions[1].paths == files and len(cw.sessions[1].trace.ranks) == 2
    assert "ddp_nop2p" in cw.titles["b"].text() and "rank0" not in cw.titles["b"].text()
    cw.close()


def test_compare_with_a_folder(qtbot, tmp_path, clean):
    from gpuviewer.widgets.compare_actions import compare_with

    w = make_window(qtbot, tmp_path, block_analysis=True, size=(1366, 728))
    w.controller.set_session(clean)
    cw = compare_with(w, [trace_path("kineto", "ddp_nop2p")])
    _wait(qtbot, cw)
    assert cw.names == ("ddp_clean", "ddp_nop2p")
    assert cw.tabs.tables["coll"].frame.iloc[0]["collective"] == "AllReduce"
    cw.close()


def test_same_named_runs_are_told_apart_by_their_folder(tmp_path):
    from gpuviewer.session.compare import run_names

    for run in ("before", "after"):
        shutil.copytree(trace_path("kineto", "ddp_clean"), tmp_path / run / "ddp")
    a, b = run_names([str(tmp_path / "before" / "ddp")], [str(tmp_path / "after" / "ddp")])
    assert (a, b) == ("before/ddp", "after/ddp")


def test_cancel_stops_the_comparison_and_closes_the_window(qtbot, tmp_path, clean, monkeypatch):
    monkeypatch.setenv("GPUVIEWER_CACHE_DIR", str(tmp_path / "cache"))  # B really read, not a cache hit
    from gpuviewer.widgets.compare_window import open_compare

    cw = open_compare(None, clean, [trace_path("kineto", "ddp_long")])
    qtbot.addWidget(cw)
    assert cw.cancel_btn.isVisible()
    qtbot.mouseClick(cw.cancel_btn, Qt.LeftButton)
    assert cw.cancelled and not cw.isVisible()
    qtbot.waitUntil(lambda: not cw._thread.is_alive(), timeout=180_000)  # the worker ends at its next stage
    assert cw.comparison is None and cw.error is None


SCRIPT = r"""
import json, sys
from PySide6.QtWidgets import QApplication
app = QApplication(sys.argv[:1])
assert app.platformName() == "xcb", app.platformName()
from gpuviewer.session import Session
from gpuviewer.widgets.compare_window import open_compare
cw = open_compare(None, Session.open(sys.argv[1]), [sys.argv[2]])
def done(*_a):
    app.processEvents()
    frame, avail = cw.frameGeometry(), cw.screen().availableGeometry()
    cw.grab().save(sys.argv[3])
    print("RESULT " + json.dumps({"frame": [frame.x(), frame.y(), frame.width(), frame.height()],
                                  "avail": [avail.x(), avail.y(), avail.width(), avail.height()],
                                  "title": cw.windowTitle(), "error": cw.error}))
    app.quit()
cw.compared.connect(lambda _c: done())
cw.failed.connect(lambda _m: done())
sys.exit(app.exec())
"""


@pytest.mark.skipif(shutil.which("Xvfb") is None, reason="Xvfb is not installed (.ci/run installs it)")
def test_compare_fits_a_laptop_screen(tmp_path):
    proc, display = _start_xvfb("1366x768x24")
    out = os.environ.get("GPUVIEWER_SHOTS") or str(tmp_path)
    try:
        env = dict(
            os.environ, DISPLAY=display, QT_QPA_PLATFORM="xcb", PYTHONPATH=ROOT, XDG_CONFIG_HOME=str(tmp_path / "cfg")
        )
        p = subprocess.run(
            [
                sys.executable,
                "-c",
                SCRIPT,
                trace_path("kineto", "ddp_clean"),
                trace_path("kineto", "ddp_nop2p"),
                os.path.join(out, "compare_1366x768.png"),
            ],
            capture_output=True,
            text=True,
            env=env,
        )
    finally:
        proc.terminate()
        proc.wait()
    assert p.returncode == 0, p.stdout + p.stderr
    r = json.loads(next(x for x in p.stdout.splitlines() if x.startswith("RESULT "))[len("RESULT ") :])
    assert r["error"] is None and r["title"] == "Compare: ddp_clean vs ddp_nop2p"
    fx, fy, fw, fh = r["frame"]
    ax, ay, aw, ah = r["avail"]
    assert aw == 1366 and ax <= fx and ay <= fy and fx + fw <= ax + aw and fy + fh <= ay + ah, r
