"""Temporal breakdown next to HolisticTraceAnalysis on the same traces (issue 5).

  python3 -m venv /tmp/hta && /tmp/hta/bin/pip install holistictraceanalysis
  python bench/compare_hta.py ../shared/traces/kineto/ddp_long --hta-python /tmp/hta/bin/python

HTA runs in its own interpreter (it pins its own dependencies); its table is printed beside
ours computed two ways: over every step (our definition) and without the last step (HTA drops
it). Definitions differ as written in BENCHMARKS.md.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _common  # noqa: E402,F401

HTA = r"""
import json, sys
from hta.trace_analysis import TraceAnalysis
ta = TraceAnalysis(trace_dir=sys.argv[1])
tb = ta.get_temporal_breakdown(visualize=False)
ov = ta.get_comm_comp_overlap(visualize=False)
out = {int(r["rank"]): {k: float(r[k]) for k in ("idle_time(us)", "compute_time(us)", "non_compute_time(us)", "kernel_time(us)")}
       for _, r in tb.iterrows()}
for _, r in ov.iterrows():
    out[int(r["rank"])]["overlap_pctg"] = float(r["comp_comm_overlap_pctg"])
print(json.dumps(out))
"""


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("trace_dir")
    ap.add_argument("--hta-python", default=None)
    a = ap.parse_args()
    from gpuviewer.analysis.breakdown import breakdown
    from gpuviewer.io.session import load

    rbs = breakdown(load([a.trace_dir]))
    hta = {}
    if a.hta_python:
        d = tempfile.mkdtemp()
        for f in os.listdir(a.trace_dir):
            shutil.copy(os.path.join(a.trace_dir, f), d)
        p = subprocess.run([a.hta_python, "-c", HTA, d], capture_output=True, text=True)
        shutil.rmtree(d, ignore_errors=True)
        if p.returncode == 0:
            hta = {int(k): v for k, v in json.loads(p.stdout.strip().splitlines()[-1]).items()}
        else:
            print("HTA failed:", p.stderr[-500:])
    print(
        f"{'rank':<5}{'source':<28}{'window ms':>10}{'compute ms':>12}{'non-compute ms':>16}{'idle ms':>10}{'overlap %':>11}"
    )
    for rb in rbs:
        for label, steps in (("gpuviewer, all steps", rb.steps), ("gpuviewer, without last", rb.steps[:-1])):
            comp = sum(s.compute_ns for s in steps) / 1e6
            busy = sum(s.busy_ns for s in steps) / 1e6
            win = sum(s.window_ns for s in steps) / 1e6
            comm = sum(s.comm_ns for s in steps)
            ov = 100 * sum(s.overlap_ns for s in steps) / comm if comm else 0.0
            print(f"{rb.rank:<5}{label:<28}{win:>10.1f}{comp:>12.1f}{busy - comp:>16.1f}{win - busy:>10.1f}{ov:>11.1f}")
        h = hta.get(rb.rank)
        if h:
            print(
                f"{rb.rank:<5}{'HTA ' + 'get_temporal_breakdown':<28}{h['kernel_time(us)'] / 1e3:>10.1f}"
                f"{h['compute_time(us)'] / 1e3:>12.1f}{h['non_compute_time(us)'] / 1e3:>16.1f}"
                f"{h['idle_time(us)'] / 1e3:>10.1f}{h.get('overlap_pctg', 0):>11.1f}"
            )


if __name__ == "__main__":
    main()
