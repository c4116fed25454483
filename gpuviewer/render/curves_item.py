"""Counter curves (the memory panel's allocated / reserved bytes) as one item, decimated to pixels
like the timeline's slices and kept as an image.

A PlotDataItem per curve re-clipped and re-downsampled its data in Python on every range change:
128 curves of a 64-rank session cost 78 ms a pan, two thirds of the window's frame. Here every
curve is cut to min / max per pixel column (first, min, max, last: the vertical stroke a column
shows and the lines into its neighbours) and drawn into an image three views wide; a pan only
copies that image at a new offset. A zoom step stretches it while it still covers the view, and
the curves are drawn anew once the zoom pauses (_SHARPEN_MS); they are drawn at once when the
height, the y range or the data change, or when the view leaves the drawn span. Vector painters
(SVG, print) get the decimated curves as paths, never the image."""

from __future__ import annotations

import numpy as np
import pyqtgraph as pg
import pyqtgraph.functions as fn
from PySide6.QtCore import QPointF, QRectF, Qt, QTimer
from PySide6.QtGui import QColor, QImage, QPaintEngine, QPainter, QPen, QPolygonF

_CACHED_ENGINES = (QPaintEngine.Raster, QPaintEngine.OpenGL, QPaintEngine.OpenGL2)
_SPAN = 3  # the image covers the view and one view's width either side
_SPAN_ZOOMING = 1.6  # ... and 0.3 of it, drawn in the middle of a zoom (two steps out fit)
# A zoom step stretches the kept image (under a millisecond) and the curves are drawn anew this
# long after the last step: a wheel or key zoom sends a step every 20-100 ms, and drawing 128
# curves three views wide costs 25-30 ms a step, twice a frame's budget
_SHARPEN_MS = 120
_STRETCH_MAX = 2.0  # a zoom of more (a jump: a finding, F, fit) is drawn at once, never that coarse


def decimate(x: np.ndarray, y: np.ndarray, x0: float, px_per_x: float, width: int) -> tuple[np.ndarray, np.ndarray]:
    """The points of a curve (x sorted) that a width-pixel strip starting at x0 shows: per
    pixel column its first, min, max and last value at the column's centre (each only where it
    differs from the one before it: the same point), plus the samples just outside the strip
    so the lines reach its edges. Returns pixel x, data y."""
    px, py, _ = decimate_many([(x, y)], x0, px_per_x, width)
    return px, py


def decimate_many(curves, x0: float, px_per_x: float, width: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """decimate() of many curves in one numpy pass: 128 curves one at a time cost 8 ms of
    per-call overhead at each redraw of a view's width, 3 ms together. Returns pixel x, data y
    and offsets (curve k's points are [offsets[k], offsets[k + 1]))."""
    n_curves = len(curves)
    x1 = x0 + width / px_per_x
    xs, ys, ids = [], [], []
    for k, (x, y) in enumerate(curves):
        lo = max(0, int(x.searchsorted(x0, "left")) - 1)
        hi = min(len(x), int(x.searchsorted(x1, "right")) + 1)
        if hi > lo:
            xs.append(x[lo:hi])
            ys.append(y[lo:hi])
            ids.append(k)
    if width <= 0 or not xs:
        return np.zeros(0), np.zeros(0), np.zeros(n_curves + 1, np.int64)
    lens = np.fromiter(map(len, xs), np.int64, len(xs))
    pxr = np.concatenate(xs)
    pxr -= x0
    pxr *= px_per_x
    yv = np.concatenate(ys).astype(np.float64, copy=False)  # a copy already: the edge samples move in it
    cid = np.repeat(np.asarray(ids, np.int64), lens)
    first_i = np.cumsum(lens) - lens
    last_i = first_i + lens - 1
    # a sample outside the strip is moved along its line to the strip's edge (-1 or width), so
    # the line into the strip keeps its slope and no coordinate is far out of the image
    two = lens >= 2
    for out, nb, edge in ((first_i[two], first_i[two] + 1, -1.0), (last_i[two], last_i[two] - 1, float(width))):
        beyond = (pxr[out] < edge) if edge < 0 else (pxr[out] > edge)
        m = beyond & (pxr[nb] != pxr[out])
        out, nb = out[m], nb[m]
        f = (edge - pxr[out]) / (pxr[nb] - pxr[out])
        yv[out] = yv[out] + f * (yv[nb] - yv[out])
        pxr[out] = edge
    cols = np.floor(pxr)
    np.clip(cols, -1, width, out=cols)
    key = cid * (width + 3) + cols  # one group per curve and column
    starts = np.flatnonzero(np.r_[True, key[1:] != key[:-1]])
    vals = np.empty((len(starts), 4))
    vals[:, 0] = yv[starts]
    vals[:, 1] = np.minimum.reduceat(yv, starts)
    vals[:, 2] = np.maximum.reduceat(yv, starts)
    vals[:, 3] = yv[np.r_[starts[1:], len(yv)] - 1]
    # a value equal to the one before it in its column is the same point: left out (zoomed in, a
    # column holds one sample, four equal points)
    keep = np.empty(vals.shape, bool)
    keep[:, 0] = True
    np.not_equal(vals[:, 1:], vals[:, :-1], out=keep[:, 1:])
    px = np.repeat(cols[starts] + 0.5, 4).reshape(-1, 4)[keep]
    counts = np.bincount(cid[starts], weights=keep.sum(axis=1), minlength=n_curves).astype(np.int64)
    return px, vals[keep], np.r_[0, np.cumsum(counts)]


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
        self.stretched = 0  # paints that stretched the kept image (a zoom step)
        self._sharpen = QTimer(self)
        self._sharpen.setSingleShot(True)
        self._sharpen.setInterval(_SHARPEN_MS)
        self._sharpen.timeout.connect(self.sharpen)

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
        img = self._image
        p.save()
        p.resetTransform()
        if (
            img is not None
            and key == self._key
            and x0 >= self._img_x0
            and (x1 - self._img_x0) * sx <= img.width() / dpr
        ):
            # a pan within the drawn span: the image copied at its new offset
            p.drawImage(QPointF(round(left.x() + (self._img_x0 - x0) * sx), round(left.y())), img)
        elif (
            img is not None
            and self._key is not None
            and key[1:] == self._key[1:]
            and 1 / _STRETCH_MAX <= sx / self._key[0] <= _STRETCH_MAX
            and self._covers(x0, x1)
        ):
            # only the scale changed, by at most 2x (a zoom step), and the kept image, stretched,
            # still covers the view: drawn stretched now, anew once the zoom pauses (_SHARPEN_MS)
            k = sx / self._key[0]
            target = QRectF(left.x() + (self._img_x0 - x0) * sx, left.y(), img.width() / dpr * k, img.height() / dpr)
            p.setRenderHint(QPainter.SmoothPixmapTransform, False)
            p.drawImage(target, img, QRectF(img.rect()))
            self.stretched += 1
            self._sharpen.start()
        else:
            # mid-zoom (a stretch is pending) only the view and 0.3 of it either side is drawn,
            # half the work; the pause then draws the span that pans copy from
            zooming = self._sharpen.isActive()
            span = _SPAN_ZOOMING if zooming else _SPAN
            self._img_x0 = x0 - (x1 - x0) * (span - 1) / 2
            img_w = int(round(w * span))
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
            if zooming:
                self._sharpen.start()  # again: the wide image once the zoom pauses
            p.drawImage(QPointF(round(left.x() + (self._img_x0 - x0) * sx), round(left.y())), img)
        p.restore()

    def _covers(self, x0: float, x1: float) -> bool:
        """Whether the kept image spans data x0..x1."""
        img = self._image
        if img is None or self._key is None:
            return False
        return x0 >= self._img_x0 and x1 <= self._img_x0 + img.width() / img.devicePixelRatio() / self._key[0]

    @property
    def redraw_pending(self) -> bool:
        """A stretched image is on screen and the curves will be drawn anew."""
        return self._sharpen.isActive()

    def sharpen(self) -> None:
        """Draw the curves anew at the next paint (the zoom paused)."""
        self._sharpen.stop()
        self._key = None
        self.update()

    def _draw(
        self, p: QPainter, x0: float, sx: float, width: int, y0: float, y1: float, h: float, origin: QPointF
    ) -> None:
        """The decimated curves in device pixels, `origin` the device point of (x0, y1)."""
        p.save()
        p.resetTransform()
        p.translate(origin)
        # one-pixel cosmetic pens without antialiasing: Qt's fast line path. Decimated to a
        # point per column, antialiasing adds nothing, and a 1.5 px antialiased dashed pen took
        # 16 ms a curve (2 s for 128 curves at every zoom)
        p.setRenderHint(QPainter.Antialiasing, False)
        ky = h / (y1 - y0) if y1 > y0 else 1.0
        px, py, offsets = decimate_many([(x, y) for x, y, _ in self.curves], x0, sx, width)
        for k, (_, _, pen) in enumerate(self.curves):
            a, b = int(offsets[k]), int(offsets[k + 1])
            if b - a < 2:
                continue
            p.setPen(pen)
            poly = fn.create_qpolygonf(b - a)  # filled in place through numpy: no per-point Python
            xy = fn.ndarray_from_qpolygonf(poly)
            xy[:, 0] = px[a:b]
            xy[:, 1] = (y1 - py[a:b]) * ky
            p.drawPolyline(poly)
        p.setPen(QPen(QColor(255, 255, 255), 1))
        for x, y, color in self.markers:
            p.setBrush(color)
            keep = (x >= x0) & (x <= x0 + width / sx)
            for mx, my in zip((x[keep] - x0) * sx, (y1 - y[keep]) * ky):
                p.drawPolygon(QPolygonF([QPointF(mx - 4, my - 7), QPointF(mx + 4, my - 7), QPointF(mx, my)]))
        p.restore()
