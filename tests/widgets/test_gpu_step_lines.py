"""Step lines on the GPU rows are the steps' GPU windows (the analysis'), not the host's step
ranges: nsys_ddp's GPU runs behind its host, and rank 0's 62.6 ms all-reduce wait of step 6 lay
after the host's 'step 7' line on its GPU rows while the top finding said step 6 (an audit of the
window). A real window offscreen; the GPU windows from a separate `analyze --json`, the host steps
the window's (the export's NVTX 'step N' ranges); the picture read at the two lines' x."""

import json

import numpy as np
from conftest import make_window, run_cli_once, trace_path
from PySide6.QtCore import QPoint, QPointF

NSYS = trace_path("nsys", "nsys_ddp.sqlite")


def test_gpu_rows_draw_the_steps_gpu_windows(qtbot, tmp_path, qapp):
    w = make_window(qtbot, tmp_path, block_analysis=True, size=(1366, 768))
    assert w.open_paths([NSYS], block=True)
    qapp.processEvents()
    p = run_cli_once("analyze", NSYS, "--json")
    assert p.returncode == 0, p.stderr[-2000:]
    r0 = next(r for r in json.loads(p.stdout)["ranks"] if r["rank"] == 0)
    gpu = {s["step"]: s["start_ns"] for s in r0["steps"] if s["step"] is not None}
    layer = w.timeline.item.steps
    assert layer.gpu_starts[0] == sorted(gpu.values())
    # rank 0's host steps as the window has them (the export's NVTX 'step N' ranges)
    host = {st.step: st.start for st in w.trace.steps if st.rank == 0}
    g7, h7 = gpu[7], host[7]
    assert g7 - h7 > 20_000_000  # the GPU begins step 7 tens of ms after the host
    w.session.set_range(gpu[6] - 5_000_000, g7 + 20_000_000)
    qapp.processEvents()
    tv = w.timeline
    img = tv.grab().toImage().convertToFormat(tv.grab().toImage().Format.Format_RGB32)
    lanes = w.trace.lanes
    c = w.trace.columns

    def idle_near(lane: int) -> bool:  # no op of the lane within 2 ms of either time
        sl = w.trace.lane_slice(lane)
        st = np.asarray(c["start"][sl]).astype(np.int64)
        en = st + np.asarray(c["dur"][sl]).astype(np.int64)
        return not any(((st < t + 2_000_000) & (en > t - 2_000_000)).any() for t in (g7, h7))

    from gpuviewer.model.categories import GPU_LANE_KINDS

    row = next(
        r
        for r in tv.layout_model.rows
        if r.kind == "lane" and lanes[r.lane].rank == 0 and lanes[r.lane].kind in GPU_LANE_KINDS and idle_near(r.lane)
    )
    port = tv.vb.scene().views()[0].viewport()  # the view box's device coordinates, in the grab's

    def at(t: float, y: float) -> tuple[int, int]:
        d = tv.vb.mapViewToDevice(QPointF(t, y))
        q = port.mapTo(tv, QPoint(int(round(d.x())), int(round(d.y()))))
        return q.x(), q.y()

    y0, y1 = at(0.0, row.y)[1] + 1, at(0.0, row.y + row.h)[1] - 1
    a = np.frombuffer(img.constBits(), np.uint32).reshape(img.height(), img.bytesPerLine() // 4)

    def marked(t: int) -> int:
        """Pixels of the row at t's column (and either side) unlike the row 6 px to the right:
        a line drawn there (the lane idles around both times)."""
        x = at(float(t - tv.origin), 0.0)[0]
        col = a[y0:y1, x - 1 : x + 2] & 0xFFFFFF
        ref = (a[y0:y1, x + 6] & 0xFFFFFF)[:, None]
        return int((col != ref).sum())

    assert marked(g7) > 0  # the GPU's step 7 begins here on its GPU rows
    assert marked(h7) == 0  # the host's does not mark the GPU rows (its stream idles there)
