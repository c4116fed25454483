"""Time axis in readable units (s, ms, µs, ns) relative to the session start.

Drawn directly: pyqtgraph's AxisItem builds its tick specification in Python on every range
change (about 2.5 ms an axis a frame here, the largest fixed cost of a pan), while a time axis
needs one 1-2-5 spacing, a few lines and a dozen labels (about 0.2 ms)."""

from __future__ import annotations

import math

import pyqtgraph as pg
from PySide6.QtCore import QLineF, QRectF, Qt
from PySide6.QtGui import QFont, QFontMetricsF, QPen

# The formatting itself is Qt-free (model.fmt); the names stay importable from here for widgets.
from ..model.fmt import format_duration, format_ns
from . import theme

__all__ = ["TimeAxis", "format_duration", "format_ns", "nice_spacing"]


def nice_spacing(span: float, width_px: float, target_px: float = 110.0) -> float:
    """A 1-2-5 x 10^k spacing that puts major ticks about target_px apart."""
    if span <= 0 or width_px <= 0:
        return 1.0
    raw = span * target_px / width_px
    base = 10.0 ** math.floor(math.log10(raw))
    for m in (1.0, 2.0, 5.0, 10.0):
        if base * m >= raw:
            return base * m
    return base * 10.0


class TimeAxis(pg.AxisItem):
    def __init__(self, orientation: str, **kw) -> None:
        super().__init__(orientation, **kw)
        self.font_ = QFont()
        self.font_.setPixelSize(11)
        self.fm = QFontMetricsF(self.font_)
        self.setHeight(int(self.fm.height() + 10))

    def tickStrings(self, values, scale, spacing):
        ref = max((abs(v) for v in values), default=0.0)
        return [format_ns(v, spacing, ref) for v in values]

    def ticks(self, width_px: float) -> tuple[float, list[float], list[float]]:
        """(spacing, major tick values, minor tick values) inside the current range."""
        lo, hi = sorted(self.range)
        sp = nice_spacing(hi - lo, width_px)
        first = math.ceil(lo / sp)
        major = [k * sp for k in range(first, int(math.floor(hi / sp)) + 1)]
        minor_sp = sp / 5
        first_m = math.ceil(lo / minor_sp)
        minor = [k * minor_sp for k in range(first_m, int(math.floor(hi / minor_sp)) + 1) if k % 5]
        return sp, major, minor

    def paint(self, p, opt, widget=None) -> None:
        # the axis' own box, not boundingRect(): pyqtgraph extends that by the tick length into the
        # plot, and the line drawn at its edge crossed the top row's text 5 px inside the lanes (a
        # collapsed rank 0's step names; an audit of the window)
        rect = self.mapRectFromParent(self.geometry())
        lo, hi = self.range
        if hi == lo or rect.width() <= 0:
            return
        sx = rect.width() / (hi - lo)
        top = self.orientation == "top"
        base_y = rect.bottom() if top else rect.top()
        sign = -1 if top else 1
        sp, major, minor = self.ticks(rect.width())
        th = theme.current()
        p.setPen(QPen(th.line, 0))
        p.drawLine(QLineF(rect.left(), base_y, rect.right(), base_y))
        p.drawLines([QLineF(x, base_y, x, base_y + sign * 3) for x in ((v - lo) * sx + rect.left() for v in minor)])
        p.drawLines([QLineF(x, base_y, x, base_y + sign * 6) for x in ((v - lo) * sx + rect.left() for v in major)])
        p.setFont(self.font_)
        p.setPen(QPen(th.axis_text, 0))
        h = self.fm.height()
        y = rect.top() + 1 if top else base_y + 7
        right_edge = -1e9
        ref = max(abs(lo), abs(hi))  # one unit along the axis
        for v in major:
            s = format_ns(v, sp, ref)
            w = self.fm.horizontalAdvance(s)
            x = (v - lo) * sx + rect.left() - w / 2
            x = min(max(x, rect.left()), rect.right() - w)
            if x < right_edge + 6:
                continue  # would touch the label before it
            p.drawText(QRectF(x, y, w + 2, h), Qt.AlignLeft | Qt.AlignTop, s)
            right_edge = x + w
