"""Efficiency (issue 26): `gpuviewer stats --report efficiency` on the million-event trace
(launch_bound_big: 1,000,113 events, 200,000 kernels, no shapes recorded) from the cache.

  python bench/bench_efficiency.py

The whole command in a fresh process (interpreter, imports, open from the cache, the report,
printing), median of 5 after a run that writes the cache: target <= 1 s; beside it the same
command with --report kern (what every stats report pays before its own work). Also in one process:
the efficiency computation alone (kernels attached to their launching ops, the shapes probe,
families) after the session was opened from the cache, and on single_gpt_train (shapes recorded:
1,317 ops' arguments read back from the file).
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
from _common import ROOT, TRACES  # noqa: E402

_PROBE = r"""
import json, sys, time
import gpuviewer
s = gpuviewer.open(sys.argv[1])
t0 = time.perf_counter(); e = s.efficiency(); t = time.perf_counter() - t0
print(json.dumps({"efficiency_s": t, "kernels": e.ops["kernels"], "with_work": e.ops["with_work"],
                  "from_cache": bool(s.trace.metadata.get("from_cache"))}))
"""


def main() -> None:
    big = os.path.join(TRACES, "kineto", "launch_bound_big.json.gz")
    gpt = os.path.join(TRACES, "kineto", "single_gpt_train.json.gz")
    with tempfile.TemporaryDirectory() as cache:
        env = dict(os.environ, GPUVIEWER_CACHE_DIR=cache, PYTHONPATH=ROOT)
        cmd = [sys.executable, "-m", "gpuviewer", "stats", big, "--report", "efficiency", "--json"]
        subprocess.run(cmd, env=env, cwd=ROOT, check=True, capture_output=True)  # writes the cache
        times = []
        for _ in range(5):
            t0 = time.perf_counter()
            p = subprocess.run(cmd, env=env, cwd=ROOT, check=True, capture_output=True, text=True)
            times.append(time.perf_counter() - t0)
        rows = json.loads(p.stdout)
        med = statistics.median(times)
        print(f"# launch_bound_big: {len(rows)} families, {sum(r['kernels'] for r in rows):,} kernels")
        print(
            f"stats_efficiency_cli_s={med:.3f} (min {min(times):.3f})   target <= 1 s  {'OK' if med <= 1 else 'OVER'}"
        )
        ref = []  # the same command's floor: the kern report (interpreter, imports, open, pandas)
        for _ in range(5):
            t0 = time.perf_counter()
            subprocess.run(cmd[:-2] + ["kern", "--json"], env=env, cwd=ROOT, check=True, capture_output=True)
            ref.append(time.perf_counter() - t0)
        print(f"stats_kern_cli_s={statistics.median(ref):.3f} (the same command with --report kern, for reference)")
        print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
        for path in (big, gpt):
            subprocess.run([sys.executable, "-c", _PROBE, path], env=env, cwd=ROOT, check=True, capture_output=True)
            runs = [
                json.loads(
                    subprocess.run(
                        [sys.executable, "-c", _PROBE, path],
                        env=env,
                        cwd=ROOT,
                        check=True,
                        capture_output=True,
                        text=True,
                    ).stdout
                )
                for _ in range(3)
            ]
            assert all(r["from_cache"] for r in runs)
            print(
                f"{os.path.basename(path)}: efficiency computed in {statistics.median(r['efficiency_s'] for r in runs):.3f} s "
                f"({runs[0]['kernels']:,} kernels, {runs[0]['with_work']:,} ops with work)"
            )


if __name__ == "__main__":
    main()
