"""The timeline: one pyqtgraph GraphicsObject that draws every visible row of every lane.

Per frame and visible (lane, depth) row: cull by binary search, take runs from the LOD pyramid
whose bucket is at most a pixel, snap to whole device pixels, then draw with one drawRects call
per colour from a numpy buffer. The cost is O(pixels x rows), not O(events): 10M events draw as
fast as 10k (bench/bench_render.py). x is ns since the session origin; y is layout row units.
"""
from __future__ import annotations

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QLineF, QPointF, QRectF, Qt
from PySide6.QtGui import QBrush, QColor, QFont, QFontMetrics, QPainter, QPen, QPolygonF

from ..model import queries as q
from ..model.categories import LaneKind
from ..model.layout import Layout
from ..model.trace import Trace
from .colors import BRUSHES, color_index, name_shades, text_color
from .rects import RectBuffer

HEADER_BRUSH = QBrush(QColor(236, 239, 244))
GROUP_BRUSH = QBrush(QColor(248, 250, 252))
STEP_PEN = QPen(QColor(90, 90, 90, 170), 1, Qt.DashLine)
SEL_PEN = QPen(QColor(0, 0, 0), 2)
MATCH_PEN = QPen(QColor(250, 204, 21), 2)
FLOW_PEN = QPen(QColor(30, 30, 30), 1.5)
WAIT_BRUSH = QBrush(QColor(255, 255, 255, 150))
SUMMARY_GPU = QBrush(QColor(59, 130, 246))  # a collapsed rank's compute streams
SUMMARY_COMM = QBrush(QColor(234, 88, 12))  # ...and its communication  # over a collective kernel: the part spent waiting
MAX_LABELS = 600
_LABEL_FLAGS = Qt.AlignVCenter | Qt.AlignLeft  # combined once: enum arithmetic is slow in Python


class TimelineItem(pg.GraphicsObject):
    def __init__(self, trace: Trace, layout: Layout, origin: int) -> None:
        super().__init__()
        self.trace = trace
        self.layout = layout
        self.origin = origin
        self.span = max(1, trace.end_ns - origin)
        # colours are looked up for the drawn runs only: a colour per event (48 MB at 6M events)
        # would cost the first paint 30 ms
        self.shades = name_shades(trace.names) if trace.names else np.zeros(1, np.int64)
        self.buf = RectBuffer()
        self.selected: int | None = None
        self.match_mask: np.ndarray | None = None  # bool per event
        self.flow_pairs: list[tuple[int, int]] = []
        self.highlight: tuple[int, int, set] | None = None  # a finding's range on its ranks
        self._steps_by_rank: dict[int, list] | None = None  # rank -> its steps (drawn every frame)
        self._gpu_busy: dict[int, dict] = {}  # rank -> {comm?: busy intervals} (summary rows)
        self.wait_idx = np.zeros(0, np.int64)  # collective kernels with a wait part, sorted
        self.wait_end = np.zeros(0, np.int64)  # ...and when their wait ended (the last arrival)
        self.cursor_ns: int | None = None  # a time picked elsewhere (memory panel)
        self.annotations: list = []  # model.annotations.Annotation
        self.font = QFont()
        self.font.setPixelSize(11)
        self.fm = QFontMetrics(self.font)
        self._elided: dict[tuple[int, int], str] = {}
        self._drawn: dict[tuple[int, int], tuple] = {}
        self.show_steps = True
        self.last_rect_count = 0
        self.setFlag(self.GraphicsItemFlag.ItemUsesExtendedStyleOption)

    # -- pyqtgraph protocol ------------------------------------------------------------------
    def boundingRect(self) -> QRectF:
        return QRectF(0, 0, float(self.span), float(max(self.layout.height, 1.0)))

    def dataBounds(self, ax, frac=1.0, orthoRange=None):
        return (0, float(self.span)) if ax == 0 else (0, float(self.layout.height))

    def _busy_of(self, rank: int) -> dict:
        """A rank's GPU busy time as disjoint intervals, compute and communication apart
        (computed once: a summary row draws these, merged to the pixel, every frame)."""
        got = self._gpu_busy.get(rank)
        if got is None:
            from ..analysis import intervals as iv
            c = self.trace.columns
            got = {}
            for comm, kinds in ((False, (LaneKind.GPU,)), (True, (LaneKind.COMM,))):
                sl = [self.trace.lane_slice(i) for i, ln in enumerate(self.trace.lanes)
                      if ln.rank == rank and ln.kind in kinds]
                if sl:
                    st = np.concatenate([np.asarray(c["start"][x]) for x in sl]).astype(np.int64)
                    en = st + np.concatenate([np.asarray(c["dur"][x]) for x in sl]).astype(np.int64)
                    got[comm] = iv.union(st, en)
            self._gpu_busy[rank] = got
        return got

    def _summaries(self, p, rows, t0, t1, ns_per_px, sx, ox, sy, oy, left, right) -> None:
        """Collapsed ranks' headers show their GPU work: compute streams in blue above,
        communication in orange below, in the lower part of the row (the name stays readable). Runs
        closer than a pixel merge; all ranks' runs go out in one batch per colour."""
        acc = {False: ([], [], []), True: ([], [], [])}  # comm? -> x, w, y
        for row in rows:
            for comm, (s, e) in self._busy_of(row.rank).items():
                Y = (row.y + row.h * (0.76 if comm else 0.52)) * sy + oy  # two bands: both visible
                lo = int(np.searchsorted(e, t0, side="left"))
                hi = int(np.searchsorted(s, t1, side="right"))
                s, e = s[lo:hi], e[lo:hi]
                if not len(s):
                    continue
                brk = np.flatnonzero(s[1:] - e[:-1] >= 2 * ns_per_px) + 1  # gaps under 2 px close
                s = s[np.concatenate(([0], brk))]
                e = e[np.concatenate((brk - 1, [len(e) - 1]))]
                X0 = np.maximum(np.floor((s - self.origin) * sx + ox), left - 2)
                X1 = np.minimum(np.maximum(np.ceil((e - self.origin) * sx + ox), X0 + 1), right + 2)
                xs, ws, ys = acc[comm]
                xs.append(X0)
                ws.append(X1 - X0)
                ys.append(np.full(len(X0), Y))
        H = rows[0].h * 0.22 * sy
        for comm, (xs, ws, ys) in acc.items():
            if xs:
                X = np.concatenate(xs)
                n = self.buf.fill(X, np.concatenate(ys), np.concatenate(ws), np.full(len(X), H))
                p.setBrush(SUMMARY_COMM if comm else SUMMARY_GPU)
                self.buf.draw(p, n)

    def set_comm_waits(self, per_kernel: dict) -> None:
        """Collective kernels are drawn with their wait for the last rank lighter than the
        transfer after it."""
        items = sorted((int(i), int(v["wait_end_ns"])) for i, v in per_kernel.items() if v["wait_ns"] > 0)
        self.wait_idx = np.array([a for a, _ in items], np.int64)
        self.wait_end = np.array([b for _, b in items], np.int64)
        self.update()

    def _waits(self, p, rows, t0, t1, sx, ox, sy, oy) -> None:
        c = self.trace.columns
        p.setBrush(WAIT_BRUSH)
        for row in rows:
            if row.kind != "lane" or self.trace.lanes[row.lane].kind != LaneKind.COMM:
                continue
            idx = q.events_in_range(self.trace, row.lane, t0, t1)
            pos = np.searchsorted(self.wait_idx, idx)
            hit = (pos < len(self.wait_idx)) & (self.wait_idx[np.minimum(pos, len(self.wait_idx) - 1)] == idx)
            if not hit.any():
                continue
            i, we = idx[hit], self.wait_end[pos[hit]]
            st = np.asarray(c["start"][i])
            en = np.minimum(we, st + np.asarray(c["dur"][i]))
            X0 = (st - self.origin) * sx + ox
            X1 = (en - self.origin) * sx + ox
            wide = X1 - X0 >= 1
            Y = (row.y + np.asarray(c["depth"][i][wide])) * sy + oy + 0.08 * sy
            n = self.buf.fill(X0[wide], Y, (X1 - X0)[wide], np.full(int(wide.sum()), 0.84 * sy))
            self.buf.draw(p, n)

    def relayout(self) -> None:
        self.prepareGeometryChange()
        self.update()

    # -- painting -------------------------------------------------------------------------
    def paint(self, p: QPainter, opt, widget=None) -> None:
        vb = self.getViewBox()
        if vb is None:
            return
        (x0, x1), (y0, y1) = vb.viewRange()
        tr = p.transform()
        sx, ox, sy, oy = tr.m11(), tr.dx(), tr.m22(), tr.dy()
        if sx <= 0:
            return
        p.save()
        p.resetTransform()
        p.setRenderHint(QPainter.Antialiasing, False)
        p.setPen(Qt.NoPen)
        left, right = x0 * sx + ox, x1 * sx + ox  # device x of the visible edges
        ns_per_px = 1.0 / sx
        t0, t1 = self.origin + int(x0) - 1, self.origin + int(x1) + 1
        rows = self.layout.visible_rows(y0, y1)
        xs, ys, ws, hs, cs, reps = [], [], [], [], [], []
        drawn = self._drawn = {}  # (lane, depth) -> the runs on screen, for hover
        summary_rows = []
        for row in rows:
            Y = row.y * sy + oy
            if row.kind == "header":
                p.fillRect(QRectF(left - 1, Y, right - left + 2, row.h * sy), HEADER_BRUSH)
                if row.rank in self.layout.state.collapsed_ranks:
                    summary_rows.append(row)
                continue
            if row.kind == "group":
                p.fillRect(QRectF(left - 1, Y, right - left + 2, row.h * sy), GROUP_BRUSH)
                continue
            for d in range(row.depths):
                yd = row.y + d
                if yd + 1 < y0 or yd > y1:
                    continue
                s, e, rep = q.lod_runs(self.trace, row.lane, d, t0, t1, ns_per_px)
                drawn[(row.lane, d)] = (s, e, rep)
                if not len(s):
                    continue
                X0 = np.floor((s - self.origin) * sx + ox)
                X1 = np.maximum(np.ceil((e - self.origin) * sx + ox), X0 + 1)
                X0 = np.maximum(X0, left - 2)
                X1 = np.minimum(X1, right + 2)
                xs.append(X0)
                ws.append(X1 - X0)
                ys.append(np.full(len(s), yd * sy + oy + 0.08 * sy))
                hs.append(np.full(len(s), 0.84 * sy))
                cs.append(color_index(np.asarray(self.trace.columns["cat"][rep]),
                                      self.shades[np.asarray(self.trace.columns["name"][rep])]))
                reps.append(rep)
        if summary_rows:
            self._summaries(p, summary_rows, t0, t1, ns_per_px, sx, ox, sy, oy, left, right)
        n_total = 0
        if xs:
            X, W, Y, H, C = (np.concatenate(a) for a in (xs, ws, ys, hs, cs))
            R = np.concatenate(reps)
            order = np.argsort(C, kind="stable")
            C_sorted = C[order]
            bounds = np.flatnonzero(np.diff(C_sorted)) + 1
            starts = np.concatenate(([0], bounds))
            ends = np.concatenate((bounds, [len(C_sorted)]))
            for a, b in zip(starts, ends):
                sel = order[a:b]
                n = self.buf.fill(X[sel], Y[sel], W[sel], H[sel])
                p.setBrush(BRUSHES[int(C_sorted[a])])
                self.buf.draw(p, n)
                n_total += n
            self._labels(p, X, W, Y, H, C, R)
        self.last_rect_count = n_total
        if len(self.wait_idx):
            self._waits(p, rows, t0, t1, sx, ox, sy, oy)
        if self.show_steps:
            self._steps(p, rows, sx, ox, sy, oy, y0, y1)
        if self.highlight is not None:
            self._highlight(p, rows, sx, ox, sy, oy)
        if self.match_mask is not None:
            self._matches(p, rows, t0, t1, sx, ox, sy, oy, y0, y1)
        if self.selected is not None:
            self._selection(p, sx, ox, sy, oy)
        if self.annotations:
            self._annotations(p, rows, sx, ox, sy, oy, left, right)
        if self.cursor_ns is not None:
            X = (self.cursor_ns - self.origin) * sx + ox
            p.setPen(QPen(QColor(37, 99, 235), 1.5))
            p.drawLine(QPointF(X, y0 * sy + oy), QPointF(X, y1 * sy + oy))
        if self.flow_pairs:
            self._flows(p, sx, ox, sy, oy)
        p.restore()

    def _labels(self, p, X, W, Y, H, C, R) -> None:
        wide = np.flatnonzero((W > 40) & (H >= 9))
        if not len(wide):
            return
        if len(wide) > MAX_LABELS:
            wide = wide[np.argsort(-W[wide])[:MAX_LABELS]]
        p.setFont(self.font)
        nid = np.asarray(self.trace.columns["name"][R[wide]]).tolist()  # one gather, not one per label
        xs = np.maximum(X[wide], 0.0) + 3
        ws = X[wide] + W[wide] - xs - 3
        cache = self._elided
        if len(cache) > 20000:
            cache.clear()
        names = self.trace.names
        for name_id, x, w, y, h, c in zip(nid, xs.tolist(), ws.tolist(), Y[wide].tolist(),
                                           H[wide].tolist(), C[wide].tolist()):
            if w < 20:
                continue
            # a pan keeps a slice's width (only those cut by the edges change): elide once
            key = (name_id, int(w))
            text = cache.get(key)
            if text is None:
                text = cache[key] = self.fm.elidedText(names[name_id], Qt.ElideRight, int(w))
            p.setPen(text_color(int(c)))
            p.drawText(QRectF(x, y, w, h), _LABEL_FLAGS, text)
        p.setPen(Qt.NoPen)

    def _steps(self, p, rows, sx, ox, sy, oy, y0, y1) -> None:
        by_rank: dict[int, list] = {}
        headers: dict[int, object] = {}
        for row in rows:
            if row.rank >= 0:
                lo, hi = by_rank.get(row.rank, (row.y, row.y + row.h))
                by_rank[row.rank] = (min(lo, row.y), max(hi, row.y + row.h))
                if row.kind == "header":
                    headers[row.rank] = row
        steps = self._steps_by_rank
        if steps is None:
            steps = self._steps_by_rank = {}
            for st in self.trace.steps:
                steps.setdefault(st.rank, []).append(st)
        collapsed = self.layout.state.collapsed_ranks
        labelled = False
        p.setFont(self.font)
        p.setPen(STEP_PEN)
        lines = []
        for rank, (ya, yb) in by_rank.items():
            Ya, Yb = max(ya, y0) * sy + oy, min(yb, y1) * sy + oy
            for st in steps.get(rank, []):
                X = (st.start - self.origin) * sx + ox
                lines.append(QLineF(X, Ya, X, Yb))
        p.drawLines(lines)  # one call for every rank's step lines
        p.setPen(QColor(60, 60, 60))
        for rank, hdr in headers.items():
            # summary rows (collapsed ranks) carry their GPU work: step names on the first only
            if rank in collapsed and labelled:
                continue
            labelled = labelled or rank in collapsed
            for st in steps.get(rank, []):
                X = (st.start - self.origin) * sx + ox
                Xe = (st.end - self.origin) * sx + ox
                label = f"step {st.step}"
                if Xe - X > self.fm.horizontalAdvance(label) + 6:
                    p.drawText(QRectF(X + 3, hdr.y * sy + oy, Xe - X - 3, hdr.h * sy),
                               Qt.AlignVCenter | Qt.AlignLeft, label)
        p.setPen(Qt.NoPen)

    def _highlight(self, p, rows, sx, ox, sy, oy) -> None:
        h0, h1, ranks = self.highlight
        X0 = (h0 - self.origin) * sx + ox
        X1 = max((h1 - self.origin) * sx + ox, X0 + 2)
        p.setPen(QPen(QColor(202, 138, 4), 1))
        p.setBrush(QBrush(QColor(250, 204, 21, 45)))
        for row in rows:
            if row.rank in ranks:
                p.drawRect(QRectF(X0, row.y * sy + oy, X1 - X0, row.h * sy))
        p.setPen(Qt.NoPen)

    def _ann_rows(self, rank: int, lane_key: str | None, rows) -> tuple[float, float] | None:
        """Device-independent y span (rows units) of an annotation's rank or lane."""
        ys = [(r.y, r.y + r.h) for r in self.layout.rows
              if r.rank == rank and (r.kind == "header" or r.kind == "lane" and (
                  lane_key is None or self.trace.lanes[r.lane].key == lane_key))]
        if lane_key is not None:
            ys = [(r.y, r.y + r.h) for r in self.layout.rows
                  if r.kind == "lane" and self.trace.lanes[r.lane].key == lane_key] or ys
        if not ys:
            return None
        return min(a for a, _ in ys), max(b for _, b in ys)

    def _annotations(self, p, rows, sx, ox, sy, oy, left, right) -> None:
        p.setFont(self.font)
        for a in self.annotations:
            col = QColor(a.color)
            span = self._ann_rows(a.rank, a.lane, rows)
            if span is None:
                continue
            Y0, Y1 = span[0] * sy + oy, span[1] * sy + oy
            X0 = (a.start_ns - self.origin) * sx + ox
            if a.kind == "region":
                X1 = (a.end_ns - self.origin) * sx + ox
                if X1 < left or X0 > right:
                    continue
                # clip to the view: Qt's raster engine crashes on rectangles ~1e15 px wide
                X0, X1 = max(X0, left - 20), min(X1, right + 20)
                fill = QColor(col)
                fill.setAlpha(40)
                p.setPen(QPen(col, 1.5))
                p.setBrush(QBrush(fill))
                p.drawRect(QRectF(X0, Y0, max(X1 - X0, 2), Y1 - Y0))
                label = (a.title + ": " if a.title else "") + a.text
                p.setPen(col.darker(150))
                p.drawText(QRectF(X0 + 4, Y0 + 2, max(X1 - X0 - 8, 160), 16), Qt.AlignLeft | Qt.AlignTop,
                           self.fm.elidedText(label, Qt.ElideRight, int(max(X1 - X0 - 8, 160))))
            elif a.kind == "note" and not (left - 200 <= X0 <= right + 20):
                continue  # off screen
            elif a.kind == "note":
                p.setPen(QPen(col, 2))
                p.drawLine(QPointF(X0, Y0), QPointF(X0, Y1))
                flag = QPolygonF([QPointF(X0, Y0), QPointF(X0 + 10, Y0 + 5), QPointF(X0, Y0 + 10)])
                p.setBrush(QBrush(col))
                p.drawPolygon(flag)
                w = min(self.fm.horizontalAdvance(a.text) + 10, 420)
                box = QRectF(X0 + 12, Y0, w, 16)
                p.setBrush(QBrush(QColor(255, 255, 255, 230)))
                p.drawRect(box)
                p.setPen(col.darker(150))
                p.drawText(box.adjusted(4, 0, -2, 0), Qt.AlignVCenter | Qt.AlignLeft,
                           self.fm.elidedText(a.text, Qt.ElideRight, int(w - 6)))
            elif a.kind == "arrow":
                end = self._ann_rows(a.end_rank if a.end_rank is not None else a.rank, a.end_lane, rows)
                if end is None:
                    continue
                X1 = (a.end_ns - self.origin) * sx + ox
                start = QPointF(X0, (Y0 + min(Y1, Y0 + sy)) / 2)
                tip = QPointF(X1, (end[0] * sy + oy + min(end[1], end[0] + 1) * sy + oy) / 2)
                p.setPen(QPen(col, 2))
                p.setBrush(QBrush(col))
                p.drawLine(start, tip)
                v = tip - start
                length = max((v.x() ** 2 + v.y() ** 2) ** 0.5, 1e-6)
                ux, uy = v.x() / length, v.y() / length
                p.drawPolygon(QPolygonF([tip, QPointF(tip.x() - 10 * ux + 5 * uy, tip.y() - 10 * uy - 5 * ux),
                                         QPointF(tip.x() - 10 * ux - 5 * uy, tip.y() - 10 * uy + 5 * ux)]))
                if a.text:
                    mid = (start + tip) / 2
                    p.setPen(col.darker(150))
                    p.drawText(QRectF(mid.x() + 4, mid.y() - 16, 400, 16), Qt.AlignLeft | Qt.AlignVCenter, a.text)
        p.setPen(Qt.NoPen)

    def _event_rect(self, i: int, sx, ox, sy, oy) -> QRectF | None:
        c = self.trace.columns
        lane = int(c["lane"][i])
        y = self.layout.lane_y(lane)
        if y is None:
            return None
        yd = y + int(c["depth"][i])
        X0 = (int(c["start"][i]) - self.origin) * sx + ox
        X1 = max((int(c["start"][i]) + int(c["dur"][i]) - self.origin) * sx + ox, X0 + 2)
        return QRectF(X0, yd * sy + oy + 0.04 * sy, X1 - X0, 0.92 * sy)

    def _selection(self, p, sx, ox, sy, oy) -> None:
        r = self._event_rect(self.selected, sx, ox, sy, oy)
        if r is not None:
            p.setBrush(Qt.NoBrush)
            p.setPen(SEL_PEN)
            p.drawRect(r)

    def _matches(self, p, rows, t0, t1, sx, ox, sy, oy, y0, y1) -> None:
        p.setBrush(Qt.NoBrush)
        p.setPen(MATCH_PEN)
        c = self.trace.columns
        for row in rows:
            if row.kind != "lane":
                continue
            idx = q.events_in_range(self.trace, row.lane, t0, t1)
            idx = idx[self.match_mask[idx]]
            if not len(idx):
                continue
            X0 = np.floor((c["start"][idx] - self.origin) * sx + ox)
            keep = np.unique(np.stack([X0, c["depth"][idx]]), axis=1, return_index=True)[1]
            for i in idx[keep][:2000].tolist():
                r = self._event_rect(i, sx, ox, sy, oy)
                if r is not None:
                    p.drawRect(r)

    def _flows(self, p, sx, ox, sy, oy) -> None:
        p.setPen(FLOW_PEN)
        p.setBrush(QBrush(QColor(30, 30, 30)))
        for a, b in self.flow_pairs:
            ra, rb = self._event_rect(a, sx, ox, sy, oy), self._event_rect(b, sx, ox, sy, oy)
            if ra is None or rb is None:
                continue
            start = QPointF(ra.left(), ra.center().y())
            end = QPointF(rb.left(), rb.top() if rb.top() > ra.center().y() else rb.bottom())
            p.drawLine(start, end)
            v = end - start
            length = max((v.x() ** 2 + v.y() ** 2) ** 0.5, 1e-6)
            ux, uy = v.x() / length, v.y() / length
            head = QPolygonF([end, QPointF(end.x() - 8 * ux + 4 * uy, end.y() - 8 * uy - 4 * ux),
                              QPointF(end.x() - 8 * ux - 4 * uy, end.y() - 8 * uy + 4 * ux)])
            p.drawPolygon(head)

    # -- picking ---------------------------------------------------------------------------
    def pick(self, x: float, y: float, tol_ns: float) -> int | None:
        """The event under data point (x, y): the one containing x on that row, else the
        nearest within tol_ns."""
        row = self.layout.row_at(y)
        if row is None or row.kind != "lane":
            return None
        d = int(y - row.y)
        t = self.origin + x
        idx = q.events_in_range(self.trace, row.lane, int(t - tol_ns), int(t + tol_ns))
        c = self.trace.columns
        idx = idx[c["depth"][idx] == d]
        if not len(idx):
            return None
        s = c["start"][idx].astype(np.float64)
        e = s + c["dur"][idx]
        inside = idx[(s <= t) & (e >= t)]
        if len(inside):
            return int(inside[np.argmin(c["dur"][inside])])
        dist = np.minimum(np.abs(s - t), np.abs(e - t))
        return int(idx[np.argmin(dist)])

    def hover_pick(self, x: float, y: float, tol_ns: float) -> tuple[int | None, bool]:
        """The event under (x, y) from the runs of the last frame (no range query): the run
        containing x, else the nearest within tol_ns. Returns (its representative event, whether
        the run merges several events at this zoom)."""
        row = self.layout.row_at(y)
        if row is None or row.kind != "lane":
            return None, False
        runs = self._drawn.get((row.lane, int(y - row.y)))
        if runs is None or not len(runs[0]):
            return None, False
        s, e, rep = runs
        t = self.origin + x
        k = int(np.searchsorted(s, t, side="right"))
        best, dist = None, tol_ns
        for j in (k - 1, k):
            if 0 <= j < len(s):
                dj = 0.0 if s[j] <= t <= e[j] else min(abs(float(s[j]) - t), abs(float(e[j]) - t))
                if dj <= dist:
                    best, dist = j, dj
                    if dj == 0.0:
                        break
        if best is None:
            return None, False
        i = int(rep[best])
        return i, int(e[best] - s[best]) != int(self.trace.columns["dur"][i])
