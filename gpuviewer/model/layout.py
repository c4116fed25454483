"""Vertical layout of the timeline: rank groups, lanes and their depth rows (no Qt).

y grows downward in row units: a depth row is 1.0 high, a rank header HEADER_H. The view state
(collapsed ranks, hidden, pinned and reordered lanes) is keyed by Lane.key, so it survives
reopening the trace (lane numbers may differ, keys do not).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .categories import LaneKind
from .trace import Trace

HEADER_H = 1.4
ROW_H = 1.0
GAP = 0.3  # between lanes
COLLAPSED_ROWS = 6  # deep lanes (Python stacks) show this many rows until expanded


@dataclass
class ViewState:
    collapsed_ranks: set[int] = field(default_factory=set)
    hidden: set[str] = field(default_factory=set)
    pinned: list[str] = field(default_factory=list)
    order: list[str] = field(default_factory=list)  # lane keys in user order (partial)
    expanded: set[str] = field(default_factory=set)  # deep lanes shown with every row
    groups: dict[str, bool] = field(default_factory=dict)  # "r{rank}/{kind}" -> collapsed

    def to_json(self) -> dict:
        return {
            "collapsed_ranks": sorted(self.collapsed_ranks),
            "hidden": sorted(self.hidden),
            "pinned": list(self.pinned),
            "order": list(self.order),
            "expanded": sorted(self.expanded),
            "groups": dict(self.groups),
        }

    @classmethod
    def from_json(cls, d: dict) -> ViewState:
        return cls(
            set(d.get("collapsed_ranks", [])),
            set(d.get("hidden", [])),
            list(d.get("pinned", [])),
            list(d.get("order", [])),
            set(d.get("expanded", [])),
            {str(k): bool(v) for k, v in (d.get("groups") or {}).items()},
        )


# Lanes of one kind inside a rank form a collapsible group when there are at least this many;
# OS-runtime threads (often dozens, mostly waiting) start collapsed.
GROUP_MIN = 3
GROUP_H = 1.1
KIND_TITLE = {
    LaneKind.GPU: "GPU streams",
    LaneKind.COMM: "Communication",
    LaneKind.GPU_ANNOTATION: "GPU annotations",
    LaneKind.NVTX: "NVTX",
    LaneKind.CUDA_API: "CUDA API",
    LaneKind.CPU: "CPU threads",
    LaneKind.OSRT: "OS runtime",
    LaneKind.OTHER: "Other",
}
COLLAPSED_BY_DEFAULT = {LaneKind.OSRT}
SUMMARY_ABOVE = 8  # with more ranks than this, each starts as one summary row
# With 2..SUMMARY_ABOVE ranks, each rank shows its GPU lanes and folds the lanes of its host
# (threads, CUDA API, NVTX, OS runtime) into one row, so every rank's GPU is on the first screen.
HOST_KINDS = {LaneKind.CUDA_API, LaneKind.CPU, LaneKind.OSRT, LaneKind.NVTX, LaneKind.OTHER}


@dataclass
class Row:
    kind: str  # "header" (rank), "group" (lanes of one kind) or "lane"
    y: float
    h: float
    rank: int
    lane: int = -1
    depths: int = 0  # rows of nesting shown for the lane
    label: str = ""
    hidden_rows: int = 0  # rows not shown until the lane is expanded (deeper ones, and `first`)
    group: str = ""  # group key of a "group" row
    first: int = 0  # the first depth row shown (a folded lane's frames around all of it skipped)


def lane_depths(trace: Trace) -> np.ndarray:
    """Number of depth rows of every lane."""
    out = np.ones(len(trace.lanes), np.int64)
    d = trace.columns["depth"]
    for i in range(len(trace.lanes)):
        sl = trace.lane_slice(i)
        if sl.stop > sl.start:
            out[i] = int(np.asarray(d[sl]).max()) + 1
    return out


OUTER_SHARE = 0.9  # a top row's one slice spanning this much of its lane's time is a frame around it all
DENSE_NEAR = 0.95  # rows as full as this share of the fullest choice are as good, the higher kept
REPEATS = 0.98  # a row covering this share of the time of the row above repeats it (one frame's bounds)


def _first_row(trace: Trace, ln: int, full: int) -> int:
    """Layout.first_row: past the lane's top rows that each hold one slice spanning OUTER_SHARE of
    its time or more (frames around all of it), the first of the COLLAPSED_ROWS rows in a run that
    covers the most time (within DENSE_NEAR of it, the highest): rows of a few short frames at each
    step's edge (the profiler's step call) are skipped for the ops under them; then past first
    rows that the row under them repeats (REPEATS)."""
    sl = trace.lane_slice(ln)
    if sl.stop <= sl.start or full <= COLLAPSED_ROWS:
        return 0
    c = trace.columns
    d = np.asarray(c["depth"][sl]).astype(np.int64)
    st = np.asarray(c["start"][sl]).astype(np.int64)
    dur = np.asarray(c["dur"][sl]).astype(np.int64)
    span = max(int((st + dur).max() - st.min()), 1)
    n = np.bincount(d, minlength=full)
    cover = np.bincount(d, weights=dur, minlength=full) / span  # a row's slices do not overlap
    outer = 0
    while outer < full - COLLAPSED_ROWS and n[outer] == 1 and cover[outer] >= OUTER_SHARE:
        outer += 1
    runs = np.convolve(cover, np.ones(COLLAPSED_ROWS), mode="valid")[outer:]  # run k: rows k..k+5
    if not len(runs):
        return outer
    k = int(np.flatnonzero(runs >= DENSE_NEAR * runs.max())[0])
    # a first row whose time the row under it covers (nearly) all of adds nothing the row under
    # it does not show: the run starts lower (single_gpt_train's thread showed ProfilerStep#N,
    # <lambda> and lm_step, one frame's bounds three times, above the forward / backward /
    # optimizer row; a review). Only through such rows: where the next row covers less, the
    # deeper rows are sparser, and sliding on reached near-empty ones (a first try)
    at = outer + k
    while at + 1 <= full - COLLAPSED_ROWS and cover[at + 1] >= REPEATS * cover[at]:
        at += 1
    return at


def rank_title(trace: Trace, rank: int) -> str:
    info = next((r for r in trace.ranks if r.rank == rank), None)
    if info is None:
        return f"Rank {rank}"
    gpus = []
    for dev in info.devices:
        name = (info.device_props.get(dev) or {}).get("name")
        gpus.append(f"GPU {dev}" + (f" {name}" if name else ""))
    host = f" · {info.host}" if info.host else ""
    return f"Rank {rank}" + (f" · {', '.join(gpus)}" if gpus else "") + host


def default_state(trace: Trace) -> ViewState:
    """How a session's lanes start out."""
    state = ViewState()
    if len(trace.ranks) > SUMMARY_ABOVE:
        # many ranks: one summary row each (their GPU work on the header), a click expands
        state.collapsed_ranks = {r.rank for r in trace.ranks}
    return state


class Layout:
    def __init__(self, trace: Trace, state: ViewState | None = None, depths: np.ndarray | None = None):
        self.trace = trace
        self.state = state if state is not None else default_state(trace)
        self.depths = depths if depths is not None else lane_depths(trace)
        self.rows: list[Row] = []
        self._header_rows: tuple | None = None  # (the rows they were found in, rank -> header row)
        self._first: dict[int, int] = {}  # first_row, by lane
        self.rebuild()

    def ordered_lanes(self, rank: int) -> list[int]:
        lanes = [i for i, ln in enumerate(self.trace.lanes) if ln.rank == rank]
        L = self.trace.lanes
        lanes.sort(key=lambda i: (LaneKind.ORDER.get(L[i].kind, 9), L[i].device, L[i].pid, L[i].stream))
        pos = {k: n for n, k in enumerate(self.state.order)}
        natural = {i: n for n, i in enumerate(lanes)}
        # user order first for lanes it names; the others keep their natural order after
        lanes.sort(key=lambda i: pos.get(self.trace.lanes[i].key, len(pos) + natural[i]))
        return lanes

    def rebuild(self) -> None:
        rows: list[Row] = []
        y = 0.0
        key_to_lane = {ln.key: i for i, ln in enumerate(self.trace.lanes)}
        pinned = [key_to_lane[k] for k in self.state.pinned if k in key_to_lane]
        if pinned:
            rows.append(Row("header", y, HEADER_H, -1, label="Pinned"))
            y += HEADER_H
            for ln in pinned:
                y = self._add_lane(rows, y, ln, self.lane_label(ln, with_rank=True))
        for info in self.trace.ranks:
            r = info.rank
            rows.append(Row("header", y, HEADER_H, r, label=rank_title(self.trace, r)))
            y += HEADER_H
            if r in self.state.collapsed_ranks:
                continue
            lanes = [
                ln
                for ln in self.ordered_lanes(r)
                if self.trace.lanes[ln].key not in self.state.hidden and ln not in pinned
            ]
            host = [ln for ln in lanes if self.trace.lanes[ln].kind in HOST_KINDS] if self.fold_hosts else []
            if host and len(host) < len(lanes):
                lanes = [ln for ln in lanes if ln not in host]
                y = self._lanes(rows, y, r, lanes)
                gkey = f"r{r}/host"
                kinds = []
                for ln in host:
                    t = KIND_TITLE.get(self.trace.lanes[ln].kind, "Other")
                    if t not in kinds:
                        kinds.append(t)
                rows.append(
                    Row("group", y, GROUP_H, r, label=f"Host · {', '.join(kinds)} · {len(host)} lanes", group=gkey)
                )
                y += GROUP_H
                if not self.group_collapsed(gkey):
                    y = self._lanes(rows, y, r, host)
                continue
            y = self._lanes(rows, y, r, lanes)
        self.rows = rows
        self.height = y
        self._ys = np.array([row.y for row in rows]) if rows else np.zeros(0)

    @property
    def fold_hosts(self) -> bool:
        return 1 < len(self.trace.ranks) <= SUMMARY_ABOVE

    def _lanes(self, rows: list, y: float, r: int, lanes: list[int]) -> float:
        """A rank's lanes, those of a kind with GROUP_MIN or more under a foldable group row."""
        by_kind: dict[str, int] = {}
        for ln in lanes:
            k = self.trace.lanes[ln].kind
            by_kind[k] = by_kind.get(k, 0) + 1
        current = None
        for ln in lanes:
            kind = self.trace.lanes[ln].kind
            if by_kind[kind] >= GROUP_MIN:
                gkey = f"r{r}/{kind}"
                if gkey != current:
                    current = gkey
                    rows.append(
                        Row(
                            "group",
                            y,
                            GROUP_H,
                            r,
                            label=f"{KIND_TITLE.get(kind, kind)} · {by_kind[kind]} lanes",
                            group=gkey,
                        )
                    )
                    y += GROUP_H
                if self.group_collapsed(gkey):
                    continue
            else:
                current = None
            y = self._add_lane(rows, y, ln, self.lane_label(ln))
        return y

    def _add_lane(self, rows: list, y: float, ln: int, label: str) -> float:
        full = int(self.depths[ln])
        first, shown = self.rows_shown(ln)
        h = shown * ROW_H
        rows.append(Row("lane", y, h, self.trace.lanes[ln].rank, ln, shown, label, full - shown, first=first))
        return y + h + GAP

    def first_row(self, ln: int) -> int:
        """The first depth row a folded lane shows (_first_row), kept per lane."""
        got = self._first.get(ln)
        if got is None:
            got = self._first[ln] = _first_row(self.trace, ln, int(self.depths[ln]))
        return got

    def rows_shown(self, lane: int) -> tuple[int, int]:
        """(the first depth row shown, how many): every row of an expanded lane; COLLAPSED_ROWS of a
        folded one, from first_row (a Python stack's <module>, main and training function drew four
        full-width bars over every step, the ops under them folded; an audit of the window)."""
        full = int(self.depths[lane])
        if full <= COLLAPSED_ROWS or self.trace.lanes[lane].key in self.state.expanded:
            return 0, full
        return min(self.first_row(lane), full - COLLAPSED_ROWS), COLLAPSED_ROWS

    def depth_shown(self, lane: int, depth: int) -> bool:
        """Whether the lane's row of that depth is among those its layout shows (as its lane
        group or rank may hide it: rows_shown's test only)."""
        first, shown = self.rows_shown(lane)
        return first <= depth < first + shown

    def depth_y(self, lane: int, depth: int) -> float | None:
        """Where a slice of that depth is drawn: its lane's y plus its row among those shown
        (None where the lane is not laid out)."""
        row = self.lane_row(lane)
        return None if row is None else row.y + depth - row.first

    def group_collapsed(self, gkey: str) -> bool:
        v = self.state.groups.get(gkey)
        if v is None:
            kind = gkey.split("/", 1)[1]
            return kind in COLLAPSED_BY_DEFAULT or kind == "host"
        return v

    def toggle_group(self, gkey: str) -> None:
        self.state.groups[gkey] = not self.group_collapsed(gkey)
        self.rebuild()

    def toggle_expand(self, lane: int) -> None:
        self.state.expanded.symmetric_difference_update({self.trace.lanes[lane].key})
        self.rebuild()

    def lane_label(self, ln: int, with_rank: bool = False) -> str:
        lane = self.trace.lanes[ln]
        prefix = {LaneKind.GPU: "GPU", LaneKind.COMM: "GPU", LaneKind.GPU_ANNOTATION: "GPU"}.get(lane.kind, "")
        dev = f"{prefix} {lane.device} · " if prefix and lane.device >= 0 else ""
        rk = f"r{lane.rank} · " if with_rank else ""
        return f"{rk}{dev}{lane.label}"

    def row_at(self, y: float) -> Row | None:
        if not len(self._ys):
            return None
        k = int(np.searchsorted(self._ys, y, side="right")) - 1
        if k < 0:
            return None
        row = self.rows[k]
        return row if y < row.y + row.h else None

    def lane_row(self, lane: int) -> Row | None:
        """The lane's row, None where it is not laid out (its rank or group folded, or hidden)."""
        return next((r for r in self.rows if r.kind == "lane" and r.lane == lane), None)

    def lane_y(self, lane: int) -> float | None:
        row = self.lane_row(lane)
        return None if row is None else row.y

    def visible_rows(self, y0: float, y1: float) -> list[Row]:
        if not len(self._ys):
            return []
        lo = max(0, int(np.searchsorted(self._ys, y0, side="right")) - 1)
        hi = int(np.searchsorted(self._ys, y1, side="right"))
        return [r for r in self.rows[lo:hi] if r.y + r.h >= y0]

    def sticky_header(self, y0: float, y1: float) -> Row | None:
        """The header of the rank whose lanes are at the top of a view of rows [y0, y1], when its
        own row is above the view (None when the top row is a header or the header is in view):
        the label column names the rank there, and the plot draws the header's band there too, so
        a lane under it is hidden in both (rank 0's NCCL bars showed beside its pinned header)."""
        # the first row below where the sticky header is drawn (the top may fall in the space
        # between two rows: still that rank's). Taken at the top itself, a sliver of rank 0's last
        # lane there put 'Rank 0' over rank 1's header and lanes just below it
        rows = self.visible_rows(y0 + HEADER_H, y1)
        top = rows[0] if rows else None
        if top is None or top.kind == "header" or top.rank < 0:
            return None
        hdr = self._headers().get(top.rank)
        return hdr if hdr is not None and hdr.y < y0 else None

    def _headers(self) -> dict[int, Row]:
        got = self._header_rows
        if got is None or got[0] is not self.rows:  # made again once per layout
            got = (self.rows, {r.rank: r for r in self.rows if r.kind == "header"})
            self._header_rows = got
        return got[1]

    # -- edits of the view state ---------------------------------------------------------
    def toggle_rank(self, rank: int) -> None:
        s = self.state.collapsed_ranks
        s.symmetric_difference_update({rank})
        self.rebuild()

    def hide(self, lane: int) -> None:
        self.state.hidden.add(self.trace.lanes[lane].key)
        self.rebuild()

    def show_all(self) -> None:
        self.state.hidden.clear()
        self.rebuild()

    def toggle_pin(self, lane: int) -> None:
        k = self.trace.lanes[lane].key
        if k in self.state.pinned:
            self.state.pinned.remove(k)
        else:
            self.state.pinned.append(k)
        self.rebuild()

    def move(self, lane: int, delta: int) -> None:
        """Move a lane up (-1) or down (+1) within its rank."""
        r = self.trace.lanes[lane].rank
        order = [self.trace.lanes[i].key for i in self.ordered_lanes(r)]
        k = self.trace.lanes[lane].key
        i = order.index(k)
        j = max(0, min(len(order) - 1, i + delta))
        order[i], order[j] = order[j], order[i]
        others = [x for x in self.state.order if x not in order]
        self.state.order = others + order
        self.rebuild()
