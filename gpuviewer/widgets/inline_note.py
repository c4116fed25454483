"""A one-line editor that opens on the timeline where a note goes (M, Shift+M, "Add a note
here"): typing happens in place, Enter keeps the text, Esc (or clicking elsewhere) drops it. No
modal dialog: the timeline stays in view while the note is written."""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import QEvent, QPoint, Qt
from PySide6.QtWidgets import QLineEdit, QWidget


class InlineNote(QLineEdit):
    def __init__(self, parent: QWidget) -> None:
        super().__init__(parent)
        self._done: Callable[[str], object] | None = None
        self._back: QWidget | None = None  # focus returns here afterwards
        self.setFrame(True)
        self.setMinimumWidth(260)
        self.hide()
        self.installEventFilter(self)

    def ask(self, placeholder: str, at: QPoint, done: Callable[[str], object], text: str = "") -> None:
        """Open at `at` (parent coordinates, kept inside the parent); `done(text)` on Enter."""
        self._done = done
        self._back = self.parentWidget()
        self.setPlaceholderText(placeholder)
        self.setText(text)
        self.resize(max(self.minimumWidth(), self.sizeHint().width()), self.sizeHint().height())
        p = self.parentWidget().rect()
        x = min(max(0, at.x()), max(0, p.width() - self.width()))
        y = min(max(0, at.y()), max(0, p.height() - self.height()))
        self.move(x, y)
        self.show()
        self.raise_()
        self.setFocus(Qt.OtherFocusReason)
        self.selectAll()

    def _close(self, keep: bool) -> None:
        done, self._done = self._done, None
        text = self.text().strip()
        self.hide()
        if self._back is not None:
            self._back.setFocus(Qt.OtherFocusReason)
        if keep and done is not None and text:
            done(text)

    def eventFilter(self, obj, ev):
        if obj is self and ev.type() == QEvent.KeyPress:
            if ev.key() in (Qt.Key_Return, Qt.Key_Enter):
                self._close(True)
                return True
            if ev.key() == Qt.Key_Escape:
                self._close(False)
                return True
        if (
            obj is self
            and ev.type() == QEvent.FocusOut
            and self.isVisible()
            and self._done is not None
            and ev.reason() != Qt.PopupFocusReason
        ):
            self._close(False)  # clicked elsewhere: the note is dropped, as with Esc
        return super().eventFilter(obj, ev)
