"""Counter curves (the memory panel's allocated / reserved bytes) as one item, decimated to pixels
like the timeline's slices and kept as an image.

A PlotDataItem per curve re-clipped and re-downsampled its data in Python on every range change:
128 curves of a 64-rank session cost 78 ms a pan, two thirds of the window's frame. Here every
curve is cut to min / max per pixel column (first, min, max, last: the vertical stroke a column
shows and the lines into its neighbours) and drawn into an image three views wide; a pan only
copies that image at a new offset. It is drawn again when the scale (zoom), the height, the y
range or the data change, or when a pan leaves the drawn span. Vector painters (SVG, print)
get the decimated curves as paths, never the image."""
from __future__ import annotations

import numpy as np
import pyqtgraph as pg
import pyqtgraph.functions as fn
from PySide6.QtCore import QPointF, QRectF, Qt
from PySide6.QtGui import QColor, QImage, QPaintEngine, QPainter, QPen, QPolygonF

_CACHED_ENGINES = (QPaintEngine.Raster, QPaintEngine.OpenGL, QPaintEngine.OpenGL2)
_SPAN = 3  # the image covers the view and one view's width either side


def decimate(x: np.ndarray, y: np.ndarray, x0: float, px_per_x: float, width: int) -> tuple[np.ndarray, np.ndarray]:
    """The points of a curve (x sorted) that a width-pixel strip starting at x0 shows: per
    pixel column its first, min, max and last value at the column's centre, plus the samples
    just outside the strip so the lines reach its edges. Returns pixel x, data y."""
    n = len(x)
    if n == 0 or width <= 0:
        return np.zeros(0), np.zeros(0)
    x1 = x0 + width / px_per_x
    lo = max(0, int(np.searchsorted(x, x0, side="left")) - 1)
    hi = min(n, int(np.searchsorted(x, x1, side="right")) + 1)
    xs, ys = x[lo:hi], y[lo:hi]
    if len(xs) == 0:
        return np.zeros(0), np.zeros(0)
    pxr = (xs - x0) * px_per_x
    ys = ys.copy()
    # a sample outside the strip is moved along its line to the strip's edge (-1 or width), so
    # the line into the strip keeps its slope and no coordinate is far out of the image
    for out, edge, nb in ((0, -1.0, 1), (len(pxr) - 1, float(width), len(pxr) - 2)):
        if 0 <= nb < len(pxr) and (pxr[out] < edge if out == 0 else pxr[out] > edge) and pxr[nb] != pxr[out]:
            f = (edge - pxr[out]) / (pxr[nb] - pxr[out])
            ys[out] = ys[out] + f * (ys[nb] - ys[out])
            pxr[out] = edge
    cols = np.clip(np.floor(pxr), -1, width)
    starts = np.flatnonzero(np.r_[True, cols[1:] != cols[:-1]])
    ends = np.r_[starts[1:], len(cols)] - 1
    first, last = ys[starts], ys[ends]
    mn, mx = np.minimum.reduceat(ys, starts), np.maximum.reduceat(ys, starts)
    px = np.repeat(cols[starts] + 0.5, 4)
    py = np.column_stack((first, mn, mx, last)).ravel()
    return px, py


class CurvesItem(pg.GraphicsObject):
    """Many curves in one item: add(x, y, pen) each, then it paints them all."""

    def __init__(self) -> None:
        super().__init__()
        self.curves: list[tuple[np.ndarray, np.ndarray, QPen]] = []
        self.markers: list[tuple[np.ndarray, np.ndarray, QColor]] = []  # triangles pointing down
        self._bounds = QRectF()
        self._image: QImage | None = None
        self._key = None  # (scale, height, y range, dpr, version) the image was drawn for
        self._img_x0 = 0.0  # data x at the image's left edge
        self._version = 0
        self.redraws = 0  # images drawn (the bench and tests read it)

    def add(self, x: np.ndarray, y: np.ndarray, pen: QPen) -> None:
        x = np.asarray(x, np.float64)
        y = np.asarray(y, np.float64)
        pen = QPen(pen)
        pen.setWidth(1)
        pen.setCosmetic(True)
        self.curves.append((x, y, pen))
        if len(x):
            r = QRectF(float(x[0]), float(min(0.0, y.min())), float(x[-1] - x[0]), float(y.max() - min(0.0, y.min())))
            self._bounds = r if self._bounds.isNull() else self._bounds.united(r)
        self.prepareGeometryChange()
        self._version += 1
        self.update()

    def add_markers(self, x, y, color: QColor) -> None:
        """Points marked with a small triangle (a step's peak), drawn over the curves."""
        self.markers.append((np.asarray(x, np.float64), np.asarray(y, np.float64), QColor(color)))
        self._version += 1
        self.update()

    def boundingRect(self) -> QRectF:  # noqa: N802 - Qt's name
        return QRectF(self._bounds)

    def paint(self, p: QPainter, *_args) -> None:
        vb = self.getViewBox()
        if vb is None or not self.curves:
            return
        (x0, x1), (y0, y1) = vb.viewRange()
        t = p.transform()  # data -> device
        left = t.map(QPointF(x0, y1))
        right = t.map(QPointF(x1, y0))
        w, h = right.x() - left.x(), right.y() - left.y()
        if w <= 1 or h <= 1 or x1 <= x0:
            return
        sx = w / (x1 - x0)
        if p.paintEngine().type() not in _CACHED_ENGINES:
            self._draw(p, x0, sx, int(round(w)) + 1, y0, y1, h, left)
            return
        dpr = p.device().devicePixelRatioF() if p.device() is not None else 1.0
        key = (round(sx, 12), round(h, 3), y0, y1, dpr, self._version)
        img_w = int(round(w)) * _SPAN
        in_span = (self._image is not None and x0 >= self._img_x0
                   and (x1 - self._img_x0) * sx <= self._image.width() / dpr)
        if key != self._key or not in_span:
            self._img_x0 = x0 - (x1 - x0) * (_SPAN - 1) / 2
            img = QImage(int(img_w * dpr), int(np.ceil(h * dpr)), QImage.Format_ARGB32_Premultiplied)
            img.setDevicePixelRatio(dpr)
            img.fill(Qt.transparent)
            ip = QPainter(img)
            try:
                self._draw(ip, self._img_x0, sx, img_w, y0, y1, h, QPointF(0, 0))
            finally:
                ip.end()
            self._image, self._key = img, key
            self.redraws += 1
        off = (self._img_x0 - x0) * sx  # <= 0: where the image's left edge lies from the view's
        p.save()
        p.resetTransform()
        p.drawImage(QPointF(round(left.x() + off), round(left.y())), self._image)
        p.restore()

    def _draw(self, p: QPainter, x0: float, sx: float, width: int, y0: float, y1: float, h: float,
              origin: QPointF) -> None:
        """The decimated curves in device pixels, `origin` the device point of (x0, y1)."""
        p.save()
        p.resetTransform()
        p.translate(origin)
        # one-pixel cosmetic pens without antialiasing: Qt's fast line path. Decimated to a
        # point per column, antialiasing adds nothing, and a 1.5 px antialiased dashed pen took
        # 16 ms a curve (2 s for 128 curves at every zoom)
        p.setRenderHint(QPainter.Antialiasing, False)
        ky = h / (y1 - y0) if y1 > y0 else 1.0
        for x, y, pen in self.curves:
            px, py = decimate(x, y, x0, sx, width)
            if len(px) < 2:
                continue
            p.setPen(pen)
            poly = fn.create_qpolygonf(len(px))  # filled in place through numpy: no per-point Python
            xy = fn.ndarray_from_qpolygonf(poly)
            xy[:, 0] = px
            xy[:, 1] = (y1 - py) * ky
            p.drawPolyline(poly)
        p.setPen(QPen(QColor(255, 255, 255), 1))
        for x, y, color in self.markers:
            p.setBrush(color)
            keep = (x >= x0) & (x <= x0 + width / sx)
            for mx, my in zip((x[keep] - x0) * sx, (y1 - y[keep]) * ky):
                p.drawPolygon(QPolygonF([QPointF(mx - 4, my - 7), QPointF(mx + 4, my - 7), QPointF(mx, my)]))
        p.restore()
