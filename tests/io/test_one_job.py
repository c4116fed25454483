"""Files of different jobs in one folder are said not to be one job's ranks (io/one_job.py)."""

from __future__ import annotations

import os

from conftest import compat_path, run_cli, trace_path
from kineto_truth import load_json

TRACE_DIFF = compat_path("facebookresearch__HolisticTraceAnalysis", "trace_diff")


def _meta(folder: str) -> dict[str, dict]:
    out = {}
    for f in sorted(os.path.join(d, x) for d, _, xs in os.walk(folder) for x in xs):
        if f.endswith((".json", ".json.gz")):
            ev, meta = load_json(f)
            f = os.path.basename(f)
            starts = [e["ts"] for e in ev if str(e.get("name", "")).startswith("ProfilerStep#")]
            out[f] = {
                "world": (meta.get("distributedInfo") or {}).get("world_size"),
                "device": [p.get("name") for p in meta.get("deviceProperties") or []],
                "start_us": min(starts),
            }
    return out


def test_captures_of_two_jobs_are_said_not_to_be_one():
    """HTA's trace_diff folder: control.json.gz and test.json.gz record different world sizes and
    devices and their first steps began days apart (read from the raw files here); the one warning names each."""
    meta = _meta(TRACE_DIFF)
    (a, ma), (b, mb) = sorted(meta.items())
    assert ma["world"] != mb["world"] and ma["device"] != mb["device"]
    days = abs(ma["start_us"] - mb["start_us"]) / 86400e6
    p = run_cli("info", TRACE_DIFF)
    assert p.returncode == 0, p.stderr
    line = next(x for x in (p.stdout + p.stderr).splitlines() if "not be one job" in x)
    for f, m in meta.items():
        assert f"{m['world']} ({f})" in line and f"{m['device'][0]} ({f})" in line, line
    assert f"{days:.1f} days apart" in line, (line, days)


def test_the_ranks_of_one_job_are_not_warned_about():
    for parts in (("kineto", "ddp"), ("kineto", "fsdp"), ("nsys", "nsys_ddp.sqlite")):
        p = run_cli("info", trace_path(*parts))
        assert p.returncode == 0, p.stderr
        assert "not be one job" not in p.stdout + p.stderr, parts
