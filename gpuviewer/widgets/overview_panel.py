"""Overview per rank, as the TensorBoard profiler's Overview had: GPU utilization, a stacked
compute / exposed communication / other GPU work / idle bar per step, and the top kernels."""

from __future__ import annotations

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import Qt
from PySide6.QtGui import QColor
from PySide6.QtWidgets import QComboBox, QHBoxLayout, QLabel, QTableWidget, QTableWidgetItem, QVBoxLayout, QWidget

from ..model.fmt import utilization_line
from ..render import theme

PARTS = [
    ("compute", (66, 133, 244)),
    ("exposed communication", (234, 88, 12)),
    ("memcpy / other GPU", (22, 163, 74)),
    ("idle", (203, 213, 225)),
]


class OverviewPanel(QWidget):
    def __init__(self, parent=None) -> None:
        super().__init__(parent)
        self.analysis = None  # the session's Analysis (analysis.results)
        self.rank_box = QComboBox()
        self.util = QLabel("")
        # wrapped: one unwrapped line as long as a rank's shares set the whole window's minimum
        # width (1487 px for samples/ddp, wider than a laptop's screen)
        self.util.setWordWrap(True)
        top = QHBoxLayout()
        top.addWidget(QLabel("Rank"))
        top.addWidget(self.rank_box)
        top.addWidget(self.util, 1)
        self.plot = pg.PlotWidget()
        self.plot.setBackground(theme.current().background)
        self.plot.setLabel("left", "ms")
        self.plot.setLabel("bottom", "step")
        # (pyqtgraph's SI prefix read 'step (x0.001)' under alexnet's one bar; an audit of the window)
        for side in ("left", "bottom"):
            self.plot.getAxis(side).enableAutoSIPrefix(False)
        self.plot.setMouseEnabled(x=False, y=False)
        self.plot.setMenuEnabled(False)
        # the colours' key in a row of its own above the plot: drawn inside it (pyqtgraph's
        # legend), its grey labels lay over the bars of a short plot and could not be read
        self.legend = QLabel(
            "&nbsp;&nbsp;".join(f'<span style="color: rgb{tuple(rgb)}">&#9632;</span> {label}' for label, rgb in PARTS)
        )
        self.legend.setTextFormat(Qt.RichText)
        self.table = QTableWidget(0, 4)
        self.table.setHorizontalHeaderLabels(["Kernel", "Count", "Total ms", "Share"])
        self.table.setColumnWidth(0, 380)
        lay = QVBoxLayout(self)
        lay.setContentsMargins(2, 2, 2, 2)
        lay.addLayout(top)
        lay.addWidget(self.legend)
        lay.addWidget(self.plot, 3)
        lay.addWidget(self.table, 2)
        self.rank_box.currentIndexChanged.connect(self._show)
        self.bars: list = []

    def set_analysis(self, a) -> None:
        self.analysis = a
        self.rank_box.blockSignals(True)
        self.rank_box.clear()
        for r in a.ranks:
            self.rank_box.addItem(f"{r['rank']}", r["rank"])
        self.rank_box.blockSignals(False)
        self._show()

    def warm(self, rank: int) -> list[bool]:
        """Per step (as stacks lists them): whether it is warm-up."""
        return [bool(s.get("warmup")) for s in self.analysis.rank(rank)["steps"]]

    def stacks(self, rank: int) -> tuple[list, np.ndarray]:
        """Per step: compute, exposed communication, other GPU work, idle (ms); they add up to
        the step's GPU time: its window and the idle before and after it that is the step's (a
        late rank's stall before its step, which the Ranks heatmap and the findings count in
        that step; an audit of the window)."""
        r = self.analysis.rank(rank)
        steps = [s["step"] if s["step"] is not None else 0 for s in r["steps"]]
        rows = []
        for s in r["steps"]:
            comp, exp_ = s["compute_ns"], s["exposed_comm_ns"]
            other = max(0, s["busy_ns"] - comp - exp_)
            rows.append([comp, exp_, other, s["idle_ns"] + s.get("idle_before_ns", 0) + s.get("idle_after_ns", 0)])
        return steps, np.array(rows, np.float64).reshape(-1, 4) / 1e6

    def _show(self) -> None:
        if not self.analysis or self.rank_box.count() == 0:
            return
        rank = self.rank_box.currentData()
        r = self.analysis.rank(rank)
        self.util.setText(f"  {utilization_line(r)}")
        self.plot.clear()
        steps, v = self.stacks(rank)
        warm = np.array(self.warm(rank), bool)
        x = np.arange(len(steps))
        base = np.zeros(len(steps))
        for k, (label, rgb) in enumerate(PARTS):
            for sel, alpha in ((~warm, 255), (warm, 70)):  # a warm-up step drawn faint: not a step to compare
                if sel.any():
                    bar = pg.BarGraphItem(
                        x=x[sel], height=v[sel, k], y0=base[sel], width=0.7, brush=QColor(*rgb, alpha), pen=None
                    )
                    self.plot.addItem(bar)
            base = base + v[:, k]
        ax = self.plot.getAxis("bottom")
        if all(st["step"] is None for st in r["steps"]):
            # a capture without steps is measured as one: its bar is the capture's, not 'step 0'
            self.plot.setLabel("bottom", "no steps: the whole capture, measured as one")
            ax.setTicks([[(0, "the capture")]])
        else:
            self.plot.setLabel("bottom", "step")
            ax.setTicks([[(i, f"{s} (warm-up)" if w else str(s)) for i, (s, w) in enumerate(zip(steps, warm))]])
        # scaled to the profiled steps: nsys_ddp's 502 ms warm-up step 0 made steps 1-9 (15-69 ms)
        # slivers (an audit of the window); a warm-up bar past the top says its time
        self.plot.enableAutoRange()
        if warm.any() and (~warm).any():
            top_ms = float(base[~warm].max()) * 1.15 or 1.0
            self.plot.setYRange(0, top_ms, padding=0)
            for i in np.flatnonzero(warm & (base > top_ms)).tolist():
                t = pg.TextItem(f"{base[i]:,.0f} ms", color=theme.current().text, anchor=(0.5, 0))
                t.setPos(float(i), top_ms)
                self.plot.addItem(t)
        top = (r.get("kernels") or {}).get("top", [])
        self.table.setRowCount(len(top))
        for i, row in enumerate(top):
            self.table.setItem(i, 0, QTableWidgetItem(row["name"]))
            for j, val in enumerate((f"{row['count']:,}", f"{row['total_ns'] / 1e6:.2f}", f"{row['share']:.1%}"), 1):
                it = QTableWidgetItem(val)
                it.setTextAlignment(Qt.AlignRight | Qt.AlignVCenter)
                self.table.setItem(i, j, it)
