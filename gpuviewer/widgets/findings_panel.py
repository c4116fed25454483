"""Findings dock: ranked by the time each cost, symptoms under their cause, filterable;
choosing one takes the timeline there. The severity is a coloured badge, the columns are as
wide as their content and the finding's text takes the rest (whole in its tooltip and, wrapped,
in the detail pane), so choosing a row never scrolls the table sideways."""

from __future__ import annotations

from PySide6.QtCore import QRectF, QSize, Qt, Signal
from PySide6.QtGui import QBrush, QColor, QPainter
from PySide6.QtWidgets import (
    QAbstractItemView,
    QComboBox,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QLineEdit,
    QStyledItemDelegate,
    QTextBrowser,
    QTreeWidget,
    QTreeWidgetItem,
    QVBoxLayout,
    QWidget,
)

from ..model.fmt import esc

SEV_COLOR = {"high": QColor(220, 38, 38), "medium": QColor(217, 119, 6), "low": QColor(100, 116, 139)}


class SeverityBadge(QStyledItemDelegate):
    """The severity as a rounded badge in its colour, sized to its word (never elided)."""

    PAD = 8

    @classmethod
    def needed(cls, text: str, fm) -> int:
        return fm.horizontalAdvance(text) + 2 * cls.PAD + 4

    def sizeHint(self, option, index) -> QSize:
        s = super().sizeHint(option, index)
        return QSize(self.needed(str(index.data() or ""), option.fontMetrics), s.height())

    def paint(self, p: QPainter, option, index) -> None:
        text = str(index.data() or "")
        from PySide6.QtWidgets import QStyle

        if option.state & QStyle.State_Selected:
            p.fillRect(option.rect, option.palette.highlight())
        color = SEV_COLOR.get(text, QColor(100, 116, 139))
        fm = option.fontMetrics
        r = QRectF(
            option.rect.left() + 2,
            option.rect.top() + 2,
            fm.horizontalAdvance(text) + 2 * self.PAD,
            option.rect.height() - 4,
        )
        p.save()
        p.setRenderHint(QPainter.Antialiasing)
        p.setPen(Qt.NoPen)
        p.setBrush(color)
        p.drawRoundedRect(r, r.height() / 2, r.height() / 2)
        p.setPen(QColor(255, 255, 255))
        p.drawText(r, Qt.AlignCenter, text)
        p.restore()


def _where_short(f) -> str:
    """The steps a saving is in, short enough for a column: '' (every step), ' (step 3)', ' (7 of 9
    steps)'; the details say it in full."""
    acted, n = f.saves_steps, f.steps_profiled
    if not acted or not n or len(acted) >= n:
        return ""
    if len(acted) <= 2:
        return f" (step{'s' if len(acted) > 1 else ''} {', '.join(map(str, acted))})"
    return f" ({len(acted)} of {n} steps)"


class FindingsPanel(QWidget):
    findingActivated = Signal(object)  # the analysis.results.Finding chosen
    compareRank = Signal(int)  # "compare this rank with the others" on a late-rank finding

    def __init__(self, parent=None) -> None:
        super().__init__(parent)
        self.findings: list[dict] = []
        # each tree item holds an index into this list, not the finding: Qt cannot hold a dict
        # with an int past 64 bits (a garbage counter's bytes) and raised inside the slot
        self._shown: list[dict] = []
        self.severity = QComboBox()
        self.severity.addItems(["all severities", "high", "high + medium"])
        self.text = QLineEdit()
        self.text.setPlaceholderText("filter (rule, rank, words)")
        self.status = QLabel("")
        top = QHBoxLayout()
        top.addWidget(self.severity)
        top.addWidget(self.text, 1)
        self.tree = QTreeWidget()
        self.tree.setHeaderLabels(["Severity", "Saves/step", "Finding", "Rule", "Ranks", "Step"])
        head = self.tree.headerItem()
        head.setToolTip(
            1, "What fixing it saves a step it acts in (a what-if replay); the steps it acts in where not all"
        )
        head.setToolTip(5, "The step the finding's evidence is from (choosing the finding shows it)")
        self.tree.setRootIsDecorated(True)
        self.tree.setItemDelegateForColumn(0, SeverityBadge(self.tree))
        hd = self.tree.header()
        hd.setStretchLastSection(False)
        for col in (0, 1, 3, 4, 5):
            hd.setSectionResizeMode(col, QHeaderView.ResizeToContents)
        hd.setSectionResizeMode(2, QHeaderView.Stretch)  # the rest: no sideways scrolling
        self.tree.setHorizontalScrollBarPolicy(Qt.ScrollBarAlwaysOff)
        self.tree.setTextElideMode(Qt.ElideRight)
        self.tree.setHorizontalScrollMode(QAbstractItemView.ScrollPerPixel)
        self.detail = QTextBrowser()
        self.detail.setOpenLinks(False)
        self.detail.anchorClicked.connect(self._link)
        from PySide6.QtWidgets import QSplitter

        split = QSplitter(Qt.Horizontal)
        split.addWidget(self.tree)
        split.addWidget(self.detail)
        split.setSizes([900, 420])
        split.setStretchFactor(0, 3)
        split.setStretchFactor(1, 1)
        lay = QVBoxLayout(self)
        lay.setContentsMargins(2, 2, 2, 2)
        top.addWidget(self.status)
        lay.addLayout(top)
        lay.addWidget(split, 1)
        # what the analysis left out or assumed (analysis.notes: savings not computed past a size,
        # a memory snapshot drawn but not analysed...): the command line prints them as "note:"
        # lines, and an absence in the window must be said as plainly
        self.notes = QLabel("")
        self.notes.setWordWrap(True)
        self.notes.setTextInteractionFlags(Qt.TextSelectableByMouse)
        self.notes.setVisible(False)
        lay.addWidget(self.notes)
        self.severity.currentIndexChanged.connect(self._refill)
        self.text.textChanged.connect(self._refill)
        self.tree.currentItemChanged.connect(self._chosen)

    def set_findings(self, findings: list, notes: list[str] | tuple = ()) -> None:
        """findings: the analysis' top-level Findings (analysis.results); notes: its notes."""
        self.findings = list(findings)
        # a capture without steps: its one "step" is the capture (the CLI's column says the same)
        capture = any(getattr(f, "capture_ms", None) is not None for f in self.findings)
        self.tree.headerItem().setText(1, "Saves" if capture else "Saves/step")
        self.notes.setText("<br>".join(f"<i>Note:</i> {esc(n)}" for n in notes))
        self.notes.setVisible(bool(notes))
        self._refill()

    def set_busy(self, text: str) -> None:
        self.status.setText(text)

    def visible_findings(self) -> list:
        """Top-level findings that match the filter themselves or through a symptom."""
        return [f for f in self.findings if self._matches(f) or any(self._matches(c) for c in _flat(f.children))]

    def _matches(self, f) -> bool:
        import re

        sev = self.severity.currentIndex()
        text = self.text.text().lower()
        want_ranks = {int(m) for m in re.findall(r"rank\s*(\d+)", text)}
        words = re.sub(r"rank\s*\d+", " ", text).split()
        if sev == 1 and f.severity != "high":
            return False
        if sev == 2 and f.severity == "low":
            return False
        if want_ranks and not want_ranks & set(f.ranks):
            return False
        hay = f"{f.rule} {f.title} {f.severity}".lower()
        return all(w in hay for w in words)

    def _item(self, f) -> QTreeWidgetItem:
        # what fixing it would save a step it acts in (the what-if replay; the findings' order; a
        # one-off stall's step marked); "–" where no change removes its cause
        # (no step beside "< 0.05 ms": saving nothing measurable in step 5 beside a finding shown
        # from step 4 read as two steps for one finding)
        unmeasured = f.saves_figure is not None and f.saves_figure.startswith("<")
        saves = "–" if f.saves_column is None else f.saves_column + ("" if unmeasured else _where_short(f))
        it = QTreeWidgetItem(
            [f.severity, saves, f.title, f.rule, ranks_text(f.ranks), "" if f.step is None else str(f.step)]
        )
        it.setForeground(0, QBrush(SEV_COLOR.get(f.severity, QColor(0, 0, 0))))
        it.setTextAlignment(1, Qt.AlignRight | Qt.AlignVCenter)
        it.setData(0, Qt.UserRole, len(self._shown))
        self._shown.append(f)
        it.setToolTip(2, f.title)
        if f.saves_once_above:  # 'then 5.4 ms': the details' what-if line says how little it saves alone
            it.setToolTip(1, "what it saves once the findings above it are fixed; alone far less")
        for c in f.children:
            it.addChild(self._item(c))
        return it

    def _refill(self) -> None:
        self.tree.clear()
        self._shown = []
        shown = self.visible_findings()
        for f in shown:
            it = self._item(f)
            self.tree.addTopLevelItem(it)
            it.setExpanded(True)
        n = sum(1 for _ in _flat(self.findings))
        self.status.setText(f"{len(shown)} of {len(self.findings)} findings ({n} with symptoms)")
        if shown:
            # the details pane is never empty; selecting it here does not move the timeline
            first = self.tree.topLevelItem(0)
            self.tree.blockSignals(True)
            self.tree.setCurrentItem(first)
            self.tree.blockSignals(False)
            self._show(self._finding(first))

    def choose(self, row: int) -> None:
        it = self.tree.topLevelItem(row)
        if it is not None:
            self._choose_item(it)

    def choose_finding(self, f) -> bool:
        """Select a finding wherever it sits (a symptom under its cause included)."""
        from PySide6.QtWidgets import QTreeWidgetItemIterator

        it = QTreeWidgetItemIterator(self.tree)
        while it.value() is not None:
            if self._finding(it.value()) is f or self._finding(it.value()) == f:
                self._choose_item(it.value())
                return True
            it += 1
        return False

    def _finding(self, item):
        return self._shown[item.data(0, Qt.UserRole)]

    def _choose_item(self, it) -> None:
        if self.tree.currentItem() is it:
            self._chosen(it)  # already current (selected on open): act on it anyway
        else:
            self.tree.setCurrentItem(it)

    def _chosen(self, item, _prev=None) -> None:
        if item is None:
            return
        f = self._finding(item)
        self._show(f)
        self.findingActivated.emit(f)

    def _show(self, f) -> None:
        metrics = "".join(
            f"<tr><td>{esc(label)}</td><td>{esc(value)}</td></tr>"
            for label, value in (
                _metric(k, v)
                for k, v in f.metrics.items()
                # (a sentence kept for the title's rewording, not a figure: jax's 'duration text ...
                # 29.8x' under a title saying 29.7x, the job's ratio; an audit of the window)
                if not isinstance(v, (list, dict)) and not k.endswith("_text")
            )
        )
        ev = f.evidence_rows(with_excess=True)
        evid = "".join(
            f"<li>{esc(e['name'])} — {e.get('excess_ms', e.get('ms'))} ms"
            + (f" ({esc(e['where'])})" if e.get("where") else "")
            + (f" ({esc(e['lane'])})" if e.get("lane") else "")
            + "</li>"
            for e in ev[:5]
        )
        top = any(x is f for x in self.findings)
        said = esc(f.saving_text[0].upper() + f.saving_text[1:]) + "." if f.saving_text else lost_text(f, not top)
        self.detail.setHtml(
            f"<b>{esc(f.title)}</b><p>{said}</p>"
            f"<table>{metrics}</table>"
            + (f"<p>Evidence:</p><ul>{evid}</ul>" if evid else "")
            + f"<p><i>{esc(f.advice)}</i></p>"
            + (
                f"<p><a href='gpuviewer:compare-rank/{int(late)}'>Compare rank {int(late)} with the "
                "others</a> (its steps against the median of the other ranks)</p>"
                if (late := f.metrics.get("late_rank")) is not None
                else ""
            )
        )

    def _link(self, url) -> None:
        s = url.toString()
        if s.startswith("gpuviewer:compare-rank/"):
            self.compareRank.emit(int(s.rsplit("/", 1)[1]))


def ranks_text(ranks) -> str:
    """ "1", "0, 1": ranks as the integers they are (a rank that came through a float column is
    no "1.0")."""
    return ", ".join(str(int(r)) for r in ranks)


def lost_text(f, symptom: bool = True) -> str:
    """What a finding without a what-if counts, never "0.0 ms lost": a symptom whose time is
    counted under its cause says so instead. Said as what it is: the time it counts beyond waits
    for other ranks, summed over its ranks and steps, not a saving ("its time lost: 865.2 ms" of
    trace_filter's low utilization was two ranks' idle added up)."""
    if f.impact_ms >= 0.05:
        n = len(f.ranks)
        over = f"summed over its {n} ranks and the profiled steps" if n > 1 else "over the profiled steps"
        return (
            f"No what-if estimates what fixing this would save. The time it counts, beyond waits for other ranks, "
            f"{over}: {f.impact_ms:.1f} ms (not what fixing it saves)."
        )
    if symptom:
        return "No what-if removes this finding's cause, and no time is counted against it (a symptom: see its cause)."
    # a top-level finding with neither (thin data, warm-up) is no symptom of anything
    return "No what-if applies to this finding, and no time is counted against it: it says how to read the others."


# metrics that are fractions (0.2684 beside a title's "27%" read as another figure)
_FRACTIONS = {"utilization", "utilization_other_steps", "fraction", "ideal", "imbalance", "idle_fraction"}


def _metric(k: str, v) -> tuple[str, str]:
    """A metric's row as a user reads it: words, not the JSON key; a time with its unit, a share
    as a percentage, bytes in GB ('wait caused a step' '19.013 ms', not wait_caused_ms_per_step)."""
    words = k.replace("_per_step", " a step").replace("_each", " each")
    num = isinstance(v, (int, float)) and not isinstance(v, bool)
    if num and (k in _FRACTIONS or k.endswith("share") or k.startswith("share")):
        return words.replace("_", " "), f"{v:.1%}"
    if num and ("_ms" in k or k.endswith("ms")):
        return words.replace("_ms", "").replace("_", " "), f"{_fmt(v)} ms"
    if num and "_us" in k:
        return words.replace("_us", "").replace("_", " "), f"{_fmt(v)} µs"
    if num and k.endswith("bytes"):
        return words.replace("_bytes", "").replace("_", " "), f"{v / 1e9:,.2f} GB"
    if num and (k.startswith("pct") or k.endswith("pct_of_peak")):
        return words.replace("_", " "), f"{_fmt(v)}%"
    return words.replace("_", " "), _fmt(v)


def _fmt(v) -> str:
    """A metric as a user reads it: 200,000 and 2,631.5, never "2e+05"; small values with four
    significant digits."""
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return str(v)
    if isinstance(v, int):
        return f"{v:,}"  # exact: a float format would round past 2**53
    if abs(v) >= 1000:
        return f"{v:,.0f}" if v.is_integer() else f"{v:,.1f}"
    return f"{v:.4g}"


def _flat(fs):
    for f in fs:
        yield f
        yield from _flat(f.children)
