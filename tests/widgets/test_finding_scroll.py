"""Choosing a low-utilization finding shows the GPU it is about. Its selection is what the host
did in the GPU's longest idle stretch (a sleep on ddp's rank 1), which a deep Python stack puts
~30 rows below the rank's GPU lanes: the view scrolled to that host event and the idle GPU, the
finding's subject, was out of sight (seen at 1366x768). The GPU's lanes now come first, the idle
stretch highlighted, and the status line says what is selected."""

from __future__ import annotations

import os
import shutil

from conftest import SAMPLES, make_window


def test_low_utilization_shows_the_idle_gpu_lanes(qtbot, tmp_path):
    from PySide6.QtWidgets import QApplication

    from gpuviewer.model.categories import LaneKind

    w = make_window(qtbot, tmp_path, block_analysis=True, size=(1366, 728))
    data = tmp_path / "ddp"
    shutil.copytree(os.path.join(SAMPLES, "ddp"), data)
    assert w.open_paths([str(data)], block=True)
    QApplication.processEvents()
    fs = w.findings.findings
    k = next(j for j, f in enumerate(fs) if f.rule == "low_gpu_utilization")
    w.findings.choose(k)
    QApplication.processEvents()
    tv = w.timeline
    i = w.session.view.selected
    lane = w.trace.lanes[int(w.trace.columns["lane"][i])]
    assert lane.kind not in (LaneKind.GPU, LaneKind.COMM)  # a host event is selected
    y0 = tv.scroll.value() / 10.0
    page = tv._rows_visible()
    gpu_rows = [
        r.y
        for r in tv.layout_model.rows
        if r.kind == "lane" and w.trace.lanes[r.lane].rank == lane.rank and w.trace.lanes[r.lane].kind == LaneKind.GPU
    ]
    assert gpu_rows and all(y0 <= y < y0 + page - 1 for y in gpu_rows), (y0, page, gpu_rows)
    assert w.trace.name_of(i) in w.statusBar().currentMessage()
