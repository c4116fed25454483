"""Rank overview: a ranks x steps heatmap of the step's GPU time, the wait a rank caused the
others, or the wait it suffered; sortable by rank, host or lateness; a click takes the timeline
to that rank and step. Filled from the analysis (no parsing here)."""

from __future__ import annotations

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QBrush, QColor
from PySide6.QtWidgets import (
    QComboBox,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

WARM_CELL = QColor(226, 232, 240)  # a warm-up step's cells: grey, whatever their ms
MEASURES = {"step time (GPU)": "gpu_time", "wait caused": "caused_ns", "wait suffered": "wait_ns"}
ORDERS = ("rank", "host", "lateness")
# The colour is absolute ms, not a share of the worst cell (which painted 1.3 ms of jitter like
# 33 ms when nothing worse happened): white up to the threshold, deepest at FULL_MS, log between.
THRESHOLD_MS = 2.0
FULL_MS = 50.0


def shade(ms: float) -> float:
    """0 (white) .. 1 (deepest) for a cell of `ms` over its baseline."""
    import math

    if ms <= THRESHOLD_MS:
        return 0.0
    return min(1.0, math.log(ms / THRESHOLD_MS) / math.log(FULL_MS / THRESHOLD_MS))


def colour(k: float) -> QColor:
    return QColor(255, int(255 - 160 * k), int(255 - 230 * k))  # white -> deep orange


class RankOverview(QWidget):
    cellChosen = Signal(int, int)  # rank, step

    def __init__(self, parent=None) -> None:
        super().__init__(parent)
        self.measure = QComboBox()
        self.measure.addItems(list(MEASURES))
        self.measure.setCurrentIndex(1)
        self.order = QComboBox()
        self.order.addItems([f"sort by {o}" for o in ORDERS])
        self.note = QLabel("")
        self.note.setTextFormat(Qt.RichText)
        from PySide6.QtWidgets import QSizePolicy

        self.note.setSizePolicy(QSizePolicy.Ignored, QSizePolicy.Preferred)  # never widens the window
        top = QHBoxLayout()
        top.addWidget(QLabel("colour:"))
        top.addWidget(self.measure)
        top.addWidget(self.order)
        top.addWidget(self.note, 1)
        self.table = QTableWidget()
        self.table.setEditTriggers(QTableWidget.NoEditTriggers)
        self.table.setStyleSheet("QTableWidget { font-size: 8pt; }")
        self.table.horizontalHeader().setSectionResizeMode(QHeaderView.Stretch)
        lay = QVBoxLayout(self)
        lay.setContentsMargins(2, 2, 2, 2)
        lay.addLayout(top)
        lay.addWidget(self.table, 1)
        self.analysis = None  # the session's Analysis (analysis.results)
        self.shades: dict[tuple[int, int], float] = {}  # (rank, step) -> 0..1, as painted
        self.hosts: dict[int, str] = {}
        self.measure.currentIndexChanged.connect(self._fill)
        self.order.currentIndexChanged.connect(self._fill)
        self.table.cellClicked.connect(self._clicked)

    def set_analysis(self, a, hosts: dict[int, str] | None = None) -> None:
        self.analysis = a
        self.hosts = hosts or {}
        self._fill()

    def values(self) -> dict[int, dict[int, float]]:
        """rank -> step -> ms of the chosen measure."""
        key = MEASURES[self.measure.currentText()]
        out: dict[int, dict[int, float]] = {}
        for r in self.analysis.ranks if self.analysis is not None else []:
            row = out.setdefault(r["rank"], {})
            for s in r["steps"]:
                if s["step"] is None:
                    continue
                v = (
                    (s["end_ns"] - s["start_ns"] + s.get("idle_before_ns", 0) + s.get("idle_after_ns", 0))
                    if key == "gpu_time"
                    else s.get(key, 0)
                )
                row[s["step"]] = v / 1e6
        return out

    def row_order(self) -> list[int]:
        vals = self.values()
        ranks = sorted(vals)
        how = ORDERS[self.order.currentIndex()]
        if how == "host":
            return sorted(ranks, key=lambda r: (self.hosts.get(r) or "", r))
        if how == "lateness":
            caused = {
                r["rank"]: sum(s.get("caused_ns", 0) for s in r["steps"])
                for r in (self.analysis.ranks if self.analysis is not None else [])
            }
            return sorted(ranks, key=lambda r: (-caused.get(r, 0), r))
        return ranks

    def _fill(self) -> None:
        vals = self.values()
        ranks = self.row_order()
        steps = sorted({s for v in vals.values() for s in v})
        self.table.clear()
        self.table.setRowCount(len(ranks))
        self.table.setColumnCount(len(steps))
        # a warm-up step said so in its column's name (nsys_ddp's step 0, deep orange, read as a slow step)
        warm = {
            st["step"]
            for r in (self.analysis.ranks if self.analysis is not None else [])
            for st in r["steps"]
            if st.get("warmup")
        }
        self.table.setHorizontalHeaderLabels([f"step {s} (warm-up)" if s in warm else f"step {s}" for s in steps])
        self._columns = (steps, warm)
        self._label_columns()
        # a host (or file) every rank shares says nothing of a row: in the tooltip only (30 steps
        # lost 195 px to 'rank 0 · nsys_ddp_big.sqlite' twice; a review)
        shared = len({self.hosts.get(r) for r in ranks}) == 1
        self.table.setVerticalHeaderLabels(
            [f"rank {r}" + (f" · {self.hosts[r]}" if self.hosts.get(r) and not shared else "") for r in ranks]
        )
        for i, r in enumerate(ranks):
            item = self.table.verticalHeaderItem(i)
            if item is not None and self.hosts.get(r):
                item.setToolTip(f"rank {r} · {self.hosts[r]}")
        base = self.baselines(vals)
        self.shades = {}
        for i, r in enumerate(ranks):
            for j, s in enumerate(steps):
                x = vals.get(r, {}).get(s)
                it = QTableWidgetItem("" if x is None else f"{x:.1f}")
                it.setTextAlignment(Qt.AlignCenter)
                it.setData(Qt.UserRole, (r, s))
                if x is not None and s in warm:  # not a step to compare: no colour of lateness
                    it.setBackground(QBrush(WARM_CELL))
                elif x is not None:
                    k = self.shades[(r, s)] = shade(x - base.get(s, 0.0))
                    it.setBackground(QBrush(colour(k)))
                self.table.setItem(i, j, it)
        over = " over the step's median rank" if self.measure.currentText().startswith("step") else ""
        swatch = "".join(
            f"<span style='background:{colour(shade(m)).name()}; color:#000'>&nbsp;{t}&nbsp;</span>"
            for m, t in ((THRESHOLD_MS, f"≤{THRESHOLD_MS:g}"), (7, "7"), (20, "20"), (FULL_MS, f"≥{FULL_MS:g}"))
        )
        if not steps:
            # (alexnet: '1 ranks x 0 steps' over an empty grid; an audit of the window)
            self.note.setText(
                "no steps: the capture marks none, so there is no ranks x steps grid (the Overview measures the whole capture as one)"
            )
            self._fit_rows()
            return
        self.note.setText(
            f"{len(ranks)} rank{'s' * (len(ranks) != 1)} x {len(steps)} step{'s' * (len(steps) != 1)}, ms · colour by "
            f"absolute ms{over}: {swatch} ms (up to {THRESHOLD_MS:g} ms is jitter: white)"
            + (" · grey, N*: a warm-up step" if warm else "")
        )
        self._fit_rows()

    def baselines(self, vals: dict[int, dict[int, float]]) -> dict[int, float]:
        """What a cell is coloured over, per step: nothing for waits (any wait is lost time), the
        median rank's time for the step time (every step takes time; a slow rank stands out)."""
        if not self.measure.currentText().startswith("step"):
            return {}
        import statistics

        per: dict[int, list[float]] = {}
        for row in vals.values():
            for s, x in row.items():
                per.setdefault(s, []).append(x)
        return {s: statistics.median(xs) for s, xs in per.items()}

    def resizeEvent(self, ev) -> None:  # noqa: N802 - Qt's name
        super().resizeEvent(ev)
        self._fit_rows()
        self._label_columns()

    def _label_columns(self) -> None:
        """Each column named 'step N' where the stretched columns have room for it, else by its
        number ('0*' a warm-up step, said in full in its tooltip); where not even the numbers fit,
        the columns keep their numbers' width and the table scrolls (30 steps at 1366 px read
        'tep 1(', 'tep 1!'; a review)."""
        steps, warm = getattr(self, "_columns", ([], set()))
        if not steps:
            return
        hdr = self.table.horizontalHeader()
        fm = hdr.fontMetrics()
        full = [f"step {s} (warm-up)" if s in warm else f"step {s}" for s in steps]
        short = [f"{s}*" if s in warm else str(s) for s in steps]
        each = self.table.viewport().width() / len(steps)
        pad = 12
        labels = full if max(fm.horizontalAdvance(t) for t in full) + pad <= each else short
        for j, (text, whole) in enumerate(zip(labels, full)):
            item = self.table.horizontalHeaderItem(j)
            if item is not None and item.text() != text:
                item.setText(text)
            if item is not None:
                item.setToolTip(whole)
        need = max(fm.horizontalAdvance(t) for t in labels) + pad
        if need <= each:
            hdr.setSectionResizeMode(QHeaderView.Stretch)
        else:
            hdr.setSectionResizeMode(QHeaderView.Fixed)
            for j in range(len(steps)):
                hdr.resizeSection(j, need)

    def _fit_rows(self) -> None:
        """Rows shrink (to 11 px) so that up to 8 ranks fit in the dock without scrolling."""
        n = max(1, min(8, self.table.rowCount()))
        avail = self.table.viewport().height()
        h = max(11, min(22, avail // n))
        self.table.verticalHeader().setMinimumSectionSize(11)
        self.table.verticalHeader().setDefaultSectionSize(h)
        for i in range(self.table.rowCount()):
            self.table.setRowHeight(i, h)

    def _clicked(self, row: int, col: int) -> None:
        it = self.table.item(row, col)
        if it is not None and it.data(Qt.UserRole):
            r, s = it.data(Qt.UserRole)
            self.cellChosen.emit(int(r), int(s))
