"""Issue 15: the window opens a session summary (OUT.gvsum). Real files throughout: 16 ranks made
from a real Kineto trace with ../shared/tools/scale_trace.py (conftest's ranks16), the summary
written by a real `python -m gpuviewer analyze ... --summary` child, opened in a real MainWindow (offscreen),
ranks expanded by a real click on their row (the background loader's process) or in this
thread, and what each shows compared with `python -m gpuviewer info --json` of the rank's file
and with the summary's Parquet tables read here through DuckDB."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest
from conftest import ROOT, make_window, trace_path

HANG_S = 300  # a guard against a hang, not a time limit
WAIT_MS = 180000


def cli(*args: str) -> subprocess.CompletedProcess:
    r = subprocess.run(
        [sys.executable, "-m", "gpuviewer", *args], capture_output=True, text=True, cwd=ROOT, timeout=HANG_S
    )
    assert r.returncode == 0, r.stderr
    assert "Traceback" not in r.stderr, r.stderr
    return r


def summarize(paths: list[str], out: str) -> dict:
    cli("analyze", *paths, "--summary", out, "--json")
    with open(os.path.join(out, "manifest.json")) as f:
        return json.load(f)


def info_events(path: str) -> list[int]:
    """Events of each rank of a file, as `gpuviewer info --json` counts them (another process)."""
    return [r["events"] for r in json.loads(cli("info", path, "--json").stdout)["ranks"]]


@pytest.fixture(scope="module")
def job16(tmp_path_factory, ranks16) -> tuple[str, str, dict]:
    """16 ranks (conftest's, shared by the run) and their summary: (traces folder, summary
    folder, manifest)."""
    out = str(tmp_path_factory.mktemp("job16") / "job.gvsum")
    m = summarize([ranks16], out)
    assert len(m["ranks"]) == 16 and m["findings"]
    return ranks16, out, m


def open_window(qtbot, tmp_path, path: str):
    w = make_window(qtbot, tmp_path, size=(1600, 1000))
    assert w.open_paths([path]), w.last_error
    qtbot.wait(50)
    return w


def header(w, rank: int):
    return next(r for r in w.timeline.layout_model.rows if r.kind == "header" and r.rank == rank)


def click_rank(qtbot, w, rank: int) -> None:
    """The click on a rank's row in the lane labels that unfolds it."""
    from PySide6.QtCore import QPoint, Qt

    w.timeline.scroll_to_rank(rank)
    qtbot.wait(20)
    row, labels = header(w, rank), w.timeline.labels
    qtbot.mouseClick(labels, Qt.LeftButton, pos=QPoint(30, int(labels._to_dev(row.y + row.h / 2))))


def lane_ranks(w) -> set[int]:
    return {ln.rank for ln in w.trace.lanes}


def summary_pixels(w, rank: int) -> tuple[int, int]:
    """Pixels of the summary row's compute (blue) and communication (orange) bands of a rank on
    screen, counted along the middle of each band."""
    from PySide6.QtCore import QPointF

    from gpuviewer.render.slices_item import SUMMARY_COMM, SUMMARY_GPU

    tv = w.timeline
    tv.scroll_to_rank(rank)
    tv.plot.viewport().repaint()
    img = tv.plot.viewport().grab().toImage()
    row = header(w, rank)
    (x0, x1), _ = tv.vb.viewRange()
    out = []
    for frac, brush in ((0.52, SUMMARY_GPU), (0.76, SUMMARY_COMM)):
        # the band is 0.22 of the row high from this fraction down: sample its middle
        p = tv.plot.mapFromScene(tv.vb.mapViewToScene(QPointF(x0, row.y + row.h * (frac + 0.11))))
        want = brush.color().rgb()
        out.append(sum(1 for x in range(img.width()) if img.pixel(x, p.y()) == want))
    return out[0], out[1]


def test_a_summary_opens_with_a_row_per_rank_findings_and_the_rank_overview(qtbot, tmp_path, job16):
    import duckdb
    import numpy as np

    _traces, out, m = job16
    w = open_window(qtbot, tmp_path, out)
    t = w.trace
    ranks = [r["rank"] for r in m["ranks"]]
    assert [r.rank for r in t.ranks] == ranks and len(t) == 0  # every rank, no event read
    heads = [r for r in w.timeline.layout_model.rows if r.kind == "header"]
    assert [r.rank for r in heads] == ranks
    assert w.timeline.layout_model.state.collapsed_ranks == set(ranks)  # all summary rows
    # each row drawn from the profile: its busy time is what profiles.parquet says, and it is on screen
    db = dict(
        duckdb.sql(
            f"SELECT rank, sum(compute * (end_ns - start_ns)) FROM '{out}/profiles.parquet' GROUP BY rank"
        ).fetchall()
    )
    for r in ranks:
        s, e = w.timeline.item.slices._busy_of(r)[False]
        assert abs(int((e - s).sum()) - db[r]) <= len(s), r  # ns rounded per bin
    for r in (ranks[0], ranks[-1]):
        blue, orange = summary_pixels(w, r)
        assert blue > 100 and orange > 100, (r, blue, orange)
    # the docks, from the analysis the summary keeps
    assert w.findings.tree.topLevelItemCount() == len(m["findings"])
    assert w.ranks_view.table.rowCount() == len(ranks)
    assert w.overview.rank_box.count() == len(ranks)
    # the step lines from steps.parquet
    assert (
        len(t.steps)
        == duckdb.sql(f"SELECT count(*) FROM '{out}/steps.parquet' WHERE step IS NOT NULL").fetchall()[0][0]
    )
    status = w.status_files.text()
    assert "Summary: 16 ranks on 1 host" in status and "no clock correction" in status and "load" in status
    # a finding chosen zooms the timeline to its range
    f = m["findings"][0]
    w.findings.choose(0)
    t0, t1 = w.timeline.visible_range()
    assert t0 <= f["start_ns"] and f["end_ns"] <= t1 and (t1 - t0) < 1.5 * (f["end_ns"] - f["start_ns"])
    # the summary keeps its clock alignment: the switches that would reopen the traces are off
    assert not w.align_action.isEnabled()
    # opened again from the recent list, and dropped on the window: the same summary
    assert w._recent()[0] == [out]
    assert w.open_paths(w._recent()[0]) and len(w.trace.ranks) == 16
    w.dropEvent(_Drop([out]))
    assert w.paths == [out] and len(w.trace.ranks) == 16 and w.summary_session is not None
    # a session of traces replaces it: the summary lets go, the switches are back
    assert w.open_paths([trace_path("kineto", "ddp_clean")], block=True), w.last_error
    assert w.summary_session is None and w.align_action.isEnabled()
    assert not isinstance(w.trace, type(t)) and len(w.trace) > 0
    assert np.all([isinstance(x, int) for x in ranks])


class _Drop:
    """What dropEvent reads of a drop of files."""

    def __init__(self, paths: list[str]) -> None:
        from PySide6.QtCore import QMimeData, QUrl

        self.mime = QMimeData()
        self.mime.setUrls([QUrl.fromLocalFile(p) for p in paths])

    def mimeData(self):  # noqa: N802 - Qt's name
        return self.mime

    def acceptProposedAction(self) -> None:  # noqa: N802
        pass


def test_expanding_ranks_loads_their_lanes_only_in_the_background(qtbot, tmp_path, job16):
    traces, out, m = job16
    w = open_window(qtbot, tmp_path, out)
    files = {r["rank"]: r["files"][0] for r in m["ranks"]}
    k, j = 5, 12
    rng = w.timeline.visible_range()
    click_rank(qtbot, w, k)
    assert k in w.timeline.layout_model.state.collapsed_ranks  # a summary row until its events are here
    assert "loading" in w.statusBar().currentMessage()
    qtbot.waitUntil(lambda: k in w.trace.loaded, timeout=WAIT_MS)
    assert lane_ranks(w) == {k}
    assert w.trace.rank_events(k) == info_events(files[k])[0]
    assert w.timeline.visible_range() == rng  # the view stays where it was
    assert k not in w.timeline.layout_model.state.collapsed_ranks
    assert w.timeline.layout_model.state.collapsed_ranks == {r["rank"] for r in m["ranks"]} - {k}
    lanes_k = [r for r in w.timeline.layout_model.rows if r.kind == "lane" and r.rank == k]
    assert lanes_k and all(w.trace.lanes[r.lane].rank == k for r in lanes_k)
    # the events sit on the summary's clock, inside the rank's span the manifest records
    info = next(r for r in m["ranks"] if r["rank"] == k)
    assert info["start_ns"] <= int(w.trace.columns["start"].min()) and w.trace.end_ns >= info["end_ns"]
    # a second rank joins the first; the others stay summary rows
    click_rank(qtbot, w, j)
    qtbot.waitUntil(lambda: j in w.trace.loaded, timeout=WAIT_MS)
    assert lane_ranks(w) == {k, j}
    assert w.trace.rank_events(k) == info_events(files[k])[0]
    assert w.trace.rank_events(j) == info_events(files[j])[0]
    assert len([r for r in w.timeline.layout_model.rows if r.kind == "header"]) == 16
    # folding an expanded rank makes it a summary row again, drawn from its events now
    click_rank(qtbot, w, k)
    assert k in w.timeline.layout_model.state.collapsed_ranks and w.trace.gpu_busy(k) is None
    click_rank(qtbot, w, k)  # and unfolding it needs no load
    assert k not in w.timeline.layout_model.state.collapsed_ranks and not w.summary_session.busy()
    # an event of the expanded rank can be selected and has its details
    lane = next(r.lane for r in w.timeline.layout_model.rows if r.kind == "lane" and r.rank == j)
    ev = w.trace.lane_slice(lane).start
    w.timeline.select(ev)
    assert w.details.topLevelItemCount() > 0


def test_a_summary_opens_without_its_traces_and_says_which_file_is_missing(qtbot, tmp_path, job16):
    """The traces moved away after the summary was written: the overview, findings and rows
    show; expanding a rank says in one line which file is missing."""
    traces, _out, _m = job16
    mine = str(tmp_path / "traces")
    shutil.copytree(traces, mine)
    out = str(tmp_path / "job.gvsum")
    m = summarize([mine], out)
    shutil.move(mine, str(tmp_path / "elsewhere"))
    w = open_window(qtbot, tmp_path, os.path.join(out, "manifest.json"))  # the manifest opens its folder
    assert w.paths == [out] and len(w.trace.ranks) == 16
    assert len([r for r in w.timeline.layout_model.rows if r.kind == "header"]) == 16
    assert w.findings.tree.topLevelItemCount() == len(m["findings"])
    assert w.ranks_view.table.rowCount() == 16
    assert sum(summary_pixels(w, 3)) > 200
    click_rank(qtbot, w, 3)
    msg = w.statusBar().currentMessage()
    missing = next(r["files"][0] for r in m["ranks"] if r["rank"] == 3)
    assert missing in msg and "missing" in msg and "\n" not in msg, msg
    assert len(w.trace) == 0 and 3 in w.timeline.layout_model.state.collapsed_ranks
    # a broken file (cut short) is one line too, naming it
    os.makedirs(os.path.dirname(missing))
    with open(missing, "wb") as f:
        f.write(b'{"traceEvents": [{"name": "x", "ph": "X", "ts": 1')
    click_rank(qtbot, w, 3)
    qtbot.waitUntil(lambda: not w.summary_session.busy(), timeout=WAIT_MS)
    msg = w.statusBar().currentMessage()
    assert msg.startswith("Rank 3: cannot load its timeline") and missing in msg and "\n" not in msg, msg
    assert len(w.trace) == 0


def test_ranks_of_one_nsys_report_load_apart(qtbot, tmp_path):
    """A report of two ranks and one of one: expanding rank 1 takes rank 1's lanes out of the
    two-rank report; rank 2 is the single-rank report, numbered as the summary numbers it."""
    ddp, single = trace_path("nsys", "nsys_ddp.sqlite"), trace_path("nsys", "nsys_single.sqlite")
    out = str(tmp_path / "nsys.gvsum")
    m = summarize([ddp, single], out)
    assert [r["rank"] for r in m["ranks"]] == [0, 1, 2]
    w = open_window(qtbot, tmp_path, out)
    assert w.timeline.layout_model.state.collapsed_ranks == {0, 1, 2}  # a few ranks start folded too
    ctl = w.summary_session
    assert ctl.expand(1, block=True), ctl.last_message
    assert lane_ranks(w) == {1} and w.trace.rank_events(1) == info_events(ddp)[1]
    assert ctl.expand(2, block=True), ctl.last_message
    assert lane_ranks(w) == {1, 2} and w.trace.rank_events(2) == info_events(single)[0]
    assert w.trace.rank_events(1) == info_events(ddp)[1]
    # GPU names from the files, in the rank titles
    assert any("NVIDIA" in r.label for r in w.timeline.layout_model.rows if r.kind == "header" and r.rank == 2)


def test_a_damaged_summary_is_one_line(qtbot, tmp_path, job16):
    _traces, out, _m = job16
    bad = str(tmp_path / "bad.gvsum")
    shutil.copytree(out, bad)
    os.remove(os.path.join(bad, "profiles.parquet"))
    w = make_window(qtbot, tmp_path)
    assert not w.open_paths([bad])
    assert "profiles" in w.last_error and bad in w.last_error and "\n" not in w.last_error


def test_the_view_saved_with_annotations_expands_its_ranks_again(qtbot, tmp_path, job16):
    """A note on an expanded rank saves the view beside the summary; opened again, the rank
    it left expanded loads by itself."""
    _traces, out, m = job16
    mine = str(tmp_path / "mine.gvsum")
    shutil.copytree(out, mine)
    w = open_window(qtbot, tmp_path, mine)
    assert w.summary_session.expand(7, block=True), w.summary_session.last_message
    w.session.add_note("look here", rank=7)
    w.controller.flush()
    assert os.path.exists(w.sidecar)
    w.close()
    again = tmp_path / "again"  # another window, its own settings
    again.mkdir()
    w2 = make_window(qtbot, again, size=(1600, 1000))
    assert w2.open_paths([mine])
    qtbot.waitUntil(lambda: 7 in w2.trace.loaded, timeout=WAIT_MS)
    assert lane_ranks(w2) == {7} and 7 not in w2.timeline.layout_model.state.collapsed_ranks
    assert [a.text for a in w2.doc.annotations] == ["look here"]


def test_combining_ranks_keeps_their_events_names_and_flows():
    """The store of expanded ranks (model.summary_rows.combine): one rank out of a two-rank
    report and one Kineto rank, each event with its name, lane order and launch -> kernel flows
    as in the file it came from."""
    import numpy as np

    from gpuviewer.io.session import load
    from gpuviewer.model.summary_rows import combine
    from gpuviewer.model.trace import Trace

    a, b = load([trace_path("nsys", "nsys_ddp.sqlite")]), load([trace_path("kineto", "ddp", "ddp_rank1.json.gz")])
    m = combine([(a, 1), (b, 1)])
    t = Trace(
        format="mixed",
        columns=m["columns"],
        names=m["names"],
        lanes=m["lanes"],
        ranks=[],
        flows=m["flows"],
        instants=m["instants"],
        sources=m["sources"],
    )

    def events(tr, lanes):
        c = tr.columns
        return [
            (tr.lanes[i].key, tr.names[int(c["name"][k])], int(c["start"][k]), int(c["dur"][k]))
            for i in lanes
            for k in range(tr.lane_slice(i).start, tr.lane_slice(i).stop)
        ]

    def flows(tr):
        c, (s, d) = tr.columns, tr.flows
        lr = tr.lane_rank_array()
        return {
            (tr.names[int(c["name"][x])], int(c["start"][x]), tr.names[int(c["name"][y])], int(c["start"][y]))
            for x, y in zip(np.asarray(s), np.asarray(d))
            if lr[c["lane"][x]] == 1 and lr[c["lane"][y]] == 1
        }

    assert events(t, range(len(t.lanes))) == events(a, a.lanes_of_rank(1)) + events(b, b.lanes_of_rank(1))
    assert flows(t) == flows(a) | flows(b) and flows(t)
    assert all(np.all(np.diff(np.asarray(t.columns["start"][t.lane_slice(i)])) >= 0) for i in range(len(t.lanes)))
    assert t.sources[t.lanes[-1].source].path == b.sources[0].path  # arguments are read from the right file


def test_report_and_timeline_only_of_a_summary_say_what_they_need(tmp_path, job16):
    """A summary holds no events: `report` and `screenshot --timeline-only` of one exit 2 with
    one line that names it and says what works instead."""
    _traces, summ, _manifest = job16
    for args in (
        ("report", summ, "-o", str(tmp_path / "r.html")),
        ("screenshot", summ, "-o", str(tmp_path / "t.png"), "--timeline-only"),
    ):
        r = subprocess.run(
            [sys.executable, "-m", "gpuviewer", *args], capture_output=True, text=True, cwd=ROOT, timeout=600
        )
        lines = [ln for ln in r.stderr.splitlines() if ln.startswith("gpuviewer:")]
        assert r.returncode == 2 and len(lines) == 1 and summ in lines[0] and "session summary" in lines[0], r.stderr
        assert "Traceback" not in r.stderr
        assert not os.path.exists(args[3])
