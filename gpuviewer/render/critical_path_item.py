"""The critical path layer: each step's path (session.critical_view.PathView) outlined on the
lanes that ran it, over the slices and under the selection. Busy segments are a solid outline
(over a band of the background's colour, so it reads on any slice) around their lane for their
time, idle ones a dashed one; where the path moves to another lane a
thin line joins them at the hand-over time.

Drawn from numpy arrays: the segments in view are picked with one mask and drawn with one
drawRects call per pen (a zero-width rectangle is the vertical join), so 64 ranks of paths cost
no Python loop per segment. A lane folded away (a collapsed rank, the folded host lanes) is
outlined on the row that stands for it: its group row, else its rank's header.
"""

from __future__ import annotations

import numpy as np
from PySide6.QtCore import Qt
from PySide6.QtGui import QColor, QPen

from ..model.layout import HOST_KINDS
from ..session.critical_view import RESOURCES
from . import theme
from .layer import Frame, Layer, state
from .rects import RectBuffer

PATH_COLOR = QColor(220, 38, 38)  # red: reads on blue kernels, orange NCCL and both themes
_IDLE = RESOURCES.index("idle")


class CriticalPathItem(Layer):
    keep = "calls"  # a few drawRects calls: replayed, cheaper than copied
    critical_path = state()  # session.critical_view.PathView, or None (nothing drawn)

    def __init__(self, host, z: float = 2.5) -> None:
        super().__init__(host, z)
        self.critical_path = None
        self._ys = (None, None, None)  # the layout's rows and the lane -> (y, h) arrays made for them
        self._bufs = (RectBuffer(), RectBuffer(), RectBuffer())
        self.drawn: dict | None = None  # what the last draw outlined: segment indices and their boxes

    def has_content(self) -> bool:
        return self._critical_path is not None and len(self._critical_path) > 0

    def lane_rows(self) -> tuple[np.ndarray, np.ndarray]:
        """Each lane's (y, h) in layout rows where it is drawn, or the row standing for it
        (NaN where none); made again only when the layout's rows change."""
        rows = self.host.layout.rows
        if self._ys[0] is rows:
            return self._ys[1], self._ys[2]
        lanes = self.host.trace.lanes
        y, h = np.full(len(lanes), np.nan), np.full(len(lanes), np.nan)
        groups, headers = {}, {}
        for row in rows:
            if row.kind == "lane" and row.lane >= 0:
                y[row.lane], h[row.lane] = row.y, row.h
            elif row.kind == "group":
                groups[row.group] = row
            elif row.kind == "header" and row.rank >= 0:
                headers[row.rank] = row
        for i in np.flatnonzero(np.isnan(y)).tolist():  # once per layout, not per frame
            ln = lanes[i]
            host_key = f"r{ln.rank}/host" if ln.kind in HOST_KINDS else None
            row = groups.get(f"r{ln.rank}/{ln.kind}") or groups.get(host_key) or headers.get(ln.rank)
            if row is not None:
                y[i], h[i] = row.y, row.h
        self._ys = (rows, y, h)
        return y, h

    def draw(self, p, f: Frame) -> None:
        pv = self._critical_path
        ly, lh = self.lane_rows()
        lane = pv.lane
        y = np.where(lane >= 0, ly[np.maximum(lane, 0)], np.nan)
        h = np.where(lane >= 0, lh[np.maximum(lane, 0)], np.nan)
        origin = self.host.origin
        vis = (pv.end >= f.t0) & (pv.start <= f.t1) & ~np.isnan(y) & (y + h >= f.y0) & (y <= f.y1)
        idx = np.flatnonzero(vis)
        X0 = (pv.start[idx] - origin).astype(np.float64) * f.sx + f.ox
        X1 = (pv.end[idx] - origin).astype(np.float64) * f.sx + f.ox
        # clipped to the view: Qt's raster engine fails on rectangles ~1e15 px wide
        X0, X1 = np.maximum(X0, f.left - 20), np.minimum(X1, f.right + 20)
        W = np.maximum(X1 - X0, 1.0)
        Y = y[idx] * f.sy + f.oy + 1.0
        H = np.maximum(h[idx] * f.sy - 2.0, 1.0)
        self.drawn = {"index": idx, "x0": X0, "x1": X0 + W, "y": Y, "h": H}
        p.setBrush(Qt.NoBrush)
        idle = pv.res[idx] == _IDLE
        halo = QPen(theme.current().background, 4)
        for buf, sel, style in ((self._bufs[0], ~idle, Qt.SolidLine), (self._bufs[1], idle, Qt.DashLine)):
            if sel.any():
                n = buf.fill(*_merged(X0[sel], X0[sel] + W[sel], Y[sel], H[sel]))
                halo.setStyle(style)
                p.setPen(halo)  # the background's colour under the line: it reads on any slice colour
                buf.draw(p, n)
                p.setPen(QPen(PATH_COLOR, 2, style))
                buf.draw(p, n)
        self._draw_joins(p, f, pv, y, h)
        p.setPen(Qt.NoPen)

    def _draw_joins(self, p, f: Frame, pv, y: np.ndarray, h: np.ndarray) -> None:
        """A vertical line at each hand-over to another lane inside a step, from the middle of
        one lane to the middle of the next (zero-width rectangles: one call)."""
        if len(pv) < 2:
            return
        a, b = np.arange(len(pv) - 1), np.arange(1, len(pv))
        t = pv.start[b]
        sel = (
            (pv.step[a] == pv.step[b])
            & (pv.lane[a] != pv.lane[b])
            & ~np.isnan(y[a])
            & ~np.isnan(y[b])
            & (t >= f.t0)
            & (t <= f.t1)
        )
        a, b = a[sel], b[sel]
        if not len(a):
            return
        m0 = (y[a] + h[a] / 2) * f.sy + f.oy
        m1 = (y[b] + h[b] / 2) * f.sy + f.oy
        X = (pv.start[b] - self.host.origin).astype(np.float64) * f.sx + f.ox
        p.setPen(QPen(PATH_COLOR, 1))
        buf = self._bufs[2]
        buf.draw(p, buf.fill(X, np.minimum(m0, m1), np.zeros(len(a)), np.abs(m1 - m0)))


MERGE_PX = 3.0  # boxes of one row this close are drawn as one


def _merged(x0: np.ndarray, x1: np.ndarray, y: np.ndarray, h: np.ndarray):
    """(x, y, w, h) of the boxes with those of one row that touch or lie within MERGE_PX of each
    other drawn as one: a run of tiny kernels on the path was a comb of boxes whose halos cut the
    names under them into fragments ('GPU ste 5 leta l::d gr d ngi'; a review). (An idle gap as
    narrow between two busy boxes is drawn over by the solid one: too narrow to show dashed.)"""
    o = np.lexsort((x0, y))
    x0, x1, y, h = x0[o], x1[o], y[o], h[o]
    # each row's running right edge (boxes of one row may overlap: a box is 1 px at least), the
    # rows set apart by an offset far past any x (they are clipped to the view)
    row = np.concatenate([[0], np.cumsum(y[1:] != y[:-1])]).astype(np.float64) * 1e7
    end = np.maximum.accumulate(x1 + row) - row
    new = np.ones(len(x0), bool)
    new[1:] = (y[1:] != y[:-1]) | (x0[1:] > end[:-1] + MERGE_PX)
    at = np.flatnonzero(new)
    right = np.maximum.reduceat(x1, at)
    return x0[at], y[at], right - x0[at], h[at]
