"""The window over a Session: the controller turns the session's events into signals that the
timeline and panels follow, its timer autosaves what the session marks dirty, and the bare
view that reports are drawn from paints what the window's timeline paints."""

import os
import shutil

import numpy as np
from conftest import SAMPLES, make_window


def _ddp(tmp_path):
    d = tmp_path / "ddp"
    shutil.copytree(SAMPLES + "/ddp", d)
    return str(d)


def test_session_actions_move_the_window_and_the_timer_saves_them(qtbot, tmp_path):
    from gpuviewer.io.sidecar import sidecar_path

    path = _ddp(tmp_path)
    w = make_window(qtbot, tmp_path, block_analysis=True, size=(1400, 850))
    assert w.open_paths([path], block=True)
    s = w.session
    assert w.trace is s.trace and w.analysis is s.analysis_ready is not None
    # the session moves the view
    t0 = s.trace.start_ns + 3_000_000
    with qtbot.waitSignal(w.controller.rangeChanged):
        s.set_range(t0, t0 + 4_000_000)
    assert w.timeline.visible_range() == (t0, t0 + 4_000_000)
    # and the view moves the session
    w.timeline.pan(0.1)
    assert s.view.range == w.timeline.visible_range() != (t0, t0 + 4_000_000)
    # a selection made on the session reaches the timeline and the details panel
    i = int(np.argmax(np.asarray(s.trace.columns["dur"])))
    with qtbot.waitSignal(w.controller.selectionChanged):
        s.select(i)
    assert w.timeline.item.selected == i and w.timeline.selected == i
    assert w.details.topLevelItem(0).text(1) == s.trace.names[int(s.trace.columns["name"][i])]
    # an annotation added on the session is listed, drawn, and saved by the timer
    side = sidecar_path(s.paths)
    assert not os.path.exists(side)
    with qtbot.waitSignal(w.controller.annotationsChanged):
        a = s.add_note("from the session")
    assert a in w.timeline.item.annotations
    assert w.annotations.tree.topLevelItemCount() == 1
    qtbot.waitUntil(lambda: os.path.exists(side), timeout=10_000)
    # a search typed in the view is the session's search
    n = w.timeline.run_search("ProfilerStep")
    assert n == len(s.view.matches) > 0 and w.timeline.item.match_mask is s.view.mask


def test_the_report_view_paints_what_the_window_timeline_paints(qtbot, tmp_path):
    from gpuviewer.export.image import png_data_uri
    from gpuviewer.widgets.offscreen import bare_view, dispose, show_chrome

    w = make_window(qtbot, tmp_path, block_analysis=True, size=(1500, 900))
    assert w.open_paths([SAMPLES + "/ddp"], block=True)
    w.sidecar = None
    s = w.session
    s.add_note("a note in both pictures")
    for _ in range(3):
        qtbot.wait(10)
    tv = w.timeline
    view = bare_view(s, (tv.width(), tv.height()))
    # a picture has no search or scroll bar: the window's timeline without them paints the same
    show_chrome(tv, False)
    for _ in range(3):
        qtbot.wait(10)
    try:
        assert not view.scroll.isVisible() and view.split.geometry() == view.rect()
        assert view.visible_range() == tv.visible_range()
        assert png_data_uri(view) == png_data_uri(tv)
        show_chrome(tv, True)
        # panning the report's view leaves the window's view and the session alone
        before = s.view.range
        view.pan(0.3)
        assert s.view.range == before == tv.visible_range()
    finally:
        dispose(view)


def test_the_search_box_and_a_folded_rank_follow_the_session(qtbot, tmp_path):
    """Enter in the search box searches the session it shows (also after another session was
    opened with the same text typed), and stepping to a match unfolds the rank that hides it."""
    from conftest import trace_path

    w = make_window(qtbot, tmp_path, block_analysis=True, size=(1400, 850))
    assert w.open_paths([SAMPLES + "/ddp"], block=True)
    tv = w.timeline
    tv.search.setText("ProfilerStep#3")
    tv._search_enter()
    first = len(w.session.view.matches)
    assert first > 0 and w.session.view.selected is not None
    assert w.open_paths([trace_path("kineto", "gpu_straggler")], block=True)
    tv._search_enter()  # the same text, a new session: a new search, not a step through nothing
    assert w.session.view.search == "ProfilerStep#3" and len(w.session.view.matches) > 0
    # fold the rank of the selected match, then step: the rank unfolds
    i = w.session.view.selected
    rank = w.trace.lanes[int(w.trace.columns["lane"][i])].rank
    tv.layout_model.toggle_rank(rank)
    tv._relayout()
    assert rank in tv.layout_model.state.collapsed_ranks
    w.session.select(i)  # the same event again
    assert rank not in tv.layout_model.state.collapsed_ranks
    assert tv.layout_model.lane_y(int(w.trace.columns["lane"][i])) is not None
