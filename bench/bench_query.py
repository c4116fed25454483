"""Query layer (issue 16): the kernels table from the cache, and a SQL GROUP BY over it.

  python bench/bench_query.py [--big /tmp/scaled/big10/rank0.json.gz]

launch_bound_big (1M events): `s.kernels` after the session was opened from the cache (a fresh
process; the cache is written first). Target <= 0.3 s. Importing pandas (once per process, about
0.25 s here) is timed apart and printed beside it.
The 10M-event trace (scale_trace.py kineto launch_bound_big ... --tiles 10): `SELECT name,
count(*), sum(dur) FROM kernels GROUP BY name`, warm (the table registered, the query run
once), median of 5. Target <= 1 s.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import ROOT, TRACES  # noqa: E402

_PROBE = r"""
import json, sys, time
import gpuviewer
path = sys.argv[1]
t0 = time.perf_counter(); s = gpuviewer.open(path); t_open = time.perf_counter() - t0
t0 = time.perf_counter(); import pandas; t_pd = time.perf_counter() - t0
t0 = time.perf_counter(); k = s.kernels; t_k = time.perf_counter() - t0
out = {"open_s": t_open, "kernels_s": t_k, "pandas_import_s": t_pd, "kernels": len(k), "from_cache": bool(s.trace.metadata.get("from_cache"))}
if sys.argv[2] == "1":
    from gpuviewer.query.sql import Query
    q = Query(s)
    sql = "SELECT name, count(*) AS n, sum(dur) AS total FROM kernels GROUP BY name ORDER BY total DESC"
    q.run(sql)
    times = []
    for _ in range(5):
        t0 = time.perf_counter(); df, _more = q.run(sql); times.append(time.perf_counter() - t0)
    out["groupby_s"] = sorted(times)[2]; out["groups"] = len(df)
    sql = "SELECT name, count(*) AS n, sum(dur) AS total FROM slices GROUP BY name ORDER BY total DESC"
    q.run(sql)
    times = []
    for _ in range(5):
        t0 = time.perf_counter(); df, _more = q.run(sql); times.append(time.perf_counter() - t0)
    out["groupby_slices_s"] = sorted(times)[2]; out["slice_groups"] = len(df); out["slices"] = len(s.trace)
print(json.dumps(out))
"""


def _probe(path: str, cache: str, sql: bool) -> dict:
    env = dict(os.environ, GPUVIEWER_CACHE_DIR=cache, PYTHONPATH=ROOT)
    p = subprocess.run(
        [sys.executable, "-c", _PROBE, path, "1" if sql else "0"],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        check=True,
    )
    return json.loads(p.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--big", default="/tmp/scaled/big10/rank0.json.gz")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as cache:
        path = os.path.join(TRACES, "kineto", "launch_bound_big.json.gz")
        _probe(path, cache, False)  # writes the cache
        runs = [_probe(path, cache, False) for _ in range(3)]
        assert all(r["from_cache"] for r in runs)
        k = statistics.median(r["kernels_s"] for r in runs)
        print(
            f"# launch_bound_big: {runs[0]['kernels']:,} kernels, opened from the cache in "
            f"{statistics.median(r['open_s'] for r in runs):.3f} s"
        )
        imp = statistics.median(r["pandas_import_s"] for r in runs)
        print(
            f"kernels_table_s={k:.3f}   target <= 0.3 s  {'OK' if k <= 0.3 else 'OVER'}"
            f"   (+{imp:.3f} s to import pandas, once per process: {k + imp:.3f} s in all)"
        )
        if os.path.exists(a.big):
            _probe(a.big, cache, False)
            r = _probe(a.big, cache, True)
            print(f"# {a.big}: {r['kernels']:,} kernels, {r['groups']} names; kernels table {r['kernels_s']:.3f} s")
            g = r["groupby_s"]
            print(f"groupby_10M_s={g:.3f}   target <= 1 s  {'OK' if g <= 1 else 'OVER'}")
            g = r["groupby_slices_s"]
            print(
                f"groupby_slices_10M_s={g:.3f}   (every slice: {r['slices']:,} rows, {r['slice_groups']} names; "
                f"same target) {'OK' if g <= 1 else 'OVER'}"
            )
        else:
            print(f"# {a.big} missing: make it with scale_trace.py (see BENCHMARKS.md)")


if __name__ == "__main__":
    main()
