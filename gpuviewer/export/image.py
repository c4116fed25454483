"""A widget as a PNG or SVG file, or as a PNG data URI for reports."""
from __future__ import annotations

import base64
import os


def save_widget(widget, out: str, scale: float = 1.0) -> bool:
    if out.lower().endswith(".svg"):
        from PySide6.QtCore import QPoint, QRect, QSize
        from PySide6.QtGui import QPainter
        from PySide6.QtSvg import QSvgGenerator
        gen = QSvgGenerator()
        gen.setFileName(out)
        gen.setSize(QSize(widget.width(), widget.height()))
        gen.setViewBox(QRect(0, 0, widget.width(), widget.height()))
        gen.setTitle("gpuviewer")
        p = QPainter(gen)
        try:
            widget.render(p, QPoint(0, 0))
        finally:
            p.end()
        return os.path.exists(out)
    img = widget.grab()
    if scale != 1.0:
        from PySide6.QtCore import Qt
        img = img.scaled(int(img.width() * scale), int(img.height() * scale), Qt.KeepAspectRatio,
                         Qt.SmoothTransformation)
    return img.save(out)


def png_data_uri(widget) -> str:
    from PySide6.QtCore import QBuffer, QByteArray, QIODevice
    from PySide6.QtGui import QImage
    # one pixel format whether the widget is a top-level (a bare view: no alpha) or a child
    # (alpha): the same picture is the same PNG
    img = widget.grab().toImage().convertToFormat(QImage.Format_ARGB32)
    ba = QByteArray()
    buf = QBuffer(ba)
    buf.open(QIODevice.WriteOnly)
    img.save(buf, "PNG")
    return "data:image/png;base64," + base64.b64encode(bytes(ba)).decode()
