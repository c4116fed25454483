"""The start (issue 28, item 4), real widgets offscreen: before a trace, the timeline's place says
how to open one (not an empty plot with a "0 ns ... 1 ns" axis); from the moment files are opened
it names them with a progress bar and Cancel in the timeline's place (not in a corner of the
status bar); the timeline shows once the session is loaded; Cancel brings the empty state back.
A picture of each state is written to tests' tmp folder (GPUVIEWER_SHOTS=DIR keeps them)."""
import os

from PySide6.QtCore import Qt

from conftest import SAMPLES, make_window, trace_path


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
