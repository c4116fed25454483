"""Details of the selected event: fields, every argument, and the linked launch or kernel. The
field column is as wide as its names (at most 42% of the pane, whose width follows the dock); a
field or value too long for its column wraps onto more lines (at a space where it can, else
anywhere: a kernel's name has none), as Perfetto's details do, and is whole in its tooltip."""

from __future__ import annotations

import re

from PySide6.QtCore import QPointF, QSize, Qt, Signal
from PySide6.QtGui import QPalette, QTextLayout, QTextOption
from PySide6.QtWidgets import (
    QStyle,
    QStyledItemDelegate,
    QStyleOptionViewItem,
    QTreeWidget,
    QTreeWidgetItem,
    QTreeWidgetItemIterator,
)

from ..model.categories import CAT_LABEL, Cat
from ..model.fmt import short_name
from ..model.trace import Trace
from ..render.time_axis import format_duration, format_ns

# where a C++ kernel name or a path may wrap; after '_' too within a piece of LONG_WORD characters
# or more between those (ncclDevKernel_AllReduce_Sum_f32_RING_LL)
_BREAK_NO_UNDERSCORE = re.compile(r"(::|[,<(/])")
_PIECE = re.compile(r"[^\s:,<(/]+")
_UNDERSCORE = re.compile(r"_(?!$)")
LONG_WORD = 24
LONG_NAME = 100  # characters: a name longer is said short first, whole after the fields
_LONG_NUMBER = re.compile(r"\d{10,}")


def breakable(text: str) -> str:
    """The text as drawn: a zero-width break chance after '::', ',', '<', '(' and '/' (and '_' in a
    long piece between those), and a long number's digits in threes (thin spaces):
    'vectorized_ / elementwise_kernel<8 / ,' and
    't = 179601085815031118 / 5 ns' were broken mid-word (an audit). Drawn only: the cell's text,
    copied, stays as recorded."""
    # '_' only inside a long piece (between the other break chances): 'run_ / backward', '_ /
    # runtime_utils' broke names a space or a '/' could wrap before (an audit of the window)
    text = _PIECE.sub(
        lambda m: _UNDERSCORE.sub("_\u200b", m.group(0)) if len(m.group(0)) > LONG_WORD else m.group(0), text
    )
    text = _BREAK_NO_UNDERSCORE.sub("\\1\u200b", text)
    return _LONG_NUMBER.sub(lambda m: "\u2009".join(_threes(m.group(0))), text)


def _threes(digits: str) -> list[str]:
    head = len(digits) % 3
    return ([digits[:head]] if head else []) + [digits[k : k + 3] for k in range(head, len(digits), 3)]


def _wrapped(text: str, font, width: float) -> tuple[QTextLayout, float]:
    """The text laid out in lines of at most `width` pixels, and its height."""
    lay = QTextLayout(breakable(text), font)
    opt = QTextOption()
    opt.setWrapMode(QTextOption.WrapAtWordBoundaryOrAnywhere)
    lay.setTextOption(opt)
    lay.beginLayout()
    y = 0.0
    while True:
        line = lay.createLine()
        if not line.isValid():
            break
        line.setLineWidth(max(1.0, width))
        line.setPosition(QPointF(0, y))
        y += line.height()
    lay.endLayout()
    return lay, y


class _WrapDelegate(QStyledItemDelegate):
    """Draws a cell's text wrapped to its column's width and asks for the rows' height that takes
    (the style's own wrapping breaks only at spaces, and elides a kernel's name)."""

    PAD = 3  # the style's text margin, each side

    def _text_width(self, view, index) -> float:
        w = view.columnWidth(index.column())
        if index.column() == 0:  # the tree's indentation and branch mark come off the first column
            depth, p = 0, index.parent()
            while p.isValid():
                depth, p = depth + 1, p.parent()
            w -= view.indentation() * (depth + 1)
        return w - 2 * self.PAD

    def sizeHint(self, option, index) -> QSize:
        base = super().sizeHint(option, index)
        view = self.parent()
        text = str(index.data(Qt.DisplayRole) or "")
        if not text or (index.column() == 0 and view.isFirstColumnSpanned(index.row(), index.parent())):
            return base
        _lay, h = _wrapped(text, option.font, self._text_width(view, index))
        return QSize(base.width(), max(base.height(), int(h + 0.999) + 2 * (self.PAD - 1)))

    def paint(self, painter, option, index) -> None:
        view = self.parent()
        text = str(index.data(Qt.DisplayRole) or "")
        if index.column() == 0 and view.isFirstColumnSpanned(index.row(), index.parent()):
            return super().paint(painter, option, index)
        opt = QStyleOptionViewItem(option)
        self.initStyleOption(opt, index)
        opt.text = ""  # the style draws the background, selection and focus; the text is ours
        style = view.style()
        style.drawControl(QStyle.CE_ItemViewItem, opt, painter, view)
        lay, _h = _wrapped(text, opt.font, opt.rect.width() - 2 * self.PAD)
        group = QPalette.Normal if opt.state & QStyle.State_Enabled else QPalette.Disabled
        role = QPalette.HighlightedText if opt.state & QStyle.State_Selected else QPalette.Text
        painter.save()
        painter.setPen(opt.palette.color(group, role))
        lay.draw(painter, QPointF(opt.rect.left() + self.PAD, opt.rect.top() + self.PAD - 1))
        painter.restore()


class DetailsPanel(QTreeWidget):
    linkActivated = Signal(int)  # event index of a linked launch/kernel

    def __init__(self, parent=None) -> None:
        super().__init__(parent)
        self.setColumnCount(2)
        self.setHeaderLabels(["Field", "Value"])
        self.setColumnWidth(0, 150)
        self.setAlternatingRowColors(True)
        # long values wrap (a kernel's name, "none (this rank arrived last)"): at 1366 px the dock
        # is ~270 px and eliding cut most of them; rows take the height their text needs
        self.setItemDelegate(_WrapDelegate(self))
        self.setUniformRowHeights(False)
        self.setHorizontalScrollBarPolicy(Qt.ScrollBarAlwaysOff)
        # a bound method, not a lambda: Qt drops the connection with this widget (a lambda kept
        # firing into a half-destroyed pane at exit)
        self.header().sectionResized.connect(self._columns_resized)
        self.itemActivated.connect(self._activated)
        self.trace: Trace | None = None
        self.origin = 0
        self.collectives: dict[int, dict] = {}  # event index -> its matched collective (analysis)
        self.work = (
            None  # event index -> a kernel's op, shapes, FLOPs, rate as (field, value) rows (Session.kernel_work)
        )

    def set_trace(self, trace: Trace) -> None:
        self.trace = trace
        self.origin = trace.start_ns
        self.show_event(None)

    def show_event(self, i: int | None) -> None:
        self.clear()
        if i is None or self.trace is None:
            if self.trace is not None:  # never an empty pane: say what fills it
                hint = QTreeWidgetItem(
                    self, ["Click an event on the timeline to see its fields, arguments and linked launch or kernels."]
                )
                hint.setFirstColumnSpanned(True)
                hint.setDisabled(True)
            return
        t = self.trace
        c = t.columns
        lane = t.lanes[int(c["lane"][i])]
        start, dur = int(c["start"][i]), int(c["dur"][i])
        name = t.names[int(c["name"][i])]
        # a C++ kernel's whole name (templates, arguments) wrapped over 12 to 40 lines and pushed
        # every other field out of the pane (a review): its short name first, the whole last
        # (a kernel's only: host ops' long names differ in their template arguments, which a short
        # name would drop, and read alike; a review)
        kernel = int(c["cat"][i]) in (Cat.KERNEL, Cat.COMM_KERNEL)
        short = short_name(name) if kernel and len(name) > LONG_NAME else name
        rows = [
            ("Name", short or name),
            ("Category", CAT_LABEL.get(Cat(int(c["cat"][i])), str(int(c["cat"][i])))),
            ("Rank", str(lane.rank)),
            ("Lane", (f"GPU {lane.device} · " if lane.device >= 0 else "") + lane.label),
            ("Start", format_ns(start - self.origin)),
            ("Duration", format_duration(dur)),
            ("End", format_ns(start + dur - self.origin)),
            ("Depth", str(int(c["depth"][i]))),
            # its own row, after the fields read first: beside Start it wrapped over three lines
            # at 1366 px and pushed them down (a review); the producer's clock, to find it elsewhere
            ("Absolute start", f"{start} ns"),
        ]
        if short and short != name:
            rows.append(("Full name", name))
        if int(c["corr"][i]):
            rows.append(("Correlation id", str(int(c["corr"][i]))))
        coll = self.collectives.get(int(i))
        if coll is not None:
            rows += _collective_rows(coll, lane.rank)
        elif self.collectives and int(c["cat"][i]) == Cat.COMM_KERNEL:
            # the analysis matched others: this one no other rank's trace holds (sampled away,
            # a rank the session lacks), so its wait is not told apart from its transfer
            rows.append(("Collective", "matched with no other rank's kernel: its waiting is not told apart"))
        if self.work is not None and int(c["cat"][i]) == Cat.KERNEL:
            try:
                rows += self.work(int(i))
            except Exception as e:  # noqa: BLE001 - a details panel never raises
                rows.append(("Work", f"unavailable: {e}"))
        for k, v in rows:
            QTreeWidgetItem(self, [k, v])
        from ..session.details import event_args
        from ..session.details import links as linked

        links = linked(t, i)
        if links:
            top = QTreeWidgetItem(self, ["Linked", f"{len(links)} (double-click to go)"])
            for j, what in links[:200]:
                it = QTreeWidgetItem(
                    top, [what, f"{t.names[int(c['name'][j])]}  ·  {format_duration(int(c['dur'][j]))}"]
                )
                it.setData(0, Qt.UserRole, j)
            top.setExpanded(True)
        args_item = QTreeWidgetItem(self, ["Arguments", ""])
        try:
            args = event_args(t, i)
        except Exception as e:  # noqa: BLE001 - a details panel never raises
            args = {}
            args_item.setText(1, f"unavailable: {e}")
        for k, v in args.items():
            QTreeWidgetItem(args_item, [str(k), _fmt(v)])
        if not args and not args_item.text(1):
            args_item.setText(1, "none")
        args_item.setExpanded(True)
        self._fit()
        self.topLevelItem(0).setToolTip(1, name)  # the whole name, where the row says it short

    def _fit(self) -> None:
        """Tooltips with every value whole; the field column sized to its names (at most 42%)."""
        from PySide6.QtWidgets import QTreeWidgetItemIterator

        it = QTreeWidgetItemIterator(self)
        while it.value() is not None:
            item = it.value()
            item.setToolTip(1, item.text(1))
            item.setToolTip(0, item.text(0))
            it += 1
        self._field_width()

    def _field_width(self) -> None:
        self.resizeColumnToContents(0)
        vw = self.viewport().width()
        # up to 42% of the pane: at 1366x768 it is ~270 px; a longer name ("registers per
        # thread") wraps, and the values (a kernel's name, times with their ns) keep the rest.
        # Never narrower than the longest word of a name (up to 60% of the pane): 'returnValue'
        # broke as 'returnValu/e' (the window's audit)
        fm = self.fontMetrics()
        word = max((fm.horizontalAdvance(w) + indent for w, indent in self.field_words()), default=0)
        word += 2 * _WrapDelegate.PAD + 4
        cap = max(110, int(vw * 0.42), min(word, int(vw * 0.6)))
        self.setColumnWidth(0, min(self.columnWidth(0), cap))

    def field_words(self) -> list[tuple[str, int]]:
        """The words of every field's name, the arguments' (children of 'Arguments') too, each
        with its item's indentation in pixels (an argument's name starts two levels in)."""
        words = []
        it = QTreeWidgetItemIterator(self)
        root = 1 if self.rootIsDecorated() else 0
        while it.value() is not None:
            item, depth = it.value(), 0
            p = item.parent()
            while p is not None:
                depth, p = depth + 1, p.parent()
            words += [(w, self.indentation() * (depth + root)) for w in item.text(0).split()]
            it += 1
        return words

    def resizeEvent(self, ev) -> None:
        super().resizeEvent(ev)
        if self.topLevelItemCount() > 1:  # filled while hidden (the dock opens on the selection)
            self._field_width()

    def _columns_resized(self, *_args) -> None:
        """The rows' heights follow their columns' widths (the wrapped text), laid out once for
        any number of resizes."""
        self.scheduleDelayedItemsLayout()

    def _activated(self, item, _col) -> None:
        j = item.data(0, Qt.UserRole)
        if j is not None:
            self.linkActivated.emit(int(j))


def _waiting(c: dict, rank: int) -> str:
    if c["wait_ns"] > 0:
        return f"{format_duration(c['wait_ns'])} (rank {c['late_rank']} arrived last)"
    if c["late_rank"] == rank:
        return "none (this rank arrived last)"
    # a sender done before its peer came (collectives.Instance.waits)
    return f"none (its kernel ended before rank {c['late_rank']} arrived: it sent without waiting)"


def _collective_rows(c: dict, rank: int) -> list[tuple[str, str]]:
    """A collective kernel: the part spent waiting for the last rank, the transfer, bandwidth."""
    rows = [
        (
            "Collective",
            f"{c['collective']} #{c['order'] + 1} "
            + (f"of step {c['step']}" if c.get("step") is not None else "outside the steps")
            + f" · group {c['group']} · {c['ranks']} ranks",
        ),
        ("Waiting for others", _waiting(c, rank)),
        ("Transfer", format_duration(c["transfer_ns"])),
    ]
    if c.get("bytes"):
        bw = f" · algbw {c['algbw_gbps']:.1f} GB/s · busbw {c['busbw_gbps']:.1f} GB/s" if c.get("algbw_gbps") else ""
        rows.append(("Bytes", f"{c['bytes']:,}{bw}"))
    return rows


def _fmt(v) -> str:
    if isinstance(v, float):
        return f"{v:.6g}"
    if isinstance(v, (list, dict)):
        import json

        s = json.dumps(v)
        return s if len(s) < 400 else s[:400] + "…"
    return str(v)
