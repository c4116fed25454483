"""The main window: it lays out the timeline, docks, menus and status bar (window_build) and
opens sessions; annotations (window_notes over the Qt-free gpuviewer.notes), the analysis and
topology (window_analysis), and navigation and export (window_nav) are its mixins."""
from __future__ import annotations

import os
import sys

from PySide6.QtCore import QSettings, Qt, Signal
from PySide6.QtWidgets import QFileDialog, QMainWindow, QMessageBox

from ..model.trace import Trace
from . import window_build
from .window_analysis import AnalysisMixin
from .window_nav import NavMixin
from .window_notes import NotesMixin


class MainWindow(NotesMixin, AnalysisMixin, NavMixin, QMainWindow):
    analysisReady = Signal(object)

    def __init__(self, settings: QSettings | None = None) -> None:
        super().__init__()
        self.setWindowTitle("gpuviewer")
        self.settings = settings or QSettings("gpuviewer", "gpuviewer")
        self.trace: Trace | None = None
        self.paths: list[str] = []
        self.analysis: dict | None = None
        self.last_error: str | None = None
        # set by the command line and tests: log to stderr, keep errors off dialogs, analyse in
        # this thread (headless renders)
        self.debug = False
        self.quiet_errors = False
        self._block_analysis = False
        self.setAcceptDrops(True)
        window_build.build(self)
        self._init_notes()
        window_build.wire(self)

    # -- opening --------------------------------------------------------------------------
    def open_dialog(self) -> None:
        files, _ = QFileDialog.getOpenFileNames(
            self, "Open traces", "", "Traces (*.json *.json.gz *.gz *.sqlite *.nsys-rep);;All files (*)")
        if files:
            self.open_paths(files)

    def open_folder_dialog(self) -> None:
        d = QFileDialog.getExistingDirectory(self, "Open a folder of traces (one file per rank)")
        if d:
            self.open_paths([d])

    def open_paths(self, paths: list[str], block: bool = False, use_cache: bool = True) -> bool:
        """Open a session. block=True loads in this thread (headless screenshots, tests);
        use_cache=False (--no-cache) neither reads nor writes the column cache, and only applies
        to block=True (the background loader hands its columns over through the cache)."""
        paths = [os.path.abspath(p) for p in paths]
        from ..io.registry import companion_of
        if self.trace is not None and paths and all(
                os.path.isfile(p) and companion_of(p) == "topology" for p in paths):
            return self.attach_topology_files(paths)
        if block:
            from ..io.errors import TraceError
            from ..session import open_session
            try:
                trace = open_session(paths, use_cache=use_cache, align=self.loader.align,
                                     hosts=self.loader.hosts)
            except TraceError as e:
                self._failed(str(e))
                return False
            except Exception as e:  # noqa: BLE001
                self._failed(f"{', '.join(paths)}: cannot read ({type(e).__name__}: {e})")
                return False
            self._loaded(trace, paths)
            return True
        self.progress.setValue(0)
        for w in (self.progress, self.progress_msg, self.cancel_btn):
            w.show()
        self.progress_msg.setText(f"opening {os.path.basename(paths[0])}…")
        self.loader.start(paths)
        return True

    def cancel_load(self) -> None:
        self.loader.cancel()
        self._hide_progress()
        self.statusBar().showMessage("Loading cancelled", 4000)

    def _hide_progress(self) -> None:
        for w in (self.progress, self.progress_msg, self.cancel_btn):
            w.hide()

    def _progress(self, frac: float, msg: str) -> None:
        self.progress.setValue(int(frac * 1000))
        self.progress_msg.setText(msg)

    def _failed(self, msg: str) -> None:
        self._hide_progress()
        self.last_error = msg
        if self.debug:
            print(f"gpuviewer: {msg}", file=sys.stderr, flush=True)
        if not self.quiet_errors:
            QMessageBox.warning(self, "Cannot open", msg)

    def _loaded(self, trace: Trace, paths: list[str]) -> None:
        self._hide_progress()
        if self.debug:
            print(f"gpuviewer: loaded {', '.join(paths)}: {trace.n_events} events", file=sys.stderr, flush=True)
        self.trace = trace
        self.paths = paths
        self.timeline.set_trace(trace)
        self.details.set_trace(trace)
        self.queries.set_trace(trace, paths)
        self._show_topology()
        self._show_memory(trace)
        steps = sorted({s.step for s in trace.steps})
        self.step_box.blockSignals(True)
        self.step_box.setRange(min(steps) if steps else 0, max(steps) if steps else 0)
        self.step_box.blockSignals(False)
        self.step_label.setText(f"  {len(steps)} steps" if steps else "  no steps")
        names = ", ".join(os.path.basename(p) for p in paths)
        self.setWindowTitle(f"{names} — gpuviewer")
        self.status_files.setText(f"{len(trace.sources) or len(paths)} files · {len(trace.ranks)} ranks · "
                                  f"{trace.n_events:,} events" + (f" · {len(trace.warnings)} warnings"
                                                                  if trace.warnings else ""))
        from ..session import alignment_text
        self.status_files.setToolTip("\n".join([alignment_text(trace)] + list(trace.warnings)))
        if trace.metadata.get("alignment", {}).get("method") == "collectives":
            self.statusBar().showMessage(alignment_text(trace), 15000)
        self._add_recent(paths)
        self._load_annotations(paths)
        self._range_changed(*self.timeline.visible_range())
        self.run_analysis(block=self._block_analysis)

    def _show_memory(self, trace: Trace) -> None:
        self.memory.align_with(self.timeline.labels.width(), self.timeline.scroll.sizeHint().width())
        self.memory.set_trace(trace, self.timeline.origin, self.timeline.vb)
        if not self.memory.has_data():
            self.memory_dock.hide()
            return
        shown = self.memory_dock.isVisible()
        self.memory_dock.show()
        self.memory_dock.raise_()
        if len(trace) == 0:  # a memory snapshot alone: the curve is the content
            self.resizeDocks([self.memory_dock], [560], Qt.Vertical)
        elif not shown:  # sized once the dock is laid out (the next turn of the event loop)
            from PySide6.QtCore import QTimer

            from .window_fit import size_docks
            QTimer.singleShot(0, lambda: size_docks(self, self.width(), self.height()))

    def show_shortcuts(self) -> None:
        from .shortcuts import show
        show(self)

    def closeEvent(self, ev) -> None:
        from .window_fit import save_geometry
        save_geometry(self, self.settings)
        if self._save_timer.isActive():
            self._save_timer.stop()
            self.save_annotations()
        self.loader.cancel()
        if self._analysis_thread is not None:
            self._analysis_thread.wait(10000)
        super().closeEvent(ev)
