"""Timeline frame time (issues 4 and 19): a full paint of the timeline widget after a pan, at full
zoom-out and 10% and 1% windows, and the first paint after opening a cached session.

  python bench/bench_render.py [--trace PATH] [--frames 7]

Default trace: ../shared/traces/kineto/launch_bound_big.json.gz (1M events); the 10M one is its
x10 scale (scale_trace.py kineto ... --tiles 10). Offscreen raster engine, 1600x900 widget, every
lane expanded. A frame = what a horizontal pan repaints (the plot widget: its scene with the timeline and
both axes; the lane labels, scroll bar and search bar are not repainted on a pan, checked with
a paint-event filter) rendered into a QImage made once, as a repaint does into the window's
backing store (grab() would also allocate a 1600x900 pixmap per frame); median of 7 pans after
one warm-up frame. The breakdown times each painter of the frame (the timeline item, the two
axes; "Qt" is the rest: the scene, the view, compositing).
first_paint_ms: a fresh process opens the session from the cache (written before by another
process) and paints once at full zoom-out; the time from the open returning to the frame done.
Last lines: first_paint_ms=..., frame_ms_max=... over all zooms.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import ROOT, TRACES  # noqa: E402

_FIRST = r"""
import os, sys, time, json
os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
from PySide6.QtWidgets import QApplication
from PySide6.QtGui import QImage
app = QApplication([])
from gpuviewer.io.session import load
from gpuviewer.widgets.timeline_view import TimelineView
view = TimelineView(); view.resize(1600, 900); view.show(); app.processEvents()
t0 = time.perf_counter(); t = load([sys.argv[1]]); t_open = time.perf_counter() - t0
t0 = time.perf_counter()
view.set_trace(t); app.processEvents()
img = QImage(view.size(), QImage.Format_ARGB32_Premultiplied)
view.render(img)
print(json.dumps({"open_s": t_open, "first_paint_ms": (time.perf_counter() - t0) * 1e3,
                  "from_cache": bool(t.metadata.get("from_cache"))}))
"""


def _timed(obj, name: str, acc: dict, key: str) -> None:
    """Wrap obj.name to add its time to acc[key] (instrumentation for the breakdown only)."""
    fn = getattr(obj, name)

    def wrapper(*a, **k):
        s = time.perf_counter()
        try:
            return fn(*a, **k)
        finally:
            acc[key] = acc.get(key, 0.0) + (time.perf_counter() - s) * 1e3

    setattr(obj, name, wrapper)


def first_paint(path: str) -> dict:
    with tempfile.TemporaryDirectory() as cache:
        env = dict(os.environ, GPUVIEWER_CACHE_DIR=cache, PYTHONPATH=ROOT)
        subprocess.run(
            [sys.executable, "-c", "import sys; from gpuviewer.io.session import load; load([sys.argv[1]])", path],
            env=env,
            check=True,
            cwd=ROOT,
        )
        runs = []
        for _ in range(3):
            p = subprocess.run(
                [sys.executable, "-c", _FIRST, path], env=env, capture_output=True, text=True, cwd=ROOT, check=True
            )
            runs.append(json.loads(p.stdout.strip().splitlines()[-1]))
    assert all(r["from_cache"] for r in runs)
    return {
        "first_paint_ms": statistics.median(r["first_paint_ms"] for r in runs),
        "open_s": statistics.median(r["open_s"] for r in runs),
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--events", default="1M", choices=["1M", "10M"], help="label only")
    ap.add_argument("--trace", help="trace to draw (default: the 1M-event launch_bound_big)")
    ap.add_argument("--frames", type=int, default=7)
    a = ap.parse_args()
    path = a.trace or os.path.join(TRACES, "kineto", "launch_bound_big.json.gz")
    from PySide6.QtGui import QImage
    from PySide6.QtWidgets import QApplication

    app = QApplication.instance() or QApplication([])
    import pyqtgraph as pg

    pg.setConfigOptions(antialias=False)
    from gpuviewer.io.session import load
    from gpuviewer.widgets.timeline_view import TimelineView

    t = load([path])
    view = TimelineView()
    view.resize(1600, 900)
    view.set_trace(t)
    for ln in range(len(t.lanes)):  # every lane expanded, so all rows are drawn
        view.layout_model.state.expanded.add(t.lanes[ln].key)
    view.layout_model.rebuild()
    view._relayout()
    app.processEvents()
    acc: dict[str, float] = {}
    for layer in view.item.layers:  # the timeline is a stack of layers that each paint one thing
        _timed(layer, "paint", acc, "timeline")
    for ax in ("top", "bottom"):
        _timed(view.plot.getAxis(ax), "paint", acc, "axes")
    img = QImage(view.size(), QImage.Format_ARGB32_Premultiplied)

    from PySide6.QtWidgets import QWidget

    def frame() -> float:
        """What a horizontal pan repaints (counted with a paint-event filter on a shown window:
        the plot's viewport, with the axes and the timeline; the lane labels, scroll bar and
        search bar are not repainted)."""
        s = time.perf_counter()
        QWidget.render(view.plot, img)
        return (time.perf_counter() - s) * 1e3

    print(f"# {path}: {t.n_events:,} events, {len(t.lanes)} lanes, {len(view.layout_model.rows)} rows")
    span = t.end_ns - t.start_ns
    worst = 0.0
    for label, frac in (("full", 1.0), ("10%", 0.1), ("1%", 0.01)):
        t0 = t.start_ns + int(span * (0.5 - frac / 2))
        view.set_range(t0, t0 + int(span * frac))
        app.processEvents()
        first = frame()
        times, parts = [], []
        for k in range(a.frames):
            view.pan(0.001 if k % 2 == 0 else -0.001)
            app.processEvents()
            acc.clear()
            times.append(frame())
            parts.append(dict(acc))
        med = statistics.median(times)
        worst = max(worst, med)
        bd = {k: statistics.median(p.get(k, 0.0) for p in parts) for k in ("timeline", "axes")}
        bd["Qt"] = max(0.0, med - sum(bd.values()))
        print(
            f"{label:>5} window: frame {med:6.2f} ms (median of {a.frames}; max {max(times):.2f})  "
            f"target <= 8 ms {'OK' if med <= 8 else 'OVER'};  first frame {first:.1f} ms; "
            f"rects drawn {view.item.last_rect_count:,}"
        )
        print("        breakdown: " + ", ".join(f"{k} {v:.2f} ms" for k, v in bd.items()))
    fp = first_paint(path)
    print(
        f"first_paint_ms={fp['first_paint_ms']:.1f}   target <= 100 ms  "
        f"{'OK' if fp['first_paint_ms'] <= 100 else 'OVER'}  (open from the cache {fp['open_s'] * 1e3:.0f} ms)"
    )
    print(f"frame_ms_max={worst:.2f}")


if __name__ == "__main__":
    main()
