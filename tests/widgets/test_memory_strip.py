"""The memory strip readable on a 1366x768 laptop and a 2560x1440 screen (issue 28): nothing
drawn over the curves but a step's peak label; the key (solid / dashed) is a line above the plot,
clear of its data area; the y axis' labels (GB, the device's capacity as a mark) and the peak
labels never overlap one another and stay inside their axis or view, measured from the items'
own text extents (QFontMetrics, bounding rects) in real windows, offscreen. samples/ddp (two
ranks overlaid) and kineto/memory_pressure (one rank near its capacity), each window opened once."""

import gzip
import json
import os

import pytest
from conftest import SAMPLES, trace_path
from PySide6.QtCore import QRect

SIZES = [(1366, 768), (2560, 1440)]


def _capacity_gb(path: str) -> float:
    """The device's memory from the trace file itself (Kineto's deviceProperties)."""
    with gzip.open(path) as f:
        props = json.load(f)["deviceProperties"]
    return props[0]["totalGlobalMem"] / 1e9


@pytest.fixture(
    scope="module",
    params=[(s, t) for s in SIZES for t in ("ddp", "pressure")],
    ids=lambda p: f"{p[0][0]}x{p[0][1]}-{p[1]}",
)
def window(request, qapp, tmp_path_factory):
    from PySide6.QtCore import QSettings

    from gpuviewer.widgets.main_window import MainWindow

    size, which = request.param
    path = os.path.join(SAMPLES, "ddp") if which == "ddp" else trace_path("kineto", "memory_pressure.json.gz")
    w = MainWindow(QSettings(str(tmp_path_factory.mktemp("strip") / "s.ini"), QSettings.IniFormat))
    w.quiet_errors = True
    w.controller.block_analysis = True
    w.resize(*size)
    w.show()
    assert w.open_paths([path], block=True)
    w.memory_dock.show()
    w.memory_dock.raise_()  # a tab on the laptop: brought to the front
    for _ in range(3):
        qapp.processEvents()
    yield w, which, path
    w.close()
    w.deleteLater()
    qapp.processEvents()


def _in_panel(panel, widget, rect: QRect) -> QRect:
    """A rect in `widget`'s coordinates, in the panel's."""
    return QRect(widget.mapTo(panel, rect.topLeft()), rect.size())


def _check(panel, qapp) -> int:
    """Every check on the panel as it is; returns how many labels were measured."""
    from PySide6.QtGui import QFontMetrics

    qapp.processEvents()
    measured = 0
    key = QRect(panel.key.mapTo(panel, panel.key.rect().topLeft()), panel.key.size())
    assert panel.key.text() == "solid: allocated, dashed: reserved"
    # the key whole: as wide as its text needs
    assert panel.key.width() >= QFontMetrics(panel.key.font()).horizontalAdvance(panel.key.text())
    for plot in panel.plots:
        assert plot.plotItem.legend is None  # no legend over the curves
        vb = plot.getViewBox()
        data = _in_panel(panel, plot, plot.mapFromScene(vb.sceneBoundingRect()).boundingRect())
        assert data.height() >= 15 and not key.intersects(data), (key, data)
        axis = plot.getAxis("left")
        rects = axis.label_rects()
        h = axis.geometry().height()
        fm = QFontMetrics(axis.style["tickFont"])
        for k, (top, bottom, text) in enumerate(rects):
            assert 0 <= top and bottom <= h, (top, bottom, h, text)
            for top2, bottom2, text2 in rects[k + 1 :]:
                assert bottom <= top2 or bottom2 <= top, (text, text2, rects)
            measured += 1
        # the labels drawn are elided to the axis' width
        for text in axis.tickStrings([v for v, _ in axis.chosen(*vb.viewRange()[1], h)], 1.0, 1.0):
            assert fm.horizontalAdvance(text) <= axis.width()
        view = vb.sceneBoundingRect()
        labels = [lab for pw, lab in panel.peak_labels if pw is plot and lab.isVisible()]
        for k, lab in enumerate(labels):
            r = lab.mapRectToScene(lab.boundingRect())
            assert view.contains(r), (r, view)
            for other in labels[k + 1 :]:
                assert not r.intersects(other.mapRectToScene(other.boundingRect()))
            measured += 1
    return measured


def test_strip_key_axis_and_labels_never_overlap(window, qapp):
    w, which, path = window
    panel = w.memory
    assert panel.plots and panel.isVisible()
    assert _check(panel, qapp) >= 1
    if which == "pressure":
        # the capacity, from the file, is a mark on the axis, and the only rank's peak is labelled
        cap = _capacity_gb(path)
        texts = [t for p in panel.plots for _, _, t in p.getAxis("left").label_rects()]
        assert any(t.endswith(f"{cap:.1f} GB") for t in texts), texts
    # pans and zooms move the peak labels: still inside, still apart
    for f in (4.0, 0.5, 2.0):
        w.timeline.zoom(f)
        _check(panel, qapp)
        w.timeline.pan(0.3)
        _check(panel, qapp)
    panel.multiples.setChecked(True)  # a plot per rank, each with its peak label
    try:
        assert _check(panel, qapp) >= 1
    finally:
        panel.multiples.setChecked(False)
        qapp.processEvents()


def test_the_headroom_finding_shows_the_curve_over_the_steps_with_the_peak_marked(qapp, tmp_path):
    """Choosing memory_pressure's headroom finding at 1366x768 brings the Memory tab in front and
    the profiled steps into view, the moment of the peak highlighted: it zoomed to 2 ms of kernels
    and left the curve behind the Findings tab (an audit of the window). The steps and the peak
    from the raw file: its ProfilerStep ranges and its largest 'Total Allocated'."""
    from conftest import opened_window, raw_events

    path = trace_path("kineto", "memory_pressure.json.gz")
    ev = raw_events(path)
    steps = [e for e in ev if e.get("ph") == "X" and str(e.get("name", "")).startswith("ProfilerStep#")]
    mem = [
        e
        for e in ev
        if e.get("name") == "[memory]"
        and "Total Allocated" in (e.get("args") or {})
        and e["args"].get("Device Type") == 1
    ]  # the GPU's (Device Type 1; 0 is the host's)
    peak = max(mem, key=lambda e: e["args"]["Total Allocated"])
    s0 = min(e["ts"] for e in steps)
    span_us = max(e["ts"] + e["dur"] for e in steps) - s0
    w = opened_window(qapp, tmp_path, [path])
    try:
        f = next(x for x in w.findings.findings if x.rule == "memory_headroom")
        assert w.memory_dock.visibleRegion().isEmpty()  # a tab behind Findings on a laptop
        w.show_finding(f)
        for _ in range(3):
            qapp.processEvents()
        assert not w.memory_dock.visibleRegion().isEmpty()  # in front
        a, b = w.session.view.range
        first = min(st.start for st in w.trace.steps if st.rank == 0)
        assert a <= first and b - a >= span_us * 1000 * 0.999  # every profiled step in view
        lo, hi, ranks = w.session.view.highlight
        t_peak = first + round((peak["ts"] - s0) * 1000)
        assert ranks == {0} and lo <= t_peak <= hi, (lo, t_peak, hi)
        # the y axis from the data: the raw file's lowest and highest allocation both inside it,
        # the step's rise (3.6 GB over 129.5 held) a visible part of the height, not 2%
        (plot,) = w.memory.plots
        y0, y1 = plot.getViewBox().viewRange()[1]
        # (the samples inside the profiled steps: the capture begins at 0 GB before the model loads)
        inside = [e for e in mem if s0 <= e["ts"] <= s0 + span_us]
        low = min(e["args"]["Total Allocated"] for e in inside) / 1e9
        high = peak["args"]["Total Allocated"] / 1e9
        assert w.memory.from_data.isChecked() and 0 < y0 <= low and high <= y1
        assert (high - low) / (y1 - y0) > 0.1, (low, high, y0, y1)
    finally:
        w.close()
