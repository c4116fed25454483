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
