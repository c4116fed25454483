"""The annotations layer: notes (a flag and a label), regions (a tinted box with a title) and
arrows (between two ranks or lanes), from model.annotations, on the session's time axis."""

from __future__ import annotations

from operator import attrgetter

from PySide6.QtCore import QPointF, QRectF, Qt
from PySide6.QtGui import QBrush, QColor, QPen, QPolygonF

from .layer import Frame, Layer, state

# An annotation is edited in place (the panel) and the list appended to: what is drawn is
# compared by value each paint, so an edit shows even when nobody reassigns the list.
_FIELDS = attrgetter("kind", "text", "start_ns", "end_ns", "rank", "lane", "color", "title", "end_rank", "end_lane")


class AnnotationsItem(Layer):
    keep = "calls"  # translucent lines and antialiased text over the slices: replayed, never copied
    annotations = state()

    def __init__(self, host, z: float = 4.0) -> None:
        super().__init__(host, z)
        self.annotations = []  # model.annotations.Annotation

    def has_content(self) -> bool:
        return bool(self._annotations)

    def content_key(self):
        return tuple(map(_FIELDS, self._annotations))

    def _ann_rows(self, rank: int, lane_key: str | None) -> tuple[float, float] | None:
        """Device-independent y span (rows units) of an annotation's rank or lane."""
        rows, lanes = self.host.layout.rows, self.host.trace.lanes
        ys = [
            (r.y, r.y + r.h)
            for r in rows
            if r.rank == rank
            and (r.kind == "header" or r.kind == "lane" and (lane_key is None or lanes[r.lane].key == lane_key))
        ]
        if lane_key is not None:
            ys = [(r.y, r.y + r.h) for r in rows if r.kind == "lane" and lanes[r.lane].key == lane_key] or ys
        if not ys:
            return None
        return min(a for a, _ in ys), max(b for _, b in ys)

    def draw(self, p, f: Frame) -> None:
        origin, sx, ox, sy, oy, left, right = self.host.origin, f.sx, f.ox, f.sy, f.oy, f.left, f.right
        fm = self.host.fm
        p.setFont(self.host.font)
        for a in self._annotations:
            col = QColor(a.color)
            span = self._ann_rows(a.rank, a.lane)
            if span is None:
                continue
            Y0, Y1 = span[0] * sy + oy, span[1] * sy + oy
            X0 = (a.start_ns - origin) * sx + ox
            if a.kind == "region":
                X1 = (a.end_ns - origin) * sx + ox
                if X1 < left or X0 > right:
                    continue
                # clip to the view: Qt's raster engine crashes on rectangles ~1e15 px wide
                X0, X1 = max(X0, left - 20), min(X1, right + 20)
                fill = QColor(col)
                fill.setAlpha(40)
                p.setPen(QPen(col, 1.5))
                p.setBrush(QBrush(fill))
                p.drawRect(QRectF(X0, Y0, max(X1 - X0, 2), Y1 - Y0))
                label = (a.title + ": " if a.title else "") + a.text
                p.setPen(col.darker(150))
                p.drawText(
                    QRectF(X0 + 4, Y0 + 2, max(X1 - X0 - 8, 160), 16),
                    Qt.AlignLeft | Qt.AlignTop,
                    fm.elidedText(label, Qt.ElideRight, int(max(X1 - X0 - 8, 160))),
                )
            elif a.kind == "note" and not (left - 200 <= X0 <= right + 20):
                continue  # off screen
            elif a.kind == "note":
                p.setPen(QPen(col, 2))
                p.drawLine(QPointF(X0, Y0), QPointF(X0, Y1))
                flag = QPolygonF([QPointF(X0, Y0), QPointF(X0 + 10, Y0 + 5), QPointF(X0, Y0 + 10)])
                p.setBrush(QBrush(col))
                p.drawPolygon(flag)
                w = min(fm.horizontalAdvance(a.text) + 10, 420)
                box = QRectF(X0 + 12, Y0, w, 16)
                p.setBrush(QBrush(QColor(255, 255, 255, 230)))
                p.drawRect(box)
                p.setPen(col.darker(150))
                p.drawText(
                    box.adjusted(4, 0, -2, 0),
                    Qt.AlignVCenter | Qt.AlignLeft,
                    fm.elidedText(a.text, Qt.ElideRight, int(w - 6)),
                )
            elif a.kind == "arrow":
                end = self._ann_rows(a.end_rank if a.end_rank is not None else a.rank, a.end_lane)
                if end is None:
                    continue
                X1 = (a.end_ns - origin) * sx + ox
                start = QPointF(X0, (Y0 + min(Y1, Y0 + sy)) / 2)
                tip = QPointF(X1, (end[0] * sy + oy + min(end[1], end[0] + 1) * sy + oy) / 2)
                p.setPen(QPen(col, 2))
                p.setBrush(QBrush(col))
                p.drawLine(start, tip)
                v = tip - start
                length = max((v.x() ** 2 + v.y() ** 2) ** 0.5, 1e-6)
                ux, uy = v.x() / length, v.y() / length
                p.drawPolygon(
                    QPolygonF(
                        [
                            tip,
                            QPointF(tip.x() - 10 * ux + 5 * uy, tip.y() - 10 * uy - 5 * ux),
                            QPointF(tip.x() - 10 * ux - 5 * uy, tip.y() - 10 * uy + 5 * ux),
                        ]
                    )
                )
                if a.text:
                    mid = (start + tip) / 2
                    p.setPen(col.darker(150))
                    p.drawText(QRectF(mid.x() + 4, mid.y() - 16, 400, 16), Qt.AlignLeft | Qt.AlignVCenter, a.text)
        p.setPen(Qt.NoPen)
