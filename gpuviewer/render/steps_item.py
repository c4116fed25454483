"""The steps layer: a dashed line at each profiler step's start across its rank's rows, and the
step's name in the rank's header where it fits. Across a rank's GPU rows (its streams, NCCL and GPU
annotation lanes) the line is dotted and drawn where the step's GPU work begins, as the analysis
windows it (a GPU running behind its host ran step 6's wait after the host's 'step 7' line, while
the findings said step 6; an audit of the window): Nsight Systems projects NVTX ranges onto the GPU
rows the same way. Where the GPU rows have their own steps the header names the host's ('host step
4') and the GPU's are named on the rank's first GPU group row, else on its first stream in text
haloed by the background's colour: kineto ddp's rank 0 had an unnamed dotted line beside the
header's 'step 4'."""

from __future__ import annotations

import dataclasses

from PySide6.QtCore import QLineF, QRectF, Qt
from PySide6.QtGui import QColor, QPen

from ..model.categories import LaneKind
from . import theme
from .layer import Frame, Layer, state

_LABEL_FLAGS = Qt.AlignVCenter | Qt.AlignLeft  # combined once: enum arithmetic is slow in Python
_HALO = ((-1, 0), (1, 0), (0, -1), (0, 1))  # a step name's halo over slices: the text moved a pixel
_GPU_KINDS = (LaneKind.GPU, LaneKind.COMM, LaneKind.GPU_ANNOTATION)


def fit_name(a: int, b: int, step: int, words: tuple[str, ...], f: Frame, origin: int, fm):
    """A step's name where it fits between its window's ends on screen: (x, x_end, text, width)
    of the longest form that fits ('GPU step 5', 'step 5', '5'), None where none does. A step
    begun left of the view keeps its name at the view's left edge."""
    if b < f.t0 or a > f.t1:
        return None
    X = max((a - origin) * f.sx + f.ox, f.left)
    Xe = min((b - origin) * f.sx + f.ox, f.right)
    if Xe - X <= 12:
        return None
    for word in words:
        label = f"{word} {step}" if word else str(step)
        w = fm.horizontalAdvance(label)
        if Xe - X > w + 6:
            return X, Xe, label, w
    return None


class StepsItem(Layer):
    keep = "calls"  # translucent lines and antialiased text over the slices: replayed, never copied
    show_steps = state()

    def __init__(self, host, z: float = 1.0) -> None:
        super().__init__(host, z)
        self._steps_by_rank: dict[int, list] | None = None  # rank -> its steps (drawn every frame)
        self.show_steps = True
        # rank -> its steps' GPU windows (start, end, step; the analysis'), once it is known: lines at
        # their starts on the GPU rows, their names on the rank's first GPU group row
        self.gpu_windows: dict[int, list[tuple[int, int, int]]] = {}
        self.drawn: list[tuple[int, str, str, float]] = []  # the last draw's names: (rank, row kind, text, x)

    def set_gpu_windows(self, ranks: list[dict]) -> None:
        """The analysis' ranks (analyze --json's ranks[]): each step's GPU time (its window with
        the idle before it, while the host prepared the step, and after it), drawn across the
        rank's GPU rows in place of its host step's range: the idle a late rank's stall leaves
        before its step is that step's, as the findings and the Ranks heatmap count it."""
        self.gpu_windows = {
            int(r["rank"]): sorted(
                (
                    int(st["start_ns"]) - int(st.get("idle_before_ns") or 0),
                    int(st["end_ns"]) + int(st.get("idle_after_ns") or 0),
                    int(st["step"]),
                )
                for st in r.get("steps") or []
                if st.get("step") is not None
            )
            for r in ranks
        }
        self.host.update()

    def _gpu_row(self, row) -> bool:
        if row.kind == "lane" and row.lane >= 0:
            return self.host.trace.lanes[row.lane].kind in _GPU_KINDS
        return row.kind == "group" and row.group.rpartition("/")[2] in _GPU_KINDS

    def has_content(self) -> bool:
        return self._show_steps and bool(self.host.trace.steps)

    def _gpu_name_rows(self, f: Frame) -> tuple[dict[int, object], dict[int, object]]:
        """The rows a frame names GPU steps on: each rank's first GPU group row, and where a rank
        has none in view, its first GPU lane (the names drawn over its slices); a row under the
        pinned rank header left out. ({rank: group row}, {rank: lane row})."""
        gpu_known, collapsed = self.gpu_windows, self.host.layout.state.collapsed_ranks
        groups: dict[int, object] = {}
        lanes: dict[int, object] = {}
        for row in f.rows:
            if row.rank < 0 or row.rank not in gpu_known or not self._gpu_row(row):
                continue
            if row.kind == "group":
                groups.setdefault(row.rank, row)
            elif row.kind == "lane":
                lanes.setdefault(row.rank, row)
        pinned = self.host.layout.sticky_header(f.y0, f.y1)
        if pinned is not None:  # no GPU step name in the band, on a row under it
            for rows in (groups, lanes):
                if pinned.rank in rows and rows[pinned.rank].y < f.y0 + pinned.h:
                    del rows[pinned.rank]
        return groups, {r: ln for r, ln in lanes.items() if r not in groups and r not in collapsed}

    def chip_spans(self, f: Frame) -> dict[int, list[tuple[float, float]]]:
        """The GPU step names this frame draws over a stream's slices (_gpu_name_rows' lanes):
        {that row's top in pixels: [(x0, x1)]}, so the slices layer ends a kernel's name before
        them ('ncclDevKernel GPU step 2 Sum_bf16...'; a review)."""
        if not self.has_content() or not self.gpu_windows:
            return {}
        fm, origin = self.host.fm, self.host.origin
        out: dict[int, list[tuple[float, float]]] = {}
        for rank, row in self._gpu_name_rows(f)[1].items():
            spans = []
            for a, b, step in self.gpu_windows.get(rank, []):
                got = fit_name(a, b, step, ("GPU step", "step", ""), f, origin, fm)
                if got is not None:
                    spans.append((got[0] + 1, got[0] + got[3] + 5))
            if spans:
                out[round(row.y * f.sy + f.oy)] = spans
        return out

    def draw(self, p, f: Frame) -> None:
        origin, sx, ox, sy, oy = self.host.origin, f.sx, f.ox, f.sy, f.oy
        fm = self.host.fm
        # per rank, its runs of consecutive rows: (GPU rows or not, top, bottom)
        by_rank: dict[int, list[list]] = {}
        headers: dict[int, object] = {}
        gpu_known = self.gpu_windows
        collapsed = self.host.layout.state.collapsed_ranks
        for row in f.rows:
            if row.rank >= 0:
                # a collapsed rank's one row is its GPU work's summary: the GPU's steps
                summary = row.kind == "header" and row.rank in collapsed
                gpu = row.rank in gpu_known and (summary or self._gpu_row(row))
                runs = by_rank.setdefault(row.rank, [])
                if runs and runs[-1][0] == gpu and abs(runs[-1][2] - row.y) < 1e-6:
                    runs[-1][2] = row.y + row.h
                else:
                    runs.append([gpu, row.y, row.y + row.h])
                if row.kind == "header":
                    headers[row.rank] = row
        steps = self._steps_by_rank
        if steps is None:
            steps = self._steps_by_rank = {}
            for st in self.host.trace.steps:
                steps.setdefault(st.rank, []).append(st)
        p.setFont(self.host.font)
        th = theme.current()
        lines: list = []
        dots: list = []
        for rank, runs in by_rank.items():
            host_x = [(st.start - origin) * sx + ox for st in steps.get(rank, [])]
            gpu_x = [(a - origin) * sx + ox for a, _b, _s in gpu_known.get(rank, [])]
            for gpu, ya, yb in runs:
                if yb <= f.y0 or ya >= f.y1:
                    continue
                Ya, Yb = max(ya, f.y0) * sy + oy, min(yb, f.y1) * sy + oy
                (dots if gpu else lines).extend(QLineF(X, Ya, X, Yb) for X in (gpu_x if gpu else host_x))
        p.setPen(QPen(th.step, 1, Qt.DashLine))
        p.drawLines(lines)  # one call for every rank's host step lines
        if dots:
            p.setPen(QPen(th.step, 1, Qt.DotLine))
            p.drawLines(dots)
        p.setPen(th.step_label)

        self.drawn = []

        def name(row, windows, words: tuple[str, ...], boxed: bool = False) -> None:
            for a, b, step in windows:
                # (a step begun left of the view named at its edge, as the slices' names are: 'tep
                # 2' was cut by the edge; the longest form that fits: 1366 px lost 'GPU step 3', and
                # 'GPU 5' read as a device beside GPU 0's lanes, an audit: on a GPU row a bare 'step'
                # is the GPU's, the host's rows say 'host 5')
                got = fit_name(a, b, step, words, f, origin, fm)
                if got is None:
                    continue
                X, Xe, label, w = got
                Y, H = row.y * sy + oy, row.h * sy
                if boxed:
                    # over slices (a stream's kernels, a summary row's bars): text with a halo
                    # of the background's colour, the slices showing between its letters (an
                    # opaque tag hid 221 kernels at a step's start and read as the GPU idling;
                    # an audit); drawn as text, so an SVG of the view keeps it as text
                    H = min(H, fm.height() + 2)
                    # ...on a see-through backdrop of the background's colour: a kernel's own
                    # name under it ran into the step's ('void..GPU step 4'; an audit), while
                    # its kernels stay seen, faded
                    back = QColor(th.row_header if row.kind == "header" else th.background)
                    back.setAlpha(170)
                    p.fillRect(QRectF(X + 1, Y + 1, w + 4, H - 2), back)
                    p.setPen(th.background)
                    for dx, dy in _HALO:
                        p.drawText(QRectF(X + 3 + dx, Y + dy, Xe - X - 3, H), _LABEL_FLAGS, label)
                    p.setPen(th.step_label)
                p.drawText(QRectF(X + 3, Y, Xe - X - 3, H), _LABEL_FLAGS, label)
                self.drawn.append((row.rank, row.kind, label, X))

        pinned = self.host.layout.sticky_header(f.y0, f.y1)
        if pinned is not None:  # the band at the top (slices_item), its real row partly above or gone
            headers[pinned.rank] = dataclasses.replace(pinned, y=f.y0)
        for rank, hdr in headers.items():
            if rank in collapsed and rank in gpu_known:
                # a summary row carries its GPU work: its GPU steps, haloed over the bars
                name(hdr, gpu_known[rank], ("GPU step", "step", ""), boxed=True)
            elif rank in collapsed:
                name(hdr, [(st.start, st.end, st.step) for st in steps.get(rank, [])], ("step", ""), boxed=True)
            else:
                # 'host step' where the GPU rows name their own steps, shortened to 'host 5', never
                # to a bare 'step 5' beside 'GPU step 5' (an audit); then the bare number, as the
                # GPU row has it (nsys_ddp_big at 1366 named host steps 0 and 7 of 30; a review)
                words = ("host step", "host", "") if rank in gpu_known else ("step", "")
                name(hdr, [(st.start, st.end, st.step) for st in steps.get(rank, [])], words)
        # GPU steps named on the rank's first GPU group row, else over its first stream's slices
        # (the rows chip_spans tells the slices layer of)
        gpu_rows, gpu_lanes = self._gpu_name_rows(f)
        for rank, grp in gpu_rows.items():
            name(grp, gpu_known.get(rank, []), ("GPU step", "step", ""))
        for rank, ln in gpu_lanes.items():
            name(ln, gpu_known.get(rank, []), ("GPU step", "step", ""), boxed=True)
        p.setPen(Qt.NoPen)
