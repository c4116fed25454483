"""A bare timeline of a session, off screen, for images and reports (export/report.py): the
session's trace, lane layout, time range, annotations, area selection and communication waits,
in a view of its own, so that panning it for a report's pictures never moves the window's view."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QApplication

from ..model.layout import ViewState
from .timeline_view import TimelineView

# The timeline's size in a 1500x900 window, where reports used to be drawn: images keep it
# whatever the window's size.
REPORT_VIEW_SIZE = (1152, 433)


def bare_view(session, size: tuple[int, int] = REPORT_VIEW_SIZE) -> TimelineView:
    """A picture's timeline: lane labels and lanes only, the whole size theirs (no search bar,
    no scroll bar: nothing to type into or drag on paper)."""
    v = TimelineView()
    v.setAttribute(Qt.WA_DontShowOnScreen)  # laid out and painted, never on a screen
    show_chrome(v, False)
    v.svg_on_top = (v.labels, v.split.handle(1))  # over what the plot draws past its left edge in an SVG
    v.resize(*size)
    v.show()
    lanes = session.view.lanes  # copied: folding for a picture must not fold the window's lanes
    v.set_trace(session.trace, ViewState.from_json(lanes.to_json()) if lanes is not None else None)
    a = session.analysis_ready
    if a is not None and v.item is not None:
        v.item.set_comm_waits(a.kernel_collectives)
        v.item.steps.set_gpu_windows(a.ranks or [])  # as the window's timeline draws its GPU rows
    if v.item is not None:
        v.item.annotations = session.notes.doc.annotations
        v.item.area = session.view.area  # the area selection, where the window shows it
    for _ in range(3):
        QApplication.processEvents()
    if session.view.range is not None:
        v.set_range(*session.view.range)
    QApplication.processEvents()
    return v


def show_chrome(v: TimelineView, shown: bool) -> None:
    """Show or hide what a picture leaves out: the search bar's row and the scroll bar (whose
    value still scrolls the lanes when hidden: reports scroll to a rank)."""
    for w in (v.search, v.regex, v.match_label, v.scroll):
        w.setVisible(shown)
    bar = v.layout().itemAt(0).layout()  # the search row: hidden widgets leave its 4 px margins
    if bar is not None:
        bar.setContentsMargins(*((4, 2, 4, 2) if shown else (0, 0, 0, 0)))


def dispose(v: TimelineView) -> None:
    """The end of a bare view: detached from its session and deleted by Qt, not by Python's
    cycle collector at some later moment (see TimelineView.detach)."""
    v.detach()
    v.close()
    v.deleteLater()
