"""Report and screenshot time against the number of annotations (issue 18, case 5).

  python bench/bench_report.py [--counts 300,3000] [--screenshot 200000]

Each run is the real CLI in a fresh process on samples/ddp with an --annotations file of N
notes and regions spread over rank 0's time range. Prints report_s_<N>= for each count,
screenshot_s_<N>= for the screenshot count, each beside its target, and the peak RSS.
Target: a report with 3,000 annotations in <= 10 s on the 2-core VM (images are made for the
first report.MAX_ANNOTATION_IMAGES annotations only; the rest are rows of a table).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import ROOT  # noqa: E402

SAMPLE = os.path.join(ROOT, "samples", "ddp")
TARGET_S = 10.0


def annotation_file(folder: str, n: int) -> str:
    p = subprocess.run(
        [sys.executable, "-m", "gpuviewer", "info", SAMPLE, "--json"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        check=True,
    )
    r0 = json.loads(p.stdout)["ranks"][0]
    t0, t1 = r0["start_ns"], r0["end_ns"]
    step = max((t1 - t0) // max(n, 1), 1)
    anns = []
    for i in range(n):
        s = t0 + i * step
        if n > 10_000:  # bare notes: 200k of them still fit the 16 MB sidecar limit
            anns.append({"start_ns": s})
        elif i % 2:
            anns.append({"kind": "region", "text": f"r{i}", "start_ns": s, "end_ns": s + step, "rank": i % 2})
        else:
            anns.append({"kind": "note", "text": f"n{i}", "start_ns": s, "rank": i % 2})
    path = os.path.join(folder, f"ann{n}.json")
    with open(path, "w") as f:  # compact, so that 200k annotations stay under the 16 MB sidecar limit
        json.dump({"schema": 1, "annotations": anns, "view": {}}, f, separators=(",", ":"))
    return path


def timed(args: list[str]) -> tuple[float, float, str]:
    env = dict(os.environ, QT_QPA_PLATFORM="offscreen")
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    t = time.perf_counter()
    p = subprocess.run([sys.executable, "-m", "gpuviewer", *args], capture_output=True, text=True, env=env, cwd=ROOT)
    secs = time.perf_counter() - t
    rss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    if p.returncode != 0:
        raise SystemExit(f"gpuviewer {' '.join(args)} failed ({p.returncode}):\n{p.stderr}")
    # the children's peak only rises: report it when this run raised it
    return secs, (rss if rss > before else before) / 1024, p.stderr.strip()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--counts", default="300,3000")
    ap.add_argument("--screenshot", type=int, default=200_000)
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        timed(["report", SAMPLE, "-o", os.path.join(d, "warm.html")])  # the column cache, imports
        for n in (int(x) for x in a.counts.split(",")):
            ann = annotation_file(d, n)
            secs, rss, _ = timed(["report", SAMPLE, "-o", os.path.join(d, "r.html"), "--annotations", ann])
            ok = "OK" if secs <= TARGET_S else "OVER"
            print(f"report_s_{n}={secs:.2f}   target <= {TARGET_S:.0f} s  {ok}   peak RSS {rss:.0f} MB")
        if a.screenshot:
            ann = annotation_file(d, a.screenshot)
            secs, rss, err = timed(["screenshot", SAMPLE, "-o", os.path.join(d, "s.png"), "--annotations", ann])
            ok = "OK" if secs <= TARGET_S else "OVER"
            print(f"screenshot_s_{a.screenshot}={secs:.2f}   target <= {TARGET_S:.0f} s  {ok}   peak RSS {rss:.0f} MB")
            if err:
                print(f"  stderr: {err}")


if __name__ == "__main__":
    main()
