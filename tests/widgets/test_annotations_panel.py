"""The annotations panel changes no annotation itself: an edit in place or a delete is asked of
the session (editRequested / removeRequested), which makes it and lists them again."""

from conftest import SAMPLES

from gpuviewer.session import Session
from gpuviewer.widgets.annotations_panel import AnnotationsPanel


def test_the_panel_asks_and_the_session_changes(qtbot):
    s = Session.open([f"{SAMPLES}/ddp"])
    a = s.add_note("first words", s.trace.start_ns + 1000)
    panel = AnnotationsPanel()
    qtbot.addWidget(panel)
    s.events.connect("annotations", lambda: panel.set_annotations(s.notes.doc.annotations, s.trace.start_ns))
    panel.set_annotations(s.notes.doc.annotations, s.trace.start_ns)
    asked = []
    panel.editRequested.connect(lambda ann, changes: asked.append((ann, changes)))
    panel.tree.topLevelItem(0).setText(1, "typed in place")  # what the in-place editor commits
    assert asked == [(a, {"text": "typed in place"})]
    assert a.text == "first words"  # the panel asked; nothing changed yet
    panel.editRequested.connect(lambda ann, changes: s.edit_annotation(ann, **changes))
    panel.tree.topLevelItem(0).setText(1, "second words")
    assert a.text == "second words" and panel.tree.topLevelItem(0).text(1) == "second words"
    panel.removeRequested.connect(s.remove_annotation)
    panel.tree.setCurrentItem(panel.tree.topLevelItem(0))
    panel._delete()
    assert s.notes.doc.annotations == [] and panel.tree.topLevelItemCount() == 0
