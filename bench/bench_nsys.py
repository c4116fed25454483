"""Nsight Systems reading at the speed of a bare fetch (issue 31, item 3). Prints each figure next
to its target.

  python bench/bench_nsys.py [--tiles FILE] [--repeats N] [--phases]

- nsys_ddp_big: the reader's cold open (no cache; a fresh process, timed from before gpuviewer
  is imported to the finished trace: read, sort, nesting, flows) over a bare sqlite3 fetch of the
  same tables (`SELECT *` of the kernel, runtime, NVTX, memcpy, memset and OSRT tables with
  fetchall(), also in a fresh process). The two are timed alternately, `--repeats` times each,
  and the medians compared, so that the machine's load changes both alike.
- --tiles FILE: nsys_ddp_big x10 made with
  `python ../shared/tools/scale_trace.py nsys ../shared/traces/nsys/nsys_ddp_big.sqlite FILE --tiles 10`
  (4.7M events): open time and the opening process's peak RSS.
- --phases: cProfile of one open of nsys_ddp_big, the main phases' cumulative seconds (the reading
  thread's: the tables are fetched on worker threads, io/sqlite_pool.py, and waited for).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import tempfile

from _common import TRACES, run_probe

MB = 1 << 20
BIG = os.path.join(TRACES, "nsys", "nsys_ddp_big.sqlite")
TABLES = (
    "CUPTI_ACTIVITY_KIND_KERNEL",
    "CUPTI_ACTIVITY_KIND_RUNTIME",
    "NVTX_EVENTS",
    "CUPTI_ACTIVITY_KIND_MEMCPY",
    "CUPTI_ACTIVITY_KIND_MEMSET",
    "OSRT_API",
)

# wall and CPU seconds (CPU: user + system of the process, less disturbed by other jobs on a
# shared machine than wall time), peak RSS
_OPEN = r"""
import json, os, resource, sys, time
t0, c0 = time.perf_counter(), time.process_time()
from gpuviewer.io.session import load
t = load(json.loads(sys.argv[1]), use_cache=False)
print(json.dumps({"seconds": time.perf_counter() - t0, "cpu": time.process_time() - c0, "events": t.n_events,
                  "peak_rss": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024}))
"""

_BARE = r"""
import json, sqlite3, sys, time
t0, c0 = time.perf_counter(), time.process_time()
db = sqlite3.connect("file:" + json.loads(sys.argv[1])[0] + "?mode=ro&immutable=1", uri=True)
for table in %r:
    try:
        db.execute(f"SELECT * FROM {table}").fetchall()
    except sqlite3.Error:
        pass
print(json.dumps({"seconds": time.perf_counter() - t0, "cpu": time.process_time() - c0}))
""" % (TABLES,)  # noqa: UP031 - a code template: its own f-string's braces would need doubling for format()

_PHASES = r"""
import cProfile, io, json, pstats, sys, time
paths = json.loads(sys.argv[1])
pr = cProfile.Profile()
t0 = time.perf_counter()
pr.enable()
from gpuviewer.io.session import load
t = load(paths, use_cache=False)
pr.disable()
st = pstats.Stats(pr, stream=io.StringIO())
cum = {}
for (file, line, fn), (cc, nc, tt, ct, callers) in st.stats.items():
    k = file.rsplit("/", 1)[-1] + ":" + fn
    cum[k] = cum.get(k, 0.0) + ct
print(json.dumps({"wall": time.perf_counter() - t0, "cum": cum}))
"""

# (phase, file:function whose cumulative time it is)
PHASES = [
    ("imports (gpuviewer.io.session)", "<frozen importlib._bootstrap>:_find_and_load"),
    ("read the report (read_report)", "nsys.py:read_report"),
    ("  GPU tables: kernels, memcpy, memset, sync", "nsys.py:_gpu_table"),
    ("  waiting for the workers' fetches (host tables, NVTX)", "_base.py:result"),
    ("  CUDA API calls into events", "nsys_host.py:runtime_calls"),
    ("  NVTX lanes, names, steps", "nsys_nvtx.py:read_nvtx"),
    ("  OS runtime calls into events", "nsys_host.py:osrt"),
    ("  threads' lanes (CUDA API, OSRT)", "nsys_host.py:_thread_lanes"),
    ("sort, nesting, flows (TraceBuilder.finish)", "build.py:finish"),
]


def row(label, value, target, unit):
    ok = "OK" if value <= target else "OVER"
    print(f"{label:<56} {value:>9.3f} {unit:<3} target <= {target:<6} {ok}")


def big(repeats: int) -> None:
    print(f"# {BIG}")
    opens, bares, res = [], [], None
    for _ in range(repeats):
        d = tempfile.mkdtemp()
        try:
            res = run_probe(_OPEN, [BIG], False, d)
            opens.append(res)
            bares.append(run_probe(_BARE, [BIG], False, d))
        finally:
            shutil.rmtree(d, ignore_errors=True)
    for key, what in (("seconds", "wall"), ("cpu", "CPU")):
        o = statistics.median(r[key] for r in opens)
        f = statistics.median(r[key] for r in bares)
        print(
            f"{f'open without cache, {what} seconds (median of {repeats:d})':<56} {o:>9.3f} s    "
            f"runs {', '.join(f'{r[key]:.2f}' for r in opens)}"
        )
        print(
            f"{f'bare sqlite3 fetch of its tables, {what} seconds':<56} {f:>9.3f} s    "
            f"runs {', '.join(f'{r[key]:.2f}' for r in bares)}"
        )
        row(f"open / bare fetch ({what})", o / f, 1.25, "x")
    peaks = [r["peak_rss"] for r in opens]
    print(f"{'  events; peak RSS of the opening process, MB':<56} {res['events']:>9,}      {max(peaks) / MB:.0f} MB")


def tiles(path: str) -> None:
    print(f"# {path}")
    d = tempfile.mkdtemp()
    try:
        res = run_probe(_OPEN, [path], False, d)
    finally:
        shutil.rmtree(d, ignore_errors=True)
    row("x10 tiles open without cache, seconds", res["seconds"], 7, "s")
    print(f"{'  CPU seconds':<56} {res['cpu']:>9.3f} s")
    row("x10 tiles peak RSS, MB (opening process)", res["peak_rss"] / MB, 700, "MB")
    print(f"{'  events':<56} {res['events']:>9,}")


def phases() -> None:
    d = tempfile.mkdtemp()
    try:
        res = run_probe(_PHASES, [BIG], False, d)
    finally:
        shutil.rmtree(d, ignore_errors=True)
    print("# phases of one open of nsys_ddp_big (cProfile; its overhead inflates Python-heavy parts)")
    print(f"{'  wall, seconds (profiled)':<56} {res['wall']:>9.3f} s")
    for label, key in PHASES:
        v = res["cum"].get(key)
        if v is not None:
            print(f"{label:<56} {v:>9.3f} s")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--tiles", help="nsys_ddp_big x10 made with scale_trace.py")
    ap.add_argument("--phases", action="store_true")
    a = ap.parse_args()
    big(a.repeats)
    if a.tiles:
        tiles(a.tiles)
    if a.phases:
        phases()


if __name__ == "__main__":
    main()
