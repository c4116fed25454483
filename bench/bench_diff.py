"""`gpuviewer diff` budget (issue 14): two 1M-event sessions compared in <= 2 s.

  python bench/bench_diff.py [TRACE]

TRACE defaults to launch_bound_big.json.gz (1,000,113 events). B is the same trace with every
event moved 1 s later (a clock offset: model.align.apply_offsets), so the diff must come out all
zeros, which is checked. The session is opened once first to write the cache (not timed); then,
3 times: both sessions opened from the cache, B shifted, both measured (breakdown, collectives,
per-step totals) and compared. The median of the whole is held against the target; the part
after opening is printed beside it.
"""

from __future__ import annotations

import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import TRACES  # noqa: E402

TARGET_S = 2.0
SHIFT_NS = 1_000_000_000


def once(path: str) -> tuple[float, float, dict, str]:
    from gpuviewer.analysis.diff import diff
    from gpuviewer.analysis.diff_tables import measure
    from gpuviewer.io.comm_args import collective_args
    from gpuviewer.model.align import apply_offsets
    from gpuviewer.session import open_session

    t0 = time.perf_counter()
    a = open_session([path])
    b = open_session([path])
    apply_offsets(b, lambda rank, t: SHIFT_NS)
    t1 = time.perf_counter()
    d = diff(measure(a, collective_args(a)), measure(b, collective_args(b)))
    t2 = time.perf_counter()
    # the file's events: slices and instants on lanes, and both ends of each flow arrow
    return t2 - t0, t2 - t1, d, f"{a.n_events + 2 * len(a.flows[0]):,} ({a.n_events:,} on lanes)"


def main() -> None:
    path = sys.argv[1] if len(sys.argv) > 1 else os.path.join(TRACES, "kineto", "launch_bound_big.json.gz")
    from gpuviewer.session import open_session

    open_session([path])  # write the cache
    runs = [once(path) for _ in range(3)]
    total = statistics.median(r[0] for r in runs)
    compare = statistics.median(r[1] for r in runs)
    d, events = runs[0][2], runs[0][3]
    rows = d["kernels"] + d["host_ops"] + d["step_parts"]
    zero = all(r["delta_ns"] == 0 for r in rows) and not any(r["significant"] for r in rows)
    print(
        f"# {os.path.basename(path)}: 2 x {events} events, B shifted by {SHIFT_NS / 1e9:g} s; "
        f"{len(d['kernels'])} GPU op names, {len(d['host_ops'])} host op names"
    )
    print(
        f"diff, 2 sessions from the cache, seconds (median of 3)   {total:7.3f} s   target <= {TARGET_S}   "
        f"{'OK' if total <= TARGET_S else 'OVER'}"
    )
    print(f"  of which measuring and comparing                      {compare:7.3f} s")
    print(f"every delta zero, none significant                      {'yes' if zero else 'NO'}")


if __name__ == "__main__":
    main()
