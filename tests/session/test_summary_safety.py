"""Issue 30, items 1 and 3: `--summary DIR` never deletes what gpuviewer did not write, and a
summary reads only itself, checked against its schema.

Real parts throughout: a summary written by a real `python -m gpuviewer analyze samples/ddp
--summary` child once for the module, copied and edited per test; every command a real
subprocess (the commands on one edited summary in one child, tests/cli_batch.py: the
interpreter's start was most of each run; one case is run both ways and must answer the same);
the window a real MainWindow (offscreen). A target that must not be read holds a marker string
that would show in the output if it were."""

import json
import os
import shutil
import stat

import pytest
from cli_batch import run_cli_batch
from conftest import SAMPLES, make_window, run_cli

MARKER = "MARKER-OUTSIDE-THE-SUMMARY"
DDP = os.path.join(SAMPLES, "ddp")


@pytest.fixture(scope="module")
def made(tmp_path_factory):
    out = str(tmp_path_factory.mktemp("sum") / "ddp.gvsum")
    r = run_cli("analyze", DDP, "--summary", out, "--json")
    assert r.returncode == 0, r.stderr
    return out, json.loads(r.stdout)


def listing(folder: str) -> dict[str, bytes]:
    """Every file under folder (relative name -> content): what must not change."""
    out = {}
    for root, _dirs, files in os.walk(folder):
        for f in files:
            p = os.path.join(root, f)
            with open(p, "rb") as fh:
                out[os.path.relpath(p, folder)] = fh.read()
    return out


def one_line_refusal(r, *names: str) -> str:
    assert r.returncode == 2, (r.returncode, r.stdout, r.stderr)
    err = r.stderr.strip()
    assert "Traceback" not in r.stderr and "\n" not in err, r.stderr
    for n in names:
        assert n in err, err
    return err


# -- item 1: writing never deletes or replaces what is not a gpuviewer summary ---------------


def test_a_folder_with_an_unrelated_manifest_survives_summary(tmp_path):
    web = tmp_path / "site"
    web.mkdir()
    (web / "manifest.json").write_text('{"name": "my web app", "version": 3}')
    (web / "index.html").write_text("<h1>mine</h1>")
    (web / "assets").mkdir()
    (web / "assets" / "app.js").write_text("console.log(1)")
    before = listing(str(web))
    r = run_cli("analyze", DDP, "--summary", str(web))
    err = one_line_refusal(r, str(web))
    assert "not a gpuviewer summary" in err and "not replaced" in err
    assert listing(str(web)) == before
    assert not [n for n in os.listdir(tmp_path) if n != "site"]  # no temporary folder left beside it


def test_a_summary_holding_other_files_is_not_replaced(tmp_path, made):
    out, _ = made
    s = str(tmp_path / "s.gvsum")
    shutil.copytree(out, s)
    with open(os.path.join(s, "my-notes.txt"), "w") as f:
        f.write("results of Tuesday")
    before = listing(s)
    err = one_line_refusal(run_cli("analyze", DDP, "--summary", s), s, "my-notes.txt")
    assert "not replaced" in err
    assert listing(s) == before


def test_a_gvsum_manifest_in_a_folder_with_a_subfolder_is_not_replaced(tmp_path, made):
    out, _ = made
    s = str(tmp_path / "s.gvsum")
    shutil.copytree(out, s)
    os.mkdir(os.path.join(s, "keep"))
    before = listing(s)
    one_line_refusal(run_cli("analyze", DDP, "--summary", s), s, "keep")
    assert listing(s) == before and os.path.isdir(os.path.join(s, "keep"))


@pytest.mark.parametrize("kind", ["file", "symlink"])
def test_a_file_or_a_link_in_place_of_the_summary_is_left(tmp_path, made, kind):
    out, _ = made
    target = tmp_path / "s.gvsum"
    if kind == "file":
        target.write_text("my data")
    else:
        other = tmp_path / "real.gvsum"
        shutil.copytree(out, other)
        os.symlink(other, target)
    r = run_cli("analyze", DDP, "--summary", str(target))
    one_line_refusal(r, str(target))
    if kind == "file":
        assert target.read_text() == "my data"
    else:
        assert os.path.islink(target) and listing(str(tmp_path / "real.gvsum")) == listing(out)


def test_an_earlier_summary_is_replaced_and_nothing_is_left_beside_it(tmp_path, made):
    out, analysis = made
    s = str(tmp_path / "s.gvsum")
    shutil.copytree(out, s)
    with open(os.path.join(s, "analysis.json"), "rb") as f:
        old = f.read()
    with open(os.path.join(s, "analysis.json"), "wb") as f:
        f.write(old.replace(b'"unmatched_collectives"', b'"unmatched_collectives_old"'))
    r = run_cli("analyze", DDP, "--summary", s, "--json")
    assert r.returncode == 0, r.stderr
    with open(os.path.join(s, "analysis.json"), "rb") as f:
        assert f.read() == old  # the new summary, written whole
    assert os.listdir(tmp_path) == ["s.gvsum"]


# -- item 3: a summary reads only itself ------------------------------------------------------


def _edit(src: str, dst: str, manifest=None, analysis=None) -> str:
    shutil.copytree(src, dst)
    for name, change in (("manifest.json", manifest), ("analysis.json", analysis)):
        if change is None:
            continue
        p = os.path.join(dst, name)
        with open(p) as f:
            obj = json.load(f)
        new = change(obj)
        with open(p, "w") as f:
            f.write(new if isinstance(new, str) else json.dumps(obj if new is None else new))
    return dst


def _outside_analysis(folder) -> str:
    """A file outside the summary that reads as an analysis and carries the marker."""
    os.makedirs(folder, exist_ok=True)
    p = os.path.join(folder, "x.json")
    with open(p, "w") as f:
        json.dump({"ranks": [], "collectives": [{"group": MARKER, "name": MARKER}], "unmatched_collectives": 0}, f)
    return p


def _commands(s: str) -> list[list[str]]:
    return [["info", s], ["info", s, "--json"], ["analyze", s], ["analyze", s, "--json"], ["analyze", s, "--md"]]


@pytest.mark.parametrize("where", ["relative", "absolute", "dev_zero", "fifo_inside", "link_out", "folder"])
def test_a_manifest_pointing_outside_is_refused_without_reading_it(tmp_path, made, where):
    out, _ = made
    outside = _outside_analysis(str(tmp_path / "outside"))
    s = str(tmp_path / "s.gvsum")
    shutil.copytree(out, s)
    name = {
        "relative": "../outside/x.json",
        "absolute": outside,
        "dev_zero": "/dev/zero",
        "fifo_inside": "pipe",
        "link_out": "link.json",
        "folder": "sub",
    }[where]
    if where == "fifo_inside":
        os.mkfifo(os.path.join(s, "pipe"))  # opening it to read would block: a hang is the failure
    elif where == "link_out":
        os.symlink(outside, os.path.join(s, "link.json"))
    elif where == "folder":
        os.mkdir(os.path.join(s, "sub"))
    mp = os.path.join(s, "manifest.json")
    with open(mp) as f:
        m = json.load(f)
    m["analysis"] = name
    with open(mp, "w") as f:
        json.dump(m, f)
    atime = os.stat(outside).st_atime_ns
    for r in run_cli_batch([["analyze", s], ["analyze", s, "--json"], ["analyze", s, "--md"]]):
        err = one_line_refusal(r, s)
        assert MARKER not in r.stdout + r.stderr
        assert "not read" in err or "not a regular file" in err, err
    assert os.stat(outside).st_atime_ns == atime


def test_a_table_pointing_outside_is_refused_in_the_window(qtbot, tmp_path, made):
    out, _ = made
    os.makedirs(tmp_path / "outside")
    shutil.copy(os.path.join(out, "profiles.parquet"), tmp_path / "outside" / "p.parquet")
    s = _edit(
        out, str(tmp_path / "s.gvsum"), manifest=lambda m: m["tables"]["profiles"].update(file="../outside/p.parquet")
    )
    w = make_window(qtbot, tmp_path)
    assert not w.open_paths([s])
    assert s in w.last_error and "profiles" in w.last_error and "\n" not in w.last_error


def _deep(n: int) -> str:
    return "[" * n + "]" * n


# (name, which file, the change) : each a way a hand-edited or hostile summary is wrong
BAD = [
    ("events as a string", "manifest", lambda m: m["ranks"][0].update(events="many")),
    ("rank as a list", "manifest", lambda m: m["ranks"][0].update(rank=[0])),
    ("ranks as an object", "manifest", lambda m: m.update(ranks={"0": {}})),
    ("start 10^30", "manifest", lambda m: m["ranks"][0].update(start_ns=10**30)),
    ("impact NaN", "manifest", lambda m: json.dumps(m).replace('"impact_ms": ', '"impact_ms": NaN, "x": ', 1)),
    ("impact 1e400", "manifest", lambda m: json.dumps(m).replace('"impact_ms": ', '"impact_ms": 1e400, "x": ', 1)),
    (
        "findings nested 100,000 deep",
        "manifest",
        lambda m: json.dumps(m).replace('"findings": [', '"findings": [' + _deep(100000) + ",", 1),
    ),
    ("metrics nested 500 deep", "manifest", lambda m: m["findings"][0]["metrics"].update(x=json.loads(_deep(500)))),
    (
        "evidence name a number",
        "manifest",
        lambda m: m["findings"][0]["metrics"].update(excess=[{"name": 5, "ms": "x"}]),
    ),
    ("a finding's title a dict", "manifest", lambda m: m["findings"][0].update(title={"a": 1})),
    ("tables a list", "manifest", lambda m: m.update(tables=[1, 2])),
    ("version a string", "manifest", lambda m: m.update(version="1")),
    ("utilization a string", "analysis", lambda a: a["ranks"][0].update(gpu_utilization="high")),
    ("steps an object", "analysis", lambda a: a["ranks"][0].update(steps={"a": 1})),
    ("a step's busy 1e300", "analysis", lambda a: a["ranks"][0]["steps"][0].update(busy_ns=1e300)),
    (
        "collectives nested 100,000 deep",
        "analysis",
        lambda a: json.dumps(a).replace('"collectives": [', '"collectives": [' + _deep(100000) + ",", 1),
    ),
    ("analysis a list", "analysis", lambda a: [a]),
    ("analysis not JSON", "analysis", lambda a: '{"ranks": [1, 2'),
]


@pytest.mark.parametrize("name,which,change", BAD, ids=[b[0] for b in BAD])
def test_wrong_types_in_a_summary_are_one_line_naming_it(tmp_path, made, name, which, change):
    out, _ = made
    s = _edit(out, str(tmp_path / "s.gvsum"), **{which: change})
    failed = 0
    commands = [a for a in _commands(s) if which == "manifest" or a[0] != "info"]  # info reads the manifest only
    for args, r in zip(commands, run_cli_batch(commands)):
        assert "Traceback" not in r.stderr, (args, r.stderr)
        if name == "version a string" and r.returncode == 2:
            # not a summary by its manifest: the folder is opened as traces and holds none
            assert "\n" not in r.stderr.strip()
            failed += 1
            continue
        one_line_refusal(r, s)
        failed += 1
    assert failed


def test_a_command_answers_the_same_in_a_batch_as_in_its_own_process(tmp_path, made):
    """The batch above stands for a process per command: on a refused summary and on the good
    one, every command's exit code, stdout and stderr are those of `python -m gpuviewer`."""
    out, _ = made
    bad = _edit(out, str(tmp_path / "s.gvsum"), manifest=BAD[0][2])
    commands = _commands(bad) + _commands(out)
    alone = [run_cli(*a) for a in commands]
    assert [r.returncode for r in alone] == [2] * 5 + [0] * 5
    for args, a, b in zip(commands, alone, run_cli_batch(commands)):
        assert (b.returncode, b.stdout, b.stderr) == (a.returncode, a.stdout, a.stderr), args


def test_wrong_types_in_a_summary_are_one_line_in_the_window(qtbot, tmp_path, made):
    out, _ = made
    w = make_window(qtbot, tmp_path)
    for i, (name, which, change) in enumerate(BAD):
        if name == "version a string":
            continue
        s = _edit(out, str(tmp_path / f"s{i}.gvsum"), **{which: change})
        w.last_error = None
        assert not w.open_paths([s]), name
        assert w.last_error and s in w.last_error and "\n" not in w.last_error, (name, w.last_error)
        assert "Error:" not in w.last_error, (name, w.last_error)  # said in words, not an exception's name


def test_the_good_summary_reads_as_written(made):
    out, analysis = made
    r = run_cli("analyze", out, "--json")
    assert r.returncode == 0 and json.loads(r.stdout) == analysis
    assert stat.S_ISDIR(os.stat(out).st_mode)
