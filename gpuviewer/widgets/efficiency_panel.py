"""The Efficiency tab: the kernels by op family (time, TFLOP/s, % of the roof of their precision,
GB/s, FLOP/byte, compute- or memory-bound, Tensor Cores), sortable, a row marking its kernels on the
timeline; beside it the roofline (log-log, one point per family, the device's roofs). Its data
comes from the Session (efficiency_view), computed off the UI thread the first time the tab shows."""

from __future__ import annotations

import math

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QPointF, QRectF, Qt, QTimer, Signal
from PySide6.QtWidgets import QLabel, QSplitter, QVBoxLayout, QWidget

from .background import Background
from .frame_table import FrameTable, cell_text

_ROOF_PENS = {
    "fp64": "#8c564b",
    "fp32": "#d62728",
    "tf32": "#ff7f0e",
    "bf16": "#2ca02c",
    "fp16": "#17becf",
    "fp8": "#9467bd",
}
_POINT = {True: "#2ca02c", False: "#d62728", None: "#7f7f7f"}  # Tensor Cores, SIMT, not said


# the table's headers as a user reads them (the view's columns keep their names for the code)
_HEADERS = {
    "time_ms": "time (ms)",
    "share_pct": "% of time",
    "tflops": "TFLOP/s",
    "pct_of_peak": "% of peak",
    "gbps": "GB/s",
    "flop_per_byte": "FLOP/byte",
    "tensor_cores": "Tensor Cores",
    "top_kernel": "top kernel",
}
# short headers (at 1366 px the pane shows five columns), each said in full on hover
_TIPS = {
    "% of time": "the family's share of compute-kernel time (every kernel but NCCL's)",
    "% of peak": "achieved TFLOP/s as a share of the device's peak for the family's precision (on Tensor Cores or not)",
    "FLOP/byte": "arithmetic intensity: the family's FLOPs per byte it moves",
    "bound": "compute- or memory-bound: which side of the roofline's ridge the family sits",
}


class Roofline(pg.PlotWidget):
    """Achieved TFLOP/s against arithmetic intensity (FLOP/byte), both log scales: each family a
    point (its size its share of kernel time), each precision's roof min(peak, bandwidth x I)."""

    def __init__(self, parent=None) -> None:
        super().__init__(parent)
        self.setBackground(None)
        p = self.getPlotItem()
        p.setLogMode(x=True, y=True)
        p.showGrid(x=True, y=True, alpha=0.2)
        p.setLabel("bottom", "arithmetic intensity", units="FLOP/byte")
        p.setLabel("left", "achieved", units="TFLOP/s")
        p.getAxis("bottom").enableAutoSIPrefix(False)
        p.getAxis("left").enableAutoSIPrefix(False)
        self.note = pg.TextItem("", anchor=(0, 0), color="#888")
        self.labels: list[pg.TextItem] = []
        self.roofs_text: pg.TextItem | None = None  # the roofs' names, one line
        self._roof_html: tuple[str, ...] = ()  # its text, whole and short
        self._point_labels: list[tuple[dict, pg.TextItem]] = []  # each family's label (_place_labels)
        p.getViewBox().sigResized.connect(lambda *_: self._place_labels())
        p.getViewBox().sigRangeChanged.connect(lambda *_: self._place_labels())

    def show_view(self, view) -> None:
        p = self.getPlotItem()
        p.clear()
        self.labels = []
        self._point_labels = []
        self.roofs_text = None
        pts = view.points() if view is not None else []
        xs = [q["intensity"] for q in pts]
        lo = min(xs + [1.0]) / 10
        hi = max(xs + [1e3]) * 10
        said = []
        if view is not None and view.gbps and view.roofs:
            grid = np.logspace(math.log10(lo), math.log10(hi), 200)
            same: dict[float, list[str]] = {}  # precisions sharing a peak: one roof, one label
            for prec, peak in view.roofs.items():
                same.setdefault(peak, []).append(prec)
            for peak, precs in same.items():
                y = np.minimum(peak, view.gbps * grid / 1e3)
                p.plot(grid, y, pen=pg.mkPen(_ROOF_PENS.get(precs[0], "#888"), width=1.5))
            # the roofs named in one line, each in its roof's colour, highest first, in the top left
            # corner (the bandwidth slope is low there and no family can sit above it): named at
            # their ridges, the H200's tf32, bf16 and fp8 names printed over each other (their ridges
            # 0.3 decades apart) at the 120 px the plot has in a 1366x768 window
            # (a non-breaking space inside each: a narrow plot wraps between roofs, never in one)
            names = " · ".join(
                f'<span style="color:{_ROOF_PENS.get(precs[0], "#888")}">{"/".join(precs)}&nbsp;{peak:g}</span>'
                for peak, precs in sorted(same.items(), reverse=True)
            )
            self.roofs_text = pg.TextItem(anchor=(0, 0))
            # the whole line, and without its lead where that does not fit (_place_labels)
            self._roof_html = (f'<span style="color:#666">roofs, TFLOP/s:</span> {names}', names)
            self.roofs_text.setHtml(self._roof_html[0])
            p.addItem(self.roofs_text, ignoreBounds=True)  # (placed at the view's corner: no say in its range)
            self.labels.append(self.roofs_text)
        elif view is not None:
            said.append(f"{view.device}: not in the device table, no roofs drawn")
        for q in pts:
            size = 8 + 22 * math.sqrt(q["share"])
            p.plot(
                [q["intensity"]],
                [q["tflops"]],
                pen=None,
                symbol="o",
                symbolSize=size,
                symbolBrush=pg.mkBrush(_POINT[q["tensor_cores"]] + "c0"),
                symbolPen=pg.mkPen("#222"),
            )
            # on a backdrop: the roofs' flat lines ran through the labels at their heights (an
            # audit); where beside its point, _place_labels decides
            t = pg.TextItem(q["name"], anchor=(0, 0), color="#444", fill=pg.mkBrush(255, 255, 255, 200))
            t.setZValue(5)  # over the other families' points (a label drawn under a later point lost letters)
            t.setPos(math.log10(q["intensity"]), math.log10(q["tflops"]))
            self._point_labels.append((q, t))
            p.addItem(t)
            self.labels.append(t)
        if view is not None and not pts:
            said.append("no family has known FLOPs and bytes (no shapes recorded): no points")
        elif view is not None:
            moves = sum(1 for f in view.families if f.get("flops") == 0)
            if moves:
                said.append(f"{moves} families only move bytes (no FLOPs): their GB/s are in the table")
        self.note.setText("\n".join(said))
        p.enableAutoRange()
        top = max(list((view.roofs or {}).values() if view is not None else []) + [q["tflops"] for q in pts] + [1.0])
        low = min([q["tflops"] for q in pts] + [top / 1e4])
        if view is not None and (pts or view.roofs):
            # room above the highest roof for its name (the fp8 roof's was cut at the top)
            p.setYRange(math.log10(low) - 0.3, math.log10(top) + 0.9, padding=0)
            if view.gbps and view.roofs:
                self.roofs_text.setPos(math.log10(lo), math.log10(top) + 0.9)
        if said and view is not None and (pts or view.roofs):
            # in the bottom right corner, under the roofs' flat parts (at the highest roof's height it
            # printed over the roofs' names)
            self.note.setAnchor((1, 1))
            self.note.setPos(math.log10(hi), math.log10(low) - 0.3)
            p.addItem(self.note, ignoreBounds=True)
        elif said:  # nothing drawn: the note alone
            self.note.setAnchor((0, 0))
            self.note.setPos(math.log10(lo), 0.0)
            p.addItem(self.note)
        self._place_labels()

    def _place_labels(self) -> None:
        """Each family's label beside its point (right or left; level with it, above or a line
        lower; then centred under or over it): the first place inside the plot covering no other
        point, no label placed before it and neither the roofs' names nor the note. Where its whole
        name has none, its short name (before the comma) is tried; where that has none either, the
        label is hidden (the table beside names every family) rather than drawn over what it
        would hide. In scene pixels, from the plot's own view range, placed again when the plot is
        resized or its range changes (show_view runs before the plot has its final size)."""
        vb = self.getPlotItem().getViewBox()
        area = vb.sceneBoundingRect()
        if area.width() < 50 or area.height() < 30:
            return
        # the roofs' names in the view's top left corner and the note in its bottom right, wherever
        # the view was panned, each wrapped inside the plot (at 1024 px both ran past its edges);
        # one over a family's point, or taller than this share of the plot, is hidden rather than
        # drawn over the points (the table beside names every family's figures; a review)
        got = self._point_labels
        at = {id(q): vb.mapViewToScene(QPointF(math.log10(q["intensity"]), math.log10(q["tflops"]))) for q, _t in got}
        points = list(at.values())
        (x0, x1), (y0, y1) = vb.viewRange()
        for it, corner, most in ((self.roofs_text, (x0, y1), 0.45), (self.note, (x1, y0), 0.3)):
            if it is None or it.scene() is None or (it is self.note and it.anchor.x() == 0):
                continue
            it.setPos(*corner)
            for html in self._roof_html if it is self.roofs_text else (None,):
                if html is not None:
                    it.setHtml(html)
                it.setTextWidth(-1)
                if it.boundingRect().width() > area.width() - 8:
                    it.setTextWidth(max(40.0, area.width() - 8))
                box = it.sceneBoundingRect()
                fits = box.height() <= most * area.height() and not any(box.contains(c) for c in points)
                if fits:
                    break
            it.setVisible(fits)
        if not got:
            return
        names = [
            it.sceneBoundingRect()
            for it in (self.roofs_text, self.note)
            if it is not None and it.scene() is not None and it.isVisible()
        ]
        fm = self.fontMetrics()
        placed: list[QRectF] = []
        spots = [(ax, ay) for ay in (0.0, 1.0, -1.0, 2.0) for ax in (0.0, 1.0)] + [(0.5, -0.7), (0.5, 1.7)]
        for q, t in got:
            c = at[id(q)]
            others = [at[id(o)] for o, _u in got if o is not q]
            found = None
            for text in dict.fromkeys((q["name"], q["name"].split(",")[0])):
                tw, th = fm.horizontalAdvance(text) + 10, fm.height() + 4
                for ax, ay in spots:
                    nudge = 4 if ax == 0 else -4 if ax == 1 else 0
                    box = QRectF(c.x() - ax * tw + nudge, c.y() - ay * th, tw, th)
                    if (
                        area.contains(box)
                        and not any(box.intersects(r) for r in placed + names)
                        and not any(box.adjusted(-6, -6, 6, 6).contains(o) for o in others)
                    ):
                        found = (text, (ax, ay), box)
                        break
                if found:
                    break
            t.setVisible(found is not None)
            if found:
                t.setText(found[0])
                t.setAnchor(found[1])
                placed.append(found[2])


class EfficiencyPanel(QWidget):
    eventChosen = Signal(int)  # the first kernel of a chosen family (the timeline goes there)

    def __init__(self, parent=None) -> None:
        super().__init__(parent)
        self.session = None
        self.view = None
        self.wanted = False  # computed once the tab is shown
        self.bg = Background(self)
        self.bg.done.connect(self._done)
        self.bg.failed.connect(self._failed)
        self.status = QLabel("")
        self.status.setWordWrap(True)
        self.table = FrameTable()
        self.table.model_.tips = dict(_TIPS)
        self.table.rowActivated.connect(self._row)
        self.roofline = Roofline()
        self.split = split = QSplitter(Qt.Horizontal)
        split.addWidget(self.table)
        split.addWidget(self.roofline)
        split.setStretchFactor(0, 3)
        split.setStretchFactor(1, 2)
        lay = QVBoxLayout(self)
        lay.setContentsMargins(2, 2, 2, 2)
        lay.addWidget(self.status)
        lay.addWidget(split, 1)

    def set_session(self, session) -> None:
        old = self.view
        self.session, self.view = session, None
        if old is not None:  # the last session's rows go (pandas is not imported before a session)
            self.table.set_frame(old.table.iloc[0:0])
        self.roofline.show_view(None)
        self.roofline.setVisible(True)
        self.status.setText("")
        if self.wanted:
            self.refresh()

    def shown(self, visible: bool) -> None:
        """The tab came to the front: compute (once) what it shows. Checked on the next turn:
        a window shown for the first time says every tabbed dock is visible, then hides the ones
        behind (at 64 ranks the op shapes' read ran for minutes behind the Findings tab)."""
        if visible and not self.wanted:
            QTimer.singleShot(0, self, self._start_if_seen)

    def _start_if_seen(self) -> None:
        if not self.wanted and self.isVisible() and not self.visibleRegion().isEmpty():
            self.wanted = True
            self.refresh()

    def refresh(self) -> None:
        if self.session is None or self.view is not None:
            return
        s = self.session
        self.status.setText("Measuring the kernels' work…")
        self.bg.run(lambda: (s, s.efficiency_view()))

    def _done(self, token: int, result) -> None:
        s, view = result
        if token != self.bg.token or s is not self.session:
            return
        self.view = view
        self.table.set_frame(view.table.rename(columns=_HEADERS))
        # a column with no value in any row is hidden (copied and exported still): JAX's rates,
        # peaks and bounds are all unknown, and its blank columns pushed the top kernel's name
        # past the dock's edge at 1366 px (a review)
        df = self.table.frame
        for k, name in enumerate(df.columns):  # (a table without rows keeps its headers: cpu_only's)
            self.table.setColumnHidden(k, len(df) > 0 and all(cell_text(v) == "" for v in df[name]))
        self.roofline.show_view(view)
        # a roofline with no point is an empty plot whose note the pane cut off at 1366 px: the
        # table takes the width and the line above says why there is no plot
        plotted = bool(view.points())
        self.roofline.setVisible(plotted)
        why = "" if plotted else " No roofline: no family's FLOPs and bytes are known."
        if plotted:
            self._fit_table()
        self.status.setText(
            f"{view.summary}.{why} Click a family to mark its kernels on the timeline "
            "(Enter / Shift+Enter in the search box step through them)."
        )

    # the table's columns up to '% of peak' in view, the plot keeping at least this much
    SHOWN_COLUMNS, PLOT_MIN_PX = 6, 420

    def _fit_table(self) -> None:
        """The table as wide as its first columns (family to % of peak: at 1366 px the 3:2 split
        cut TFLOP/s), the roofline the rest, never under PLOT_MIN_PX."""
        t = self.table
        total = sum(self.split.sizes())
        if total <= 0:
            return
        n = min(self.SHOWN_COLUMNS, t.model().columnCount())
        want = (
            t.verticalHeader().sizeHint().width()
            + sum(t.columnWidth(c) for c in range(n))
            + t.verticalScrollBar().sizeHint().width()
            + 2 * t.frameWidth()
        )
        left = max(min(want, total - self.PLOT_MIN_PX), total // 3)
        self.split.setSizes([left, total - left])

    def _failed(self, token: int, msg: str) -> None:
        if token == self.bg.token:
            self.status.setText(f"Could not measure the kernels' work: {msg}")

    def _row(self, row) -> None:
        if self.session is None or self.view is None:
            return
        name = str(row["family"])
        ev = self.view.family_events(name)
        if self.session.mark_events(ev, name):
            self.eventChosen.emit(int(self.session.view.matches[self.session.view.match_pos]))


class EfficiencyDock:
    """The tab beside Findings, following the window's session; a kernel's details gain its work."""

    def __init__(self, win, beside) -> None:
        from .docks import dock

        self.win = win
        self.panel = EfficiencyPanel()
        self.dock = dock(win, "Efficiency", self.panel, Qt.BottomDockWidgetArea)
        win.tabifyDockWidget(beside, self.dock)
        self.dock.visibilityChanged.connect(self.panel.shown)
        self.panel.eventChosen.connect(lambda i: win._goto_event(i))
        win.controller.loaded.connect(self.set_session)

    def set_session(self, session) -> None:
        self.panel.set_session(session)
        self.win.details.work = session.kernel_work
