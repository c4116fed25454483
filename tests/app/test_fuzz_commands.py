"""Seeded fuzzing of what the commands read besides traces (issue 30, item 6), through the real
CLI: a session summary's manifest.json and analysis.json, and the annotations sidecar beside a
trace. Mutations: flipped bytes, truncation, a JSON value replaced by a hostile one (NaN, 1e30,
a string for a number, a list for an object, nesting 100,000 deep, terminal escapes), and for a
manifest the names of its files replaced by ones that lead outside the summary ('../x', an
absolute path, /dev/zero, a FIFO, a link out, /etc/passwd).

A summary goes through info and, by rotation, analyze --json, analyze --md or screenshot (the
window); a sidecar through info and, by rotation, screenshot or report (which draw its notes).
The checks are those of test_fuzz_inputs.py (exit 0 with the output asked for, or exit 2 and one
line naming the input; no traceback, hang, or unbounded memory; the input folder unchanged and
nothing created beside it; nothing left in the run's own cache, temp and XDG folders), plus: a
marker file outside the summary, which several mutations point at, is never read (its access
time stays) and its content never shown.

GPUVIEWER_FUZZ_CASES (default 60: 10 summary and 6 sidecar cases here) and GPUVIEWER_FUZZ_SEED
(default 18) choose the run; a failure names the family, case, command and seed.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import time
from concurrent.futures import ThreadPoolExecutor

import pytest
from conftest import SAMPLES
from hostile import check_command, folder_state, left_behind, private_env, run

CASES = int(os.environ.get("GPUVIEWER_FUZZ_CASES", "60"))
SEED = int(os.environ.get("GPUVIEWER_FUZZ_SEED", "18"))
RSS_LIMIT_MB = 1500  # a summary is a few hundred KB; /dev/zero read whole would pass this at once
MANIFEST_CASES = max(5, CASES // 6)
SIDECAR_CASES = max(6, CASES // 10)
TOKEN = "MARKER-7f3a9c-OUTSIDE"  # in the marker's text only: shown means read
DEEP = "@@deep@@"
HOSTILE = [
    float("nan"),
    float("inf"),
    -float("inf"),
    10**30,
    -(10**30),
    2**63,
    -1,
    0,
    1.5,
    "abc",
    "12.5",
    "",
    [],
    {},
    [1, "a"],
    {"a": {"b": []}},
    None,
    True,
    DEEP,
    "\u001b[2J\u0000line\nspoof",
    "x" * 200_000,
    "../x",
    "/etc/passwd",
    "/dev/zero",
]


# -- JSON-aware mutations ---------------------------------------------------------------------


def _paths(node, at=()):
    """Every position in a JSON document (key paths), the root left out."""
    items = node.items() if isinstance(node, dict) else enumerate(node) if isinstance(node, list) else ()
    for k, v in items:
        yield at + (k,)
        yield from _paths(v, at + (k,))


def _set(doc, path, value) -> None:
    for k in path[:-1]:
        doc = doc[k]
    doc[path[-1]] = value


def _dump(doc) -> bytes:
    text = json.dumps(doc, allow_nan=True)  # NaN and Infinity as Python writes them
    return text.replace(json.dumps(DEEP), "[" * 100_000 + "]" * 100_000).encode()


def _bytes_mutation(rng: random.Random, data: bytes) -> bytes:
    data = bytearray(data)
    if rng.random() < 0.5:
        return bytes(data[: rng.randrange(0, len(data))])
    for _ in range(rng.randint(1, 16)):
        data[rng.randrange(len(data))] = rng.randrange(256)
    return bytes(data)


def _value_mutation(rng: random.Random, data: bytes) -> bytes:
    doc = json.loads(data)
    for _ in range(rng.randint(1, 3)):
        paths = list(_paths(doc))
        if rng.random() < 0.5:  # half the time a field near the top (format, version, ranks, view...)
            paths = [p for p in paths if len(p) <= 2]
        if not paths:
            break
        _set(doc, rng.choice(paths), rng.choice(HOSTILE))
    return _dump(doc)


# -- summaries ----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def summary_base(tmp_path_factory):
    """A real summary of the DDP sample made by the CLI, and proof that this file system updates
    access times on a read (else the marker check below would prove nothing)."""
    d = tmp_path_factory.mktemp("sumbase")
    shutil.copytree(os.path.join(SAMPLES, "ddp"), d / "ddp")
    out = d / "base.gvsum"
    r = run("analyze", str(d / "ddp"), "--summary", str(out), "--json", "--no-cache")
    assert r.returncode == 0, r.stderr
    probe = d / "probe"
    probe.write_text("x")
    old = time.time() - 3600
    os.utime(probe, (old, old))
    with open(probe) as f:
        f.read()
    assert os.stat(probe).st_atime > old + 60, "this file system does not update access times"
    return str(out)


def _outside(case: str, analysis: bytes) -> dict:
    """Beside the summary: a marker that would show if read (an analysis whose names are TOKEN),
    its access time set back so that a read moves it, and a FIFO."""
    os.mkdir(os.path.join(case, "outside"))
    marker = os.path.join(case, "outside", "marker.json")
    doc = json.loads(analysis)
    for path in list(_paths(doc)):
        if path[-1] in ("name", "title", "group"):  # kernel, collective and finding names, as analyze shows them
            _set(doc, path, TOKEN)
    with open(marker, "wb") as f:
        f.write(_dump(doc))
    old = time.time() - 3600
    os.utime(marker, (old, old))
    fifo = os.path.join(case, "outside", "fifo")
    os.mkfifo(fifo)
    return {"marker": marker, "fifo": fifo}


def _name_mutation(rng: random.Random, manifest: bytes, summary: str, out: dict) -> bytes:
    """A name in the manifest (the analysis, a table's file, a rank's trace) replaced by one that
    leads outside the summary."""
    doc = json.loads(manifest)
    tables = [("tables", t, "file") for t in doc.get("tables", {})]
    traces = [("files", i) for i in range(len(doc.get("files", [])))]
    traces += [("ranks", i, "files", 0) for i in range(len(doc.get("ranks", [])))]
    escapes = [
        "../outside/marker.json",
        out["marker"],
        "/dev/zero",
        out["fifo"],
        "../x",
        "/etc/passwd",
        "link.json",
        "sub/../../outside/marker.json",
        "",
        ".",
        "..",
        "manifest.json",
        "steps.parquet",
        "outlink",
    ]
    for _ in range(rng.randint(1, 2)):
        name = rng.choice(escapes)
        if name == "link.json" and not os.path.lexists(os.path.join(summary, name)):
            os.symlink(out["marker"], os.path.join(summary, name))  # a link inside, leading out
        if name == "outlink" and not os.path.lexists(os.path.join(summary, name)):
            os.symlink(os.path.dirname(out["marker"]), os.path.join(summary, name))
            name = "outlink/marker.json"
        which = rng.random()  # the analysis most often: every command reads it
        _set(doc, ("analysis",) if which < 0.5 else rng.choice(tables if which < 0.8 else traces), name)
    return _dump(doc)


# case i: SUMMARY_COMMANDS[i % 3] on MUTATIONS[i % 5]: 5 cases meet every mutation, 15 every pair
SUMMARY_COMMANDS = ("analyze", "analyze --md", "screenshot")
MUTATIONS = (
    ("manifest.json", "name"),
    ("manifest.json", "value"),
    ("analysis.json", "value"),
    ("manifest.json", "bytes"),
    ("analysis.json", "bytes"),
)


def _summary_case(i: int, tmp_path, base: str) -> list[str]:
    rng = random.Random(f"{SEED}-manifest-{i}")
    case = str(tmp_path / f"m{i}")
    os.mkdir(case)
    summary = os.path.join(case, "s.gvsum")
    shutil.copytree(base, summary)
    with open(os.path.join(summary, "analysis.json"), "rb") as f:
        out = _outside(case, f.read())
    target, how = MUTATIONS[i % len(MUTATIONS)]
    p = os.path.join(summary, target)
    with open(p, "rb") as f:
        data = f.read()
    data = (
        _bytes_mutation(rng, data)
        if how == "bytes"
        else _value_mutation(rng, data)
        if how == "value"
        else _name_mutation(rng, data, summary, out)
    )
    with open(p, "wb") as f:
        f.write(data)
    out_dir = os.path.join(case, "out")
    os.mkdir(out_dir)
    env = private_env(case)
    before, around = folder_state(summary), folder_state(case)
    atime = os.stat(out["marker"]).st_atime_ns
    problems = []
    for name in ("info", SUMMARY_COMMANDS[i % len(SUMMARY_COMMANDS)]):
        tag = f"manifest#{i} ({target} {how}, seed {SEED}) {name}"
        shot = os.path.join(out_dir, "shot.png")
        argv, expect = {
            "info": (["info", summary, "--json"], "json"),
            "analyze": (["analyze", summary, "--json"], "json"),
            "analyze --md": (["analyze", summary, "--md"], "md"),
            "screenshot": (["screenshot", summary, "-o", shot], "png"),
        }[name]
        problems += check_command(
            tag,
            [*argv, "--no-cache"],
            summary,
            expect,
            out=shot,
            out_dir=out_dir,
            env=env,
            rss_limit_mb=RSS_LIMIT_MB,
            secret=TOKEN,
            forbid=("root:x:0:",),
            fork=True,  # a process of its own, forked with the imports done (tests/cli_fork.py)
        )
        shutil.rmtree(out_dir)
        os.mkdir(out_dir)
        if os.stat(out["marker"]).st_atime_ns != atime:
            problems.append(f"{tag}: read {out['marker']}, outside the summary")
            atime = os.stat(out["marker"]).st_atime_ns
    if left_behind(env):
        problems.append(f"manifest#{i}: files left outside the input and output: {left_behind(env)[:5]}")
    if folder_state(summary) != before or folder_state(case) != around:
        problems.append(f"manifest#{i}: the summary or its folder changed: {sorted(folder_state(summary))}")
    return problems


def test_fuzz_manifest(summary_base, tmp_path):
    with ThreadPoolExecutor(max_workers=2) as ex:
        problems = [
            p for ps in ex.map(lambda i: _summary_case(i, tmp_path, summary_base), range(MANIFEST_CASES)) for p in ps
        ]
    assert not problems, f"{len(problems)} problems:\n" + "\n".join(problems[:20])


# -- annotation sidecars ----------------------------------------------------------------------

TRACE = "ddp_rank0.json.gz"
SIDECAR = TRACE + ".gpuviewer.json"
NOTE = "slow-here-4d1c"


@pytest.fixture(scope="module")
def sidecar_base(tmp_path_factory):
    """A sidecar written by the Session API (what the window writes: a note, a region, an arrow
    from a launch to its kernel, the view), checked to be drawn into a report."""
    import gpuviewer

    d = tmp_path_factory.mktemp("sidebase")
    shutil.copy(os.path.join(SAMPLES, "ddp", TRACE), d / TRACE)
    s = gpuviewer.open(str(d / TRACE))
    assert s.open_annotations() is None
    st = s.steps
    t0, t1 = int(st.start.iloc[1]), int(st.end.iloc[1])
    s.set_range(t0, t1)
    s.add_note(NOTE, rank=0)
    s.add_region("step window", t0, t1, rank=0)
    kernels, slices = s.kernels, s.slices
    k = kernels[kernels["corr"] > 0].iloc[5]
    launch = slices[(slices["corr"] == k["corr"]) & (slices["id"] != k["id"])].iloc[0]
    s.add_arrow(int(launch["id"]), int(k["id"]), "launch")
    assert s.save_annotations()
    r = run("report", str(d / TRACE), "-o", str(d / "r.html"), "--no-cache")
    assert r.returncode == 0, r.stderr
    assert NOTE in (d / "r.html").read_text(), "the report does not show the sidecar's note"
    return str(d / SIDECAR)


def _many(rng: random.Random, data: bytes) -> bytes:
    """More notes than the limit the run is given (GPUVIEWER_MAX_ANNOTATIONS=4 below)."""
    doc = json.loads(data)
    notes = doc["annotations"]
    doc["annotations"] = [dict(notes[j % len(notes)], id=f"n{j}") for j in range(rng.randint(5, 40))]
    return _dump(doc)


# case i: SIDECAR_COMMANDS[i % 2] on SIDECAR_MUTATIONS[i % 3]: 6 cases meet every pair
SIDECAR_COMMANDS = ("screenshot", "report")
SIDECAR_MUTATIONS = ("value", "bytes", "many")


def _sidecar_case(i: int, tmp_path, base: str) -> list[str]:
    rng = random.Random(f"{SEED}-sidecar-{i}")
    case = str(tmp_path / f"s{i}")
    folder = os.path.join(case, "in")
    os.makedirs(folder)
    trace = os.path.join(folder, TRACE)
    shutil.copy(os.path.join(SAMPLES, "ddp", TRACE), trace)
    with open(base, "rb") as f:
        data = f.read()
    how = SIDECAR_MUTATIONS[i % len(SIDECAR_MUTATIONS)]
    data = {"bytes": _bytes_mutation, "value": _value_mutation, "many": _many}[how](rng, data)
    with open(os.path.join(folder, SIDECAR), "wb") as f:
        f.write(data)
    out_dir = os.path.join(case, "out")
    os.mkdir(out_dir)
    env = dict(private_env(case), GPUVIEWER_MAX_ANNOTATIONS="4")
    before = folder_state(folder)
    problems = []
    for name in ("info", SIDECAR_COMMANDS[i % len(SIDECAR_COMMANDS)]):
        tag = f"sidecar#{i} ({how}, seed {SEED}) {name}"
        out = os.path.join(out_dir, "shot.png" if name == "screenshot" else "report.html")
        argv, expect = {
            "info": (["info", trace, "--json"], "json"),
            "screenshot": (["screenshot", trace, "-o", out], "png"),
            "report": (["report", trace, "-o", out], "html"),
        }[name]
        # a damaged sidecar is a warning naming it, and the picture is made without it
        problems += check_command(
            tag,
            [*argv, "--no-cache"],
            trace,
            expect,
            out=out,
            out_dir=out_dir,
            env=env,
            warn_names=(SIDECAR,),
            fork=True,  # a process of its own, forked with the imports done (tests/cli_fork.py)
        )
        shutil.rmtree(out_dir)
        os.mkdir(out_dir)
    if left_behind(env):
        problems.append(f"sidecar#{i}: files left outside the input and output: {left_behind(env)[:5]}")
    if folder_state(folder) != before:
        problems.append(f"sidecar#{i}: the trace's folder changed: {sorted(folder_state(folder))}")
    return problems


def test_fuzz_sidecar(sidecar_base, tmp_path):
    with ThreadPoolExecutor(max_workers=2) as ex:
        problems = [
            p for ps in ex.map(lambda i: _sidecar_case(i, tmp_path, sidecar_base), range(SIDECAR_CASES)) for p in ps
        ]
    assert not problems, f"{len(problems)} problems:\n" + "\n".join(problems[:20])
