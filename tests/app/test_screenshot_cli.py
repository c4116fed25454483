"""`gpuviewer screenshot` in a real subprocess, offscreen."""

from conftest import SAMPLES, png_size, run_cli, trace_path


def test_png_default_size_and_window(tmp_path):
    out = tmp_path / "ddp.png"
    p = run_cli("screenshot", f"{SAMPLES}/ddp", "-o", str(out), env={"QT_QPA_PLATFORM": "offscreen"})
    assert p.returncode == 0, p.stderr
    w, h = png_size(out)
    assert w >= 1600 and h >= 900
    out2 = tmp_path / "win.png"
    p = run_cli(
        "screenshot",
        trace_path("nsys", "nsys_ddp.sqlite"),
        "-o",
        str(out2),
        "--window",
        "8400:9300",
        "--size",
        "1200x700",
        env={"QT_QPA_PLATFORM": "offscreen"},
    )
    assert p.returncode == 0, p.stderr
    assert png_size(out2) == (1200, 700)


def test_svg_contains_lane_labels(tmp_path):
    out = tmp_path / "ddp.svg"
    p = run_cli("screenshot", f"{SAMPLES}/ddp", "-o", str(out), env={"QT_QPA_PLATFORM": "offscreen"})
    assert p.returncode == 0, p.stderr
    text = out.read_text(errors="replace")
    assert text.lstrip().startswith("<?xml") and "<svg" in text
    assert "Rank 0" in text and "NCCL" in text


def test_bad_input_and_arguments_exit_2(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text("nope")
    for args in (
        [str(bad), "-o", str(tmp_path / "x.png")],
        [f"{SAMPLES}/ddp", "-o", str(tmp_path / "x.jpg")],
        [f"{SAMPLES}/ddp", "-o", str(tmp_path / "x.png"), "--size", "big"],
        ["/nonexistent", "-o", str(tmp_path / "x.png")],
    ):
        p = run_cli("screenshot", *args, env={"QT_QPA_PLATFORM": "offscreen"})
        assert p.returncode == 2, (args, p.stderr)
        assert "Traceback" not in p.stderr and p.stderr.startswith("gpuviewer:")


def test_timeline_only_is_the_bare_view_of_the_session(tmp_path):
    """--timeline-only draws the session in a bare timeline (no docks): the requested size, and
    the lane labels of both ranks in an SVG (text stays text)."""
    out = tmp_path / "tl.png"
    r = run_cli(
        "screenshot", SAMPLES + "/ddp", "-o", str(out), "--size", "1000x500", "--timeline-only", "--window", "10:60"
    )
    assert r.returncode == 0, r.stderr
    assert png_size(out) == (1000, 500)
    svg = tmp_path / "tl.svg"
    r = run_cli("screenshot", SAMPLES + "/ddp", "-o", str(svg), "--timeline-only")
    assert r.returncode == 0, r.stderr
    text = svg.read_text()
    assert "Rank 0" in text and "Rank 1" in text and "Findings" not in text
