"""Timeline frame time (issue 4): a full paint of the timeline widget after a pan, at full
zoom-out and 10% and 1% windows. Target <= 16 ms at every zoom.

  python bench/bench_render.py [--events 1M|10M] [--trace PATH]

1M = ../shared/traces/kineto/launch_bound_big.json.gz; 10M = its x10 scale
(scale_trace.py kineto ... --tiles 10, path via --trace). Offscreen raster, 1600x900 window,
widget grabbed (one paint per frame), median of 7 frames after one warm-up frame. The first
frame at each zoom builds that lane's level-of-detail pyramid and is reported separately.
The last line is frame_ms_max=<ms> over all zooms.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import TRACES  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--events", default="1M", choices=["1M", "10M"])
    ap.add_argument("--trace", help="trace to draw (default: the 1M-event launch_bound_big)")
    ap.add_argument("--frames", type=int, default=7)
    a = ap.parse_args()
    path = a.trace or os.path.join(TRACES, "kineto", "launch_bound_big.json.gz")
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
    # expand every lane so all rows are drawn
    for ln in range(len(t.lanes)):
        view.layout_model.state.expanded.add(t.lanes[ln].key)
    view.layout_model.rebuild()
    view._relayout()
    app.processEvents()
    print(f"# {path}: {t.n_events:,} events, {len(t.lanes)} lanes, {len(view.layout_model.rows)} rows")
    span = t.end_ns - t.start_ns
    worst = 0.0
    for label, frac in (("full", 1.0), ("10%", 0.1), ("1%", 0.01)):
        t0 = t.start_ns + int(span * (0.5 - frac / 2))
        view.set_range(t0, t0 + int(span * frac))
        first = time.perf_counter()
        view.grab()
        first = (time.perf_counter() - first) * 1000
        times = []
        for k in range(a.frames):
            view.pan(0.001 if k % 2 == 0 else -0.001)
            app.processEvents()
            s = time.perf_counter()
            view.grab()
            times.append((time.perf_counter() - s) * 1000)
        med = statistics.median(times)
        worst = max(worst, med)
        print(f"{label:>5} window: frame {med:7.2f} ms (median of {a.frames}; max {max(times):.2f})  "
              f"target <= 16 ms {'OK' if med <= 16 else 'OVER'};  first frame {first:.1f} ms; "
              f"rects drawn {view.item.last_rect_count:,}")
    print(f"frame_ms_max={worst:.2f}")


if __name__ == "__main__":
    main()
