"""What a user does, as methods on the Qt-free Session, and the events it announces: the view
(range, lanes, selection, search), steps and findings, annotations with their sidecar and
autosave policy, and the topology. Expected values come from the raw trace files or from
plain numpy over the columns, not from the code under test."""

import gzip
import json
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest
from conftest import ROOT, SAMPLES, trace_path


@pytest.fixture()
def ddp(tmp_path):
    """samples/ddp copied, so a sidecar can be written beside it."""
    d = tmp_path / "ddp"
    shutil.copytree(SAMPLES + "/ddp", d)
    return str(d)


def _open(path):
    from gpuviewer.session import Session

    return Session.open([path])


def _record(s, *names):
    log = []
    for n in names:
        s.events.connect(n, lambda _n=n, **kw: log.append((_n, kw)))
    return log


def test_the_session_and_its_actions_import_and_run_without_qt():
    code = (
        "import sys; sys.modules['PySide6'] = None; sys.modules['pyqtgraph'] = None\n"
        "from gpuviewer.session import Session\n"
        "s = Session.open(['samples/ddp']); print(len(s.analysis.findings))\n"
        "print(s.search('nccl'), s.view.selected is not None)\n"
        "s.add_note('x'); s.paste_topology(open('samples/topo_matrix.txt').read())\n"
        "print(s.trace.topology is not None, s.analysis_ready is None)\n"
    )
    p = subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        env=dict(os.environ, PYTHONPATH=ROOT),
    )
    assert p.returncode == 0, p.stderr
    lines = p.stdout.split()
    assert int(lines[0]) >= 1
    assert int(lines[1]) > 0 and lines[2] == "True"
    assert lines[3:] == ["True", "True"]  # the topology joined and the analysis must run again


def test_range_events_once_per_change_and_padding():
    s = _open(SAMPLES + "/ddp")
    log = _record(s, "range")
    t0 = s.trace.start_ns + 1_000_000
    assert s.set_range(t0, t0 + 2_000_000) == (t0, t0 + 2_000_000)
    s.set_range(t0, t0 + 2_000_000)  # the same range: nothing to announce
    assert log == [("range", {"t0": t0, "t1": t0 + 2_000_000})]
    assert s.set_range(t0, t0 + 1000, padding=0.5) == (t0 - 500, t0 + 1500)
    assert s.set_range(t0, t0, padding=0) == (t0, t0 + 50)  # 50 ns at least


def test_search_finds_what_a_plain_scan_of_the_names_finds_in_time_order():
    s = _open(SAMPLES + "/ddp")
    c = s.trace.columns
    names = np.array([n.lower() for n in s.trace.names], dtype=object)
    want = np.flatnonzero(np.array(["allreduce" in n for n in names])[np.asarray(c["name"])])
    log = _record(s, "search", "selection")
    n = s.search("AllReduce")
    assert n == len(want) > 0
    assert sorted(s.view.matches.tolist()) == sorted(want.tolist())
    starts = np.asarray(c["start"])[s.view.matches]
    assert np.all(np.diff(starts) >= 0)
    assert s.view.selected == int(s.view.matches[0])  # the first match is selected
    assert ("search", {"text": "AllReduce", "count": n, "pos": -1}) in log
    # stepping wraps around in both directions
    s.next_match(-1)
    assert s.view.selected == int(s.view.matches[-1])
    s.next_match(+1)
    assert s.view.selected == int(s.view.matches[0])
    # the match is in view after stepping
    i = s.view.selected
    assert s.view.range[0] <= int(c["start"][i]) <= s.view.range[1]
    paren = int(np.array(["(" in n for n in names])[np.asarray(c["name"])].sum())
    assert s.search("(") == paren and s.view.search_error == ""  # a substring, not a regex
    assert s.search("(", regex=True) == 0 and s.view.search_error.startswith("bad regex")
    assert s.search("") == 0 and s.view.mask is None


def _raw_steps(folder):
    """ProfilerStep#N per rank from the raw JSON: (start, end) in ns."""
    out = {}
    for f in sorted(os.listdir(folder)):
        with gzip.open(os.path.join(folder, f), "rt") as fh:
            d = json.load(fh)
        base = int(d.get("baseTimeNanoseconds", 0))
        for e in d["traceEvents"]:
            if e.get("ph") == "X" and str(e.get("name", "")).startswith("ProfilerStep#"):
                n = int(e["name"].split("#")[1])
                a = base + round(float(e["ts"]) * 1e3)
                b = base + round((float(e["ts"]) + float(e["dur"])) * 1e3)
                lo, hi = out.get(n, (a, b))
                out[n] = (min(lo, a), max(hi, b))
    return out


def test_goto_step_shows_the_step_of_every_rank_as_the_raw_files_have_it():
    s = _open(SAMPLES + "/ddp")
    raw = _raw_steps(SAMPLES + "/ddp")
    n = sorted(raw)[len(raw) // 2]
    assert s.goto_step(n)
    lo, hi = raw[n]
    t0, t1 = s.view.range
    span = hi - lo
    # the step with 2% either side; the files' microseconds are rounded to ns once
    assert abs((t0 - lo) + (t1 - hi)) < 4_000  # centred on the step (integers: ns since 1970)
    assert abs((t1 - t0) - 1.04 * span) < 2_000
    assert not s.goto_step(10_000)
    nxt = s.step_nav(+1)
    assert nxt is not None and nxt > n


def test_step_keys_visit_every_step_even_where_a_late_rank_reaches_into_the_next():
    """nsys_ddp: rank 1 sleeps 50 ms in step 6, so step 6 (across ranks) reaches into step 7's
    time; the next-step key must still go 6 -> 7, not skip by the middle of the view."""
    import sqlite3

    path = trace_path("nsys", "nsys_ddp.sqlite")
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as db:  # the steps as the file names them
        names = [r[0] for r in db.execute("SELECT DISTINCT text FROM NVTX_EVENTS WHERE text LIKE 'step %'")]
    numbers = sorted(int(n.split()[1]) for n in names)
    assert len(numbers) >= 8, names
    s = _open(path)
    assert s.goto_step(numbers[0])
    seen = [numbers[0]] + [s.step_nav(+1) for _ in numbers[1:]]
    assert seen == numbers
    back = [s.step_nav(-1) for _ in numbers[1:]]
    assert back == numbers[-2::-1]


def test_a_finding_shown_highlights_its_range_and_selects_its_evidence():
    s = _open(SAMPLES + "/ddp")
    log = _record(s, "highlight", "reveal", "selection")
    with_ev = [f for f in s.analysis.findings if f.evidence and f.ranks]
    assert with_ev, "samples/ddp has findings with evidence"
    f = with_ev[0]
    i = s.show_finding(f)
    assert s.view.range[0] <= f.start_ns and s.view.range[1] >= f.end_ns
    assert s.view.highlight == (f.start_ns, f.end_ns, set(f.ranks))
    assert ("reveal", {"rank": f.ranks[0]}) in log
    # the longest event of the first evidence's name on that rank, inside the finding
    c = s.trace.columns
    name_ids = [k for k, n in enumerate(s.trace.names) if n == f.evidence[0].name]
    lane_rank = np.array([ln.rank for ln in s.trace.lanes])[np.asarray(c["lane"])]
    start, end = np.asarray(c["start"]), np.asarray(c["start"]) + np.asarray(c["dur"])
    cand = np.flatnonzero(
        np.isin(np.asarray(c["name"]), name_ids) & (lane_rank == f.ranks[0]) & (end > f.start_ns) & (start < f.end_ns)
    )
    assert len(cand) and i is not None and s.view.selected == i
    assert int(c["dur"][i]) == int(np.asarray(c["dur"])[cand].max())
    assert ("selection", {"event": i}) in log


def test_annotations_round_trip_with_the_view_through_the_sidecar(ddp):
    from gpuviewer.io.sidecar import sidecar_path

    s = _open(ddp)
    assert s.open_annotations() is None
    side = sidecar_path(s.paths)
    log = _record(s, "annotations", "dirty")
    # panning with no annotation never creates a file beside the user's trace
    s.set_range(s.trace.start_ns, s.trace.start_ns + 5_000_000)
    assert not any(n == "dirty" for n, _ in log)
    c = s.trace.columns
    i = int(np.argmax(np.asarray(c["dur"])))
    s.select(i)
    note = s.mark("longest")
    assert note.start_ns == int(c["start"][i]) and note.lane == s.trace.lanes[int(c["lane"][i])].key
    s.select_area(s.trace.start_ns + 10, s.trace.start_ns + 20_000, [int(c["lane"][i])])
    region = s.mark("area", region=True)
    assert (region.start_ns, region.end_ns) == (s.trace.start_ns + 10, s.trace.start_ns + 20_000)
    arrow = s.add_arrow(i, int(np.argmin(np.asarray(c["dur"]))), "why")
    s.edit_annotation(region, text="the area", color="#00ff00")
    extra = s.add_note("to remove")
    s.remove_annotation(extra)
    gone = s.add_region("gone", s.trace.start_ns + 5, s.trace.start_ns + 1)  # given backwards
    assert (gone.kind, gone.start_ns, gone.end_ns) == ("region", s.trace.start_ns + 1, s.trace.start_ns + 5)
    s.remove_annotation(gone)
    assert [n for n, _ in log].count("dirty") == 8
    s.view.lanes.hidden.add(s.trace.lanes[0].key)
    s.lanes_changed()
    assert s.save_annotations()
    saved = json.load(open(side))
    assert [a["kind"] for a in saved["annotations"]] == ["note", "region", "arrow"]
    assert saved["annotations"][1]["text"] == "the area" and saved["annotations"][1]["color"] == "#00ff00"
    assert saved["view"]["range"] == list(s.view.range)
    # reopened: the same annotations, range and lane layout
    s2 = _open(ddp)
    got = _record(s2, "range", "lanes")
    s2.open_annotations()
    assert [a.to_json() for a in s2.notes.doc.annotations] == [a.to_json() for a in (note, region, arrow)]
    assert s2.view.range == s.view.range
    assert s2.view.lanes.hidden == {s.trace.lanes[0].key}
    assert {n for n, _ in got} == {"range", "lanes"}
    with pytest.raises(AttributeError):
        s2.edit_annotation(s2.notes.doc.annotations[0], colour="#000")


def test_a_topology_joins_and_the_analysis_runs_again():
    from gpuviewer.io.errors import TraceError

    s = _open(SAMPLES + "/ddp")
    before = s.run_analysis()
    log = _record(s, "topology", "analysis")
    s.paste_topology(open(os.path.join(SAMPLES, "topo_matrix.txt")).read())
    assert [n for n, _ in log] == ["topology", "analysis"] and log[1][1]["analysis"] is None
    assert s.analysis_ready is None and s.trace.topology is not None
    after = s.run_analysis()
    assert after is not before and log[-1] == ("analysis", {"analysis": after})
    with pytest.raises(TraceError):
        s.paste_topology("not a matrix")


def test_selection_checks_the_event_and_is_announced_each_time():
    s = _open(trace_path("kineto", "gpu_straggler"))
    log = _record(s, "selection")
    s.select(5)
    s.select(5)  # again: a view brings it back into sight
    s.select(None)
    assert log == [("selection", {"event": 5})] * 2 + [("selection", {"event": None})]
    with pytest.raises(IndexError):
        s.select(len(s.trace))
