"""A widget as a PNG or SVG file, or as a PNG data URI for reports."""

from __future__ import annotations

import base64
import os


def save_widget(widget, out: str, scale: float = 1.0, guard: bool = False) -> bool:
    """The widget as PNG or SVG at `out`, written atomically (a temporary file beside it, renamed
    into place). guard: the command line's rule, never over a file gpuviewer did not write
    (io.outputs; OutputRefused); the window's save dialog has asked the user instead."""
    from ..session.files import SOFTWARE, check, write_path

    if guard:
        check(out)
    svg = out.lower().endswith(".svg")
    return write_path(
        out,
        lambda tmp: _save_svg(widget, tmp) if svg else _save_png(widget, tmp, scale, SOFTWARE),
        suffix=".svg" if svg else ".png",
        # again: the file may have appeared while the picture was drawn
        before_replace=(lambda: check(out)) if guard else None,
    )


def _save_svg(widget, path: str) -> bool:
    from PySide6.QtCore import QPoint, QRect, QSize
    from PySide6.QtGui import QPainter
    from PySide6.QtSvg import QSvgGenerator

    from ..session.files import SOFTWARE

    gen = QSvgGenerator()
    gen.setFileName(path)
    gen.setSize(QSize(widget.width(), widget.height()))
    gen.setViewBox(QRect(0, 0, widget.width(), widget.height()))
    gen.setTitle(SOFTWARE)
    p = QPainter(gen)
    try:
        widget.render(p, QPoint(0, 0))
        # an SVG keeps no widget's clip: what a plot draws past its edges (slices begun before the
        # view, every step's line and label) lands in the widgets beside it. Those the widget
        # names are painted again on top, as the screen shows them.
        for w in getattr(widget, "svg_on_top", ()):
            if w.isVisible():
                at = w.mapTo(widget, QPoint(0, 0))
                p.fillRect(QRect(at, w.size()), w.palette().window())  # a splitter handle paints no background
                w.render(p, at)
    finally:
        p.end()
    _size_in_pixels(path, widget.width(), widget.height())
    return os.path.getsize(path) > 0


def _size_in_pixels(path: str, w: int, h: int) -> None:
    """Qt writes the size in millimetres at 72 dpi (564 mm for 1600 px), which viewers turn
    into 1999 px at 90 dpi or 2133 at 96: say it in pixels, the PNG's size."""
    import re

    with open(path, "rb") as f:
        data = f.read()
    head, n = re.subn(
        rb'<svg width="[0-9.]+mm" height="[0-9.]+mm"', f'<svg width="{w}" height="{h}"'.encode(), data[:400], count=1
    )
    if n:
        with open(path, "wb") as f:
            f.write(head + data[400:])


def _save_png(widget, path: str, scale: float, software: str) -> bool:
    pix = widget.grab()
    if scale != 1.0:
        from PySide6.QtCore import Qt

        pix = pix.scaled(
            int(pix.width() * scale), int(pix.height() * scale), Qt.KeepAspectRatio, Qt.SmoothTransformation
        )
    img = pix.toImage()
    img.setText("Software", software)  # the mark that lets a later run replace it (io/outputs.py)
    return img.save(path, "PNG")


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
