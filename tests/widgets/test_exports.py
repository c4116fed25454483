"""Exports (issue 28, item 8), through the real command line: `screenshot` pictures the timeline
alone by default (no search bar, no docks) and the whole window with --whole-window; the SVG
rasterised by QSvgRenderer is the PNG within a small pixel tolerance, also where the plot draws
past its left edge (a step begun before the view: its line and label must not reach the label
column); reports list each finding's symptoms; files follow the user's umask."""
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
    return a[:, :im.width(), :3].astype(int)


@pytest.fixture(scope="module")
def shots(tmp_path_factory):
    d = tmp_path_factory.mktemp("shots")
    out = {}
    for name, extra in (("t.png", []), ("t.svg", []), ("w.svg", ["--whole-window"])):
        r = run_cli("screenshot", DDP, "-o", str(d / name), "--window", WINDOW, "--size", "1400x800", *extra)
        assert r.returncode == 0 and r.stderr == "", r.stderr
        out[name] = d / name
    return out


def test_svg_rasterised_is_the_png(shots):
    from PySide6.QtCore import Qt
    from PySide6.QtGui import QImage, QPainter
    from PySide6.QtSvg import QSvgRenderer
    from PySide6.QtWidgets import QApplication
    QApplication.instance() or QApplication([])
    png = QImage(str(shots["t.png"]))
    r = QSvgRenderer(str(shots["t.svg"]))
    assert (r.defaultSize().width(), r.defaultSize().height()) == png_size(shots["t.png"]) == (1400, 800)
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
    cols = 1400 // 6 - 4
    assert (diff[:, :cols] > 64).mean() < 0.002, (diff[:, :cols] > 64).mean()
    # column by column up to a quarter of the width (the label column, the splitter, the plot's
    # first columns): slices begun before the view spilled 2 px over the splitter, 4-6% of
    # those columns; text and dashes leave at most about 1% of a column
    per_col = (diff[:, :1400 // 4] > 64).mean(axis=0)
    assert per_col.max() < 0.03, (per_col.argmax(), per_col.max())


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
        p = subprocess.run([sys.executable, "-m", "gpuviewer", *args], env=env, capture_output=True, text=True,
                           preexec_fn=lambda: os.umask(0o027), timeout=600)
        assert p.returncode == 0, p.stderr
    assert stat.S_IMODE(out.stat().st_mode) == 0o640 and stat.S_IMODE(svg.stat().st_mode) == 0o640
    html = out.read_text()
    a = json.loads(run_cli("analyze", DDP, "--json").stdout)
    with_children = [f for f in a["findings"] if f["children"]]
    assert with_children  # samples/ddp: the launch-bound cause has its straggler symptoms
    from gpuviewer.model.fmt import esc
    for f in with_children:
        at = html.index(esc(f["title"]))
        block = html[at:html.index("<img", at)]  # the finding's text, before its image
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
