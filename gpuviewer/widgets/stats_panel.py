"""The Statistics tab: summaries like `nsys stats` (gpuviewer.query.stats) for every rank or one,
filterable by name, sortable, exported as CSV; clicking a row shows its longest instance."""

from __future__ import annotations

from PySide6.QtCore import Signal
from PySide6.QtWidgets import QComboBox, QFileDialog, QHBoxLayout, QLabel, QLineEdit, QPushButton, QVBoxLayout, QWidget

from .background import Background
from .frame_table import FrameTable


class StatsPanel(QWidget):
    eventChosen = Signal(int)

    def __init__(self, parent=None) -> None:
        super().__init__(parent)
        from ..session.panels import stats_reports

        REPORTS = stats_reports()  # (query.stats would import pandas before the first frame)
        self.session = None
        self.full = None
        self.bg = Background(self)
        self.bg.done.connect(self._done)
        self.bg.failed.connect(self._failed)
        self.report = QComboBox()
        for key, label in REPORTS.items():
            self.report.addItem(label, key)
        self.report.setToolTip("Which summary: GPU kernels, CUDA API, NVTX ranges, memory operations, collectives")
        self.rank = QComboBox()
        self.rank.setToolTip("Every rank together, or one rank")
        self.filter = QLineEdit()
        self.filter.setPlaceholderText("Filter names…")
        self.filter.setClearButtonEnabled(True)
        self.filter.setToolTip("Show the rows whose name (or kind) contains this text")
        self.export_btn = QPushButton("Export CSV…")
        self.export_btn.setToolTip("Write the table as shown to a CSV file")
        self.export_btn.clicked.connect(self._export)
        self.status = QLabel("")
        self.table = FrameTable()
        self.table.rowActivated.connect(self._row)
        bar = QHBoxLayout()
        bar.addWidget(self.report)
        bar.addWidget(self.rank)
        bar.addWidget(self.filter, 1)
        bar.addWidget(self.export_btn)
        lay = QVBoxLayout(self)
        lay.setContentsMargins(2, 2, 2, 2)
        lay.addLayout(bar)
        lay.addWidget(self.status)
        lay.addWidget(self.table)
        self.report.currentIndexChanged.connect(self.refresh)
        self.rank.currentIndexChanged.connect(self.refresh)
        self.filter.textChanged.connect(self._apply_filter)

    def set_session(self, session, compute: bool = True) -> None:
        """compute False: refresh() later (the window starts it after the session's first frame)."""
        self.session = session
        self.rank.blockSignals(True)
        self.rank.clear()
        self.rank.addItem("All ranks", None)
        for r in session.ranks if session is not None else []:
            self.rank.addItem(f"Rank {r}", r)
        self.rank.blockSignals(False)
        if compute:
            self.refresh()
        else:
            self.bg.token += 1  # a result still on its way belongs to the old session
            self.status.setText("")

    def refresh(self) -> None:
        if self.session is None:
            return
        s, which, rank = self.session, self.report.currentData(), self.rank.currentData()
        self.status.setText("Computing…")
        self.bg.run(lambda: (which, rank, s.stats(which, rank=rank)))

    def _done(self, token: int, result) -> None:
        if token != self.bg.token:
            return
        which, rank, df = result
        self.full = df
        self._apply_filter()
        who = "every rank" if rank is None else f"rank {rank}"
        self.status.setText(
            f"{len(df):,} rows, {who}; click a row to show its longest instance"
            if which in ("kern", "api", "nvtx") and len(df)
            else f"{len(df):,} rows, {who}"
        )

    def _failed(self, token: int, msg: str) -> None:
        if token == self.bg.token:
            self.status.setText(f"Could not compute this summary: {msg}")

    def _apply_filter(self) -> None:
        if self.full is None:
            return
        text = self.filter.text().strip().lower()
        df = self.full
        key = next((c for c in ("name", "kind", "collective") if c in df.columns), None)
        if text and key is not None:
            df = df[df[key].astype(str).str.lower().str.contains(text, regex=False)]
        self.table.set_frame(df)

    def _row(self, row) -> None:
        if self.session is None or "name" not in row.index:
            return
        from ..session.panels import longest

        i = longest(self.session, self.report.currentData(), str(row["name"]), self.rank.currentData())
        if i is not None:
            self.eventChosen.emit(i)

    def _export(self) -> None:
        if self.table.frame.empty:
            return
        name = f"{self.report.currentData()}_sum.csv"
        path, _ = QFileDialog.getSaveFileName(self, "Export statistics", name, "CSV (*.csv)")
        if path:
            try:
                self.table.export_csv(path)
            except OSError as e:
                self.status.setText(f"Could not write {path}: {e.strerror}")
