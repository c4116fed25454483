"""Under the pinned rank header, the lane whose top scrolled beneath it is named again just below
the header, but never over the next lane's name: at 2560x1440 ddp's finding scrolled a CUDA API
lane to a sliver under the header and its name was drawn over the next thread's (an audit of the
window). Every scroll position of a real session is tried."""

from conftest import trace_path
from PySide6.QtGui import QFontMetrics


def test_a_name_drawn_under_the_header_never_covers_the_next_lanes_name(qtbot):
    from gpuviewer.io.session import load
    from gpuviewer.widgets.timeline_view import TimelineView

    v = TimelineView()
    qtbot.addWidget(v)
    v.resize(1400, 900)
    v.set_trace(load([trace_path("kineto", "ddp")]))
    lm = v.layout_model
    for g in list(lm.state.groups) + [f"r{r}/host" for r in (0, 1)]:
        lm.state.groups[g] = False  # every group open: many one-row lanes to scroll under the header
    lm.rebuild()
    v._relayout()
    v.show()
    qtbot.waitExposed(v)
    lab = v.labels
    half = QFontMetrics(lab.font_lane).height() / 2
    named = slivers = 0
    for value in range(0, v.scroll.maximum() + 1):
        v.scroll.setValue(value)
        hdr = lab.sticky_header()
        if hdr is None:
            continue
        sb = lab._sticky_bottom()
        got = lab.named_under_header(hdr)
        under = lm.row_at(lab.y_range[0] + hdr.h)
        if under is not None and under.kind == "lane" and lab._to_dev(under.y + under.h) - sb < 2 * half:
            slivers += 1
            assert got is None, value  # a sliver's name is not drawn over the next lane's
        if got is None:
            continue
        named += 1
        lane, _h = got
        rows = [r for r in lm.rows if r.y > lane.y and r.kind in ("lane", "group", "header")]
        if rows:
            nxt = rows[0]
            centre = (lab._to_dev(nxt.y) + lab._to_dev(nxt.y + min(nxt.h, 1.0))) / 2
            assert centre - half >= sb + 2 * half - 1, (value, lane.label, nxt.label)
    assert named and slivers  # both cases met
