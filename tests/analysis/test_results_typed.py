"""Typed analysis results: a finding read into Finding/Evidence and written back is the same
JSON `analyze --json` prints, on every shared trace; evidence is found under whichever key the
rule used."""

import json
import os

import pytest
from conftest import SAMPLES, run_cli, trace_path

from gpuviewer.analysis.results import Analysis, evidence_of

CASES = [
    trace_path("kineto", "ddp"),
    trace_path("kineto", "gpu_straggler"),
    trace_path("kineto", "step_outlier.json.gz"),
    trace_path("nsys", "nsys_ddp.sqlite"),
    trace_path("kineto", "pp_gpu"),
    SAMPLES + "/ddp",
]


@pytest.mark.parametrize("path", CASES, ids=os.path.basename)
def test_round_trip_equals_the_cli_json(path):
    r = run_cli("analyze", "--json", path)
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    a = Analysis.from_json(doc)
    assert json.loads(json.dumps(a.to_json())) == doc
    flat = []

    def walk(fs):
        for f in fs:
            flat.append(f)
            walk(f.children)

    walk(a.findings)
    for f in flat:
        raw = f.to_json()
        ev = f.evidence
        assert [e.name for e in ev] == [x["name"] for x in evidence_of(raw, with_excess=True)]
        assert all(e.ms is None or e.ms >= 0 for e in ev)
        assert f.impact_ms >= 0 and f.start_ns <= f.end_ns


def test_session_results_are_typed():
    from gpuviewer.session import Session

    s = Session.open(SAMPLES + "/ddp")
    res = s.analysis
    assert res.findings and res.findings[0].title == s.analysis_json["findings"][0]["title"]
    late = [f for f in res.findings if f.rule == "straggler"]
    assert late and late[0].evidence  # the late rank's host time, named
