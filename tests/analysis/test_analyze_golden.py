"""`analyze --json` kept byte for byte (issue 29): a refactor of the analysis, the session or the
readers must not change one byte of what users and scripts read. tests/data/analyze_golden holds
the output of the sample and three small shared traces as of the typed-Analysis refactor.

A deliberate change of what the analysis says (a rule corrected, a field added) rewrites them:
GPUVIEWER_WRITE_GOLDEN=1 bash scripts/test.sh tests/analysis/test_analyze_golden.py, and the diff of the
JSON files is reviewed with the change."""

import os

import pytest
from conftest import ROOT, SAMPLES, run_cli, trace_path

GOLDEN = os.path.join(ROOT, "tests", "data", "analyze_golden")
WRITE = os.environ.get("GPUVIEWER_WRITE_GOLDEN") == "1"
INPUTS = {
    "ddp": lambda: os.path.join(SAMPLES, "ddp"),
    "step_outlier": lambda: trace_path("kineto", "step_outlier.json.gz"),
    "nsys_single": lambda: trace_path("nsys", "nsys_single.sqlite"),
    "stall_on": lambda: trace_path("whatif", "stall_on.json.gz"),
}


@pytest.mark.parametrize("name", list(INPUTS))
def test_analyze_json_is_unchanged(name):
    r = run_cli("analyze", INPUTS[name](), "--json")
    assert r.returncode == 0, r.stderr
    path = os.path.join(GOLDEN, name + ".json")
    if WRITE:
        with open(path, "w", encoding="utf-8", newline="") as f:
            f.write(r.stdout)
        pytest.skip(f"wrote {path}")
    with open(path, encoding="utf-8", newline="") as f:
        want = f.read()
    assert r.stdout == want, f"analyze --json of {name} changed; if deliberate, GPUVIEWER_WRITE_GOLDEN=1 rewrites it"
