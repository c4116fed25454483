"""Between a Qt-free Session and the window: loading off the UI thread (widgets/loader.py: a
process that writes the column cache), the analysis on a worker thread, the autosave timer the
session asks for, and the session's plain events turned into Qt signals that panels connect to.
A new session replaces the old one; signals always speak of `controller.session`."""

from __future__ import annotations

import os

from PySide6.QtCore import QObject, QThread, QTimer, Signal

from ..session import Session
from ..session.actions import AUTOSAVE_DELAY_S
from .loader import Loader


class AnalysisThread(QThread):
    """Runs a session's analysis off the UI thread (numpy releases the GIL for most of it);
    Session.compute_analysis only computes, so no session event is emitted on this thread."""

    done = Signal(object, object)
    failed = Signal(str)

    def __init__(self, session, parent=None) -> None:
        super().__init__(parent)
        self.session = session
        self.trace = session.trace

    def run(self) -> None:
        try:
            self.done.emit(self.session.compute_analysis(), self.trace)
        except Exception as e:  # noqa: BLE001 - shown in the findings panel
            self.failed.emit(f"{type(e).__name__}: {e}")


# Analyses still running when their window closed (a long analysis, a slow machine): held here,
# without a parent, until they end. A QThread destroyed while it runs aborts the process (qFatal),
# which is what deleting the window took with it after close's bounded wait.
_ORPHANS: set[AnalysisThread] = set()


# Every analysis thread started, until it has ended (dropped on the UI thread when the next one
# starts): without a parent, owned here, so neither a window deleted without closing (a window
# garbage-collected in a test run) nor its controller can destroy one that still runs.
_LIVE: set[QThread] = set()


def _hold(registry: set, th: QThread) -> None:
    """Add th to a registry, dropping its ended threads (on the UI thread, never from a thread as
    it ends)."""
    registry.difference_update([t for t in registry if t.isFinished()])
    registry.add(th)


def keep_running(th: QThread) -> None:
    """Hold th until it ends."""
    _hold(_LIVE, th)


def analyses_running() -> int:
    """Analyses left running by closed windows (the app waits for them before it exits)."""
    return sum(1 for t in _ORPHANS if t.isRunning())


def wait_for_orphans(ms: int) -> bool:
    """Wait up to ms for the analyses closed windows left running; True when none is left."""
    for t in list(_ORPHANS):
        t.wait(max(1, ms))
    return analyses_running() == 0


class Controller(QObject):
    # loading
    progress = Signal(float, str)
    loaded = Signal(object)  # the new Session
    failed = Signal(str)
    # the session's events
    rangeChanged = Signal(object, object)  # absolute ns (64-bit: not a C int)
    selectionChanged = Signal(object)
    annotationsChanged = Signal()
    areaChanged = Signal(object, object, object)  # t0, t1 (absolute ns), lane indices
    topologyChanged = Signal()
    analysisReady = Signal(object)  # the session's Analysis (analysis.results)
    analysisBusy = Signal(str)  # "analysing…", or why it failed
    message = Signal(str, bool)  # text, error

    CLOSE_WAIT_MS = 10_000  # how long closing waits for a running analysis before leaving it

    def __init__(self, parent=None) -> None:
        super().__init__(parent)
        self.session: Session | None = None
        self.block_analysis = False  # analyse in this thread (headless renders, tests)
        # the analyses started and maybe running, the newest last: one started while another runs
        # (a topology joined, a new session) leaves that one running, and close() waits for or
        # sets apart each (a running QThread destroyed with the window aborts the process)
        self._threads: list[AnalysisThread] = []
        self._subs: list = []
        self.loader = Loader(self)
        self.loader.progress.connect(self.progress)
        self.loader.failed.connect(self.failed)
        self.loader.loaded.connect(lambda trace, paths: self.set_session(Session(trace, paths)))
        self.save_timer = QTimer(self)
        self.save_timer.setSingleShot(True)
        self.save_timer.setInterval(int(AUTOSAVE_DELAY_S * 1000))
        self.save_timer.timeout.connect(self.save)

    # -- opening --------------------------------------------------------------------------
    def open(self, paths: list[str], block: bool = False, use_cache: bool = True) -> bool:
        """Open a session. block=True loads in this thread (headless renders, tests); else the
        loader's process parses into the cache and `loaded` follows. use_cache=False (--no-cache)
        neither reads nor writes the cache, and only applies to block=True."""
        paths = [os.path.abspath(p) for p in paths]
        if not block:
            self.loader.start(paths)
            return True
        try:
            s = Session.open(paths, use_cache=use_cache, align=self.loader.align, hosts=self.loader.hosts)
        except Exception as e:  # noqa: BLE001 - one line for the user (ours say it), never a traceback
            from ..errors import describe

            self.failed.emit(describe(e, paths))
            return False
        self.set_session(s)
        return True

    def reopen(self) -> None:
        """The same files again (hosts or clock alignment changed)."""
        if self.session is not None and self.session.paths:
            self.open(list(self.session.paths), block=self.block_analysis)

    def _detach(self) -> None:
        if self.session is not None:
            for name, fn in self._subs:
                self.session.events.disconnect(name, fn)
        self._subs = []

    def set_session(self, session: Session) -> None:
        self.flush()
        self._detach()
        self.session = session
        ev = session.events
        self._subs = [
            (n, ev.connect(n, fn))
            for n, fn in (
                ("range", lambda t0, t1: self.rangeChanged.emit(t0, t1)),
                ("selection", lambda event: self.selectionChanged.emit(event)),
                ("annotations", lambda: self.annotationsChanged.emit()),
                ("area", lambda t0, t1, lanes: self.areaChanged.emit(t0, t1, lanes)),
                ("topology", lambda: self.topologyChanged.emit()),
                ("analysis", self._analysis_event),
                ("message", lambda text, error: self.message.emit(text, error)),
                ("dirty", lambda: self.save_timer.start()),
            )
        ]
        self.loaded.emit(session)

    # -- analysis --------------------------------------------------------------------------
    def run_analysis(self) -> None:
        s = self.session
        if s is None:
            return
        if self.block_analysis:
            try:
                s.run_analysis()
            except Exception as e:  # noqa: BLE001 - a failed analysis must not break viewing
                self.analysisBusy.emit(
                    f"the analysis failed on this trace, a bug in gpuviewer ({type(e).__name__}); please report it"
                )
            return
        self.analysisBusy.emit("analysing…")
        th = AnalysisThread(s)  # no parent: see _LIVE
        keep_running(th)
        th.done.connect(self._analysis_done)
        th.failed.connect(lambda m: self.analysisBusy.emit(f"analysis failed: {m}"))
        self._threads = [t for t in self._threads if t.isRunning()] + [th]
        th.start()

    @property
    def _thread(self) -> AnalysisThread | None:
        """The newest analysis thread (wait_for_analysis waits for it)."""
        return self._threads[-1] if self._threads else None

    def _analysis_done(self, a: dict, trace) -> None:
        if self.session is not None and trace is self.session.trace:  # else a newer session replaced it
            self.session.set_analysis(a)

    def _analysis_event(self, analysis) -> None:
        if analysis is not None:
            self.analysisReady.emit(analysis)
        elif len(self.session.trace):
            self.run_analysis()  # dropped (a topology joined): again

    # -- annotations -----------------------------------------------------------------------
    def save(self) -> bool:
        return self.session.save_annotations() if self.session is not None else False

    def flush(self) -> None:
        """A save that is due, now (before the session changes or the window closes)."""
        if self.save_timer.isActive():
            self.save_timer.stop()
            self.save()

    def wait_for_analysis(self):
        """The analysis, now: the running worker's (waited for), else computed here."""
        s = self.session
        if s.analysis_ready is None and self._thread is not None and self._thread.isRunning():
            self._thread.wait()
            from PySide6.QtCore import QCoreApplication

            QCoreApplication.processEvents()  # its result, queued to this thread
        if s.analysis_ready is None:  # no worker, or it failed
            s.run_analysis()
        return s.analysis_ready

    def close(self) -> None:
        self.flush()
        self.loader.cancel()
        threads, self._threads = self._threads, []
        for th in threads:
            if th.wait(self.CLOSE_WAIT_MS):
                continue
            # still running: its result is for no one now; kept alive, apart from this window
            for sig in (th.done, th.failed):
                try:
                    sig.disconnect()
                except (RuntimeError, TypeError):  # nothing connected
                    pass
            _hold(_ORPHANS, th)
        self._detach()  # no reference cycle through the session's events outlives the window
