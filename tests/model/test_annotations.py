"""Annotations: sidecar round trip, crash safety (a real process killed before the rename),
keys and menus in the window, view state, image and report export."""

import json
import os
import shutil
import signal
import subprocess
import sys
import time

import pytest
from conftest import ROOT, SAMPLES, make_window, run_cli, run_cli_once, trace_path
from PySide6.QtCore import Qt

from gpuviewer.io.sidecar import load_doc, save_doc, sidecar_path
from gpuviewer.model.annotations import Annotation, AnnotationDoc, AnnotationError


@pytest.fixture
def ddp_copy(tmp_path):
    d = tmp_path / "ddp"
    shutil.copytree(os.path.join(SAMPLES, "ddp"), d)
    return str(d)


def _window(qtbot, tmp_path):
    w = make_window(qtbot, tmp_path, block_analysis=True, size=(1600, 900))
    w.annotations.ask_text = lambda *a, **k: "typed text"
    return w


def test_schema_validation():
    with pytest.raises(AnnotationError):
        AnnotationDoc.from_json({"annotations": [{"kind": "blob", "start_ns": 1}]})
    with pytest.raises(AnnotationError):
        AnnotationDoc.from_json({"annotations": [{"kind": "region", "start_ns": 5}]})
    with pytest.raises(AnnotationError):
        AnnotationDoc.from_json({"schema": 99, "annotations": []})
    a = Annotation.from_json({"kind": "region", "text": "x", "start_ns": 10, "end_ns": 2, "rank": 1})
    assert (a.start_ns, a.end_ns) == (2, 10)


def test_round_trip_through_the_window(qtbot, tmp_path, ddp_copy):
    files_before = {f: open(os.path.join(ddp_copy, f), "rb").read() for f in os.listdir(ddp_copy)}
    w = _window(qtbot, tmp_path)
    assert w.open_paths([ddp_copy], block=True)
    tv = w.timeline
    c = w.trace.columns
    # M on a selected event: a note on its lane
    i = int(next(k for k in range(len(w.trace)) if w.trace.lanes[int(c["lane"][k])].rank == 1))
    tv.select(i)
    tv.setFocus()
    qtbot.keyClick(tv, Qt.Key_M)  # the text is typed in place, on the timeline
    qtbot.keyClicks(tv.note_edit, "typed text")
    qtbot.keyClick(tv.note_edit, Qt.Key_Return)
    # Shift+M on an area selection: a region
    t0 = w.trace.start_ns + 10_000_000
    tv.select_area(t0, t0 + 20_000_000, 0.0, 3.0)
    qtbot.keyClick(tv, Qt.Key_M, Qt.ShiftModifier)
    qtbot.keyClicks(tv.note_edit, "typed text")
    qtbot.keyClick(tv.note_edit, Qt.Key_Return)
    # an arrow from the selected event to another
    j = int(next(k for k in range(len(w.trace)) if w.trace.lanes[int(c["lane"][k])].rank == 0))
    tv.select(i)
    w.arrow_to(j, "launch")
    kinds = [a.kind for a in w.doc.annotations]
    assert kinds == ["note", "region", "arrow"]
    assert w.doc.annotations[0].start_ns == int(c["start"][i])
    assert w.doc.annotations[0].lane == w.trace.lanes[int(c["lane"][i])].key
    assert w.annotations.tree.topLevelItemCount() == 3
    # view state: pin a lane and zoom
    lm = tv.layout_model
    pinned = next(r.lane for r in lm.rows if r.kind == "lane")
    lm.toggle_pin(pinned)
    tv.set_range(t0, t0 + 5_000_000)
    assert w.save_annotations()
    side = sidecar_path([ddp_copy])
    saved = json.load(open(side))
    assert saved["schema"] == 1 and len(saved["annotations"]) == 3
    before = [a.to_json() for a in w.doc.annotations]
    w.close()
    # reopen: identical annotations and view
    w2 = _window(qtbot, tmp_path)
    assert w2.open_paths([ddp_copy], block=True)
    assert [a.to_json() for a in w2.doc.annotations] == before
    assert w2.timeline.layout_model.state.pinned == [w.trace.lanes[pinned].key]
    v0, v1 = w2.timeline.visible_range()
    assert abs(v0 - t0) < 10 and abs(v1 - (t0 + 5_000_000)) < 10
    assert w2.timeline.item.annotations and len(w2.timeline.item.annotations) == 3
    # delete from the list
    w2.annotations.tree.setCurrentItem(w2.annotations.tree.topLevelItem(0))
    w2.annotations._delete()
    assert len(w2.doc.annotations) == 2
    # the traces were never written
    for f, data in files_before.items():
        assert open(os.path.join(ddp_copy, f), "rb").read() == data


def test_read_only_folder_uses_user_data_dir(tmp_path, monkeypatch):
    d = tmp_path / "ro"
    d.mkdir()
    shutil.copy(trace_path("kineto", "dataloader_stall.json.gz"), d / "t.json.gz")
    os.chmod(d, 0o555)
    monkeypatch.setenv("GPUVIEWER_DATA_DIR", str(tmp_path / "data"))
    if os.access(d, os.W_OK):  # root writes anyway (CI): make access() answer as for a user
        import gpuviewer.io.sidecar as sc

        real = os.access
        monkeypatch.setattr(sc.os, "access", lambda path, mode: False if str(path) == str(d) else real(path, mode))
    try:
        p = sidecar_path([str(d / "t.json.gz")])
        assert p.startswith(str(tmp_path / "data"))
        save_doc(p, AnnotationDoc([Annotation("note", "kept aside", 1, None, 0)]))
        assert [a.text for a in load_doc(p).annotations] == ["kept aside"]
        assert sorted(os.listdir(d)) == ["t.json.gz"]  # nothing written beside the trace
    finally:
        os.chmod(d, 0o755)


SAVE_SCRIPT = r"""
import sys
from gpuviewer.io.sidecar import save_doc
from gpuviewer.model.annotations import Annotation, AnnotationDoc
doc = AnnotationDoc([Annotation("note", "second version " + "x" * 100000, 5, None, 0)])
save_doc(sys.argv[1], doc)
"""


def test_kill_between_write_and_rename_keeps_previous(tmp_path):
    path = str(tmp_path / "t.json.gpuviewer.json")
    save_doc(path, AnnotationDoc([Annotation("note", "first version", 1, None, 0)]))
    env = dict(os.environ, PYTHONPATH=ROOT, GPUVIEWER_TEST_PAUSE_BEFORE_RENAME="30")
    p = subprocess.Popen([sys.executable, "-c", SAVE_SCRIPT, path], env=env)
    try:
        deadline = time.time() + 30
        while time.time() < deadline:  # wait until the temporary file is fully written
            tmps = [f for f in os.listdir(tmp_path) if f.endswith(".tmp")]
            if tmps and os.path.getsize(tmp_path / tmps[0]) > 100000:
                break
            time.sleep(0.05)
        else:
            pytest.fail("the writer never produced its temporary file")
        p.send_signal(signal.SIGKILL)
        p.wait(10)
    finally:
        if p.poll() is None:
            p.kill()
    doc = load_doc(path)
    assert [a.text for a in doc.annotations] == ["first version"]
    # and a normal save replaces it whole (a save merges with the file: the loaded doc, edited)
    doc.annotations[0].text = "third"
    assert save_doc(path, doc).messages == []
    assert [a.text for a in load_doc(path).annotations] == ["third"]
    assert not os.path.exists(path + ".lock")  # the killed writer's lock was taken over and removed


ANN = {
    "annotations": [
        {"kind": "note", "text": "NOTE-rank1-sleeps", "start_ns": 0, "rank": 1},
        {"kind": "region", "text": "REGION-waits", "title": "exposed", "start_ns": 0, "end_ns": 0, "rank": 0},
        {"kind": "arrow", "text": "ARROW-label", "start_ns": 0, "end_ns": 0, "rank": 0, "end_rank": 1},
    ],
    "view": {},
}


def _ann_file(tmp_path):
    info = json.loads(run_cli_once("info", os.path.join(SAMPLES, "ddp"), "--json").stdout)  # shared by modules
    r0 = info["ranks"][0]
    mid = (r0["start_ns"] + r0["end_ns"]) // 2
    doc = json.loads(json.dumps(ANN))
    doc["annotations"][0]["start_ns"] = mid
    doc["annotations"][1]["start_ns"], doc["annotations"][1]["end_ns"] = mid - 10_000_000, mid + 10_000_000
    doc["annotations"][2]["start_ns"], doc["annotations"][2]["end_ns"] = mid - 5_000_000, mid + 5_000_000
    p = tmp_path / "ann.json"
    p.write_text(json.dumps(doc))
    return str(p)


def test_svg_and_png_with_annotations(tmp_path):
    ann = _ann_file(tmp_path)
    svg = tmp_path / "a.svg"
    p = run_cli(
        "screenshot",
        os.path.join(SAMPLES, "ddp"),
        "--annotations",
        ann,
        "-o",
        str(svg),
        env={"QT_QPA_PLATFORM": "offscreen"},
    )
    assert p.returncode == 0, p.stderr
    text = svg.read_text(errors="replace")
    assert "REGION-waits" in text and "ARROW-label" in text
    png = tmp_path / "a.png"
    p = run_cli(
        "screenshot",
        os.path.join(SAMPLES, "ddp"),
        "--annotations",
        ann,
        "-o",
        str(png),
        env={"QT_QPA_PLATFORM": "offscreen"},
    )
    assert p.returncode == 0 and png.stat().st_size > 50_000
    bad = tmp_path / "bad.json"
    bad.write_text('{"annotations": [{"kind": "zzz", "start_ns": 1}]}')
    p = run_cli(
        "screenshot",
        os.path.join(SAMPLES, "ddp"),
        "--annotations",
        str(bad),
        "-o",
        str(png),
        env={"QT_QPA_PLATFORM": "offscreen"},
    )
    assert p.returncode == 2 and "zzz" in p.stderr and "Traceback" not in p.stderr


def test_report_html_and_md_are_self_contained(tmp_path):
    ann = _ann_file(tmp_path)
    out = tmp_path / "r.html"
    p = run_cli(
        "report",
        os.path.join(SAMPLES, "ddp"),
        "-o",
        str(out),
        "--annotations",
        ann,
        env={"QT_QPA_PLATFORM": "offscreen"},
    )
    assert p.returncode == 0, p.stderr
    h = out.read_text()
    assert h.startswith("<!DOCTYPE html>")
    assert "straggler" in h and "NOTE-rank1-sleeps" in h and "REGION-waits" in h
    assert "http://" not in h and "https://" not in h  # no network
    n_findings = len(json.loads(run_cli_once("analyze", os.path.join(SAMPLES, "ddp"), "--json").stdout)["findings"])
    # one image for the overview, one per finding, one per annotation, all embedded
    assert h.count("src='data:image/png;base64,") == 1 + n_findings + 3
    md = tmp_path / "r.md"
    p = run_cli("report", os.path.join(SAMPLES, "ddp"), "-o", str(md), env={"QT_QPA_PLATFORM": "offscreen"})
    assert p.returncode == 0 and "](data:image/png;base64," in md.read_text()
    assert run_cli("report", os.path.join(SAMPLES, "ddp"), "-o", str(tmp_path / "r.pdf")).returncode == 2


def test_export_image_scale(qtbot, tmp_path, ddp_copy):
    w = _window(qtbot, tmp_path)
    assert w.open_paths([ddp_copy], block=True)
    out = tmp_path / "x2.png"
    assert w.export_image(str(out), scale=2.0)
    from PySide6.QtGui import QImage

    img = QImage(str(out))
    assert img.width() == 2 * w.timeline.split.width()  # the timeline by default: its labels and lanes
    assert w.export_image(str(out), scale=2.0, whole_window=True)
    assert QImage(str(out)).width() == 2 * w.width()
