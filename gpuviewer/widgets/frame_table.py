"""A table view over a pandas DataFrame: sortable by any column, numbers right-aligned with
thousands separators, copy of the selection as tab-separated text, export to CSV (written to a
temporary file renamed into place). Used by the SQL and Statistics tabs."""

from __future__ import annotations

import math
import re

import numpy as np
from PySide6.QtCore import QAbstractTableModel, QModelIndex, Qt, Signal
from PySide6.QtGui import QKeySequence, QShortcut
from PySide6.QtWidgets import QAbstractItemView, QApplication, QTableView

from ..model.plain import term


def _pandas():
    """pandas, imported on first use: the window's tables are built empty before any session,
    and importing pandas then held the window's first frame back by a second or more."""
    import pandas

    return pandas


def cell_text(v) -> str:
    if v is None or v is _pandas().NA or (isinstance(v, float) and math.isnan(v)):
        return ""
    if isinstance(v, (bool, np.bool_)):
        return "true" if v else "false"
    if isinstance(v, (int, np.integer)):
        return f"{int(v):,}"
    if isinstance(v, (float, np.floating)):  # ns and GB/s: decimals only where they tell something
        return f"{float(v):,.0f}" if abs(v) >= 1000 else f"{float(v):,.3g}" if abs(v) < 1 else f"{float(v):,.2f}"
    return term(v)  # a name from a trace may carry control characters


# Columns of the session's tables that hold nanoseconds without saying so in their name (see
# query/tables.py), alone or inside an aggregate: sum(dur), max("end")
_NS = re.compile(r'^(?:\w+\()?"?(start|end|dur|wait|transfer|self|host_start|host_end|ts)"?\)?$', re.IGNORECASE)


def header_label(name, ns: frozenset = frozenset()) -> str:
    """A result column's header with its unit: "dur (ns)", "sum(dur) (ns)", or any name in `ns`
    (aliases the query computed from ns columns); a name that says its unit (total_ns,
    impact_ms, busbw_gbps) as it is."""
    text = str(name)
    return f"{text} (ns)" if _NS.match(text) or text in ns else text


_NS_IN = re.compile(r"\b(start|end|dur|wait|transfer|self|host_start|host_end|\w+_ns)\b", re.IGNORECASE)
_UNIT = re.compile(r"_(ns|us|ms|s|pct|gbps|bytes|mb|gb)$|^(n|count|rank|step|id)$", re.IGNORECASE)


def ns_aliases(sql: str) -> frozenset:
    """Names the query gives to ns arithmetic ("sum(dur) AS total", "max(end) - min(start) AS span"):
    an alias over ns columns with no division or count in it, whose name says no unit."""
    m = re.search(r"\bselect\b(.*?)\bfrom\b", sql, re.IGNORECASE | re.DOTALL)
    if m is None:
        return frozenset()
    parts, depth, cur = [], 0, ""
    for ch in m.group(1):  # the select list split at its top-level commas
        depth += ch == "("
        depth -= ch == ")"
        if ch == "," and depth == 0:
            parts.append(cur)
            cur = ""
        else:
            cur += ch
    parts.append(cur)
    out = set()
    for p in parts:
        a = re.match(r'\s*(.+?)\s+as\s+"?(\w+)"?\s*$', p, re.IGNORECASE | re.DOTALL)
        if (
            a
            and _NS_IN.search(a.group(1))
            and not re.search(r"/|\bcount\s*\(|\butilization\b", a.group(1), re.IGNORECASE)
            and not _UNIT.search(a.group(2))
        ):
            out.add(a.group(2))
    return frozenset(out)


class FrameModel(QAbstractTableModel):
    def __init__(self, parent=None) -> None:
        super().__init__(parent)
        self._df = None  # an empty frame until one is set or asked for (pandas not imported before)
        self.ns: frozenset = frozenset()  # result columns in ns whose names do not say so
        self.tips: dict[str, str] = {}  # a column's header tooltip, by its name (a short header's meaning)

    @property
    def df(self):
        if self._df is None:
            self._df = _pandas().DataFrame()
        return self._df

    @df.setter
    def df(self, df) -> None:
        self._df = df

    def set_frame(self, df, ns=frozenset()) -> None:
        self.beginResetModel()
        self.df = df.reset_index(drop=True)
        self.ns = frozenset(ns)
        self.endResetModel()

    def rowCount(self, parent=QModelIndex()) -> int:  # noqa: N802 - Qt's names
        return 0 if parent.isValid() or self._df is None else len(self._df)

    def columnCount(self, parent=QModelIndex()) -> int:  # noqa: N802
        return 0 if parent.isValid() or self._df is None else len(self._df.columns)

    def data(self, index, role=Qt.DisplayRole):
        if not index.isValid():
            return None
        v = self.df.iat[index.row(), index.column()]
        if role == Qt.DisplayRole:
            return cell_text(v)
        if (
            role == Qt.TextAlignmentRole
            and isinstance(v, (int, float, np.integer, np.floating))
            and not isinstance(v, (bool, np.bool_))
        ):
            return int(Qt.AlignRight | Qt.AlignVCenter)
        if role == Qt.ToolTipRole and isinstance(v, str) and len(v) > 40:
            return term(v)
        return None

    def headerData(self, section, orientation, role=Qt.DisplayRole):  # noqa: N802
        if self._df is None:
            return None
        if role == Qt.ToolTipRole and orientation == Qt.Horizontal and section < len(self._df.columns):
            return self.tips.get(str(self._df.columns[section]))
        if role != Qt.DisplayRole:
            return None
        if orientation == Qt.Horizontal:
            return header_label(self.df.columns[section], self.ns) if section < len(self.df.columns) else None
        return str(section + 1)

    def sort(self, column: int, order=Qt.AscendingOrder) -> None:
        if self._df is None or column < 0 or column >= len(self._df.columns):
            return
        self.layoutAboutToBeChanged.emit()
        col = self.df.columns[column]
        try:
            self.df = self.df.sort_values(
                col, ascending=order == Qt.AscendingOrder, kind="stable", na_position="last"
            ).reset_index(drop=True)
        except TypeError:  # mixed types in one column: as text
            key = self.df[col].astype(str)
            self.df = self.df.iloc[key.argsort(kind="stable")[:: 1 if order == Qt.AscendingOrder else -1]].reset_index(
                drop=True
            )
        self.layoutChanged.emit()


class FrameTable(QTableView):
    rowActivated = Signal(object)  # the row (a pandas Series) clicked or moved to

    def __init__(self, parent=None) -> None:
        super().__init__(parent)
        self.model_ = FrameModel(self)
        self.setModel(self.model_)
        self.setSortingEnabled(True)
        self.setSelectionBehavior(QAbstractItemView.SelectRows)
        self.setAlternatingRowColors(True)
        self.verticalHeader().setDefaultSectionSize(20)
        self.horizontalHeader().setSortIndicatorShown(True)
        QShortcut(QKeySequence.Copy, self, activated=self.copy_selection)
        self.clicked.connect(self._row)
        self.activated.connect(self._row)

    def clear(self) -> None:
        """No rows, no columns (without importing pandas for an empty frame)."""
        self.model_.beginResetModel()
        self.model_.df = None
        self.model_.endResetModel()

    def set_frame(self, df, ns=frozenset()) -> None:
        self.model_.set_frame(df, ns)
        self.horizontalHeader().setSortIndicator(-1, Qt.AscendingOrder)
        self.resizeColumnsToContents()
        for c in range(self.model_.columnCount()):  # long names: no column wider than 480 px
            self.setColumnWidth(c, min(self.columnWidth(c), 480))

    @property
    def frame(self):
        return self.model_.df

    def _row(self, index) -> None:
        if index.isValid():
            self.rowActivated.emit(self.model_.df.iloc[index.row()])

    def copy_selection(self) -> str:
        rows = sorted({i.row() for i in self.selectionModel().selectedIndexes()})
        df = self.model_.df.iloc[rows] if rows else self.model_.df
        text = df.to_csv(sep="\t", index=False, lineterminator="\n")
        QApplication.clipboard().setText(text)
        return text

    def export_csv(self, path: str) -> None:
        """The whole table (every row, in the order shown), atomically."""
        from ..session.files import write_with

        write_with(path, lambda f: self.model_.df.to_csv(f, index=False, lineterminator="\n"))
