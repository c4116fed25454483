"""Memory panel: allocated and reserved bytes per rank and device on the timeline's time axis
(x-linked, so pan and zoom follow it), the device's capacity, each step's peak, headroom;
snapshot replays with call-site categories as stacked areas. Hover shows the value (and the
snapshot allocation); a click puts a cursor on the timeline at that time.

Nothing but the curves and the peak's label is drawn over the data: the key (ranks' colours,
solid / dashed, categories) is the line above the plot, the capacity a mark on the y axis
(render/gb_axis.py), and the peak's label is placed where its measured text fits in the view."""

from __future__ import annotations

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QColor, QPen
from PySide6.QtWidgets import QCheckBox, QHBoxLayout, QLabel, QTextBrowser, QVBoxLayout, QWidget

from ..model.trace import Trace
from ..render import theme
from ..render.curves_item import CurvesItem
from ..render.gb_axis import GbAxis
from ..render.time_axis import TimeAxis, format_ns
from ..session.panels import memory_capacity as capacity_bytes
from ..session.panels import memory_peaks_per_step as peaks_per_step

RANK_COLORS = [
    (37, 99, 235),
    (220, 38, 38),
    (22, 163, 74),
    (147, 51, 234),
    (234, 88, 12),
    (8, 145, 178),
    (202, 138, 4),
    (219, 39, 119),
]
CAT_COLORS = [
    (96, 165, 250, 150),
    (251, 146, 60, 150),
    (74, 222, 128, 150),
    (192, 132, 252, 150),
    (148, 163, 184, 150),
    (250, 204, 21, 150),
]
GB = 1e9
_MARKER_PX = 9  # a step peak's triangle rises 7 px above its point; a label keeps clear of it
# Category colours as PyTorch's memory timeline draws them, for both snapshots and timelines.
CATEGORY_COLOR = {
    "parameters": (22, 101, 52),
    "parameters / inputs": (22, 101, 52),
    "optimizer state": (218, 165, 32),
    "inputs": (71, 85, 105),
    "temporaries": (147, 112, 219),
    "activations": (220, 38, 38),
    "activations (forward)": (220, 38, 38),
    "gradients": (37, 99, 235),
    "gradients (backward)": (37, 99, 235),
    "autograd detail": (96, 165, 250),
    "unknown": (148, 163, 184),
    "other": (148, 163, 184),
}


class MemoryPanel(QWidget):
    cursorMoved = Signal(object)  # absolute ns

    def __init__(self, parent=None) -> None:
        super().__init__(parent)
        self.trace: Trace | None = None
        self.origin = 0
        self.multiples = QCheckBox("small multiples (one plot per rank)")
        # the y axis from the data's low, not 0: 129.5 GB held and 3.6 GB a step drew three flat
        # lines on a 0-180 GB axis (an audit); the memory headroom finding turns it on
        self.from_data = QCheckBox("y from the data")
        self.from_data.setToolTip("Start the y axis just under the lowest value shown, not at 0")
        self.info = QLabel("")
        # many ranks make a long line: it must never widen the window (the full text is its tooltip)
        from PySide6.QtWidgets import QSizePolicy

        self.info.setSizePolicy(QSizePolicy.Ignored, QSizePolicy.Preferred)
        self.info.setMinimumWidth(0)
        # the key, short and never cut: the notes before it give way (their full text is a tooltip)
        self.key = QLabel("")
        self.key.setTextFormat(Qt.RichText)
        self.frames = QTextBrowser()
        self.frames.setMaximumWidth(420)
        self.frames.hide()
        top = QHBoxLayout()
        top.addWidget(self.info, 1)
        top.addWidget(self.key)
        top.addSpacing(12)
        top.addWidget(self.from_data)
        top.addWidget(self.multiples)
        self.plots_box = QVBoxLayout()
        self.plots_box.setSpacing(0)
        body = QHBoxLayout()
        body.addLayout(self.plots_box, 1)
        body.addWidget(self.frames)
        lay = QVBoxLayout(self)
        lay.setContentsMargins(2, 2, 2, 2)
        lay.addLayout(top)
        lay.addLayout(body, 1)
        self.plots: list[pg.PlotWidget] = []
        self.link_to = None
        self.series: list[dict] = []  # what is drawn: rank, device, name, x, y
        self.curve_items: list[CurvesItem] = []  # one a plot
        self.peaks: list[tuple[int, int, float, float]] = []  # rank, step, x, GB: the step peaks marked
        self.peak_labels: list[tuple[pg.PlotWidget, pg.TextItem]] = []  # placed on each range change
        self._category_keys: list[tuple[str, tuple]] = []
        self.multiples.toggled.connect(lambda _: self.rebuild())
        self.from_data.toggled.connect(lambda _: [self._fit_y(p) for p in self.plots])

    def align_with(self, left_px: int, right_px: int) -> None:
        """Line the plot area up with the timeline's (its lane labels on the left, its scroll
        bar on the right), so a time is at the same x in both."""
        self._align = (left_px, right_px)

    def set_trace(self, trace: Trace, origin: int, link_viewbox=None) -> None:
        self.trace = trace
        self.origin = origin
        self.link_to = link_viewbox
        self.rebuild()

    def has_data(self) -> bool:
        return bool(
            self.trace is not None
            and any(len(c.t) for c in self.trace.counters if c.name.startswith(("allocated", "reserved")))
        )

    def _clear(self) -> None:
        for p in self.plots:
            self.plots_box.removeWidget(p)
            p.deleteLater()
        self.plots = []
        self.series = []
        self.curve_items = []
        self.peaks = []
        self.peak_labels = []
        self._ytop: dict = {}  # plot -> the highest value it shows (GB)
        self._plot_ranks: dict = {}  # plot -> its ranks (the lowest value in view is read from their series)
        self._category_keys: list[tuple[str, tuple]] = []  # snapshot categories named above the plot
        self.key.setText("")

    def _new_plot(self, title: str) -> pg.PlotWidget:
        p = pg.PlotWidget(axisItems={"bottom": TimeAxis("bottom"), "left": GbAxis()})
        left, right = getattr(self, "_align", (0, 0))
        p.getAxis("left").setWidth(max(40, left))
        p.getPlotItem().layout.setContentsMargins(0, 0, right, 0)
        p.setMinimumHeight(70)  # small screens: the timeline keeps the height
        p.setBackground(theme.current().background)
        p.setMenuEnabled(False)
        p.hideButtons()
        p.setMouseEnabled(x=True, y=False)
        if title:
            # small multiples share a short strip: each plot named on its axis (no title row), the
            # time axis under the last one only (rebuild), so the curves keep the height
            p.setLabel("left", title)
        if self.link_to is not None:
            # Same range as the timeline, both ways. (pyqtgraph's setXLink aligns views by screen
            # geometry, which is off when the plot areas differ; an exact range is simpler.)
            vb = p.getViewBox()
            x0, x1 = self.link_to.viewRange()[0]
            vb.setXRange(x0, x1, padding=0)
            vb.sigXRangeChanged.connect(lambda v, r: self._from_memory(v))
        p.getViewBox().sigRangeChanged.connect(lambda *_, pw=p: self._place_labels(pw))
        p.getViewBox().sigResized.connect(lambda *_, pw=p: self._fit_y(pw))
        p.scene().sigMouseMoved.connect(lambda pos, pw=p: self._hover(pw, pos))
        p.scene().sigMouseClicked.connect(lambda ev, pw=p: self._click(pw, ev))
        self.plots_box.addWidget(p)
        self.plots.append(p)
        return p

    def follow(self, x0: float, x1: float) -> None:
        """The timeline moved: show the same range."""
        self._syncing = True
        try:
            for p in self.plots:
                p.getViewBox().setXRange(x0, x1, padding=0)
                if self.from_data.isChecked():
                    self._fit_y(p)  # the lowest value in view moved with it
        finally:
            self._syncing = False

    def _from_memory(self, vb) -> None:
        if getattr(self, "_syncing", False) or self.link_to is None:
            return
        x0, x1 = vb.viewRange()[0]
        self.link_to.setXRange(x0, x1, padding=0)

    def rebuild(self) -> None:
        self._clear()
        t = self.trace
        if t is None:
            return
        ranks = sorted({c.rank for c in t.counters if c.name.startswith(("allocated", "reserved"))})
        if not ranks:
            self.info.setText(
                "No memory data in this session (Kineto profile_memory=True, nsys "
                "--cuda-memory-usage=true, or open a torch.cuda.memory snapshot)."
            )
            return
        groups = [[r] for r in ranks] if self.multiples.isChecked() else [ranks]
        notes = []
        colored: list[tuple[int, tuple]] = []  # notes written in their rank's colour
        for group in groups:
            plot = self._new_plot(f"r{group[0]}" if self.multiples.isChecked() else "")
            if self.multiples.isChecked() and group is not groups[-1]:
                plot.hideAxis("bottom")
            curves = CurvesItem()  # every curve of the plot in one item, decimated to pixels
            plot.addItem(curves)
            self.curve_items.append(curves)
            ymax = 0.0
            marks: list[tuple[float, str]] = []  # capacities, on the y axis
            for r in group:
                col = RANK_COLORS[r % len(RANK_COLORS)]
                for c in t.counters:
                    if c.rank != r or not c.name.startswith(("allocated", "reserved")) or not len(c.t):
                        continue
                    dash = c.name.startswith("reserved")
                    x = (np.asarray(c.t) - self.origin).astype(np.float64)
                    y = np.asarray(c.v, np.float64) / GB
                    pen = pg.mkPen(col, width=1.5, style=Qt.DashLine if dash else Qt.SolidLine)
                    curves.add(x, y, pen)
                    self.series.append({"rank": r, "device": c.device, "name": c.name, "x": x, "y": y})
                    ymax = max(ymax, float(y.max()))
                    if c.name == "allocated":
                        # each step's peak: the top of the forward/backward sawtooth
                        pks = peaks_per_step(t, r, c.device)
                        if pks:
                            # marked in the curves' image (a scatter item a rank cost 0.6 ms a pan
                            # at 64 ranks); the hover names the step's peak
                            curves.add_markers(
                                [pk["t_ns"] - self.origin for pk in pks],
                                [pk["peak_bytes"] / GB for pk in pks],
                                QColor(*col),
                            )
                            self.peaks += [
                                (r, pk["step"], pk["t_ns"] - self.origin, pk["peak_bytes"] / GB) for pk in pks
                            ]
                            top = max(pks, key=lambda pk: pk["peak_bytes"])
                            if len(group) > 1:
                                continue  # overlaid ranks: the peaks are in the line above the plot
                            lab = pg.TextItem(
                                f"r{r} peak {top['peak_bytes'] / GB:.2f} GB (step {top['step']})",
                                color=col,
                                anchor=(0.5, 1.0),
                            )
                            lab.setPos(top["t_ns"] - self.origin, top["peak_bytes"] / GB)
                            plot.addItem(lab)
                            self.peak_labels.append((plot, lab))
                cap_devs = {c.device for c in t.counters if c.rank == r}
                data_max = max((float(s_["y"].max()) for s_ in self.series if s_["rank"] == r), default=0.0)
                for d in sorted(cap_devs):
                    cap = capacity_bytes(t, r, d)
                    if cap and cap / GB <= 1.6 * max(data_max, 1e-9):
                        ink = theme.current().text_dim
                        # named on the y axis (same GPUs: one mark), never over the curves
                        plot.addItem(pg.InfiniteLine(pos=cap / GB, angle=0, pen=QPen(ink, 1, Qt.DashDotLine)))
                        marks.append((round(cap / GB, 1), f"capacity {cap / GB:.1f} GB"))
                        ymax = max(ymax, cap / GB)
                    if cap:
                        peak = max(
                            (
                                s["y"].max()
                                for s in self.series
                                if s["rank"] == r and s["device"] == d and s["name"] == "allocated"
                            ),
                            default=None,
                        )
                        if peak is not None:
                            notes.append(
                                f"rank {r} GPU {d}: peak {peak:.1f} GB of {cap / GB:.1f} GB, "
                                f"headroom {cap / GB - peak:.1f} GB"
                            )
                            colored.append((len(notes) - 1, col))
            for s in getattr(t, "snapshots", []):
                if s.rank in group:
                    self._stacked(plot, s)
                    ymax = max(ymax, float(s.allocated.max()) / GB)
                    if s.allocations:
                        notes.append(
                            f"snapshot GPU {s.device}: {len(s.allocations):,} allocations, peak "
                            f"{s.allocated.max() / GB:.2f} GB in the recorded history (click for the stack)"
                        )
                    else:
                        notes.append(f"memory timeline: peak {s.allocated.max() / GB:.2f} GB by category")
            plot.getAxis("left").set_marks(marks)
            self._ytop[plot] = ymax
            self._plot_ranks[plot] = group
            self._fit_y(plot)
        import html

        tint = dict(colored)
        parts = [
            f"<span style='color:rgb{tint[k]}'>{html.escape(n)}</span>" if k in tint else html.escape(n)
            for k, n in enumerate(notes)
        ]
        # snapshot categories first: the stacked bands are read by them
        cats = "&nbsp;&nbsp;".join(
            f"<span style='color:rgb{rgb}'>&#9632;</span>&nbsp;{html.escape(name)}" for name, rgb in self._category_keys
        )
        self.key.setText("solid: allocated, dashed: reserved" if colored else "")
        self.info.setText(
            "  ·  ".join(([cats] if cats else []) + parts)
            or "allocated (solid) and reserved (dashed) per rank and device"
        )
        self.info.setToolTip("\n".join([n for n, _ in self._category_keys] + notes))

    def _fit_y(self, plot) -> None:
        """The y range: from 0 to the top value and room above it for the step markers and, where
        the plot is tall enough (2.5 times that room), for the peak's label."""
        top = self._ytop.get(plot, 0.0)
        if not top:
            plot.setYRange(0, 1, padding=0)
        else:
            h = plot.getViewBox().height()
            room = _MARKER_PX + max(
                (lab.textItem.boundingRect().height() for pw, lab in self.peak_labels if pw is plot), default=0.0
            )
            # the top value `room` px under the plot's top, or 15% of the height under it
            frac = room / h if h >= 2.5 * room else 0.15
            # (not under a snapshot's stacked bands: they are drawn from 0)
            low = self._low_in_view(plot) if self.from_data.isChecked() and not self._category_keys else 0.0
            low = max(0.0, low - 0.1 * (top - low))  # a tenth of the swing under the lowest value
            plot.setYRange(low, low + (top - low) / (1 - frac), padding=0)
        self._place_labels(plot)

    def _low_in_view(self, plot) -> float:
        """The lowest value the plot's curves take in its x range (GB; 0 where none)."""
        x0, x1 = plot.getViewBox().viewRange()[0]
        ranks = self._plot_ranks.get(plot) or []
        lows = []
        for sr in self.series:
            if sr["rank"] in ranks and len(sr["x"]):
                # the value held at the view's left edge counts: a step curve keeps it until the next point
                a = max(int(np.searchsorted(sr["x"], x0, side="right")) - 1, 0)
                b = int(np.searchsorted(sr["x"], x1, side="right"))
                if b > a:
                    lows.append(float(sr["y"][a:b].min()))
        return min(lows, default=0.0)

    def _place_labels(self, plot) -> None:
        """Each peak label above its point, centred, unless its measured text would leave the
        view there: then shifted to stay inside (left or right aligned), or hidden where the
        view is too short for it or the peak is out of view."""
        vb = plot.getViewBox()
        view = vb.sceneBoundingRect()
        if view.width() <= 0 or view.height() <= 0:
            return
        for pw, lab in self.peak_labels:
            if pw is not plot:
                continue
            size = lab.textItem.boundingRect()  # the text's own pixels
            at = vb.mapViewToScene(lab.pos())
            ax = 0.5
            if at.x() - size.width() / 2 < view.left():
                ax = 0.0
            elif at.x() + size.width() / 2 > view.right():
                ax = 1.0
            h = max(size.height(), 1.0)
            # above the point and its step marker, or not at all (a short strip: below it, the
            # label lay over the curve; the line above the plot says the peak)
            above = at.y() - _MARKER_PX - h >= view.top() - 0.5
            lab.setVisible(above and view.left() <= at.x() <= view.right())  # its peak in view
            ay = 1 + _MARKER_PX / h
            if (ax, ay) != tuple(lab.anchor):
                lab.setAnchor((ax, ay))

    def _stacked(self, plot, s) -> None:
        """Call-site categories as stacked areas: cumulative curves filled down to zero, drawn
        from the top one down so each band shows its own colour."""
        names, tt, vals = s.categories()
        x = (tt - self.origin).astype(np.float64)
        cum = np.cumsum(vals, axis=0) / GB
        for k in range(len(names) - 1, -1, -1):
            rgba = CATEGORY_COLOR.get(names[k], CAT_COLORS[k % len(CAT_COLORS)][:3])
            item = pg.PlotDataItem()
            plot.addItem(item)
            item.setData(
                x,
                cum[k],
                pen=pg.mkPen(rgba[:3], width=0.5),
                fillLevel=0.0,
                brush=pg.mkBrush(*rgba[:3], 200),
                name=f"snapshot: {names[k]}",
            )
            item.setZValue(-10 - k)
            key = (f"{names[k]} (by call site)" if s.allocations else names[k], tuple(rgba[:3]))
            if key not in self._category_keys:
                self._category_keys.insert(0, key)  # drawn top band first: the key reads bottom up
        self.series.append(
            {"rank": s.rank, "device": s.device, "name": "snapshot", "x": x, "y": s.allocated / GB, "snapshot": s}
        )

    def value_at(self, x: float) -> list[tuple[dict, float]]:
        out = []
        for s in self.series:
            if not len(s["x"]):
                continue
            k = int(np.searchsorted(s["x"], x, side="right")) - 1
            if k >= 0:
                out.append((s, float(s["y"][k])))
        return out

    def _hover(self, plot, pos) -> None:
        vb = plot.getViewBox()
        if not plot.sceneBoundingRect().contains(pos):
            return
        x = vb.mapSceneToView(pos).x()
        parts = [f"r{s['rank']} GPU{s['device']} {s['name']}: {v:.3f} GB" for s, v in self.value_at(x)]
        near = 5 * (vb.viewRange()[0][1] - vb.viewRange()[0][0]) / max(1.0, vb.width())  # 5 px
        parts += [f"r{r} step {st}: peak {gb:.3f} GB" for r, st, px, gb in self.peaks if abs(px - x) <= near]
        snap = next((s["snapshot"] for s in self.series if "snapshot" in s), None)
        if snap is not None:
            a = snap.allocation_at(int(x + self.origin))
            if a is not None:
                parts.append(f"allocation {a.size / 1e6:.2f} MB ({a.category})")
        plot.setToolTip(f"{format_ns(x)}\n" + "\n".join(parts))

    def _click(self, plot, ev) -> None:
        if ev.button() != Qt.LeftButton:
            return
        x = plot.getViewBox().mapSceneToView(ev.scenePos()).x()
        self.show_allocation(x)
        self.cursorMoved.emit(int(x + self.origin))

    def show_allocation(self, x: float) -> None:
        snap = next((s["snapshot"] for s in self.series if "snapshot" in s), None)
        if snap is None:
            self.frames.hide()
            return
        a = snap.allocation_at(int(x + self.origin))
        if a is None:
            return
        rows = "".join(
            f"<li>{_esc(str(f.get('name')))} <span style='color:gray'>{_esc(str(f.get('filename')))}:"
            f"{f.get('line')}</span></li>"
            for f in a.frames[:40]
        )
        freed = f", freed after {(a.free_ns - a.t_ns) / 1e6:.2f} ms" if a.free_ns else ", not freed in the history"
        self.frames.setHtml(
            f"<b>{a.size / 1e6:.2f} MB</b> at {format_ns(a.t_ns - self.origin)} ({a.category}{freed})<ol>{rows}</ol>"
        )
        self.frames.show()


def _esc(s: str) -> str:
    return s.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
