"""One layer of the timeline: a GraphicsObject that draws one thing, stacked by zValue under the
TimelineItem (render/timeline_item.py) in the same ViewBox.

QGraphicsView keeps no pixels per item: any repaint of a region calls paint() on every item
there. So a layer keeps what it drew, as the painter calls it made, and draws anew (computes its
geometry: range queries, levels of detail, labels) only when the view or its own state changed:
a new selection or cursor position redraws its overlay, not the slices under it. A layer's
state is set through `state` attributes, whose setter marks it stale and schedules its repaint.

How a kept layer is put back (Layer.keep):
  "calls"  the calls are replayed: the same calls on the same painter give the same pixels,
           whatever lies below (translucent lines and antialiased text over other layers).
  "image"  the first paint after a draw replays the calls (a pan costs what it did); a second
           paint of the same view (another layer changed) replays them once into an image, and
           from then on only copies it, at an integer offset. Exact only for a layer without
           text (Qt draws glyphs into an image unlike onto a window with subpixel antialiasing)
           whose translucent parts lie over its own opaque pixels or alone, one blend deep: a
           translucent pixel over a transparent one would be rounded once more when copied.
  None     nothing is kept: drawn at every paint (what is cheaper drawn than kept).
Every layer draws in device pixels, the painter's transform reset, as the single item did.
"""

from __future__ import annotations

import math

import pyqtgraph as pg
import shiboken6
from PySide6.QtCore import QPointF, QRectF, QSize, Qt
from PySide6.QtGui import QImage, QPaintEngine, QPainter

_PAD = 4  # device px kept around the view in an image: drawing reaches a few px past its edges
_AA, _NO_PEN = QPainter.Antialiasing, Qt.NoPen  # read once: an enum member read is slow in Python
_RASTER = QPaintEngine.Raster
_MAX_IMAGE_PX = 1 << 23  # 32 MB: past that (a 4K screen at 2x) a layer is replayed, not copied


class state:
    """A layer attribute whose change redraws that layer, and only it."""

    def __set_name__(self, owner, name: str) -> None:
        self.attr = "_" + name

    def __get__(self, obj, owner=None):
        return self if obj is None else getattr(obj, self.attr)

    def __set__(self, obj, value) -> None:
        setattr(obj, self.attr, value)
        obj.invalidate()


class Frame:
    """Where the view is, in the painter's device pixels; computed once per draw."""

    __slots__ = ("x0", "x1", "y0", "y1", "sx", "ox", "sy", "oy", "left", "right", "ns_per_px", "t0", "t1", "rows")

    def __init__(self, host, x0, x1, y0, y1, sx, ox, sy, oy) -> None:
        self.x0, self.x1, self.y0, self.y1 = x0, x1, y0, y1
        self.sx, self.ox, self.sy, self.oy = sx, ox, sy, oy
        self.left, self.right = x0 * sx + ox, x1 * sx + ox  # device x of the visible edges
        self.ns_per_px = 1.0 / sx
        self.t0, self.t1 = host.origin + int(x0) - 1, host.origin + int(x1) + 1
        self.rows = host.visible_rows(y0, y1)


def _draw_rect_array(p: QPainter, a) -> None:
    # an (n, 4) float64 array is a QRectF[n] in memory (render/rects.py)
    p.drawRects(shiboken6.wrapInstance(a.ctypes.data, QRectF), len(a))


class Calls:
    """Stands in for a QPainter in draw(): records each call, as (QPainter method, arguments)."""

    def __init__(self) -> None:
        self.calls: list = []

    def __getattr__(self, name: str):
        fn, calls = getattr(QPainter, name), self.calls

        def record(*args) -> None:
            calls.append((fn, args))

        setattr(self, name, record)  # made once per method: labels call setPen, drawText hundreds of times
        return record

    def draw_rect_array(self, a) -> None:
        """drawRects of an (n, 4) array the recorder may keep (RectBuffer reuses its own)."""
        self.calls.append((_draw_rect_array, (a,)))

    def replay(self, p: QPainter) -> None:
        for fn, args in self.calls:
            fn(p, *args)


class Layer(pg.GraphicsObject):
    """Subclasses: draw(p, frame) in device pixels; has_content() False when there is nothing
    to draw (nothing is kept then); keep: see the module's docstring."""

    keep: str | None = "calls"

    def __init__(self, host, z: float) -> None:
        super().__init__(host)
        self.host = host
        self.setZValue(z)
        self._calls: Calls | None = None
        self._key = None
        self._rows = None  # the layout's rows the calls were made for (a rebuild replaces them)
        self._stale = True
        self._replayed = 0  # paints since the draw
        self._img: QImage | None = None
        self._img_key = None
        self.draws = 0  # times the content was drawn (a replay or a copy is not a draw)

    def boundingRect(self) -> QRectF:
        return self.host.boundingRect()

    def has_content(self) -> bool:
        return True

    def content_key(self):
        """Whatever the layer reads that may change without a setter (compared each paint)."""
        return None

    def draw(self, p, f: Frame) -> None:
        raise NotImplementedError

    def invalidate(self) -> None:
        """Draw anew at the next paint (state changed), and schedule that paint."""
        self._stale = True
        self.update()

    def paint(self, p: QPainter, opt, widget=None) -> None:
        if not self.has_content():
            self._calls = self._img = None
            return
        vb = self.getViewBox()
        if vb is None:
            return
        (x0, x1), (y0, y1) = vb.viewRange()
        tr = p.transform()
        sx, ox, sy, oy = tr.m11(), tr.dx(), tr.m22(), tr.dy()
        if sx <= 0:
            return
        p.save()
        p.resetTransform()
        p.setRenderHint(_AA, False)
        p.setPen(_NO_PEN)
        if self.keep is None:
            self.draws += 1
            self.draw(p, Frame(self.host, x0, x1, y0, y1, sx, ox, sy, oy))
        else:
            key = (sx, ox, sy, oy, x0, x1, y0, y1, self.content_key())
            if self._calls is None or self._stale or key != self._key or self.host.layout.rows is not self._rows:
                rec = Calls()
                self.draws += 1
                self.draw(rec, Frame(self.host, x0, x1, y0, y1, sx, ox, sy, oy))
                self._calls, self._key, self._rows, self._stale = rec, key, self.host.layout.rows, False
                self._replayed, self._img = 0, None
            # copies only onto the raster engine: an OpenGL viewport rasterizes the calls itself
            # (not as the raster engine draws the image), so there the layer is always replayed
            if self.keep == "image" and self._replayed and p.paintEngine().type() == _RASTER:
                self._paint_image(p, x0, x1, y0, y1, sx, ox, sy, oy)
            else:
                self._calls.replay(p)
            self._replayed += 1
        p.restore()

    def _paint_image(self, p, x0, x1, y0, y1, sx, ox, sy, oy) -> None:
        # the image covers the view in whole device pixels and is copied at an integer offset,
        # so each pixel lands where the calls would have put it
        ya, yb = sorted((y0 * sy + oy, y1 * sy + oy))
        rx, ry = math.floor(x0 * sx + ox) - _PAD, math.floor(ya) - _PAD
        w, h = math.ceil(x1 * sx + ox) + _PAD - rx, math.ceil(yb) + _PAD - ry
        dev = p.device()
        dpr = dev.devicePixelRatio() if dev is not None else 1.0
        if w <= 0 or h <= 0 or w * h * dpr * dpr > _MAX_IMAGE_PX:
            self._calls.replay(p)
            return
        hints = p.renderHints()
        key = (rx, ry, w, h, dpr, hints)
        if self._img is None or key != self._img_key:
            img = QImage(QSize(math.ceil(w * dpr), math.ceil(h * dpr)), QImage.Format_ARGB32_Premultiplied)
            img.setDevicePixelRatio(dpr)
            img.fill(Qt.transparent)
            ip = QPainter(img)
            try:
                ip.setRenderHints(ip.renderHints(), False)
                ip.setRenderHints(hints, True)
                ip.setRenderHint(_AA, False)
                ip.setPen(_NO_PEN)
                ip.translate(-rx, -ry)
                self._calls.replay(ip)
            finally:
                ip.end()
            self._img, self._img_key = img, key
        p.drawImage(QPointF(rx, ry), self._img)
