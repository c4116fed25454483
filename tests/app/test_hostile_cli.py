"""Hostile inputs at the session and command-line level (issue 18, cases 1, 7, 10, 13, 15, 16):
each case is built here; every run asserts the exit code, the one-line message naming the file,
no traceback, and the input folder unchanged (hashes, mtimes, no new files)."""

from __future__ import annotations

import gzip
import json
import os
import shutil
import sqlite3

import pytest
from conftest import SAMPLES, run_cli_once, trace_path
from hostile import assert_clean, assert_refused, folder_state, run


def _tiny_trace(n=20, name="gemm"):
    evs = [
        {
            "ph": "X",
            "cat": "kernel",
            "name": name,
            "pid": 0,
            "tid": 7,
            "ts": 1000 + 10 * i,
            "dur": 5,
            "args": {"device": 0, "stream": 7, "correlation": i},
        }
        for i in range(n)
    ]
    evs += [{"ph": "X", "cat": "cpu_op", "name": "ProfilerStep#1", "pid": 1, "tid": 1, "ts": 990, "dur": 300}]
    return {"traceEvents": evs}


# -- 1. analyze --json on valid traces whose findings carry numpy numbers --------------------------


@pytest.mark.parametrize(
    "path",
    [
        os.path.join(SAMPLES, "nsys_single.sqlite"),
        trace_path("nsys", "nsys_ddp.sqlite"),
        trace_path("kineto", "step_outlier.json.gz"),
        trace_path("kineto", "ddp_long"),
    ],
)
def test_analyze_json_encodes_every_finding(path):
    r = run("analyze", path, "--json")
    assert_clean(r)
    out = json.loads(r.stdout)
    assert out["findings"], "these traces have findings (step outliers among them)"
    # The step_outlier rule is the one that put numpy floats in metrics; where it fires, its
    # metrics must be plain JSON numbers.
    for f in out["findings"]:
        for v in f["metrics"].values():
            assert v is None or isinstance(v, (int, float, str, list, dict, bool))
    # independent check: the JSON holds every step the trace's own ProfilerStep / NVTX marks
    assert all(r_["steps"] for r_ in out["ranks"])


def test_step_outlier_fires_and_encodes():
    r = run_cli_once("analyze", trace_path("kineto", "step_outlier.json.gz"), "--json")  # shared by modules
    assert_clean(r)
    rules = {f["rule"] for f in json.loads(r.stdout)["findings"]}
    assert "step_outlier" in rules


# -- 7. a file name that is not UTF-8 -------------------------------------------------------------


@pytest.mark.parametrize("cache", [True, False])
def test_non_utf8_file_name(tmp_path, cache):
    name = os.fsdecode(b"rank0-\xff\xfe.json")
    p = os.path.join(str(tmp_path), name)
    with open(p, "w") as f:
        json.dump(_tiny_trace(), f)
    before = folder_state(str(tmp_path))
    args = ["info", p, "--json"] + ([] if cache else ["--no-cache"])
    r = run(*args)
    assert_clean(r)
    out = json.loads(r.stdout)
    assert out["kernels"] == 20
    assert "\\xff" in out["files"][0]
    # twice, so the second run goes through the cache when it is on
    r2 = run(*args)
    assert_clean(r2)
    assert json.loads(r2.stdout)["kernels"] == 20
    a = run("analyze", p)
    assert_clean(a)
    for cmd, out in (("screenshot", "x.png"), ("report", "x.html")):
        o = tmp_path.parent / f"{tmp_path.name}-{out}"
        r3 = run(cmd, p, "-o", str(o), *([] if cache else ["--no-cache"]))
        assert_clean(r3)
        assert o.stat().st_size > 1000
    assert "\\xff" in (tmp_path.parent / f"{tmp_path.name}-x.html").read_text()
    assert folder_state(str(tmp_path)) == before


# -- 10. special files ---------------------------------------------------------------------------


def test_fifo_inside_a_folder_is_skipped(tmp_path):
    d = tmp_path / "job"
    d.mkdir()
    shutil.copy(os.path.join(SAMPLES, "ddp", os.listdir(os.path.join(SAMPLES, "ddp"))[0]), d)
    os.mkfifo(d / "pipe.json")
    before = folder_state(str(d))
    r = run("info", str(d), "--json", "--no-cache", timeout=120)
    assert_clean(r)
    assert json.loads(r.stdout)["events"] > 0
    assert folder_state(str(d)) == before


def test_fifo_named_directly_is_refused(tmp_path):
    f = tmp_path / "trace.json"
    os.mkfifo(f)
    # if the program opened the FIFO, a writer would be needed to unblock it: none is started,
    # so a wrong implementation hangs and the timeout fails the test
    r = run("info", str(f), "--no-cache", timeout=120)
    assert_refused(r, str(f), "not a regular file")


# -- 13. messages ---------------------------------------------------------------------------------


def test_one_bad_file_in_a_21_file_session_is_named_alone(tmp_path):
    paths = []
    for i in range(21):
        p = tmp_path / f"rank{i}.json"
        p.write_text(json.dumps(_tiny_trace()))
        paths.append(str(p))
    bad = tmp_path / "rank13.json"
    bad.write_bytes(b"\x00\x01garbage" * 100)
    before = folder_state(str(tmp_path))
    r = run("info", *paths, "--no-cache")
    line = assert_refused(r, str(bad))
    others = [os.path.basename(p) for p in paths if p != str(bad)]
    assert sum(o in line for o in others) <= 1, line  # not a list of all 21
    assert folder_state(str(tmp_path)) == before


def test_mixed_formats_name_the_odd_file(tmp_path):
    a = tmp_path / "a.json"
    a.write_text(json.dumps(_tiny_trace()))
    b = tmp_path / "b.json"
    b.write_text(json.dumps(_tiny_trace()))
    odd = tmp_path / "odd.sqlite"
    shutil.copy(os.path.join(SAMPLES, "nsys_single.sqlite"), odd)
    r = run("info", str(a), str(b), str(odd), "--no-cache")
    line = assert_refused(r, str(odd), "separate sessions")
    assert "Traceback" not in line


def test_internal_error_wording_never_reaches_users(tmp_path):
    """A trace whose event fields have the wrong types: whatever the reader does with it, the user
    never sees Python's own wording."""
    evs = _tiny_trace()["traceEvents"]
    evs[3]["name"] = ["a", "list"]
    evs[4]["pid"] = {"a": 1}
    evs[5]["tid"] = [1]
    evs[6]["cat"] = {"x": 1}
    evs[7]["dur"] = "x"
    p = tmp_path / "types.json"
    p.write_text(json.dumps({"traceEvents": evs}))
    r = run("info", str(p), "--json", "--no-cache")
    assert "Traceback" not in r.stderr
    for phrase in ("unhashable", "could not convert", "object of type", "NoneType", "Error:"):
        assert phrase not in r.stderr and phrase not in r.stdout, (phrase, r.stderr)
    if r.returncode == 2:
        assert_refused(r, str(p))
    else:
        assert r.returncode == 0
        assert json.loads(r.stdout)["kernels"] >= 15


# -- 15. terminal injection -----------------------------------------------------------------------


def test_control_characters_are_escaped_in_text_output(tmp_path):
    evil = "\x1b]0;PWNED\x07\x1b[2J"
    tr = _tiny_trace(name=evil)
    p = tmp_path / f"evil{chr(0x1B)}[31m.json"
    p.write_text(json.dumps(tr))
    for cmd in (["info", str(p)], ["analyze", str(p)], ["analyze", str(p), "--md"]):
        r = run(*cmd, "--no-cache")
        assert_clean(r)
        assert "\x1b" not in r.stdout and "\x07" not in r.stdout, cmd
        assert "\x1b" not in r.stderr
    # the JSON output keeps the name exactly (JSON escapes it)
    r = run("info", str(p), "--json", "--no-cache")
    assert_clean(r)
    assert "\x1b" not in r.stdout
    assert json.loads(r.stdout)["files"][0].endswith(f"evil{chr(0x1B)}[31m.json")
    # a message about a bad file escapes its name too
    bad = tmp_path / "bad\x1b[2J.json"
    bad.write_bytes(b"nonsense")
    r = run("info", str(bad))
    assert r.returncode == 2 and "\x1b" not in r.stderr and "bad\\x1b[2J.json" in r.stderr


# -- 16. the same file twice ----------------------------------------------------------------------


def test_same_kineto_file_three_spellings_is_one_rank(tmp_path):
    p = tmp_path / "rank0.json"
    p.write_text(json.dumps(_tiny_trace()))
    os.symlink(p, tmp_path / "link.json")
    spellings = [str(p), os.path.join(str(tmp_path), ".", "rank0.json"), str(tmp_path / "link.json")]
    r = run("info", *spellings, "--json", "--no-cache")
    assert_clean(r)
    out = json.loads(r.stdout)
    assert len(out["ranks"]) == 1 and out["kernels"] == 20
    assert sum("same file" in w for w in out["warnings"]) == 2


def test_same_nsys_file_twice_is_one_report(tmp_path):
    src = os.path.join(SAMPLES, "nsys_single.sqlite")
    con = sqlite3.connect(f"file:{src}?mode=ro&immutable=1", uri=True)
    kernels = con.execute("SELECT count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL").fetchone()[0]
    con.close()
    r = run("info", src, os.path.join(os.path.dirname(src), ".", "nsys_single.sqlite"), "--json", "--no-cache")
    assert_clean(r)
    out = json.loads(r.stdout)
    assert out["kernels"] == kernels
    assert any("same file" in w for w in out["warnings"])


# -- 14. noise: edge-case traces analysed with Python warnings turned into errors ------------------


def _edge_cases():
    k = {"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "args": {"device": 0, "stream": 7}}
    step = {"ph": "X", "cat": "cpu_op", "pid": 1, "tid": 1}
    mem = {"ph": "i", "cat": "cpu_instant_event", "name": "[memory]", "pid": 1, "tid": 1, "s": "t"}
    return {
        "one_kernel": [dict(k, ts=1000, dur=5)],
        "zero_durations": [dict(k, ts=1000 + i, dur=0) for i in range(5)]
        + [dict(step, name=f"ProfilerStep#{i}", ts=1000 + i, dur=0) for i in range(3)],
        "steps_without_kernels": [dict(step, name=f"ProfilerStep#{i}", ts=1000 + 100 * i, dur=50) for i in range(5)],
        "memory_only": [
            dict(
                mem,
                ts=1000 + i,
                args={"Total Allocated": i, "Total Reserved": 10, "Device Id": 0, "Device Type": 1, "Bytes": 1},
            )
            for i in range(4)
        ],
        "negative_duration": [dict(k, ts=1000, dur=-5), dict(step, name="ProfilerStep#1", ts=900, dur=500)],
    }


@pytest.mark.parametrize("case", sorted(_edge_cases()))
def test_edge_case_traces_analyse_without_python_warnings(tmp_path, case):
    p = tmp_path / f"{case}.json"
    p.write_text(json.dumps({"traceEvents": _edge_cases()[case]}))
    # the readers' own warnings (an event dropped) are said by analyze too, one line each, and by
    # nothing else: no Python warning, no Qt noise
    info = run("info", str(p), "--json", "--no-cache")
    said = [f"gpuviewer: warning: {w}" for w in json.loads(info.stdout)["warnings"]] if info.returncode == 0 else []
    for cmd in (["info", str(p), "--json"], ["analyze", str(p), "--json"], ["analyze", str(p)]):
        # --debug keeps warnings on; PYTHONWARNINGS=error makes any of them fail the run
        r = run(*cmd, "--no-cache", "--debug", env={"PYTHONWARNINGS": "error"})
        assert r.returncode in (0, 2), r.stderr[-2000:]
        assert "Warning" not in r.stderr and "Traceback" not in r.stderr, r.stderr[-2000:]
        if r.returncode == 2:
            assert_refused(r, str(p))
        r = run(*cmd, "--no-cache")
        if r.returncode != 2:
            assert r.stderr.splitlines() == (said if cmd[0] == "analyze" else []), r.stderr


def test_output_into_a_closed_pipe_is_not_an_error():
    """`gpuviewer analyze ... | head -1`: the reader leaves early; no traceback."""
    import subprocess
    import sys

    from conftest import ROOT

    p = subprocess.Popen(
        [sys.executable, "-m", "gpuviewer", "analyze", trace_path("kineto", "ddp_long")],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=ROOT,
    )
    p.stdout.readline()
    p.stdout.close()  # like head after its first line
    err = p.stderr.read().decode()
    assert p.wait(timeout=300) == 0
    assert "Traceback" not in err and "BrokenPipe" not in err, err


@pytest.mark.parametrize("case,needle", [("gzip_header_only", "cut"), ("blank", "blank")])
def test_nothing_to_read_is_said_in_user_terms(tmp_path, case, needle):
    p = tmp_path / ("cut.json.gz" if case == "gzip_header_only" else "blank.json")
    if case == "gzip_header_only":
        p.write_bytes(gzip.compress(b'{"traceEvents": []}' * 50)[:12])  # a header and nothing more
    else:
        p.write_bytes(b"  \n\t\n   ")
    before = folder_state(str(tmp_path))
    assert_refused(run("info", str(p), "--no-cache"), str(p), needle)
    assert folder_state(str(tmp_path)) == before


# -- 17. a file cut short: the commands that print numbers say the trace was read in part ----------


def test_numbers_from_a_file_cut_short_come_with_its_warning(tmp_path):
    """analyze printed 'no findings' (and whatif its table) from half a file without a word; info
    alone showed the warning. Now each says it on stderr, stdout unchanged in form."""
    data = open(trace_path("kineto", "step_outlier.json.gz"), "rb").read()
    p = tmp_path / "cut.json.gz"
    p.write_bytes(data[: len(data) // 2])
    before = folder_state(str(tmp_path))
    info = run("info", str(p), "--json", "--no-cache")
    assert info.returncode == 0, info.stderr
    warned = json.loads(info.stdout)["warnings"]
    assert any("cut short" in w for w in warned), warned  # the reader saw it (independent of analyze)
    said = [f"gpuviewer: warning: {w}" for w in warned]
    out = tmp_path.parent / f"{tmp_path.name}-out"
    out.mkdir()
    report = out / "r.html"
    for cmd in (
        ["analyze"],
        ["analyze", "--json"],
        ["analyze", "--md"],
        ["whatif", "--no-launch-overhead"],
        ["stats", "--json"],
        ["report", "-o", str(report)],
    ):
        r = run(cmd[0], str(p), *cmd[1:], "--no-cache")
        assert r.returncode == 0, r.stderr[-2000:]
        assert r.stderr.splitlines() == said, (cmd, r.stderr)
        if "--json" in cmd:
            json.loads(r.stdout)  # the warning stays off stdout
        if cmd == ["analyze"]:  # and the findings say they are of the part read
            assert any(ln.startswith("note: read in part: cut.json.gz ends early") for ln in r.stdout.splitlines())
        if cmd == ["analyze", "--md"]:  # a saved report says both, before its findings
            md = r.stdout
            assert md.index("## Warnings") < md.index("## Notes") < md.index("## Findings"), md[:2000]
            assert "cut short" in md[md.index("## Warnings") : md.index("## Notes")]
    # the report itself says it too, before its numbers
    import html

    page = report.read_text()
    assert all(html.escape(w) in page for w in warned)
    assert page.index("Warnings (") < page.index("Per rank and step")
    assert "read in part: cut.json.gz ends early" in page  # the note too
    assert folder_state(str(tmp_path)) == before
