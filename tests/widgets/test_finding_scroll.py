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


def test_a_late_ranks_finding_shows_the_wait_beside_its_cause(qtbot, tmp_path):
    """nsys_ddp_big's top finding, rank 1's 50 ms sleep in step 6: the sleep was selected, and
    rank 0's NCCL lane, where the 'held back' is, stayed out of view even at 2560x1440 (a review).
    The waiting rank's longest NCCL kernel in the finding's range, from the trace's own kernels,
    is now brought into view beside the cause where both fit: here from a scroll that shows the
    sleep near the top and rank 0 above it, out of sight."""
    import numpy as np
    from conftest import trace_path
    from PySide6.QtWidgets import QApplication

    from gpuviewer.model.categories import Cat

    # tall enough for both (the offscreen platform's 1440 px leave them 50.2 rows apart in 50)
    w = make_window(qtbot, tmp_path, block_analysis=True, size=(2560, 1600))
    assert w.open_paths([trace_path("nsys", "nsys_ddp_big.sqlite")], block=True)
    QApplication.processEvents()
    fs = w.findings.findings
    k = next(j for j, f in enumerate(fs) if f.rule == "straggler" and f.step is not None)
    f = fs[k]
    w.findings.choose(k)
    QApplication.processEvents()
    tv, t = w.timeline, w.trace
    c = t.columns
    i = w.session.view.selected
    assert t.name_of(i) == "clock_nanosleep"
    waiting = [r for r in f.metrics["waiting_ranks"] if r != f.metrics["late_rank"]]
    mine = np.flatnonzero(
        np.isin(np.array([ln.rank for ln in t.lanes])[np.asarray(c["lane"])], waiting)
        & (np.asarray(c["cat"]) == Cat.COMM_KERNEL)
        & (np.asarray(c["start"]) < f.end_ns)
        & (np.asarray(c["start"]) + np.asarray(c["dur"]) > f.start_ns)
    )
    j = int(mine[np.argmax(np.asarray(c["dur"])[mine])])
    assert int(c["dur"][j]) > 40_000_000  # the all-reduce waiting through the sleep

    def both_in_view():
        y0, page = tv.scroll.value() / 10.0, tv._rows_visible()
        return all(y0 <= tv.event_rows(ev)[0] and tv.event_rows(ev)[1] <= y0 + page for ev in (i, j))

    assert both_in_view()
    # the scroll itself, where the page is shorter than the lanes: two events that fit are both
    # brought into view from a scroll that hid the upper one; two that do not fit move nothing
    w.resize(1366, 768)
    QApplication.processEvents()
    page = tv._rows_visible()
    a_i = tv.event_rows(i)[0]
    near = next(
        int(e)
        for ln in range(len(t.lanes))
        if (r := tv.layout_model.lane_row(ln)) is not None and a_i - page + 4 < r.y < a_i - 6
        for e in q_events(t, ln)[:1]
    )
    tv.scroll.setValue(int((a_i - 2) * 10))
    QApplication.processEvents()
    y0 = tv.scroll.value() / 10.0
    assert tv.event_rows(near)[0] < y0  # hidden above
    assert tv.scroll_to_events(i, near)
    y0 = tv.scroll.value() / 10.0
    for ev in (i, near):
        a, b = tv.event_rows(ev)
        assert y0 <= a and b <= y0 + page, (ev, a, b, y0, page)
    before = tv.scroll.value()
    assert tv.event_rows(i)[1] - tv.event_rows(j)[0] > page  # the sleep and the wait: too far apart here
    assert not tv.scroll_to_events(i, j) and tv.scroll.value() == before


def q_events(trace, lane):
    from gpuviewer.model import queries as q

    return q.events_in_range(trace, lane, trace.start_ns, trace.end_ns)
