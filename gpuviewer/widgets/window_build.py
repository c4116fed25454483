"""How the main window is put together: the timeline in the centre, the docks around it, the
menus, the steps toolbar and the status bar, and the signals between them. The window's
behaviour lives in its mixins (window_notes, window_analysis, window_nav) and main_window."""

from __future__ import annotations

from PySide6.QtCore import QSize, Qt
from PySide6.QtGui import QAction, QKeySequence
from PySide6.QtWidgets import QLabel, QMainWindow, QMessageBox, QSpinBox, QStatusBar, QToolBar

from .. import __version__
from .annotations_panel import AnnotationsPanel
from .area_table import AreaTable
from .details import DetailsPanel
from .docks import dock
from .findings_panel import FindingsPanel
from .memory_panel import MemoryPanel
from .overview_panel import OverviewPanel
from .timeline_view import TimelineView
from .topology_view import TopologyView


class OneLineStatusBar(QStatusBar):
    """Messages shown as one line: a file name with a newline or escape characters in a message
    is shown escaped (\\x0a), never as a line of its own."""

    def showMessage(self, text: str, timeout: int = 0) -> None:  # noqa: N802 - Qt's name
        from ..model.plain import line

        super().showMessage(line(text), timeout)


def build(win) -> None:
    """The timeline and every dock, tabbed and sized for the screen."""
    win.setStatusBar(OneLineStatusBar())
    win.timeline = TimelineView(win)
    win.setCentralWidget(win.timeline)
    from .opening_cover import OpeningCover

    win.cover = OpeningCover(win.timeline)  # "open a trace", then the files opening with progress
    win.details = DetailsPanel()
    win.details_dock = dock(win, "Details", win.details, Qt.RightDockWidgetArea)
    win.area = AreaTable()
    win.area_dock = dock(
        win, "Selection", win.area, Qt.BottomDockWidgetArea
    )  # short: dock tab bars set the window's minimum width

    win.memory = MemoryPanel()
    win.memory_dock = dock(win, "Memory", win.memory, Qt.BottomDockWidgetArea)
    win.memory.cursorMoved.connect(win._memory_cursor)
    win.topology = TopologyView()
    win.topology_dock = dock(win, "Topology", win.topology, Qt.RightDockWidgetArea)
    win.annotations = AnnotationsPanel()
    win.annotations_dock = dock(win, "Annotations", win.annotations, Qt.RightDockWidgetArea)
    # the right column starts closed (an empty Details took a quarter of a laptop's width):
    # Details opens on the first selection, Topology with a topology, Annotations with a note
    for d in (win.details_dock, win.topology_dock, win.annotations_dock):
        d.hide()
    right_column_tabs(win, [win.details_dock, win.topology_dock, win.annotations_dock])
    win.findings = FindingsPanel()
    win.findings_dock = dock(win, "Findings", win.findings, Qt.BottomDockWidgetArea)
    win.overview = OverviewPanel()
    win.overview_dock = dock(win, "Overview", win.overview, Qt.BottomDockWidgetArea)
    from .rank_overview import RankOverview

    win.ranks_view = RankOverview()
    win.ranks_dock = dock(win, "Ranks", win.ranks_view, Qt.BottomDockWidgetArea)
    win.ranks_view.cellChosen.connect(win.goto_rank_step)
    win.memory_dock.hide()  # shown when the session has memory data
    # Bottom: the memory curve right under the timeline, then a tab group of findings,
    # overview and selection summary.
    # The right dock spans the full height so the bottom docks sit exactly under the timeline.
    win.setCorner(Qt.BottomRightCorner, Qt.RightDockWidgetArea)
    win.setCorner(Qt.TopRightCorner, Qt.RightDockWidgetArea)
    win.splitDockWidget(win.memory_dock, win.findings_dock, Qt.Vertical)
    win.tabifyDockWidget(win.findings_dock, win.overview_dock)
    win.tabifyDockWidget(win.findings_dock, win.ranks_dock)
    win.tabifyDockWidget(win.findings_dock, win.area_dock)
    from .query_docks import QueryDocks

    win.queries = QueryDocks(win, win.findings_dock)  # SQL and Statistics tabs
    from .efficiency_panel import EfficiencyDock

    win.efficiency = EfficiencyDock(win, win.findings_dock)  # kernels by op family, roofline
    from .critical_path_panel import CriticalPathDock

    win.critical = CriticalPathDock(win, win.findings_dock)  # each step's critical path, its outline
    win.findings_dock.raise_()
    from .window_fit import fit_to_screen

    fit_to_screen(win, win.settings)  # the screen it opens on, or the last geometry there
    win.setDockOptions(QMainWindow.AnimatedDocks | QMainWindow.AllowNestedDocks | QMainWindow.AllowTabbedDocks)
    tabs_scroll(win)


def right_column_tabs(win, docks: list) -> None:
    """The right column's docks become tabs of one another as they open, not while all are
    closed: Qt 6.11 gives a closed tab group's tab bar to the next group tabbed (the bottom one)
    and leaves it standing, a stray "Findings | Overview" bar over the bottom docks."""
    busy = []

    def opened(d, visible: bool) -> None:
        if not visible or busy or d.isFloating():
            return
        beside = next((x for x in docks if x is not d and x.isVisible() and not x.isFloating()), None)
        if beside is None or d in win.tabifiedDockWidgets(beside):
            return
        busy.append(d)  # tabbing changes visibility again
        try:
            win.tabifyDockWidget(beside, d)
            d.raise_()
        finally:
            busy.clear()

    for d in docks:
        d.visibilityChanged.connect(lambda v, d=d: opened(d, v))


def tabs_scroll(win) -> None:
    """Dock tab bars scroll (and elide) rather than make the window wider than the screen."""
    from PySide6.QtWidgets import QTabBar

    for tb in win.findChildren(QTabBar):
        tb.setUsesScrollButtons(True)
        tb.setElideMode(Qt.ElideRight)


def wire(win) -> None:
    """The bars, and the signals from the controller (the session's events) to the panels and
    from the panels to the session."""
    c = win.controller
    win.critical.wire(c)  # first: its reset on a new session runs before _loaded starts the analysis
    c.progress.connect(win._progress)
    c.loaded.connect(win._loaded)
    c.failed.connect(win._failed)
    c.rangeChanged.connect(win._range_changed)
    c.selectionChanged.connect(win.details.show_event)
    c.selectionChanged.connect(lambda i: open_details(win) if i is not None else None)
    c.annotationsChanged.connect(win._apply_annotations)
    c.topologyChanged.connect(win._show_topology)
    c.analysisReady.connect(win._analysis_done)
    c.analysisBusy.connect(win.findings.set_busy)
    c.message.connect(lambda text, error: win.statusBar().showMessage(text, 10000 if error else 15000))
    win.annotations.jumpTo.connect(win.goto_annotation)
    win.annotations.editRequested.connect(win._edit_annotation)
    win.annotations.removeRequested.connect(win._remove_annotation)

    menus(win)
    steps_toolbar(win)
    status(win)
    win.timeline.areaSelected.connect(win._area)
    win.timeline.helpRequested.connect(win.show_shortcuts)
    win.details.linkActivated.connect(win._goto_event)
    win.findings.findingActivated.connect(win.show_finding)
    win.timeline.markRequested.connect(win.mark)
    win.timeline.contextRequested.connect(win._timeline_menu)
    from PySide6.QtCore import QTimer

    realign = QTimer(win)  # the memory plot rebuilt once a drag of the label column pauses, not per pixel
    realign.setSingleShot(True)
    realign.setInterval(80)
    realign.timeout.connect(win._realign_memory)
    win.timeline.labelsResized.connect(lambda _w: realign.start())
    from PySide6.QtGui import QShortcut

    # Ctrl+F finds on the timeline from anywhere in the window (the SQL editor included)
    QShortcut(QKeySequence.Find, win, activated=win.timeline.focus_search)
    from .window_fit import follow_tabs

    follow_tabs(win)


def open_details(win) -> None:
    """The Details dock, opened at its width the first time something is selected."""
    d = win.details_dock
    if not d.isVisible():
        d.show()
        d.raise_()
        from PySide6.QtCore import QTimer

        from .window_fit import size_right

        size_right(win)
        QTimer.singleShot(0, win, lambda: size_right(win))  # again once the dock is laid out


def menus(win) -> None:
    """File, Edit, View and Help."""
    m = win.menuBar().addMenu("&File")
    m.addAction("&Open files…", QKeySequence.Open, win.open_dialog)
    m.addAction("Open &folder…", win.open_folder_dialog)
    win.recent_menu = m.addMenu("Open &recent")
    win._fill_recent()
    m.addSeparator()
    from .compare_actions import compare_rank, compare_with_dialog, compare_with_folder_dialog

    m.addAction("&Compare with…", lambda: compare_with_dialog(win))
    m.addAction("Compare with fol&der…", lambda: compare_with_folder_dialog(win))
    win.findings.compareRank.connect(lambda r: compare_rank(win, r))
    m.addAction("Export &image…", win.export_image_dialog)
    m.addAction("Copy image to clipboard", win.copy_image)
    m.addAction("Export &report…", win.export_report_dialog)
    m.addSeparator()
    m.addAction("&Quit", QKeySequence.Quit, win.close)
    e = win.menuBar().addMenu("&Edit")
    e.addAction("Paste topology (nvidia-smi topo -m)", win.paste_topology)
    v = win.menuBar().addMenu("&View")
    v.addAction("Fit all", win.timeline.fit_all)
    v.addAction("Collapse all ranks", lambda: win.timeline.collapse_ranks(True))
    v.addAction("Expand all ranks", lambda: win.timeline.collapse_ranks(False))
    win.steps_action = QAction("Show step boundaries", win, checkable=True, checked=True)
    win.steps_action.toggled.connect(win._toggle_steps)
    v.addAction(win.steps_action)
    v.addAction(win.critical.action)
    v.addAction(win.details_dock.toggleViewAction())
    v.addAction(win.area_dock.toggleViewAction())
    v.addAction(win.findings_dock.toggleViewAction())
    v.addAction(win.memory_dock.toggleViewAction())
    v.addAction(win.topology_dock.toggleViewAction())
    v.addAction(win.annotations_dock.toggleViewAction())
    v.addAction(win.overview_dock.toggleViewAction())
    v.addAction(win.ranks_dock.toggleViewAction())
    v.addAction(win.critical.dock.toggleViewAction())
    win.align_action = v.addAction("Align host clocks by collectives")
    win.align_action.setCheckable(True)
    win.align_action.setChecked(True)
    win.align_action.toggled.connect(win.set_align)
    v.addAction("Hosts (which ranks share a clock)…", win.hosts_dialog)
    r = v.addMenu("Renderer")
    for mode, label in (
        ("auto", "Automatic (GPU if it is real hardware)"),
        ("opengl", "OpenGL"),
        ("raster", "Raster (CPU)"),
    ):
        a = QAction(label, win, checkable=True, checked=win.settings.value("renderer", "auto") == mode)
        a.triggered.connect(lambda _=False, md=mode: win._set_renderer(md))
        r.addAction(a)
    o = v.addMenu("When files are opened from another start")
    for mode, label in (("replace", "Replace this session"), ("new-window", "Open a new window")):
        a = QAction(label, win, checkable=True, checked=str(win.settings.value("open_in", "replace")) == mode)
        a.triggered.connect(lambda _=False, md=mode: win.settings.setValue("open_in", md))
        o.addAction(a)
    si = QAction(
        "One window for all starts (single instance)",
        win,
        checkable=True,
        checked=str(win.settings.value("single_instance", "true")) == "true",
    )
    si.toggled.connect(lambda on: win.settings.setValue("single_instance", "true" if on else "false"))
    v.addAction(si)
    h = win.menuBar().addMenu("&Help")
    h.addAction("Keyboard shortcuts  ?", win.show_shortcuts)
    h.addAction("About", lambda: QMessageBox.about(win, "gpuviewer", f"gpuviewer {__version__}"))


class _CornerBar(QToolBar):
    """The steps' bar in the menu bar's corner, asking for its widgets' width and some more: the
    menu bar places a corner widget by its size hint, so a minimum width beyond it ran past the
    window's right edge (HTA's 'go to step 551' lost its arrows and its step count; a review),
    and a hint of the widgets' width alone put the last of them behind a » button."""

    def sizeHint(self):  # noqa: N802 - Qt's name
        s = super().sizeHint()
        return QSize(s.width() + 40, s.height())


def steps_toolbar(win) -> None:
    """Previous / next step and go to step N."""
    tb = _CornerBar("Steps", win)
    tb.setObjectName("steps")
    # in the menu bar's free right end, not a row of its own: 34 px more for the timeline
    tb.setStyleSheet("QToolBar { border: 0; padding: 0; spacing: 2px; }")
    win.menuBar().setCornerWidget(tb, Qt.TopRightCorner)
    prev = tb.addAction("◀ step", lambda: win.step_nav(-1))
    prev.setShortcut(QKeySequence("["))
    prev.setToolTip("Previous step: zoom to it ( [ )")
    nxt = tb.addAction("step ▶", lambda: win.step_nav(+1))
    nxt.setShortcut(QKeySequence("]"))
    nxt.setToolTip("Next step: zoom to it ( ] )")
    go = QLabel(" go to step ")
    go.setToolTip("Zoom to a step by its number (ProfilerStep#N, NVTX step N)")
    tb.addWidget(go)
    win.step_box = QSpinBox()
    win.step_box.setToolTip("The step to zoom to")
    win.step_box.setRange(0, 0)
    win.step_box.setKeyboardTracking(False)
    win.step_box.valueChanged.connect(win.goto_step)
    # Enter on the number already shown goes there too (valueChanged stays silent for it; not on
    # losing focus, which editingFinished also reports)
    win.step_box.lineEdit().returnPressed.connect(lambda: win.goto_step(win.step_box.value()))
    tb.addWidget(win.step_box)
    win.step_label = QLabel("")
    win.step_label.setToolTip("Profiled steps in this session")
    tb.addWidget(win.step_label)


def status(win) -> None:
    """Files and ranks on the left; progress, Cancel and the visible range on the right."""
    sb = win.statusBar()
    win.status_files = QLabel("")
    win.status_files.setTextFormat(Qt.RichText)
    win.status_files.linkActivated.connect(lambda _l: win.show_warnings())
    win.status_range = QLabel("")
    # the loading progress and Cancel are the cover's, in the timeline's place (opening_cover)
    win.progress, win.progress_msg, win.cancel_btn = win.cover.bar, win.cover.message, win.cover.cancel
    win.cancel_btn.clicked.connect(win.cancel_load)
    # permanent (right), so a message on the left never hides the session line and its warnings
    # link; a small minimum, so a long line (a summary's) is clipped rather than widening the window
    win.status_files.setMinimumWidth(40)
    win.status_files.setContentsMargins(0, 0, 10, 0)
    sb.addPermanentWidget(win.status_files)
    sb.addPermanentWidget(win.status_range)
