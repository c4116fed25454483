"""How the window draws nsys_ddp's steps, where its GPU runs behind its host and its warm-up step
is ten times the others (audits of the window). A real window offscreen, opened once; the steps'
figures from a separate `analyze --json`.

- Step lines on the GPU rows are the steps' GPU windows (the analysis'), not the host's step
  ranges: rank 0's 62.6 ms all-reduce wait of step 6 lay after the host's 'step 7' line on its GPU
  rows while the top finding said step 6. The host steps are the window's (the export's NVTX
  'step N' ranges); the picture is read at the two lines' x.
- The Overview's step chart is scaled to the profiled steps: the warm-up step 0 (about 500 ms of
  GPU window against 15-70 ms) set the axis and left steps 1-9 slivers, unmarked. Its bar is
  faint, its tick says warm-up, and its time is written where it leaves the chart; the Ranks
  heatmap names its warm-up column."""

import json

import numpy as np
import pyqtgraph as pg
import pytest
from conftest import opened_window, raw_sql, run_cli_once, trace_path
from PySide6.QtCore import QPoint, QPointF

NSYS = trace_path("nsys", "nsys_ddp.sqlite")


@pytest.fixture(scope="module")
def opened(qapp, tmp_path_factory):
    """(the window, analyze --json's ranks by rank)."""
    w = opened_window(qapp, tmp_path_factory.mktemp("steps"), [NSYS])
    p = run_cli_once("analyze", NSYS, "--json")
    assert p.returncode == 0, p.stderr[-2000:]
    yield w, {r["rank"]: r for r in json.loads(p.stdout)["ranks"]}
    w.close()


def test_gpu_rows_draw_the_steps_gpu_windows(opened, qapp):
    w, ranks = opened
    r0 = ranks[0]
    # the step's GPU time begins with the idle before its window that is the step's
    gpu = {s["step"]: s["start_ns"] - s["idle_before_ns"] for s in r0["steps"] if s["step"] is not None}
    layer = w.timeline.item.steps
    assert [a for a, _b, _s in layer.gpu_windows[0]] == sorted(gpu.values())
    # rank 0's host steps as the window has them (the export's NVTX 'step N' ranges)
    host = {st.step: st.start for st in w.trace.steps if st.rank == 0}
    g7, h7 = gpu[7], host[7]
    assert g7 - h7 > 20_000_000  # the GPU begins step 7 tens of ms after the host
    w.session.set_range(gpu[6] - 5_000_000, g7 + 20_000_000)
    qapp.processEvents()
    tv = w.timeline
    img = tv.grab().toImage().convertToFormat(tv.grab().toImage().Format.Format_RGB32)
    lanes = w.trace.lanes
    c = w.trace.columns

    def idle_near(lane: int) -> bool:  # no op of the lane within 2 ms of either time
        sl = w.trace.lane_slice(lane)
        st = np.asarray(c["start"][sl]).astype(np.int64)
        en = st + np.asarray(c["dur"][sl]).astype(np.int64)
        return not any(((st < t + 2_000_000) & (en > t - 2_000_000)).any() for t in (g7, h7))

    from gpuviewer.model.categories import GPU_LANE_KINDS

    row = next(
        r
        for r in tv.layout_model.rows
        if r.kind == "lane" and lanes[r.lane].rank == 0 and lanes[r.lane].kind in GPU_LANE_KINDS and idle_near(r.lane)
    )
    port = tv.vb.scene().views()[0].viewport()  # the view box's device coordinates, in the grab's

    def at(t: float, y: float) -> tuple[int, int]:
        d = tv.vb.mapViewToDevice(QPointF(t, y))
        q = port.mapTo(tv, QPoint(int(round(d.x())), int(round(d.y()))))
        return q.x(), q.y()

    y0, y1 = at(0.0, row.y)[1] + 1, at(0.0, row.y + row.h)[1] - 1
    a = np.frombuffer(img.constBits(), np.uint32).reshape(img.height(), img.bytesPerLine() // 4)

    def marked(t: int) -> int:
        """Pixels of the row at t's column (and either side) unlike the row 6 px to the right:
        a line drawn there (the lane idles around both times)."""
        x = at(float(t - tv.origin), 0.0)[0]
        col = a[y0:y1, x - 1 : x + 2] & 0xFFFFFF
        ref = (a[y0:y1, x + 6] & 0xFFFFFF)[:, None]
        return int((col != ref).sum())

    assert marked(g7) > 0  # the GPU's step 7 begins here on its GPU rows
    assert marked(h7) == 0  # the host's does not mark the GPU rows (its stream idles there)


def test_the_step_chart_is_scaled_to_the_profiled_steps(opened):
    w, ranks = opened
    r0 = ranks[0]
    # each step's GPU time: its window and the idle around it that is its (the chart's bars)
    window = {
        s["step"]: (s["end_ns"] - s["start_ns"] + s["idle_before_ns"] + s["idle_after_ns"]) / 1e6 for s in r0["steps"]
    }
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


def test_the_ranks_heatmap_names_its_warm_up_column(opened):
    w, ranks = opened
    warm = {s["step"] for r in ranks.values() for s in r["steps"] if s["warmup"]}
    t = w.ranks_view.table
    # said in full in each column's tooltip; its header says it where the column has room, else
    # its number with a star (30 steps at 1366 px cut 'step 12' to 'tep 1('; a review)
    names = [t.horizontalHeaderItem(j).toolTip() for j in range(t.columnCount())]
    assert [n for n in names if n.endswith("(warm-up)")] == [f"step {s} (warm-up)" for s in sorted(warm)], names
    shown = [t.horizontalHeaderItem(j).text() for j in range(t.columnCount())]
    assert all(a in (b, b.split()[1] + ("*" if b.endswith("(warm-up)") else "")) for a, b in zip(shown, names)), shown
    # its cells grey, not coloured as the lateness of a step to compare (87.7 ms read deeper than the stall's 62.6)
    from gpuviewer.widgets.rank_overview import WARM_CELL

    cols = [j for j, n in enumerate(names) if n.endswith("(warm-up)")]
    for j in range(t.columnCount()):
        for i in range(t.rowCount()):
            item = t.item(i, j)
            if item is not None and item.text():
                assert (item.background().color() == WARM_CELL) == (j in cols), (i, j)


def test_a_critical_path_segment_click_selects_the_op_it_names(opened, qapp):
    """Step 6's host segment says 'host work (clock_nanosleep 49.3 ms of it) ...': the click
    selects that sleep (the raw OSRT_API row's duration), on its OS runtime lane, unfolded and in
    view, and the outline sits on that lane. It was drawn on an empty autograd thread's CUDA API
    lane while the sleep stayed in the folded 'OS runtime' group (an audit of the window)."""
    w, _ = opened
    w.critical.action.setChecked(True)
    w.goto_step(6)
    qapp.processEvents()
    w.critical.wait()
    v = w.critical.view
    row = max((r for r in v.rows(6) if r["resource"] == "host"), key=lambda r: r["duration_ms"])
    assert "clock_nanosleep" in row["what"], row["what"]
    raw = raw_sql(
        NSYS,
        "SELECT o.start, o.end, (o.globalTid >> 24) & 16777215 FROM OSRT_API o JOIN StringIds s ON s.id = o.nameId "
        "WHERE s.value = 'clock_nanosleep'",
    )
    w.critical.goto_segment(row["index"])
    qapp.processEvents()
    i = w.session.view.selected
    assert i is not None and w.trace.name_of(i) == "clock_nanosleep"
    t, d = int(w.trace.columns["start"][i]), int(w.trace.columns["dur"][i])
    # the raw row it is (the session's clock shifted by an offset), and the longest raw sleep of
    # its process inside the segment on that clock (the launcher's 100 ms sleeps are not the rank's)
    pid = w.trace.lanes[int(w.trace.columns["lane"][i])].pid
    raw = [(a, b) for a, b, p in raw if p == pid]
    off = next(t - a for a, b in raw if b - a == d)
    lo, hi = row["start_ns"] - off, row["end_ns"] - off
    inside = min(t + d, row["end_ns"]) - max(t, row["start_ns"])
    assert inside == max(min(b, hi) - max(a, lo) for a, b in raw if a < hi and b > lo) > 40_000_000
    lane = int(w.trace.columns["lane"][i])
    assert w.trace.lanes[lane].kind == "osrt" and int(v.lane[row["index"]]) == lane
    tl = w.timeline
    rows = tl.event_rows(i)
    assert rows is not None  # its group unfolded
    y0 = tl.scroll.value() / 10.0
    assert y0 <= rows[0] and rows[1] <= y0 + tl._rows_visible(), (rows, y0)
    # the sleep whole in view (it begins before the segment: the view cut it on the left; helper-116),
    # the segment still the highlight
    z0, z1 = w.session.view.range
    assert z0 <= t and t + d <= z1 and t < row["start_ns"]
    assert w.session.view.highlight[:2] == (row["start_ns"], row["end_ns"])


def test_the_opening_views_message_goes_once_the_view_moves(qapp, tmp_path):
    """'Shift+Home shows ... left of the view (opened on the steady steps)' speaks of the opening view: it stayed in
    the status bar beside a finding chosen after (an audit of the window)."""
    w = opened_window(qapp, tmp_path, [NSYS])
    try:
        for _ in range(3):
            qapp.processEvents()
        said = w.statusBar().currentMessage()
        assert said.startswith("Shift+Home shows the first") and "(opened on the steady steps)" in said, said
        # the Critical path tab lists the longest profiled step in view: the stalled step 6 (by
        # analyze's step durations), not step 7 whose ranks' span a stall stretched (an audit)
        p = run_cli_once("analyze", NSYS, "--json")
        steps = [st for st in json.loads(p.stdout)["steps"] if not st.get("warmup")]
        w.critical.wait()
        assert w.critical.panel.step == max(steps, key=lambda st: st["duration_ms"])["step"] == 6
        w.show_finding(w.findings.findings[0])
        qapp.processEvents()
        assert w.statusBar().currentMessage() != said
    finally:
        w.close()


def test_a_collapsed_ranks_row_draws_no_synchronization_as_compute(opened, qapp):
    """nsys records a host's CUDA synchronizations on GPU lanes ('GPU 0 · context sync': rank
    0's 52 ms Event Sync of step 6): a collapsed rank's summary row drew them as compute while its
    GPU idled (an audit of the window). Its compute is the rank's kernels, copies and memsets."""
    from gpuviewer.model import intervals as iv
    from gpuviewer.model.categories import Cat, LaneKind

    w, _ = opened
    tr, c = w.trace, w.trace.columns
    sync = [
        k
        for i, ln in enumerate(tr.lanes)
        if ln.rank == 0 and ln.kind == LaneKind.GPU
        for k in range(tr.lane_slice(i).start, tr.lane_slice(i).stop)
        if int(c["cat"][k]) == Cat.SYNC
    ]
    longest = max(sync, key=lambda k: int(c["dur"][k]))
    a, b = int(c["start"][longest]), int(c["start"][longest]) + int(c["dur"][longest])
    # the raw file's longest synchronization of the export is as long
    assert b - a == raw_sql(NSYS, "SELECT max(end - start) FROM CUPTI_ACTIVITY_KIND_SYNCHRONIZATION")[0][0]
    assert b - a > 40_000_000
    busy = w.timeline.item.slices._busy_of(0)[False]
    work = [
        k
        for i, ln in enumerate(tr.lanes)
        if ln.rank == 0 and ln.kind == LaneKind.GPU
        for k in range(tr.lane_slice(i).start, tr.lane_slice(i).stop)
        if int(c["cat"][k]) in (Cat.KERNEL, Cat.MEMCPY, Cat.MEMSET)
    ]
    st = np.array([int(c["start"][k]) for k in work])
    ops = iv.union(st, st + np.array([int(c["dur"][k]) for k in work]))

    def inside(u):
        s, e = u
        return int((np.minimum(e, b) - np.maximum(s, a)).clip(0).sum())

    assert inside(busy) == inside(ops) < 0.5 * (b - a)


def test_both_kinds_of_step_are_named_where_a_rank_has_no_gpu_group_row(qapp, tmp_path):
    """kineto ddp's ranks have one stream and one NCCL lane, no GPU group row: the dotted lines of
    their GPU steps went unnamed beside the header's 'step 4' (an audit of the window). The header
    names the host's steps, the first stream the GPU's, each at its own line (the trace's
    ProfilerStep ranges; analyze --json's GPU windows)."""
    path = trace_path("kineto", "ddp")
    p = run_cli_once("analyze", path, "--json")
    assert p.returncode == 0, p.stderr[-2000:]
    r0 = next(r for r in json.loads(p.stdout)["ranks"] if r["rank"] == 0)
    gpu3 = next(s["start_ns"] - s["idle_before_ns"] for s in r0["steps"] if s["step"] == 3)
    w = opened_window(qapp, tmp_path, [path])
    try:
        assert not any(r.kind == "group" and r.rank == 0 and "gpu" in r.group for r in w.timeline.layout_model.rows)
        w.goto_step(3)
        qapp.processEvents()
        w.timeline.grab()  # paints every layer now
        layer = w.timeline.item.steps
        drawn = {(rank, kind, text): x for rank, kind, text, x in layer.drawn}
        host3 = next(st.start for st in w.trace.steps if st.rank == 0 and st.step == 3)
        vb = w.timeline.vb
        o = w.timeline.origin

        def px(t):
            return vb.mapViewToDevice(pg.Point(float(t - o), 0.0)).x()

        assert abs(drawn[(0, "header", "host step 3")] - px(host3)) < 1.5
        assert abs(drawn[(0, "lane", "GPU step 3")] - px(gpu3)) < 1.5
    finally:
        w.close()


def test_a_pinned_header_hides_the_lane_under_it_on_both_sides(opened, qapp):
    """Scrolled so a rank's header is above the view, the label column pins it at the top; the plot
    now draws the header's band there too: rank 0's NCCL bars showed beside 'Rank 0 · GPU 0 ...
    host', that lane's name hidden (an audit of the window)."""
    from gpuviewer.model.categories import LaneKind
    from gpuviewer.render import theme

    w, _ = opened
    tl, lm = w.timeline, w.timeline.layout_model
    w.goto_step(6)
    qapp.processEvents()
    # rank 0's busiest stream in view as the top lane, its header above the view
    t0, t1 = w.session.view.range
    c = w.trace.columns

    def events_in_view(lane: int) -> int:
        sl = w.trace.lane_slice(lane)
        s = np.asarray(c["start"][sl]).astype(np.int64)
        return int(((s < t1) & (s + np.asarray(c["dur"][sl]).astype(np.int64) > t0)).sum())

    row = max(
        (r for r in lm.rows if r.kind == "lane" and r.rank == 0 and w.trace.lanes[r.lane].kind == LaneKind.GPU),
        key=lambda r: events_in_view(r.lane),
    )
    assert events_in_view(row.lane) > 10
    tl.scroll.setValue(int((row.y - 0.2) * 10))
    qapp.processEvents()
    y0 = tl.scroll.value() / 10.0
    assert y0 == pytest.approx(row.y - 0.2, abs=0.1), (y0, row.y, tl.scroll.maximum(), lm.height)
    hdr = lm.sticky_header(y0, y0 + tl._rows_visible())
    assert hdr is not None and hdr.rank == 0 and tl.labels.sticky_header() == hdr
    img = tl.plot.viewport().grab().toImage().convertToFormat(tl.grab().toImage().Format.Format_RGB32)
    vb = tl.vb.mapRectToDevice(tl.vb.rect())
    y = int(vb.top() + 0.4 * hdr.h * vb.height() / tl._rows_visible())
    band = theme.current().row_header.rgb() & 0xFFFFFF
    xs = range(int(vb.left()) + 2, int(vb.right()) - 2)
    same = sum(1 for x in xs if img.pixel(x, y) & 0xFFFFFF == band)
    assert same > 0.8 * len(xs), (same, len(xs))


def test_a_tall_screen_opens_the_host_lanes_that_fit(qapp, tmp_path):
    """At 2560x1440 nsys_ddp's first screen left a third of the timeline empty, the host lanes
    folded (the top finding's cause among them; an audit). Where there is room the hosts' lanes
    open while every row fits; on a laptop screen they stay folded."""
    w_small = opened_window(qapp, tmp_path / "small", [NSYS])
    try:
        lm = w_small.timeline.layout_model
        assert all(lm.group_collapsed(f"r{r.rank}/host") for r in w_small.trace.ranks)
    finally:
        w_small.close()
    w = opened_window(qapp, tmp_path, [NSYS], size=(2560, 1440))
    try:
        for _ in range(3):
            qapp.processEvents()
        lm, tl = w.timeline.layout_model, w.timeline
        opened_hosts = [r.rank for r in w.trace.ranks if not lm.group_collapsed(f"r{r.rank}/host")]
        assert opened_hosts == sorted(r.rank for r in w.trace.ranks)
        assert lm.height <= tl._rows_visible()  # every row on the screen
        # and no more room: the next folded group would not fit
        nxt = next(r for r in lm.rows if r.kind == "group" and lm.group_collapsed(r.group))
        lm.state.groups[nxt.group] = False
        lm.rebuild()
        assert lm.height > tl._rows_visible(), nxt.group
    finally:
        w.close()


def test_a_shortened_gpu_step_name_never_reads_as_a_device(qapp, tmp_path):
    """JAX's 8 short steps over the whole capture: the GPU step names shortened to 'GPU 1', 'GPU 2'
    beside GPU 0's lanes, read as other devices (helper-116). Shortened, a GPU row says 'step N' or
    'N'; only a host row says 'host N'. The steps are the trace's own (its `train` ranges)."""
    import re

    path = trace_path("jax", "jax_train_stall.trace.json.gz")
    w = opened_window(qapp, tmp_path, [path])
    try:
        w.timeline.fit_all()
        qapp.processEvents()
        w.timeline.grab()
        drawn = [(kind, text) for _rank, kind, text, _x in w.timeline.item.steps.drawn]
        assert drawn
        gpu = [t for k, t in drawn if k != "header"]
        assert gpu and not any(re.fullmatch(r"GPU \d+", t) for t in gpu), gpu
        assert all(re.fullmatch(r"(GPU step |step )?\d+", t) for t in gpu), gpu
        assert any(re.fullmatch(r"step \d+|\d+", t) for t in gpu), gpu  # the capture's steps are narrow
    finally:
        w.close()


def test_a_host_paced_findings_selected_op_is_in_view(qapp, tmp_path):
    """fsdp at 1366x768: the top finding selects the host op its waits ran through (_unshard, on
    the autograd thread, 30 rows under the GPU lanes) and the view stayed on the rank's GPU lanes,
    the op below the viewport (helper-116). The view now scrolls down as far as brings the op in:
    its row lies inside the viewport, under the pinned header."""
    w = opened_window(qapp, tmp_path, [trace_path("kineto", "fsdp")])
    try:
        f = w.findings.findings[0]
        assert f.metrics.get("host_paced")
        w.show_finding(f)
        qapp.processEvents()
        tl = w.timeline
        i = tl.selected
        assert i is not None and w.trace.name_of(i).endswith("_unshard")
        a, b = tl.event_rows(i)
        y0 = tl.scroll.value() / 10.0
        assert y0 < a and b <= y0 + tl._rows_visible() + 1e-6, (a, b, y0, tl._rows_visible())
    finally:
        w.close()


def test_a_host_threads_deeper_rows_open_where_they_fit(qapp, tmp_path):
    """JAX's one host thread kept its deeper rows folded ('+7 deeper rows') under an empty two
    thirds of a 1366x768 screen (helper-116): they open where every row still fits (the lane is the
    raw trace's thread)."""
    import gzip

    path = trace_path("jax", "jax_train_stall.trace.json.gz")
    with gzip.open(path, "rt") as fh:
        doc = json.load(fh)
    ev = doc["traceEvents"] if isinstance(doc, dict) else doc
    w = opened_window(qapp, tmp_path, [path])
    try:
        for _ in range(3):
            qapp.processEvents()
        lm, tl = w.timeline.layout_model, w.timeline
        lanes = [r for r in lm.rows if r.kind == "lane" and w.trace.lanes[r.lane].kind == "cpu"]
        deep = max(lanes, key=lambda r: r.depths)
        assert deep.hidden_rows == 0 and deep.depths > 6  # (COLLAPSED_ROWS shown before)
        tid = w.trace.lanes[deep.lane].stream
        mine = [e for e in ev if e.get("ph") == "X" and e.get("tid") == tid]
        assert mine  # the lane is the raw thread's
        assert lm.height <= tl._rows_visible()
    finally:
        w.close()


@pytest.fixture(scope="module")
def big(qapp, tmp_path_factory):
    """nsys_ddp_big (30 steps) in a 1366x768 window, opened once for the tests below."""
    w = opened_window(qapp, tmp_path_factory.mktemp("big"), [trace_path("nsys", "nsys_ddp_big.sqlite")])
    yield w
    w.close()


def test_every_host_step_wide_enough_for_its_number_is_named(qapp, big):
    """nsys_ddp_big at 1366 px: the host row named steps 0 and 7 of the 30 in view ('host step 7'
    where it fitted, nothing where it did not), while the GPU row named each by its number (a
    review). A host step falls back to its bare number: every one in view with room for it is named,
    at its own start, from the export's NVTX 'step N' ranges as the window holds them."""
    w = big
    qapp.processEvents()  # the opening view: the steady steps
    w.timeline.grab()
    layer = w.timeline.item.steps
    named = {text.rsplit(" ", 1)[-1] for rank, kind, text, _x in layer.drawn if rank == 0 and kind == "header"}
    vb, o = w.timeline.vb, w.timeline.origin
    fm = w.timeline.item.fm

    def px(t):
        return vb.mapViewToDevice(pg.Point(float(t - o), 0.0)).x()

    t0, t1 = w.timeline.visible_range()
    roomy = [
        st.step
        for st in w.trace.steps
        if st.rank == 0
        and t0 <= st.start
        and st.end <= t1
        and px(st.end) - px(st.start) > fm.horizontalAdvance(str(st.step)) + 8
    ]
    assert len(roomy) >= 20, roomy
    assert {str(s) for s in roomy} <= named, sorted(set(map(str, roomy)) - named)


def test_the_ranks_heatmap_names_thirty_steps_whole(qapp, qtbot, big):
    """nsys_ddp_big's 30 steps at 1366 px: the stretched columns cut their names to 'tep 1(',
    'tep 1!' and the rows spent 195 px on the one file both ranks share (a review). The columns
    say their numbers whole (a warm-up's with a star, in full in the tooltip) and the shared file
    is left to the rows' tooltips."""
    w = big
    w.ranks_dock.show()
    w.ranks_dock.raise_()
    t = w.ranks_view.table
    qtbot.waitUntil(lambda: t.viewport().width() > 1000, timeout=10_000)  # laid out at the window's width
    qapp.processEvents()
    hdr = t.horizontalHeader()
    fm = hdr.fontMetrics()
    assert t.columnCount() == 30
    for j in range(t.columnCount()):
        text = t.horizontalHeaderItem(j).text()
        assert fm.horizontalAdvance(text) + 6 <= hdr.sectionSize(j), (j, text, hdr.sectionSize(j))
        tip = t.horizontalHeaderItem(j).toolTip()
        assert tip.startswith("step ") and text.rstrip("*") in tip.split()
    rows = [t.verticalHeaderItem(i).text() for i in range(t.rowCount())]
    assert rows == ["rank 0", "rank 1"], rows
    assert all("nsys_ddp_big.sqlite" in t.verticalHeaderItem(i).toolTip() for i in range(t.rowCount()))


def test_a_kernels_name_gives_way_to_the_gpu_steps_names_over_it(qapp, tmp_path):
    """tp's rank 1: one NCCL kernel waits across GPU steps 2 and 3, and its name ran through the
    step names drawn over it ('ncclDevKernel GPU step 2 Sum_bf16_RING_LL(...Stor GPU step 3 >)';
    a review). The slices' names on that row end before a step's name and resume after it: no
    name drawn overlaps one (the step names as the steps layer drew them)."""
    w = opened_window(qapp, tmp_path, [trace_path("kineto", "tp")])
    try:
        qapp.processEvents()
        w.timeline.grab()  # paints every layer now
        item = w.timeline.item
        fm = item.fm
        steps = [(x, text) for _r, kind, text, x in item.steps.drawn if kind == "lane" and text.startswith("GPU step")]
        assert len(steps) >= 4, item.steps.drawn  # both ranks' GPU steps named over their streams
        boxes = [(x + 1, x + fm.horizontalAdvance(text) + 5) for x, text in steps]
        chips = item.slices.chips
        assert sorted(b for spans in chips.values() for b in spans) == sorted(boxes)
        sy = w.timeline.vb.mapViewToDevice(pg.Point(0, 1)).y() - w.timeline.vb.mapViewToDevice(pg.Point(0, 0)).y()
        on_rows = [(lx, lw, top) for lx, ly, lw, _lh in item.slices.labelled if (top := round(ly - 0.08 * sy)) in chips]
        assert on_rows  # names on those rows (tp's NCCL kernel's among them)
        for lx, lw, top in on_rows:
            for c0, c1 in chips[top]:
                assert lx + lw <= c0 or c1 <= lx, (lx, lw, c0, c1)
    finally:
        w.close()
