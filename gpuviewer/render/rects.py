"""A numpy-backed QRectF array drawn with one QPainter.drawRects call.

An (n, 4) float64 array has the memory layout of QRectF[n] (x, y, w, h as qreal). Wrapping its
address as a QRectF* binds to the C++ overload drawRects(const QRectF*, int): no Python object
per rectangle, no copy. (pyqtgraph uses the same trick internally; this is our own adapter.)
"""

from __future__ import annotations

import numpy as np
import shiboken6
from PySide6.QtCore import QRectF
from PySide6.QtGui import QPainter


class RectBuffer:
    def __init__(self) -> None:
        self.array = np.empty((0, 4), np.float64)

    def fill(self, x: np.ndarray, y: np.ndarray, w: np.ndarray, h: np.ndarray) -> int:
        n = len(x)
        if self.array.shape[0] < n:
            self.array = np.empty((max(n, 2 * self.array.shape[0]), 4), np.float64)
        a = self.array
        a[:n, 0] = x
        a[:n, 1] = y
        a[:n, 2] = w
        a[:n, 3] = h
        return n

    def draw(self, painter: QPainter, n: int) -> None:
        if n <= 0:
            return
        if not isinstance(painter, QPainter):  # a recorder (render/layer.py): it keeps a copy,
            painter.draw_rect_array(self.array[:n].copy())  # as the next fill overwrites ours
            return
        ptr = shiboken6.wrapInstance(self.array.ctypes.data, QRectF)
        painter.drawRects(ptr, n)
