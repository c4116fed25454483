"""The Details pane wraps what its columns cannot hold. At 1366x768 the dock is ~270 px wide and
eliding cut most values ("ncclDevK...4096ul>)", "none (this...ived last)", "30.384 m...9393 ns)"):
each row now takes the lines its text needs, checked against the font's own advance (a value
W px wide in a column C px wide needs at least W / C lines), and the pixels of a wrapped row's
second line are drawn."""

from __future__ import annotations

import math
import os

import numpy as np
from conftest import SAMPLES

import gpuviewer


def _pane(qtbot):
    """samples/ddp's session and a Details pane 270 px wide showing it (the 1366 px dock's width)."""
    from gpuviewer.widgets.details import DetailsPanel

    s = gpuviewer.open(os.path.join(SAMPLES, "ddp"))
    d = DetailsPanel()
    qtbot.addWidget(d)
    d.resize(270, 900)
    d.show()
    d.set_trace(s.trace)
    return s, d


def test_long_values_wrap_onto_the_lines_they_need(qtbot):
    from PySide6.QtWidgets import QApplication, QTreeWidgetItemIterator

    from gpuviewer.model.categories import Cat

    s, d = _pane(qtbot)
    c = s.trace.columns
    i = int(np.flatnonzero(np.asarray(c["cat"]) == Cat.COMM_KERNEL)[0])
    d.show_event(i)
    for _ in range(3):
        QApplication.processEvents()
    fm = d.fontMetrics()
    name = s.trace.name_of(i)
    assert d.topLevelItem(0).text(1) == name and d.topLevelItem(0).toolTip(1) == name
    assert fm.horizontalAdvance(name) > 2 * d.columnWidth(1), "the sample's NCCL kernel name should need 3 lines"
    wrapped = 0
    it = QTreeWidgetItemIterator(d)
    while it.value() is not None:
        item = it.value()
        for col in (0, 1):
            text = item.text(col)
            if not text or (col == 0 and item.isFirstColumnSpanned()):
                continue
            rect = d.visualRect(d.indexFromItem(item, col))
            lines = math.ceil(fm.horizontalAdvance(text) / rect.width())
            assert rect.height() >= lines * fm.height() - 1, (text, rect, lines)
            wrapped += lines > 1
        it += 1
    assert wrapped >= 2
    # the name's row is drawn on each of its lines: ink in its last line's band, value column
    rect = d.visualRect(d.indexFromItem(d.topLevelItem(0), 1))
    img = d.viewport().grab().toImage()
    band = [
        img.pixelColor(x, y).lightness()
        for y in range(rect.bottom() - fm.height(), rect.bottom() - 2)
        for x in range(rect.left() + 2, rect.right() - 2)
    ]
    assert min(band) < 128, "no text drawn on the wrapped name's last line"


def test_a_sender_done_before_its_peer_came_is_not_called_the_last(qtbot):
    """nsys_ddp: a broadcast root whose kernel ended before rank 1 arrived waits for nothing; the
    pane said 'none (this rank arrived last)' of it. Its collective's late rank is read here from
    the SQL table (each member's start), not from the pane."""
    from conftest import trace_path
    from PySide6.QtWidgets import QApplication

    from gpuviewer.widgets.details import DetailsPanel

    s = gpuviewer.open(trace_path("nsys", "nsys_ddp.sqlite"))
    rows = s.sql(
        """SELECT id, rank, "group", step, "order", start, "end" FROM collectives WHERE collective = 'Broadcast'"""
    )
    key = ["group", "step", "order"]
    rows["step"] = rows["step"].fillna(-1)
    rows["last"] = rows.groupby(key)["start"].transform("max")
    early = rows[(rows["end"] <= rows["last"]) & (rows["start"] < rows["last"])]
    assert len(early), "a root that ended before its peer arrived"
    row = early.iloc[0]
    late = int(rows[(rows[key] == row[key]).all(axis=1) & (rows["start"] == row["last"])]["rank"].iloc[0])
    d = DetailsPanel()
    qtbot.addWidget(d)
    d.set_trace(s.trace)
    d.collectives = s.analysis.kernel_collectives
    d.show_event(int(row["id"]))
    QApplication.processEvents()
    items = {d.topLevelItem(k).text(0): d.topLevelItem(k).text(1) for k in range(d.topLevelItemCount())}
    assert items["Waiting for others"] == f"none (its kernel ended before rank {late} arrived: it sent without waiting)"


def test_a_kernel_no_other_rank_holds_says_so(qtbot):
    """HTA's trace_filter (2 of 128 ranks, events sampled away): an NCCL kernel the collectives
    table does not hold (no other rank's kernel ran with it) says its wait is not told apart; one
    the table holds shows its collective."""
    from conftest import compat_path
    from PySide6.QtWidgets import QApplication

    from gpuviewer.model.categories import Cat
    from gpuviewer.widgets.details import DetailsPanel

    s = gpuviewer.open(compat_path("facebookresearch__HolisticTraceAnalysis", "trace_filter"))
    held = set(s.sql("SELECT id FROM collectives")["id"].tolist())
    nccl = np.flatnonzero(np.asarray(s.trace.columns["cat"]) == Cat.COMM_KERNEL).tolist()
    lone = [i for i in nccl if i not in held]
    assert lone and held
    d = DetailsPanel()
    qtbot.addWidget(d)
    d.set_trace(s.trace)
    d.collectives = s.analysis.kernel_collectives
    for i, want in ((lone[0], "matched with no other rank's kernel"), (min(held), "SendRecv #")):
        d.show_event(int(i))
        QApplication.processEvents()
        items = {d.topLevelItem(k).text(0): d.topLevelItem(k).text(1) for k in range(d.topLevelItemCount())}
        assert items["Collective"].startswith(want), items


def test_a_field_name_never_breaks_inside_a_word(qtbot):
    """At a dock 270 px wide a CUDA call's fields from an Nsight export ('returnValue',
    'nestingLevel', 'correlationId') broke mid-word ('returnValu/e'; the window's audit): the field
    column is at least as wide as the longest word of its names (up to 60% of the pane)."""
    from conftest import trace_path
    from PySide6.QtWidgets import QApplication, QTreeWidgetItemIterator

    from gpuviewer.model.categories import Cat
    from gpuviewer.widgets.details import DetailsPanel

    s = gpuviewer.open(trace_path("nsys", "nsys_single.sqlite"))
    d = DetailsPanel()
    qtbot.addWidget(d)
    d.resize(270, 900)
    d.show()
    d.set_trace(s.trace)
    i = int(np.flatnonzero(np.asarray(s.trace.columns["cat"]) == Cat.CUDA_RUNTIME)[0])
    d.show_event(i)
    for _ in range(3):
        QApplication.processEvents()
    fm = d.fontMetrics()
    # each name's words with the item's indentation (an argument's name sits two levels in), from
    # the tree's own items and the font's advance
    need = []
    it = QTreeWidgetItemIterator(d)
    while it.value() is not None:
        item, depth, p = it.value(), 0, it.value().parent()
        while p is not None:
            depth, p = depth + 1, p.parent()
        indent = d.indentation() * (depth + (1 if d.rootIsDecorated() else 0))
        need += [(fm.horizontalAdvance(w) + indent, w) for w in item.text(0).split()]
        it += 1
    width, word = max(need)
    assert word in ("returnValue", "correlationId", "nestingLevel", "eventClass"), need
    assert width + 6 <= d.columnWidth(0) <= 0.6 * d.viewport().width() + 1, (word, width, d.columnWidth(0))


def test_long_names_and_stamps_wrap_at_their_joints_not_mid_word(qapp):
    """Details broke 'vectorized_ / elementwise_kernel<8 / ,' and 't = 179601085815031118 / 5 ns'
    (an audit). A kernel's name wraps after '::', ',', '<', '(', '_' or '/', a long number between
    groups of three digits; the text itself (copied) is unchanged."""
    from PySide6.QtGui import QFont

    from gpuviewer.widgets.details import _wrapped, breakable

    name = (
        "void at::native::vectorized_elementwise_kernel<8, at::native::bfloat16_copy_kernel_cuda"
        "(at::TensorIteratorBase&)::{lambda(float)#1}, std::array<char*, 2ul> >(int, std::array<char*, 2ul>)"
    )
    stamp = "9.094 s  (t = 1796010858150311185 ns)"
    for text in (name, stamp):
        drawn = breakable(text)
        assert drawn.replace("\u200b", "").replace("\u2009", "") == text
        lay, _h = _wrapped(text, QFont(), 150.0)
        ends = [lay.lineAt(k).textStart() + lay.lineAt(k).textLength() for k in range(lay.lineCount() - 1)]
        assert len(ends) >= 1
        for e in ends:
            before, after = drawn[e - 1], drawn[e] if e < len(drawn) else ""
            # a line ends at a break chance: after a space, a zero-width break or a thin space
            assert before in " \u200b\u2009" or after in " \u200b\u2009", (text, drawn[max(0, e - 12) : e + 4])


def test_short_names_do_not_wrap_after_an_underscore(qapp):
    """'run_ / backward of torch._C._ / EngineBase' and '_ / runtime_utils.py(276): _ / unshard'
    (helper-116): a name wraps after '_' only inside a piece of 24 characters or more between its
    other break chances (a long NCCL kernel name still does)."""
    from gpuviewer.widgets.details import breakable

    for text in (
        "<built-in method run_backward of torch._C._EngineBase>",
        "torch/distributed/fsdp/_runtime_utils.py(276): _unshard",
    ):
        assert "_\u200b" not in breakable(text), breakable(text)
    assert "Kernel_\u200bAllReduce_\u200b" in breakable(
        "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)"
    )


def test_the_start_fits_one_line_and_the_producers_clock_has_its_own_row(qtbot):
    """'Start 41.650 ms (t = 1 796 010 649 571 461 877 ns)' wrapped over three lines at 1366 px
    and pushed the fields below it down (a review): the start on the trace's axis fits one line
    of a 270 px pane; the producer's clock, in ns, is a row of its own after the fields."""
    from PySide6.QtWidgets import QApplication

    from gpuviewer.model.fmt import format_ns

    s, d = _pane(qtbot)
    c = s.trace.columns
    i = int(np.argmax(np.asarray(c["start"])))  # the latest start: the longest offset
    d.show_event(i)
    QApplication.processEvents()
    rows = {d.topLevelItem(k).text(0): d.topLevelItem(k) for k in range(d.topLevelItemCount())}
    start = int(c["start"][i])
    assert rows["Start"].text(1) == format_ns(start - s.trace.start_ns)
    assert rows["Absolute start"].text(1) == f"{start} ns"
    fm = d.fontMetrics()
    rect = d.visualRect(d.indexFromItem(rows["Start"], 1))
    assert rect.height() < 2 * fm.height(), rect
    names = [d.topLevelItem(k).text(0) for k in range(d.topLevelItemCount())]
    assert names.index("Absolute start") > names.index("Depth") > names.index("Start")


def test_a_long_host_ops_name_is_whole_a_kernels_short_first(qtbot):
    """A kernel's long C++ name is said short first and whole in 'Full name'; a host op's is not
    shortened (its template arguments tell ops apart: HTA's autograd CppNode<...> ops all read
    alike short; a review). samples/ddp: a Python function's name over 100 characters, and a
    kernel's."""
    from PySide6.QtWidgets import QApplication

    from gpuviewer.model.categories import Cat
    from gpuviewer.model.fmt import short_name

    s, d = _pane(qtbot)
    c, names = s.trace.columns, s.trace.names
    cats, ids = np.asarray(c["cat"]), np.asarray(c["name"])
    long_ids = [k for k, n in enumerate(names) if len(n) > 100]
    host = int(np.flatnonzero(np.isin(ids, long_ids) & ~np.isin(cats, [Cat.KERNEL, Cat.COMM_KERNEL]))[0])
    kernel = int(np.flatnonzero(np.isin(ids, long_ids) & (cats == Cat.KERNEL))[0])
    for i, shortened in ((host, False), (kernel, True)):
        d.show_event(i)
        QApplication.processEvents()
        rows = {d.topLevelItem(k).text(0): d.topLevelItem(k).text(1) for k in range(d.topLevelItemCount())}
        name = s.trace.name_of(i)
        assert rows["Name"] == (short_name(name) if shortened else name)
        assert ("Full name" in rows) == shortened and rows.get("Full name", name) == name
