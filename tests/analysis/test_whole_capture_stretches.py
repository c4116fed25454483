"""A capture without steps whose GPU waits for its host in several long stretches, the host
running no recorded op for most of each: the host-bound finding names its longest and says the
others with their total, so one recurring stall does not read as one stall (pipit's saxpy: four
stretches of 172-196 ms between its MPI iterations; an audit's). Against the raw export."""

import json
import re
import sqlite3

from conftest import compat_path, run_cli_once

SAXPY = compat_path("hpcgroup__pipit", "saxpy-mpi-cuda_nsys_perlmutter0.sqlite")
MS = 1e6


def _union(iv):
    out = []
    for a, b in sorted(iv):
        if out and a <= out[-1][1]:
            out[-1][1] = max(out[-1][1], b)
        else:
            out.append([a, b])
    return out


def _covered(u, a, b):
    return sum(max(0, min(e, b) - max(s, a)) for s, e in u)


def _raw_stretches():
    """(start, end, unrecorded ns) of each GPU idle stretch of 1 ms or more whose next op was not
    launched before it began, the host's recorded time being its CUDA calls, NVTX ranges and OS calls."""
    db = sqlite3.connect(f"file:{SAXPY}?mode=ro", uri=True)
    try:
        ops = sorted(
            db.execute(
                "SELECT start, end, correlationId FROM CUPTI_ACTIVITY_KIND_KERNEL UNION ALL "
                "SELECT start, end, correlationId FROM CUPTI_ACTIVITY_KIND_MEMCPY UNION ALL "
                "SELECT start, end, correlationId FROM CUPTI_ACTIVITY_KIND_MEMSET"
            ).fetchall()
        )
        calls = db.execute("SELECT start, end, correlationId FROM CUPTI_ACTIVITY_KIND_RUNTIME").fetchall()
        nvtx = db.execute("SELECT start, end FROM NVTX_EVENTS WHERE end IS NOT NULL").fetchall()
        osrt = db.execute("SELECT start, end FROM OSRT_API").fetchall()
    finally:
        db.close()
    returned = {c: e for _s, e, c in calls}
    host = _union([(s, e) for s, e, _c in calls] + nvtx + osrt)
    out, end = [], None
    for s, e, corr in ops:
        if end is not None and s - end >= MS and returned.get(corr, end + 1) > end:
            out.append((end, s, (s - end) - _covered(host, end, s)))
        end = e if end is None else max(end, e)
    return out


def test_recurring_unrecorded_stretches_are_said_with_their_total():
    raw = _raw_stretches()
    alike = [x for x in raw if 2 * x[2] >= x[1] - x[0]]
    assert len(alike) == 4  # the file's four MPI iterations
    out = json.loads(run_cli_once("analyze", SAXPY, "--json").stdout)
    f = next(f for f in out["findings"] if f["rule"] == "host_bound_idle")
    longest = max(alike, key=lambda x: x[1] - x[0])
    m = re.search(
        r"longest idle stretch, ([\d.,]+) ms .* ran no recorded op for ([\d.,]+) ms .*; (\d+) more idle stretches "
        r"\(([\d., ]+) ms\) are like it, the host mostly outside any recorded op: (\d+) stretches, ([\d.,]+) ms of "
        r"GPU idle time, ([\d.,]+) ms of which the host spent in no recorded op",
        f["title"],
    )
    assert m, f["title"]
    num = [float(x.replace(",", "")) for x in m.groups()[:2]]
    assert abs(num[0] - (longest[1] - longest[0]) / MS) <= 0.05 and abs(num[1] - longest[2] / MS) <= 0.05
    assert int(m.group(3)) == 3 and int(m.group(5)) == 4
    others = sorted(((b - a) / MS for a, b, _u in alike if (a, b) != longest[:2]), reverse=True)
    assert [float(x) for x in m.group(4).split(", ")] == [round(x, 1) for x in others]
    assert abs(float(m.group(6).replace(",", "")) - sum(b - a for a, b, _u in alike) / MS) <= 0.05
    assert abs(float(m.group(7).replace(",", "")) - sum(u for _a, _b, u in alike) / MS) <= 0.05
    assert f["metrics"]["stretches_alike"] == 4
    # said, not priced: a capture without steps has no steady state to replay
    assert f.get("saves_ms") is None
