"""Helpers shared by the benchmarks: paths to the real traces, fresh-process measurement."""

from __future__ import annotations

import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SHARED = os.environ.get("GPUVIEWER_SHARED", os.path.join(os.path.dirname(ROOT), "shared"))
TRACES = os.path.join(SHARED, "traces")
if ROOT not in sys.path:  # run from a checkout without installing
    sys.path.insert(0, ROOT)

# Runs in a fresh interpreter: open the paths, report seconds, peak RSS (this process and the
# largest worker), events and store bytes.
_PROBE = r"""
import json, os, resource, sys, time
t0 = time.perf_counter()
from gpuviewer.io.session import load
paths = json.loads(sys.argv[1]); use_cache = sys.argv[2] == "1"
t = load(paths, use_cache=use_cache)
secs = time.perf_counter() - t0
import numpy as np
arrays = list(t.columns.values()) + list(t.flows) + list(t.instants.values())
arrays += [c.t for c in t.counters] + [c.v for c in t.counters]
store = sum(a.nbytes for a in arrays)
rss_now = int(open("/proc/self/statm").read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
self_peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
child_peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024
print(json.dumps({"seconds": secs, "peak_rss": self_peak, "worker_peak_rss": child_peak,
                  "rss_after": rss_now, "events": t.n_events, "slices": len(t), "store_bytes": store,
                  "from_cache": bool(t.metadata.get("from_cache"))}))
"""


def run_probe(code: str, paths: list[str], flag: bool, cache_dir: str) -> dict:
    """Run a probe script in a fresh interpreter (argv: the paths as JSON, "1"/"0") with its own
    cache folder; its last line of stdout is the JSON it measured."""
    env = dict(os.environ, GPUVIEWER_CACHE_DIR=cache_dir, PYTHONPATH=ROOT)
    p = subprocess.run(
        [sys.executable, "-c", code, json.dumps(paths), "1" if flag else "0"],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
    )
    if p.returncode != 0:
        raise SystemExit(p.stderr)
    return json.loads(p.stdout.strip().splitlines()[-1])


def measure_open(paths: list[str], use_cache: bool, cache_dir: str) -> dict:
    return run_probe(_PROBE, paths, use_cache, cache_dir)


def baseline_rss() -> int:
    """RSS of an interpreter that imported the loader but opened nothing."""
    code = (
        "import os, resource; from gpuviewer.io.session import load; import numpy;"
        "print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024)"
    )
    p = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=dict(os.environ, PYTHONPATH=ROOT), cwd=ROOT
    )
    return int(p.stdout.strip())
