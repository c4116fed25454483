"""Annotations dock: the list of notes, regions and arrows; jump to, edit, recolour, delete. A
note's text is edited in place in the list (double-click it, F2 or Edit; Enter keeps, Esc
cancels), not in a dialog. The panel changes no annotation itself: it asks (editRequested,
removeRequested) and the window has the session do it, which lists them again."""

from __future__ import annotations

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QBrush, QColor
from PySide6.QtWidgets import (
    QColorDialog,
    QHBoxLayout,
    QInputDialog,
    QPushButton,
    QTreeWidget,
    QTreeWidgetItem,
    QVBoxLayout,
    QWidget,
)

from ..render.time_axis import format_duration, format_ns


class AnnotationsPanel(QWidget):
    jumpTo = Signal(object)  # Annotation
    editRequested = Signal(object, object)  # Annotation, {field: new value}
    removeRequested = Signal(object)  # Annotation

    def __init__(self, parent=None) -> None:
        super().__init__(parent)
        self.tree = QTreeWidget()
        self.tree.setHeaderLabels(["Kind", "Text", "Rank", "At", "Length"])
        self.tree.setRootIsDecorated(False)
        self.tree.setColumnWidth(1, 260)
        self.tree.itemActivated.connect(lambda it, _c: self.jumpTo.emit(it.data(0, Qt.UserRole)))
        self.tree.setEditTriggers(QTreeWidget.DoubleClicked | QTreeWidget.EditKeyPressed)
        self.tree.itemChanged.connect(self._edited)
        row = QHBoxLayout()
        for label, fn in (
            ("Go to", self._go),
            ("Edit", self._edit),
            ("Colour…", self._color),
            ("Delete", self._delete),
        ):
            b = QPushButton(label)
            b.clicked.connect(fn)
            row.addWidget(b)
        row.addStretch(1)
        lay = QVBoxLayout(self)
        lay.setContentsMargins(2, 2, 2, 2)
        lay.addWidget(self.tree, 1)
        lay.addLayout(row)
        self.annotations: list = []
        self.origin = 0
        self.ask_text = _ask_text  # replaced in tests

    def set_annotations(self, anns: list, origin: int) -> None:
        self.annotations = anns
        self.origin = origin
        self.refresh()

    def refresh(self) -> None:
        self.tree.clear()
        items = []
        brushes: dict[str, QBrush] = {}  # a few colours for thousands of rows
        for a in self.annotations:
            length = format_duration(a.end_ns - a.start_ns) if a.end_ns is not None else ""
            text = (a.title + ": " if a.title else "") + a.text
            it = QTreeWidgetItem([a.kind, text[:500], str(a.rank), format_ns(a.start_ns - self.origin), length])
            b = brushes.get(a.color)
            if b is None:
                b = brushes[a.color] = QBrush(QColor(a.color))
            it.setForeground(0, b)
            it.setData(0, Qt.UserRole, a)
            if len(text) <= 500:  # a longer text (cut in the list) is edited whole in a dialog
                it.setFlags(it.flags() | Qt.ItemIsEditable)
            items.append(it)
        self.tree.addTopLevelItems(items)  # one insertion: rows one by one re-sort and re-lay out

    def current(self):
        it = self.tree.currentItem()
        return it.data(0, Qt.UserRole) if it is not None else None

    def _go(self) -> None:
        a = self.current()
        if a is not None:
            self.jumpTo.emit(a)

    def _edited(self, item, col: int) -> None:
        """The text typed in place: the annotation's text (its title kept as it was)."""
        a = item.data(0, Qt.UserRole)
        if a is None or col != 1:
            return
        text = item.text(1)
        if a.title and text.startswith(a.title + ": "):
            text = text[len(a.title) + 2 :]
        if text != a.text:
            self.editRequested.emit(a, {"text": text})

    def _edit(self) -> None:
        a = self.current()
        if a is None:
            return
        it = self.tree.currentItem()
        if it.flags() & Qt.ItemIsEditable:
            self.tree.editItem(it, 1)  # in place
            return
        text = self.ask_text(self, "Edit annotation", a.text)
        if text is not None:
            self.editRequested.emit(a, {"text": text})

    def _color(self) -> None:
        a = self.current()
        if a is None:
            return
        c = QColorDialog.getColor(QColor(a.color), self, "Annotation colour")
        if c.isValid():
            self.editRequested.emit(a, {"color": c.name()})

    def _delete(self) -> None:
        a = self.current()
        if a is not None:
            self.removeRequested.emit(a)


def _ask_text(parent, title: str, text: str = "") -> str | None:
    t, ok = QInputDialog.getMultiLineText(parent, title, "Text:", text)
    return t if ok else None
