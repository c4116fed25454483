"""The timeline's side of bringing something into view: unfold what hides an event (its rank,
its lane group, its lane's deeper rows) and scroll vertically so the event itself, not only its
lane's top, lies inside the viewport below its rank's header (the label column keeps that
header pinned at the top while the rank's lanes scroll under it)."""

from __future__ import annotations

from ..model.layout import HEADER_H
from ..model.layout import ROW_H as LAYOUT_ROW_H


class RevealMixin:
    """Mixed into TimelineView: needs self.trace, self.layout_model, self.scroll, self.selected."""

    def _on_reveal(self, rank: int) -> None:
        sel = self.selected
        if (
            sel is not None
            and self.trace is not None
            and self.trace.lanes[int(self.trace.columns["lane"][sel])].rank == rank
        ):
            self.scroll_to_event(sel)  # the event, not only its rank's top
        else:
            self.scroll_to_rank(rank)

    def event_rows(self, i: int) -> tuple[float, float] | None:
        """The rows an event is drawn in (its lane's y plus its depth), None when hidden."""
        lm = self.layout_model
        c = self.trace.columns
        lane = int(c["lane"][i])
        row = lm.lane_row(lane) if lm else None
        if row is None:
            return None
        d = min(max(int(c["depth"][i]) - row.first, 0), max(0, row.depths - 1))
        return row.y + d * LAYOUT_ROW_H, row.y + (d + 1) * LAYOUT_ROW_H

    def scroll_to_event(self, i: int) -> None:
        """Scroll so the event's row is inside the viewport: with its rank's header as the top
        row when both fit, else the event a row below the sticky header that names its rank."""
        rows = self.event_rows(i)
        if rows is None:
            return
        a, b = rows
        lm = self.layout_model
        rank = self.trace.lanes[int(self.trace.columns["lane"][i])].rank
        hdr = next((r for r in lm.rows if r.kind == "header" and r.rank == rank), None)
        page = self._rows_visible()
        y0 = self.scroll.value() / 10.0
        sticky = HEADER_H if hdr is not None and hdr.y < y0 else 0.0
        if a >= y0 + sticky and b <= y0 + page:
            return  # already in view, below the header
        if hdr is not None and b - hdr.y <= page:
            target = hdr.y
        else:
            target = a - HEADER_H - 1.0  # a row of context under the sticky header
        self.scroll.setValue(int(max(0.0, target) * 10))

    def scroll_to_events(self, i: int, j: int) -> bool:
        """Scroll so both events' rows lie in the viewport, where they fit (i's rank's header or
        the sticky one above the higher of them); False where they do not (nothing moved)."""
        ri, rj = self.event_rows(i), self.event_rows(j)
        if ri is None or rj is None:
            return False
        top, bottom = min(ri[0], rj[0]), max(ri[1], rj[1])
        page = self._rows_visible()
        if bottom - top + HEADER_H + 0.5 > page:
            return False
        y0 = self.scroll.value() / 10.0
        if top >= y0 + HEADER_H and bottom <= y0 + page:
            return True  # both in view already
        self.scroll.setValue(int(max(0.0, top - HEADER_H - 0.5) * 10))
        return True

    def scroll_down_to_event(self, i: int) -> None:
        """From the current scroll (a rank's header at the top), scroll down only as far as brings
        the event's row to the viewport's bottom: the rows above it stay in view as far as they fit
        (a host-paced finding's GPU lanes with the idle stretch highlighted, and the host op it
        names, selected 30 rows below them at 1366x768; an audit of the window)."""
        rows = self.event_rows(i)
        if rows is None:
            return
        a, b = rows
        y0 = self.scroll.value() / 10.0
        page = self._rows_visible()
        if b <= y0 + page:
            return  # in view already
        self.scroll.setValue(int(max(0.0, b - page + 0.5) * 10))

    def scroll_to_rank(self, rank: int) -> None:
        """Scroll so that a rank's header is the top row."""
        lm = self.layout_model
        hdr = next((r for r in lm.rows if r.kind == "header" and r.rank == rank), None) if lm else None
        if hdr is not None:
            self.scroll.setValue(int(hdr.y * 10))

    def scroll_to_lane(self, lane: int) -> None:
        y = self.layout_model.lane_y(lane) if self.layout_model else None
        if y is None:
            return
        y0 = self.scroll.value() / 10.0
        if not (y0 <= y < y0 + self._rows_visible() - 1):
            self.scroll.setValue(int(max(0, y - 2) * 10))

    def reveal_lane(self, lane: int) -> None:
        """Unfold what hides a lane (its rank, its lane group) and scroll it into view: a critical
        path's host segment outlined on a folded 'Host' row showed nothing of the thread that set
        the step's time (an audit of the window)."""
        if self.layout_model is None:
            return
        if self._unfold(lane):
            self.layout_model.rebuild()
            self._relayout()
            self._lanes_edited()
        self.scroll_to_lane(lane)

    def _unfold(self, lane: int) -> bool:
        """Unfold the lane's rank, its host lanes' group and its kind's group, and show it if
        hidden; whether anything changed (the layout then wants a rebuild)."""
        lm = self.layout_model
        ln = self.trace.lanes[lane]
        changed = False
        if ln.rank in lm.state.collapsed_ranks:
            lm.state.collapsed_ranks.discard(ln.rank)
            changed = True
        host = f"r{ln.rank}/host"
        if (
            lm.group_collapsed(host)
            and any(r.kind == "group" and r.group == host for r in lm.rows)
            and lm.lane_y(lane) is None
        ):
            lm.state.groups[host] = False  # the rank's folded host lanes
            lm.rebuild()
            changed = True
        g = f"r{ln.rank}/{ln.kind}"
        if lm.group_collapsed(g) and any(r.kind == "group" and r.group == g for r in lm.rows):
            lm.state.groups[g] = False
            changed = True
        if ln.key in lm.state.hidden:
            lm.state.hidden.discard(ln.key)
            changed = True
        return changed

    def _reveal(self, i: int) -> None:
        """Unfold what hides the event: its rank, its lane group, its lane's deeper rows."""
        lm = self.layout_model
        lane = int(self.trace.columns["lane"][i])
        ln = self.trace.lanes[lane]
        changed = self._unfold(lane)
        if ln.key not in lm.state.expanded and not lm.depth_shown(lane, int(self.trace.columns["depth"][i])):
            lm.state.expanded.add(ln.key)  # a row of a folded lane: deeper, or a frame above those shown
            changed = True
        if changed:
            lm.rebuild()
            self._relayout()
            self._lanes_edited()

    def event_rect(self, i: int):
        """The event's rectangle in this view's coordinates (QRectF; None when its lane is
        not shown)."""
        import pyqtgraph as pg
        from PySide6.QtCore import QRectF

        rows = self.event_rows(i)
        if rows is None:
            return None
        c = self.trace.columns
        x0 = float(int(c["start"][i]) - self.origin)
        x1 = x0 + float(int(c["dur"][i]))
        a = self.vb.mapViewToDevice(pg.Point(x0, rows[0]))
        b = self.vb.mapViewToDevice(pg.Point(x1, rows[1]))
        vp = self.plot.viewport()
        pa = vp.mapTo(self, a.toPoint())
        pb = vp.mapTo(self, b.toPoint())
        return QRectF(pa, pb).normalized()

    def event_point(self, i: int):
        """Where a note about event i is typed: just under the event, at its visible start."""
        from PySide6.QtCore import QPoint

        r = self.event_rect(i)
        if r is None:
            return None
        left = self.plot.mapTo(self, self.plot.rect().topLeft()).x()
        return QPoint(int(max(r.left(), left)), int(r.bottom()) + 2)

    def middle_point(self):
        from PySide6.QtCore import QPoint

        g = self.plot.geometry()
        return QPoint(
            self.plot.mapTo(self, g.center() - g.topLeft()).x() - 130,
            self.plot.mapTo(self, g.center() - g.topLeft()).y(),
        )
