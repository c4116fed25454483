"""Memory curves decimated to pixels and kept as an image (issue 28, item 5): the decimation keeps
every column's extremes, a pan copies the kept image (no redraw) and the curve is painted where
its values are; a zoom step stretches the image and the curves are drawn anew when it pauses. samples/ddp (two ranks' allocator counters), opened once."""

import numpy as np
import pytest
from conftest import SAMPLES

from gpuviewer.render.curves_item import decimate


def test_decimate_keeps_each_columns_min_and_max():
    rng = np.random.default_rng(7)
    x = np.sort(rng.uniform(0, 1000, 20_000))
    y = np.cumsum(rng.normal(0, 1, len(x)))
    x0, sx, width = 100.0, 0.9, 700  # 700 px from x=100, 0.9 px a unit
    px, py = decimate(x, y, x0, sx, width)
    assert len(px) <= 4 * (width + 2)  # at most four points a column, two edge columns
    inside = (x >= x0) & (x < x0 + width / sx)
    cols = np.floor((x[inside] - x0) * sx).astype(int)
    for c in np.unique(cols)[::37]:
        got = py[px == c + 0.5]
        want = y[inside][cols == c]
        assert got.min() == want.min() and got.max() == want.max()


def test_decimate_moves_an_outside_sample_along_its_line_to_the_edge():
    x, y = np.array([0.0, 500.0, 1000.0]), np.array([0.0, 10.0, 20.0])
    px, py = decimate(x, y, 300.0, 1.0, 100)  # columns 0-99 from x=300, one unit a pixel
    # the first point is where the line from (0, 0) to (500, 10) crosses column -1 (x=299)
    assert px[0] == -0.5 and py[0] == pytest.approx(299 * 10 / 500)
    # the last where the line from (500, 10) to (1000, 20) crosses column 100 (x=400)
    assert px[-1] == 100.5 and py[-1] == pytest.approx(400 * 10 / 500)


@pytest.fixture(scope="module")
def panel():
    from PySide6.QtWidgets import QApplication

    QApplication.instance() or QApplication([])
    from gpuviewer.session import open_session
    from gpuviewer.widgets.memory_panel import MemoryPanel

    trace = open_session([SAMPLES + "/ddp/ddp_rank0.json.gz"])  # one rank: its colour alone
    p = MemoryPanel()
    p.resize(1200, 260)
    p.set_trace(trace, trace.start_ns)
    p.show()
    QApplication.processEvents()
    yield p
    p.close()


def _blue_rows(img, x: int) -> list[int]:
    """Rows of column x painted in rank 0's colour (37, 99, 235)."""
    from PySide6.QtGui import QColor

    rows = []
    for y in range(img.height()):
        c = QColor(img.pixel(x, y))
        if abs(c.red() - 37) < 40 and abs(c.green() - 99) < 40 and c.blue() > 180:
            rows.append(y)
    return rows


def _curve_pixels(img) -> set[tuple[int, int]]:
    """(x, y) of every pixel in rank 0's colour."""
    import numpy as np
    from PySide6.QtGui import QImage

    im = img.convertToFormat(QImage.Format_RGB32)
    a = np.frombuffer(im.constBits(), np.uint8).reshape(im.height(), im.bytesPerLine() // 4, 4)[:, : im.width()]
    b, g, r = a[..., 0].astype(int), a[..., 1].astype(int), a[..., 2].astype(int)
    ys, xs = np.nonzero((abs(r - 37) < 40) & (abs(g - 99) < 40) & (b > 180))
    return set(zip(xs.tolist(), ys.tolist()))


def test_pan_copies_the_kept_image_and_draws_the_curve_where_its_values_are(panel):
    import pyqtgraph as pg
    from PySide6.QtWidgets import QApplication

    plot = panel.plots[0]
    vb = plot.getViewBox()
    s = next(s for s in panel.series if s["rank"] == 0 and s["name"] == "allocated")
    x0, x1 = float(s["x"][0]), float(s["x"][-1])
    panel.follow(x0 + (x1 - x0) * 0.3, x0 + (x1 - x0) * 0.5)
    QApplication.processEvents()
    item = panel.curve_items[0]
    item.sharpen()  # a 5x zoom from the whole session: drawn at once, nothing pending
    plot.grab()
    assert not item.redraw_pending
    before, stretched = item.redraws, item.stretched
    for k in range(6):  # pans of 2%, within the drawn span: copies, no redraw
        (a, b), _ = vb.viewRange()
        d = (b - a) * 0.02 * (1 if k % 2 == 0 else -1)
        panel.follow(a + d, b + d)
        QApplication.processEvents()
        img = plot.grab().toImage()
    assert item.redraws == before and item.stretched == stretched
    # where the curves are painted: at sampled columns the blue pixels lie at the values of the
    # samples drawn in that column (and the lines into it), within 3 px
    checked = 0
    (a, b), (lo, hi) = vb.viewRange()
    for frac in np.linspace(0.05, 0.95, 10):
        xv = a + (b - a) * frac
        col = plot.mapFromScene(vb.mapViewToScene(pg.Point(xv, 0))).x()
        rows = _blue_rows(img, col)
        if not rows:
            continue
        near = []
        for ser in panel.series:  # allocated (solid) and reserved (dashed), both in rank 0's colour
            k = int(np.searchsorted(ser["x"], xv)) - 1
            vals = ser["y"][max(k - 1, 0) : k + 3]  # the samples drawn in this column and around it
            near.append([plot.mapFromScene(vb.mapViewToScene(pg.Point(xv, v))).y() for v in vals])
        alloc = near[[x["name"] for x in panel.series].index("allocated")]
        assert any(min(alloc) - 3 <= r <= max(alloc) + 3 for r in rows), (col, rows, alloc)
        # nothing blue elsewhere but a step's peak marker (7 px above its point)
        lo_y, hi_y = min(min(n) for n in near), max(max(n) for n in near)
        assert all(lo_y - 9 <= r <= hi_y + 3 for r in rows), (col, rows, near)
        checked += 1
    assert checked >= 5
    # the copied image is what the curves drawn directly (a vector painter: no image) give, to a
    # pixel: every curve pixel of one is within a column of a curve pixel of the other
    from PySide6.QtCore import Qt
    from PySide6.QtGui import QImage, QPainter, QPicture

    pic = QPicture()
    pp = QPainter(pic)
    plot.render(pp)
    pp.end()
    fresh = QImage(img.size(), QImage.Format_RGB32)
    fresh.fill(Qt.white)
    pp = QPainter(fresh)
    pic.play(pp)
    pp.end()
    assert item.redraws == before  # drawn directly, the kept image untouched
    a_px, b_px = _curve_pixels(img), _curve_pixels(fresh)
    assert len(a_px) > 500
    for one, other in ((a_px, b_px), (b_px, a_px)):
        near = sum(1 for (x, y) in one if (x - 1, y) in other or (x, y) in other or (x + 1, y) in other)
        assert near >= 0.98 * len(one)
    # a zoom step (1.25x) stretches the kept image (no redraw) and the curves are drawn anew,
    # once, when the zoom pauses (the timer calls sharpen())
    (a, b), _ = vb.viewRange()
    panel.follow(a + (b - a) * 0.1, b - (b - a) * 0.1)
    QApplication.processEvents()
    plot.grab()
    assert item.redraws == before and item.stretched > stretched and item.redraw_pending
    item.sharpen()
    QApplication.processEvents()
    plot.grab()
    assert item.redraws == before + 1 and not item.redraw_pending
    # the sharp image is the curves drawn directly again (the stretched one is gone)
    sharp = _curve_pixels(plot.grab().toImage())
    pic = QPicture()
    pp = QPainter(pic)
    plot.render(pp)
    pp.end()
    fresh.fill(Qt.white)
    pp = QPainter(fresh)
    pic.play(pp)
    pp.end()
    direct = _curve_pixels(fresh)
    assert len(sharp) > 300
    for one, other in ((sharp, direct), (direct, sharp)):
        near = sum(1 for (x, y) in one if (x - 1, y) in other or (x, y) in other or (x + 1, y) in other)
        assert near >= 0.98 * len(one)
    # a zoom out past the span the image holds (three views) draws at once, and so does a zoom
    # in of more than 2x (a stretched image that coarse is not shown)
    (a, b), _ = vb.viewRange()
    panel.follow(a - 2 * (b - a), b + 2 * (b - a))
    QApplication.processEvents()
    plot.grab()
    assert item.redraws == before + 2 and not item.redraw_pending
    (a, b), _ = vb.viewRange()
    panel.follow(a + (b - a) * 0.3, b - (b - a) * 0.3)
    QApplication.processEvents()
    plot.grab()
    assert item.redraws == before + 3 and not item.redraw_pending
