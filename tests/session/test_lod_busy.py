"""A level-of-detail run drawn as one bar carries the time its events cover (lod_runs_busy): the
window draws a run as faint as it is idle (launch_eager's stream, 23% busy, drew as one solid bar
at the opening zoom; an audit of the window). Checked against the raw file's kernels, fresh and
from the column cache, and on the picture."""

import gzip
import json

import numpy as np
from conftest import make_window, trace_path

from gpuviewer.io.session import load
from gpuviewer.model import queries as q
from gpuviewer.model.categories import LaneKind

EAGER = trace_path("whatif", "launch_eager.json.gz")


def _raw_kernel_us() -> float:
    with gzip.open(EAGER, "rt") as fh:
        ev = json.load(fh)["traceEvents"]
    return sum(e["dur"] for e in ev if e.get("ph") == "X" and e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset"))


def test_runs_carry_the_time_their_events_cover(tmp_path, monkeypatch):
    monkeypatch.setenv("GPUVIEWER_CACHE_DIR", str(tmp_path / "cache"))
    for k, use_cache in enumerate((False, True, True)):  # fresh, written to the cache, read from it
        t = load([EAGER], use_cache=use_cache)
        assert bool(t.metadata.get("from_cache")) == (k == 2)
        lanes = [i for i, ln in enumerate(t.lanes) if ln.kind == LaneKind.GPU]
        t0, t1 = t.start_ns, t.end_ns
        px = (t1 - t0) / 1100  # about the window's opening zoom
        busy = spans = runs = 0
        for lane in lanes:
            s, e, _rep, b = q.lod_runs_busy(t, lane, 0, t0, t1, px)
            assert np.all(b <= e - s) and np.all(b > 0)
            busy, spans, runs = busy + int(b.sum()), spans + int((e - s).sum()), runs + len(s)
        assert abs(busy / 1e3 - _raw_kernel_us()) <= 0.001 * busy / 1e3 + 1
        assert runs < 0.2 * sum(t.lane_slice(i).stop - t.lane_slice(i).start for i in lanes)  # merged
        assert busy < 0.5 * spans, (busy, spans)  # the merged runs are mostly idle: drawn faint


def test_a_mostly_idle_stream_is_drawn_faint(qtbot, tmp_path, qapp):
    """At the opening zoom, few of the GPU stream row's pixels are the kernels' solid colours."""
    from PySide6.QtCore import QPoint, QPointF

    from gpuviewer.render.colors import COLORS

    w = make_window(qtbot, tmp_path, block_analysis=True, size=(1366, 768))
    assert w.open_paths([EAGER], block=True)
    qapp.processEvents()
    tv = w.timeline
    img = tv.grab().toImage()
    img = img.convertToFormat(img.Format.Format_RGB32)
    a = np.frombuffer(img.constBits(), np.uint32).reshape(img.height(), img.bytesPerLine() // 4) & 0xFFFFFF
    lanes = w.trace.lanes
    row = next(r for r in tv.layout_model.rows if r.kind == "lane" and lanes[r.lane].kind == LaneKind.GPU)
    port = tv.vb.scene().views()[0].viewport()

    def at(t: float, y: float) -> tuple[int, int]:
        d = tv.vb.mapViewToDevice(QPointF(t, y))
        p = port.mapTo(tv, QPoint(int(round(d.x())), int(round(d.y()))))
        return p.x(), p.y()

    x0, y0 = at(float(w.trace.start_ns - tv.origin), row.y + 0.3)
    x1, _ = at(float(w.trace.end_ns - tv.origin), row.y + 0.3)
    band = a[y0, max(x0, 0) : min(x1, img.width())]
    solid = {c.rgb() & 0xFFFFFF for c in COLORS}
    share = float(np.isin(band, list(solid)).mean())
    assert share < 0.3, share  # 23% of the stream's time is kernels: most of its pixels are faint
