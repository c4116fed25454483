"""The main window: timeline in the centre, details and selection docks, status bar."""
from __future__ import annotations

import os
import sys

from PySide6.QtCore import QSettings, Qt, QThread, Signal
from PySide6.QtGui import QAction, QKeySequence
from PySide6.QtWidgets import (QDockWidget, QFileDialog, QLabel, QMainWindow, QMessageBox,
                               QProgressBar, QPushButton, QSpinBox, QToolBar, QWidget)

from .. import __version__
from ..model.trace import Trace
from ..render.time_axis import format_duration, format_ns
from .area_table import AreaTable
from .details import DetailsPanel
from .findings_panel import FindingsPanel
from .loader import Loader
from .memory_panel import MemoryPanel
from .overview_panel import OverviewPanel
from .annotations_panel import AnnotationsPanel
from .topology_view import TopologyView
from .timeline_view import TimelineView

MAX_RECENT = 10


class _AnalysisThread(QThread):
    """Runs the analysis off the UI thread (numpy releases the GIL for most of it)."""
    done = Signal(object, object)
    failed = Signal(str)

    def __init__(self, trace, parent=None) -> None:
        super().__init__(parent)
        self.trace = trace

    def run(self) -> None:
        try:
            from ..run_analysis import analyze_session
            self.done.emit(analyze_session(self.trace), self.trace)
        except Exception as e:  # noqa: BLE001
            self.failed.emit(f"{type(e).__name__}: {e}")


class MainWindow(QMainWindow):
    analysisReady = Signal(object)

    def __init__(self, settings: QSettings | None = None) -> None:
        super().__init__()
        self.setWindowTitle("gpuviewer")
        self.settings = settings or QSettings("gpuviewer", "gpuviewer")
        self.trace: Trace | None = None
        self.paths: list[str] = []
        self.setAcceptDrops(True)

        self.timeline = TimelineView(self)
        self.setCentralWidget(self.timeline)
        self.details = DetailsPanel()
        self.details_dock = self._dock("Details", self.details, Qt.RightDockWidgetArea)
        self.area = AreaTable()
        self.area_dock = self._dock("Selection", self.area, Qt.BottomDockWidgetArea)  # short: dock tab bars set the window's minimum width

        self.memory = MemoryPanel()
        self.memory_dock = self._dock("Memory", self.memory, Qt.BottomDockWidgetArea)
        self.memory.cursorMoved.connect(self._memory_cursor)
        self.topology = TopologyView()
        self.topology_dock = self._dock("Topology", self.topology, Qt.RightDockWidgetArea)
        self.tabifyDockWidget(self.details_dock, self.topology_dock)
        self.details_dock.raise_()
        self.annotations = AnnotationsPanel()
        self.annotations_dock = self._dock("Annotations", self.annotations, Qt.RightDockWidgetArea)
        self.tabifyDockWidget(self.details_dock, self.annotations_dock)
        self.details_dock.raise_()
        self.annotations.jumpTo.connect(self.goto_annotation)
        self.annotations.changed.connect(self._annotations_changed)
        from ..model.annotations import AnnotationDoc
        self.doc = AnnotationDoc()
        self.sidecar: str | None = None
        from PySide6.QtCore import QTimer
        self._save_timer = QTimer(self)
        self._save_timer.setSingleShot(True)
        self._save_timer.setInterval(400)
        self._save_timer.timeout.connect(self.save_annotations)
        self.findings = FindingsPanel()
        self.findings_dock = self._dock("Findings", self.findings, Qt.BottomDockWidgetArea)
        self.overview = OverviewPanel()
        self.overview_dock = self._dock("Overview", self.overview, Qt.BottomDockWidgetArea)
        from .rank_overview import RankOverview
        self.ranks_view = RankOverview()
        self.ranks_dock = self._dock("Ranks", self.ranks_view, Qt.BottomDockWidgetArea)
        self.ranks_view.cellChosen.connect(self.goto_rank_step)
        self.memory_dock.hide()  # shown when the session has memory data
        self.analysis: dict | None = None
        self._analysis_thread = None
        # Bottom: the memory curve right under the timeline, then a tab group of findings,
        # overview and selection summary.
        # The right dock spans the full height so the bottom docks sit exactly under the timeline.
        self.setCorner(Qt.BottomRightCorner, Qt.RightDockWidgetArea)
        self.setCorner(Qt.TopRightCorner, Qt.RightDockWidgetArea)
        self.splitDockWidget(self.memory_dock, self.findings_dock, Qt.Vertical)
        self.tabifyDockWidget(self.findings_dock, self.overview_dock)
        self.tabifyDockWidget(self.findings_dock, self.ranks_dock)
        self.tabifyDockWidget(self.findings_dock, self.area_dock)
        from .query_docks import QueryDocks
        self.queries = QueryDocks(self, self.findings_dock)  # SQL and Statistics tabs
        self.findings_dock.raise_()
        from .window_fit import fit_to_screen
        fit_to_screen(self, self.settings)  # the screen it opens on, or the last geometry there
        self.setDockOptions(QMainWindow.AnimatedDocks | QMainWindow.AllowNestedDocks | QMainWindow.AllowTabbedDocks)
        self._tabs_scroll()

    def _tabs_scroll(self) -> None:
        """Dock tab bars scroll (and elide) rather than make the window wider than the screen."""
        from PySide6.QtWidgets import QTabBar
        for tb in self.findChildren(QTabBar):
            tb.setUsesScrollButtons(True)
            tb.setElideMode(Qt.ElideRight)

        self.loader = Loader(self)
        self.loader.progress.connect(self._progress)
        self.loader.loaded.connect(self._loaded)
        self.loader.failed.connect(self._failed)

        self._menus()
        self._steps_toolbar()
        self._status()
        self.timeline.selectionChanged.connect(self.details.show_event)
        self.timeline.rangeChanged.connect(self._range_changed)
        self.timeline.rangeChanged.connect(self._view_changed)
        self.timeline.labels.changed.connect(self._view_changed)
        self.timeline.areaSelected.connect(self._area)
        self.timeline.helpRequested.connect(self.show_shortcuts)
        self.details.linkActivated.connect(self._goto_event)
        self.findings.findingActivated.connect(self.show_finding)
        self.timeline.markRequested.connect(self.mark)
        self.timeline.contextRequested.connect(self._timeline_menu)

    def _dock(self, title: str, w: QWidget, area) -> QDockWidget:
        d = QDockWidget(title, self)
        d.setObjectName(title)
        d.setWidget(w)
        self.addDockWidget(area, d)
        return d

    # -- menus and bars ---------------------------------------------------------------------
    def _menus(self) -> None:
        m = self.menuBar().addMenu("&File")
        m.addAction("&Open files…", QKeySequence.Open, self.open_dialog)
        m.addAction("Open &folder…", self.open_folder_dialog)
        self.recent_menu = m.addMenu("Open &recent")
        self._fill_recent()
        m.addSeparator()
        from .compare_actions import compare_rank, compare_with_dialog
        m.addAction("&Compare with…", lambda: compare_with_dialog(self))
        self.findings.compareRank.connect(lambda r: compare_rank(self, r))
        m.addAction("Export &image…", self.export_image_dialog)
        m.addAction("Copy image to clipboard", self.copy_image)
        m.addAction("Export &report…", self.export_report_dialog)
        m.addSeparator()
        m.addAction("&Quit", QKeySequence.Quit, self.close)
        e = self.menuBar().addMenu("&Edit")
        e.addAction("Paste topology (nvidia-smi topo -m)", self.paste_topology)
        v = self.menuBar().addMenu("&View")
        v.addAction("Fit all", self.timeline.fit_all)
        self.steps_action = QAction("Show step boundaries", self, checkable=True, checked=True)
        self.steps_action.toggled.connect(self._toggle_steps)
        v.addAction(self.steps_action)
        v.addAction(self.details_dock.toggleViewAction())
        v.addAction(self.area_dock.toggleViewAction())
        v.addAction(self.findings_dock.toggleViewAction())
        v.addAction(self.memory_dock.toggleViewAction())
        v.addAction(self.topology_dock.toggleViewAction())
        v.addAction(self.annotations_dock.toggleViewAction())
        v.addAction(self.overview_dock.toggleViewAction())
        v.addAction(self.ranks_dock.toggleViewAction())
        self.align_action = v.addAction("Align host clocks by collectives")
        self.align_action.setCheckable(True)
        self.align_action.setChecked(True)
        self.align_action.toggled.connect(self.set_align)
        v.addAction("Hosts (which ranks share a clock)…", self.hosts_dialog)
        r = v.addMenu("Renderer")
        for mode, label in (("auto", "Automatic (GPU if it is real hardware)"), ("opengl", "OpenGL"),
                            ("raster", "Raster (CPU)")):
            a = QAction(label, self, checkable=True, checked=self.settings.value("renderer", "auto") == mode)
            a.triggered.connect(lambda _=False, md=mode: self._set_renderer(md))
            r.addAction(a)
        o = v.addMenu("When files are opened from another start")
        for mode, label in (("replace", "Replace this session"), ("new-window", "Open a new window")):
            a = QAction(label, self, checkable=True, checked=str(self.settings.value("open_in", "replace")) == mode)
            a.triggered.connect(lambda _=False, md=mode: self.settings.setValue("open_in", md))
            o.addAction(a)
        si = QAction("One window for all starts (single instance)", self, checkable=True,
                     checked=str(self.settings.value("single_instance", "true")) == "true")
        si.toggled.connect(lambda on: self.settings.setValue("single_instance", "true" if on else "false"))
        v.addAction(si)
        h = self.menuBar().addMenu("&Help")
        h.addAction("Keyboard shortcuts  ?", self.show_shortcuts)
        h.addAction("About", lambda: QMessageBox.about(self, "gpuviewer", f"gpuviewer {__version__}"))

    def _steps_toolbar(self) -> None:
        tb = QToolBar("Steps", self)
        tb.setObjectName("steps")
        self.addToolBar(Qt.TopToolBarArea, tb)
        prev = tb.addAction("◀ step", lambda: self.step_nav(-1))
        prev.setShortcut(QKeySequence("["))
        prev.setToolTip("Previous step: zoom to it ( [ )")
        nxt = tb.addAction("step ▶", lambda: self.step_nav(+1))
        nxt.setShortcut(QKeySequence("]"))
        nxt.setToolTip("Next step: zoom to it ( ] )")
        go = QLabel(" go to step ")
        go.setToolTip("Zoom to a step by its number (ProfilerStep#N, NVTX step N)")
        tb.addWidget(go)
        self.step_box = QSpinBox()
        self.step_box.setToolTip("The step to zoom to")
        self.step_box.setRange(0, 0)
        self.step_box.setKeyboardTracking(False)
        self.step_box.valueChanged.connect(self.goto_step)
        tb.addWidget(self.step_box)
        self.step_label = QLabel("")
        self.step_label.setToolTip("Profiled steps in this session")
        tb.addWidget(self.step_label)

    def _status(self) -> None:
        sb = self.statusBar()
        self.status_files = QLabel("Open a trace: File > Open, drop files here, or `gpuviewer FILE…`")
        self.status_range = QLabel("")
        self.progress = QProgressBar()
        self.progress.setRange(0, 1000)
        self.progress.setMaximumWidth(260)
        self.progress_msg = QLabel("")
        self.cancel_btn = QPushButton("Cancel")
        self.cancel_btn.clicked.connect(self.cancel_load)
        for w in (self.progress, self.progress_msg, self.cancel_btn):
            w.hide()
        sb.addWidget(self.status_files, 1)
        sb.addPermanentWidget(self.progress_msg)
        sb.addPermanentWidget(self.progress)
        sb.addPermanentWidget(self.cancel_btn)
        sb.addPermanentWidget(self.status_range)

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
        if getattr(self, "debug", False):
            print(f"gpuviewer: {msg}", file=sys.stderr, flush=True)
        if getattr(self, "quiet_errors", False):
            return
        QMessageBox.warning(self, "Cannot open", msg)

    def _loaded(self, trace: Trace, paths: list[str]) -> None:
        self._hide_progress()
        if getattr(self, "debug", False):
            print(f"gpuviewer: loaded {', '.join(paths)}: {trace.n_events} events", file=sys.stderr, flush=True)
        self.trace = trace
        self.paths = paths
        self.timeline.set_trace(trace)
        self.details.set_trace(trace)
        self.queries.set_trace(trace, paths)
        self._show_topology()
        self.memory.align_with(self.timeline.labels.width(), self.timeline.scroll.sizeHint().width())
        self.memory.set_trace(trace, self.timeline.origin, self.timeline.vb)
        if self.memory.has_data():
            shown = self.memory_dock.isVisible()
            self.memory_dock.show()
            self.memory_dock.raise_()
            if len(trace) == 0:  # a memory snapshot alone: the curve is the content
                self.resizeDocks([self.memory_dock], [560], Qt.Vertical)
            elif not shown:  # sized once the dock is laid out (the next turn of the event loop)
                from PySide6.QtCore import QTimer

                from .window_fit import size_docks
                QTimer.singleShot(0, lambda: size_docks(self, self.width(), self.height()))
        else:
            self.memory_dock.hide()
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
        tip = [alignment_text(trace)] + list(trace.warnings)
        self.status_files.setToolTip("\n".join(tip))
        if trace.metadata.get("alignment", {}).get("method") == "collectives":
            self.statusBar().showMessage(alignment_text(trace), 15000)
        self._add_recent(paths)
        self._load_annotations(paths)
        self._range_changed(*self.timeline.visible_range())
        self.run_analysis(block=getattr(self, "_block_analysis", False))

    # -- annotations and view state ------------------------------------------------------------
    def _load_annotations(self, paths: list[str]) -> None:
        from ..io.errors import TraceError
        from ..io.sidecar import load_doc, sidecar_path
        from ..model.annotations import AnnotationDoc
        from ..model.layout import ViewState
        self.sidecar = sidecar_path(paths)
        try:
            self.doc = load_doc(self.sidecar)
        except TraceError as e:
            # a damaged sidecar is never overwritten: save_doc moves it aside first
            self.doc = AnnotationDoc()
            self.statusBar().showMessage(f"Annotations not loaded: {e}", 10000)
        self._apply_annotations()
        view = self.doc.view or {}
        if view.get("lanes") and self.timeline.layout_model is not None:
            self.timeline.layout_model.state = ViewState.from_json(view["lanes"])
            self.timeline.layout_model.rebuild()
            self.timeline._relayout()
        rng = view.get("range")
        if isinstance(rng, list) and len(rng) == 2 and all(isinstance(x, int) for x in rng) and rng[1] > rng[0]:
            self.timeline.set_range(rng[0], rng[1])

    def load_annotation_file(self, path: str) -> None:
        """Annotations from a file (the CLI's --annotations) instead of the sidecar."""
        from ..io.sidecar import load_doc
        self.doc = load_doc(path)
        self.sidecar = None  # do not write back over the user's file
        self._apply_annotations()

    def _apply_annotations(self) -> None:
        origin = self.timeline.origin
        self.annotations.set_annotations(self.doc.annotations, origin)
        if self.timeline.item is not None:
            self.timeline.item.annotations = self.doc.annotations
            self.timeline.item.update()

    def _annotations_changed(self) -> None:
        self._apply_annotations()
        self._save_timer.start()

    def _view_changed(self, *_a) -> None:
        # The view is saved with the annotations; a sidecar is only created once there is an
        # annotation (panning alone never writes a file beside the user's trace).
        import os
        if self.sidecar and (self.doc.annotations or os.path.exists(self.sidecar)):
            self._save_timer.start()

    def view_state(self) -> dict:
        t0, t1 = self.timeline.visible_range()
        lm = self.timeline.layout_model
        return {"range": [int(t0), int(t1)], "lanes": lm.state.to_json() if lm else {}}

    def save_annotations(self) -> bool:
        """Autosave: the sidecar (atomically); never the trace."""
        if self.sidecar is None or self.trace is None:
            return False
        from ..io.sidecar import save_doc
        self.doc.view = self.view_state()
        try:
            moved = save_doc(self.sidecar, self.doc)
            if moved:
                self.statusBar().showMessage(f"The damaged annotations file was kept as {moved}", 15000)
        except OSError as e:
            self.statusBar().showMessage(f"Could not save annotations to {self.sidecar}: {e.strerror}", 10000)
            return False
        return True

    def add_annotation(self, a) -> None:
        self.doc.annotations.append(a)
        self._annotations_changed()

    def mark(self, region: bool = False, text: str | None = None):
        """M: a note at the selected event (or the middle of the view); Shift+M: a region over the
        area selection (or the selected event)."""
        from ..model.annotations import Annotation
        if self.trace is None:
            return None
        c = self.trace.columns
        sel = self.timeline.selected
        rank, lane_key, t0, t1 = self.trace.ranks[0].rank if self.trace.ranks else 0, None, None, None
        if region and self.timeline.last_area is not None:
            t0, t1, lanes = self.timeline.last_area
            ranks = sorted({self.trace.lanes[ln].rank for ln in lanes}) or [rank]
            rank = ranks[0]
            lane_key = self.trace.lanes[lanes[0]].key if len(lanes) == 1 else None
        elif sel is not None:
            lane = self.trace.lanes[int(c["lane"][sel])]
            rank, lane_key = lane.rank, lane.key
            t0 = int(c["start"][sel])
            t1 = t0 + int(c["dur"][sel])
        else:
            v0, v1 = self.timeline.visible_range()
            t0 = t1 = (v0 + v1) // 2
        if text is None:
            text = self.annotations.ask_text(self, "Region" if region else "Note", "")
            if text is None:
                return None
        if region:
            a = Annotation("region", text, int(t0), int(max(t1, t0 + 1)), rank, lane_key if not self.timeline.last_area else None)
        else:
            a = Annotation("note", text, int(t0), None, rank, lane_key)
        self.add_annotation(a)
        return a

    def arrow_to(self, j: int, text: str = ""):
        """An arrow from the selected event to event j."""
        from ..model.annotations import Annotation
        i = self.timeline.selected
        if i is None or self.trace is None:
            return None
        c = self.trace.columns
        la, lb = self.trace.lanes[int(c["lane"][i])], self.trace.lanes[int(c["lane"][j])]
        a = Annotation("arrow", text, int(c["start"][i]), int(c["start"][j]), la.rank, la.key,
                       end_rank=lb.rank, end_lane=lb.key)
        self.add_annotation(a)
        return a

    def goto_annotation(self, a) -> None:
        t1 = a.end_ns if a.end_ns is not None else a.start_ns
        lo, hi = min(a.start_ns, t1), max(a.start_ns, t1)
        span = max(hi - lo, 2_000_000)
        self.timeline.set_range(lo - span // 4, hi + span // 4)
        lm = self.timeline.layout_model
        hdr = next((r for r in lm.rows if r.kind == "header" and r.rank == a.rank), None) if lm else None
        if hdr is not None:
            self.timeline.scroll.setValue(int(hdr.y * 10))

    def _timeline_menu(self, global_pos, x: float, y: float) -> None:
        from PySide6.QtWidgets import QMenu
        from ..model.annotations import Annotation
        if self.trace is None:
            return
        m = QMenu(self)
        row = self.timeline.layout_model.row_at(y) if self.timeline.layout_model else None
        t = int(x) + self.timeline.origin

        def note_here():
            text = self.annotations.ask_text(self, "Note", "")
            if text is not None:
                rank = row.rank if row is not None and row.rank >= 0 else self.trace.ranks[0].rank
                key = self.trace.lanes[row.lane].key if row is not None and row.kind == "lane" else None
                self.add_annotation(Annotation("note", text, t, None, rank, key))
        m.addAction("Add a note here", note_here)
        if self.timeline.last_area is not None:
            m.addAction("Make a region of the area selection", lambda: self.mark(region=True))
        j = self.timeline.item.pick(x, y, self.timeline._tol()) if self.timeline.item else None
        if self.timeline.selected is not None and j is not None and j != self.timeline.selected:
            m.addAction(f"Arrow from the selected event to {self.trace.name_of(j)[:40]}",
                        lambda: self.arrow_to(j, self.annotations.ask_text(self, "Arrow label", "") or ""))
        m.exec(global_pos)

    # -- export -------------------------------------------------------------------------------
    def export_image(self, path: str, scale: float = 1.0) -> bool:
        from ..export.image import save_widget
        return save_widget(self, path, scale)

    def export_image_dialog(self) -> None:
        from PySide6.QtWidgets import QInputDialog
        path, filt = QFileDialog.getSaveFileName(self, "Export image", "gpuviewer.png",
                                                 "PNG image (*.png);;SVG (text stays text) (*.svg)")
        if not path:
            return
        scale = 1.0
        if path.lower().endswith(".png"):
            s, ok = QInputDialog.getItem(self, "Scale", "Pixel scale (2x for slides):", ["1x", "2x", "3x"], 1, False)
            if not ok:
                return
            scale = float(s[0])
        if not self.export_image(path, scale):
            QMessageBox.warning(self, "Export image", f"Could not write {path}")

    def copy_image(self) -> None:
        from PySide6.QtWidgets import QApplication
        QApplication.clipboard().setPixmap(self.grab())
        self.statusBar().showMessage("Image copied to the clipboard", 3000)

    def export_report_dialog(self) -> None:
        if self.trace is None:
            return
        path, _ = QFileDialog.getSaveFileName(self, "Export report", "gpuviewer-report.html",
                                              "HTML (*.html);;Markdown (*.md)")
        if not path:
            return
        from ..export.report import write_report
        try:
            write_report(self, path)
        except OSError as e:
            QMessageBox.warning(self, "Export report", f"Could not write {path}: {e.strerror}")
            return
        self.statusBar().showMessage(f"Report written to {path}", 5000)

    # -- topology -------------------------------------------------------------------------
    def attach_topology_files(self, paths: list[str]) -> bool:
        from ..io.errors import TraceError
        from ..io.topo import read_topology
        try:
            topo = read_topology(paths)
        except TraceError as e:
            self._failed(str(e))
            return False
        self.set_topology(topo)
        return True

    def paste_topology(self, text: str | None = None) -> bool:
        from PySide6.QtWidgets import QApplication
        from ..io.errors import TraceError
        from ..io.topo import parse_topo_matrix
        text = text if text is not None else QApplication.clipboard().text()
        try:
            topo = parse_topo_matrix(text, "pasted")
        except TraceError as e:
            self._failed(f"The clipboard does not hold `nvidia-smi topo -m` output ({e.problem})")
            return False
        self.set_topology(topo)
        return True

    def set_topology(self, topo) -> None:
        if self.trace is not None:
            self.trace.topology = topo
        self._show_topology()
        if self.trace is not None and len(self.trace):
            self.run_analysis(block=getattr(self, "_block_analysis", False))

    def _show_topology(self) -> None:
        topo = getattr(self.trace, "topology", None) if self.trace is not None else None
        if topo is None:
            self.topology.set_topology(None)
            return
        from ..analysis.topology import rank_gpus
        ranks_of_gpu: dict[str, list[int]] = {}
        if len(self.trace):
            for r, gs in rank_gpus(self.trace).items():
                for g in gs:
                    ranks_of_gpu.setdefault(g, []).append(r)
        comm = None
        if self.analysis is not None:
            comm = self.analysis.get("comm")
        self.topology.set_topology(topo, ranks_of_gpu, comm)
        self.topology_dock.show()
        self.topology_dock.raise_()
        if not len(self.trace):  # a topology alone: give it the room
            self.resizeDocks([self.topology_dock], [max(600, int(self.width() * 0.75))], Qt.Horizontal)

    # -- analysis ---------------------------------------------------------------------------
    def run_analysis(self, block: bool = False) -> None:
        self.analysis = None
        self.findings.set_findings([])
        if self.trace is None:
            return
        if block:
            from ..run_analysis import analyze_session
            try:
                self._analysis_done(analyze_session(self.trace), self.trace)
            except Exception as e:  # noqa: BLE001 - a failed analysis must not break viewing
                self.findings.set_busy(f"analysis failed: {type(e).__name__}: {e}")
            return
        self.findings.set_busy("analysing…")
        th = _AnalysisThread(self.trace, self)
        th.done.connect(self._analysis_done)
        th.failed.connect(lambda m: self.findings.set_busy(f"analysis failed: {m}"))
        self._analysis_thread = th
        th.start()

    def _analysis_done(self, a: dict, trace) -> None:
        if trace is not self.trace:
            return  # a newer session replaced it
        self.analysis = a
        self.queries.set_analysis(trace, a)
        self.findings.set_findings(a["findings"])
        kc = a.get("_kernel_collectives") or {}
        self.details.collectives = kc
        if self.timeline.item is not None:
            self.timeline.item.set_comm_waits(kc)
        self.overview.set_analysis(a)
        self.ranks_view.set_analysis(a, {r.rank: r.host for r in trace.ranks if r.host})
        if getattr(trace, "topology", None) is not None:
            self._show_topology()
        self.analysisReady.emit(a)

    def show_finding(self, f: dict) -> None:
        """Zoom to the finding's range on its ranks and highlight the evidence."""
        if self.trace is None:
            return
        self.timeline.set_range(f["start_ns"], f["end_ns"], padding=0.08)
        item = self.timeline.item
        if item is not None:
            item.highlight = (f["start_ns"], f["end_ns"], set(f["ranks"]))
            item.update()
        rank = f["ranks"][0] if f["ranks"] else None
        lm = self.timeline.layout_model
        if rank is not None and lm is not None:
            hdr = next((r for r in lm.rows if r.kind == "header" and r.rank == rank), None)
            if hdr is not None:
                self.timeline.scroll.setValue(int(hdr.y * 10))
        from ..analysis.results import evidence_of
        ev = evidence_of(f)
        if ev and rank is not None:
            i = self._find_event(ev[0]["name"], rank, f["start_ns"], f["end_ns"])
            if i is not None:
                self.timeline.select(i)
                self.timeline.scroll_to_lane(int(self.trace.columns["lane"][i]))

    def _find_event(self, name: str, rank: int, t0: int, t1: int):
        import numpy as np
        try:
            nid = self.trace.names.index(name)
        except ValueError:
            return None
        c = self.trace.columns
        lanes = self.trace.lanes_of_rank(rank)
        best = None
        for ln in lanes:
            sl = self.trace.lane_slice(ln)
            names = np.asarray(c["name"][sl])
            hit = np.flatnonzero(names == nid)
            for k in hit:
                i = sl.start + int(k)
                s = int(c["start"][i])
                if t0 <= s <= t1 and (best is None or int(c["dur"][i]) > int(c["dur"][best])):
                    best = i
        return best

    # -- recent files, drag and drop ----------------------------------------------------------
    def _recent(self) -> list[list[str]]:
        import json
        try:
            v = json.loads(self.settings.value("recent", "[]"))
            return [r for r in v if isinstance(r, list)]
        except (TypeError, ValueError):
            return []

    def _add_recent(self, paths: list[str]) -> None:
        import json
        r = [x for x in self._recent() if x != paths]
        r.insert(0, paths)
        self.settings.setValue("recent", json.dumps(r[:MAX_RECENT]))
        self._fill_recent()

    def _fill_recent(self) -> None:
        self.recent_menu.clear()
        for paths in self._recent():
            label = " + ".join(os.path.basename(p) for p in paths)
            self.recent_menu.addAction(label, lambda _=False, ps=paths: self.open_paths(ps))
        self.recent_menu.setEnabled(bool(self._recent()))

    def dragEnterEvent(self, ev) -> None:
        if ev.mimeData().hasUrls():
            ev.acceptProposedAction()

    def dropEvent(self, ev) -> None:
        paths = [u.toLocalFile() for u in ev.mimeData().urls() if u.isLocalFile()]
        if paths:
            self.open_paths(paths)
            ev.acceptProposedAction()

    # -- steps, status ------------------------------------------------------------------------
    def _rank0_steps(self):
        if self.trace is None or not self.trace.steps:
            return []
        r0 = self.trace.ranks[0].rank
        return [s for s in self.trace.steps if s.rank == r0]

    def hosts_dialog(self) -> None:
        """Say which ranks share a host's clock ("0-3,4-7"; empty: from the files)."""
        from PySide6.QtWidgets import QInputDialog
        text, ok = QInputDialog.getText(self, "Hosts", "Ranks per host, e.g. 0-3,4-7 (empty: found from the files):",
                                        text=self.loader.hosts or "")
        if ok:
            self.set_hosts(text.strip() or None)

    def set_hosts(self, spec: str | None) -> None:
        self.loader.hosts = spec
        if self.trace is not None and self.paths:
            self.open_paths(list(self.paths), block=getattr(self, "_block_analysis", False))

    def set_align(self, on: bool) -> None:
        """The switch for clock alignment: the open session is opened again with or without it."""
        self.loader.align = bool(on)
        if self.trace is not None and self.paths:
            self.open_paths(list(self.paths), block=getattr(self, "_block_analysis", False))

    def goto_rank_step(self, rank: int, step: int) -> None:
        """From the rank overview: that step on the timeline, scrolled to that rank."""
        self.goto_step(step)
        lm = self.timeline.layout_model
        hdr = next((r for r in lm.rows if r.kind == "header" and r.rank == rank), None) if lm else None
        if hdr is not None:
            self.timeline.scroll.setValue(int(hdr.y * 10))

    def goto_step(self, n: int) -> None:
        if self.trace is None:
            return
        same = [s for s in self.trace.steps if s.step == n]
        if same:
            self.timeline.set_range(min(s.start for s in same), max(s.end for s in same), padding=0.02)

    def step_nav(self, direction: int) -> None:
        steps = self._rank0_steps()
        if not steps:
            return
        t0, t1 = self.timeline.visible_range()
        mid = (t0 + t1) / 2
        ordered = sorted(steps, key=lambda s: s.start)
        if direction > 0:
            nxt = next((s for s in ordered if s.start > mid), ordered[-1])
        else:
            nxt = next((s for s in reversed(ordered) if s.end < mid), ordered[0])
        self.step_box.blockSignals(True)
        self.step_box.setValue(nxt.step)
        self.step_box.blockSignals(False)
        self.goto_step(nxt.step)

    def _range_changed(self, t0: int, t1: int) -> None:
        if self.trace is None:
            return
        o0 = self.timeline.origin
        self.memory.follow(t0 - o0, t1 - o0)
        o = self.trace.start_ns
        self.status_range.setText(f"visible {format_ns(t0 - o)} – {format_ns(t1 - o)}  ({format_duration(t1 - t0)})")

    def _area(self, lanes: list[int], t0: int, t1: int) -> None:
        if self.trace is not None:
            self.area.show_area(self.trace, lanes, t0, t1)
            self.area_dock.show()
            self.area_dock.raise_()

    def _memory_cursor(self, t: int) -> None:
        item = self.timeline.item
        if item is not None:
            item.cursor_ns = t
            item.update()

    def _goto_event(self, i: int) -> None:
        self.timeline.select(i)
        self.timeline.center_on(i)

    def _toggle_steps(self, on: bool) -> None:
        if self.timeline.item is not None:
            self.timeline.item.show_steps = on
            self.timeline.item.update()

    def _set_renderer(self, mode: str) -> None:
        self.settings.setValue("renderer", mode)
        self.timeline.apply_renderer(mode)

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
