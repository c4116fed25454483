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
