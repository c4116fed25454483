"""The Overview's step chart is scaled to the profiled steps: nsys_ddp's warm-up step 0 (about
500 ms of GPU window against 15-70 ms) set the axis and left steps 1-9 slivers, unmarked (an audit
of the window). Its bar is faint, its tick says warm-up, and its time is written where it leaves
the chart. The steps' figures from a separate `analyze --json`."""

import json

import pyqtgraph as pg
from conftest import make_window, run_cli_once, trace_path

NSYS = trace_path("nsys", "nsys_ddp.sqlite")


def test_the_step_chart_is_scaled_to_the_profiled_steps(qtbot, tmp_path, qapp):
    w = make_window(qtbot, tmp_path, block_analysis=True, size=(1366, 768))
    assert w.open_paths([NSYS], block=True)
    qapp.processEvents()
    p = run_cli_once("analyze", NSYS, "--json")
    assert p.returncode == 0, p.stderr[-2000:]
    r0 = next(r for r in json.loads(p.stdout)["ranks"] if r["rank"] == 0)
    window = {s["step"]: (s["end_ns"] - s["start_ns"]) / 1e6 for s in r0["steps"]}
    warm = [s["step"] for s in r0["steps"] if s["warmup"]]
    assert warm and max(window[s] for s in warm) > 3 * max(v for s, v in window.items() if s not in warm)
    ov = w.overview
    i = ov.rank_box.findData(0)
    ov.rank_box.setCurrentIndex(i)
    ov._show()
    top = ov.plot.getViewBox().viewRange()[1][1]
    profiled = max(v for s, v in window.items() if s not in warm)
    assert profiled <= top <= 1.2 * profiled, (top, profiled)
    ticks = dict(ov.plot.getAxis("bottom")._tickLevels[0]) if ov.plot.getAxis("bottom")._tickLevels else {}
    assert any(t == f"{warm[0]} (warm-up)" for t in ticks.values()), ticks
    texts = [it.textItem.toPlainText() for it in ov.plot.getPlotItem().items if isinstance(it, pg.TextItem)]
    assert f"{window[warm[0]]:,.0f} ms" in texts, texts


def test_the_ranks_heatmap_names_its_warm_up_column(qtbot, tmp_path, qapp):
    w = make_window(qtbot, tmp_path, block_analysis=True, size=(1366, 768))
    assert w.open_paths([NSYS], block=True)
    qapp.processEvents()
    p = run_cli_once("analyze", NSYS, "--json")
    warm = {s["step"] for r in json.loads(p.stdout)["ranks"] for s in r["steps"] if s["warmup"]}
    t = w.ranks_view.table
    names = [t.horizontalHeaderItem(j).text() for j in range(t.columnCount())]
    assert [n for n in names if n.endswith("(warm-up)")] == [f"step {s} (warm-up)" for s in sorted(warm)], names
