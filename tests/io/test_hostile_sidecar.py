"""Hostile inputs (issue 18): annotation sidecars, memory snapshot pickles and memory timelines.

Each case runs the real CLI in a child (tests/hostile.py) and checks what the user gets: exit
2 and one line naming the file for a file given explicitly; for the sidecar found beside a
trace, one warning line naming it and the picture made without its annotations; no traceback,
the inputs untouched, and for amplification the child's peak RSS under a stated bound."""

import json
import os
import pickle
import resource
import shutil
import struct
import threading

import pytest
from conftest import SAMPLES, make_window, run_cli_once
from hostile import assert_refused, folder_state, run

from gpuviewer.export import report
from gpuviewer.io.errors import TraceError
from gpuviewer.io.sidecar import load_doc, save_doc
from gpuviewer.model.annotations import Annotation, AnnotationDoc


def rss_bound(mb: float) -> float:
    """hostile.run reads the child's ru_maxrss, which Linux carries over from this (pytest)
    process across vfork+exec; so a bound below this process's own peak cannot be checked.
    (A child's VmHWM in /proc/self/status would not have this floor.)"""
    own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return max(mb, own + 16)


SIDECAR = "annotations.gpuviewer.json"
# a sidecar the window wrote, as a base for damaged variants
GOOD = {
    "schema": 1,
    "annotations": [{"kind": "note", "text": "ok", "start_ns": 1, "rank": 0}],
    "view": {"range": [0, 10], "lanes": {"hidden": [], "groups": {}}},
}


def _with(**change):
    d = json.loads(json.dumps(GOOD))
    for k, v in change.items():
        if k in ("rank", "start_ns", "kind"):
            d["annotations"][0][k] = v
        else:
            d[k] = v
    return json.dumps(d).encode()


# name -> (file content, what the message must say)
BAD = {
    "rank_text": (_with(rank="abc"), "rank must be an integer"),
    "rank_list": (_with(rank=[1]), "rank must be an integer"),
    "time_text": (_with(start_ns="12:00"), "start_ns must be an integer"),
    "time_huge": (_with(start_ns=1 << 63), "start_ns"),
    "view_lanes_text": (_with(view={"lanes": "abc"}), "view.lanes must be an object"),
    "view_lanes_hidden": (_with(view={"lanes": {"hidden": [[1]]}}), "view.lanes.hidden"),
    "view_range": (_with(view={"range": ["a", 2]}), "view.range"),
    "deep": (b'{"annotations": ' + b"[" * 100_000 + b"]" * 100_000 + b"}", "nested too deeply"),
    "random_bytes": (bytes(range(256)) * 40, "not valid JSON"),
    "schema_99": (_with(schema=99), "schema 99 is newer"),
    "schema_text": (_with(schema="one"), "schema must be"),
    "top_level_list": (b"[1, 2, 3]", "JSON object"),
    "annotations_object": (_with(annotations={"a": 1}), "'annotations' must be a list"),
}


@pytest.fixture
def ddp_copy(tmp_path):
    d = tmp_path / "ddp"
    shutil.copytree(os.path.join(SAMPLES, "ddp"), d)
    return str(d)


def _write(folder, name: str, data: bytes) -> str:
    p = os.path.join(str(folder), name)
    with open(p, "wb") as f:
        f.write(data)
    return p


# -- schema, in process -------------------------------------------------------------------------


@pytest.mark.parametrize("case", sorted(BAD))
def test_load_doc_names_file_and_problem(tmp_path, case):
    data, needle = BAD[case]
    p = _write(tmp_path, "a.json", data)
    with pytest.raises(TraceError) as e:
        load_doc(p)
    assert e.value.path == p and needle.lower() in str(e.value).lower(), str(e.value)


def test_good_doc_still_loads(tmp_path):
    p = _write(tmp_path, "a.json", json.dumps(GOOD).encode())
    doc = load_doc(p)
    assert [a.text for a in doc.annotations] == ["ok"] and doc.view["range"] == [0, 10] and not doc.warnings


# -- --annotations given explicitly: exit 2, one line ---------------------------------------------


@pytest.mark.parametrize("case", sorted(BAD))
def test_explicit_bad_annotations_refused(tmp_path, case):
    data, needle = BAD[case]
    ann = _write(tmp_path, f"{case}.json", data)
    before = folder_state(str(tmp_path))
    out = str(tmp_path / "out" / "x.png")
    r = run("screenshot", os.path.join(SAMPLES, "ddp"), "-o", out, "--annotations", ann, timeout=120)
    assert_refused(r, ann, needle)
    r = run("report", os.path.join(SAMPLES, "ddp"), "-o", str(tmp_path / "r.html"), "--annotations", ann, timeout=120)
    assert_refused(r, ann, needle)
    assert folder_state(str(tmp_path)) == before  # nothing written, the bad file kept as it was


def test_explicit_missing_annotations_refused(tmp_path):
    missing = str(tmp_path / "missing.json")
    r = run(
        "screenshot", os.path.join(SAMPLES, "ddp"), "-o", str(tmp_path / "x.png"), "--annotations", missing, timeout=120
    )
    assert_refused(r, missing, "no such")
    assert not os.path.exists(tmp_path / "x.png")


def test_explicit_fifo_annotations_refused_without_blocking(tmp_path):
    fifo = str(tmp_path / "ann.json")
    os.mkfifo(fifo)
    before = folder_state(str(tmp_path))
    r = run(
        "screenshot", os.path.join(SAMPLES, "ddp"), "-o", str(tmp_path / "x.png"), "--annotations", fifo, timeout=120
    )  # a blocking open would hang: the timeout reports it
    assert_refused(r, fifo, "not a regular file")
    assert folder_state(str(tmp_path)) == before


def test_explicit_sidecar_over_the_size_limit_refused(tmp_path):
    anns = [{"kind": "note", "text": "x" * 100, "start_ns": i} for i in range(50)]
    ann = _write(tmp_path, "big.json", json.dumps({"annotations": anns}).encode())
    r = run(
        "screenshot",
        os.path.join(SAMPLES, "ddp"),
        "-o",
        str(tmp_path / "x.png"),
        "--annotations",
        ann,
        env={"GPUVIEWER_MAX_SIDECAR_BYTES": "2000"},
        timeout=120,
    )
    line = assert_refused(r, ann, "too large")
    assert "GPUVIEWER_MAX_SIDECAR_BYTES" in line


# -- the automatic sidecar beside the trace: a warning, then the picture ----------------------------


@pytest.mark.parametrize(
    "case", ["rank_text", "view_lanes_text", "deep", "random_bytes", "schema_99", "top_level_list"]
)
def test_automatic_bad_sidecar_warns_and_goes_on(tmp_path, ddp_copy, case):
    data, needle = BAD[case]
    _write(ddp_copy, SIDECAR, data)
    before = folder_state(ddp_copy)
    out = str(tmp_path / "x.png")
    r = run("screenshot", ddp_copy, "-o", out, timeout=120)
    assert "Traceback" not in r.stderr, r.stderr[-3000:]
    assert r.returncode == 0, r.stderr
    lines = r.lines()
    assert len(lines) == 1 and SIDECAR in lines[0] and "warning" in lines[0], lines
    assert needle.lower() in lines[0].lower() and "without its annotations" in lines[0]
    assert os.path.getsize(out) > 10_000
    assert folder_state(ddp_copy) == before  # headless runs never move or write the sidecar


def test_automatic_bad_sidecar_in_report(tmp_path, ddp_copy):
    _write(ddp_copy, SIDECAR, BAD["rank_list"][0])
    before = folder_state(ddp_copy)
    r = run("report", ddp_copy, "-o", str(tmp_path / "r.html"), timeout=120)
    assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr[-3000:]
    assert len(r.lines()) == 1 and SIDECAR in r.lines()[0]
    assert "No annotations." in (tmp_path / "r.html").read_text()
    assert folder_state(ddp_copy) == before


def test_automatic_fifo_sidecar_does_not_block(tmp_path, ddp_copy):
    os.mkfifo(os.path.join(ddp_copy, SIDECAR))
    before = folder_state(ddp_copy)
    r = run("screenshot", ddp_copy, "-o", str(tmp_path / "x.png"), timeout=120)
    assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr[-3000:]
    assert len(r.lines()) == 1 and "not a regular file" in r.lines()[0] and SIDECAR in r.lines()[0]
    assert folder_state(ddp_copy) == before


# -- the window: a damaged sidecar is moved aside, never overwritten -------------------------------


def _damaged_copies(folder: str) -> list[str]:
    return sorted(f for f in os.listdir(folder) if f.startswith(SIDECAR + ".damaged-"))


def test_window_moves_damaged_sidecar_aside_then_saves_fresh(qtbot, tmp_path, ddp_copy):
    data = BAD["rank_text"][0]
    side = _write(ddp_copy, SIDECAR, data)
    w = make_window(qtbot, tmp_path, block_analysis=True, size=(1200, 700))
    assert w.open_paths([ddp_copy], block=True)
    assert w.doc.annotations == []
    assert "rank must be an integer" in w.statusBar().currentMessage()
    with open(side, "rb") as f:
        assert f.read() == data  # opening alone changes nothing
    w.session.add_note("fresh", w.trace.start_ns + 1000, 0)
    assert w.save_annotations()
    (moved,) = _damaged_copies(ddp_copy)
    with open(os.path.join(ddp_copy, moved), "rb") as f:
        assert f.read() == data  # the user's file, byte for byte
    assert moved in w.statusBar().currentMessage()
    assert [a.text for a in load_doc(side).annotations] == ["fresh"]
    assert w.save_annotations() and len(_damaged_copies(ddp_copy)) == 1  # moved once, not at every save


def test_sidecar_over_the_limit_is_shown_in_part_and_saved_whole(tmp_path, monkeypatch):
    # more annotations than the limit: the first are shown, the rest kept hidden and saved back
    # untouched (they were once cut on reading and the file set aside as damaged on saving)
    from gpuviewer.session.notes import Notes

    monkeypatch.setenv("GPUVIEWER_MAX_ANNOTATIONS", "5")
    trace = _write(tmp_path, "t.json", b"[]")
    side = trace + ".gpuviewer.json"
    save_doc(side, AnnotationDoc([Annotation("note", f"n{i}", i, None, 0) for i in range(8)]))
    n = Notes()
    warning = n.open_for([trace])
    assert side in warning and "8 annotations" in warning and "limit of 5" in warning
    assert "GPUVIEWER_MAX_ANNOTATIONS" in warning and [a.text for a in n.doc.annotations] == [f"n{i}" for i in range(5)]
    n.add(Annotation("note", "new", 9, None, 0))
    assert n.save({}) == (True, None)
    monkeypatch.setenv("GPUVIEWER_MAX_ANNOTATIONS", "100")
    assert sorted(a.text for a in load_doc(side).annotations) == sorted([f"n{i}" for i in range(8)] + ["new"])
    assert sorted(os.listdir(tmp_path)) == ["t.json", "t.json.gpuviewer.json"]  # nothing set aside


def test_save_never_replaces_a_fifo(tmp_path):
    side = str(tmp_path / "t.json.gpuviewer.json")
    os.mkfifo(side)
    got = []

    def load():
        try:
            load_doc(side)
        except TraceError as e:
            got.append(e)

    t = threading.Thread(target=load, daemon=True)
    t.start()
    t.join(60)  # hang detection: a blocking open of a FIFO waits for a writer forever
    if t.is_alive():
        os.close(os.open(side, os.O_WRONLY | os.O_NONBLOCK))  # release the reader
        pytest.fail("load_doc blocked on a FIFO")
    assert got and "not a regular file" in str(got[0])
    with pytest.raises(OSError):
        save_doc(side, AnnotationDoc([Annotation("note", "x", 1, None, 0)]))
    assert folder_state(str(tmp_path)) == {"t.json.gpuviewer.json": ("special", os.lstat(side).st_mode)}


# -- many annotations: capped with a warning, reports list the rest --------------------------------


def _notes(tmp_path, n: int, bare: bool = False) -> str:
    info = json.loads(run_cli_once("info", os.path.join(SAMPLES, "ddp"), "--json").stdout)  # shared by modules
    r0 = info["ranks"][0]
    step = (r0["end_ns"] - r0["start_ns"]) // n
    anns = [
        {"start_ns": r0["start_ns"] + i * step}
        if bare
        else {"kind": "note", "text": f"NOTE-{i}-", "start_ns": r0["start_ns"] + i * step, "rank": i % 2}
        for i in range(n)
    ]
    return _write(tmp_path, f"ann{n}.json", json.dumps({"annotations": anns}, separators=(",", ":")).encode())


def test_200k_annotations_capped_with_a_warning(tmp_path):
    ann = _notes(tmp_path, 200_000, bare=True)
    out = str(tmp_path / "x.png")
    r = run("screenshot", os.path.join(SAMPLES, "ddp"), "-o", out, "--annotations", ann, timeout=300, fork=False)
    assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr[-3000:]
    (line,) = r.lines()
    assert "ann200000.json" in line and "first 10,000 of 200,000" in line and "GPUVIEWER_MAX_ANNOTATIONS" in line
    assert os.path.getsize(out) > 10_000
    assert r.rss_mb < rss_bound(500), r.rss_mb  # measured 194 MB


def test_report_images_only_the_first_annotations(tmp_path):
    n = report.MAX_ANNOTATION_IMAGES + 16
    ann = _notes(tmp_path, n)
    out = tmp_path / "r.html"
    r = run("report", os.path.join(SAMPLES, "ddp"), "-o", str(out), "--annotations", ann, timeout=300)
    assert r.returncode == 0 and r.stderr == "", r.stderr[-3000:]
    h = out.read_text()
    n_findings = len(json.loads(run_cli_once("analyze", os.path.join(SAMPLES, "ddp"), "--json").stdout)["findings"])
    assert h.count("src='data:image/png;base64,") == 1 + n_findings + report.MAX_ANNOTATION_IMAGES
    assert all(f"NOTE-{i}-" in h for i in range(n))  # every annotation is in the report
    assert "the other 16 are listed" in h
    md = tmp_path / "r.md"
    r = run("report", os.path.join(SAMPLES, "ddp"), "-o", str(md), "--annotations", ann, timeout=300)
    assert r.returncode == 0
    text = md.read_text()
    assert text.count("![annotation](data:image/png;base64,") == report.MAX_ANNOTATION_IMAGES
    assert all(f"NOTE-{i}-" in text for i in range(n)) and "16 more annotations" in text


def test_report_annotation_images_draw_only_what_they_show():
    notes = [
        Annotation("note", "a", 100, None, 0),
        Annotation("note", "b", 1000, None, 0),
        Annotation("region", "c", 0, 50, 0),
        Annotation("region", "d", 150, 2000, 0),
        Annotation("arrow", "e", 5000, 10, 0, end_rank=1),
    ]
    got = [a.text for a in report._in_range(notes, 200, 400)]
    # a: label may reach into view (half a view to the left); d: overlaps; e: crosses it
    assert got == ["a", "d", "e"]


# -- memory snapshots -----------------------------------------------------------------------------

ENTRY = {
    "action": "alloc",
    "addr": 139920805371904,
    "size": 32768,
    "stream": 0,
    "time_us": 1796010650027534,
    "compile_context": "N/A",
    "user_metadata": "",
    "frames": [
        {"name": "forward", "filename": "/src/model.py", "line": 31},
        {"name": "c10::cuda::CUDACachingAllocator::malloc", "filename": "??", "line": 0},
    ],
}


def test_pickle_memo_amplification_refused_fast_and_small(tmp_path):
    # 12 KB: 3000 references to one list of 3000 references to one entry
    p = _write(tmp_path, "bomb.pickle", pickle.dumps({"device_traces": [[ENTRY] * 3000] * 3000}))
    assert os.path.getsize(p) < 20_000
    before = folder_state(str(tmp_path))
    r = run("info", p, "--json", timeout=120, fork=False)
    line = assert_refused(r, p, "too many objects")
    assert "> 20,000,000; raise GPUVIEWER_MAX_SNAPSHOT_OBJECTS" in line
    assert r.rss_mb < rss_bound(200), r.rss_mb  # measured 33 MB (2.6 GB before)
    assert folder_state(str(tmp_path)) == before


def test_snapshot_object_limit_can_be_raised(tmp_path):
    p = _write(tmp_path, "shared.pickle", pickle.dumps({"device_traces": [[ENTRY] * 100] * 10}))
    r = run("info", p, "--json", timeout=120)
    assert r.returncode == 0, r.stderr  # 1,000 allocations through shared references: fine
    r = run("info", p, "--json", env={"GPUVIEWER_MAX_SNAPSHOT_OBJECTS": "5000"}, timeout=120)
    assert_refused(r, p, "too many objects")


def test_pickle_reduce_copies_are_charged(tmp_path):
    # protocol 2 builds a set by calling set(list): 6 bytes copy a shared 3000-element list again
    big = b"]q\x02(" + b"".join(b"M" + struct.pack("<H", i) for i in range(3000)) + b"e"
    data = (
        b"\x80\x02c__builtin__\nset\nq\x01"
        + big
        + b"}(X\r\x00\x00\x00device_traces]("
        + b"h\x01h\x02\x85R" * 100_000
        + b"eu."
    )
    p = _write(tmp_path, "copies.pickle", data)
    r = run("info", p, "--json", timeout=120, fork=False)
    assert_refused(r, p, "too many objects")
    assert r.rss_mb < rss_bound(400), r.rss_mb  # measured 200 MB


@pytest.mark.parametrize(
    "name,data,needle",
    [
        # 100k nested lists, written opcode by opcode (pickle.dumps itself would recurse too deeply)
        ("deep.pickle", b"\x80\x04" + b"]" * 100_000 + b"a" * 99_999 + b".", "nested more than"),
        ("cycle.pickle", b"\x80\x02]q\x00h\x00a.", "reference cycle"),
        ("fields.pickle", pickle.dumps({"device_traces": [[dict(ENTRY, time_us="noon", size=[1])]]}), "no allocation"),
    ],
)
def test_hostile_snapshot_shapes_refused(tmp_path, name, data, needle):
    p = _write(tmp_path, name, data)
    r = run("info", p, "--json", timeout=120)
    assert_refused(r, p, needle)


def test_memory_timeline_with_a_bad_row_refused(tmp_path):
    rows = [[1_000 + i, 0, 4096, 1] for i in range(150)] + [[2_000, 0, "lots", 1]]
    p = _write(tmp_path, "mem.raw.json", json.dumps(rows).encode())
    r = run("info", p, "--json", timeout=120)
    assert_refused(r, p, "all integers")
