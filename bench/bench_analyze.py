"""Analysis budgets: all findings for 8 ranks x 1M events (issue 5: <= 2 s) and for 64 ranks
(issue 11: <= 3 s, no finding repeated per rank). Prints each figure next to its target.

  python ../shared/tools/scale_trace.py kineto ../shared/traces/kineto/launch_bound_big.json.gz /tmp/scaled/r8 --ranks 8 --tiles 1
  python ../shared/tools/scale_trace.py kineto ../shared/traces/kineto/ddp/ddp_rank0.json.gz /tmp/scaled/r64 --ranks 64 --tiles 1
  python bench/bench_analyze.py [/tmp/scaled/r8] [/tmp/scaled/r64]

Each session is opened first (from the cache after the first run; not timed); then the whole
analysis (NCCL arguments and op shapes from the cache entry, kept there at open since issue 24's
speed work, or from the files for an older entry; steps, collectives, late ranks, critical paths,
findings, what-if savings, efficiency) runs 3 times from a cold per-session cache and the median
is reported, in wall seconds and in CPU seconds of the process (every thread's; a busy machine
stretches the wall time far more than the CPU time).

  python bench/bench_analyze.py --phases /tmp/scaled/r64

also times one more analysis phase by phase (wall and CPU seconds of each phase's function).
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


def bench(path: str, phases: bool = False) -> None:
    from gpuviewer.io.session import load
    from gpuviewer.session.analysis import analyze_session

    t0 = time.perf_counter()
    trace = load([path])
    print(f"# {path}: {len(trace.ranks)} ranks, {trace.n_events:,} events; open {time.perf_counter() - t0:.1f} s")
    times, cpus = [], []
    for _ in range(3):
        trace.derived.clear()
        s, c = time.perf_counter(), time.process_time()
        a = analyze_session(trace)
        times.append(time.perf_counter() - s)
        cpus.append(time.process_time() - c)
    med = statistics.median(times)
    target = TARGETS.get(os.path.basename(path.rstrip("/")), 3.0)
    per_rule = Counter(f.rule for f in a.findings)
    print(f"findings: {len(a.findings)} top-level ({', '.join(f'{r} x{n}' for r, n in sorted(per_rule.items()))})")
    worst = max(per_rule.values(), default=0)
    print(
        f"most top-level findings of one rule            {worst:8d}     target <= 2 (not one per rank) "
        f"{'OK' if worst <= 2 else 'OVER'}"
    )
    print(
        f"analyze, seconds (median of 3)                {med:8.3f} s   target <= {target}   "
        f"{'OK' if med <= target else 'OVER'}"
    )
    print(
        f"analyze, CPU seconds (median of 3)            {statistics.median(cpus):8.3f} s   "
        f"(load average {os.getloadavg()[0]:.1f})"
    )
    if phases:
        _phases(trace)


# (module, function, label): each phase's function, as the analysis calls it
PHASES = [
    ("gpuviewer.io.comm_args", "collective_args", "NCCL kernel arguments"),
    ("gpuviewer.analysis.findings", "map_rank", "the ranks' maps"),
    ("gpuviewer.analysis.findings", "reduce", "reduce"),
    ("gpuviewer.analysis.whatif", "graph", "dependency model"),
    ("gpuviewer.analysis.replay_levels", "levels", "replay levels"),
    ("gpuviewer.analysis.findings", "attach_paths", "critical paths (model, levels included)"),
    ("gpuviewer.analysis.savings", "attach_savings", "savings"),
    ("gpuviewer.io.op_shapes", "op_shapes", "op shapes"),
    ("gpuviewer.session.analysis", "efficiency_of", "efficiency (op shapes included)"),
    ("gpuviewer.analysis.efficiency_findings", "findings", "efficiency findings"),
]


def _phases(trace) -> None:
    """One more analysis with each phase's function wrapped to add up its wall and CPU time
    (phases nest: the critical paths include the model and the levels)."""
    import importlib

    from gpuviewer.session.analysis import analyze_session

    wall: dict[str, float] = {}
    cpu: dict[str, float] = {}
    saved = []

    def wrap(mod, name, label):
        f = getattr(mod, name)
        saved.append((mod, name, f))

        def timed(*a, **k):
            t, c = time.perf_counter(), time.process_time()
            try:
                return f(*a, **k)
            finally:
                wall[label] = wall.get(label, 0.0) + time.perf_counter() - t
                cpu[label] = cpu.get(label, 0.0) + time.process_time() - c

        setattr(mod, name, timed)

    for m, name, label in PHASES:
        wrap(importlib.import_module(m), name, label)
    try:
        trace.derived.clear()
        t, c = time.perf_counter(), time.process_time()
        analyze_session(trace)
        print(f"phases of one analysis: {time.perf_counter() - t:.3f} s wall, {time.process_time() - c:.3f} s CPU")
        for _m, _n, label in PHASES:
            if label in wall:
                print(f"  {label:42s} {wall[label]:7.3f} s wall {cpu[label]:7.3f} s CPU")
    finally:
        for mod, name, f in saved:
            setattr(mod, name, f)


def main() -> None:
    phases = "--phases" in sys.argv[1:]
    paths = [a for a in sys.argv[1:] if a != "--phases"] or [
        p for p in ("/tmp/scaled/r8", "/tmp/scaled/r64") if os.path.exists(p)
    ]
    for p in paths:
        bench(p, phases)


if __name__ == "__main__":
    main()
