"""The slices layer: rank headers and lane-group bands, collapsed ranks' summary rows, every
visible (lane, depth) row's slices with their labels, and collective kernels' wait parts.

Per frame and visible row: cull by binary search, take runs from the LOD pyramid whose bucket is
at most a pixel, snap to whole device pixels, then draw with one drawRects call per colour from a
numpy buffer. The cost is O(pixels x rows), not O(events): 10M events draw as fast as 10k
(bench/bench_render.py). The runs drawn are kept for hover (hover_pick).
"""

from __future__ import annotations

import numpy as np
from PySide6.QtCore import QRectF, Qt
from PySide6.QtGui import QBrush, QColor

from ..model import queries as q
from ..model.categories import GPU_WORK, LaneKind
from . import theme
from .colors import BRUSHES, color_index, name_shades, text_color
from .layer import Frame, Layer
from .rects import RectBuffer

SUMMARY_GPU = QBrush(QColor(59, 130, 246))  # a collapsed rank's compute streams
SUMMARY_COMM = QBrush(QColor(234, 88, 12))  # ...and its communication
MAX_LABELS = 600
_WORK = np.array(sorted(GPU_WORK), np.uint8)  # a GPU's work: not its synchronizations or event records

# a merged run's busy share at or above each bound: drawn at the alpha beside it (solid from 75%)
_FADE_AT = np.array([0.2, 0.45, 0.75])
_ALPHA = (255, 150, 95, 50)  # solid, then fainter as the run is more idle
_FADES = len(_ALPHA)
_BRUSHES: dict[int, QBrush] = {}


def _brush(key: int) -> QBrush:
    """The brush of colour index key // _FADES at fade key % _FADES (0: solid)."""
    got = _BRUSHES.get(key)
    if got is None:
        c, k = divmod(key, _FADES)
        if k == 0:
            got = BRUSHES[c]
        else:
            col = QColor(BRUSHES[c].color())
            col.setAlpha(_ALPHA[k])
            got = QBrush(col)
        _BRUSHES[key] = got
    return got


_LABEL_FLAGS = Qt.AlignVCenter | Qt.AlignLeft  # combined once: enum arithmetic is slow in Python
_NO_PEN, _ELIDE = Qt.NoPen, Qt.ElideRight  # ...and so is reading an enum member


class SlicesItem(Layer):
    # replayed, not copied: Qt draws text into an image with other glyphs than onto a window
    # where subpixel antialiasing is on, so copied labels would change look after a selection
    keep = "calls"

    def __init__(self, host, z: float = 0.0) -> None:
        super().__init__(host, z)
        trace = host.trace
        # colours are looked up for the drawn runs only: a colour per event (48 MB at 6M events)
        # would cost the first paint 30 ms
        self.shades = name_shades(trace.names) if trace.names else np.zeros(1, np.int64)
        self.buf = RectBuffer()
        self._gpu_busy: dict[int, dict] = {}  # rank -> {comm?: busy intervals} (summary rows)
        self._busy_levels: dict[tuple[int, bool], list] = {}  # (rank, comm?) -> [(gap, starts, ends)]
        self.wait_idx = np.zeros(0, np.int64)  # collective kernels with a wait part, sorted
        self.wait_end = np.zeros(0, np.int64)  # ...and when their wait ended (the last arrival)
        self._elided: dict[tuple[int, int], str] = {}
        self._drawn: dict[tuple[int, int], tuple] = {}
        self.picked_run = (0, 0, 0)  # the last hover_pick's run: its start, end and busy time (ns)
        self.labelled: list[tuple[float, float, float, float]] = []
        self.chips: dict[int, list[tuple[float, float]]] = {}  # the step names its last names gave way to
        self.last_rect_count = 0

    def draw(self, p, f: Frame) -> None:
        trace, origin = self.host.trace, self.host.origin
        sx, ox, sy, oy, left, right = f.sx, f.ox, f.sy, f.oy, f.left, f.right
        xs, ys, ws, hs, cs, reps = [], [], [], [], [], []
        drawn = self._drawn = {}  # (lane, depth) -> the runs on screen, for hover
        self.labelled = []  # the frame's names: (x, y, width, height) in pixels (_labels)
        summary_rows = []
        collapsed = self.host.layout.state.collapsed_ranks
        # plain arrays: indexing a memory-mapped column runs numpy's memmap hooks in Python
        cat, name = np.asarray(trace.columns["cat"]), np.asarray(trace.columns["name"])
        for row in f.rows:
            Y = row.y * sy + oy
            if row.kind == "header":
                p.fillRect(QRectF(left - 1, Y, right - left + 2, row.h * sy), theme.current().row_header)
                if row.rank in collapsed:
                    summary_rows.append(row)
                continue
            if row.kind == "group":
                p.fillRect(QRectF(left - 1, Y, right - left + 2, row.h * sy), theme.current().row_group)
                continue
            for d in range(row.first, row.first + row.depths):
                yd = row.y + d - row.first
                if yd + 1 < f.y0 or yd > f.y1:
                    continue
                s, e, rep, busy = q.lod_runs_busy(trace, row.lane, d, f.t0, f.t1, f.ns_per_px)
                s, e, rep = np.asarray(s), np.asarray(e), np.asarray(rep)
                drawn[(row.lane, d)] = (s, e, rep, busy)
                if not len(s):
                    continue
                X0 = np.floor((s - origin) * sx + ox)
                X1 = np.maximum(np.ceil((e - origin) * sx + ox), X0 + 1)
                X0 = np.maximum(X0, left - 2)
                X1 = np.minimum(X1, right + 2)
                xs.append(X0)
                ws.append(X1 - X0)
                ys.append(np.full(len(s), yd * sy + oy + 0.08 * sy))
                hs.append(np.full(len(s), 0.84 * sy))
                # a run merged across sub-pixel gaps is drawn as faint as it is idle: a launch-bound
                # GPU's stream (23% busy) drew as one solid bar at the opening zoom (an audit)
                # (of at least a pixel: a 2 µs kernel every 16 µs drew as a solid 1-px tick at
                # 14 µs a pixel, the stream a dense band at one step's zoom)
                span = e - s
                b = np.asarray(busy, np.float64)
                cov = np.where(span > 0, b / np.maximum(span, f.ns_per_px), 1.0)
                # ...but one event alone (no gap inside it) stays at least half strength: a short
                # kernel on its own must not fade from sight
                cov = np.where(b >= span, np.maximum(cov, 0.45), cov)
                fade = np.searchsorted(_FADE_AT, cov, side="right")
                cs.append(color_index(cat[rep], self.shades[name[rep]]) * _FADES + (len(_FADE_AT) - fade))
                reps.append(rep)
        if summary_rows:
            self._summaries(p, summary_rows, f)
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
                p.setBrush(_brush(int(C_sorted[a])))
                self.buf.draw(p, n)
                n_total += n
            solid = C % _FADES == 0  # names on the solid runs only: a faint one is mostly gaps
            chips = self.chips = self.host.steps.chip_spans(f)
            self._labels(p, X[solid], W[solid], Y[solid], H[solid], C[solid] // _FADES, name[R[solid]], chips, f.sy)
        self.last_rect_count = n_total
        if len(self.wait_idx):
            self._waits(p, f)
        hdr = self.host.layout.sticky_header(f.y0, f.y1)
        if hdr is not None:
            # the rank's header pinned at the top, as the label column has it: the lane under it
            # hidden on both sides (its bars showed beside the header's name; an audit)
            p.fillRect(QRectF(left - 1, f.y0 * sy + oy, right - left + 2, hdr.h * sy), theme.current().row_header)

    # -- summary rows (collapsed ranks) -------------------------------------------------------
    def _busy_of(self, rank: int) -> dict:
        """A rank's GPU busy time as disjoint intervals, compute and communication apart
        (computed once: a summary row draws these, merged to the pixel, every frame)."""
        got = self._gpu_busy.get(rank)
        if got is None:
            # a session summary's rank without events: its row comes from the binned profile
            given = getattr(self.host.trace, "gpu_busy", None)
            got = given(rank) if given is not None else None
            if got is not None:
                self._gpu_busy[rank] = got
                return got
            from ..model import intervals as iv

            trace = self.host.trace
            c = trace.columns
            got = {}
            for comm, kinds in ((False, (LaneKind.GPU,)), (True, (LaneKind.COMM,))):
                sl = [trace.lane_slice(i) for i, ln in enumerate(trace.lanes) if ln.rank == rank and ln.kind in kinds]
                if sl:
                    st = np.concatenate([np.asarray(c["start"][x]) for x in sl]).astype(np.int64)
                    en = st + np.concatenate([np.asarray(c["dur"][x]) for x in sl]).astype(np.int64)
                    # a synchronization the GPU records is its host waiting, not work: nsys_ddp's
                    # 52 ms 'Event Sync' drew a collapsed rank as computing while its GPU idled
                    work = np.isin(np.concatenate([np.asarray(c["cat"][x]) for x in sl]), _WORK)
                    got[comm] = iv.union(st[work], en[work])
            self._gpu_busy[rank] = got
        return got

    def _busy_at(self, rank: int, comm: bool, s: np.ndarray, e: np.ndarray, gap: float):
        """The busy intervals with gaps under `gap` already closed as far as a kept level allows
        (busy_levels), so that a zoomed-out frame merges far fewer runs."""
        levels = self._busy_levels.get((rank, comm))
        if levels is None:
            levels = self._busy_levels[(rank, comm)] = busy_levels(s, e)
        return level_for(levels, gap)

    def _summaries(self, p, rows, f: Frame) -> None:
        """Collapsed ranks' headers show their GPU work: compute streams in blue above,
        communication in orange below, in the lower part of the row (the name stays readable). Runs
        closer than a pixel merge; all ranks' runs go out in one batch per colour."""
        origin, sx, ox, sy, oy = self.host.origin, f.sx, f.ox, f.sy, f.oy
        acc = {False: ([], [], []), True: ([], [], [])}  # comm? -> x, w, y
        for row in rows:
            for comm, (s, e) in self._busy_of(row.rank).items():
                s, e = self._busy_at(row.rank, comm, s, e, 2 * f.ns_per_px)
                Y = (row.y + row.h * (0.76 if comm else 0.52)) * sy + oy  # two bands: both visible
                lo = int(np.searchsorted(e, f.t0, side="left"))
                hi = int(np.searchsorted(s, f.t1, side="right"))
                s, e = s[lo:hi], e[lo:hi]
                if not len(s):
                    continue
                brk = np.flatnonzero(s[1:] - e[:-1] >= 2 * f.ns_per_px) + 1  # gaps under 2 px close
                s = s[np.concatenate(([0], brk))]
                e = e[np.concatenate((brk - 1, [len(e) - 1]))]
                X0 = np.maximum(np.floor((s - origin) * sx + ox), f.left - 2)
                X1 = np.minimum(np.maximum(np.ceil((e - origin) * sx + ox), X0 + 1), f.right + 2)
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

    # -- collective waits ---------------------------------------------------------------------
    def set_comm_waits(self, per_kernel: dict) -> None:
        """Collective kernels are drawn with their wait for the last rank lighter than the
        transfer after it."""
        items = sorted((int(i), int(v["wait_end_ns"])) for i, v in per_kernel.items() if v["wait_ns"] > 0)
        self.wait_idx = np.array([a for a, _ in items], np.int64)
        self.wait_end = np.array([b for _, b in items], np.int64)
        self.invalidate()

    def _waits(self, p, f: Frame) -> None:
        trace, origin, sx, ox, sy, oy = self.host.trace, self.host.origin, f.sx, f.ox, f.sy, f.oy
        c = trace.columns
        p.setBrush(QBrush(theme.current().wait))
        for row in f.rows:
            if row.kind != "lane" or trace.lanes[row.lane].kind != LaneKind.COMM:
                continue
            idx = q.events_in_range(trace, row.lane, f.t0, f.t1)
            pos = np.searchsorted(self.wait_idx, idx)
            hit = (pos < len(self.wait_idx)) & (self.wait_idx[np.minimum(pos, len(self.wait_idx) - 1)] == idx)
            if not hit.any():
                continue
            i, we = idx[hit], self.wait_end[pos[hit]]
            st = np.asarray(c["start"][i])
            en = np.minimum(we, st + np.asarray(c["dur"][i]))
            X0 = (st - origin) * sx + ox
            X1 = (en - origin) * sx + ox
            wide = X1 - X0 >= 1
            Y = (row.y - row.first + np.asarray(c["depth"][i][wide])) * sy + oy + 0.08 * sy
            n = self.buf.fill(X0[wide], Y, (X1 - X0)[wide], np.full(int(wide.sum()), 0.84 * sy))
            self.buf.draw(p, n)

    # -- labels -------------------------------------------------------------------------------
    def _labels(self, p, X, W, Y, H, C, N, chips=None, sy: float = 1.0) -> None:
        """Names inside the slices wide enough for one (N: the name id of each slice); on a row
        where the steps layer names GPU steps over the slices (chips: {row top px: [(x0, x1)]}),
        a name ends before a step's name and resumes after one it starts under."""
        drawn = self.labelled
        wide = np.flatnonzero((W > 40) & (H >= 9))
        if not len(wide):
            return
        if len(wide) > MAX_LABELS:
            wide = wide[np.argsort(-W[wide])[:MAX_LABELS]]
        p.setFont(self.host.font)
        names = self.host.trace.names
        nid = N[wide].tolist()  # one gather, not one per label
        xs = np.maximum(X[wide], 0.0) + 3
        ws = X[wide] + W[wide] - xs - 3
        cache = self._elided
        if len(cache) > 20000:
            cache.clear()
        fm = self.host.fm
        pen = None
        for name_id, x, w, y, h, c in zip(
            nid, xs.tolist(), ws.tolist(), Y[wide].tolist(), H[wide].tolist(), C[wide].tolist()
        ):
            spans = chips.get(round(y - 0.08 * sy)) if chips else None
            if spans:
                x, w = _around(x, w, spans)
            if w < 20:
                continue
            # a pan keeps a slice's width (only those cut by the edges change): elide once
            key = (name_id, int(w))
            text = cache.get(key)
            if text is None:
                text = cache[key] = fm.elidedText(names[name_id], _ELIDE, int(w))
            col = text_color(c)
            if col is not pen:  # neighbours mostly share a colour: one call, not one each
                p.setPen(col)
                pen = col
            p.drawText(QRectF(x, y, w, h), _LABEL_FLAGS, text)
            drawn.append((x, y, w, h))
        p.setPen(_NO_PEN)

    # -- picking ------------------------------------------------------------------------------
    def pick(self, x: float, y: float, tol_ns: float) -> int | None:
        """The event under data point (x, y): the one containing x on that row, else the
        nearest within tol_ns."""
        trace = self.host.trace
        row = self.host.layout.row_at(y)
        if row is None or row.kind != "lane":
            return None
        d = int(y - row.y) + row.first
        t = self.host.origin + x
        idx = q.events_in_range(trace, row.lane, int(t - tol_ns), int(t + tol_ns))
        c = trace.columns
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
        row = self.host.layout.row_at(y)
        if row is None or row.kind != "lane":
            return None, False
        runs = self._drawn.get((row.lane, int(y - row.y) + row.first))
        if runs is None or not len(runs[0]):
            return None, False
        s, e, rep, busy = runs
        t = self.host.origin + x
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
        self.picked_run = (int(s[best]), int(e[best]), int(np.asarray(busy)[best]))
        return i, int(e[best] - s[best]) != int(self.host.trace.columns["dur"][i])


def busy_levels(s: np.ndarray, e: np.ndarray) -> list[tuple[float, np.ndarray, np.ndarray]]:
    """Disjoint sorted intervals and coarser copies of them: level k has every gap under g_k
    closed (g = 4 µs, 16 µs, ... while that merges at least 30% of the runs). Closing gaps under
    g and then under T >= g gives what closing under T alone gives, so a frame that closes gaps
    under 2 px can start from the coarsest level with g <= 2 px (a rank of 1.5M events has ~120k
    busy intervals; zoomed out, a frame merged them all)."""
    levels = [(0.0, s, e)]
    g = 4_000.0
    while len(levels[-1][1]) > 256 and g <= 1e12:
        ps, pe = levels[-1][1], levels[-1][2]
        brk = np.flatnonzero(ps[1:] - pe[:-1] >= g) + 1
        if len(brk) + 1 <= 0.7 * len(ps):
            levels.append((g, ps[np.concatenate(([0], brk))], pe[np.concatenate((brk - 1, [len(pe) - 1]))]))
        g *= 4
    return levels


def level_for(levels: list, gap: float) -> tuple[np.ndarray, np.ndarray]:
    """The coarsest level whose closed gaps are all under `gap`."""
    best = levels[0]
    for lv in levels:
        if lv[0] <= gap:
            best = lv
    return best[1], best[2]


def _around(x: float, w: float, spans: list[tuple[float, float]]) -> tuple[float, float]:
    """A name's room [x, x + w] less the step names over it: it starts after one it begins
    under and ends before the next."""
    end = x + w
    for c0, c1 in sorted(spans):
        if c1 <= x or c0 >= end:
            continue
        if c0 <= x + 2:
            x = c1 + 2
        else:
            end = c0 - 2
            break
    return x, end - x
