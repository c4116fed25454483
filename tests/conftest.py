import os
import sys

import pytest

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SHARED = os.environ.get("GPUVIEWER_SHARED", os.path.join(os.path.dirname(ROOT), "shared"))
TRACES = os.path.join(SHARED, "traces")
COMPAT = os.path.join(SHARED, "compat")
SAMPLES = os.path.join(ROOT, "samples")

if not os.path.isdir(TRACES):
    raise RuntimeError(f"the real traces are expected at {TRACES} (set GPUVIEWER_SHARED)")


@pytest.fixture(autouse=True, scope="session")
def _cache_dir(tmp_path_factory):
    d = tmp_path_factory.mktemp("cache")
    os.environ["GPUVIEWER_CACHE_DIR"] = str(d)
    yield d


def trace_path(*parts: str) -> str:
    return os.path.join(TRACES, *parts)


def compat_path(*parts: str) -> str:
    return os.path.join(COMPAT, *parts)


def run_cli(*args: str, env: dict | None = None):
    import subprocess
    e = dict(os.environ)
    e.update(env or {})
    return subprocess.run([sys.executable, "-m", "gpuviewer", *args], capture_output=True, text=True,
                          env=e, cwd=ROOT, timeout=600)


def make_window(qtbot, tmp_path, *, block_analysis: bool = False, size: tuple[int, int] | None = None):
    """A main window with its own settings file, errors kept off dialogs; shown at `size`."""
    from PySide6.QtCore import QSettings

    from gpuviewer.widgets.main_window import MainWindow
    w = MainWindow(QSettings(str(tmp_path / "s.ini"), QSettings.IniFormat))
    w.quiet_errors = True
    w.controller.block_analysis = block_analysis
    qtbot.addWidget(w)
    if size is not None:
        w.resize(*size)
        w.show()
    return w


def png_size(path) -> tuple[int, int]:
    """Width and height from a PNG's header."""
    import struct
    with open(path, "rb") as f:
        head = f.read(24)
    assert head[:8] == b"\x89PNG\r\n\x1a\n"
    return struct.unpack(">II", head[16:24])
