"""The timeline: a container of layers that each draw one thing, stacked by zValue in one ViewBox.

  0 SlicesItem       headers, summary rows, slices and labels, collective waits  (slices_item)
  1 StepsItem        step lines and names                                         (steps_item)
  2 OverlayItem      a finding's highlight, search matches                        (overlay_item)
  2.5 CriticalPathItem each step's critical path, outlined on its lanes             (critical_path_item)
  3 SelectionItem    the selected event's box                                     (overlay_item)
  4 AnnotationsItem  notes, regions, arrows                                       (annotations_item)
  5 CursorItem       the memory cursor, the selection's flow arrows               (overlay_item)
  6 AreaItem         the area selection (Shift+drag)                              (overlay_item)

The order is the order the single item used to draw in, so the pixels are the same. A layer whose
state changes draws anew alone; the others put back what they drew (replayed painter calls or a
copied image, render/layer.py), so a new selection or cursor position does not redraw the slices.
TimelineItem owns what the layers share (trace, layout, origin, font) and keeps the attributes the
rest of the code sets on `timeline.item`, forwarding each to the layer that draws it (setting one
redraws that layer; update() repaints all, and only those whose state changed draw anew).
x is ns since the session origin; y is layout rows.
"""

from __future__ import annotations

import pyqtgraph as pg
from PySide6.QtCore import QRectF
from PySide6.QtGui import QFont, QFontMetrics

from ..model.layout import Layout
from ..model.trace import Trace
from .annotations_item import AnnotationsItem
from .critical_path_item import CriticalPathItem
from .overlay_item import AreaItem, CursorItem, OverlayItem, SelectionItem
from .slices_item import SlicesItem
from .steps_item import StepsItem


class _Forward:
    """item.<name> reads and sets <layer>.<name> (setting it redraws that layer only)."""

    def __init__(self, layer: str) -> None:
        self.layer = layer

    def __set_name__(self, owner, name: str) -> None:
        self.name = name

    def __get__(self, obj, owner=None):
        return self if obj is None else getattr(getattr(obj, self.layer), self.name)

    def __set__(self, obj, value) -> None:
        setattr(getattr(obj, self.layer), self.name, value)


class TimelineItem(pg.GraphicsObject):
    selected = _Forward("selection")
    match_mask = _Forward("overlay")
    highlight = _Forward("overlay")
    annotations = _Forward("notes")
    cursor_ns = _Forward("cursor_layer")
    flow_pairs = _Forward("cursor_layer")
    area = _Forward("area_layer")
    show_steps = _Forward("steps")
    critical_path = _Forward("critical")
    wait_idx = _Forward("slices")
    wait_end = _Forward("slices")
    last_rect_count = _Forward("slices")

    def __init__(self, trace: Trace, layout: Layout, origin: int) -> None:
        super().__init__()
        self.trace = trace
        self.layout = layout
        self.origin = origin
        self.span = max(1, trace.end_ns - origin)
        self.font = QFont()
        self.font.setPixelSize(11)
        self.fm = QFontMetrics(self.font)
        # a container: Qt never paints it, only its children
        self.setFlag(self.GraphicsItemFlag.ItemHasNoContents)
        self.slices = SlicesItem(self, 0)
        self.steps = StepsItem(self, 1)
        self.overlay = OverlayItem(self, 2)
        self.critical = CriticalPathItem(self, 2.5)
        self.selection = SelectionItem(self, 3)
        self.notes = AnnotationsItem(self, 4)
        self.cursor_layer = CursorItem(self, 5)
        self.area_layer = AreaItem(self, 6)
        self.layers = (
            self.slices,
            self.steps,
            self.overlay,
            self.critical,
            self.selection,
            self.notes,
            self.cursor_layer,
            self.area_layer,
        )
        self._visible = (None, None, None, [])  # y0, y1, the layout's rows, those visible there

    # -- pyqtgraph protocol ------------------------------------------------------------------
    def boundingRect(self) -> QRectF:
        return QRectF(0, 0, float(self.span), float(max(self.layout.height, 1.0)))

    def dataBounds(self, ax, frac=1.0, orthoRange=None):
        return (0, float(self.span)) if ax == 0 else (0, float(self.layout.height))

    def paint(self, p, opt, widget=None) -> None:
        pass  # ItemHasNoContents: the layers paint

    def update(self, *args) -> None:
        """Repaint every layer; those whose state and view did not change put back what they
        drew (callers set an attribute, then update(): that must not redraw the slices)."""
        super().update(*args)
        for layer in self.layers:
            layer.update(*args)

    def invalidate(self) -> None:
        """Redraw every layer (after changing what they read in place)."""
        for layer in self.layers:
            layer.invalidate()

    def relayout(self) -> None:
        self.prepareGeometryChange()
        for layer in self.layers:
            layer.prepareGeometryChange()
        self.invalidate()

    def visible_rows(self, y0: float, y1: float) -> list:
        """The layout's rows visible between y0 and y1; the layers drawn in one frame share them."""
        v = self._visible
        if v[0] != y0 or v[1] != y1 or v[2] is not self.layout.rows:
            v = self._visible = (y0, y1, self.layout.rows, self.layout.visible_rows(y0, y1))
        return v[3]

    # -- what the layers do, where the rest of the code asks the item -------------------------
    def set_comm_waits(self, per_kernel: dict) -> None:
        self.slices.set_comm_waits(per_kernel)

    def pick(self, x: float, y: float, tol_ns: float) -> int | None:
        return self.slices.pick(x, y, tol_ns)

    def hover_pick(self, x: float, y: float, tol_ns: float) -> tuple[int | None, bool]:
        return self.slices.hover_pick(x, y, tol_ns)
