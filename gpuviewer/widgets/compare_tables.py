"""The Compare window's tables (Qt): the comparison itself (session/compare.py) shown as tinted,
sortable tables in tabs."""

from __future__ import annotations

import numpy as np
import pandas as pd
from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QColor, QFont
from PySide6.QtWidgets import QCheckBox, QLabel, QTabWidget, QVBoxLayout, QWidget

from ..session.compare import collectives_frame, named_frame, parts_frame
from .frame_table import FrameModel, FrameTable

# -- Qt: the tables -----------------------------------------------------------------------------

SLOWER = QColor(254, 226, 226)  # B takes more time
FASTER = QColor(220, 252, 231)
QUIET = QColor(100, 116, 139)


class DiffModel(FrameModel):
    """Numbers as the CLI prints them (ms with 3 decimals, signed deltas); significant rows tinted
    by direction; columns named _x carry data for the window only and are hidden."""

    def data(self, index, role=Qt.DisplayRole):
        if not index.isValid():
            return None
        col = str(self.df.columns[index.column()])
        v = self.df.iat[index.row(), index.column()]
        if role == Qt.DisplayRole and not isinstance(v, str):
            if v is None or (isinstance(v, float) and np.isnan(v)):
                return "-"
            if col.startswith("Δ"):
                return f"{v:+.3f}"
            if col.endswith(" ms"):
                return f"{v:.3f}"
            if col.endswith((" µs", "GB/s")):
                return f"{v:,.1f}"
            if col.startswith("share"):
                return f"{v:.1%}"
            if col.startswith("count"):
                return f"{v:g}"
        if role in (Qt.BackgroundRole, Qt.FontRole, Qt.ForegroundRole) and "_tone" in self.df.columns:
            tone = int(self.df["_tone"].iat[index.row()])
            if role == Qt.BackgroundRole and tone:
                return SLOWER if tone > 0 else FASTER
            if role == Qt.FontRole and tone and col == "verdict":
                f = QFont()
                f.setBold(True)
                return f
            if role == Qt.ForegroundRole and not tone and col == "verdict":
                return QUIET
            return None
        return super().data(index, role)


class DiffTable(FrameTable):
    def __init__(self, parent=None) -> None:
        super().__init__(parent)
        self.model_ = DiffModel(self)
        self.setModel(self.model_)
        self.setWordWrap(False)

    def set_frame(self, df: pd.DataFrame) -> None:
        super().set_frame(df)
        for i, c in enumerate(df.columns):
            self.setColumnHidden(i, str(c).startswith("_"))
            if c in ("name", "group"):  # long kernel names: the tooltip shows them whole
                self.setColumnWidth(i, min(self.columnWidth(i), 280))


TABS = (("parts", "Step parts"), ("gpu", "GPU ops"), ("host", "Host ops"), ("coll", "Collectives"))
NOTES = {
    "parts": "step: the host's step range; GPU time: the step's GPU window and the idle around it, which the GPU "
    "parts less 'GPU overlap' add up to; the host's parts add up to the step (not measured in a capture without steps).",
    "gpu": "Time a step spends in each GPU op (ms a step, mean over the compared steps).",
    "host": "Host op totals are inclusive: an op that waits for the GPU repeats the GPU's change.",
    "coll": "wait: for the last rank to arrive; transfer: from then to the end; busbw with NCCL's bus factors.",
}


class CompareTabs(QTabWidget):
    """The four tables; a click on a row says which tab and row (a pandas Series)."""

    rowChosen = Signal(str, object)

    def __init__(self, parent=None) -> None:
        super().__init__(parent)
        self.tables: dict[str, DiffTable] = {}
        self.d: dict | None = None
        self.with_comm = QCheckBox(
            "with NCCL kernels (their time includes waiting for other ranks; the Collectives tab splits it)"
        )
        self.by_size = QCheckBox("one row per message size")
        extra = {"gpu": self.with_comm, "coll": self.by_size}
        for key, title in TABS:
            page = QWidget()
            lay = QVBoxLayout(page)
            lay.setContentsMargins(4, 4, 4, 4)
            note = QLabel(NOTES[key])
            note.setWordWrap(True)
            note.setStyleSheet("color: #475569;")
            lay.addWidget(note)
            if key in extra:
                lay.addWidget(extra[key])
                extra[key].toggled.connect(self._refill)
            t = self.tables[key] = DiffTable(page)
            t.rowActivated.connect(lambda row, k=key: self.rowChosen.emit(k, row))
            lay.addWidget(t, 1)
            self.addTab(page, title)

    def set_diff(self, d: dict) -> None:
        self.d = d
        self._refill()

    def _refill(self, *_a) -> None:
        if self.d is None:
            return
        d = self.d
        self.tables["parts"].set_frame(parts_frame(d))
        self.tables["gpu"].set_frame(named_frame(d["kernels"], self.with_comm.isChecked()))
        self.tables["host"].set_frame(named_frame(d["host_ops"]))
        self.tables["coll"].set_frame(collectives_frame(d, self.by_size.isChecked()))
        counts = {
            "parts": None,
            "gpu": len(self.tables["gpu"].frame),
            "host": len(d["host_ops"]),
            "coll": len(self.tables["coll"].frame),
        }
        for i, (key, title) in enumerate(TABS):
            self.setTabText(i, title if counts[key] is None else f"{title} ({counts[key]:,})")
