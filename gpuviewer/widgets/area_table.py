"""Summary of an area selection: names with count, total, self and mean, by total."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QLabel, QTableWidget, QTableWidgetItem, QVBoxLayout, QWidget

from ..model import queries as q
from ..model.trace import Trace
from ..render.time_axis import format_duration


class _Num(QTableWidgetItem):
    def __init__(self, value: float, text: str) -> None:
        super().__init__(text)
        self.value = value
        self.setTextAlignment(Qt.AlignRight | Qt.AlignVCenter)

    def __lt__(self, other):
        return self.value < getattr(other, "value", 0)


class AreaTable(QWidget):
    def __init__(self, parent=None) -> None:
        super().__init__(parent)
        self.title = QLabel("Shift+drag on the timeline to summarise an area (time range × lanes).")
        self.table = QTableWidget(0, 5)
        self.table.setHorizontalHeaderLabels(["Name", "Count", "Total", "Self", "Mean"])
        self.table.setSortingEnabled(True)
        self.table.horizontalHeader().setStretchLastSection(False)
        self.table.setColumnWidth(0, 420)
        lay = QVBoxLayout(self)
        lay.setContentsMargins(2, 2, 2, 2)
        lay.addWidget(self.title)
        lay.addWidget(self.table)
        self.rows: list[dict] = []

    def show_area(self, trace: Trace, lanes: list[int], t0: int, t1: int) -> list[dict]:
        self.rows = q.aggregate(trace, lanes, t0, t1)
        self.table.setSortingEnabled(False)
        self.table.setRowCount(len(self.rows))
        for r, row in enumerate(self.rows):
            self.table.setItem(r, 0, QTableWidgetItem(row["name"]))
            self.table.setItem(r, 1, _Num(row["count"], f"{row['count']:,}"))
            self.table.setItem(r, 2, _Num(row["total_ns"], format_duration(row["total_ns"])))
            self.table.setItem(r, 3, _Num(row["self_ns"], format_duration(row["self_ns"])))
            self.table.setItem(r, 4, _Num(row["mean_ns"], format_duration(row["mean_ns"])))
        self.table.setSortingEnabled(True)
        self.table.sortItems(2, Qt.DescendingOrder)
        self.title.setText(
            f"{len(lanes)} lanes, {format_duration(t1 - t0)}: "
            f"{sum(r['count'] for r in self.rows):,} events, {len(self.rows):,} names"
        )
        return self.rows
