"""The time axis above the lanes draws its line at its own edge, where the lanes begin: pyqtgraph's
boundingRect reaches 5 px into the plot (the tick length), and the line drawn there crossed the
first row's text (a collapsed rank 0's step names; an audit of the window). Rendered offscreen:
the axis' line, a row of the line colour across the plot, lies above the view box's first pixel
row, and the one below the lanes under its last."""

from conftest import trace_path
from PySide6.QtGui import QColor, QImage
from PySide6.QtWidgets import QWidget


def test_the_axis_lines_are_at_the_lanes_edges(qtbot):
    from gpuviewer.io.session import load
    from gpuviewer.render import theme
    from gpuviewer.widgets.timeline_view import TimelineView

    v = TimelineView()
    qtbot.addWidget(v)
    v.resize(1000, 700)  # tall enough for the axis under the lanes too
    v.set_trace(load([trace_path("nsys", "nsys_ddp.sqlite")]))
    v.show()
    qtbot.waitExposed(v)
    img = QImage(v.plot.size(), QImage.Format_ARGB32)
    QWidget.render(v.plot, img)
    line = QColor(theme.current().line).rgb()
    box = v.vb.mapRectToDevice(v.vb.boundingRect()).toRect()  # the lanes, in the plot's pixels
    x0, x1 = box.left() + 20, box.right() - 20

    def is_line(y):
        return sum(img.pixel(x, y) == line for x in range(x0, x1, 7)) >= 0.9 * len(range(x0, x1, 7))

    rows = [y for y in range(img.height()) if is_line(y)]
    top = [y for y in rows if y < box.top() + 10]
    bottom = [y for y in rows if y > box.bottom() - 10]
    assert top and max(top) <= box.top(), (top, box)
    assert bottom and min(bottom) >= box.bottom(), (bottom, box)
