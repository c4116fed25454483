"""Out of core (issue 15): 100M events in 64 ranks open with peak RSS <= 4 GB and frames <= 16 ms
at full zoom-out; built in parallel (issue 31, item 2): cold <= 150 s on 2 cores, peak RSS of the
whole process tree <= 1 GB.

  python bench/bench_outofcore.py [PATH] [--frames 7] [--keep-cache DIR [--warm-only]]
                                  [--workers 1,2] [--cold-only]

PATH (default /tmp/scaled/r64x1m5): 64 ranks x 1.5M events, made with
  python ../shared/tools/scale_trace.py kineto ../shared/traces/kineto/ddp/ddp_rank0.json.gz \\
      /tmp/scaled/r64x1m5 --ranks 64 --tiles 50
Each step runs in a fresh process, as the window runs them:
  cold: the reader process opens the session with an empty cache (parse, built rank by rank into
        the cache): seconds and peak RSS (ru_maxrss) of that process and of its largest worker,
        the peak of the whole process tree's memory (sampled from /proc every 0.1 s): summed
        PSS, each shared page counted once (the target), and summed RSS, where the pages a forked
        worker shares with the reader count again in each worker; and the CPU seconds of the tree.
        --workers 1,2 runs one cold build per value of GPUVIEWER_OOC_WORKERS (1: rank by rank,
        its files decoded by the reader's small decode pool; N: N rank workers), each with an
        empty cache, in this one run; the default is the machine's (one worker per core).
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
import glob
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import ROOT

DEFAULT = "/tmp/scaled/r64x1m5"
RSS_MB = 4096
COLD_S = 150.0  # issue 31: 100M events on 2 cores
TREE_MB = 1024.0
FRAME_MS = 16.0

_COLD = r"""
import json, resource, sys, time
t0 = time.perf_counter()
from gpuviewer.io.session import load
t = load([sys.argv[1]])
secs = time.perf_counter() - t0
me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
print(json.dumps({"seconds": secs, "events": t.n_events, "ranks": len(t.ranks), "lanes": len(t.lanes),
                  "peak_mb": me.ru_maxrss / 1024, "workers_mb": kids.ru_maxrss / 1024,
                  "cpu_s": me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime,
                  "cpu_main_s": me.ru_utime + me.ru_stime,
                  "from_cache": bool(t.metadata.get("from_cache"))}))
"""

_WARM = r"""
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
"""


def _run(code: str, args: list[str], cache: str, **more: str) -> dict:
    env = dict(os.environ, GPUVIEWER_CACHE_DIR=cache, PYTHONPATH=ROOT, QT_QPA_PLATFORM="offscreen", **more)
    p = subprocess.Popen(
        [sys.executable, "-c", code, *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        cwd=ROOT,
    )
    peak, peak_pss = [0], [0]
    stop = threading.Event()

    def sample() -> None:  # the whole tree's resident memory: the process and every descendant
        while not stop.wait(0.1):
            # both from one read of each process's smaps_rollup: the same moment for both sums
            both = [_rss_pss(q) for q in _tree(p.pid)]
            peak[0] = max(peak[0], sum(r for r, _ in both))
            peak_pss[0] = max(peak_pss[0], sum(x for _, x in both))

    th = threading.Thread(target=sample, daemon=True)
    th.start()
    out, err = p.communicate()
    stop.set()
    th.join()
    if p.returncode != 0:
        raise SystemExit(err)
    res = json.loads(out.strip().splitlines()[-1])
    res["tree_mb"] = peak[0] / 2**20
    res["tree_pss_mb"] = peak_pss[0] / 2**20
    return res


def _tree(pid: int) -> list[int]:
    out, todo = [], [pid]
    while todo:
        q = todo.pop()
        out.append(q)
        for f in glob.glob(f"/proc/{q}/task/*/children"):
            try:
                with open(f) as fh:
                    todo.extend(int(x) for x in fh.read().split())
            except OSError:
                pass
    return out


def _rss_pss(pid: int) -> tuple[int, int]:
    """The process's resident set and proportional set size (each page it shares with n processes
    counted 1/n, so the tree's sum counts a page a forked worker shares with the reader once), in
    bytes, from one read of /proc/PID/smaps_rollup."""
    rss = pss = 0
    try:
        with open(f"/proc/{pid}/smaps_rollup") as f:
            for line in f:
                if line.startswith("Rss:"):
                    rss = int(line.split()[1]) * 1024
                elif line.startswith("Pss:"):
                    pss = int(line.split()[1]) * 1024
                    break
    except (OSError, IndexError, ValueError):
        pass
    return rss, pss


def _ok(v: float, target: float) -> str:
    return f"target <= {target:g}  {'OK' if v <= target else 'OVER'}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("path", nargs="?", default=DEFAULT)
    ap.add_argument("--frames", type=int, default=7)
    ap.add_argument("--keep-cache", help="write the cache here and keep it (default: a temporary folder)")
    ap.add_argument("--warm-only", action="store_true", help="reuse the cache of --keep-cache (no cold open)")
    ap.add_argument(
        "--workers",
        help="cold builds with these GPUVIEWER_OOC_WORKERS, e.g. 1,2 (default: the machine's, one per core)",
    )
    ap.add_argument("--cold-only", action="store_true", help="no warm opens")
    a = ap.parse_args()
    if a.warm_only and not a.keep_cache:
        raise SystemExit("--warm-only needs --keep-cache DIR (the cache an earlier run kept)")
    if not os.path.exists(a.path):
        raise SystemExit(
            f"{a.path} not found; make it with\n  python ../shared/tools/scale_trace.py kineto "
            f"../shared/traces/kineto/ddp/ddp_rank0.json.gz {a.path} --ranks 64 --tiles 50"
        )
    cache = a.keep_cache or tempfile.mkdtemp(prefix="gv-ooc-")
    if not a.keep_cache:
        os.rmdir(cache)  # made again, empty, by each cold build
    try:
        cold = None
        for w in ([None] if not a.workers else a.workers.split(",")) if not a.warm_only else []:
            shutil.rmtree(cache, ignore_errors=True)  # each cold build starts from an empty cache
            # built out of core whatever the size (below 256 MB of input a session is read in memory)
            more = {"GPUVIEWER_OUT_OF_CORE_MB": "0"}
            if w is not None:
                more["GPUVIEWER_OOC_WORKERS"] = w.strip()
            cold = _run(_COLD, [a.path], cache, **more)
            how = (
                "the machine's workers"
                if w is None
                else "rank by rank"
                if w.strip() == "1"
                else f"{w.strip()} rank workers"
            )
            print(f"# {a.path}: {cold['ranks']} ranks, {cold['events']:,} events, {cold['lanes']} lanes; {how}")
            print(
                f"cold open (parse, built into the cache), s    {cold['seconds']:10.1f} s   {_ok(cold['seconds'], COLD_S)}"
                f"  ({cold['events'] / cold['seconds'] / 1e6:.2f}M events/s)"
            )
            # on a machine shared with other jobs the wall clock says more about them than about
            # this build: the CPU seconds, of the tree and of the reader process alone, say what it did
            print(f"  CPU seconds: the tree {cold['cpu_s']:.0f} s, the reader process {cold['cpu_main_s']:.0f} s")
            print(f"peak RSS cold, MB (reader process)            {cold['peak_mb']:10.0f} MB")
            print(f"  workers' peak RSS, MB (the largest)         {cold['workers_mb']:10.0f} MB")
            # the target is judged on the proportional sum (a shared page once); the plain sum of
            # RSS counts the pages each forked worker shares with the reader again in each
            print(f"  whole process tree, RSS summed, MB          {cold['tree_mb']:10.0f} MB")
            print(
                f"  whole process tree, PSS summed, MB          {cold['tree_pss_mb']:10.0f} MB   "
                f"{_ok(cold['tree_pss_mb'], TREE_MB)}"
            )
            print(
                f"open_cold_s={cold['seconds']:.1f} peak_pss_tree_mb={cold['tree_pss_mb']:.0f} "
                f"peak_rss_tree_mb={cold['tree_mb']:.0f} workers={w or 'default'}"
            )
        worst = 0.0
        for run in ("warm", "warm again") if not a.cold_only else ():
            w = _run(_WARM, [a.path, str(a.frames)], cache)
            assert w["from_cache"], "the warm open did not come from the cache"
            print(f"# {run}: the window's process ({w['rows']} rows)")
            print(f"open from the cache (hosts, clocks), s        {w['open_s']:10.2f} s")
            print(f"first paint at the steps, ms                  {w['first_paint_ms']:10.0f} ms")
            print(
                f"peak RSS warm, MB (imports {w['imports_mb']:.0f}, open {w['open_mb']:.0f}, "
                f"first paint {w['first_paint_mb']:.0f})  {w['peak_mb']:6.0f} MB   {_ok(w['peak_mb'], RSS_MB)}"
            )
            for label, f in w["frames"].items():
                worst = max(worst, f["median"])
                print(
                    f"{label:>5} window: frame {f['median']:6.2f} ms (median of {a.frames}; max {f['max']:.2f}; "
                    f"first {f['first']:.1f})  {_ok(f['median'], FRAME_MS)}  rects {f['rects']:,}"
                )
        if not a.cold_only:
            print(f"peak_rss_warm_mb={w['peak_mb']:.0f} frame_ms_max={worst:.2f}")
    finally:
        if not a.keep_cache:
            shutil.rmtree(cache, ignore_errors=True)


if __name__ == "__main__":
    main()
