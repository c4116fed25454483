"""Session is composed of its action parts (session/actions.py), not mixed from them: each part
is made with what it acts on, the session offers every one of their methods under the same name
and signature, and a trace swapped into the session (a summary's ranks loading) is the one its
parts act on."""

import inspect

import pytest
from conftest import SAMPLES, trace_path

from gpuviewer.session import Session
from gpuviewer.session.actions import NoteActions, TopologyActions, ViewActions

PARTS = {"view_actions": ViewActions, "note_actions": NoteActions, "topology_actions": TopologyActions}
# the parts' names that Session spells differently (NoteActions.keep_in reads badly on a session)
RENAMED = {"keep_in": "keep_annotations_in", "open_file": "open_annotation_file"}


@pytest.fixture(scope="module")
def small():
    return Session.open([trace_path("kineto", "dataloader_stall.json.gz")])


def test_a_session_is_not_a_subclass_of_its_parts():
    assert not any(issubclass(Session, part) for part in PARTS.values())


def test_every_action_is_offered_by_the_session_with_its_signature():
    for attr, part in PARTS.items():
        for name, fn in inspect.getmembers(part, inspect.isfunction):
            if name.startswith("_"):
                continue
            mine = getattr(Session, RENAMED.get(name, name), None)
            assert mine is not None, f"Session has no {name} ({part.__name__})"
            assert inspect.signature(mine) == inspect.signature(fn), (name, part.__name__)


def test_the_parts_are_the_sessions_own(small):
    s = small
    assert isinstance(s.view_actions, ViewActions) and isinstance(s.note_actions, NoteActions)
    assert s.view_actions.view is s.view and s.note_actions.notes is s.notes
    assert s.note_actions.nav is s.view_actions and s.note_actions.paths is s.paths
    assert all(getattr(s, a).trace is s.trace for a in PARTS)


def test_a_swapped_trace_is_the_one_the_actions_act_on(small):
    big = Session.open([f"{SAMPLES}/ddp"]).trace
    s = Session(small.trace)
    beyond = len(small.trace) + 10
    assert beyond < len(big)
    with pytest.raises(IndexError):
        s.select(beyond)
    s.trace = big
    assert all(getattr(s, a).trace is big for a in PARTS)
    s.select(beyond)
    assert s.view.selected == beyond
    note = s.mark("here")  # at the selected event of the swapped trace
    c = big.columns
    assert note.start_ns == int(c["start"][beyond])
    assert note.lane == big.lanes[int(c["lane"][beyond])].key


def test_help_of_the_session_says_what_each_public_name_does():
    # what a newcomer reads first: `help(gpuviewer.Session)`; a name without a docstring shows
    # only its signature there (the delegates to the parts had none)
    import pydoc

    import gpuviewer

    assert gpuviewer.Session is Session
    undocumented = [
        name
        for name, member in inspect.getmembers(Session)
        if not name.startswith("_") and not (inspect.getdoc(member) or "").strip()
    ]
    assert undocumented == []
    text = pydoc.render_doc(gpuviewer.Session, renderer=pydoc.plaintext)
    for name in ("select", "add_note", "attach_topology", "whatif", "analysis"):
        doc = inspect.getdoc(getattr(Session, name))
        assert doc is not None and doc.splitlines()[0] in text, name


def test_a_session_without_trace_events_has_no_critical_paths():
    """HTA's memory timeline alone (a memory curve, no trace events): Session.critical_paths()
    answers {} instead of failing inside the dependency model (an IndexError before)."""
    import os

    from conftest import COMPAT

    from gpuviewer import Session

    path = os.path.join(COMPAT, "facebookresearch__HolisticTraceAnalysis", "memory_analysis", "memory_timeline.raw.gz")
    s = Session.open([path])
    assert len(s.trace) == 0
    assert s.critical_paths() == {}
