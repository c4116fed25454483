"""The Qt-free core of a session: opening, analysing and annotating with PySide6 made
unimportable (a real subprocess), and the Notes rules (where annotations go, when they are
saved, what a selection makes)."""

import json
import os
import subprocess
import sys

from conftest import ROOT, SAMPLES

NO_QT = r"""
import json, sys
sys.modules["PySide6"] = None  # any import of Qt fails
sys.modules["pyqtgraph"] = None
from gpuviewer.session import Session
from gpuviewer.session.notes import Notes
s = Session.open([sys.argv[1]])
out = {"findings": len(s.analysis.findings), "top": s.analysis.findings[0].title,
       "evidence": [e.name for f in s.analysis.all_findings() for e in f.evidence][:1],
       "kernels": len(s.kernels), "sql": int(s.sql("SELECT count(*) AS n FROM kernels")["n"][0])}
n = Notes()
warn = n.open_for(s.paths)
i = int(s.kernels.sort_values("dur").iloc[-1]["id"])
a = n.add(n.from_selection(s.trace, "slow kernel", region=False, selected=i, area=None, visible=(0, 1)))
r = n.add(n.from_selection(s.trace, "the step", region=True, selected=None,
                           area=(int(s.steps.start[0]), int(s.steps.end[0]), [0]), visible=(0, 1)))
ok, msg = n.save({"range": [1, 2], "lanes": {}})
back = Notes(); back.open_for(s.paths)
out.update({"warn": warn, "saved": ok, "sidecar": n.sidecar, "kinds": [x.kind for x in back.doc.annotations],
            "note_at": a.start_ns == int(s.trace.columns["start"][i]), "region": [r.start_ns, r.end_ns],
            "view": back.doc.view, "qt": [m for m in sys.modules if m.startswith(("PySide6.", "pyqtgraph."))]})
print(json.dumps(out))
"""


def test_session_analysis_and_notes_work_without_qt(tmp_path):
    import shutil

    data = tmp_path / "ddp"
    shutil.copytree(SAMPLES + "/ddp", data)
    env = dict(
        os.environ, PYTHONPATH=ROOT, GPUVIEWER_CACHE_DIR=str(tmp_path / "cache"), XDG_DATA_HOME=str(tmp_path / "data")
    )
    p = subprocess.run(
        [sys.executable, "-c", NO_QT, str(data)], capture_output=True, text=True, env=env, cwd=ROOT, timeout=300
    )
    assert p.returncode == 0, p.stderr
    got = json.loads(p.stdout.strip().splitlines()[-1])
    assert got["findings"] >= 1 and got["top"] and got["evidence"]
    assert got["kernels"] == got["sql"] > 0
    assert got["warn"] is None and got["saved"] and got["kinds"] == ["note", "region"]
    assert got["note_at"] and got["region"][0] < got["region"][1]
    assert got["view"] == {"range": [1, 2], "lanes": {}} and got["qt"] == []
    assert os.path.exists(got["sidecar"])


def test_panning_alone_never_creates_a_sidecar(tmp_path):
    from gpuviewer.model.annotations import Annotation
    from gpuviewer.session.notes import Notes

    trace = tmp_path / "t.json"
    trace.write_text("[]")
    n = Notes()
    n.open_for([str(trace)])
    assert not n.save_on_view_change()  # nothing to keep: no file beside the trace
    calls = []
    n.listeners.append(lambda: calls.append(1))
    n.add(Annotation("note", "x", 5, None, 0, None))
    assert n.save_on_view_change() and calls == [1]
    # a note is shown with 2 ms around it; a region with a quarter of its span either side
    assert Notes.range_of(Annotation("note", "x", 10_000_000, None, 0, None)) == (9_500_000, 10_500_000)
    assert Notes.range_of(Annotation("region", "r", 0, 8_000_000, 0, None)) == (-2_000_000, 10_000_000)
