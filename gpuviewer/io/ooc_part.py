"""One part of an out-of-core build: the events a builder committed since the last part, as the
cache stores them. Made by the serial build (out_of_core.py) and by its worker processes
(ooc_pool.py) alike, so the two builds write the same bytes."""

from __future__ import annotations

import numpy as np

from ..model.build import TraceBuilder, link_flows
from ..model.trace import Trace


def make_part(b: TraceBuilder, lane_lo: int) -> dict:
    """The events committed to b since the last part (its lanes from lane_lo on), as the cache
    stores them: sorted and nested, flows linked, level-of-detail runs packed, the span."""
    from ..model.queries import lod_pack

    cols, inst = b.take_part(lane_lo)
    lane_counts = np.bincount(cols["lane"] - lane_lo, minlength=len(b.lanes) - lane_lo)
    src, dst = link_flows(cols, np.array([ln.rank for ln in b.lanes], np.int64))
    part = Trace(format=b.format, columns=cols, names=b.names.strings, lanes=b.lanes, ranks=[])
    lod = lod_pack(part, range(lane_lo, len(b.lanes)))
    # the part's span, as Trace._compute_span takes it (counters only where nothing else is)
    lo, hi = [], []
    if len(cols["start"]):
        lo.append(int(cols["start"].min()))
        hi.append(int((cols["start"] + cols["dur"]).max()))
    if len(inst["t"]):
        lo.append(int(inst["t"].min()))
        hi.append(int(inst["t"].max()))
    return {
        "cols": cols,
        "inst": inst,
        "lane_counts": lane_counts,
        "flow_src": src,
        "flow_dst": dst,
        "lod": lod,
        "span": (min(lo), max(hi)) if lo else None,
    }
