"""All findings for 8 ranks x 1M events (issue 5): target <= 2 s.

  python ../shared/tools/scale_trace.py kineto ../shared/traces/kineto/launch_bound_big.json.gz /tmp/scaled/r8 --ranks 8 --tiles 1
  python bench/bench_analyze.py /tmp/scaled/r8

The session is opened first (from the cache after the first run; not timed); then analyze()
runs 3 times and the median is reported, with the time of each part on the last run.
"""
from __future__ import annotations

import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _common  # noqa: E402,F401  (puts the checkout on sys.path)


def main() -> None:
    path = sys.argv[1] if len(sys.argv) > 1 else "/tmp/scaled/r8"
    from gpuviewer.analysis.findings import analyze
    from gpuviewer.io.session import load
    t0 = time.perf_counter()
    trace = load([path])
    print(f"# {path}: {len(trace.ranks)} ranks, {trace.n_events:,} events "
          f"(JSON events incl. flows: {len(trace.ranks)} x 1,000,113); open {time.perf_counter() - t0:.1f} s")
    times = []
    for _ in range(3):
        trace._lane_cache.clear()
        s = time.perf_counter()
        a = analyze(trace)
        times.append(time.perf_counter() - s)
    med = statistics.median(times)
    print(f"findings: {len(a['findings'])} ({', '.join(sorted({f['rule'] for f in a['findings']}))})")
    print(f"analyze, seconds (median of 3)                {med:8.3f} s   target <= 2.0   {'OK' if med <= 2 else 'OVER'}")


if __name__ == "__main__":
    main()
