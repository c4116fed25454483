"""The main window's size on the screen it opens on: the last geometry used on that screen (by
name and size), else most of the screen's available area (at least 1600x950 where it fits; a
1366x768 laptop gets the whole of it), with the docks sized so the timeline keeps most of it, or
as the user left them on that screen."""

from __future__ import annotations

from PySide6.QtCore import QByteArray, QRect, Qt
from PySide6.QtGui import QGuiApplication

DEFAULT = (1600, 950)
DOCKS_VERSION = 28  # the dock layout saved per screen; a layout saved by another version is not restored


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
    if (
        isinstance(saved, (QByteArray, bytes))
        and win.restoreGeometry(QByteArray(saved))
        and avail.contains(win.frameGeometry().center())
    ):
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
    docks = settings.value(_key(screen).replace("geometry/", "docks/", 1))
    win.docks_restored = isinstance(docks, (QByteArray, bytes)) and win.restoreState(QByteArray(docks), DOCKS_VERSION)
    if not win.docks_restored:  # the user's own sizes on this screen win over the proportions
        size_docks(win, win.width(), win.height())
    return avail


SMALL_H = 1000  # a window lower than this (a 1366x768 laptop's is ~730, a 1600x900 screen's ~860) is laid
# out for a small screen: there a memory strip under the timeline was ~20 px of plot with its ticks overprinted


def small(win) -> bool:
    return win.height() < SMALL_H


def size_docks(win, w: int, h: int) -> None:
    """The timeline keeps at least 55% of the height. A small screen: the memory curve is a
    tab beside Findings (its name and peak on the tab: folded to one line) and the bottom
    tabs a quarter of the height; a large one: the memory a compact strip (an eighth, 140 px at
    least: a readable axis) right under the timeline, the findings a fifth. The right column a fifth of the width."""
    place_memory(win)
    bare_bottom_tabs(win)
    memory_title(win)
    if win.memory_dock.isVisible() and not small(win):
        win.resizeDocks(
            [win.memory_dock, win.findings_dock], [max(140, int(h * 0.12)), max(150, int(h * 0.2))], Qt.Vertical
        )
    else:
        win.resizeDocks([win.findings_dock], [bottom_height(win, h)], Qt.Vertical)
    size_right(win)


def bottom_height(win, h: int, tables: bool = False) -> int:
    """The bottom tabs: Findings a quarter of a small window; SQL, Statistics, Overview and
    Ranks (tables to read) two fifths while shown."""
    if tables:
        return int(h * 0.4)
    return max(160, int(h * (0.25 if small(win) else 0.22)))


def size_right(win) -> None:
    w = win.width()
    win.resizeDocks([win.details_dock], [max(240, min(360, int(w * 0.2)))], Qt.Horizontal)


def bare_bottom_tabs(win) -> None:
    """A small screen: the bottom docks lose their title bars (their tabs already name them;
    20 px back to the timeline); a large one keeps them."""
    from PySide6.QtWidgets import QWidget

    for d in (
        win.findings_dock,
        win.overview_dock,
        win.ranks_dock,
        win.area_dock,
        win.queries.sql_dock,
        win.queries.stats_dock,
        win.memory_dock,
    ):
        bare = small(win) and (d is not win.memory_dock or d in win.tabifiedDockWidgets(win.findings_dock))
        if bare and d.titleBarWidget() is None:
            d.setTitleBarWidget(QWidget(d))
        elif not bare and d.titleBarWidget() is not None:
            d.setTitleBarWidget(None)


def place_memory(win) -> None:
    """A small screen: memory tabbed with the findings (not raised); large: under the timeline."""
    m = win.memory_dock
    tabbed = m in win.tabifiedDockWidgets(win.findings_dock)
    if small(win) and not tabbed:
        win.tabifyDockWidget(win.findings_dock, m)
        win.findings_dock.raise_()
    elif not small(win) and tabbed:
        # out of the tab group and above it again, as window_build lays it out: findings moved
        # under the memory strip, its former tab mates tabbed with it once more
        mates = [d for d in win.tabifiedDockWidgets(win.findings_dock) if d is not m]
        current = next((d for d in [win.findings_dock] + mates if not d.visibleRegion().isEmpty()), win.findings_dock)
        win.removeDockWidget(m)
        win.addDockWidget(Qt.BottomDockWidgetArea, m)
        m.show()
        win.splitDockWidget(m, win.findings_dock, Qt.Vertical)
        for d in mates:
            hidden = d.isHidden()
            win.tabifyDockWidget(win.findings_dock, d)
            if hidden:
                d.hide()
        current.raise_()


def memory_title(win) -> None:
    """Folded to a tab, the memory curve still says its peak on the tab."""
    m = win.memory_dock
    peaks = [
        float(x["y"].max()) for x in getattr(win.memory, "series", []) if len(x["y"]) and x.get("name") == "allocated"
    ]
    tabbed = m in win.tabifiedDockWidgets(win.findings_dock)
    m.setWindowTitle(f"Memory · peak {max(peaks):.1f} GB" if tabbed and peaks else "Memory")


def follow_tabs(win) -> None:
    """Tables get room while their tab is shown; back on Findings the bottom returns to the
    height it had before (the user's, when they sized it)."""
    tables = [win.queries.sql_dock, win.queries.stats_dock, win.overview_dock, win.ranks_dock]
    win._bottom_before = None  # the bottom's height before a table tab grew it

    def shown(dock, visible: bool) -> None:
        if not visible or not win.isVisible():
            return
        if dock in tables:
            if win._bottom_before is None:
                win._bottom_before = win.findings_dock.height()
            win.resizeDocks(
                [dock], [max(win._bottom_before, bottom_height(win, win.height(), tables=True))], Qt.Vertical
            )
        elif win._bottom_before is not None:
            win.resizeDocks([dock], [win._bottom_before], Qt.Vertical)
            win._bottom_before = None

    for d in tables + [win.findings_dock]:
        d.visibilityChanged.connect(lambda v, d=d: shown(d, v))


def save_geometry(win, settings) -> None:
    screen = win.screen()
    if screen is not None:
        settings.setValue(_key(screen), win.saveGeometry())
        settings.setValue(_key(screen).replace("geometry/", "docks/", 1), win.saveState(DOCKS_VERSION))
