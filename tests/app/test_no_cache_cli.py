"""`--no-cache` on the headless window commands: `screenshot` and `report` neither read nor write
the column cache (they once accepted the option and ignored it). Real subprocesses, each with
its own cache folder (GPUVIEWER_CACHE_DIR)."""

import os

import pytest
from conftest import SAMPLES, run_cli

INPUT = os.path.join(SAMPLES, "dataloader_stall.json.gz")


def _entries(d) -> list[str]:
    return sorted(os.listdir(d)) if os.path.isdir(d) else []


@pytest.mark.parametrize("cmd,out", [("screenshot", "shot.png"), ("report", "report.md")])
def test_no_cache_leaves_the_cache_alone(tmp_path, cmd, out):
    cache = tmp_path / "cache" / "sessions"
    env = {"GPUVIEWER_CACHE_DIR": str(cache), "QT_QPA_PLATFORM": "offscreen"}
    p = run_cli(cmd, INPUT, "-o", str(tmp_path / out), "--no-cache", env=env)
    assert p.returncode == 0, p.stderr
    assert (tmp_path / out).stat().st_size > 0
    assert _entries(cache) == []
    # the same command without the option does cache: the folder checked is the one in use
    p = run_cli(cmd, INPUT, "-o", str(tmp_path / out), env=env)
    assert p.returncode == 0, p.stderr
    assert len(_entries(cache)) == 1


@pytest.mark.parametrize(
    "args",
    [
        ("info",),
        ("analyze", "--json"),
        ("sql", "SELECT count(*) FROM kernels"),
        ("stats", "--report", "kern"),
        ("diff", INPUT),
        ("screenshot", "-o", "TMP/t.png", "--timeline-only"),
    ],
    ids=lambda a: a[0] + ("-timeline-only" if "--timeline-only" in a else ""),
)
def test_every_command_honours_no_cache(tmp_path, args):
    cache = tmp_path / "cache" / "sessions"
    env = {"GPUVIEWER_CACHE_DIR": str(cache), "QT_QPA_PLATFORM": "offscreen"}
    args = tuple(a.replace("TMP", str(tmp_path)) for a in args)
    p = run_cli(args[0], INPUT, *args[1:], "--no-cache", env=env)
    assert p.returncode == 0, p.stderr
    assert _entries(cache) == []
    p = run_cli(args[0], INPUT, *args[1:], env=env)  # without it, the same folder gets the session
    assert p.returncode == 0, p.stderr
    assert len(_entries(cache)) == 1
