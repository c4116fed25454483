"""The critical path in the window: the Critical path tab lists the path of the step in view
(its segments in order: rank, resource, what, duration, share of the step; "bound by ..." over
them), a click on a segment goes to it; View > Show critical path (C) outlines every step's path
on the timeline (render/critical_path_item.py).

The paths come with the analysis (computed on its worker); placing their segments on lanes
(session.critical_view) runs on a thread of its own, the tab saying so meanwhile. The outline
starts off: it boxes whole host-thread lanes for most of a step, over the slices a user reads
first, so it is shown on demand (C, or a click on a segment) and the choice is remembered.
"""

from __future__ import annotations

import shiboken6
from PySide6.QtCore import QObject, Qt, QThread, Signal, Slot
from PySide6.QtGui import QAction, QKeySequence
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QTreeWidget,
    QTreeWidgetItem,
    QVBoxLayout,
    QWidget,
)

from ..model.fmt import esc
from ..render.critical_path_item import PATH_COLOR
from ..session.critical_view import PathView, path_view
from .controller import keep_running
from .docks import dock

_SETTING = "critical_path"


class _Placing(QThread):
    """session.critical_view.path_view off the UI thread."""

    done = Signal(object, object)  # the PathView (or None), the analysis it was made from

    def __init__(self, trace, analysis, parent=None) -> None:
        super().__init__(parent)
        self.trace, self.analysis = trace, analysis

    def run(self) -> None:
        self.done.emit(path_view(self.trace, self.analysis), self.analysis)


class CriticalPathPanel(QWidget):
    segmentChosen = Signal(int)  # index into the PathView's arrays
    stepChosen = Signal(int)  # a step picked in the list of steps: the timeline goes there

    def __init__(self, parent=None) -> None:
        super().__init__(parent)
        self.view: PathView | None = None
        self.step: int | None = None
        self._several = 0  # how many steps wholly in view (several: the one listed is the longest)
        self._warm_in = False  # a warm-up step among them, left aside
        self.hold = False  # going to one of its segments: the list stays on its step
        self.head = QLabel("Open a trace: each step's critical path comes with its analysis.")
        self.head.setWordWrap(True)
        self.head.setTextFormat(Qt.RichText)
        self.outline = QCheckBox("Outline on the timeline (C)")
        # every step's path is here: the list follows the step in view, this picks another
        self.steps = QComboBox()
        self.steps.setToolTip("The step whose path is listed: the one in view, or pick one (the timeline goes there)")
        self.steps.setSizeAdjustPolicy(QComboBox.AdjustToContents)
        self.steps.activated.connect(self._step_picked)
        self.steps.setVisible(False)
        top = QHBoxLayout()
        top.addWidget(self.head, 1)
        top.addWidget(self.steps)
        top.addWidget(self.outline)
        self.tree = QTreeWidget()
        self.tree.setHeaderLabels(["#", "Rank", "Resource", "What", "Duration", "Share"])
        self.tree.setRootIsDecorated(False)
        self.tree.setAlternatingRowColors(True)
        self.tree.setTextElideMode(Qt.ElideMiddle)
        for c, w in enumerate((34, 48, 70, 420, 90, 60)):
            self.tree.setColumnWidth(c, w)
        hd = self.tree.header()  # "What" takes the room, so duration and share stay beside it
        hd.setStretchLastSection(False)
        hd.setSectionResizeMode(3, QHeaderView.Stretch)
        # a click on a header sorts by it (the longest segments first: negative_queue's 64 ms idle
        # stretch was row 150 of 300 in path order); # restores the path's order
        self.tree.setSortingEnabled(True)
        self.tree.sortByColumn(0, Qt.AscendingOrder)
        self.tree.itemActivated.connect(self._chosen)
        self.tree.itemClicked.connect(self._chosen)
        lay = QVBoxLayout(self)
        lay.setContentsMargins(4, 4, 4, 4)
        lay.addLayout(top)
        lay.addWidget(self.tree, 1)

    def say(self, html: str) -> None:
        """A note in place of the list (computing, or why there is no path)."""
        self.view, self.step, self._several = None, None, 0
        self.tree.clear()
        self.steps.clear()
        self.steps.setVisible(False)
        self.head.setText(html)

    def set_view(self, view: PathView | None, why: str = "") -> None:
        self.view, self.step, self._several = view, None, 0
        if view is None:
            self.say(esc(why or "No critical path for this session."))
            return
        self.steps.clear()
        for n, sp in sorted(view.steps.items()):
            self.steps.addItem(f"step {n}{' (warm-up)' if sp.warmup else ''} · {sp.duration_ns / 1e6:,.1f} ms", n)
        self.steps.setVisible(self.steps.count() > 1)

    def _step_picked(self, i: int) -> None:
        n = self.steps.itemData(i)
        if n is not None:
            self.show_step(int(n))
            self.stepChosen.emit(int(n))

    def show_step(self, step: int | None, whole: int = 0, warm_in: bool = False) -> None:
        """List that step's path (a step with none: the nearest said); whole: how many steps lie
        wholly in view (several: the one listed is the longest of them, and said so)."""
        v = self.view
        if (
            v is None
            or step is None
            or step not in v.steps
            or (step, whole, warm_in) == (self.step, self._several, self._warm_in)
        ):
            return
        self.step, self._several, self._warm_in = step, whole, warm_in
        sp = v.steps[step]
        warm = " (warm-up)" if sp.warmup else ""
        many = len(v.steps) > 1
        rows = v.rows(step)
        # the whole capture in view showed 'Step 3 (the step most in view)' beside nine steps
        which = (
            f" (the longest path of the {whole} steps in view{', warm-up aside' if warm_in and not sp.warmup else ''}: pick another above)"
            if whole > 1
            else " (the step most in view)"
        )
        # a capture without steps is one 'step' of the analysis: said as the capture (alexnet's
        # 'Step 0' beside a status line saying it has none; an audit of the window)
        title = "The capture (no steps)" if v.whole else f"Step {step}"
        self.head.setText(
            f"<b>{title}</b>{warm}{which if many else ''} · {sp.duration_ns / 1e6:,.2f} ms · "
            f"bound by <b>{esc(sp.bound_by)}</b>"
            + (f" · the job: {esc(v.bound_by)}" if v.bound_by and many else "")
            # a session of one step (a whole capture): the job's verdict is the step's, not said twice
            + f"<br>{esc(_shares(rows))}"
            # the verdict leaves the capture's start-up out, the path listed does not: said, or
            # saxpy's 512 ms cudaHostRegister (before the GPU's first op) read as judged (a review)
            + (
                "; the path, its time and shares: the whole capture, start-up and teardown included"
                if v.whole and "left out" in sp.bound_by
                else ""
            )
        )
        k = self.steps.findData(step)
        if k >= 0 and k != self.steps.currentIndex():
            self.steps.blockSignals(True)
            self.steps.setCurrentIndex(k)
            self.steps.blockSignals(False)
        self.tree.clear()
        items = []
        for n, r in enumerate(rows, 1):
            it = _Row(
                [
                    str(n),
                    str(r["rank"]),
                    r["resource"],
                    r["what"],
                    f"{r['duration_ms']:,.3f} ms",
                    f"{100 * r['share']:.1f}%",
                ]
            )
            it.setData(0, Qt.UserRole, r["index"])
            it.keys = (n, r["rank"], r["resource"], r["what"], r["duration_ms"], r["share"])
            it.setToolTip(3, r["what"])
            for c in (0, 1, 4, 5):
                it.setTextAlignment(c, Qt.AlignRight | Qt.AlignVCenter)
            items.append(it)
        self.tree.addTopLevelItems(items)
        # the numbers whole: the duration column as wide as its widest value (alexnet's 29,935.198 ms
        # was elided to '29,93…98 ms' in a column sized for '0.012 ms'; an audit of the window)
        fm = self.tree.fontMetrics()
        widest = max((fm.horizontalAdvance(it.text(4)) for it in items), default=0)
        self.tree.setColumnWidth(4, max(90, widest + 16))

    def follow(self, t0: int, t1: int) -> None:
        """The step the view shows (PathView.step_in)."""
        if self.view is not None and not self.hold:
            v = self.view
            inside = [n for n, (lo, hi) in v.windows.items() if t0 <= lo and hi <= t1 and n in v.steps]
            if len(inside) > 1:  # several steps wholly in view: the longest path, a profiled step's
                # (by the windows' spans, a normal step after a stall won over the stalled one)
                pick = [n for n in inside if not v.steps[n].warmup] or inside
                warm_in = len(pick) < len(inside)
                self.show_step(max(pick, key=lambda n: (v.steps[n].duration_ns, -n)), len(inside), warm_in)
                return
            sp = self.view.step_in(t0, t1)
            self.show_step(sp.step if sp is not None else None)

    def _chosen(self, item, _col=0) -> None:
        i = item.data(0, Qt.UserRole)
        if i is not None:
            self.segmentChosen.emit(int(i))


class _Row(QTreeWidgetItem):
    """A segment's row, sorted by its numbers (duration, share, rank, place), not their text."""

    keys: tuple = ()

    def __lt__(self, other) -> bool:
        c = self.treeWidget().sortColumn() if self.treeWidget() is not None else 0
        if isinstance(other, _Row) and self.keys and other.keys:
            return self.keys[c] < other.keys[c]
        return super().__lt__(other)


def _shares(rows: list[dict]) -> str:
    """The path's time by rank and resource, largest first (pp_gpu's 753 segments, one in two a
    0.001 ms memset, said what held the step only row by row)."""
    tot: dict[tuple[int, str], float] = {}
    for r in rows:
        k = (r["rank"], r["resource"])
        tot[k] = tot.get(k, 0.0) + r["share"]
    top = sorted(tot.items(), key=lambda kv: -kv[1])
    said = [f"rank {k[0]} {k[1]} {v:.0%}" for k, v in top[:4] if v >= 0.005]
    return "on the path: " + ", ".join(said) + (", ..." if len(top) > len(said) else "") if said else ""


class CriticalPathDock(QObject):
    """The tab beside Findings, the View menu's toggle, and their wiring to the window (a
    QObject living on the UI thread: the placing thread's result is queued to it)."""

    def __init__(self, win, beside) -> None:
        super().__init__(win)
        self.win = win
        self.panel = CriticalPathPanel()
        self.dock = dock(win, "Critical path", self.panel, Qt.BottomDockWidgetArea)
        win.tabifyDockWidget(beside, self.dock)
        self.action = QAction("Show critical path", win, checkable=True)
        self.action.setShortcut(QKeySequence("C"))
        self.action.setToolTip("Outline each step's critical path on the timeline")
        self.action.setChecked(str(win.settings.value(_SETTING, "false")) == "true")
        self.action.toggled.connect(self.set_shown)
        # the choice is remembered, so a trace can open with the outline on: said for as long as
        # it is, with a way out (red boxes over every step read as part of the trace; a review)
        self.badge = QLabel(
            f"<span style='color:{PATH_COLOR.name()}'>&#9632;</span> critical path (<a href='off'>hide</a>)"
        )
        self.badge.setTextFormat(Qt.RichText)
        self.badge.setToolTip("Each step's critical path is outlined on the timeline (C or View > Show critical path)")
        self.badge.linkActivated.connect(lambda _l: self.action.setChecked(False))
        self.badge.setContentsMargins(0, 0, 10, 0)
        win.statusBar().addPermanentWidget(self.badge)
        self.badge.hide()  # shown with a trace (reset)
        win.addAction(self.action)  # the key works with the menu closed
        self.panel.outline.setChecked(self.action.isChecked())
        self.panel.outline.toggled.connect(self.action.setChecked)
        self.panel.segmentChosen.connect(self.goto_segment)
        self.panel.stepChosen.connect(lambda n: win.goto_step(n))
        self.view: PathView | None = None
        self._threads: list[_Placing] = []

    def wire(self, controller) -> None:
        controller.loaded.connect(lambda _s: self.reset())
        controller.analysisReady.connect(self.analysis_ready)
        controller.rangeChanged.connect(self.panel.follow)

    # -- the paths -------------------------------------------------------------------------
    def reset(self) -> None:
        self.view = None
        self.badge.setVisible(self.action.isChecked())
        self.panel.say("Each step's critical path comes with the analysis (running)…")
        self._apply()

    def analysis_ready(self, analysis) -> None:
        trace = self.win.trace
        if trace is None or analysis is None:
            return
        if not getattr(analysis, "steps", None):
            why = next((n for n in analysis.notes if "critical path" in n), "no steps on record")
            self.view = None
            self.panel.set_view(None, f"No critical path: {why}.")
            self._apply()
            return
        self.panel.say("Placing each step's critical path on the lanes…")
        if self.win.controller.block_analysis:  # headless renders and tests: here, now
            self._placed(path_view(trace, analysis), analysis)
            return
        # no parent: a window closed meanwhile does not destroy a running thread; kept here
        # until it ends
        th = _Placing(trace, analysis)
        keep_running(th)  # held until it ends, whatever becomes of this panel
        th.done.connect(self._placed)
        self._threads = [t for t in self._threads if not t.isFinished()] + [th]
        th.start()

    @Slot(object, object)
    def _placed(self, view, analysis) -> None:
        if not shiboken6.isValid(self.win):  # the window closed while it ran
            return
        s = self.win.session
        if s is None or s.analysis_ready is not analysis:  # a session or analysis since: stale
            return
        self.view = view
        self.panel.set_view(view)
        if s.view.range is not None:
            self.panel.follow(*s.view.range)
        self._apply()

    def wait(self) -> None:
        """Until the placing thread (if any) has handed its paths over (tests, exports)."""
        for th in list(self._threads):
            th.wait()
        from PySide6.QtCore import QCoreApplication

        QCoreApplication.processEvents()

    # -- the outline -----------------------------------------------------------------------
    def set_shown(self, on: bool) -> None:
        self.win.settings.setValue(_SETTING, "true" if on else "false")
        self.badge.setVisible(on and self.win.trace is not None)
        if self.panel.outline.isChecked() != on:
            self.panel.outline.setChecked(on)
        if on and self.view is None and self.win.trace is not None:
            self.win.statusBar().showMessage(
                "The critical path is outlined once the analysis has found it "
                "(the Critical path tab says how far it is)",
                8000,
            )
        self._apply()

    def _apply(self) -> None:
        item = self.win.timeline.item
        if item is not None:
            item.critical_path = self.view if self.action.isChecked() else None
            item.update()

    def goto_segment(self, i: int) -> None:
        """Zoom to a segment, its rank's lanes scrolled into view and its span highlighted on
        that rank; the outline is shown (it is what the segment is)."""
        v, s = self.view, self.win.session
        if v is None or s is None:
            return
        t0, t1, rank = int(v.start[i]), int(v.end[i]), int(v.rank[i])
        if not self.action.isChecked():
            self.action.setChecked(True)
        ev = int(v.event[i]) if v.event is not None else -1
        z0, z1 = t0, t1
        if ev >= 0:
            # the op it names whole in view, not cut at the segment's edge (ddp's sleep began 16 ms
            # before its segment; 'sleep 34.2 ms of it' beside a 50.1 ms op cut on the left; an
            # audit of the window): the segment stays the highlight
            c = s.trace.columns
            z0, z1 = min(t0, int(c["start"][ev])), max(t1, int(c["start"][ev]) + int(c["dur"][ev]))
        self.panel.hold = True
        try:
            s.set_range(z0, z1, padding=0.15)
        finally:
            self.panel.hold = False
        s.set_highlight((t0, t1, {rank}))
        lane = int(v.lane[i])
        tl = self.win.timeline
        if ev >= 0 and tl.layout_model is not None:
            # the op the segment names, selected: its group and deeper rows unfold (fsdp's lm_step
            # lies 171 rows down its thread's lane, under frames the profiler never closed)
            s.select(ev)
            tl.scroll_to_event(ev)
        elif lane >= 0 and tl.layout_model is not None:
            tl.reveal_lane(lane)  # a host segment's thread, unfolded from its rank's Host group
        else:
            tl.scroll_to_rank(rank)
