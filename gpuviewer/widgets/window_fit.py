"""The main window's size on the screen it opens on: the last geometry used on that screen (by
name and size), else most of the screen's available area (at least 1600x950 where it fits; a
1366x768 laptop gets the whole of it), with the docks sized in proportion."""
from __future__ import annotations

from PySide6.QtCore import QByteArray, QRect, Qt
from PySide6.QtGui import QGuiApplication

DEFAULT = (1600, 950)


def _key(screen) -> str:
    g = screen.geometry()
    return f"geometry/{screen.name() or 'screen'}-{g.width()}x{g.height()}"


def fit_to_screen(win, settings) -> QRect:
    """Place and size win (before it is shown); returns the available area used."""
    screen = win.screen() or QGuiApplication.primaryScreen()
    if screen is None:
        win.resize(*DEFAULT)
        return QRect(0, 0, *DEFAULT)
    avail = screen.availableGeometry()
    saved = settings.value(_key(screen))
    if isinstance(saved, (QByteArray, bytes)) and win.restoreGeometry(QByteArray(saved)) \
            and avail.contains(win.frameGeometry().center()):
        w, h = min(win.width(), avail.width()), min(win.height(), avail.height())
        if (w, h) != (win.width(), win.height()):
            win.resize(w, h)
    else:
        # the frame (title bar, borders) comes on top of the client size: leave room for it; a
        # large screen gets most of its area, a laptop all of it
        w = min(max(DEFAULT[0], int(avail.width() * 0.8)), avail.width() - 16)
        h = min(max(DEFAULT[1], int(avail.height() * 0.85)), avail.height() - 40)
        win.resize(w, h)
        win.move(avail.x() + (avail.width() - w) // 2, avail.y() + max(0, (avail.height() - h - 30) // 2))
    size_docks(win, win.width(), win.height())
    return avail


def size_docks(win, w: int, h: int) -> None:
    """Bottom docks: the memory curve a fifth of the height, the findings a quarter; the right
    dock a fifth of the width: the timeline keeps most of a small screen."""
    if win.memory_dock.isVisible():
        win.resizeDocks([win.memory_dock, win.findings_dock], [max(130, int(h * 0.19)), max(120, int(h * 0.23))],
                        Qt.Vertical)
    else:
        win.resizeDocks([win.findings_dock], [max(120, int(h * 0.28))], Qt.Vertical)
    win.resizeDocks([win.details_dock], [max(240, min(330, int(w * 0.21)))], Qt.Horizontal)


def save_geometry(win, settings) -> None:
    screen = win.screen()
    if screen is not None:
        settings.setValue(_key(screen), win.saveGeometry())
