"""Issue 30: annotations are never lost between two sessions of one trace (two windows, or the
window and a notebook). Each session is a real separate process driven line by line over its
stdin (gpuviewer.session.notes / gpuviewer.session, no Qt), saving one sidecar: additions on both sides
are kept, deletions stay deleted, the same note changed on both sides is reported and kept
twice; the file keeps its mode, a symlinked sidecar stays a link; more notes than the limit are
warned about at open and never cut."""

import json
import os
import shutil
import stat
import subprocess
import sys

import pytest
from conftest import ROOT, SAMPLES

SIDECAR = "annotations.gpuviewer.json"

# one session: a command per line in, a JSON answer per line out (what the session holds after it)
DRIVER = r"""
import json, sys
from gpuviewer.model.annotations import Annotation
if sys.argv[1] == "session":
    from gpuviewer.session import Session
    s = Session.open([sys.argv[2]])
    notes = s.notes
    events = []
    s.events.connect("annotations", lambda **kw: events.append("annotations"))
    s.events.connect("message", lambda **kw: events.append(kw["text"]))
else:
    from gpuviewer.session.notes import Notes
    s, notes, events = None, Notes(), []
def find(text):
    return next(a for a in notes.doc.annotations if a.text == text)
print(json.dumps({"ready": True}), flush=True)
for line in sys.stdin:
    cmd = json.loads(line)
    op, out = cmd["op"], {}
    if op == "open":
        out["warning"] = s.open_annotations() if s else notes.open_for([sys.argv[2]])
    elif op == "add":
        if s:
            s.add_note(cmd["text"], s.trace.start_ns + 1000, 0)
        else:
            notes.add(Annotation("note", cmd["text"], 1000, None, 0))
    elif op == "edit":
        find(cmd["text"]).text = cmd["new"]  # in place, as the annotations panel edits
        notes.edited()
    elif op == "delete":
        notes.doc.annotations.remove(find(cmd["text"]))
        notes.edited()
    elif op == "save":
        events.clear()
        if s:
            out["saved"], out["message"] = s.save_annotations(), None
        else:
            out["saved"], out["message"] = notes.save({})
        out["events"] = list(events)
    out["texts"] = sorted(a.text for a in notes.doc.annotations)
    out["hidden"] = len(notes.doc.hidden)
    print(json.dumps(out), flush=True)
"""


class Side:
    """One session in its own process."""

    def __init__(self, folder: str, env: dict, api: str = "notes") -> None:
        self.p = subprocess.Popen(
            [sys.executable, "-c", DRIVER, api, folder],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=ROOT,
            env=env,
        )
        self._answer()

    def _answer(self) -> dict:
        line = self.p.stdout.readline()
        if not line:  # the child ended: what it said is the failure
            self.p.wait()
            pytest.fail(f"session process ended (exit {self.p.returncode}): {self.p.stderr.read()[-3000:]}")
        return json.loads(line)

    def do(self, op: str, **kw) -> dict:
        self.p.stdin.write(json.dumps(dict(kw, op=op)) + "\n")
        self.p.stdin.flush()
        return self._answer()

    def close(self) -> str:
        self.p.stdin.close()
        self.p.wait()
        err = self.p.stderr.read()
        self.p.stdout.close()
        self.p.stderr.close()
        assert self.p.returncode == 0 and "Traceback" not in err, err[-3000:]
        return err


@pytest.fixture
def ddp(tmp_path):
    d = tmp_path / "ddp"
    shutil.copytree(os.path.join(SAMPLES, "ddp"), d)
    return str(d)


@pytest.fixture
def env(tmp_path):
    return dict(
        os.environ,
        PYTHONPATH=ROOT,
        GPUVIEWER_CACHE_DIR=str(tmp_path / "cache"),
        GPUVIEWER_DATA_DIR=str(tmp_path / "data"),
    )


@pytest.fixture
def two(ddp, env):
    sides = []

    def make(api: str = "notes", extra: dict | None = None) -> Side:
        s = Side(ddp, dict(env, **(extra or {})), api)
        sides.append(s)
        return s

    yield make
    for s in sides:
        if s.p.poll() is None:
            s.p.kill()
            s.p.wait()
        for f in (s.p.stdin, s.p.stdout, s.p.stderr):
            if not f.closed:
                f.close()


def on_disk(ddp: str) -> list[str]:
    with open(os.path.join(ddp, SIDECAR)) as f:
        return sorted(a["text"] for a in json.load(f)["annotations"])


def test_both_sessions_notes_kept(two, ddp):
    a, b = two(), two()
    assert a.do("open")["warning"] is None and b.do("open")["warning"] is None
    for i in range(3):
        b.do("add", text=f"B{i}")
    assert b.do("save") == {"saved": True, "message": None, "events": [], "texts": ["B0", "B1", "B2"], "hidden": 0}
    for i in range(3):
        a.do("add", text=f"A{i}")
    got = a.do("save")
    six = ["A0", "A1", "A2", "B0", "B1", "B2"]
    assert got["saved"] and got["message"] is None and got["texts"] == six  # A now shows B's notes too
    assert on_disk(ddp) == six
    # B's next save (nothing changed there) keeps A's, and B shows them
    assert b.do("save")["texts"] == six and on_disk(ddp) == six
    a.close(), b.close()
    assert sorted(os.listdir(ddp)) == sorted(os.listdir(SAMPLES + "/ddp") + [SIDECAR])  # no lock file left


def test_window_session_shows_the_other_processes_notes(two, ddp):
    # the Session API, as the window and a notebook use it: after the save its doc is the file's,
    # and it announces the change (the window redraws the timeline and the list on that event)
    a, b = two("session"), two()
    a.do("open"), b.do("open")
    b.do("add", text="from the notebook")
    b.do("save")
    a.do("add", text="from the window")
    got = a.do("save")
    assert got["saved"] and got["texts"] == ["from the notebook", "from the window"]
    assert "annotations" in got["events"]
    assert on_disk(ddp) == ["from the notebook", "from the window"]
    a.close(), b.close()


def test_deletion_by_one_side_is_kept(two, ddp):
    a = two()
    a.do("open")
    for t in ("keep", "drop", "edit"):
        a.do("add", text=t)
    a.do("save")
    a.close()
    a, b = two(), two()
    a.do("open"), b.do("open")
    b.do("delete", text="drop")
    b.do("add", text="B new")
    b.do("save")
    a.do("edit", text="edit", new="edited by A")  # A changes another note, and saves after B
    got = a.do("save")
    assert got["message"] is None
    assert on_disk(ddp) == got["texts"] == ["B new", "edited by A", "keep"]  # "drop" stays deleted
    # and A's own deletion too, with B saving last
    a.do("delete", text="keep")
    a.do("save")
    b.do("add", text="B later")
    assert b.do("save")["texts"] == on_disk(ddp) == ["B later", "B new", "edited by A"]
    a.close(), b.close()


def test_same_note_changed_in_both_is_reported_and_both_kept(two, ddp):
    a = two()
    a.do("open")
    a.do("add", text="shared")
    a.do("save")
    b = two()
    b.do("open")
    b.do("edit", text="shared", new="B's words")
    assert b.do("save")["message"] is None
    a.do("edit", text="shared", new="A's words")
    got = a.do("save")
    assert got["saved"] and "changed here and in another window" in got["message"]
    assert "A's words" in got["message"] and "B's words" in got["message"]
    assert got["texts"] == on_disk(ddp) == ["A's words", "B's words"]
    # a note deleted here while the other side changed it: the change is kept, and said
    a.do("add", text="fresh")
    a.do("save")
    assert b.do("save")["texts"] == ["A's words", "B's words", "fresh"]  # B takes A's side of the conflict
    b.do("edit", text="fresh", new="fresh, by B")
    b.do("save")
    a.do("delete", text="fresh")
    got = a.do("save")
    assert "deleted here and changed in another window" in got["message"] and "fresh, by B" in got["message"]
    assert got["texts"] == on_disk(ddp) == ["A's words", "B's words", "fresh, by B"]
    a.close(), b.close()


def test_old_sidecar_without_ids_merges(two, ddp):
    # a sidecar of an earlier version: no ids, no modified times; both sessions give its notes
    # the same ids, so neither duplicates them
    old = {
        "schema": 1,
        "annotations": [{"kind": "note", "text": f"old {i}", "start_ns": 5, "rank": 0} for i in range(3)],
        "view": {},
    }
    with open(os.path.join(ddp, SIDECAR), "w") as f:
        json.dump(old, f)
    a, b = two(), two()
    a.do("open"), b.do("open")
    b.do("delete", text="old 1")
    b.do("add", text="B")
    b.do("save")
    a.do("add", text="A")
    assert a.do("save")["texts"] == on_disk(ddp) == ["A", "B", "old 0", "old 2"]
    with open(os.path.join(ddp, SIDECAR)) as f:
        ids = [x["id"] for x in json.load(f)["annotations"]]
    assert len(set(ids)) == 4 and all(ids)
    a.close(), b.close()


def test_mode_is_kept_and_a_new_file_follows_the_umask(two, ddp):
    side = os.path.join(ddp, SIDECAR)
    a = two()
    a.do("open")
    a.do("add", text="x")
    old = os.umask(0o022)  # the child inherited this process's umask when it started: read it back
    os.umask(old)
    a.do("save")
    assert stat.S_IMODE(os.stat(side).st_mode) == 0o666 & ~old  # as any file the user makes, not 0600
    os.chmod(side, 0o644)
    a.do("add", text="y")
    a.do("save")
    assert stat.S_IMODE(os.stat(side).st_mode) == 0o644
    os.chmod(side, 0o640)
    a.do("add", text="z")
    a.do("save")
    assert stat.S_IMODE(os.stat(side).st_mode) == 0o640
    a.close()


def test_symlinked_sidecar_stays_a_link_and_its_target_is_written(two, ddp, tmp_path):
    shared = tmp_path / "team"
    shared.mkdir()
    target = shared / "notes.json"
    target.write_text(json.dumps({"annotations": [{"kind": "note", "text": "team", "start_ns": 1}]}))
    os.chmod(target, 0o644)
    side = os.path.join(ddp, SIDECAR)
    os.symlink(target, side)
    a = two()
    a.do("open")
    a.do("add", text="mine")
    got = a.do("save")
    assert got["saved"] and got["texts"] == ["mine", "team"]
    assert os.path.islink(side) and os.readlink(side) == str(target)
    assert on_disk(ddp) == ["mine", "team"] and stat.S_IMODE(os.stat(target).st_mode) == 0o644
    assert sorted(os.listdir(shared)) == ["notes.json"]  # temporary and lock files gone
    # a link to nothing is refused with a message, and left as it is
    os.unlink(target)
    a.do("add", text="more")
    got = a.do("save")
    assert not got["saved"] and side in got["message"] and "does not exist" in got["message"]
    assert os.path.islink(side) and not os.path.exists(target)
    a.close()


def test_over_the_limit_warned_at_open_and_never_cut(two, ddp):
    many = {
        "schema": 1,
        "annotations": [{"kind": "note", "text": f"n{i:02}", "start_ns": i, "rank": 0} for i in range(12)],
        "view": {},
    }
    side = os.path.join(ddp, SIDECAR)
    with open(side, "w") as f:
        json.dump(many, f)
    a, b = two(extra={"GPUVIEWER_MAX_ANNOTATIONS": "5"}), two()
    w = a.do("open")["warning"]
    assert side in w and "12 annotations" in w and "limit of 5" in w and "GPUVIEWER_MAX_ANNOTATIONS" in w
    assert b.do("open")["warning"] is None
    b.do("delete", text="n09")  # a note that A does not show: B's deletion still holds
    b.do("save")
    a.do("add", text="A")
    a.do("delete", text="n00")
    got = a.do("save")
    assert got["saved"] and got["message"] is None and got["hidden"] == 6
    want = ["A"] + [f"n{i:02}" for i in range(1, 12) if i != 9]
    assert on_disk(ddp) == want
    assert not [f for f in os.listdir(ddp) if ".damaged-" in f]  # never set aside as damaged
    a.close(), b.close()


def test_concurrent_saves_lose_nothing(two, ddp):
    # two sessions saving after every note, their saves overlapping in time: the lock makes each
    # read-merge-write whole, so the file ends with every note of both
    a, b = two(), two()
    a.do("open"), b.do("open")
    n = 25
    for side, name in ((a, "A"), (b, "B")):  # queue all commands at once; each child runs its own
        side.p.stdin.write(
            "".join(
                json.dumps({"op": "add", "text": f"{name}{i:02}"}) + "\n" + json.dumps({"op": "save"}) + "\n"
                for i in range(n)
            )
        )
        side.p.stdin.flush()
    for side in (a, b):
        for _ in range(2 * n):
            got = side._answer()
            assert got.get("saved", True) and not got.get("message"), got
    want = sorted([f"A{i:02}" for i in range(n)] + [f"B{i:02}" for i in range(n)])
    assert on_disk(ddp) == want
    a.close(), b.close()


def test_window_lists_the_other_sessions_notes_and_shows_a_conflict(qtbot, tmp_path, two, ddp):
    from conftest import make_window

    w = make_window(qtbot, tmp_path, block_analysis=True, size=(1200, 700))
    assert w.open_paths([ddp], block=True)
    b = two()
    b.do("open")
    w.session.add_note("from the window", w.trace.start_ns + 1000, 0)
    assert w.save_annotations()
    b.do("add", text="from the notebook")
    assert b.do("save")["texts"] == ["from the notebook", "from the window"]
    w.session.add_note("second from the window", w.trace.start_ns + 2000, 0)
    assert w.save_annotations()
    texts = ["from the notebook", "from the window", "second from the window"]
    listed = [w.annotations.tree.topLevelItem(i).text(1) for i in range(w.annotations.tree.topLevelItemCount())]
    assert sorted(listed) == texts and sorted(a.text for a in w.timeline.item.annotations) == texts
    # the same note changed in both: the status bar says so, the list shows both versions
    b.do("edit", text="from the window", new="notebook's words")
    b.do("save")
    (mine,) = [a for a in w.doc.annotations if a.text == "from the window"]
    w.session.edit_annotation(mine, text="window's words")
    assert w.save_annotations()
    assert "changed here and in another window" in w.statusBar().currentMessage()
    listed = [w.annotations.tree.topLevelItem(i).text(1) for i in range(w.annotations.tree.topLevelItemCount())]
    assert (
        sorted(listed)
        == on_disk(ddp)
        == ["from the notebook", "notebook's words", "second from the window", "window's words"]
    )
    b.close()
