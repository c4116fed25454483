"""`gpuviewer diff` of two runs with 40,000 steps each (issue 30, item 6): <= 5 s.

  python bench/bench_diff_steps.py [--steps N]

The input is samples/dataloader_stall.json.gz with its three ProfilerStep ranges replaced by N
(default 40,000) back-to-back ranges tiling the same span (about 4 us each; most hold no GPU
op), written twice (A and B, the same content). The cache is written first (not timed); then the
whole command, `gpuviewer diff A B --json`, runs 3 times in a fresh process each and the median
is held against the target. Before the fix (a per-step mask over every GPU op in the breakdown,
and a set rebuilt per step when pairing the steps) this took 71 s on the 2-core VM.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import ROOT  # noqa: E402

TARGET_S = 5.0


def make_input(folder: str, n: int) -> tuple[str, str]:
    with gzip.open(os.path.join(ROOT, "samples", "dataloader_stall.json.gz")) as f:
        d = json.load(f)
    evs = d["traceEvents"]
    host = [e for e in evs if str(e.get("name", "")).startswith("ProfilerStep#") and e.get("cat") == "user_annotation"]
    t0 = min(e["ts"] for e in host)
    t1 = max(e["ts"] + e["dur"] for e in host)
    w = (t1 - t0) / n
    d["traceEvents"] = [e for e in evs if not str(e.get("name", "")).startswith("ProfilerStep#")]
    d["traceEvents"] += [dict(host[0], name=f"ProfilerStep#{i}", ts=t0 + i * w, dur=w * 0.999) for i in range(n)]
    out = []
    for side in ("a", "b"):
        p = os.path.join(folder, f"steps_{side}.json")
        with open(p, "w") as f:
            json.dump(d, f)
        out.append(p)
    return out[0], out[1]


def run(args: list[str], env: dict) -> float:
    t0 = time.perf_counter()
    p = subprocess.run([sys.executable, "-m", "gpuviewer", *args], capture_output=True, text=True, env=env, cwd=ROOT)
    secs = time.perf_counter() - t0
    if p.returncode != 0:
        raise SystemExit(f"gpuviewer {' '.join(args)} failed: {p.stderr[-2000:]}")
    return secs


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=40_000)
    n = ap.parse_args().steps
    with tempfile.TemporaryDirectory() as tmp:
        a, b = make_input(tmp, n)
        env = dict(os.environ, GPUVIEWER_CACHE_DIR=os.path.join(tmp, "cache"), PYTHONPATH=ROOT)
        for p in (a, b):
            run(["info", p], env)  # write the cache
        secs = statistics.median(run(["diff", a, b, "--json"], env) for _ in range(3))
    print(f"# 2 x dataloader_stall with {n:,} steps each, from the cache")
    print(
        f"diff of {n:,} steps, whole command, seconds (median of 3)   {secs:7.3f} s   target <= {TARGET_S}   "
        f"{'OK' if secs <= TARGET_S else 'OVER'}"
    )


if __name__ == "__main__":
    main()
