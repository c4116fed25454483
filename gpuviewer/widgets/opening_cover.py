"""What the timeline's place shows while no session is drawn there: the files being opened with a
progress bar and Cancel, or how to open a trace. A cover over the timeline (its child, kept to
its size), so the empty plot's "0 ns ... 1 ns" axis is never what a user sees first, and nothing
about the timeline's own layout changes."""

from __future__ import annotations

import os

from PySide6.QtCore import QEvent, Qt
from PySide6.QtWidgets import QHBoxLayout, QLabel, QProgressBar, QPushButton, QVBoxLayout, QWidget

from ..model.fmt import esc
from ..model.plain import line

EMPTY = (
    "<b>Open a trace</b><br>File &gt; Open files… or Open folder…, drop files here, "
    "or start <code>gpuviewer FILE_OR_FOLDER…</code>"
)


def names_of(paths: list[str]) -> str:
    """The files in the cover's title: one name, or the first and how many more."""
    names = [line(os.path.basename(p.rstrip("/\\")) or p) for p in paths]
    if not names:
        return ""
    return names[0] if len(names) == 1 else f"{names[0]} and {len(names) - 1} more"


class OpeningCover(QWidget):
    def __init__(self, over: QWidget) -> None:
        super().__init__(over)
        self.setAutoFillBackground(True)  # the empty plot under it does not show through
        self.title = QLabel(EMPTY)
        self.title.setTextFormat(Qt.RichText)
        self.title.setAlignment(Qt.AlignCenter)
        self.title.setWordWrap(True)
        self.title.setStyleSheet("font-size: 15px;")
        self.bar = QProgressBar()
        self.bar.setRange(0, 1000)
        self.bar.setMinimumWidth(360)
        self.bar.setMaximumWidth(520)
        self.message = QLabel("")
        self.message.setAlignment(Qt.AlignCenter)
        self.cancel = QPushButton("Cancel")
        row = QHBoxLayout()
        row.addStretch(1)
        row.addWidget(self.bar)
        row.addWidget(self.cancel)
        row.addStretch(1)
        lay = QVBoxLayout(self)
        lay.addStretch(2)
        lay.addWidget(self.title)
        lay.addSpacing(10)
        lay.addLayout(row)
        lay.addWidget(self.message)
        lay.addStretch(3)
        over.installEventFilter(self)
        self.setGeometry(over.rect())
        self.empty()

    def eventFilter(self, obj, ev):  # noqa: N802 - Qt's name
        if obj is self.parent() and ev.type() == QEvent.Resize:
            self.setGeometry(obj.rect())
        return False

    def empty(self) -> None:
        """No session: how to open one."""
        self.title.setText(EMPTY)
        for w in (self.bar, self.message, self.cancel):
            w.hide()
        self.show()
        self.raise_()

    def opening(self, paths: list[str]) -> None:
        """The files being read, from the first moment (before any progress comes back)."""
        self.title.setText(f"Opening <b>{esc(names_of(paths))}</b>")
        self.title.setToolTip("\n".join(line(p) for p in paths[:20]))
        self.bar.setValue(0)
        self.message.setText("starting the reader…")
        for w in (self.bar, self.message, self.cancel):
            w.show()
        self.show()
        self.raise_()

    def progress(self, frac: float, msg: str) -> None:
        self.bar.setValue(int(max(0.0, min(1.0, frac)) * 1000))
        self.message.setText(line(msg))
