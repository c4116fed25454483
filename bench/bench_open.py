"""Open-time budgets (issues 2 and 3). Prints each measured figure next to its target.

  python bench/bench_open.py [--ten-million DIR_OR_FILE] [--nsys-tiles FILE] [--skip-nsys]
                             [--jax [FILE]] [--only-jax]

--jax opens a JAX/XLA trace of about 1M events (FILE, or the shared jax_train_stall trace tiled
in time to 1M events in a temporary folder) and prints its cold-open time per event next to the
Kineto million-event trace's, both parsed without the cache.

--phases profiles one cold open of launch_bound_big (cProfile in a fresh process) and prints the
main process's time per phase (decompress + waiting for the decode workers, the file's columns,
sort, nesting, flows, level-of-detail pyramid, cache write and reopen) and the workers' CPU.

The json.load ratio: the cold open's median over the standard library's gzip + json.load of the
same file, timed in a fresh process in the same run (the machine's load changes both alike).

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
    jl = json_load_seconds(path)
    row("cold open, seconds (median)", statistics.median(colds), 1.5, "s")
    print(f"{'  gzip + json.load of the same file, seconds':<52} {jl:>10.3f} s")
    row("cold open / json.load", statistics.median(colds) / jl, 0.25, "x")
    row("peak RSS while opening, MB (main process)", max(peaks) / MB, 140, "MB")
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
    row("10M-event open, seconds", res["seconds"], 8, "s")
    row("10M-event peak RSS, MB (main process)", res["peak_rss"] / MB, 500, "MB")
    print(f"{'  worker process peak RSS, MB':<52} {res['worker_peak_rss'] / MB:>10.1f} MB")
    print(f"{'  events':<52} {res['events']:>10,}")
    print(f"{'  store bytes per event':<52} {res['store_bytes'] / res['events']:>10.1f} B")


_JSON_LOAD = r"""
import gzip, json, sys, time
t0 = time.perf_counter()
with gzip.open(json.loads(sys.argv[1])[0], "rb") as f:
    json.load(f)
print(json.dumps({"seconds": time.perf_counter() - t0}))
"""


def json_load_seconds(path: str) -> float:
    """The standard library's gzip + json.load of the file, in a fresh process."""
    from _common import run_probe

    return run_probe(_JSON_LOAD, [path], False, tempfile.gettempdir())["seconds"]


# (phase, function whose cumulative time it is): the main process's share of a cold open
PHASES = [
    ("decompress + wait for decoded pieces", "chrome_json.py", "read_chrome_json"),
    ("  pieces sent to the workers", "process.py", "submit"),
    ("  waiting for a worker's piece", "piece_reader.py", "_result"),
    ("file's columns, lanes, steps (reader finish)", "kineto.py", "finish"),
    ("sort (lexsort and permute)", "build.py", "sort_and_nest"),
    ("  nesting depth", "depth.py", "lane_depth"),
    ("flows (link_flows)", "build.py", "link_flows"),
    ("cache write (store)", "cache.py", "store"),
    ("  level-of-detail pyramid (lod_pack)", "queries.py", "lod_pack"),
    ("cache reopen (memory-mapped)", "cache.py", "load"),
]

_PHASES = r"""
import cProfile, json, pstats, resource, sys, time, io
paths = json.loads(sys.argv[1])
from gpuviewer.io.session import load
pr = cProfile.Profile()
t0 = time.perf_counter()
pr.enable()
t = load(paths, use_cache=True)
pr.disable()
wall = time.perf_counter() - t0
st = pstats.Stats(pr, stream=io.StringIO())
cum = {}
for (file, line, fn), (cc, nc, tt, ct, callers) in st.stats.items():
    cum.setdefault(file.rsplit("/", 1)[-1] + ":" + fn, 0.0)
    cum[file.rsplit("/", 1)[-1] + ":" + fn] += ct
rc = resource.getrusage(resource.RUSAGE_CHILDREN)
print(json.dumps({"wall": wall, "cum": cum, "worker_cpu": rc.ru_utime + rc.ru_stime}))
"""


def phases(path: str) -> None:
    """cProfile of one cold open: where the main process's time goes."""
    from _common import run_probe

    d = tempfile.mkdtemp()
    try:
        res = run_probe(_PHASES, [path], True, d)
    finally:
        shutil.rmtree(d, ignore_errors=True)
    print(f"# phases of one cold open (cProfile, main process): {path}")
    print(f"{'  wall, seconds (profiled)':<52} {res['wall']:>10.3f} s")
    for label, file, fn in PHASES:
        # a function's time counted once even where it calls itself (cumulative, not summed twice)
        v = res["cum"].get(f"{file}:{fn}")
        if v is not None:
            print(f"{label:<52} {v:>10.3f} s")
    print(f"{'decode workers, CPU seconds (all of them)':<52} {res['worker_cpu']:>10.3f} s")


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
    for table in (
        "CUPTI_ACTIVITY_KIND_KERNEL",
        "CUPTI_ACTIVITY_KIND_RUNTIME",
        "NVTX_EVENTS",
        "CUPTI_ACTIVITY_KIND_MEMCPY",
        "CUPTI_ACTIVITY_KIND_MEMSET",
        "OSRT_API",
    ):
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


def tile_jax(src: str, dest: str, events: int) -> int:
    """Write `src` (an XLA trace) repeated in time until it holds about `events` events: each
    copy's times shifted past the previous copy, its correlation ids and step numbers renumbered."""
    import gzip
    import json

    with gzip.open(src, "rt") as f:
        doc = json.load(f)
    evs = doc["traceEvents"]
    meta = [e for e in evs if e.get("ph") == "M"]
    body = [e for e in evs if e.get("ph") == "X"]
    span = max(e["ts"] + e.get("dur", 0) for e in body) - min(e["ts"] for e in body) + 100.0
    corr_max = max(int(e.get("args", {}).get("correlation_id", 0)) for e in body) + 1
    steps = 1 + max(int(e.get("args", {}).get("step_num", -1)) for e in body)
    out, k = list(meta), 0
    while len(out) < events:
        for e in body:
            e2 = dict(e, ts=round(e["ts"] + k * span, 3))
            a = e.get("args")
            if a and ("correlation_id" in a or "step_num" in a):
                a = dict(a)
                if "correlation_id" in a:
                    a["correlation_id"] = str(int(a["correlation_id"]) + k * corr_max)
                if "step_num" in a:
                    a["step_num"] = str(int(a["step_num"]) + k * steps)
                e2["args"] = a
            out.append(e2)
        k += 1
    doc["traceEvents"] = out + [{}]
    with gzip.open(dest, "wt", compresslevel=1) as f:
        json.dump(doc, f, separators=(",", ":"))
    return len(out) - len(meta)


def json_events(path: str) -> int:
    """Events in a trace's traceEvents, flows and metadata included (what the reader decodes)."""
    import gzip

    import msgspec

    doc = msgspec.defstruct("Doc", [("traceEvents", list[msgspec.defstruct("Ev", [])], [])])
    with gzip.open(path, "rb") as f:
        return len(msgspec.json.decode(f.read(), type=doc).traceEvents)


def jax_big(path: str | None, repeats: int) -> None:
    """Cold open (no cache) of a ~1M-event JAX trace against the Kineto million-event trace."""
    tmp = tempfile.mkdtemp()
    try:
        if not path:
            path = os.path.join(tmp, "host0.trace.json.gz")
            n = tile_jax(os.path.join(TRACES, "jax", "jax_train_stall.trace.json.gz"), path, 1_000_000)
            print(f"# JAX: jax_train_stall tiled to {n:,} events ({os.path.getsize(path) / MB:.1f} MB gz)")
        else:
            print(f"# JAX: {path}")
        kineto = os.path.join(TRACES, "kineto", "launch_bound_big.json.gz")
        per = {}
        for label, p in (("jax", path), ("kineto", kineto)):
            secs, res = [], None
            for _ in range(repeats):
                res = measure_open([p], False, tmp)
                secs.append(res["seconds"])
            n_json = json_events(p)
            per[label] = (statistics.median(secs) / res["events"] * 1e6, statistics.median(secs) / n_json * 1e6)
            print(
                f"{label + ' cold open without cache, seconds (median)':<52} {statistics.median(secs):>10.3f} s"
                f"   {n_json:,} JSON events, {res['events']:,} stored, peak RSS {res['peak_rss'] / MB:.0f} MB"
            )
        for k, what in enumerate(("stored event", "JSON event")):
            print(
                f"{'µs per ' + what + ': JAX / Kineto':<52} {per['jax'][k]:>10.3f} / {per['kineto'][k]:.3f}"
                f"   ({per['jax'][k] / per['kineto'][k]:.2f}x)"
            )
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--ten-million", help="a 10M-event trace made with scale_trace.py")
    ap.add_argument("--nsys-tiles", help="nsys_ddp_big x10 made with scale_trace.py")
    ap.add_argument("--skip-nsys", action="store_true")
    ap.add_argument(
        "--jax",
        nargs="?",
        const="",
        default=None,
        metavar="FILE",
        help="a ~1M-event JAX trace per event against Kineto's (none given: tile the shared one)",
    )
    ap.add_argument("--only-jax", action="store_true", help="only the --jax comparison")
    ap.add_argument("--phases", action="store_true", help="also profile one cold open of launch_bound_big per phase")
    a = ap.parse_args()
    if a.jax is not None:
        jax_big(a.jax, a.repeats)
        if a.only_jax:
            return
    kineto_big(a.repeats)
    if a.phases:
        phases(os.path.join(TRACES, "kineto", "launch_bound_big.json.gz"))
    if a.ten_million:
        ten_million(a.ten_million)
    if not a.skip_nsys:
        nsys(a.nsys_tiles)


if __name__ == "__main__":
    main()
