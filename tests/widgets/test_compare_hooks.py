"""The main window's ways into the Compare window: File > Compare with… (the other run read off
the UI thread) and a late-rank finding's "compare this rank with the others" link."""

from conftest import make_window, trace_path
from PySide6.QtCore import QUrl


def test_compare_with_another_run_from_the_main_window(qtbot, tmp_path):
    from gpuviewer.widgets.compare_actions import compare_with

    w = make_window(qtbot, tmp_path, block_analysis=True, size=(1400, 900))
    assert w.open_paths([trace_path("kineto", "ddp_clean")], block=True)
    compare_with(w, [trace_path("kineto", "ddp_nop2p")])
    qtbot.waitUntil(lambda: getattr(w, "_compare_window", None) is not None, timeout=120_000)
    cw = w._compare_window
    qtbot.waitUntil(lambda: cw.comparison is not None or cw.error is not None, timeout=120_000)
    assert cw.error is None
    assert cw.sessions[0] is w.queries.session
    cw.close()


def test_late_rank_finding_links_to_a_comparison_with_the_others(qtbot, tmp_path):
    w = make_window(qtbot, tmp_path, block_analysis=True, size=(1400, 900))
    assert w.open_paths([trace_path("kineto", "gpu_straggler")], block=True)
    late = [f for f in w.analysis.findings if f.metrics.get("late_rank") is not None]
    assert late
    assert w.findings.choose_finding(late[0])
    html = w.findings.detail.toHtml()
    r = late[0].metrics["late_rank"]
    assert f"gpuviewer:compare-rank/{r}" in html
    w.findings._link(QUrl(f"gpuviewer:compare-rank/{r}"))
    cw = w._compare_window
    qtbot.waitUntil(lambda: cw.comparison is not None or cw.error is not None, timeout=120_000)
    assert cw.error is None
    cw.close()
