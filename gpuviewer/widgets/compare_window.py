"""Compare two runs, or two ranks of one run (issue #14): the diff of `gpuviewer diff` as a window.
A summary on top; A's and B's chosen step stacked on one axis relative to each step's start, their
x ranges linked; the tables of step parts, GPU ops, host ops and collectives beside them. A click
on a row outlines that op in both timelines and centres each on its first occurrence in the step.

The diff runs off the UI thread; a comparison that cannot be made shows why, in the window."""

from __future__ import annotations

import html
import threading

import numpy as np
from PySide6.QtCore import QObject, Qt, Signal
from PySide6.QtWidgets import (
    QComboBox,
    QHBoxLayout,
    QLabel,
    QMainWindow,
    QProgressBar,
    QPushButton,
    QSplitter,
    QVBoxLayout,
    QWidget,
)

from ..model.categories import LaneKind
from ..model.fmt import format_duration
from ..model.layout import ViewState
from ..render.time_axis import TimeAxis
from ..session.compare import (
    GAP_PARTS,
    Comparison,
    DiffError,
    collective_mask,
    compute,
    first_in,
    headline,
    name_mask,
    part_mask,
    run_names,
    session_name,
    slower_names,
    step_time,
    step_window,
)
from .compare_tables import CompareTabs
from .timeline_view import TimelineView

SIDES = ("a", "b")


class _StepAxis(TimeAxis):
    """Time labels relative to the shown step's start (offset: that start, in view x)."""

    offset = 0.0

    def setRange(self, mn: float, mx: float):  # pyqtgraph's name
        super().setRange(mn - self.offset, mx - self.offset)


class StepView(TimelineView):
    """A timeline whose axis reads 0 at its step's start; rel_* work in that relative time."""

    def __init__(self, parent=None) -> None:
        super().__init__(parent)
        self.axes = [_StepAxis("top"), _StepAxis("bottom")]
        self.plot.setAxisItems({"top": self.axes[0], "bottom": self.axes[1]})
        for w in (self.search, self.regex, self.match_label):  # the tables choose what to outline
            w.hide()
        self.step_start = 0

    def show_step(self, start: int) -> None:
        self.step_start = start
        for ax in self.axes:
            ax.offset = float(start - self.origin)
            ax.linkedViewChanged(self.vb)

    def rel_range(self) -> tuple[float, float]:
        (x0, x1), _ = self.vb.viewRange()
        off = self.step_start - self.origin
        return x0 - off, x1 - off

    def set_rel_range(self, r0: float, r1: float) -> None:
        off = self.step_start - self.origin
        self.vb.setXRange(r0 + off, r1 + off, padding=0)


class _Bridge(QObject):
    """Carries the worker's result to the UI thread (a queued signal). Not parented to the window:
    closing the window while the diff runs must not delete it under the worker."""

    done = Signal(object, object)  # the Comparison, session B (read by the worker when given as paths)
    failed = Signal(str)
    progress = Signal(float, str)


# Lanes a comparison starts without: host threads (deep Python stacks), OS runtime, profiler
# bookkeeping. Outlining a host op unhides its lane (TimelineView.select reveals it).
HIDDEN_KINDS = {LaneKind.CPU, LaneKind.OSRT, LaneKind.OTHER}


def compact_state(trace, ranks: list[int]) -> ViewState:
    """Only the compared ranks open, each with its GPU lanes, annotations and CUDA API (folded)."""
    st = ViewState(collapsed_ranks={r.rank for r in trace.ranks} - set(ranks))
    st.hidden = {ln.key for ln in trace.lanes if ln.kind in HIDDEN_KINDS}
    if len(st.hidden) == len(trace.lanes):  # a host-only trace: show what there is
        st.hidden = set()
    st.groups = {f"r{r}/{LaneKind.CUDA_API}": True for r in ranks}
    return st


def _options_text(ranks, steps) -> str:
    out = []
    if ranks is not None:
        out.append(f"rank {ranks[0]} vs {'the median of the others' if ranks[1] == 'median' else f'rank {ranks[1]}'}")
    if steps is not None:

        def spec(x) -> str:
            return ", ".join(map(str, x)) if isinstance(x, (list, tuple)) else str(x)

        pair = isinstance(steps, tuple) and len(steps) == 2
        out.append(f"steps {spec(steps[0])} vs {spec(steps[1])}" if pair else f"steps {spec(steps)}")
    return f" ({', '.join(out)})" if out else ""


def _work(bridge: _Bridge, sessions, names, ranks, steps, stop: threading.Event) -> None:
    """The worker thread: B read when it came as paths, then the diff; or a message saying why
    not. Progress goes to the bridge; `stop` set (Cancel, the window closed) ends it between stages."""
    from ..session.compare import Cancelled, TraceError

    a, b = sessions
    try:
        start = 0.0
        if not hasattr(b, "trace"):  # paths: read here, off the UI thread, with progress
            from ..session import Session

            b = Session.open(
                list(b), progress=lambda f, m: bridge.progress.emit(0.6 * f, f"reading B: {m}"), cancelled=stop.is_set
            )
            start = 0.6
        cmp = compute(a, b, ranks, steps, progress=bridge.progress.emit, cancelled=stop.is_set, start=start)
        bridge.done.emit(cmp, b)
    except Cancelled:
        return  # the window said so itself
    except TraceError as e:
        bridge.failed.emit(f"B cannot be read: {e}")
    except DiffError as e:
        where = {"a": names[0], "b": names[1]}.get(e.side or "")
        why = str(e).replace("--steps ", "steps ").replace("--ranks ", "ranks ")  # no command line here
        bridge.failed.emit(why + (f" ({e.side.upper()}: {where})" if where else ""))
    except Exception as e:  # noqa: BLE001 - a bug must show as a message, never kill the window
        bridge.failed.emit(
            f"The comparison failed, a bug in gpuviewer ({type(e).__name__}: {e}). "
            "Please report it; `gpuviewer diff --debug` shows the details."
        )


class CompareWindow(QMainWindow):
    compared = Signal(object)  # the Comparison, once shown
    failed = Signal(str)

    def __init__(self, session_a, session_b, *, ranks=None, steps=None, parent=None) -> None:
        """session_b: a Session, or the paths of the other run (files or folders), read here
        off the UI thread with the comparison's progress."""
        super().__init__(parent)
        self.sessions = (session_a, session_b)
        paths_b = session_b.paths if hasattr(session_b, "paths") else [str(p) for p in session_b]
        self.names = (session_name(session_a),) * 2 if session_b is session_a else run_names(session_a.paths, paths_b)
        self.comparison: Comparison | None = None
        self.error: str | None = None
        self.cancelled = False
        self.shift = 0.0  # B's relative window minus A's: nonzero after lining up an op
        self._syncing = False
        what = self.names[0] if session_a is session_b else f"{self.names[0]} vs {self.names[1]}"
        self.setWindowTitle(f"Compare: {what}{_options_text(ranks, steps)}")
        fit_screen(self, parent)
        self._build()
        self.message.setText(f"Comparing {what}{_options_text(ranks, steps)}…")
        self._bridge = _Bridge()
        self._bridge.done.connect(self._done)
        self._bridge.failed.connect(self._failed)
        self._bridge.progress.connect(self._progress)
        self._stop = threading.Event()
        # the worker gets what it needs, not the window, which may be closed and deleted meanwhile
        self._thread = threading.Thread(
            target=_work,
            args=(self._bridge, self.sessions, self.names, ranks, steps, self._stop),
            name="gpuviewer-compare",
            daemon=True,
        )
        self._thread.start()

    def _progress(self, frac: float, what: str) -> None:
        if self.comparison is None and self.error is None and not self.cancelled:
            self.bar.setValue(int(max(0.0, min(1.0, frac)) * 1000))
            self.stage.setText(what)

    def cancel(self) -> None:
        """Stop the comparison (Cancel): the worker ends at its next stage; the window closes."""
        if self.comparison is None and self.error is None:
            self.cancelled = True
            self._stop.set()
            self.close()

    def closeEvent(self, ev) -> None:  # noqa: N802 - Qt's name
        self._stop.set()  # a worker still running stops at its next stage
        super().closeEvent(ev)

    # -- layout ---------------------------------------------------------------------------
    def _build(self) -> None:
        central = QWidget()
        outer = QVBoxLayout(central)
        outer.setContentsMargins(8, 6, 8, 6)
        self.summary = QLabel()
        self.summary.setTextInteractionFlags(Qt.TextSelectableByMouse)
        self.summary.setWordWrap(True)
        self.summary.hide()
        self.message = QLabel()
        self.message.setAlignment(Qt.AlignCenter)
        self.message.setWordWrap(True)
        self.message.setTextInteractionFlags(Qt.TextSelectableByMouse)
        self.message.setStyleSheet("font-size: 15px; color: #334155; padding: 40px;")
        outer.addWidget(self.summary)
        # while it runs: what it is doing, how far, and Cancel (a comparison can take minutes);
        # then the message alone when it cannot be made
        self.waiting = QWidget()
        wl = QVBoxLayout(self.waiting)
        wl.addStretch(2)
        wl.addWidget(self.message)
        self.busy = QWidget()
        bl = QHBoxLayout(self.busy)
        self.bar = QProgressBar()
        self.bar.setRange(0, 1000)
        self.bar.setMaximumWidth(480)
        self.stage = QLabel("starting…")
        self.cancel_btn = QPushButton("Cancel")
        self.cancel_btn.clicked.connect(self.cancel)
        bl.addStretch(1)
        bl.addWidget(self.bar, 2)
        bl.addWidget(self.cancel_btn)
        bl.addStretch(1)
        wl.addWidget(self.busy)
        self.stage.setAlignment(Qt.AlignCenter)
        wl.addWidget(self.stage)
        wl.addStretch(3)
        outer.addWidget(self.waiting, 1)

        self.views = {s: StepView() for s in SIDES}
        self.titles = {s: QLabel() for s in SIDES}
        self.step_boxes = {s: QComboBox() for s in SIDES}
        self.step_info = {s: QLabel() for s in SIDES}
        panes = QSplitter(Qt.Vertical)
        for s in SIDES:
            pane = QWidget()
            lay = QVBoxLayout(pane)
            lay.setContentsMargins(0, 2, 0, 0)
            lay.setSpacing(2)
            head = QHBoxLayout()
            self.titles[s].setStyleSheet("font-weight: 600;")
            head.addWidget(self.titles[s])
            head.addWidget(self.step_boxes[s])
            self.step_info[s].setStyleSheet("color: #475569;")
            head.addWidget(self.step_info[s], 1)
            lay.addLayout(head)
            lay.addWidget(self.views[s], 1)
            panes.addWidget(pane)
            self.step_boxes[s].activated.connect(lambda _i, side=s: self._step_chosen(side))
            self.views[s].vb.sigXRangeChanged.connect(lambda *_a, side=s: self._sync_from(side))
        self.outline = QLabel()
        self.outline.setWordWrap(True)
        self.line_up = QPushButton("Line up step starts")
        self.line_up.setToolTip("Show the same time after each step's start in both timelines")
        self.line_up.clicked.connect(self.reset_shift)
        self.line_up.hide()
        left = QWidget()
        ll = QVBoxLayout(left)
        ll.setContentsMargins(0, 0, 0, 0)
        bar = QHBoxLayout()
        bar.addWidget(self.outline, 1)
        bar.addWidget(self.line_up)
        ll.addLayout(bar)
        ll.addWidget(panes, 1)

        self.tabs = CompareTabs()
        self.tabs.rowChosen.connect(self._row_chosen)
        right = QWidget()
        rl = QVBoxLayout(right)
        rl.setContentsMargins(0, 0, 0, 0)
        rl.addWidget(self.tabs, 1)
        legend = QLabel(
            "<span style='background:#fee2e2'>&nbsp;red&nbsp;</span> B takes significantly more time "
            "than A &nbsp; <span style='background:#dcfce7'>&nbsp;green&nbsp;</span> less &nbsp; "
            "Δ = B − A, per step. Click a row to outline that op in both timelines."
        )
        legend.setWordWrap(True)
        rl.addWidget(legend)
        self.body = QSplitter(Qt.Horizontal)
        self.body.addWidget(left)
        self.body.addWidget(right)
        self.body.setStretchFactor(0, 5)
        self.body.setStretchFactor(1, 4)
        self.body.hide()
        outer.addWidget(self.body, 1)
        self.setCentralWidget(central)

    # -- the diff, off the UI thread -------------------------------------------------------
    def _failed(self, msg: str) -> None:
        self.error = msg
        self.busy.hide()
        self.stage.hide()
        self.message.setStyleSheet("font-size: 15px; color: #b91c1c; padding: 40px;")
        self.message.setText(
            f"<b>{html.escape(self.windowTitle().replace('Compare: ', 'Cannot compare '))}</b>"
            f"<br><br>{html.escape(msg, quote=False)}"
        )
        self.failed.emit(msg)

    def _done(self, cmp: Comparison, session_b) -> None:
        if self.cancelled:
            return
        if self.sessions[1] is not self.sessions[0]:
            self.sessions = (self.sessions[0], session_b)
        self.comparison = cmp
        self.waiting.hide()
        d = cmp.d
        self._fill_summary(d)
        self._syncing = True  # each set_trace moves its view; _show_steps places both
        for i, s in enumerate(SIDES):
            trace = self.sessions[i].trace
            self.views[s].set_trace(trace, compact_state(trace, d[s]["ranks"]))
            box = self.step_boxes[s]
            box.clear()
            for st in d[s]["steps"]:
                box.addItem("whole capture" if st < 0 else f"step {st}", st)
            box.setCurrentIndex(max(0, box.findData(cmp.shown_steps[i])))
            box.setEnabled(box.count() > 1)
        self._syncing = False
        self.tabs.set_diff(d)
        self.message.hide()
        self.summary.show()
        self.body.show()
        w = max(self.body.width(), self.width() - 16)
        self.body.setSizes([int(w * 0.56), w - int(w * 0.56)])  # the tables' verdict column in sight
        self._show_steps()
        self.show_slower()
        self.compared.emit(cmp)

    def _fill_summary(self, d: dict) -> None:
        lines = headline(d, self.names)
        out = []
        for i, ln in enumerate(lines):
            t = html.escape(ln.strip())
            if i < 2:
                t = f"<b>{t[:1]}</b>{t[1:]}"
            elif i == 2:
                t = f"<b>{t}</b>"
            elif ln.startswith("  "):
                t = "&nbsp;&nbsp;•&nbsp;" + t
            elif ln.startswith("significant:"):
                t = f"<span style='color:#64748b'>{t}</span>"
            out.append(t)
        self.summary.setText("<br>".join(out))

    # -- the two timelines ---------------------------------------------------------------------
    def _side_label(self, side: str) -> str:
        x = self.comparison.d[side]
        i = SIDES.index(side)
        if x.get("ranks_how") == "median":
            who = f"ranks {', '.join(map(str, x['ranks']))} (B is their median)"
        else:
            who = ("rank " if len(x["ranks"]) == 1 else "ranks ") + ", ".join(map(str, x["ranks"]))
        return f"{side.upper()}: {self.names[i]} {who}"

    def _label(self, side: str) -> None:
        self.titles[side].setText(self._side_label(side))
        t = step_time(self.comparison, side, self.step_of(side))
        self.step_info[side].setText(
            ("" if t is None else f"step time {format_duration(t)} · ") + "the axis is the time since the step's start"
        )

    def _show_steps(self) -> None:
        """Each view on its chosen step, both over the same time after the step's start."""
        cmp = self.comparison
        length = 0
        for i, s in enumerate(SIDES):
            t0, t1 = step_window(cmp, s, cmp.shown_steps[i])
            self.views[s].show_step(t0)
            length = max(length, t1 - t0)
            self._label(s)
        pad = 0.02 * length
        self.shift = 0.0
        self.line_up.hide()
        self._syncing = True
        try:
            for s in SIDES:
                self.views[s].set_rel_range(-pad, length + pad)
        finally:
            self._syncing = False

    def step_of(self, side: str) -> int:
        return self.comparison.shown_steps[SIDES.index(side)]

    def set_step(self, side: str, step: int) -> None:
        """Show another of the side's compared steps, at the same time after its start."""
        box = self.step_boxes[side]
        box.setCurrentIndex(max(0, box.findData(step)))
        self._step_chosen(side)

    def _step_chosen(self, side: str) -> None:
        cmp = self.comparison
        i = SIDES.index(side)
        cmp.shown_steps[i] = int(self.step_boxes[side].currentData())
        t0, _t1 = step_window(cmp, side, cmp.shown_steps[i])
        other = self.views[SIDES[1 - i]]
        r0, r1 = other.rel_range()
        self.views[side].show_step(t0)
        self._label(side)
        self.reset_shift(r0, r1)

    def reset_shift(self, r0: float | None = None, r1: float | None = None) -> None:
        if r0 is None or r1 is None:
            r0, r1 = self.views["a"].rel_range()
        self.shift = 0.0
        self.line_up.hide()
        self._syncing = True
        try:
            for s in SIDES:
                self.views[s].set_rel_range(r0, r1)
        finally:
            self._syncing = False

    def _sync_from(self, side: str) -> None:
        """One view panned or zoomed: the other follows, keeping the shift between them."""
        if self._syncing or self.comparison is None:
            return
        r0, r1 = self.views[side].rel_range()
        d = self.shift if side == "a" else -self.shift
        self._syncing = True
        try:
            self.views["b" if side == "a" else "a"].set_rel_range(r0 + d, r1 + d)
        finally:
            self._syncing = False

    # -- outlines -------------------------------------------------------------------------------
    def set_masks(self, masks: tuple[np.ndarray, np.ndarray], text: str, tip: str = "") -> None:
        for s, m in zip(SIDES, masks):
            item = self.views[s].item
            item.match_mask = m
            item.update()
        self.outline.setText(text)
        self.outline.setToolTip(tip)

    def show_slower(self) -> None:
        """The default outline: what got significantly slower from A to B."""
        cmp = self.comparison
        ops, colls = slower_names(cmp.d)
        masks = tuple(
            name_mask(self.sessions[i].trace, ops) | collective_mask(self.sessions[i].trace, cmp.comm_args[i], colls)
            for i in range(2)
        )
        if ops or colls:
            what = [f"{len(ops)} GPU op{'s' if len(ops) != 1 else ''}"] if ops else []
            what += [f"{len(colls)} collective{'s' if len(colls) != 1 else ''} (transfer)"] if colls else []
            text = (
                f"<span style='background:#facc15'>&nbsp;&nbsp;</span> outlined: what got significantly "
                f"slower from A to B ({', '.join(what)}). Click a table row to outline that op instead."
            )
        else:
            text = (
                "Nothing got significantly slower from A to B. Click a table row to outline that op in both timelines."
            )
        self.set_masks(masks, text)

    def _row_chosen(self, tab: str, row) -> None:
        cmp = self.comparison
        if cmp is None:
            return
        if tab == "parts":
            part = str(row["part"])
            ranks = (list(row["_a_ranks"]), list(row["_b_ranks"]))  # the row's ranks on each side
            masks = tuple(part_mask(self.sessions[i].trace, ranks[i], part) for i in range(2))
            none = tuple(np.zeros(len(self.sessions[i].trace), bool) for i in range(2))
            if part in GAP_PARTS:
                self.set_masks(none, f"{GAP_PARTS[part]}; the tables' other rows outline their events.")
            elif masks[0] is None or masks[1] is None:
                self.show_slower()  # the step, its GPU time: what got slower in it
            elif not (masks[0].any() or masks[1].any()):
                self.set_masks(none, f"No {part} on record on these ranks in either run: nothing to outline.")
            else:
                self.highlight(masks, f"{part} ({row['ranks']})")
            return
        if tab == "coll":
            want = [(row["collective"], row["group"])]
            masks = tuple(collective_mask(self.sessions[i].trace, cmp.comm_args[i], want) for i in range(2))
            what = f"{row['collective']} {row['group']}"
        else:
            masks = tuple(name_mask(self.sessions[i].trace, [row["name"]]) for i in range(2))
            what = row["name"]
        self.highlight(masks, what)

    def highlight(self, masks, what: str) -> None:
        """Outline masks and centre each view on the first outlined event of its step."""
        firsts = []
        self._syncing = True
        try:
            for i, s in enumerate(SIDES):
                j = first_in(self.comparison, s, self.step_of(s), self.sessions[i].trace, masks[i])
                firsts.append(j)
                if j is not None:
                    self.views[s].show_event(j)
        finally:
            self._syncing = False
        missing = [s.upper() for s, j in zip(SIDES, firsts) if j is None]
        if not missing:
            ra, rb = self.views["a"].rel_range(), self.views["b"].rel_range()
            self.shift = rb[0] - ra[0]
            self.line_up.setVisible(abs(self.shift) > 0.5)
        else:
            src = "a" if firsts[0] is not None else "b"
            self._sync_from(src)
        note = f" (not in {' or '.join(missing)}'s shown step)" if missing else ""
        if not missing:
            # where each first one is in its step, from the events (the views' shift is that only
            # where neither view stops at its step's edge: stall_off's kernel 0.24 ms into its step
            # was said to come 11.7 ms earlier than stall_on's, 25.4 ms in)
            at = [
                int(self.sessions[i].trace.columns["start"][j]) - int(self.views[s].step_start)
                for i, (s, j) in enumerate(zip(SIDES, firsts))
            ]
            d = at[1] - at[0]
            lined = abs(self.shift - d) <= max(1_000, 0.01 * abs(d))
            if abs(d) >= 1_000:
                note = f"; in B it comes {format_duration(abs(d))} {'later' if d > 0 else 'earlier'} in the step" + (
                    ", so B's view is shifted by that much to line the first ones up"
                    if lined
                    else f" ({format_duration(at[1])} after its start, in A {format_duration(at[0])})"
                )
        short = what if len(what) <= 80 else what[:79] + "…"  # a C++ kernel name can fill the window
        self.set_masks(
            masks,
            f"<span style='background:#facc15'>&nbsp;&nbsp;</span> outlined: <b>{html.escape(short)}</b>{note}",
            what,
        )


def fit_screen(w, parent=None) -> None:
    """1500x900 where the screen has room; on a smaller one (a 1366x768 laptop) its available
    area less the frame, placed on it: the window never opens past the screen's edges."""
    from PySide6.QtGui import QGuiApplication

    screen = (parent.screen() if parent is not None else None) or w.screen() or QGuiApplication.primaryScreen()
    if screen is None:
        w.resize(1500, 900)
        return
    avail = screen.availableGeometry()
    width, height = min(1500, avail.width() - 16), min(900, avail.height() - 40)
    w.resize(width, height)
    w.move(avail.x() + (avail.width() - width) // 2, avail.y() + max(0, (avail.height() - height - 30) // 2))


def open_compare(parent, session_a, session_b, **options) -> CompareWindow:
    """Open a Compare window (File > Compare with…). options: ranks=(I, J) or (I, "median"),
    steps=(SA, SB) with each 'all', 'median', a step number, '3-5' or a list."""
    w = CompareWindow(session_a, session_b, parent=parent, **options)
    w.setAttribute(Qt.WA_DeleteOnClose)
    w.show()
    return w


def compare_rank_with_others(parent, session, rank: int) -> CompareWindow:
    """A straggler finding's "compare this rank with the others": the rank against the per-step
    median of the other ranks of the same session."""
    return open_compare(parent, session, session, ranks=(rank, "median"))
