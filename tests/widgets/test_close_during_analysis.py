"""A window closed while its analysis still runs on a worker thread (a slow machine, a big
session): closing waits a bounded time, then leaves the thread to end on its own. Deleting the
window with the thread as its child used to abort the whole process (Qt's "QThread: Destroyed
while thread is still running"): the test suite's worker died in the middle of a later test."""

import gc

from conftest import trace_path
from PySide6.QtCore import QCoreApplication, QEvent, QSettings

from gpuviewer.widgets import controller as ctl


def test_closing_mid_analysis_leaves_the_thread_running_apart(qtbot, tmp_path, monkeypatch):
    from gpuviewer.widgets.main_window import MainWindow

    monkeypatch.setattr(ctl.Controller, "CLOSE_WAIT_MS", 1)  # the analysis outlasts the wait
    # not given to qtbot: this test deletes the window itself, as the app does when one closes
    w = MainWindow(QSettings(str(tmp_path / "s.ini"), QSettings.IniFormat))
    w.quiet_errors = True
    assert w.open_paths([trace_path("kineto", "ddp")], block=True)
    w.controller.run_analysis()  # as the window's first paint starts it, on a worker thread
    th = w.controller._thread
    assert th is not None and th.isRunning()
    w.close()
    assert th.parent() is None and th in ctl._ORPHANS  # no longer the window's child
    w.deleteLater()
    QCoreApplication.sendPostedEvents(None, QEvent.DeferredDelete)
    del w
    gc.collect()
    assert th.isRunning() or th.isFinished()  # still a live object, never destroyed mid-run
    assert ctl.wait_for_orphans(120_000)
    assert ctl.analyses_running() == 0


def test_an_analysis_started_over_a_running_one_is_kept_too(qtbot, tmp_path, monkeypatch):
    """A second analysis started while the first runs (a topology joined, the user asked again)
    replaced the only reference close() waited for: the first stayed the window's child and
    deleting the window destroyed it mid-run (a clean-clone suite run died in test_query_gui with
    'Fatal Python error: Aborted' while another window's analysis thread ran). close() now waits
    for, or sets apart, every analysis still running."""
    from gpuviewer.widgets.main_window import MainWindow

    monkeypatch.setattr(ctl.Controller, "CLOSE_WAIT_MS", 1)
    w = MainWindow(QSettings(str(tmp_path / "s.ini"), QSettings.IniFormat))
    w.quiet_errors = True
    assert w.open_paths([trace_path("kineto", "ddp")], block=True)
    w.controller.run_analysis()
    first = w.controller._thread
    w.controller.run_analysis()
    second = w.controller._thread
    assert first is not second and first.isRunning()
    w.close()
    for th in (first, second):
        assert th.isFinished() or (th.parent() is None and th in ctl._ORPHANS)
    w.deleteLater()
    QCoreApplication.sendPostedEvents(None, QEvent.DeferredDelete)
    del w
    gc.collect()
    assert ctl.wait_for_orphans(120_000)
    assert ctl.analyses_running() == 0
