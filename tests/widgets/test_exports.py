"""Exports (issue 28, item 8), through the real command line: `screenshot` pictures the timeline
alone by default (no search bar, no docks) and the whole window with --whole-window; the SVG
rasterised by QSvgRenderer is the PNG within a small pixel tolerance, also where the plot draws
past its left edge (a step begun before the view: its line and label must not reach the label
column) and with an area selected in the window (File > Export image: the box is drawn in both,
where the window shows it); reports list each finding's symptoms; files follow the user's umask."""

import json
import os
import stat
import subprocess
import sys

import numpy as np
import pytest
from conftest import ROOT, SAMPLES, png_size, run_cli

DDP = os.path.join(SAMPLES, "ddp")
# step 3 of samples/ddp starts near 51 ms and runs past 90 ms: from 55 ms its line and label
# lie left of the view, where the label column is
WINDOW = "55:100"


def _pixels(img) -> np.ndarray:
    from PySide6.QtGui import QImage

    im = img.convertToFormat(QImage.Format_RGB32)
    a = np.frombuffer(im.constBits(), np.uint8).reshape(im.height(), im.bytesPerLine() // 4, 4)
    return a[:, : im.width(), :3].astype(int)


@pytest.fixture(scope="module")
def shots(tmp_path_factory):
    d = tmp_path_factory.mktemp("shots")
    out = {}
    for name, extra in (("t.png", []), ("t.svg", []), ("w.svg", ["--whole-window"])):
        r = run_cli("screenshot", DDP, "-o", str(d / name), "--window", WINDOW, "--size", "1400x800", *extra)
        assert r.returncode == 0 and r.stderr == "", r.stderr
        out[name] = d / name
    return out


# the area selection's outline (render/overlay_item.AREA_PEN: rgb 37, 99, 235), looked for in the
# pictures, in _pixels' byte order (blue, green, red)
AREA_BGR = (235, 99, 37)


def _area_outline(a: np.ndarray) -> tuple[int, int, int, int] | None:
    """Bounding box (left, top, right, bottom) of the pixels in the area outline's colour."""
    ys, xs = np.nonzero((np.abs(a - np.array(AREA_BGR)) <= 6).all(axis=2))
    return (int(xs.min()), int(ys.min()), int(xs.max()), int(ys.max())) if len(xs) else None


def _edge_ink(a: np.ndarray, box) -> list[float]:
    """Blue over red summed in a band 2 px either side of each edge of box (left, right, top,
    bottom), corners left out."""
    left, top, right, bottom = box
    bands = (
        a[top + 3 : bottom - 2, left - 2 : left + 3],
        a[top + 3 : bottom - 2, right - 2 : right + 3],
        a[top - 2 : top + 3, left + 3 : right - 2],
        a[bottom - 2 : bottom + 3, left + 3 : right - 2],
    )
    return [float(np.clip(x[..., 0] - x[..., 2], 0, None).sum()) for x in bands]


@pytest.fixture(scope="module")
def area_shots(tmp_path_factory):
    """The window's File > Export image of its timeline, PNG and SVG, with an area selected by
    the handler a Shift+drag ends in (time from 60 to 80 ms, over three lanes of rank 0) and the
    lanes scrolled down a row; and where the window shows the box (its view box mapping)."""
    from PySide6.QtCore import QPointF, QSettings
    from PySide6.QtWidgets import QApplication

    app = QApplication.instance() or QApplication([])
    from gpuviewer.widgets.main_window import MainWindow

    d = tmp_path_factory.mktemp("area")
    w = MainWindow(QSettings(str(d / "s.ini"), QSettings.IniFormat))
    w.quiet_errors = True
    w.controller.block_analysis = True
    w.resize(1400, 900)
    assert w.open_paths([DDP], block=True)
    w.show()
    app.processEvents()
    tv = w.timeline
    o = w.trace.start_ns
    tv.set_range(o + 55_000_000, o + 100_000_000)
    tv.scroll.setValue(10)  # a row down: the picture keeps the window's scroll
    app.processEvents()
    rows = tv.layout_model.rows
    first = next(k for k, r in enumerate(rows) if r.kind == "lane" and r.rank == 0)
    lanes = rows[first : first + 3]  # three lanes one after the other: one box over them
    assert [r.kind for r in lanes] == ["lane"] * 3 and {r.rank for r in lanes} == {0}
    t0, t1 = o + 60_000_000, o + 80_000_000
    tv.select_area(t0, t1, lanes[0].y + 0.3, lanes[-1].y + 0.6)  # a drag inside the three rows
    app.processEvents()

    # where the window shows the box: the rows' and times' device pixels in the labels-and-lanes
    # part of the timeline (a picture is that part, without the search row and scroll bar)
    def at(x_ns, y_rows):
        pt = tv.plot.mapFromScene(tv.vb.mapViewToScene(QPointF(x_ns - o, y_rows)))
        q = tv.plot.mapTo(tv.split, pt)
        return q.x(), q.y()

    x0, y0 = at(t0, lanes[0].y)
    x1, y1 = at(t1, lanes[-1].y + lanes[-1].h)
    shown = tv.split.grab().toImage()
    out = {"want": (x0, y0, x1, y1), "shown": shown, "size": (tv.split.width(), tv.split.height())}
    for name in ("a.png", "a.svg"):
        assert w.export_image(str(d / name))
        out[name] = d / name
    w.close()
    w.deleteLater()
    app.processEvents()
    return out


def test_area_selection_is_drawn_where_the_window_shows_it(area_shots, shots):
    from PySide6.QtGui import QImage

    x0, y0, x1, y1 = area_shots["want"]
    png = _pixels(QImage(str(area_shots["a.png"])))
    shown = _pixels(area_shots["shown"])
    assert _area_outline(_pixels(QImage(str(shots["t.png"])))) is None  # the colour is the box's alone
    for box in (_area_outline(png), _area_outline(shown)):
        assert box is not None
        left, top, right, bottom = box
        assert abs(left - x0) <= 1.5 and abs(right - x1) <= 1.5, (box, area_shots["want"])
        assert abs(top - y0) <= 1.5 and abs(bottom - y1) <= 1.5, (box, area_shots["want"])
    # the PNG is the window's picture of those pixels: inside the box too (translucent fill)
    left, top, right, bottom = _area_outline(png)
    diff = np.abs(png[top : bottom + 1, left : right + 1] - shown[top : bottom + 1, left : right + 1]).max(axis=2)
    assert (diff > 64).mean() < 0.01


@pytest.mark.parametrize("pair", [("t.png", "t.svg"), ("a.png", "a.svg")], ids=["cli", "area"])
def test_svg_rasterised_is_the_png(shots, area_shots, pair):
    from PySide6.QtCore import Qt
    from PySide6.QtGui import QImage, QPainter
    from PySide6.QtSvg import QSvgRenderer
    from PySide6.QtWidgets import QApplication

    QApplication.instance() or QApplication([])
    files = shots if pair[0] == "t.png" else area_shots
    png = QImage(str(files[pair[0]]))
    r = QSvgRenderer(str(files[pair[1]]))
    size = (1400, 800) if pair[0] == "t.png" else area_shots["size"]
    assert (r.defaultSize().width(), r.defaultSize().height()) == png_size(files[pair[0]]) == size
    width = size[0]
    img = QImage(png.size(), QImage.Format_RGB32)
    img.fill(Qt.white)
    p = QPainter(img)
    r.render(p)
    p.end()
    a, b = _pixels(png), _pixels(img)
    diff = np.abs(a - b).max(axis=2)
    # text and the bottom edge of a rectangle rasterise a little differently; nothing moves
    assert diff.mean() < 2.0, diff.mean()
    assert (diff > 64).mean() < 0.01, (diff > 64).mean()
    # the label column (at least a sixth of the width) is the same to a few stray text pixels: the
    # step line and label left of the view (and slices begun before it) stay out of it
    cols = width // 6 - 4
    assert (diff[:, :cols] > 64).mean() < 0.002, (diff[:, :cols] > 64).mean()
    # column by column up to a quarter of the width (the label column, the splitter, the plot's
    # first columns): slices begun before the view spilled 2 px over the splitter, 4-6% of
    # those columns; text and dashes leave at most about 1% of a column
    per_col = (diff[:, : width // 4] > 64).mean(axis=0)
    box = _area_outline(a) if pair[0] == "a.png" else None
    if box is not None:  # its vertical edges: antialiased in the SVG, compared below by their ink
        for x in (box[0], box[2]):
            per_col[max(0, x - 2) : x + 3] = 0
    assert per_col.max() < 0.03, (per_col.argmax(), per_col.max())
    if pair[0] == "a.png":  # the area box's outline in both, at the same place: as much blue ink
        box = _area_outline(a)  # along each edge (the SVG's is antialiased: two half-blue columns)
        assert box is not None
        for ink_png, ink_svg in zip(_edge_ink(a, box), _edge_ink(b, box)):
            assert 0.75 * ink_png <= ink_svg <= 1.33 * ink_png, (box, _edge_ink(a, box), _edge_ink(b, box))


def test_timeline_only_by_default_the_window_with_a_flag(shots):
    t = shots["t.svg"].read_text()
    w = shots["w.svg"].read_text()
    assert "Rank 0" in t and "Rank 1" in t
    for part in ("Findings", "Search names", "Memory"):  # docks and the search bar: the window's only
        assert part not in t and part in w, part


def test_whole_window_and_timeline_only_together_are_refused(tmp_path):
    r = run_cli("screenshot", DDP, "-o", str(tmp_path / "x.png"), "--whole-window", "--timeline-only")
    assert r.returncode == 2 and "choose one" in r.stderr and "Traceback" not in r.stderr
    assert not (tmp_path / "x.png").exists()


def test_report_lists_each_findings_symptoms_and_follows_the_umask(tmp_path):
    env = dict(os.environ, QT_QPA_PLATFORM="offscreen", PYTHONPATH=ROOT)
    out = tmp_path / "r.html"
    svg = tmp_path / "s.svg"
    for args in (["report", DDP, "-o", str(out)], ["screenshot", DDP, "-o", str(svg)]):
        p = subprocess.run(
            [sys.executable, "-m", "gpuviewer", *args],
            env=env,
            capture_output=True,
            text=True,
            preexec_fn=lambda: os.umask(0o027),
            timeout=600,
        )
        assert p.returncode == 0, p.stderr
    assert stat.S_IMODE(out.stat().st_mode) == 0o640 and stat.S_IMODE(svg.stat().st_mode) == 0o640
    html = out.read_text()
    a = json.loads(run_cli("analyze", DDP, "--json").stdout)
    with_children = [f for f in a["findings"] if f["children"]]
    assert with_children  # samples/ddp: the launch-bound cause has its straggler symptoms
    from gpuviewer.model.fmt import esc

    for f in with_children:
        at = html.index(esc(f["title"]))
        block = html[at : html.index("<img", at)]  # the finding's text, before its image
        assert "Symptoms (" in block
        for c in f["children"]:
            assert esc(c["title"]) in block and c["rule"] in block


def test_report_images_have_no_search_or_scroll_bar():
    """A report's image is its bare view, whose lanes fill the picture."""
    from PySide6.QtWidgets import QApplication

    QApplication.instance() or QApplication([])
    from gpuviewer.session import Session
    from gpuviewer.widgets.offscreen import REPORT_VIEW_SIZE, bare_view, dispose

    s = Session.open([DDP])
    v = bare_view(s)
    try:
        assert (v.width(), v.height()) == REPORT_VIEW_SIZE
        assert not v.search.isVisible() and not v.scroll.isVisible()
        assert v.split.geometry() == v.rect()
    finally:
        dispose(v)
