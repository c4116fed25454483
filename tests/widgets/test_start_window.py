"""The start (issue 28, item 4), real widgets offscreen: before a trace, the timeline's place says
how to open one (not an empty plot with a "0 ns ... 1 ns" axis); from the moment files are opened
it names them with a progress bar and Cancel in the timeline's place (not in a corner of the
status bar); the timeline shows once the session is loaded; Cancel brings the empty state back.
A picture of each state is written to tests' tmp folder (GPUVIEWER_SHOTS=DIR keeps them)."""

import json
import os
import shutil
import subprocess
import sys

import pytest
from conftest import ROOT, SAMPLES, make_window, trace_path
from PySide6.QtCore import Qt


def _shot(w, tmp_path, name: str) -> None:
    out = os.environ.get("GPUVIEWER_SHOTS") or str(tmp_path)
    assert w.grab().save(os.path.join(out, name))


def _covers_timeline(w) -> bool:
    c, tv = w.cover, w.timeline
    return c.isVisible() and c.geometry() == tv.rect()


def test_empty_window_says_how_to_open_a_trace(qtbot, tmp_path):
    w = make_window(qtbot, tmp_path, size=(1366, 728))
    qtbot.waitExposed(w)
    assert _covers_timeline(w)
    assert "Open a trace" in w.cover.title.text()
    assert not w.progress.isVisible() and not w.cancel_btn.isVisible()
    _shot(w, tmp_path, "start_empty.png")


def test_opening_names_the_files_with_progress_and_cancel_in_the_timelines_place(qtbot, tmp_path, monkeypatch):
    monkeypatch.setenv("GPUVIEWER_CACHE_DIR", str(tmp_path / "cache"))  # a real read, not a cache hit
    w = make_window(qtbot, tmp_path, size=(1366, 728))
    qtbot.waitExposed(w)
    seen = []
    w.loader.progress.connect(lambda f, m: seen.append((f, w.progress.value(), w.progress_msg.text())))
    path = os.path.join(SAMPLES, "ddp")
    w.open_paths([path])
    # at once, before the reader has said anything: the folder's name, a bar, Cancel
    assert _covers_timeline(w)
    assert "Opening <b>ddp</b>" in w.cover.title.text()
    assert w.progress.isVisible() and w.cancel_btn.isVisible()
    assert w.progress.parent() is w.cover and w.cancel_btn.parent() is w.cover  # in the timeline's place
    _shot(w, tmp_path, "start_opening.png")
    qtbot.waitUntil(lambda: w.trace is not None, timeout=120_000)
    assert seen and all(v == int(f * 1000) and m for f, v, m in seen)  # the bar follows the reader
    assert not w.cover.isVisible() and w.timeline.isVisible()
    assert w.windowTitle().startswith("ddp")


def test_cancel_brings_back_the_empty_state(qtbot, tmp_path, monkeypatch):
    monkeypatch.setenv("GPUVIEWER_CACHE_DIR", str(tmp_path / "cache"))
    w = make_window(qtbot, tmp_path, size=(1366, 728))
    w.open_paths([trace_path("kineto", "launch_bound_big.json.gz")])
    assert "launch_bound_big.json.gz" in w.cover.title.text() and w.cancel_btn.isVisible()
    qtbot.mouseClick(w.cancel_btn, Qt.LeftButton)
    assert w.trace is None and not w.loader.busy()
    assert _covers_timeline(w) and "Open a trace" in w.cover.title.text() and not w.cancel_btn.isVisible()


XCB_SCRIPT = r"""
import json, sys, time
t_start = time.perf_counter()
from PySide6.QtWidgets import QApplication
app = QApplication(sys.argv[:1])
assert app.platformName() == "xcb", app.platformName()
from gpuviewer.widgets.main_window import MainWindow
from PySide6.QtCore import QSettings, QTimer
w = MainWindow(QSettings(sys.argv[3], QSettings.IniFormat))
w.quiet_errors = True
w.show()
w.open_paths([sys.argv[1]])  # as `gpuviewer PATH` does: shown first, then opened
out = {}

def first_frame():
    # the first frame the user sees: the folder's name and a bar where the timeline goes
    if not w.windowHandle().isExposed():
        QTimer.singleShot(5, first_frame)
        return
    out["shown_s"] = round(time.perf_counter() - t_start, 2)
    out["cover"] = w.cover.isVisible() and w.cover.geometry() == w.timeline.rect()
    out["title"] = w.cover.title.text()
    out["bar"] = w.progress.isVisible() and w.cancel_btn.isVisible()
    out["loaded_yet"] = w.trace is not None
    w.grab().save(sys.argv[2])

def loaded(*_a):
    out["loaded_s"] = round(time.perf_counter() - t_start, 2)
    out["cover_after"] = w.cover.isVisible()
    print("RESULT " + json.dumps(out), flush=True)
    app.quit()

QTimer.singleShot(0, first_frame)
w.controller.loaded.connect(lambda _s: QTimer.singleShot(0, loaded))
w.loader.failed.connect(lambda m: (print("failed", m), app.exit(3)))
sys.exit(app.exec())
"""


@pytest.mark.skipif(shutil.which("Xvfb") is None, reason="Xvfb is not installed (.ci/run installs it)")
def test_a_real_window_shows_the_file_opening_in_its_first_frame(tmp_path):
    from test_laptop_window import _start_xvfb

    proc, display = _start_xvfb("1366x768x24")
    shots = os.environ.get("GPUVIEWER_SHOTS") or str(tmp_path)
    try:
        env = dict(
            os.environ,
            DISPLAY=display,
            QT_QPA_PLATFORM="xcb",
            PYTHONPATH=ROOT,
            GPUVIEWER_CACHE_DIR=str(tmp_path / "cache"),
            XDG_CONFIG_HOME=str(tmp_path / "cfg"),
        )
        data = tmp_path / "ddp"  # a copy: the window may save its notes beside the trace
        shutil.copytree(os.path.join(SAMPLES, "ddp"), data)
        p = subprocess.run(
            [
                sys.executable,
                "-c",
                XCB_SCRIPT,
                str(data),
                os.path.join(shots, "start_xcb_first_frame.png"),
                str(tmp_path / "s.ini"),
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
    print(r)  # shown_s / loaded_s: seconds from the start, for the record (not limits)
    assert not r["loaded_yet"] and r["cover"] and r["bar"] and "Opening <b>ddp</b>" in r["title"]
    assert not r["cover_after"]


def test_the_empty_window_is_built_without_pandas():
    """pandas took most of the window's build (1.3-2 s of it on a loaded two-core machine): the
    tables import it with the first session, after the window is on the screen."""
    code = (
        "import sys\nfrom PySide6.QtWidgets import QApplication\napp = QApplication([])\n"
        "from gpuviewer.widgets.main_window import MainWindow\nw = MainWindow()\nw.show()\napp.processEvents()\n"
        "print('pandas' in sys.modules, w.cover.isVisible())\n"
    )
    p = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=dict(os.environ, QT_QPA_PLATFORM="offscreen", PYTHONPATH=ROOT),
    )
    assert p.returncode == 0, p.stderr
    assert p.stdout.split() == ["False", "True"], p.stdout + p.stderr
