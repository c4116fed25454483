"""The main window: it lays out the timeline, docks, menus and status bar (window_build) around
one Session (gpuviewer.session, Qt-free: the trace, its analysis, the view state, annotations)
held by a Controller (loading and analysis off the UI thread, autosave, the session's events as
signals). What the user does goes to the session; the panels draw what it announces. The
mixins hold the window's side of annotations (window_notes), the analysis and topology
(window_analysis), and navigation and export (window_nav)."""

from __future__ import annotations

import os
import sys

from PySide6.QtCore import QSettings, Qt, Signal
from PySide6.QtWidgets import QFileDialog, QMainWindow, QMessageBox

from ..model.trace import Trace
from ..session import Session
from . import window_build
from .background import after_first_paint
from .controller import Controller
from .window_analysis import AnalysisMixin
from .window_nav import NavMixin
from .window_notes import NotesMixin


def compact_start(win, session) -> bool:
    """On a small screen, more than 4 ranks start as one summary row each (the late ranks of
    the top finding are opened when the analysis names them) unless the sidecar restored lanes."""
    from .window_fit import small

    view = session.notes.doc.view or {}
    if len(session.trace.ranks) <= 4 or not small(win) or view.get("lanes"):
        return False
    win.timeline.collapse_ranks(True)
    return True


_FILL_MIN_PX = 120  # a view lower than this is not laid out yet (or has no room to fill)


def fill_start(win, session) -> bool:
    """Where the screen has room, the ranks' folded host lanes open while every row still fits: each
    rank's host row (onto a row a kind), then each kind's lanes (NVTX, CUDA API, CPU, OS runtime)
    on every rank in turn. At 2560x1440 nsys_ddp left a third of the timeline empty while the top
    finding's sleep lay in a folded OS runtime group (an audit). Not over a view the sidecar
    restored, nor a compact start."""
    from ..model.categories import LaneKind

    view = session.notes.doc.view or {}
    tl = win.timeline
    lm = tl.layout_model
    if lm is None or view.get("lanes") or win._compact_start:
        return False
    room = tl._rows_visible()
    if lm.height > room:
        return False
    kinds = sorted(
        (LaneKind.CUDA_API, LaneKind.CPU, LaneKind.NVTX, LaneKind.OSRT, LaneKind.OTHER), key=LaneKind.ORDER.get
    )
    changed = False

    def folded(g: str) -> bool:  # a folded group's row on screen
        return lm.group_collapsed(g) and any(r.kind == "group" and r.group == g for r in lm.rows)

    def fits(do, undo) -> bool:
        """Apply a change to the layout's state and keep it if every row still fits; whether it did."""
        do()
        lm.rebuild()
        if lm.height > room:  # no room for it
            undo()
            lm.rebuild()
            return False
        return True

    def opened(g: str) -> bool:
        """Unfold group g if it is a folded group row and all still fits; whether it did."""
        return folded(g) and fits(
            lambda: lm.state.groups.__setitem__(g, False), lambda: lm.state.groups.__setitem__(g, True)
        )

    ranks = sorted({r.rank for r in session.trace.ranks})
    for rank in ranks:  # each rank's host row first, onto a row a kind...
        host = f"r{rank}/host"
        if folded(host):
            subs = {f"r{rank}/{k}": lm.state.groups.get(f"r{rank}/{k}") for k in kinds}
            for g in subs:  # its kinds' groups folded first: the host row opens onto a row each
                lm.state.groups[g] = True
            if not opened(host):
                for g, v in subs.items():  # as it was
                    if v is None:
                        lm.state.groups.pop(g, None)
                    else:
                        lm.state.groups[g] = v
                lm.rebuild()
                break
            changed = True
    for k in kinds:  # ...then each kind on every rank in turn: no rank takes all the room
        for rank in ranks:
            changed = opened(f"r{rank}/{k}") or changed
    # ...then the deeper rows of the lanes that show some, top down, where they fit (JAX's one host
    # thread kept 7 of its rows folded under two-thirds of an empty screen; an audit of the window)
    for r in [r for r in lm.rows if r.kind == "lane" and r.hidden_rows > 0]:
        key = session.trace.lanes[r.lane].key
        changed = fits(lambda k=key: lm.state.expanded.add(k), lambda k=key: lm.state.expanded.discard(k)) or changed
    if changed:
        tl._relayout()
        tl._lanes_edited()
    return changed


class MainWindow(NotesMixin, AnalysisMixin, NavMixin, QMainWindow):
    analysisReady = Signal(object)

    def __init__(self, settings: QSettings | None = None) -> None:
        super().__init__()
        self.setWindowTitle("gpuviewer")
        self.settings = settings or QSettings("gpuviewer", "gpuviewer")
        self.last_error: str | None = None
        self._compact_start = False  # ranks started collapsed: open the top finding's late ranks
        self._opening_said: tuple | None = None  # the opening view's status message and range
        self._fill_pending = False  # the host lanes to open where there is room, once shown (fill_start)
        # set by the command line and tests: log to stderr, keep errors off dialogs
        self.debug = False
        self.quiet_errors = False
        self.controller = Controller(self)
        self.loader = self.controller.loader
        self.setAcceptDrops(True)
        window_build.build(self)
        window_build.wire(self)
        self.controller.areaChanged.connect(self._show_area)

    # -- the session, as the window's callers name its parts --------------------------------
    @property
    def session(self) -> Session | None:
        return self.controller.session

    @property
    def trace(self) -> Trace | None:
        return self.session.trace if self.session is not None else None

    @property
    def paths(self) -> list[str]:
        return self.session.paths if self.session is not None else []

    @property
    def analysis(self):
        return self.session.analysis_ready if self.session is not None else None

    # -- opening --------------------------------------------------------------------------
    def open_dialog(self) -> None:
        files, _ = QFileDialog.getOpenFileNames(
            self, "Open traces", "", "Traces (*.json *.json.gz *.gz *.sqlite *.nsys-rep);;All files (*)"
        )
        if files:
            self.open_paths(files)

    def open_folder_dialog(self) -> None:
        d = QFileDialog.getExistingDirectory(self, "Open a folder of traces (one file per rank)")
        if d:
            self.open_paths([d])

    def open_paths(self, paths: list[str], block: bool = False, use_cache: bool = True) -> bool:
        """Open a session (Controller.open: block=True loads in this thread; use_cache=False
        only applies then). Topology files alone join the open session instead."""
        paths = [os.path.abspath(p) for p in paths]
        from .summary_window import is_summary_paths, open_summary

        if is_summary_paths(paths):  # a session summary (OUT.gvsum) opens its own way
            return open_summary(self, paths, block=block)
        from ..session.opening import companion_of

        if self.trace is not None and paths and all(os.path.isfile(p) and companion_of(p) == "topology" for p in paths):
            return self.attach_topology_files(paths)
        if not block:  # the files' names and a progress bar in the timeline's place, at once
            self.cover.opening(paths)
            from .opening_cover import names_of

            self.setWindowTitle(f"opening {names_of(paths)} — gpuviewer")
        return self.controller.open(paths, block=block, use_cache=use_cache)

    def cancel_load(self) -> None:
        self.loader.cancel()
        self._hide_progress()
        self.statusBar().showMessage("Loading cancelled", 4000)

    def _hide_progress(self) -> None:
        from .opening_cover import names_of

        if self.trace is not None:  # the session it was drawing, again
            self.cover.hide()
            self.setWindowTitle(f"{names_of(self.paths)} — gpuviewer")
        else:
            self.cover.empty()
            self.setWindowTitle("gpuviewer")

    def _progress(self, frac: float, msg: str) -> None:
        self.cover.progress(frac, msg)

    def _failed(self, msg: str) -> None:
        self._hide_progress()
        self.last_error = msg
        if self.debug:
            print(f"gpuviewer: {msg}", file=sys.stderr, flush=True)
        if not self.quiet_errors:
            from ..model.plain import line

            QMessageBox.warning(self, "Cannot open", line(msg))  # a file name's newline shown escaped

    def _loaded(self, session: Session) -> None:
        self._hide_progress()
        trace, paths = session.trace, session.paths
        if self.debug:
            print(f"gpuviewer: loaded {', '.join(paths)}: {trace.n_events} events", file=sys.stderr, flush=True)
        self.findings.set_findings([])
        self.timeline.set_session(session)
        self._show_area(*(session.view.area or (0, 0, [])))
        self.details.set_trace(trace)
        blocking = self.controller.block_analysis
        self.queries.set_session(session, compute=blocking)
        self._show_topology()
        self._show_memory(trace)
        steps = sorted({s.step for s in trace.steps})
        # the box holds 32-bit ints: steps past that (a trace numbering them 10^17 on) are
        # reached with [ and ] instead, said in its tooltip
        fits = not steps or (-(2**31) <= steps[0] and steps[-1] < 2**31)
        self.step_box.blockSignals(True)
        self.step_box.setRange(steps[0] if steps and fits else 0, steps[-1] if steps and fits else 0)
        self.step_box.blockSignals(False)
        self.step_box.setEnabled(fits)
        self.step_box.setToolTip(
            "The step to zoom to"
            if fits
            else "Step numbers too large for this box: use [ and ] to go through the steps"
        )
        self.step_label.setText(f"  {len(steps)} step{'s' if len(steps) != 1 else ''}" if steps else "  no steps")
        # the box widens for its range's digits: the bar in the menu's corner too (HTA's step 551
        # had its arrows and the step count cut at the window's edge; a review)
        bar = self.menuBar().cornerWidget(Qt.TopRightCorner)
        if bar is not None:
            bar.updateGeometry()
            self.menuBar().setCornerWidget(bar, Qt.TopRightCorner)  # placed again by its new hint
        from ..model.plain import line

        names = ", ".join(line(os.path.basename(p)) for p in paths)  # (control characters escaped)
        self.setWindowTitle(f"{names} — gpuviewer")
        from ..model.fmt import counted

        n_warn = len(trace.warnings)
        # the warnings are a link: a click lists them (a tooltip alone was never found)
        self.status_files.setText(
            f"{counted(len(trace.sources) or len(paths), 'file')} · "
            f"{counted(len(trace.ranks), 'rank')} · {counted(trace.n_events, 'event')}"
            + (f" · <a href='warnings'>{counted(n_warn, 'warning')}</a>" if n_warn else "")
        )
        from ..session import alignment_text

        self.status_files.setToolTip("\n".join(line(w) for w in [alignment_text(trace)] + list(trace.warnings)))
        if trace.metadata.get("alignment", {}).get("method") == "collectives":
            self.statusBar().showMessage(alignment_text(trace), 15000)
        from ..model.view import steps_view, warmup_step

        warm = warmup_step(trace)
        if warm is not None:  # opened on the steady steps: say where the warm-up went
            a0, _a1 = steps_view(trace)
            v0, _v1 = self.timeline.visible_range()
            # the time hidden, said as such: not the warm-up step's length, which the findings give
            # a rank whose warm-up step ends inside the view keeps its end in sight: 'most of'
            # (nsys_ddp's rank 1 ends step 0 at the view's left edge; an audit)
            tail = any(st.step == warm and st.end > v0 for st in trace.steps)
            # the key first: a narrow status bar cut 'Shift+Home shows them' off the end (a review)
            said = (
                f"Shift+Home shows the first {(v0 - a0) / 1e6:,.0f} ms, with "
                f"{'most of ' if tail else ''}warm-up step {warm}, left of the view (opened on the steady steps)"
            )
            self.statusBar().showMessage(said, 15000)
            self._opening_said = (said, self.timeline.visible_range())  # gone once the view moves
        unread = trace.metadata.get("unread") or []
        if unread:  # files or folders left out of the session: said before anything else
            self.statusBar().showMessage(
                unread[0] + (f" (and {len(unread) - 1} more)" if len(unread) > 1 else ""), 30000
            )
        self._add_recent(paths)
        session.open_annotations()  # and the view saved with them
        self._apply_annotations()
        self._compact_start = compact_start(self, session)
        # filled once the lanes have their height: now if shown, else at the first resize (a window
        # opened before it is shown, as a screenshot's, has a few rows of view at this point)
        laid_out = self.isVisible() and self.timeline.vb.height() >= _FILL_MIN_PX
        if laid_out:
            fill_start(self, session)
        self._fill_pending = not laid_out
        self._range_changed(*self.timeline.visible_range())
        if blocking:
            self.controller.run_analysis()
        else:
            # the analysis and statistics threads start after the session's first frame: their
            # imports and work took the interpreter from it (a second or more on a busy machine)
            def start(s=session) -> None:
                if self.session is s:
                    self.controller.run_analysis()
                    self.queries.stats.refresh()

            after_first_paint(self.timeline.plot.viewport(), start)

    def _show_area(self, t0: int, t1: int, lanes: list) -> None:
        """The session's area selection, drawn by the timeline (and so in pictures of it: a bare
        view draws the same) on the rows of its lanes; the box that followed the drag is done."""
        self.timeline.area_rect.hide()
        if self.timeline.item is not None:
            self.timeline.item.area = (t0, t1, list(lanes)) if lanes else None

    @property
    def svg_on_top(self) -> tuple:
        """What an SVG of the window paints again over the rest (export/image.py): an SVG keeps
        no widget's clip, so a table's rows past its viewport landed on the dock tabs below it,
        and slices and step lines begun before the view on the timeline's label column."""
        from PySide6.QtWidgets import QTabBar

        tl = self.timeline
        # the dock tabs shown (the main window keeps unused tab bars, "visible" and out of sight)
        tabs = [t for t in self.findChildren(QTabBar) if t.count() and not t.visibleRegion().isEmpty()]
        return (tl.labels, tl.split.handle(1), *tabs, self.statusBar())

    def _show_memory(self, trace: Trace) -> None:
        self.memory.align_with(self.timeline.labels_width(), self.timeline.scroll.sizeHint().width())
        self.memory.set_trace(trace, self.timeline.origin, self.timeline.vb)
        if not self.memory.has_data():
            self.memory_dock.hide()
            return
        shown = self.memory_dock.isVisible()
        from .window_fit import place_memory, small

        self.memory_dock.show()
        place_memory(self)
        from .window_fit import memory_title

        memory_title(self)
        if len(trace) == 0 or not small(self):  # a small screen keeps Findings the tab in front
            self.memory_dock.raise_()
        if len(trace) == 0:  # a memory snapshot alone: the curve is the content
            self.resizeDocks([self.memory_dock], [560], Qt.Vertical)
        elif not shown and not getattr(self, "docks_restored", False):
            # sized once the dock is laid out (the next turn of the event loop)
            from PySide6.QtCore import QTimer

            from .window_fit import size_docks

            QTimer.singleShot(0, self, lambda: size_docks(self, self.width(), self.height()))

    def _realign_memory(self) -> None:
        """The lane labels were resized: the memory plot's time axis follows the timeline's."""
        if self.trace is not None and self.memory.has_data():
            self.memory.align_with(self.timeline.labels_width(), self.timeline.scroll.sizeHint().width())
            self.memory.rebuild()

    def show_warnings(self) -> None:
        """The session's warnings, listed (the status bar's "N warnings" link)."""
        if self.trace is None or not self.trace.warnings:
            return
        from ..model.fmt import counted
        from ..model.plain import line

        box = QMessageBox(
            QMessageBox.Information,
            counted(len(self.trace.warnings), "warning"),
            f"{counted(len(self.trace.warnings), 'warning')} while opening this session:",
            parent=self,
        )
        box.setInformativeText(
            "\n".join(f"• {line(w)}" for w in self.trace.warnings[:50])
            + (f"\n… and {len(self.trace.warnings) - 50} more" if len(self.trace.warnings) > 50 else "")
        )
        box.setModal(False)
        box.setAttribute(Qt.WA_DeleteOnClose)
        self.warnings_box = box
        box.show()

    def show_shortcuts(self) -> None:
        from .shortcuts import show

        show(self)

    def resizeEvent(self, ev) -> None:
        super().resizeEvent(ev)
        if self._fill_pending:
            from PySide6.QtCore import QTimer

            QTimer.singleShot(0, self, self._fill_now)  # once the children have their sizes
        from .window_fit import size_docks, small

        now = small(self)
        if getattr(self, "_was_small", now) != now:  # crossed 1000 px: the other layout
            size_docks(self, self.width(), self.height())
        self._was_small = now

    def _fill_now(self) -> None:
        if self._fill_pending and self.session is not None and self.timeline.vb.height() >= _FILL_MIN_PX:
            self._fill_pending = False
            fill_start(self, self.session)

    def closeEvent(self, ev) -> None:
        from .window_fit import save_geometry

        save_geometry(self, self.settings)
        self.controller.close()
        self.timeline.detach()
        super().closeEvent(ev)
