"""copy_bound says how much its copies moved and at what rate: nsys-ai's h100_2gpu_1s copies
25.5 GB host-to-device a GPU at 27.7 GB/s, a PCIe link's rate, which is why only moving less data
helps; the finding gave the time and not the rate (an audit). Figures from the raw files: the
export's MEMCPY rows (bytes, copyKind 1 host-to-device) and the Kineto events' "bytes" argument.
A copy whose size is not on record leaves the rate out, not a rate of the others."""

from __future__ import annotations

import gzip
import json
import os

import numpy as np
from conftest import analyzed_json, compat_path, export_rows, profiler_steps, write_json_gz

from gpuviewer.model.fmt import format_bytes

COPY = os.path.join(os.path.dirname(__file__), "..", "data", "whatif_sync_copy", "copy.json.gz")


def _said(n: int, total: int, ns: int, what: str = "host-to-device") -> str:
    return (
        f"its {n:,} {what} copies move {format_bytes(total)}, {format_bytes(total / n)} each on average, "
        f"at {total / ns:,.1f} GB/s; "
    )


def test_nsys_copies_rate_per_gpu_from_the_export():
    path = compat_path("GindaChen__nsys-ai", "h100_2gpu_1s.sqlite")
    rows = export_rows(path, "SELECT globalPid, bytes, end - start FROM CUPTI_ACTIVITY_KIND_MEMCPY WHERE copyKind = 1")
    per: dict[int, list[int]] = {}
    for pid, b, d in rows:
        got = per.setdefault(pid, [0, 0, 0])
        got[0], got[1], got[2] = got[0] + 1, got[1] + b, got[2] + d
    assert len(per) == 2
    (f,) = [f for f in analyzed_json(path)["findings"] if f["rule"] == "copy_bound"]
    # each rank's sizes are one process's, every copy of it counted
    got = sorted((m["lead_copy_bytes"], m["lead_copy_gbps"]) for m in f["metrics"]["per_rank"].values())
    want = sorted((b, round(b / d, 3)) for _n, b, d in per.values())
    assert got == want
    # the rank named (the worst) is said with its own process's figures
    n, b, d = next(v for v in per.values() if v[1] == f["metrics"]["lead_copy_bytes"])
    assert _said(n, b, d) in f["title"], f["title"]
    assert 27 < b / d < 28.5  # 25.5 GB a GPU at 27.7 GB/s (the audit's figure)


def _in_steps(path: str, measured: set[int]) -> list[dict]:
    """The file's host-to-device copies launched inside the measured ProfilerStep#N ranges (a
    GPU op is its launching call's step)."""
    with gzip.open(path, "rt") as fh:
        ev = [e for e in json.load(fh)["traceEvents"] if e.get("ph") == "X"]
    steps, launch = profiler_steps(ev)
    out = []
    for e in ev:
        if e.get("cat") != "gpu_memcpy" or "HtoD" not in e["name"]:
            continue
        t = launch.get(e["args"].get("correlation"))
        if t is not None and any(n in measured and a <= t < b for n, a, b in steps):
            out.append(e)
    return out


def _measured(path: str) -> set[int]:
    out = analyzed_json(path) if path == COPY else None
    return {s["step"] for s in out["ranks"][0]["steps"] if not s["warmup"]} if out else set()


def test_kineto_copies_rate_from_their_bytes_argument():
    h2d = _in_steps(COPY, _measured(COPY))
    assert h2d and all(isinstance(e["args"].get("bytes"), int) for e in h2d)
    b = sum(e["args"]["bytes"] for e in h2d)
    ns = round(sum(e["dur"] for e in h2d) * 1e3)
    (f,) = [f for f in analyzed_json(COPY)["findings"] if f["rule"] == "copy_bound"]
    assert f["metrics"]["lead_copy_bytes"] == b
    assert abs(f["metrics"]["lead_copy_gbps"] - b / ns) < 0.01  # the store's ns from the file's µs
    assert f"its {len(h2d)} host-to-device copies move {format_bytes(b)}" in f["title"]
    # the producer's own bandwidth argument agrees (its rate per copy, weighted by time)
    bw = [(e["args"].get("memory bandwidth (GB/s)"), e["dur"]) for e in h2d]
    if all(isinstance(x, (int, float)) for x, _d in bw):
        weighted = sum(x * d for x, d in bw) / sum(d for _x, d in bw)
        assert abs(weighted - b / ns) / weighted < 0.01


def test_a_copy_of_unknown_size_leaves_the_rate_out():
    from gpuviewer.analysis.findings import analyze
    from gpuviewer.io.mem_args import memop_bytes
    from gpuviewer.io.session import load

    trace = load([COPY])
    idx, nbytes = memop_bytes(trace)
    known = analyze(trace, mem_bytes=lambda t: (idx, nbytes))
    (f,) = [f for f in known.findings if f.rule == "copy_bound"]
    assert "GB/s" in f.title and "lead_copy_gbps" in f.metrics
    some = nbytes.copy()
    some[int(np.argmax(some))] = -1  # one host-to-device copy's size not on record
    part = analyze(trace, mem_bytes=lambda t: (idx, some))
    (g,) = [g for g in part.findings if g.rule == "copy_bound"]
    assert "GB/s" not in g.title and "lead_copy_gbps" not in g.metrics
    assert g.title == f.title.replace(f.title[f.title.index("its 6 ") : f.title.index("compute ")], "")


def test_copies_outside_the_measured_steps_are_not_counted(tmp_path):
    """The rate clause counted every copy of the rank while the time beside it was the measured
    steps' (a review: 3 copies added before ProfilerStep#2 read 'its 9 host-to-device copies'
    beside the 6 copies' 90.0 ms). copy.json.gz with those 3 copies added: the finding counts
    the measured steps' copies, from the raw file, and none of the added."""
    import copy as copying

    with gzip.open(COPY, "rt") as fh:
        doc = json.load(fh)
    ev = doc["traceEvents"]
    first = next(e for e in ev if e.get("ph") == "X" and e.get("cat") == "gpu_memcpy")
    for k in range(3):
        e = copying.deepcopy(first)
        e["ts"] = first["ts"] - 60000 + k * 16000
        e["dur"] = 15000.0
        e["args"]["correlation"] = 99990 + k
        e["args"].pop("External id", None)
        ev.append(e)
    path = tmp_path / "copy_outside.json.gz"
    write_json_gz(path, doc)
    from gpuviewer.io.session import load
    from gpuviewer.session.analysis import analyze_session

    a = analyze_session(load([str(path)], use_cache=False))
    (f,) = [f for f in a.findings if f.rule == "copy_bound"]
    measured = {s["step"] for s in a.ranks[0]["steps"] if not s["warmup"]}
    h2d = _in_steps(str(path), measured)
    assert len(h2d) == 6
    assert f"its {len(h2d)} host-to-device copies move {format_bytes(sum(e['args']['bytes'] for e in h2d))}" in f.title
    assert f.metrics["lead_copy_bytes"] == sum(e["args"]["bytes"] for e in h2d)
