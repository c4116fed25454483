"""The memory plots' y axis: gigabytes, with a device's capacity as a labelled mark.

A strip 70-120 px high under the timeline fits three or four labels. pyqtgraph's own ticks (0 2
4 6 under a rotated "GB") crowded it; here the ticks are chosen by their labels' measured height:
marks first (the capacity a dash-dotted line shows), then round values at the finest 1-2-5 step
whose labels clear each other, each kept only where its label lies wholly inside the axis and at
least a text line from every label already kept, so no two overlap and none is cut. The unit is
in each label, so the axis needs no rotated title."""

from __future__ import annotations

import math

import pyqtgraph as pg
from PySide6.QtCore import Qt
from PySide6.QtGui import QFont, QFontMetrics

_GAP = 2  # px between two labels, at least


class GbAxis(pg.AxisItem):
    def __init__(self) -> None:
        super().__init__("left")
        self.marks: list[tuple[float, str]] = []  # (GB, label): drawn first, never crowded out
        font = QFont()
        font.setPointSizeF(8)  # 13 px a line: two or three labels in a 50 px strip
        self.setStyle(tickFont=font, hideOverlappingLabels=True)

    def set_marks(self, marks: list[tuple[float, str]]) -> None:
        self.marks = sorted(set(marks))
        self.picture = None
        self.update()

    def _metrics(self) -> QFontMetrics:
        return QFontMetrics(self.style["tickFont"] or self.font())

    def label_rects(self) -> list[tuple[float, float, str]]:
        """(top, bottom, text) in the axis' own pixels of each label drawn now (tests, layout)."""
        vb = self.linkedView()
        if vb is None:
            return []
        (y0, y1) = vb.viewRange()[1]
        h = self._metrics().height()
        size = self.geometry().height()
        out = []
        for v, text in self.chosen(y0, y1, size):
            py = (y1 - v) / (y1 - y0) * size if y1 > y0 else 0.0
            out.append((py - h / 2, py + h / 2, text))
        return out

    def chosen(self, lo: float, hi: float, size: float) -> list[tuple[float, str]]:
        """The ticks (value, label) drawn between lo and hi on an axis `size` px long: each
        label wholly inside the axis and a text line from the others."""
        if hi <= lo or size <= 0:
            return []
        px = size / (hi - lo)
        h = self._metrics().height()
        line = h + _GAP

        def keep(cands: list[tuple[float, str]]) -> list[tuple[float, str]]:
            kept: list[tuple[float, str]] = []
            for v, text in cands:
                py = (hi - v) * px
                inside = lo <= v <= hi and py - h / 2 >= 0 and py + h / 2 <= size
                if inside and all(abs(v - k) * px >= line for k, _ in kept):
                    kept.append((v, text))
            return kept

        # round values at the finest 1-2-5 step whose labels clear each other (2, 4, 6 GB); where
        # that fits fewer than two between the edges (a short strip), the step of finer ones
        # that labels most (every other one of 1, 2, 3... GB: 1, 3, 5 GB)
        def at(step: float) -> list[tuple[float, str]]:
            return keep(list(self.marks) + [(k * step, _gb(k * step)) for k in range(1, int(hi / step) + 1)])

        clear = _round_step(line / px)
        best = at(clear)
        if len(best) - len(self.marks) < 2:
            step = _round_step(line / px / 3)
            while step < clear:
                got = at(step)
                if len(got) > len(best):
                    best = got
                step = _round_step(step * 1.01)
        return sorted(best)

    def tickValues(self, minVal: float, maxVal: float, size: float):  # noqa: N802,N803 - pyqtgraph's names
        self._last = dict(self.chosen(minVal, maxVal, size))
        return [(1.0, list(self._last))]

    def tickStrings(self, values, scale, spacing):  # noqa: N802 - pyqtgraph's name
        last = getattr(self, "_last", {})
        fm = self._metrics()
        room = max(20, int(self.width()) - 12)  # the tick and a margin
        return [fm.elidedText(last.get(v, _gb(v)), Qt.ElideLeft, room) for v in values]


def _round_step(x: float) -> float:
    """The smallest of 1, 2, 5 times a power of ten that is at least x."""
    if x <= 0:
        return 1.0
    e = 10 ** math.floor(math.log10(x))
    return next(m * e for m in (1, 2, 5, 10) if m * e >= x)


def _gb(v: float) -> str:
    return f"{v:g} GB"
