"""Cost of the cache's checksums (issue 30): a warm open (fresh process, from the cache) with
and without the check of every file, against the target of 5% of the warm open.

  python bench/bench_cache_check.py [PATH ...]   (default: samples/ddp and launch_bound_big)

"check" = cache_check.verify_entry over the entry (what a warm open of an entry up to
cache.EAGER_CHECK_BYTES does); "no check" opens with cache_check.check_file made a no-op.
"""

from __future__ import annotations

import os
import shutil
import statistics
import sys
import tempfile

from _common import ROOT, TRACES, run_probe

_PROBE = r"""
import json, sys, time
t0 = time.perf_counter()
from gpuviewer.io import cache
if sys.argv[2] == "0":
    cache.check_file = lambda *a: None
from gpuviewer.io.session import load
t = load(json.loads(sys.argv[1]))
secs = time.perf_counter() - t0
from gpuviewer.io.cache_check import verify_entry
import os
d = os.path.join(cache.cache_root(), cache.key_for(t.metadata["files"]))
t1 = time.perf_counter(); verify_entry(d); check = time.perf_counter() - t1
print(json.dumps({"seconds": secs, "check": check, "from_cache": bool(t.metadata.get("from_cache")),
                  "bytes": cache.dir_size(d), "events": t.n_events}))
"""


def probe(paths, check: bool, cache_dir: str) -> dict:
    return run_probe(_PROBE, paths, check, cache_dir)


def main() -> None:
    targets = sys.argv[1:] or [
        os.path.join(ROOT, "samples", "ddp"),
        os.path.join(TRACES, "kineto", "launch_bound_big.json.gz"),
    ]
    for path in targets:
        d = tempfile.mkdtemp()
        try:
            probe([path], True, d)  # build the entry
            on, off = [], []
            for _ in range(7):  # interleaved: the machine's load varies between runs
                on.append(probe([path], True, d))
                off.append(probe([path], False, d))
        finally:
            shutil.rmtree(d, ignore_errors=True)
        assert all(r["from_cache"] for r in on + off)
        warm_on = statistics.median(r["seconds"] for r in on)
        warm_off = statistics.median(r["seconds"] for r in off)
        check = statistics.median(r["check"] for r in on)
        share = check / warm_off
        print(f"# {path}: {on[0]['events']:,} events, entry {on[0]['bytes'] / 1e6:.1f} MB")
        print(f"{'warm open with the check, s (median of 7)':<52} {warm_on:>8.3f} s")
        print(f"{'warm open without it, s (median of 7)':<52} {warm_off:>8.3f} s")
        print(
            f"{'check of every file, ms (median of 7)':<52} {check * 1e3:>8.2f} ms  "
            f"{share:6.1%} of the warm open, target <= 5%  {'OK' if share <= 0.05 else 'OVER'}"
        )


if __name__ == "__main__":
    main()
