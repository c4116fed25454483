"""Nothing the analysis fills in widens the window past a laptop's screen: a label that cannot
wrap (the overview's rank line, "... idle 10% (they add up to 119%: work ran on two streams at
once)") set the window's minimum width to 1487 px on samples/ddp, so a 1366-px laptop could not
show it whole. Offscreen main window, after its analysis has run."""

import os

import pytest
from conftest import SAMPLES, make_window, trace_path

LAPTOP_WIDTH = 1366


@pytest.mark.parametrize("path", [os.path.join(SAMPLES, "ddp"), "fsdp"])
def test_the_analysed_window_fits_a_laptop_screen(qtbot, tmp_path, path):
    if not os.path.isabs(path):
        path = trace_path("kineto", path)  # the longest rank line: its shares add up to 125%
    w = make_window(qtbot, tmp_path, size=(1200, 700))
    assert w.open_paths([path], block=True)
    qtbot.waitUntil(lambda: w.analysis is not None, timeout=120_000)
    qtbot.waitUntil(lambda: w.overview.util.text().strip() != "", timeout=10_000)  # set from the analysis
    assert w.minimumSizeHint().width() <= LAPTOP_WIDTH
    assert w.width() <= LAPTOP_WIDTH


def test_the_steps_bar_stays_inside_the_window_with_its_steps_digits(qtbot, tmp_path):
    """HTA's trace_filter numbers its steps 550-554: the 'go to step' box widened for three digits
    past the window's right edge at 1366 px, its arrows and the step count cut (a review). The bar
    in the menu's corner is placed again by its new width, wholly inside the window."""
    from conftest import compat_path, make_window
    from PySide6.QtCore import Qt
    from PySide6.QtWidgets import QApplication

    w = make_window(qtbot, tmp_path, block_analysis=True, size=(1366, 768))
    assert w.open_paths([compat_path("facebookresearch__HolisticTraceAnalysis", "trace_filter")], block=True)
    QApplication.processEvents()
    assert w.step_box.maximum() >= 550
    bar = w.menuBar().cornerWidget(Qt.TopRightCorner)
    right = bar.mapTo(w, bar.rect().topRight()).x()
    assert right < w.width(), (right, w.width())
    for child in (w.step_box, w.step_label):
        edge = child.mapTo(w, child.rect().topRight()).x()
        assert edge < w.width() and child.width() >= child.sizeHint().width(), (child, edge)
    assert w.step_label.text().strip().endswith("steps")
