"""Many ranks on many hosts (issue 12): open time and peak RSS of a 64-rank, 8-host session, and
the time of clock alignment and of the whole analysis. Prints each figure next to its target.

  python tests/make_hosts.py ../shared/traces/kineto/ddp_clean/ddp_clean_rank0.json.gz /tmp/mh64 \\
      --ranks 64 --hosts 8 --offsets-us 0,150,-900,2700,5100,-3300,12000,700 --late-rank 37 --late-ms 5 \\
      --layout hostnames
  python bench/bench_hosts.py /tmp/mh64
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import ROOT  # noqa: E402  (puts the checkout on sys.path)

_PROBE = r"""
import json, os, resource, sys, time
t0 = time.perf_counter()
from gpuviewer.session import open_session
t = open_session([sys.argv[1]], use_cache=sys.argv[2] == "1")
secs = time.perf_counter() - t0
hwm = int(next(l for l in open("/proc/self/status") if l.startswith("VmHWM")).split()[1]) * 1024
kids = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024
print(json.dumps({"secs": secs, "rss": hwm, "child_rss": kids, "events": t.n_events, "ranks": len(t.ranks),
                  "alignment": t.metadata.get("alignment", {})}))
"""


def probe(path: str, cache: bool, cache_dir: str) -> dict:
    env = dict(os.environ, GPUVIEWER_CACHE_DIR=cache_dir)
    out = subprocess.run(
        [sys.executable, "-c", _PROBE, path, "1" if cache else "0"],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        check=True,
    ).stdout
    return json.loads(out.strip().splitlines()[-1])


def row(label, value, target, unit):
    ok = "OK" if target is None or value <= target else "OVER"
    print(f"{label:<52} {value:>10.3f} {unit:<4} target <= {target if target is not None else '-':<6} {ok}")


def main() -> None:
    path = sys.argv[1] if len(sys.argv) > 1 else "/tmp/mh64"
    with tempfile.TemporaryDirectory() as cache:
        cold = probe(path, True, cache)  # parse + cache write + alignment
        warm = [probe(path, True, cache) for _ in range(3)]
    a = cold["alignment"]
    print(
        f"# {path}: {cold['ranks']} ranks, {cold['events']:,} events, "
        f"{len(a.get('hosts', {}))} hosts, alignment {a.get('method')}, residual {a.get('residual_ns')} ns"
    )
    row("open cold (parse, cache, align), s", cold["secs"], None, "s")
    row("peak RSS cold, MB (main process)", cold["rss"] / 2**20, None, "MB")
    row("reopen from cache + align, s (median of 3)", statistics.median(w["secs"] for w in warm), None, "s")
    from gpuviewer.io.session import load
    from gpuviewer.session import align_clocks, set_hosts
    from gpuviewer.session.analysis import analyze_session

    t = load([path])
    t0 = time.perf_counter()
    set_hosts(t)
    align_clocks(t)
    t1 = time.perf_counter()
    a = analyze_session(t)
    t2 = time.perf_counter()
    late = [f.metrics["late_rank"] for f in a.findings if f.rule == "straggler"]
    print(f"stragglers found: {late}")
    row("alignment (collectives matched, offsets, applied), s", t1 - t0, None, "s")
    row("alignment + analysis, s", t2 - t0, 3.0, "s")


if __name__ == "__main__":
    main()
