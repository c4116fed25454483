"""A session summary (OUT.gvsum) as the timeline's Trace: every rank of the summary, one
summary row each drawn from its binned GPU profile, and the events of the ranks the user
expanded (no Qt, no files: gpuviewer/scale/summary.py reads the summary and the ranks' files).

Why a Trace, and why one that holds only the expanded ranks' events: everything the window
draws and navigates with (the layout, the slices and steps layers, step navigation, a finding's
range, details, search) reads one Trace. A SummaryTrace is a real Trace whose ranks are all the
summary's ranks, whose steps come from steps.parquet, whose span is the manifest's, and whose
events are those of the expanded ranks, merged on the summary's clock. Expanding another rank
makes a new SummaryTrace with one more rank's events (`with_rank`): the merge copies the
columns of two or more ranks into one sorted store, while a single expanded rank keeps its
columns as the cache memory-mapped them. The ranks that are not expanded stay summary rows:
their GPU busy intervals come from the profile (`gpu_busy`), and the existing summary-row
renderer (render/slices_item.py) draws them as it draws a collapsed rank of a whole session.

A profile bin says which share of it the GPU computed (and communicated), not when: a bin of
share s becomes one interval of s times the bin's width at the bin's start, so the busy time
drawn per bin is the measured one. Zoomed out (a bin about a pixel) this is what a collapsed
rank of a whole session shows; zoomed in, the bins show as bars of their share.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

import numpy as np

from .trace import EVENT_COLUMNS, Counter, Lane, RankInfo, Source, Step, Trace


def profile_busy(start_ns: np.ndarray, end_ns: np.ndarray, share: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Busy intervals (sorted, disjoint) from a binned profile: a bin of share s (0..1) is busy
    for s of its width from its start; empty bins drop out."""
    s = np.asarray(start_ns, np.int64)
    w = np.asarray(end_ns, np.int64) - s
    busy = np.rint(np.clip(np.nan_to_num(np.asarray(share, np.float64)), 0.0, 1.0) * w).astype(np.int64)
    keep = busy > 0
    return s[keep], s[keep] + busy[keep]


@dataclass
class SummaryRows:
    """What a summary says without any trace file (scale.summary.open_trace fills it)."""

    path: str
    format: str  # the traces' format ("kineto", "nsys"): their arguments are read that way
    ranks: list[RankInfo]
    steps: list[Step]
    busy: dict[int, dict[bool, tuple[np.ndarray, np.ndarray]]]  # rank -> {comm?: busy intervals}
    span: tuple[int, int]
    warnings: list[str] = field(default_factory=list)
    metadata: dict = field(default_factory=dict)


class SummaryTrace(Trace):
    """The summary's ranks as a Trace: events only of the ranks in `loaded` (rank -> the Trace
    read from its file, already numbered and moved onto the summary's clock)."""

    def __init__(self, summary: SummaryRows, loaded: dict[int, Trace] | None = None) -> None:
        self.summary = summary
        self.loaded = dict(sorted((loaded or {}).items()))
        m = combine([(t, r) for r, t in self.loaded.items()])
        ranks = []
        for info in summary.ranks:
            got = (
                next((x for x in self.loaded[info.rank].ranks if x.rank == info.rank), None)
                if info.rank in self.loaded
                else None
            )
            # the file's GPU names; the summary's host, clock offset and files
            ranks.append(
                dataclasses.replace(got, host=info.host, clock_offset_ns=info.clock_offset_ns, files=list(info.files))
                if got is not None
                else info
            )
        files = [f for t in self.loaded.values() for f in t.metadata.get("files", [])]
        super().__init__(
            format=summary.format,
            columns=m["columns"],
            names=m["names"],
            lanes=m["lanes"],
            ranks=ranks,
            counters=m["counters"],
            steps=list(summary.steps),
            flows=m["flows"],
            instants=m["instants"],
            sources=m["sources"],
            warnings=list(summary.warnings),
            metadata=dict(summary.metadata, loaded_files=files),
        )

    def with_rank(self, rank: int, trace: Trace) -> SummaryTrace:
        return SummaryTrace(self.summary, {**self.loaded, rank: trace})

    def gpu_busy(self, rank: int) -> dict | None:
        """A summary row's busy intervals from the profile; None for an expanded rank (its
        events say it exactly)."""
        return None if rank in self.loaded else self.summary.busy.get(rank, {})

    def rank_events(self, rank: int) -> int:
        """Slices plus instants of a rank's lanes (what `gpuviewer info` counts of it)."""
        lanes = self.lanes_of_rank(rank)
        n = sum(self.lane_slice(i).stop - self.lane_slice(i).start for i in lanes)
        return n + int(np.isin(self.instants["lane"], np.array(lanes, np.int32)).sum()) if lanes else 0

    def _compute_span(self) -> tuple[int, int]:
        lo, hi = super()._compute_span() if len(self) or len(self.instants["t"]) else self.summary.span
        a, b = self.summary.span
        if a or b:
            lo, hi = min(lo, a), max(hi, b)
        return lo, hi


def _empty() -> dict:
    e = np.zeros(0, np.int64)
    return {
        "columns": {k: np.zeros(0, d) for k, d in EVENT_COLUMNS.items()},
        "names": [],
        "lanes": [],
        "counters": [],
        "flows": (e, e),
        "sources": [],
        "instants": {"t": e, "lane": np.zeros(0, np.int32), "name": np.zeros(0, np.int32)},
    }


def combine(parts: list[tuple[Trace, int]]) -> dict:
    """One store of the lanes of `rank` of each (trace, rank): columns sorted by lane and start
    as a Trace keeps them, names and sources joined, flows and instants carried over. A single
    trace that holds only that rank is used as it is (its columns stay memory-mapped)."""
    if not parts:
        return _empty()
    if len(parts) == 1 and all(ln.rank == parts[0][1] for ln in parts[0][0].lanes):
        t, r = parts[0]
        return {
            "columns": dict(t.columns),
            "names": t.names,
            "lanes": [dataclasses.replace(ln) for ln in t.lanes],
            "counters": [c for c in t.counters if c.rank == r],
            "flows": t.flows,
            "sources": list(t.sources),
            "instants": dict(t.instants),
        }
    index: dict[str, int] = {}
    chunks: dict[str, list] = {k: [] for k in EVENT_COLUMNS}
    lanes: list[Lane] = []
    sources: list[Source] = []
    counters: list[Counter] = []
    inst: list[tuple] = []
    flows: list[tuple] = []
    n = 0
    for t, r in parts:
        name_map = np.array([index.setdefault(s, len(index)) for s in t.names], np.int32)
        src_off = len(sources)
        sources += t.sources
        lane_map = np.full(len(t.lanes), -1, np.int32)
        seg_a, seg_b, seg_o = [], [], []
        for i, ln in enumerate(t.lanes):
            if ln.rank != r:
                continue
            lane_map[i] = len(lanes)
            lanes.append(dataclasses.replace(ln, source=ln.source + src_off))
            sl = t.lane_slice(i)
            k = sl.stop - sl.start
            for col in EVENT_COLUMNS:
                v = np.asarray(t.columns[col][sl])
                if col == "lane":
                    v = np.full(k, lane_map[i], EVENT_COLUMNS[col])
                elif col == "name":
                    v = name_map[v] if k else v.astype(np.int32)
                chunks[col].append(v)
            seg_a.append(sl.start)
            seg_b.append(sl.stop)
            seg_o.append(n)
            n += k
        il = np.asarray(t.instants["lane"])
        if len(il):
            keep = lane_map[il] >= 0
            if keep.any():
                inst.append(
                    (
                        np.asarray(t.instants["t"])[keep],
                        lane_map[il[keep]],
                        name_map[np.asarray(t.instants["name"])[keep]],
                    )
                )
        src, dst = (np.asarray(x, np.int64) for x in t.flows)
        if len(src) and seg_a:
            a, b, o = (np.array(x, np.int64) for x in (seg_a, seg_b, seg_o))
            ns, ok_s = _moved(src, a, b, o)
            nd, ok_d = _moved(dst, a, b, o)
            ok = ok_s & ok_d
            flows.append((ns[ok], nd[ok]))
        counters += [c for c in t.counters if c.rank == r]
    cols = {
        k: (np.concatenate(v) if v else np.zeros(0, EVENT_COLUMNS[k])).astype(EVENT_COLUMNS[k], copy=False)
        for k, v in chunks.items()
    }
    if inst:
        it, il, iname = (np.concatenate(x) for x in zip(*inst))
        o = np.lexsort((it, il))
        instants = {"t": it[o].astype(np.int64), "lane": il[o].astype(np.int32), "name": iname[o].astype(np.int32)}
    else:
        instants = _empty()["instants"]
    e = np.zeros(0, np.int64)
    fl = (np.concatenate([f[0] for f in flows]), np.concatenate([f[1] for f in flows])) if flows else (e, e)
    return {
        "columns": cols,
        "names": list(index),
        "lanes": lanes,
        "counters": counters,
        "flows": fl,
        "sources": sources,
        "instants": instants,
    }


def _moved(idx: np.ndarray, a: np.ndarray, b: np.ndarray, o: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Event indices of a source trace -> their indices in the combined store (segments [a, b)
    of the source went to o...), and which of them were kept."""
    order = np.argsort(a)
    a, b, o = a[order], b[order], o[order]
    k = np.searchsorted(a, idx, side="right") - 1
    kc = np.maximum(k, 0)
    ok = (k >= 0) & (idx < b[kc])
    return idx - a[kc] + o[kc], ok
