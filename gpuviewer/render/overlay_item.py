"""The overlay layers, over the slices: what is picked rather than what was traced.

Under the annotations: OverlayItem, a finding's range on its ranks and the search matches, and
SelectionItem, the selected event's box (apart: stepping through events with the matches shown
redraws one box, not every match). Over the annotations: CursorItem, the memory panel's time
cursor and the flow arrows of the selected event; over everything, AreaItem, the area selection
(Shift+drag), drawn from the session's area so that a picture of the view shows it too.
"""

from __future__ import annotations

import numpy as np
from PySide6.QtCore import QPointF, QRectF, Qt
from PySide6.QtGui import QBrush, QColor, QPen, QPolygonF

from ..model import queries as q
from . import theme
from .colors import BRUSHES, color_index, text_color
from .layer import Frame, Layer, state

MATCH_PEN = QPen(QColor(250, 204, 21), 2)
CURSOR_PEN = QPen(QColor(37, 99, 235), 1.5)


def event_rect(host, i: int, f: Frame) -> QRectF | None:
    """Event i's box in device pixels, or None when its lane is not laid out."""
    c = host.trace.columns
    lane = int(c["lane"][i])
    yd = host.layout.depth_y(lane, int(c["depth"][i]))
    if yd is None:
        return None
    X0 = (int(c["start"][i]) - host.origin) * f.sx + f.ox
    X1 = max((int(c["start"][i]) + int(c["dur"][i]) - host.origin) * f.sx + f.ox, X0 + 2)
    return QRectF(X0, yd * f.sy + f.oy + 0.04 * f.sy, X1 - X0, 0.92 * f.sy)


class OverlayItem(Layer):
    # kept as an image (no text, one blend deep): a cursor moving over the matches copies them
    keep = "image"
    match_mask = state()  # bool per event
    highlight = state()  # (start_ns, end_ns, ranks): a finding's range on its ranks

    def __init__(self, host, z: float = 2.0) -> None:
        super().__init__(host, z)
        self.match_mask = None
        self.highlight = None

    def has_content(self) -> bool:
        return self._match_mask is not None or self._highlight is not None

    def draw(self, p, f: Frame) -> None:
        if self._highlight is not None:
            self._draw_highlight(p, f)
        if self._match_mask is not None:
            self._draw_matches(p, f)

    def _draw_highlight(self, p, f: Frame) -> None:
        h0, h1, ranks = self._highlight
        X0 = (h0 - self.host.origin) * f.sx + f.ox
        X1 = max((h1 - self.host.origin) * f.sx + f.ox, X0 + 2)
        p.setPen(QPen(QColor(202, 138, 4), 1))
        p.setBrush(QBrush(QColor(250, 204, 21, 45)))
        for row in f.rows:
            if row.rank in ranks:
                p.drawRect(QRectF(X0, row.y * f.sy + f.oy, X1 - X0, row.h * f.sy))
        p.setPen(Qt.NoPen)

    def _draw_matches(self, p, f: Frame) -> None:
        p.setBrush(Qt.NoBrush)
        p.setPen(MATCH_PEN)
        trace, mask = self.host.trace, self._match_mask
        c = trace.columns
        for row in f.rows:
            if row.kind != "lane":
                continue
            idx = q.events_in_range(trace, row.lane, f.t0, f.t1)
            idx = idx[mask[idx]]
            if not len(idx):
                continue
            X0 = np.floor((c["start"][idx] - self.host.origin) * f.sx + f.ox)
            keep = np.unique(np.stack([X0, c["depth"][idx]]), axis=1, return_index=True)[1]
            for i in idx[keep][:2000].tolist():
                r = event_rect(self.host, i, f)
                if r is not None:
                    p.drawRect(r)


class SelectionItem(Layer):
    selected = state()  # an event index

    def __init__(self, host, z: float = 3.0) -> None:
        super().__init__(host, z)
        self.selected = None

    def has_content(self) -> bool:
        return self._selected is not None

    def draw(self, p, f: Frame) -> None:
        r = event_rect(self.host, self._selected, f)
        if r is not None:
            self._draw_named(p, f, r)
            p.setBrush(Qt.NoBrush)
            p.setPen(QPen(theme.current().ink, 2))
            p.drawRect(r)

    def _draw_named(self, p, f: Frame, r: QRectF) -> None:
        """The selected op drawn again over the layers under this one, with its name: a finding's
        range tint and the critical path's outline crossed its name, half of it in another
        colour ('<built-in function sle|ep>' on ddp's critical-path row; a review)."""
        left, right = max(r.left(), f.left - 2), min(r.right(), f.right + 2)
        box = QRectF(left, r.top() + 0.04 * f.sy, right - left, 0.84 * f.sy)
        if box.width() < 3 or box.height() < 3:
            return
        host, i = self.host, self._selected
        lane, depth = int(host.trace.columns["lane"][i]), int(host.trace.columns["depth"][i])
        if not host.layout.depth_shown(lane, depth):  # its lane folded again: its row is another's
            return
        cat, name = int(host.trace.columns["cat"][i]), int(host.trace.columns["name"][i])
        c = int(color_index(np.array([cat]), host.slices.shades[[name]])[0])
        # filled however narrow: a run of short ops is drawn with one of their names, which read
        # inside a narrow selected op's outline as its own ('torch/' in DDP_0's box; a review)
        p.fillRect(box, BRUSHES[c])
        if box.width() <= 40 or box.height() < 9:  # as the slices layer: too small for a name
            return
        x = max(box.left(), 0.0) + 3
        w = box.right() - x - 3
        if w < 20:
            return
        p.setFont(host.font)
        p.setPen(text_color(c))
        text = host.fm.elidedText(host.trace.names[name], Qt.ElideRight, int(w))
        p.drawText(QRectF(x, box.top(), w, box.height()), Qt.AlignVCenter | Qt.AlignLeft, text)


class CursorItem(Layer):
    """Redrawn at each paint: a cursor follows the mouse over the memory panel, and this layer is
    two lines and a few arrows, cheaper drawn than copied."""

    keep = None
    cursor_ns = state()  # a time picked elsewhere (memory panel)
    flow_pairs = state()  # (source, destination) events of the selection's flows

    def __init__(self, host, z: float = 5.0) -> None:
        super().__init__(host, z)
        self.cursor_ns = None
        self.flow_pairs = []

    def has_content(self) -> bool:
        return self._cursor_ns is not None or bool(self._flow_pairs)

    def draw(self, p, f: Frame) -> None:
        if self._cursor_ns is not None:
            X = (self._cursor_ns - self.host.origin) * f.sx + f.ox
            p.setPen(CURSOR_PEN)
            p.drawLine(QPointF(X, f.y0 * f.sy + f.oy), QPointF(X, f.y1 * f.sy + f.oy))
        if self._flow_pairs:
            self._draw_flows(p, f)

    def _draw_flows(self, p, f: Frame) -> None:
        flow = theme.current().flow
        p.setPen(QPen(flow, 1.5))
        p.setBrush(QBrush(flow))
        for a, b in self._flow_pairs:
            ra, rb = event_rect(self.host, a, f), event_rect(self.host, b, f)
            if ra is None or rb is None:
                continue
            start = QPointF(ra.left(), ra.center().y())
            end = QPointF(rb.left(), rb.top() if rb.top() > ra.center().y() else rb.bottom())
            p.drawLine(start, end)
            v = end - start
            length = max((v.x() ** 2 + v.y() ** 2) ** 0.5, 1e-6)
            ux, uy = v.x() / length, v.y() / length
            head = QPolygonF(
                [
                    end,
                    QPointF(end.x() - 8 * ux + 4 * uy, end.y() - 8 * uy - 4 * ux),
                    QPointF(end.x() - 8 * ux - 4 * uy, end.y() - 8 * uy + 4 * ux),
                ]
            )
            p.drawPolygon(head)


AREA_PEN = QPen(QColor(37, 99, 235), 1)
AREA_BRUSH = QBrush(QColor(37, 99, 235, 40))


class AreaItem(Layer):
    """The area selection: its time range on the rows of its lanes, one box over each run of
    its lanes with no other row between them (a lane left out of the area splits the box)."""

    area = state()  # (t0, t1, lane indices), absolute ns, as Session.view.area

    def __init__(self, host, z: float = 6.0) -> None:
        super().__init__(host, z)
        self.area = None

    def has_content(self) -> bool:
        return self._area is not None and bool(self._area[2])

    def boxes(self, rows) -> list[tuple[float, float]]:
        """(top, bottom) in rows of each run of the area's lanes among `rows` (in layout order)."""
        lanes = set(self._area[2])
        out: list[tuple[float, float]] = []
        run = False
        for row in rows:
            inside = row.kind == "lane" and row.lane in lanes
            if inside and run:
                out[-1] = (out[-1][0], row.y + row.h)
            elif inside:
                out.append((row.y, row.y + row.h))
            run = inside
        return out

    def draw(self, p, f: Frame) -> None:
        t0, t1, _ = self._area
        X0 = (t0 - self.host.origin) * f.sx + f.ox
        X1 = max((t1 - self.host.origin) * f.sx + f.ox, X0 + 1)
        p.setPen(AREA_PEN)
        p.setBrush(AREA_BRUSH)
        for top, bottom in self.boxes(f.rows):
            p.drawRect(QRectF(X0, top * f.sy + f.oy, X1 - X0, (bottom - top) * f.sy))
        p.setPen(Qt.NoPen)
        p.setBrush(Qt.NoBrush)
