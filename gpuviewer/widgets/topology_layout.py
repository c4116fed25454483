"""Where the topology diagram puts things: boxes for CPUs (NUMA nodes), NVLink islands of GPUs
and NICs, and labels placed only where they overlap nothing (a label that fits nowhere is left
to the line's tooltip). Plain geometry over (x, y, w, h) tuples; the view draws it.

Islands: a full NVLink mesh of three or more GPUs with one link type is an NVSwitch system (or
behaves as one): drawn as a switch bar with every GPU attached, not n² lines; GPUs sit in two
columns beside a vertical bar, which suits the tall side dock. Other islands: GPUs on a grid
(two GPUs side by side), their links drawn one by one.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

Rect = tuple[float, float, float, float]  # x, y, w, h

GAP = 36.0  # between boxes
MARGIN = 18.0  # inside an island's outline
TITLE_H = 24.0  # an island's title row
SWITCH_W = 34.0


def overlaps(a: Rect, b: Rect, pad: float = 2.0) -> bool:
    return (
        a[0] < b[0] + b[2] + pad and b[0] < a[0] + a[2] + pad and a[1] < b[1] + b[3] + pad and b[1] < a[1] + a[3] + pad
    )


@dataclass
class Island:
    gpus: list[str]
    switch: str | None = None  # the link type when drawn as a switch
    box: Rect = (0, 0, 0, 0)
    bar: Rect | None = None


@dataclass
class Layout:
    pos: dict[str, Rect] = field(default_factory=dict)  # device -> its box
    islands: list[Island] = field(default_factory=list)
    width: float = 0.0
    height: float = 0.0


def is_full_mesh(gpus: list[str], links: dict[frozenset, str]) -> str | None:
    """The one link type joining every pair of these GPUs, or None."""
    types = {links.get(frozenset((a, b))) for i, a in enumerate(gpus) for b in gpus[i + 1 :]}
    return next(iter(types)) if len(types) == 1 and None not in types else None


def layout(
    islands: list[list[str]],
    nv_links: dict[frozenset, str],
    gpu_size: tuple[float, float],
    cpus: list[tuple[str, float, float]],
    nics: list[tuple[str, float, float]],
    between_gap: float,
    vertical: bool = False,
) -> Layout:
    """cpus, nics: (name, w, h). between_gap: room between two islands (for their link label).
    vertical: islands one under another (a tall, narrow dock), else side by side."""
    W, H = gpu_size
    out = Layout()
    y0 = 0.0
    x = 0.0
    for name, w, h in cpus:
        out.pos[name] = (x, y0, w, h)
        x += w + GAP
    top = (max((h for _n, _w, h in cpus), default=0.0) + 2 * GAP) if cpus else 0.0
    x = 0.0
    for isl in islands:
        if vertical and out.islands:
            last = out.islands[-1].box
            x, top = 0.0, last[1] + last[3] + between_gap
        sw = is_full_mesh(isl, nv_links) if len(isl) >= 3 else None
        island = Island(isl, sw)
        ix, iy = x + MARGIN, top + TITLE_H + MARGIN
        if sw:
            left = math.ceil(len(isl) / 2)
            rows = left
            bar_x = ix + W + GAP
            for j, g in enumerate(isl):
                col, row = (0, j) if j < left else (1, j - left)
                gx = ix if col == 0 else bar_x + SWITCH_W + GAP
                out.pos[g] = (gx, iy + row * (H + GAP / 2), W, H)
            inner_w = 2 * W + 2 * GAP + SWITCH_W
            inner_h = rows * H + (rows - 1) * GAP / 2
            island.bar = (bar_x, iy, SWITCH_W, inner_h)
        else:
            cols = 2 if len(isl) <= 4 else math.ceil(math.sqrt(len(isl)))
            if vertical and len(isl) <= 4:
                cols = 1  # a tall, narrow dock: one column (two side by side drew 6 px text at 2560x1440)
            cols = min(cols, len(isl))
            rows = math.ceil(len(isl) / cols)
            for j, g in enumerate(isl):
                out.pos[g] = (ix + (j % cols) * (W + 2 * GAP), iy + (j // cols) * (H + 2 * GAP), W, H)
            inner_w = cols * W + (cols - 1) * 2 * GAP
            inner_h = rows * H + (rows - 1) * 2 * GAP
        island.box = (x, top, inner_w + 2 * MARGIN, inner_h + TITLE_H + 2 * MARGIN)
        out.islands.append(island)
        if not vertical:
            x += island.box[2] + between_gap
    bottom = max((i.box[1] + i.box[3] for i in out.islands), default=top)
    x = 0.0
    for name, w, h in nics:
        out.pos[name] = (x, bottom + 2 * GAP, w, h)
        x += w + GAP
    every = list(out.pos.values()) + [i.box for i in out.islands]
    out.width = max((r[0] + r[2] for r in every), default=0.0)
    out.height = max((r[1] + r[3] for r in every), default=0.0)
    return out


class LabelPlacer:
    """Greedy placement: a label goes to the first candidate spot that overlaps no box and no
    label placed before it."""

    def __init__(self, obstacles: list[Rect]) -> None:
        self.taken: list[Rect] = list(obstacles)

    def free(self, r: Rect) -> bool:
        return not any(overlaps(r, t) for t in self.taken)

    def take(self, r: Rect) -> None:
        self.taken.append(r)

    def on_line(
        self, a: tuple[float, float], b: tuple[float, float], w: float, h: float, within: Rect | None = None
    ) -> tuple[Rect, bool] | None:
        """A spot for a w x h label beside the segment a-b, near its middle first, and whether it
        lies over the line. within: a box the label must stay inside where it can (an NVLink
        island's: its link's label ran across the island's border, cut at the dock's edge), over
        the line if neither side has room there; elsewhere beside the line as before."""
        dx, dy = b[0] - a[0], b[1] - a[1]
        n = math.hypot(dx, dy) or 1.0
        px, py = -dy / n, dx / n  # the perpendicular
        ts = (0.5, 0.4, 0.6, 0.3, 0.7, 0.2, 0.8)

        def spots(sides):
            for t in ts:
                cx, cy = a[0] + dx * t, a[1] + dy * t
                for side in sides:
                    off = side * (abs(px) * w / 2 + abs(py) * h / 2 + 4)
                    yield (cx + px * off - w / 2, cy + py * off - h / 2, w, h), side == 0

        tries = [spots((1, -1))]
        if within is not None:
            x, y, bw, bh = within
            inside = (
                (r, over)
                for r, over in spots((1, -1, 0))
                if x <= r[0] and r[0] + r[2] <= x + bw and y <= r[1] and r[1] + r[3] <= y + bh
            )
            tries.insert(0, inside)
        for cand in tries:
            for r, over in cand:
                if self.free(r):
                    self.take(r)
                    return r, over
        return None
