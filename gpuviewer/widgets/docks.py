"""A dock added to the main window: window_build and the panels that add their own docks (SQL,
statistics, efficiency) share this, so no panel imports window_build back."""

from __future__ import annotations

from PySide6.QtWidgets import QDockWidget, QWidget


def dock(win, title: str, w: QWidget, area) -> QDockWidget:
    d = QDockWidget(title, win)
    d.setObjectName(title)
    d.setWidget(w)
    win.addDockWidget(area, d)
    return d
