"""Open-time budgets (issues 2 and 3). Prints each measured figure next to its target.

  python bench/bench_open.py [--ten-million DIR_OR_FILE] [--nsys-tiles FILE] [--skip-nsys]

Each open runs in a fresh process. "cold" = empty cache (parse + write cache), "reopen" = the
memory-mapped cache. Peak RSS is the opening process; workers (pieces decoded in parallel) are
reported separately. Bytes per event = store columns / events.
"""
from __future__ import annotations

import argparse
import os
import shutil
import statistics
import tempfile

from _common import TRACES, baseline_rss, measure_open

MB = 1 << 20


def row(label, value, target, unit, ok=None):
    if ok is None:
        ok = value <= target
    print(f"{label:<52} {value:>10.3f} {unit:<6} target <= {target:<8} {'OK' if ok else 'OVER'}")


def kineto_big(repeats: int) -> None:
    path = os.path.join(TRACES, "kineto", "launch_bound_big.json.gz")
    print(f"# {path}")
    colds, reopens, peaks, wpeaks = [], [], [], []
    res = None
    for _ in range(repeats):
        d = tempfile.mkdtemp()
        try:
            res = measure_open([path], True, d)
            colds.append(res["seconds"])
            peaks.append(res["peak_rss"])
            wpeaks.append(res["worker_peak_rss"])
            again = measure_open([path], True, d)
            assert again["from_cache"]
            reopens.append(again["seconds"])
        finally:
            shutil.rmtree(d, ignore_errors=True)
    base = baseline_rss()
    row("cold open, seconds (median)", statistics.median(colds), 1.5, "s")
    row("peak RSS while opening, MB (main process)", max(peaks) / MB, 400, "MB")
    print(f"{'  worker process peak RSS, MB':<52} {max(wpeaks) / MB:>10.1f} MB     (each of 2 workers)")
    print(f"{'  interpreter + imports alone, MB':<52} {base / MB:>10.1f} MB")
    row("reopen from cache, seconds (median)", statistics.median(reopens), 0.3, "s")
    row("store bytes per event", res["store_bytes"] / res["events"], 40, "B")
    print(f"{'  events (slices + instants)':<52} {res['events']:>10,}")


def ten_million(path: str) -> None:
    paths = [path]
    print(f"# 10M events: {path}")
    d = tempfile.mkdtemp()
    try:
        res = measure_open(paths, False, d)
    finally:
        shutil.rmtree(d, ignore_errors=True)
    print(f"{'10M-event open, seconds':<52} {res['seconds']:>10.3f} s")
    print(f"{'10M-event peak RSS, MB (main / worker)':<52} {res['peak_rss'] / MB:>10.1f} / {res['worker_peak_rss'] / MB:.1f} MB")
    print(f"{'  events':<52} {res['events']:>10,}")
    print(f"{'  store bytes per event':<52} {res['store_bytes'] / res['events']:>10.1f} B")


def nsys(tiles_path: str | None) -> None:
    path = os.path.join(TRACES, "nsys", "nsys_ddp_big.sqlite")
    if not os.path.exists(path):
        return
    try:
        import gpuviewer.io.nsys  # noqa: F401
    except ImportError:
        print("# nsys reader not present")
        return
    import sqlite3
    import time
    print(f"# {path}")
    colds = []
    for _ in range(3):
        d = tempfile.mkdtemp()
        try:
            res = measure_open([path], False, d)
        finally:
            shutil.rmtree(d, ignore_errors=True)
        colds.append(res["seconds"])
    row("nsys_ddp_big cold open, seconds (median)", statistics.median(colds), 2.0, "s")
    t0 = time.perf_counter()
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    for table in ("CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_RUNTIME", "NVTX_EVENTS",
                  "CUPTI_ACTIVITY_KIND_MEMCPY", "CUPTI_ACTIVITY_KIND_MEMSET", "OSRT_API"):
        try:
            db.execute(f"SELECT * FROM {table}").fetchall()
        except sqlite3.Error:
            pass
    print(f"{'  bare sqlite3 fetch of its main tables, seconds':<52} {time.perf_counter() - t0:>10.3f} s")
    print(f"{'  events':<52} {res['events']:>10,}   peak RSS {res['peak_rss'] / MB:.0f} MB")
    if tiles_path:
        d = tempfile.mkdtemp()
        try:
            res = measure_open([tiles_path], False, d)
        finally:
            shutil.rmtree(d, ignore_errors=True)
        print(f"{'nsys x10 tiles open, seconds':<52} {res['seconds']:>10.3f} s")
        print(f"{'nsys x10 tiles peak RSS, MB':<52} {res['peak_rss'] / MB:>10.1f} MB   events {res['events']:,}")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--ten-million", help="a 10M-event trace made with scale_trace.py")
    ap.add_argument("--nsys-tiles", help="nsys_ddp_big x10 made with scale_trace.py")
    ap.add_argument("--skip-nsys", action="store_true")
    a = ap.parse_args()
    kineto_big(a.repeats)
    if a.ten_million:
        ten_million(a.ten_million)
    if not a.skip_nsys:
        nsys(a.nsys_tiles)


if __name__ == "__main__":
    main()
