"""The SQL and Statistics tabs of the main window, beside Findings: one Session (Qt-free) over
the window's trace feeds both; a row that names an event selects it on the timeline."""

from __future__ import annotations

from PySide6.QtCore import Qt

from .sql_panel import SqlPanel
from .stats_panel import StatsPanel


class QueryDocks:
    def __init__(self, win, beside) -> None:
        self.win = win
        self.session = None
        self.sql = SqlPanel()
        self.stats = StatsPanel()
        from .docks import dock

        self.sql_dock = dock(win, "SQL", self.sql, Qt.BottomDockWidgetArea)
        self.stats_dock = dock(win, "Statistics", self.stats, Qt.BottomDockWidgetArea)
        win.tabifyDockWidget(beside, self.stats_dock)
        win.tabifyDockWidget(beside, self.sql_dock)
        self.sql.eventChosen.connect(self._goto)
        self.stats.eventChosen.connect(self._goto)

    def set_session(self, session, compute: bool = True) -> None:
        """The window's session (its tables follow its trace and analysis); compute False: the
        statistics are computed at stats.refresh()."""
        self.session = session
        self.sql.set_session(session)
        self.stats.set_session(session, compute)

    def _goto(self, i: int) -> None:
        self.win._goto_event(i)  # select, centre, scroll to its lane: as a details link does
