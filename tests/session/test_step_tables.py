"""The two step tables, the session's `steps` (query.tables) and a summary's steps.parquet
(scale.summary), carry the same columns in the same order (one list, analysis.breakdown's
STEP_COLUMNS) and the values `analyze --json` prints for each rank's steps."""

import json
import os

import duckdb
import pytest
from conftest import SAMPLES, run_cli

from gpuviewer.session import Session

DDP = os.path.join(SAMPLES, "ddp")
# the session's table names the times without their unit, and adds each step's length
RENAMED = {"start_ns": "start", "end_ns": "end", "host_start_ns": "host_start", "host_end_ns": "host_end"}


@pytest.fixture(scope="module")
def written(tmp_path_factory):
    out = str(tmp_path_factory.mktemp("sum") / "ddp.gvsum")
    r = run_cli("analyze", DDP, "--summary", out, "--json")
    assert r.returncode == 0, r.stderr
    parquet = duckdb.sql(f"SELECT * FROM read_parquet('{os.path.join(out, 'steps.parquet')}')").df()
    return json.loads(r.stdout), parquet


def test_the_summary_and_the_session_have_the_same_step_columns(written):
    _, parquet = written
    steps = Session.open([DDP]).steps
    assert [RENAMED.get(c, c) for c in parquet.columns] == [c for c in steps.columns if c != "dur"]
    assert list(parquet.columns[:3]) == ["rank", "step", "start_ns"]
    assert list(parquet.columns[-2:]) == ["warmup", "utilization"]


def test_the_summary_holds_what_analyze_json_says_of_each_step(written):
    analysis, parquet = written
    want = [
        (r["rank"], s["step"], *(s[c] for c in parquet.columns[2:-2]), bool(s.get("warmup")))
        for r in analysis["ranks"]
        for s in r["steps"]
    ]
    got = [(int(row[0]), int(row[1]), *(int(v) for v in row[2:-2]), bool(row[-2])) for row in parquet.to_numpy()]
    assert want and sorted(got) == sorted(want)
