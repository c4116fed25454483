"""The timeline panel: lane labels | plot (TimelineItem) | vertical scroll bar, a search bar,
and Perfetto's keys (W/S zoom, A/D pan, F focus, 0 fit, arrows step, / search, ? help).

It shows a Session (gpuviewer.session): the selection, search, highlighted finding,
annotations, time range and lane layout are the session's view state; the view draws them when
the session announces a change and hands what the user does (pan, click, search) to it. A bare
view (set_trace) makes a session of its own."""

from __future__ import annotations

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QEvent, QRectF, Qt, Signal
from PySide6.QtGui import QColor, QKeySequence, QPen, QShortcut
from PySide6.QtWidgets import (
    QCheckBox,
    QGraphicsRectItem,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QScrollBar,
    QSplitter,
    QToolTip,
    QVBoxLayout,
    QWidget,
)

from ..model.categories import CAT_LABEL, Cat
from ..model.fmt import esc
from ..model.layout import Layout, ViewState
from ..model.trace import Trace
from ..render import theme
from ..render.time_axis import TimeAxis, format_duration, format_ns
from ..render.timeline_item import TimelineItem
from .inline_note import InlineNote
from .lane_labels import LaneLabels
from .timeline_reveal import RevealMixin

ROW_PX = 17  # pixels per row unit


class _ViewBox(pg.ViewBox):
    """x-only pan and zoom; Shift+drag selects an area (time range x lanes)."""

    areaDragged = Signal(float, float, float, float, bool)  # x0, y0, x1, y1, finished

    def mouseDragEvent(self, ev, axis=None):
        if ev.button() == Qt.LeftButton and ev.modifiers() & Qt.ShiftModifier:
            ev.accept()
            a = self.mapSceneToView(ev.buttonDownScenePos())
            b = self.mapSceneToView(ev.scenePos())
            self.areaDragged.emit(a.x(), a.y(), b.x(), b.y(), ev.isFinish())
            return
        super().mouseDragEvent(ev, axis)

    def wheelEvent(self, ev, axis=None):
        if ev.modifiers() & Qt.ShiftModifier:
            ev.ignore()  # Shift+wheel scrolls lanes (handled by the view)
            return
        super().wheelEvent(ev, axis=0)


class TimelineView(RevealMixin, QWidget):
    areaSelected = Signal(object, object, object)  # lanes, t0, t1 (absolute ns)
    helpRequested = Signal()
    markRequested = Signal(bool)  # M (False) or Shift+M (True)
    contextRequested = Signal(object, float, float)  # global pos, x (ns from origin), y (rows)
    labelsResized = Signal(int)  # the lane labels' new width (the memory plot lines up with it)

    def __init__(self, parent=None) -> None:
        super().__init__(parent)
        self.trace: Trace | None = None
        self.layout_model: Layout | None = None
        self.item: TimelineItem | None = None
        self.origin = 0
        self.session = None
        self._subs: list = []
        self._editing = False  # this view is announcing its own lane edit
        self._mouse_focus = False  # focus just came by a click: that click must not clear the selection
        self.setFocusPolicy(Qt.StrongFocus)

        self.labels = LaneLabels(self)
        self.vb = _ViewBox()
        self.plot = pg.PlotWidget(viewBox=self.vb, axisItems={"bottom": TimeAxis("bottom")})
        self.plot.setBackground(theme.current().background)
        self.plot.hideAxis("left")
        self.plot.showAxis("top")
        self.plot.setAxisItems({"top": TimeAxis("top")})
        self.plot.setMenuEnabled(False)
        self.plot.hideButtons()
        self.vb.setMouseEnabled(x=True, y=False)
        self.vb.invertY(True)
        self.vb.disableAutoRange()
        self.plot.setFocusPolicy(Qt.NoFocus)
        self.scroll = QScrollBar(Qt.Vertical)
        self.scroll.setFocusPolicy(Qt.NoFocus)  # the timeline keeps the keys (arrows step events)
        self.scroll.valueChanged.connect(self._scrolled)

        self.search = QLineEdit()
        self.search.setPlaceholderText("Search names (substring; tick regex for a regular expression)   /")
        self.search.returnPressed.connect(self._search_enter)
        self.search.installEventFilter(self)
        self.regex = QCheckBox("regex")
        self.match_label = QLabel("")
        bar = QHBoxLayout()
        bar.setContentsMargins(4, 2, 4, 2)
        bar.addWidget(self.search, 1)
        bar.addWidget(self.regex)
        bar.addWidget(self.match_label)
        # labels | plot in a splitter: the label column is dragged wider for long lane names
        self.split = QSplitter(Qt.Horizontal)
        self.split.setChildrenCollapsible(False)
        self.split.setHandleWidth(3)
        self.split.addWidget(self.labels)
        self.split.addWidget(self.plot)
        self.split.setStretchFactor(1, 1)
        self.split.setSizes([250, 1000])
        self.split.splitterMoved.connect(lambda *_: self._labels_dragged())
        self.labels_set_by_hand = False  # dragged: the column keeps its width through resizes
        body = QHBoxLayout()
        body.setContentsMargins(0, 0, 0, 0)
        body.setSpacing(0)
        body.addWidget(self.split, 1)
        body.addWidget(self.scroll)
        outer = QVBoxLayout(self)
        outer.setContentsMargins(0, 0, 0, 0)
        outer.setSpacing(0)
        outer.addLayout(bar)
        outer.addLayout(body, 1)

        self.area_rect = QGraphicsRectItem()
        self.area_rect.setPen(QPen(QColor(37, 99, 235), 0))
        self.area_rect.setBrush(QColor(37, 99, 235, 40))
        self.area_rect.setZValue(10)
        self.area_rect.hide()
        self.vb.addItem(self.area_rect, ignoreBounds=True)
        self.vb.areaDragged.connect(self._area_drag)
        self.vb.sigXRangeChanged.connect(self._x_changed)
        self.vb.sigResized.connect(self._resized)
        self.plot.scene().sigMouseClicked.connect(self._clicked)
        self.plot.scene().sigMouseMoved.connect(self._hover)
        self.plot.viewport().installEventFilter(self)
        self.labels.changed.connect(self._relayout)
        self.labels.changed.connect(self._lanes_edited)
        QShortcut(QKeySequence("/"), self, activated=self.focus_search)
        self.note_edit = InlineNote(self)

    def apply_renderer(self, mode: str | None = None) -> bool:
        from .gl import apply_renderer

        used = apply_renderer(self.plot, mode)
        self.plot.viewport().installEventFilter(self)
        return used

    # -- the session's view state -----------------------------------------------------------
    @property
    def selected(self) -> int | None:
        return self.session.view.selected if self.session is not None else None

    @property
    def last_area(self) -> tuple[int, int, list[int]] | None:
        return self.session.view.area if self.session is not None else None

    @property
    def matches(self) -> np.ndarray:
        return self.session.view.matches if self.session is not None else np.zeros(0, np.int64)

    @property
    def match_pos(self) -> int:
        return self.session.view.match_pos if self.session is not None else -1

    # -- data -------------------------------------------------------------------------------
    def set_trace(self, trace: Trace, state: ViewState | None = None) -> None:
        """Show a trace on its own (a bare view: compare windows, tests)."""
        from ..session import Session

        self.set_session(Session(trace), state)

    def detach(self) -> None:
        """Stop listening to the session. Its events hold this view's methods: a view left
        subscribed lives in a reference cycle that Python's collector frees at a random moment,
        possibly while Qt is delivering an event to it (a crash); detached, it goes when its
        owner lets go."""
        if self.session is not None:
            for name, fn in self._subs:
                self.session.events.disconnect(name, fn)
        self._subs = []

    def set_session(self, session, state: ViewState | None = None) -> None:
        self.detach()
        self.session = session
        self._subs = [
            (n, session.events.connect(n, fn))
            for n, fn in (
                ("range", self._on_range),
                ("lanes", self._on_lanes),
                ("selection", self._on_selection),
                ("search", self._on_search),
                ("highlight", self._on_highlight),
                ("reveal", self._on_reveal),
                ("annotations", self._on_annotations),
            )
        ]
        trace = session.trace
        if self.item is not None:
            self.vb.removeItem(self.item)
        self.trace = trace
        self.origin = trace.start_ns
        self.layout_model = Layout(trace, state if state is not None else session.view.lanes)
        session.share_lanes(self.layout_model.state)  # one state: the session's is the layout's
        self.labels.layout_model = self.layout_model
        self.labels_set_by_hand = False  # a new session's names: fitted again
        self.fit_labels()
        self.item = TimelineItem(trace, self.layout_model, self.origin)
        self.vb.addItem(self.item)
        span = max(1.0, float(trace.end_ns - self.origin))
        self.vb.setLimits(xMin=-0.05 * span, xMax=1.05 * span, minXRange=50)
        self.match_label.setText("")
        self.item.annotations = session.notes.doc.annotations
        self._update_scroll()
        from ..model.view import initial_view

        self.set_range(
            *initial_view(trace), padding=0.0
        )  # the steady steps; Shift+Home with the warm-up, 0 / Home everything

    # -- geometry ---------------------------------------------------------------------------
    AXIS_BELOW_MIN_H = 600  # a shorter view gives the time axis under its lanes to the lanes

    def _labels_dragged(self, *_) -> None:
        self.labels_set_by_hand = True
        self.labelsResized.emit(self.labels_width())

    def resizeEvent(self, ev) -> None:
        super().resizeEvent(ev)
        if self.layout_model is not None and not self.labels_set_by_hand and ev.oldSize().width() != self.width():
            # fitted when the session came, usually before the window had its size (a 1366 px
            # screen got the 200 px of an 800 px view): fitted again to the width it has now
            self.fit_labels()
        # the axis above the lanes stays; the one below repeats it (22 px of a laptop's lanes).
        # Decided by the view's own height, so a report's view of the same size draws the same
        below = self.height() >= self.AXIS_BELOW_MIN_H
        if self.plot.getAxis("bottom").isVisible() != below:
            self.plot.showAxis("bottom", below)

    def labels_width(self) -> int:
        """Where the plot starts: the label column and the splitter's handle."""
        return self.plot.x() if self.plot.x() > 0 else self.labels.width() + self.split.handleWidth()

    def fit_labels(self) -> None:
        """The label column as wide as its longest label needs, within a sixth to a quarter of
        the view (longer names are shortened part by part, label_fit; whole in their tooltip)."""
        want = self.labels.wanted_width()
        total = max(self.width(), 800)
        w = int(min(max(want, 160, total // 6), max(160, total // 4)))
        self.split.setSizes([w, max(100, total - w)])
        self.labelsResized.emit(self.labels_width())

    def _rows_visible(self) -> float:
        return max(1.0, self.vb.height() / ROW_PX)

    def _update_scroll(self) -> None:
        if self.layout_model is None:
            return
        total = self.layout_model.height
        page = self._rows_visible()
        self.scroll.setRange(0, max(0, int((total - page + 1) * 10)))
        self.scroll.setPageStep(int(page * 10))
        self._apply_y()

    def _scrolled(self, _v) -> None:
        self._apply_y()

    def _apply_y(self) -> None:
        y0 = self.scroll.value() / 10.0
        self.vb.setYRange(y0, y0 + self._rows_visible(), padding=0)
        self._sync_labels()

    def _resized(self, *_):
        self._update_scroll()

    def _sync_labels(self) -> None:
        (_, _), (y0, y1) = self.vb.viewRange()
        top = self.vb.mapToDevice(self.vb.mapFromView(pg.Point(0, y0)))
        # device coordinates are the plot's viewport's; mapped through this widget, an ancestor of
        # both, into the labels' own (they sit in the splitter: their y() is not relative to this
        # widget, and subtracting it put every label a row below its lane)
        top_y = self.labels.mapFrom(self, self.plot.viewport().mapTo(self, top.toPoint())).y() if top is not None else 0
        self.labels.set_view(y0, y1, int(top_y), int(self.vb.height()))

    def _relayout(self) -> None:
        if self.item is not None:
            self.item.relayout()
        self._update_scroll()
        self.labels.update()

    def _x_changed(self, *_):
        self._sync_labels()
        t0, t1 = self.visible_range()
        if self.session is not None:
            self.session.set_range(t0, t1)

    def _on_range(self, t0: int, t1: int) -> None:
        if (t0, t1) != self.visible_range():  # not the range this view just reported
            self.vb.setXRange(t0 - self.origin, t1 - self.origin, padding=0)

    def _lanes_edited(self) -> None:
        if self.session is not None and self.layout_model is not None:
            self._editing = True
            try:
                self.session.lanes_changed()
            finally:
                self._editing = False

    def _on_lanes(self, state) -> None:
        lm = self.layout_model
        if lm is not None and not self._editing:
            lm.state = state
            lm.rebuild()
            self._relayout()

    def _on_highlight(self, span) -> None:
        if self.item is not None:
            self.item.highlight = span
            self.item.update()

    def _on_annotations(self) -> None:
        if self.item is not None:
            self.item.annotations = self.session.notes.doc.annotations
            self.item.update()

    def collapse_ranks(self, collapsed: bool, ranks: set[int] | None = None) -> None:
        """Collapse (or expand) every rank, or only `ranks`, to their one summary row."""
        lm = self.layout_model
        if lm is None:
            return
        which = {r.rank for r in self.trace.ranks} if ranks is None else set(ranks)
        if collapsed:
            lm.state.collapsed_ranks |= which
        else:
            lm.state.collapsed_ranks -= which
        lm.rebuild()
        self._relayout()
        self._lanes_edited()

    # -- navigation -------------------------------------------------------------------------
    def visible_range(self) -> tuple[int, int]:
        (x0, x1), _ = self.vb.viewRange()
        return self.origin + int(x0), self.origin + int(x1)

    def set_range(self, t0: int, t1: int, padding: float = 0.0) -> None:
        span = max(t1 - t0, 50)
        pad = span * padding
        self.vb.setXRange(t0 - self.origin - pad, t0 - self.origin + span + pad, padding=0)

    def fit_all(self) -> None:
        if self.trace is not None:
            self.set_range(self.trace.start_ns, self.trace.end_ns, padding=0.01)

    def show_all_steps(self) -> None:
        """Every profiled step, the warm-up the view opened without included (Shift+Home)."""
        if self.trace is not None:
            from ..model.view import steps_view

            self.set_range(*steps_view(self.trace))

    def zoom(self, factor: float, center_x: float | None = None) -> None:
        (x0, x1), _ = self.vb.viewRange()
        c = (x0 + x1) / 2 if center_x is None else center_x
        self.vb.setXRange(c - (c - x0) / factor, c + (x1 - c) / factor, padding=0)

    def pan(self, fraction: float) -> None:
        (x0, x1), _ = self.vb.viewRange()
        d = (x1 - x0) * fraction
        self.vb.setXRange(x0 + d, x1 + d, padding=0)

    def focus_selection(self) -> None:
        if self.selected is None or self.trace is None:
            return
        c = self.trace.columns
        s, d = int(c["start"][self.selected]), int(c["dur"][self.selected])
        self.set_range(s, s + max(d, 1000), padding=0.1)
        self.scroll_to_event(self.selected)

    def show_event(self, i: int) -> None:
        """Select an event, centre it (Session.show_event) and scroll to its lane."""
        self.session.show_event(i)
        self.scroll_to_event(i)

    def step_event(self, direction: int) -> None:
        """Select the previous/next event on the selected event's lane and depth."""
        if self.selected is None or self.trace is None:
            return
        c = self.trace.columns
        lane, depth = int(c["lane"][self.selected]), int(c["depth"][self.selected])
        sl = self.trace.lane_slice(lane)
        same = np.flatnonzero(np.asarray(c["depth"][sl]) == depth) + sl.start
        k = int(np.searchsorted(same, self.selected))
        k2 = k + direction
        if 0 <= k2 < len(same):
            self.show_event(int(same[k2]))

    def keyPressEvent(self, ev) -> None:
        k = ev.key()
        if k == Qt.Key_W:
            self.zoom(1.25, self._cursor_x())
        elif k == Qt.Key_S:
            self.zoom(0.8, self._cursor_x())
        elif k == Qt.Key_A:
            self.pan(-0.1)
        elif k == Qt.Key_D:
            self.pan(0.1)
        elif k == Qt.Key_F:
            self.focus_selection()
        elif k in (Qt.Key_0, Qt.Key_Home) and ev.modifiers() & Qt.ShiftModifier:
            self.show_all_steps()
        elif k in (Qt.Key_0, Qt.Key_Home):
            self.fit_all()
        elif k == Qt.Key_Left:
            self.step_event(-1)
        elif k == Qt.Key_Right:
            self.step_event(+1)
        elif k == Qt.Key_Up:
            self.scroll.setValue(self.scroll.value() - 10)
        elif k == Qt.Key_Down:
            self.scroll.setValue(self.scroll.value() + 10)
        elif k == Qt.Key_Slash:
            self.focus_search()
        elif k == Qt.Key_Question or (k == Qt.Key_Slash and ev.modifiers() & Qt.ShiftModifier):
            self.helpRequested.emit()
        elif k == Qt.Key_M:
            self.markRequested.emit(bool(ev.modifiers() & Qt.ShiftModifier))
        elif k == Qt.Key_Escape:
            self.select(None)
        else:
            super().keyPressEvent(ev)

    def _cursor_x(self) -> float | None:
        pos = self.plot.mapFromGlobal(self.cursor().pos())
        if not self.plot.rect().contains(pos):
            return None
        return self.vb.mapSceneToView(self.plot.mapToScene(pos)).x()

    def eventFilter(self, obj, ev):
        if obj is self.plot.viewport() and ev.type() == QEvent.Wheel and ev.modifiers() & Qt.ShiftModifier:
            self.scroll.setValue(self.scroll.value() - int(ev.angleDelta().y() / 12))
            return True
        if obj is self.search and ev.type() == QEvent.KeyPress:
            if ev.key() in (Qt.Key_Return, Qt.Key_Enter) and ev.modifiers() & Qt.ShiftModifier:
                self.step_match(-1)
                return True
            if ev.key() == Qt.Key_Escape:
                self.setFocus()
                return True
        return super().eventFilter(obj, ev)

    # -- selection, hover ---------------------------------------------------------------------
    def _tol(self) -> float:
        (x0, x1), _ = self.vb.viewRange()
        return 3 * (x1 - x0) / max(1.0, self.vb.width())

    def _clicked(self, ev) -> None:
        if self.item is None:
            return
        if ev.button() == Qt.RightButton:
            p = self.vb.mapSceneToView(ev.scenePos())
            ev.accept()
            self.contextRequested.emit(ev.screenPos().toPoint(), p.x(), p.y())
            return
        if ev.button() != Qt.LeftButton:
            return
        p = self.vb.mapSceneToView(ev.scenePos())
        hit = self.item.pick(p.x(), p.y(), self._tol())
        focusing, self._mouse_focus = self._mouse_focus, False
        if hit is not None or not focusing:  # a click that only brings focus back keeps the selection
            self.select(hit)
        self.setFocus()

    def focusInEvent(self, ev) -> None:
        self._mouse_focus = ev.reason() == Qt.MouseFocusReason
        super().focusInEvent(ev)

    def select(self, i: int | None) -> None:
        if self.session is not None:
            self.session.select(i)  # announced back to _on_selection

    def _on_selection(self, event: int | None) -> None:
        i = event
        if i is not None and self.layout_model is not None:
            self._reveal(i)
        if self.item is not None:
            self.item.selected = i
            self.item.flow_pairs = self.flows_of(i) if i is not None else []
            self.item.update()

    def flows_of(self, i: int) -> list[tuple[int, int]]:
        src, dst = self.trace.flows
        pairs = [(int(a), int(b)) for a, b in zip(src[dst == i], dst[dst == i])]
        pairs += [(int(a), int(b)) for a, b in zip(src[src == i], dst[src == i])]
        return pairs

    def _hover(self, pos) -> None:
        if self.item is None:
            return
        p = self.vb.mapSceneToView(pos)
        # from what the last frame drew: a mouse move costs two binary searches, no range query
        i, merged = self.item.hover_pick(p.x(), p.y(), self._tol())
        if i is None:
            QToolTip.hideText()
            return
        c = self.trace.columns
        text = (
            f"<b>{esc(self.trace.names[int(c['name'][i])])}</b><br>"
            f"{CAT_LABEL.get(Cat(int(c['cat'][i])), '')} · {format_duration(int(c['dur'][i]))}"
            f" · at {format_ns(int(c['start'][i]) - self.origin)}"
        )
        if merged:
            r0, r1, busy = self.item.slices.picked_run
            span = r1 - r0
            share = busy / span if span > 0 else 1.0
            text += (
                f"<br>several events drawn as one at this zoom ({format_duration(span)}, busy {share:.0%} of it"
                + (": drawn fainter for its idle time" if share < 0.75 else "")
                + "): zoom in (W) to separate them"
            )
        QToolTip.showText(
            self.plot.mapToGlobal(self.plot.mapFromScene(pos)).toPoint()
            if hasattr(self.plot.mapFromScene(pos), "toPoint")
            else self.cursor().pos(),
            text,
        )

    # -- area selection --------------------------------------------------------------------
    def _area_drag(self, x0, y0, x1, y1, finished) -> None:
        xa, xb = sorted((x0, x1))
        ya, yb = sorted((y0, y1))
        self.area_rect.setRect(QRectF(xa, ya, xb - xa, yb - ya))
        self.area_rect.show()
        if finished:
            self.select_area(self.origin + int(xa), self.origin + int(xb), ya, yb)

    def select_area(self, t0: int, t1: int, ya: float, yb: float) -> list[int]:
        lanes = [r.lane for r in self.layout_model.visible_rows(ya, yb) if r.kind == "lane"]
        self.session.select_area(t0, t1, lanes)
        self.areaSelected.emit(lanes, t0, t1)
        return lanes

    # -- search ---------------------------------------------------------------------------
    def focus_search(self) -> None:
        self.search.setFocus()
        self.search.selectAll()

    def _search_enter(self) -> None:
        text, regex = self.search.text(), self.regex.isChecked()
        v = self.session.view if self.session is not None else None
        if v is None or text != v.search or regex != v.regex or (text and not len(v.matches)):
            self.run_search(text, regex)  # a new query (or this session has not run it)
        else:
            self.step_match(+1)
        self.search.setFocus()

    def run_search(self, text: str, regex: bool = False) -> int:
        if self.session is None:
            return 0
        n = self.session.search(text, regex)
        if n:
            self.scroll_to_event(int(self.matches[self.match_pos]))
        return n

    def _on_search(self, text: str, count: int, pos: int) -> None:
        v = self.session.view
        if self.item is not None:
            self.item.match_mask = v.mask
            self.item.update()
        if count < 0:
            self.match_label.setText(v.search_error)
        elif not text:
            self.match_label.setText("")
        elif pos < 0:
            self.match_label.setText(f"{count:,} matches")
        else:
            self.match_label.setText(f"{pos + 1:,} / {count:,} matches")

    def step_match(self, direction: int) -> None:
        if self.session is None:
            return
        i = self.session.next_match(direction)
        if i is not None:
            self.scroll_to_event(i)
