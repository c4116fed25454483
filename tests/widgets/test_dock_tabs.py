"""The window's dock tab bars: one per tab group, where its docks are. Qt 6.11 handed a closed tab
group's bar (Details | Topology | Annotations, closed at start) to the bottom group tabbed next
and left it standing: a stray "Findings | Overview" bar drawn over the bottom docks' first line."""

import os

from conftest import SAMPLES, make_window
from PySide6.QtWidgets import QTabBar


def _bars_in_window(w) -> list[list[str]]:
    """The tab titles of each tab bar drawn inside the window."""
    out = []
    for tb in w.findChildren(QTabBar):
        if tb.count() and tb.isVisible() and tb.geometry().intersects(w.rect()):
            out.append([tb.tabText(i) for i in range(tb.count())])
    return out


def _check(w) -> list[list[str]]:
    bars = _bars_in_window(w)
    titles = [t for b in bars for t in b]
    assert len(titles) == len(set(titles)), bars  # a dock is a tab of one bar only
    return bars


def test_one_bar_per_tab_group_as_docks_open_and_close(qtbot, tmp_path):
    w = make_window(qtbot, tmp_path, size=(1366, 768))
    assert w.open_paths([os.path.join(SAMPLES, "ddp")], block=True)
    qtbot.waitUntil(lambda: w.session is not None and w.session.analysis is not None, timeout=60_000)
    bars = _check(w)
    assert len(bars) == 1 and bars[0][:2] == ["Findings", "Overview"], bars
    w.overview_dock.raise_()
    qtbot.wait(1)
    assert len(_check(w)) == 1
    for d in (w.details_dock, w.annotations_dock, w.topology_dock):
        d.show()
        qtbot.waitUntil(d.isVisible)
    qtbot.waitUntil(
        lambda: [sorted(b) for b in _check(w) if "Details" in b] == [["Annotations", "Details", "Topology"]]
    )
    w.details_dock.hide()  # the bar follows once the layout is redone
    qtbot.waitUntil(lambda: [b for b in _check(w) if "Annotations" in b] == [["Annotations", "Topology"]])


def test_the_overview_key_is_above_its_plot_not_over_the_bars(qtbot, tmp_path):
    """The Overview's colours are keyed in a line of their own: pyqtgraph's legend, drawn inside
    the short plot, lay over the first step's bars in grey that could not be read."""
    from gpuviewer.widgets.overview_panel import PARTS

    w = make_window(qtbot, tmp_path, size=(1366, 768))
    assert w.open_paths([os.path.join(SAMPLES, "ddp")], block=True)
    qtbot.waitUntil(lambda: w.overview.rank_box.count() > 0, timeout=60_000)
    assert w.overview.plot.plotItem.legend is None
    key = w.overview.legend
    assert all(label in key.text() for label, _ in PARTS)
    w.overview_dock.raise_()
    qtbot.waitUntil(key.isVisible)
    plot = w.overview.plot
    assert key.mapTo(w, key.rect().bottomLeft()).y() <= plot.mapTo(w, plot.rect().topLeft()).y()


def test_a_capture_without_steps_is_the_overviews_one_bar_named_so(qtbot):
    """HTA's alexnet marks no steps (no ProfilerStep range in its raw file): the Overview drew
    one bar over 'step (x0.001)' and a tick '0' (helper-116). The bar is named the capture and
    no axis carries pyqtgraph's SI prefix."""
    import gzip
    import json

    from conftest import compat_path

    import gpuviewer
    from gpuviewer.widgets.overview_panel import OverviewPanel

    folder = compat_path("facebookresearch__HolisticTraceAnalysis", "critical_path", "alexnet")
    (name,) = os.listdir(folder)
    with gzip.open(os.path.join(folder, name), "rt") as fh:
        assert not any(str(e.get("name", "")).startswith("ProfilerStep#") for e in json.load(fh)["traceEvents"])
    s = gpuviewer.open(folder)
    p = OverviewPanel()
    qtbot.addWidget(p)
    p.set_analysis(s.analysis)
    ax = p.plot.getAxis("bottom")
    assert ax.labelText.startswith("no steps") and ax._tickLevels == [[(0, "the capture")]]
    assert not ax.autoSIPrefix and not p.plot.getAxis("left").autoSIPrefix


def test_a_capture_without_steps_says_so_in_the_ranks_tab(qtbot, tmp_path):
    """alexnet: the Ranks tab read '1 ranks x 0 steps' over an empty grid (helper-116): it says
    the capture marks no steps."""
    from conftest import compat_path

    w = make_window(qtbot, tmp_path, block_analysis=True, size=(1366, 768))
    assert w.open_paths(
        [compat_path("facebookresearch__HolisticTraceAnalysis", "critical_path", "alexnet")], block=True
    )
    qtbot.waitUntil(lambda: w.ranks_view.note.text() != "", timeout=60_000)
    note = w.ranks_view.note.text()
    assert note.startswith("no steps: the capture marks none") and "0 steps" not in note, note
    assert w.ranks_view.table.columnCount() == 0
