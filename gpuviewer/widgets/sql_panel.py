"""The SQL tab: DuckDB queries over the session's tables (gpuviewer.query.sql), run off the UI
thread with Cancel; results in a sortable table; a row with an event id (or a rank and a start
time) selects that event on the timeline."""

from __future__ import annotations

import time

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QFontDatabase, QKeySequence, QShortcut
from PySide6.QtWidgets import (
    QComboBox,
    QFileDialog,
    QHBoxLayout,
    QLabel,
    QPlainTextEdit,
    QPushButton,
    QSplitter,
    QVBoxLayout,
    QWidget,
)

from .background import Background
from .frame_table import FrameTable

MAX_ROWS = 100_000  # shown; the rest is counted, and `gpuviewer sql --csv` gives every row
EXAMPLES = {
    "Kernels by total time": "SELECT name, kind, count(*) AS n, sum(dur) AS total_ns, avg(dur) AS avg_ns\n"
    "FROM kernels GROUP BY name, kind ORDER BY total_ns DESC LIMIT 50",
    "Steps and their parts": "SELECT rank, step, dur, compute_ns, comm_ns, wait_ns, idle_ns, utilization\n"
    "FROM steps ORDER BY step, rank",
    "Slowest collectives": "SELECT rank, collective, step, bytes, wait, transfer, busbw_gbps, id\n"
    "FROM collectives ORDER BY transfer DESC LIMIT 50",
    "Longest kernels": "SELECT id, rank, name, dur FROM kernels ORDER BY dur DESC LIMIT 100",
    "Memory copies by kind": "SELECT * FROM mem_sum",
    "Findings": "SELECT severity, impact_ms, rule, title FROM findings",
}


class SqlPanel(QWidget):
    eventChosen = Signal(int)

    def __init__(self, parent=None) -> None:
        super().__init__(parent)
        self.session = None
        self.query = None
        self.history: list[str] = []
        self.bg = Background(self)
        self.bg.done.connect(self._done)
        self.bg.failed.connect(self._failed)
        self.editor = QPlainTextEdit()
        self.editor.setFont(QFontDatabase.systemFont(QFontDatabase.FixedFont))
        self.editor.setPlaceholderText(
            "SELECT name, count(*), sum(dur) FROM kernels GROUP BY name ORDER BY 3 DESC"
            "   — Ctrl+Enter runs. Tables: slices, kernels, memops, steps, "
            "collectives, counters, findings, kern_sum, api_sum, nvtx_sum, "
            "mem_sum, nccl_sum (times in ns)"
        )
        self.editor.setPlainText(EXAMPLES["Kernels by total time"])
        self.run_btn = QPushButton("Run")
        self.run_btn.setToolTip("Run the query (Ctrl+Enter)")
        self.run_btn.clicked.connect(self.run_query)
        self.cancel_btn = QPushButton("Cancel")
        self.cancel_btn.setToolTip("Stop the running query")
        self.cancel_btn.setEnabled(False)
        self.cancel_btn.clicked.connect(self.cancel)
        self.examples = QComboBox()
        self.examples.addItem("Examples…")
        self.examples.addItems(list(EXAMPLES))
        self.examples.setToolTip("Put an example query in the editor")
        self.examples.activated.connect(self._example)
        self.history_box = QComboBox()
        self.history_box.setToolTip("Queries run in this session")
        self.history_box.setMinimumContentsLength(12)
        self.history_box.setSizeAdjustPolicy(QComboBox.AdjustToMinimumContentsLengthWithIcon)
        self.history_box.activated.connect(lambda i: self.editor.setPlainText(self.history[-1 - i]))
        self.export_btn = QPushButton("Export CSV…")
        self.export_btn.setToolTip("Write the result (every row shown) to a CSV file")
        self.export_btn.clicked.connect(self._export)
        self.status = QLabel("Open a trace to query it.")
        self.status.setTextInteractionFlags(Qt.TextSelectableByMouse)
        self.status.setWordWrap(True)
        self.table = FrameTable()
        self.table.rowActivated.connect(self._row)
        bar = QHBoxLayout()
        for w in (self.run_btn, self.cancel_btn, self.examples, self.history_box):
            bar.addWidget(w)
        bar.addStretch(1)
        bar.addWidget(self.export_btn)
        top = QWidget()
        tl = QVBoxLayout(top)
        tl.setContentsMargins(0, 0, 0, 0)
        tl.addWidget(self.editor)
        tl.addLayout(bar)
        bottom = QWidget()
        bl = QVBoxLayout(bottom)
        bl.setContentsMargins(0, 0, 0, 0)
        bl.addWidget(self.status)
        bl.addWidget(self.table)
        # small minimums: this tab shares the bottom dock area with the findings on a laptop
        self.editor.setMinimumHeight(36)
        self.table.setMinimumHeight(40)
        self.examples.setMinimumContentsLength(8)
        self.examples.setSizeAdjustPolicy(QComboBox.AdjustToMinimumContentsLengthWithIcon)
        split = QSplitter(Qt.Vertical)
        split.addWidget(top)
        split.addWidget(bottom)
        split.setSizes([60, 240])
        lay = QVBoxLayout(self)
        lay.setContentsMargins(2, 2, 2, 2)
        lay.addWidget(split)
        QShortcut(QKeySequence("Ctrl+Return"), self.editor, activated=self.run_query)
        QShortcut(QKeySequence("Ctrl+Enter"), self.editor, activated=self.run_query)
        self._t0 = 0.0

    def set_session(self, session) -> None:
        if self.query is not None:
            self.cancel()
        self.session = session
        # the query runner (DuckDB and pandas: 1-2 s of imports on a loaded machine) is made at
        # the first query, not here: this runs before the session's first frame
        self.query = None
        self.bg.token += 1  # a result still on its way belongs to the old session
        self.table.clear()
        self.status.setText("Ctrl+Enter runs the query." if session is not None else "Open a trace to query it.")

    def _example(self, i: int) -> None:
        if i > 0:
            self.editor.setPlainText(EXAMPLES[self.examples.itemText(i)])
        self.examples.setCurrentIndex(0)

    def run_query(self) -> None:
        sql = self.editor.toPlainText().strip()
        if not sql or self.session is None:
            return
        if self.query is None:
            from ..session.panels import sql_query

            self.query = sql_query(self.session)
        if not self.history or self.history[-1] != sql:
            self.history.append(sql)
            self.history_box.insertItem(0, " ".join(sql.split())[:80])
            self.history_box.setCurrentIndex(0)
        q = self.query
        self._t0 = time.perf_counter()
        self.bg.run(lambda: q.run(sql, limit=MAX_ROWS))
        self.run_btn.setEnabled(False)
        self.cancel_btn.setEnabled(True)
        self.status.setText("Running…")

    def cancel(self) -> None:
        if self.query is not None and self.cancel_btn.isEnabled():
            self.query.interrupt()

    def _finish(self) -> None:
        self.run_btn.setEnabled(True)
        self.cancel_btn.setEnabled(False)

    def _done(self, token: int, result) -> None:
        if token != self.bg.token:
            return
        self._finish()
        df, more = result
        from .frame_table import ns_aliases

        self.table.set_frame(df, ns_aliases(self.history[-1]) if self.history else frozenset())
        secs = time.perf_counter() - self._t0
        self.status.setText(
            f"{len(df):,} rows{' (the first; more not shown)' if more else ''} in {secs * 1e3:,.0f} ms"
            + ("; click a row to show its event" if self._locatable(df) else "")
        )

    def _failed(self, token: int, msg: str) -> None:
        if token != self.bg.token:
            return
        self._finish()
        self.status.setText(f"<span style='color:#c0392b'>{_html(msg)}</span>")

    @staticmethod
    def _locatable(df) -> bool:
        return "id" in df.columns or {"rank", "start"} <= set(df.columns)

    def _row(self, row) -> None:
        if self.session is None:
            return
        i = _event_of(self.session.trace, row)
        if i is not None:
            self.eventChosen.emit(i)

    def _export(self) -> None:
        if self.table.frame.empty:
            return
        path, _ = QFileDialog.getSaveFileName(self, "Export result", "query.csv", "CSV (*.csv)")
        if path:
            try:
                self.table.export_csv(path)
                self.status.setText(f"Wrote {len(self.table.frame):,} rows to {path}")
            except OSError as e:
                self.status.setText(f"Could not write {path}: {e.strerror}")


def _event_of(trace, row) -> int | None:
    """The store index a result row names: its `id` column, or its rank and start time."""
    try:
        if "id" in row.index and row["id"] is not None:
            i = int(row["id"])
            return i if 0 <= i < len(trace) else None
        if "rank" in row.index and "start" in row.index:
            from ..session.panels import event_at

            return event_at(trace, int(row["rank"]), int(row["start"]))
    except (TypeError, ValueError, OverflowError):
        return None
    return None


def _html(s: str) -> str:
    import html

    return html.escape(s)
