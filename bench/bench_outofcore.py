"""Out of core (issue 15): 100M events in 64 ranks open with peak RSS <= 4 GB and frames <= 16 ms
at full zoom-out.

  python bench/bench_outofcore.py [PATH] [--frames 7] [--keep-cache DIR [--warm-only]]

PATH (default /tmp/scaled/r64x1m5): 64 ranks x 1.5M events, made with
  python ../shared/tools/scale_trace.py kineto ../shared/traces/kineto/ddp/ddp_rank0.json.gz \\
      /tmp/scaled/r64x1m5 --ranks 64 --tiles 50
Each step runs in a fresh process, as the window runs them:
  cold: the reader process opens the session with an empty cache (parse, built rank by rank into
        the cache): seconds and peak RSS (ru_maxrss) of that process and of its decode workers.
  warm: the window's process opens it from the cache (gpuviewer.session.open_session: hosts,
        clocks), hands it to a TimelineView (1600x900, offscreen raster, 64 summary rows) and
        paints once (first_paint_ms), then frames at full zoom-out, 10% and 1% windows: what a
        horizontal pan of 0.1% repaints (the plot widget, drawn anew: the view is hidden first,
        as bench_render.py never shows it), median of --frames, as bench_render.py.
        Run twice: the second time is the reopen of a session the window has seen before.
The analysis is not part of this (the window runs it on a thread after the first paint).
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import ROOT  # noqa: E402

DEFAULT = "/tmp/scaled/r64x1m5"
RSS_MB = 4096
FRAME_MS = 16.0

_COLD = r'''
import json, resource, sys, time
t0 = time.perf_counter()
from gpuviewer.io.session import load
t = load([sys.argv[1]])
secs = time.perf_counter() - t0
print(json.dumps({"seconds": secs, "events": t.n_events, "ranks": len(t.ranks), "lanes": len(t.lanes),
                  "peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                  "workers_mb": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024,
                  "from_cache": bool(t.metadata.get("from_cache"))}))
'''

_WARM = r'''
import json, os, resource, statistics, sys, time
os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
def peak(): return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
from PySide6.QtGui import QImage
from PySide6.QtWidgets import QApplication, QWidget
app = QApplication([])
import pyqtgraph as pg
pg.setConfigOptions(antialias=False)
from gpuviewer.session import open_session
from gpuviewer.widgets.timeline_view import TimelineView
view = TimelineView(); view.resize(1600, 900); view.show(); app.processEvents()
out = {"imports_mb": peak()}
t0 = time.perf_counter()
t = open_session([sys.argv[1]])
out["open_s"] = time.perf_counter() - t0
out["open_mb"] = peak()
t0 = time.perf_counter()
view.set_trace(t); app.processEvents()
img = QImage(view.size(), QImage.Format_ARGB32_Premultiplied)
view.render(img)
out["first_paint_ms"] = (time.perf_counter() - t0) * 1e3
out["first_paint_mb"] = peak()
out.update(events=t.n_events, rows=len(view.layout_model.rows), from_cache=bool(t.metadata.get("from_cache")))
# frames as bench_render.py times them: the view not shown, so that no repaint of the window in
# processEvents draws the frame before the timed render (which would then only replay it)
view.hide(); app.processEvents()
span = t.end_ns - t.start_ns
frames = {}
for label, frac in (("full", 1.0), ("10%", 0.1), ("1%", 0.01)):
    a = t.start_ns + int(span * (0.5 - frac / 2))
    view.set_range(a, a + int(span * frac)); app.processEvents()
    s = time.perf_counter(); QWidget.render(view.plot, img); first = (time.perf_counter() - s) * 1e3
    times = []
    for k in range(int(sys.argv[2])):
        view.pan(0.001 if k % 2 == 0 else -0.001); app.processEvents()
        s = time.perf_counter(); QWidget.render(view.plot, img); times.append((time.perf_counter() - s) * 1e3)
    frames[label] = {"median": statistics.median(times), "max": max(times), "first": first,
                     "rects": view.item.last_rect_count}
out["frames"] = frames
out["peak_mb"] = peak()
print(json.dumps(out))
'''


def _run(code: str, args: list[str], cache: str) -> dict:
    env = dict(os.environ, GPUVIEWER_CACHE_DIR=cache, PYTHONPATH=ROOT, QT_QPA_PLATFORM="offscreen")
    p = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, env=env, cwd=ROOT)
    if p.returncode != 0:
        raise SystemExit(p.stderr)
    return json.loads(p.stdout.strip().splitlines()[-1])


def _ok(v: float, target: float) -> str:
    return f"target <= {target:g}  {'OK' if v <= target else 'OVER'}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("path", nargs="?", default=DEFAULT)
    ap.add_argument("--frames", type=int, default=7)
    ap.add_argument("--keep-cache", help="write the cache here and keep it (default: a temporary folder)")
    ap.add_argument("--warm-only", action="store_true", help="reuse the cache of --keep-cache (no cold open)")
    a = ap.parse_args()
    if a.warm_only and not a.keep_cache:
        raise SystemExit("--warm-only needs --keep-cache DIR (the cache an earlier run kept)")
    if not os.path.exists(a.path):
        raise SystemExit(f"{a.path} not found; make it with\n  python ../shared/tools/scale_trace.py kineto "
                         f"../shared/traces/kineto/ddp/ddp_rank0.json.gz {a.path} --ranks 64 --tiles 50")
    cache = a.keep_cache or tempfile.mkdtemp(prefix="gv-ooc-")
    try:
        cold = None
        if not a.warm_only:
            if a.keep_cache:
                shutil.rmtree(cache, ignore_errors=True)
            cold = _run(_COLD, [a.path], cache)
            print(f"# {a.path}: {cold['ranks']} ranks, {cold['events']:,} events, {cold['lanes']} lanes")
            print(f"cold open (parse, built rank by rank into the cache), s {cold['seconds']:10.1f} s")
            print(f"peak RSS cold, MB (reader process)            {cold['peak_mb']:10.0f} MB   {_ok(cold['peak_mb'], RSS_MB)}")
            print(f"  decode workers' peak RSS, MB (the largest)  {cold['workers_mb']:10.0f} MB")
        worst = 0.0
        for run in ("warm", "warm again"):
            w = _run(_WARM, [a.path, str(a.frames)], cache)
            assert w["from_cache"], "the warm open did not come from the cache"
            print(f"# {run}: the window's process ({w['rows']} rows)")
            print(f"open from the cache (hosts, clocks), s        {w['open_s']:10.2f} s")
            print(f"first paint at the steps, ms                  {w['first_paint_ms']:10.0f} ms")
            print(f"peak RSS warm, MB (imports {w['imports_mb']:.0f}, open {w['open_mb']:.0f}, "
                  f"first paint {w['first_paint_mb']:.0f})  {w['peak_mb']:6.0f} MB   {_ok(w['peak_mb'], RSS_MB)}")
            for label, f in w["frames"].items():
                worst = max(worst, f["median"])
                print(f"{label:>5} window: frame {f['median']:6.2f} ms (median of {a.frames}; max {f['max']:.2f}; "
                      f"first {f['first']:.1f})  {_ok(f['median'], FRAME_MS)}  rects {f['rects']:,}")
        if cold is not None:
            print(f"open_cold_s={cold['seconds']:.1f} peak_rss_cold_mb={cold['peak_mb']:.0f} ", end="")
        print(f"peak_rss_warm_mb={w['peak_mb']:.0f} frame_ms_max={worst:.2f}")
    finally:
        if not a.keep_cache:
            shutil.rmtree(cache, ignore_errors=True)


if __name__ == "__main__":
    main()
