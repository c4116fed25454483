import json

from conftest import SAMPLES, run_cli, run_cli_once

import gpuviewer


def test_version():
    p = run_cli("--version")
    assert p.returncode == 0
    assert p.stdout.strip() == f"gpuviewer {gpuviewer.__version__}"


def test_info_on_shipped_sample_readable_and_json():
    p = run_cli("info", f"{SAMPLES}/ddp")
    assert p.returncode == 0, p.stderr
    assert "rank 0" in p.stdout and "rank 1" in p.stdout and "NCCL" in p.stdout
    j = run_cli_once("info", f"{SAMPLES}/ddp", "--json")  # the run's one, shared by modules
    out = json.loads(j.stdout)
    assert set(out) >= {"format", "files", "load_seconds", "events", "kernels", "ranks"}
    # the rank line's time says what it spans (it read as a step time)
    r0 = out["ranks"][0]
    assert f", {(r0['end_ns'] - r0['start_ns']) / 1e6:.1f} ms from its first event to its last" in p.stdout
    assert set(out["ranks"][0]) >= {
        "rank",
        "events",
        "kernels",
        "nccl_kernels",
        "lanes",
        "devices",
        "steps",
        "start_ns",
        "end_ns",
    }


def test_analyze_says_what_to_do_under_each_cause():
    """The text listed each finding's evidence and saving but not its advice, which only --json,
    the report and the window carried: resnet50's DataLoader stall never named num_workers>0 (an
    audit read the text). Each top-level finding's advice is its 'to do:' line, under its what-if
    line; a symptom's is left to its cause."""
    from conftest import analyzed_json, analyzed_text, trace_path

    path = trace_path("kineto", "ddp")
    got = analyzed_json(path)["findings"]
    lines = analyzed_text(path).splitlines()
    todo = [ln.strip().removeprefix("to do: ") for ln in lines if ln.strip().startswith("to do: ")]
    assert todo == [f["advice"] for f in got if f["advice"]]
    assert len(todo) >= 3
    # right under its finding (and its what-if line), before the next finding or symptom
    for f in got:
        k = next(i for i, ln in enumerate(lines) if f["title"] in ln)
        after = lines[k + 1 : k + 3]
        assert any(ln.strip() == f"to do: {f['advice']}" for ln in after), (f["rule"], after)
