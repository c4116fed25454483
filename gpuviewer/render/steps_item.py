"""The steps layer: a dashed line at each profiler step's start across its rank's rows, and the
step's name in the rank's header where it fits."""

from __future__ import annotations

from PySide6.QtCore import QLineF, QRectF, Qt
from PySide6.QtGui import QPen

from . import theme
from .layer import Frame, Layer, state

_LABEL_FLAGS = Qt.AlignVCenter | Qt.AlignLeft  # combined once: enum arithmetic is slow in Python


class StepsItem(Layer):
    keep = "calls"  # translucent lines and antialiased text over the slices: replayed, never copied
    show_steps = state()

    def __init__(self, host, z: float = 1.0) -> None:
        super().__init__(host, z)
        self._steps_by_rank: dict[int, list] | None = None  # rank -> its steps (drawn every frame)
        self.show_steps = True

    def has_content(self) -> bool:
        return self._show_steps and bool(self.host.trace.steps)

    def draw(self, p, f: Frame) -> None:
        origin, sx, ox, sy, oy = self.host.origin, f.sx, f.ox, f.sy, f.oy
        fm = self.host.fm
        by_rank: dict[int, list] = {}
        headers: dict[int, object] = {}
        for row in f.rows:
            if row.rank >= 0:
                lo, hi = by_rank.get(row.rank, (row.y, row.y + row.h))
                by_rank[row.rank] = (min(lo, row.y), max(hi, row.y + row.h))
                if row.kind == "header":
                    headers[row.rank] = row
        steps = self._steps_by_rank
        if steps is None:
            steps = self._steps_by_rank = {}
            for st in self.host.trace.steps:
                steps.setdefault(st.rank, []).append(st)
        collapsed = self.host.layout.state.collapsed_ranks
        labelled = False
        p.setFont(self.host.font)
        th = theme.current()
        p.setPen(QPen(th.step, 1, Qt.DashLine))
        lines = []
        for rank, (ya, yb) in by_rank.items():
            Ya, Yb = max(ya, f.y0) * sy + oy, min(yb, f.y1) * sy + oy
            for st in steps.get(rank, []):
                X = (st.start - origin) * sx + ox
                lines.append(QLineF(X, Ya, X, Yb))
        p.drawLines(lines)  # one call for every rank's step lines
        p.setPen(th.step_label)
        for rank, hdr in headers.items():
            # summary rows (collapsed ranks) carry their GPU work: step names on the first only
            if rank in collapsed and labelled:
                continue
            labelled = labelled or rank in collapsed
            for st in steps.get(rank, []):
                # a step begun left of the view keeps its name at the view's left edge, as the
                # slices' names do ('tep 2' was cut by the edge, a step filling the view unnamed)
                X = max((st.start - origin) * sx + ox, f.left)
                Xe = min((st.end - origin) * sx + ox, f.right)
                label = f"step {st.step}"
                if Xe - X > fm.horizontalAdvance(label) + 6:
                    p.drawText(QRectF(X + 3, hdr.y * sy + oy, Xe - X - 3, hdr.h * sy), _LABEL_FLAGS, label)
        p.setPen(Qt.NoPen)
