"""Hostile options for `screenshot` (issue 18): --window and --size values that used to raise a
traceback, take gigabytes or flood stderr are refused with one line naming the option and its
value, before any trace is loaded; normal headless runs print nothing on stderr."""

import os
import resource

import pytest
from conftest import SAMPLES, png_size
from hostile import folder_state, run

from gpuviewer.app.gui import MAX_SIDE, _parse_size, _parse_window


def rss_bound(mb: float) -> float:
    """hostile.run reads the child's ru_maxrss, which Linux carries over from this (pytest)
    process across vfork+exec; so a bound below this process's own peak cannot be checked.
    (A child's VmHWM in /proc/self/status would not have this floor.)"""
    own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return max(mb, own + 16)


DDP = os.path.join(SAMPLES, "ddp")


def _assert_option_refused(r, option: str, value: str, needle: str) -> None:
    assert "Traceback" not in r.stderr, r.stderr[-3000:]
    assert r.returncode == 2, (r.returncode, r.stderr[-2000:])
    lines = r.lines()
    assert len(lines) == 1, lines[:10]
    assert lines[0].startswith(f"gpuviewer: {option} {value}: "), lines[0]
    assert needle.lower() in lines[0].lower(), (needle, lines[0])


@pytest.mark.parametrize(
    "value,needle",
    [
        ("nan:5", "finite"),
        ("0:inf", "finite"),
        ("-inf:0", "finite"),
        ("0:1e300", "finite"),
        ("5:1", "before"),
        ("3:3", "before"),
        ("abc", "START_MS:END_MS"),
        ("1:2:3", "START_MS:END_MS"),
        ("a:b", "numbers"),
        (":", "numbers"),
    ],
)
def test_bad_window_refused(tmp_path, value, needle):
    out = tmp_path / "x.png"
    r = run("screenshot", DDP, "-o", str(out), f"--window={value}", timeout=120, fork=False)
    _assert_option_refused(r, "--window", value, needle)
    assert not out.exists()
    assert r.rss_mb < rss_bound(200), r.rss_mb  # refused before Qt and the trace are loaded


@pytest.mark.parametrize(
    "value,needle",
    [
        ("20000x20000", f"at most {MAX_SIDE}"),
        ("100000x100000", f"at most {MAX_SIDE}"),
        ("1600x9000", f"at most {MAX_SIDE}"),
        ("0x0", "too small"),
        ("-5x10", "too small"),
        ("199x900", "too small"),
        ("big", "WxH"),
        ("10x", "WxH"),
        ("1600x900x2", "WxH"),
        ("1e3x900", "WxH"),
    ],
)
def test_bad_size_refused(tmp_path, value, needle):
    out = tmp_path / "x.png"
    before = folder_state(str(tmp_path))
    r = run("screenshot", DDP, "-o", str(out), f"--size={value}", timeout=120, fork=False)
    _assert_option_refused(r, "--size", value, needle)
    assert folder_state(str(tmp_path)) == before
    assert r.rss_mb < rss_bound(200), r.rss_mb  # 20000x20000 took 4.6 GB before


def test_parsers_accept_good_values():
    assert _parse_size("1600x900") == (1600, 900)
    assert _parse_size("200X150") == (200, 150)
    assert _parse_size(f"{MAX_SIDE}x{MAX_SIDE}") == (MAX_SIDE, MAX_SIDE)
    assert _parse_window("-5:12.5") == (-5.0, 12.5)
    with pytest.raises(ValueError):
        _parse_size(f"{MAX_SIDE + 1}x900")


def test_normal_screenshot_prints_nothing_on_stderr(tmp_path):
    out = tmp_path / "x.png"
    r = run("screenshot", DDP, "-o", str(out), "--window", "0:50", "--size", "1400x800", timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    assert r.stderr == "", r.stderr[-3000:]  # no "propagateSizeHints()" noise from the offscreen platform
    assert png_size(out) == (1400, 800)


def test_size_below_the_window_minimum_says_so(tmp_path):
    out = tmp_path / "x.png"
    # (the laptop layout lets the window shrink to about 540x350: ask for less than that)
    r = run("screenshot", DDP, "-o", str(out), "--size", "300x200", "--whole-window", timeout=300)
    assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr[-3000:]
    (line,) = r.lines()
    w, h = png_size(out)
    assert (w, h) != (300, 200)
    assert line.startswith("gpuviewer: warning: --size 300x200") and f"the picture is {w}x{h}" in line


def test_normal_report_prints_nothing_on_stderr(tmp_path):
    r = run("report", DDP, "-o", str(tmp_path / "r.html"), timeout=300)
    assert r.returncode == 0 and r.stderr == "", r.stderr[-3000:]


def test_qt_filter_keeps_real_messages(capfd):
    from PySide6.QtCore import qInstallMessageHandler, qWarning

    from gpuviewer.app.gui import _quiet_qt

    _quiet_qt()
    try:
        qWarning("This plugin does not support propagateSizeHints()")
        qWarning("QPainter::begin: a real problem")
    finally:
        qInstallMessageHandler(None)
    err = capfd.readouterr().err
    assert "propagateSizeHints" not in err and "QPainter::begin: a real problem" in err


def test_region_far_wider_than_the_view_does_not_crash(tmp_path):
    """A region annotation reaching 1e15 ns before the trace: clipped to the view, no crash
    (Qt's raster engine segfaults on rectangles that wide)."""
    import json as _json

    from conftest import SAMPLES
    from hostile import assert_clean
    from hostile import run as _run

    src = os.path.join(SAMPLES, "dataloader_stall.json.gz")
    info = _json.loads(_run("info", src, "--json").stdout)
    t0, t1 = info["ranks"][0]["start_ns"], info["ranks"][0]["end_ns"]
    ann = tmp_path / "wide.json"
    ann.write_text(
        _json.dumps(
            {
                "annotations": [
                    {"kind": "region", "text": "wide", "start_ns": t0 - 10**15, "end_ns": t1 + 10**15, "rank": 0},
                    {"kind": "note", "text": "far", "start_ns": t0 - 10**15, "end_ns": t0 - 10**15, "rank": 0},
                ]
            }
        )
    )
    out = tmp_path / "x.png"
    r = _run("screenshot", src, "-o", str(out), "--annotations", str(ann))
    assert_clean(r)
    assert out.stat().st_size > 10_000
