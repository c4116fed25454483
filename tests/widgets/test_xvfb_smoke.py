"""A real X11 window (xcb under Xvfb), not only offscreen: starts and shows a trace."""

import contextlib
import os
import shutil
import subprocess
import sys
import time

import pytest
from conftest import ROOT, SAMPLES

SCRIPT = r"""
import sys
from PySide6.QtWidgets import QApplication
from PySide6.QtCore import QTimer
app = QApplication(sys.argv[:1])
assert app.platformName() == "xcb", app.platformName()
from gpuviewer.widgets.main_window import MainWindow
w = MainWindow()
w.resize(1400, 850)
w.show()
def check():
    assert w.windowHandle().isExposed()
    assert w.trace is not None and len(w.trace.ranks) == 2
    img = w.grab()
    img.save(sys.argv[2])
    print("shown", w.trace.n_events, img.width(), img.height())
    w.close()  # as a user ends it (app/gui.py): an analysis still running is left to finish
    app.quit()
w.loader.loaded.connect(lambda *a: QTimer.singleShot(300, check))
w.loader.failed.connect(lambda m: (print("failed", m), app.exit(3)))
w.open_paths([sys.argv[1]])
QTimer.singleShot(90000, lambda: app.exit(4))
rc = app.exec()
# as gpuviewer's own exit does: Python's teardown must not destroy a running analysis' thread (the
# check runs 0.3 s after the load; on a loaded machine the analysis is still going: exit -11)
from gpuviewer.widgets.controller import wait_for_orphans
assert wait_for_orphans(60_000)
sys.exit(rc)
"""


@contextlib.contextmanager
def xvfb(first: int, screen: str):
    """A private X server for one test; yields its DISPLAY."""
    display = f":{first + os.getpid() % 100}"
    proc = subprocess.Popen(
        ["Xvfb", display, "-screen", "0", screen, "-nolisten", "tcp"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        time.sleep(1.0)
        yield display
    finally:
        proc.terminate()
        proc.wait(5)


@pytest.mark.skipif(shutil.which("Xvfb") is None, reason="Xvfb is not installed (.ci/run installs it)")
def test_real_window_under_xvfb(tmp_path):
    with xvfb(90, "1600x1000x24") as display:
        env = dict(
            os.environ,
            DISPLAY=display,
            QT_QPA_PLATFORM="xcb",
            PYTHONPATH=ROOT,
            GPUVIEWER_CACHE_DIR=str(tmp_path / "cache"),
            XDG_CONFIG_HOME=str(tmp_path / "cfg"),
        )
        out = tmp_path / "xcb.png"
        p = subprocess.run(
            [sys.executable, "-c", SCRIPT, os.path.join(SAMPLES, "ddp"), str(out)],
            capture_output=True,
            text=True,
            env=env,
            timeout=180,
        )
        assert p.returncode == 0, p.stdout + p.stderr
        assert p.stdout.startswith("shown")
        assert out.exists() and out.stat().st_size > 20_000


GL_SCRIPT = r"""
from PySide6.QtWidgets import QApplication
app = QApplication([])
from gpuviewer.widgets.gl import SOFTWARE, gl_renderer_string, want_opengl
r = gl_renderer_string()
software = r is None or any(s in r.lower() for s in SOFTWARE)
assert want_opengl("auto") == (not software), (r, want_opengl("auto"))
assert want_opengl("raster") is False
assert want_opengl("opengl") == (r is not None)
import pyqtgraph as pg
from gpuviewer.widgets.timeline_view import TimelineView
tv = TimelineView()
used = tv.apply_renderer("opengl")
assert used == (r is not None)
assert (type(tv.plot.viewport()).__name__ == "QOpenGLWidget") == used
print("renderer", r, "auto-gl", not software)
"""


@pytest.mark.skipif(shutil.which("Xvfb") is None, reason="Xvfb is not installed (.ci/run installs it)")
def test_opengl_only_on_hardware_renderers(tmp_path):
    with xvfb(200, "1280x1024x24") as display:
        env = dict(os.environ, DISPLAY=display, QT_QPA_PLATFORM="xcb", PYTHONPATH=ROOT)
        p = subprocess.run([sys.executable, "-c", GL_SCRIPT], capture_output=True, text=True, env=env, timeout=120)
        assert p.returncode == 0, p.stdout + p.stderr
        assert p.stdout.startswith("renderer")
