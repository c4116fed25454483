"""The no_copies what-if: memory copies and sets take no time, nor the memcpy/memset calls that
issued them (the most that keeping data on the GPU, or pinned asynchronous copies behind
compute, could save)."""

from __future__ import annotations

import re

import numpy as np

from . import depgraph as dg

_COPY_API = re.compile(r"memcpy|memset", re.IGNORECASE)  # the calls taken away with their ops


def no_copies(g: dg.DepGraph, dur: np.ndarray, off: np.ndarray, notes: list[str]) -> None:
    """Apply the change to the durations and edge offsets in place; a note says how many."""
    dst_node = g.e_dst // 2
    hit = g.kind == dg.COPY
    dur[hit] = 0
    # nor their calls: a pageable copy's call stages its data the whole copy long (saxpy's 262 MB
    # cudaMemcpy, 18-19 ms), which data kept on the GPU, or pinned and async, does not pay; with
    # the call's time after an op it waits for (an edge's offset, where tied to the op before)
    launch = g.e_kind == dg.E_LAUNCH
    calls = np.unique(g.e_src[launch & hit[dst_node]] // 2)
    # copy and memset calls that launched nothing else (a graph launch whose first node is a
    # memset is the graph's launch overhead, not a copy's: a review, negative_queue)
    other = np.unique(g.e_src[launch & ~hit[dst_node]] // 2)
    named = np.array([n >= 0 and bool(_COPY_API.search(g.names[int(n)])) for n in g.name[calls]], bool)
    calls = calls[((g.kind[calls] == dg.HOST) | (g.kind[calls] == dg.SYNC)) & named & ~np.isin(calls, other)]
    dur[calls] = 0
    tails = (g.e_kind == dg.E_SYNC) & np.isin(dst_node, calls)
    off[tails] = np.minimum(off[tails], 0)
    notes.append(f"{int(hit.sum()):,} memory copies and sets set to 0, and the {len(calls):,} calls that issued them")
