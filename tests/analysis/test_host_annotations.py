"""The host's framework time inside annotated ranges alone. HTA's trace_filter wraps its loop in
record_function ranges ('## backward ##', 'Optimizer.step#Shampoo.step'): its host split said
"framework ops 98%" while CPU ops and CUDA calls cover about half of each step, the rest only by
an annotation (an audit). The part is now measured and said. Independent figure from the raw JSON
here: per ProfilerStep, the union of annotations with ops less the union of ops alone."""

from __future__ import annotations

import gzip
import json
import os
import re

from conftest import compat_path, run_cli_once

FOLDER = compat_path("facebookresearch__HolisticTraceAnalysis", "trace_filter")
OPS = ("cpu_op", "operator", "cuda_runtime", "runtime", "python_function", "cuda_driver")


def _union(spans, a, b) -> float:
    tot, cs, ce = 0.0, None, None
    for s, e in sorted((max(s, a), min(e, b)) for s, e in spans if e > a and s < b):
        if cs is None or s > ce:
            tot += (ce - cs) if cs is not None else 0.0
            cs, ce = s, e
        else:
            ce = max(ce, e)
    return tot + ((ce - cs) if cs is not None else 0.0)


def _raw_shares() -> dict[tuple[int, int], float]:
    """(rank, step) -> share of the step's host range under annotations alone."""
    out = {}
    for name in sorted(os.listdir(FOLDER)):
        with gzip.open(os.path.join(FOLDER, name), "rt") as f:
            d = json.load(f)
        rank = d["distributedInfo"]["rank"]
        x = [e for e in d["traceEvents"] if e.get("ph") == "X"]
        ops = [(e["ts"], e["ts"] + e["dur"]) for e in x if str(e.get("cat", "")).lower() in OPS]
        notes = ops + [
            (e["ts"], e["ts"] + e["dur"])
            for e in x
            if str(e.get("cat", "")).lower() == "user_annotation" and not e["name"].startswith("ProfilerStep")
        ]
        for s in x:
            m = re.match(r"ProfilerStep#(\d+)$", s.get("name", ""))
            if m:
                a, b = s["ts"], s["ts"] + s["dur"]
                out[(rank, int(m.group(1)))] = (_union(notes, a, b) - _union(ops, a, b)) / (b - a)
    return out


def test_annotated_time_without_ops_is_measured_and_said():
    raw = _raw_shares()
    assert raw and min(raw.values()) > 0.3
    p = run_cli_once("analyze", FOLDER, "--json")
    assert p.returncode == 0, p.stderr[-2000:]
    out = json.loads(p.stdout)
    for r in out["ranks"]:
        for s in r["steps"]:
            got = s["host_annotation_ns"] / (s["host_end_ns"] - s["host_start_ns"])
            assert abs(got - raw[(r["rank"], s["step"])]) < 0.005, (r["rank"], s["step"], got)
            assert s["host_annotation_ns"] <= s["host_framework_ns"]
    text = run_cli_once("analyze", FOLDER)
    for r in out["ranks"]:
        share = f"{r['host_annotation_only']:.0%}"
        assert f"(including {share} in annotated ranges with no op recorded under them" in text.stdout
