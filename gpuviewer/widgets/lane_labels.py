"""Left panel of the timeline: rank headers and lane names, aligned with the plot's rows.
Click a rank header to collapse it; right-click a lane to hide, pin or move it. The header of
the rank whose lanes fill the top stays pinned there while they scroll; a name too long for the
column is shortened part by part, numbers kept (label_fit), and shown whole in its tooltip."""

from __future__ import annotations

from PySide6.QtCore import QEvent, QRectF, Qt, Signal
from PySide6.QtGui import QFont, QFontMetrics, QPainter
from PySide6.QtWidgets import QMenu, QToolTip, QWidget

from ..model.layout import Layout
from ..render import theme
from .label_fit import fit_label


class LaneLabels(QWidget):
    changed = Signal()  # the layout changed (collapse, hide, pin, move)

    def __init__(self, parent=None) -> None:
        super().__init__(parent)
        self.layout_model: Layout | None = None
        self.y_range = (0.0, 1.0)
        self.plot_top = 0  # device y of the plot area's top inside this widget
        self.plot_height = 1
        self.setMinimumWidth(120)
        self.setMouseTracking(True)
        self.font_lane = QFont()
        self.font_lane.setPixelSize(11)
        self.font_head = QFont(self.font_lane)
        self.font_head.setBold(True)
        self.setContextMenuPolicy(Qt.CustomContextMenu)
        self.customContextMenuRequested.connect(self._menu)
        self._fitted: dict[tuple[str, int, bool], str] = {}  # (text, width, bold) -> as drawn

    def fit(self, p: QPainter, text: str, width: int) -> str:
        """text shortened to width pixels in the painter's font (remembered: paints repeat)."""
        key = (text, width, p.font().bold())
        got = self._fitted.get(key)
        if got is None:
            if len(self._fitted) > 4096:
                self._fitted.clear()
            got = self._fitted[key] = fit_label(text, width, p.fontMetrics().horizontalAdvance)
        return got

    def set_view(self, y0: float, y1: float, top: int, height: int) -> None:
        view = ((y0, y1), top, max(1, height))
        if view == (self.y_range, self.plot_top, self.plot_height):
            return  # a horizontal pan: the labels did not move, no repaint
        self.y_range = (y0, y1)
        self.plot_top, self.plot_height = top, max(1, height)
        self.update()

    def _to_dev(self, y: float) -> float:
        y0, y1 = self.y_range
        return self.plot_top + (y - y0) / max(y1 - y0, 1e-9) * self.plot_height

    def _to_data(self, Y: float) -> float:
        y0, y1 = self.y_range
        return y0 + (Y - self.plot_top) / self.plot_height * (y1 - y0)

    def paintEvent(self, ev) -> None:
        if self.layout_model is None:
            return
        p = QPainter(self)
        th = theme.current()
        p.fillRect(self.rect(), th.panel)
        y0, y1 = self.y_range
        p.setClipRect(0, self.plot_top, self.width(), self.plot_height)
        for row in self.layout_model.visible_rows(y0, y1):
            top, bot = self._to_dev(row.y), self._to_dev(row.y + min(row.h, 1.0 if row.kind == "lane" else row.h))
            if row.kind == "header":
                self._header(p, row, top)
            elif row.kind == "group":
                p.fillRect(QRectF(0, top, self.width(), self._to_dev(row.y + row.h) - top), th.group)
                p.setFont(self.font_lane)
                p.setPen(th.text)
                arrow = "▸" if self.layout_model.group_collapsed(row.group) else "▾"
                p.drawText(
                    QRectF(6, top, self.width() - 10, self._to_dev(row.y + row.h) - top),
                    Qt.AlignVCenter | Qt.AlignLeft,
                    self.fit(p, f"{arrow} {row.label}", self.width() - 10),
                )
            else:
                p.setFont(self.font_lane)
                p.setPen(th.text)
                key = self.layout_model.trace.lanes[row.lane].key
                expandable = row.hidden_rows > 0 or key in self.layout_model.state.expanded
                mark = ("▸ " if row.hidden_rows else "▾ ") if expandable else "   "
                p.drawText(
                    QRectF(6, top, self.width() - 10, max(bot - top, 12)),
                    Qt.AlignVCenter | Qt.AlignLeft,
                    self.fit(p, mark + row.label, self.width() - 10),
                )
                if row.hidden_rows:
                    p.setPen(th.text_dim)
                    nb = self._to_dev(row.y + 2)
                    p.drawText(
                        QRectF(20, bot, self.width() - 24, max(nb - bot, 12)),
                        Qt.AlignVCenter | Qt.AlignLeft,
                        _folded_said(row),
                    )
                p.setPen(th.line)
                yb = self._to_dev(row.y + row.h)
                p.drawLine(0, int(yb), self.width(), int(yb))
        hdr = self.sticky_header()
        if hdr is not None:  # its own row scrolled away: the rank stays named at the top
            self._header(p, hdr, self.plot_top)
            sb = self._sticky_bottom()
            named = self.named_under_header(hdr)
            if named is not None:
                lane, fill_h = named
                group = lane.kind == "group"
                p.fillRect(QRectF(0, sb, self.width(), fill_h), th.group if group else th.panel)
                p.setFont(self.font_lane)
                p.setPen(th.text)
                mark = ("▸ " if self.layout_model.group_collapsed(lane.group) else "▾ ") if group else "   "
                p.drawText(
                    QRectF(6, sb, self.width() - 10, 14),
                    Qt.AlignVCenter | Qt.AlignLeft,
                    self.fit(p, mark + lane.label, self.width() - 10),
                )
            p.setPen(th.line)
            p.drawLine(0, int(sb), self.width(), int(sb))
        p.end()

    def _header(self, p: QPainter, row, top: float) -> None:
        th = theme.current()
        h = row.h / max(self.y_range[1] - self.y_range[0], 1e-9) * self.plot_height
        p.fillRect(QRectF(0, top, self.width(), h), th.header)
        p.setFont(self.font_head)
        p.setPen(th.text)
        arrow = "▸" if row.rank in self.layout_model.state.collapsed_ranks else "▾"
        p.drawText(
            QRectF(4, top, self.width() - 8, h),
            Qt.AlignVCenter | Qt.AlignLeft,
            self.fit(p, f"{arrow} {row.label}", self.width() - 8),
        )

    def sticky_header(self):
        """The header of the rank whose lanes are at the top (Layout.sticky_header)."""
        if self.layout_model is None:
            return None
        return self.layout_model.sticky_header(*self.y_range)

    def named_under_header(self, hdr):
        """(the row whose top went under the pinned header, the height its name's backdrop takes)
        where its name is drawn again just below the header: a lane or group row (a group's
        '▾ CUDA API · 5 lanes' was cut in half under it; an audit) whose own name is half hidden
        (two copies a few pixels apart read as garbled text), with a name's height of it still
        below the header (else its name lay over the next lane's: ddp at 2560x1440, two CUDA API
        threads' names garbled; an audit). None where no name is drawn there."""
        sb = self._sticky_bottom()
        lane = self.layout_model.row_at(self.y_range[0] + hdr.h)
        if lane is None or lane.kind not in ("lane", "group") or self._to_dev(lane.y) >= sb:
            return None
        own = (self._to_dev(lane.y) + self._to_dev(lane.y + min(lane.h, 1.0))) / 2
        half = QFontMetrics(self.font_lane).height() / 2
        if own - half >= sb or self._to_dev(lane.y + lane.h) - sb < 2 * half:
            return None
        return lane, max(14.0, own + half + 1 - sb)

    def _sticky_bottom(self) -> float:
        from ..model.layout import HEADER_H

        return self.plot_top + HEADER_H / max(self.y_range[1] - self.y_range[0], 1e-9) * self.plot_height

    def wanted_width(self) -> int:
        """Pixels the longest label needs (headers bold), with the arrows and margins."""
        if self.layout_model is None:
            return 160
        fl, fh = QFontMetrics(self.font_lane), QFontMetrics(self.font_head)
        w = 0
        for row in self.layout_model.rows:
            fm = fh if row.kind == "header" else fl
            w = max(w, fm.horizontalAdvance("▾ " + row.label) + 16)
        return w

    def event(self, ev) -> bool:
        if ev.type() == QEvent.ToolTip:
            y = ev.pos().y()
            sticky = self.sticky_header()
            row = sticky if sticky is not None and y < self._sticky_bottom() else self.row_at(y)
            if row is not None:
                QToolTip.showText(ev.globalPos(), row.label, self)
            else:
                QToolTip.hideText()
            return True
        return super().event(ev)

    def row_at(self, Y: float):
        if self.layout_model is None:
            return None
        return self.layout_model.row_at(self._to_data(Y))

    def mousePressEvent(self, ev) -> None:
        sticky = self.sticky_header()
        y = ev.position().y()
        row = sticky if sticky is not None and y < self._sticky_bottom() else self.row_at(y)
        if row is None or ev.button() != Qt.LeftButton:
            return
        if row.kind == "header" and row.rank >= 0:
            self.layout_model.toggle_rank(row.rank)
            self.changed.emit()
        elif row.kind == "group":
            self.layout_model.toggle_group(row.group)
            self.changed.emit()
        elif row.kind == "lane" and (
            row.hidden_rows or self.layout_model.trace.lanes[row.lane].key in self.layout_model.state.expanded
        ):
            self.layout_model.toggle_expand(row.lane)
            self.changed.emit()

    def _menu(self, pos) -> None:
        row = self.row_at(pos.y())
        if row is None or self.layout_model is None:
            return
        m = QMenu(self)
        lm = self.layout_model
        if row.kind == "lane":
            key = lm.trace.lanes[row.lane].key
            m.addAction("Hide lane", lambda: (lm.hide(row.lane), self.changed.emit()))
            m.addAction(
                "Unpin" if key in lm.state.pinned else "Pin to top",
                lambda: (lm.toggle_pin(row.lane), self.changed.emit()),
            )
            m.addAction("Move up", lambda: (lm.move(row.lane, -1), self.changed.emit()))
            m.addAction("Move down", lambda: (lm.move(row.lane, +1), self.changed.emit()))
        elif row.rank >= 0:
            m.addAction("Collapse / expand", lambda: (lm.toggle_rank(row.rank), self.changed.emit()))
        if lm.state.hidden:
            m.addAction(f"Show {len(lm.state.hidden)} hidden lanes", lambda: (lm.show_all(), self.changed.emit()))
        m.exec(self.mapToGlobal(pos))


def _folded_said(row) -> str:
    """What a folded lane's rows hide: '+20 deeper rows (click)', or where rows above those shown
    are folded too, '8 rows above, 10 below (click)'."""
    deeper = row.hidden_rows - row.first
    if not row.first:
        return f"+{deeper} deeper row{'s' if deeper != 1 else ''} (click)"
    return f"{row.first} row{'s' if row.first != 1 else ''} above, {deeper} below (click)"
