"""Analysis budgets: all findings for 8 ranks x 1M events (issue 5: <= 2 s) and for 64 ranks
(issue 11: <= 3 s, no finding repeated per rank). Prints each figure next to its target.

  python ../shared/tools/scale_trace.py kineto ../shared/traces/kineto/launch_bound_big.json.gz /tmp/scaled/r8 --ranks 8 --tiles 1
  python ../shared/tools/scale_trace.py kineto ../shared/traces/kineto/ddp/ddp_rank0.json.gz /tmp/scaled/r64 --ranks 64 --tiles 1
  python bench/bench_analyze.py [/tmp/scaled/r8] [/tmp/scaled/r64]

Each session is opened first (from the cache after the first run; not timed); then the whole
analysis (NCCL arguments fetched from the files, steps, collectives, late ranks, findings) runs
3 times from a cold per-session cache and the median is reported.
"""
from __future__ import annotations

import os
import statistics
import sys
import time
from collections import Counter

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _common  # noqa: E402,F401  (puts the checkout on sys.path)

TARGETS = {"r8": 2.0, "r64": 3.0}


def bench(path: str) -> None:
    from gpuviewer.io.session import load
    from gpuviewer.session.analysis import analyze_session
    t0 = time.perf_counter()
    trace = load([path])
    print(f"# {path}: {len(trace.ranks)} ranks, {trace.n_events:,} events; open {time.perf_counter() - t0:.1f} s")
    times = []
    for _ in range(3):
        trace.derived.clear()
        s = time.perf_counter()
        a = analyze_session(trace)
        times.append(time.perf_counter() - s)
    med = statistics.median(times)
    target = TARGETS.get(os.path.basename(path.rstrip("/")), 3.0)
    per_rule = Counter(f.rule for f in a.findings)
    print(f"findings: {len(a.findings)} top-level ({', '.join(f'{r} x{n}' for r, n in sorted(per_rule.items()))})")
    worst = max(per_rule.values(), default=0)
    print(f"most top-level findings of one rule            {worst:8d}     target <= 2 (not one per rank) "
          f"{'OK' if worst <= 2 else 'OVER'}")
    print(f"analyze, seconds (median of 3)                {med:8.3f} s   target <= {target}   "
          f"{'OK' if med <= target else 'OVER'}")


def main() -> None:
    paths = sys.argv[1:] or [p for p in ("/tmp/scaled/r8", "/tmp/scaled/r64") if os.path.exists(p)]
    for p in paths:
        bench(p)


if __name__ == "__main__":
    main()
