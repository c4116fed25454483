"""The what-if replay (whatif.replay) computed a level at a time with numpy instead of a slot at a
time in Python. A slot's level is one more than the highest level among the slots its incoming
edges leave from (an end that follows its start: one more than the start's), so the slots of one
level depend only on lower levels and are computed together: the latest of their incoming edges
(numpy.maximum.reduceat), a start with none where it was recorded, an end at least its start plus
its duration. Levels are found once per model (a pass like one replay) and kept with it; each
replay after that costs a few numpy operations per level (3,562 levels for 776k slots at 64
ranks) instead of a Python loop over every slot and edge. Same times as the loop, exactly."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

NEG = np.iinfo(np.int64).min // 4


@dataclass
class Levels:
    slot: np.ndarray  # entry slots (starts of every node, ends of split nodes), by level
    node: np.ndarray
    m2: np.ndarray  # bool: the end of a split node (its start plus its duration, then its edges)
    m0: np.ndarray  # bool: a normal node's start (its end follows at once from its duration)
    anchored: np.ndarray  # bool: a start with no incoming edge (stays where recorded)
    bounds: np.ndarray  # entries of level L: bounds[L]:bounds[L+1]
    e_src: np.ndarray  # incoming edges, grouped by entry in entry order
    e_at: np.ndarray  # each edge's index in the model's edge arrays (its offset)
    e_bounds: np.ndarray  # edges of level L: e_bounds[L]:e_bounds[L+1]
    seg: np.ndarray  # per level-local edge run: start of each entry's edges (relative to the level)
    has: np.ndarray  # per entry: whether it has incoming edges
    level_of_slot: np.ndarray  # per slot (a normal node's end: its start's level)


def levels(g, plan: list[tuple], src: list[int], o: np.ndarray, ptr: np.ndarray) -> Levels:
    """The levels of the model's slots (plan and src as whatif._plan keeps them)."""
    lv = [0] * (2 * g.n)
    for slot, a, b, _i, m in plan:  # once per model
        L = lv[slot - 1] + 1 if m == 2 else 0
        while a < b:
            x = lv[src[a]] + 1
            if x > L:
                L = x
            a += 1
        lv[slot] = L
        if m == 0:
            lv[slot + 1] = L
    lv_a = np.asarray(lv, np.int64)
    order = g.order
    by = np.argsort(lv_a[order], kind="stable")
    slot = order[by]
    node = slot >> 1
    m2 = (slot & 1).astype(bool)
    split = g.split[node]
    m0 = ~m2 & ~split
    cnt = (ptr[slot + 1] - ptr[slot]).astype(np.int64)
    has = cnt > 0
    anchored = ~m2 & ~has
    n_lv = int(lv_a[slot].max()) + 1 if len(slot) else 0
    bounds = np.searchsorted(lv_a[slot], np.arange(n_lv + 1))
    # the incoming edges of each entry, in entry order
    first = np.repeat(ptr[slot], cnt)
    within = np.arange(int(cnt.sum())) - np.repeat(np.cumsum(cnt) - cnt, cnt)
    e_pos = first + within  # positions in the edges sorted by destination
    e_at = o[e_pos]
    e_cum = np.r_[0, np.cumsum(cnt)]
    e_bounds = e_cum[bounds]
    # per entry with edges: where its run starts, relative to its level's first edge
    lv_ent = np.repeat(np.arange(n_lv), np.diff(bounds))
    seg = e_cum[:-1] - e_bounds[lv_ent]
    return Levels(slot, node, m2, m0, anchored, bounds, g.e_src[e_at], e_at, e_bounds, seg, has, lv_a)


def run(g, lv: Levels, dur: np.ndarray, off: np.ndarray, T: np.ndarray, from_level: int = 0) -> np.ndarray:
    """Times of every slot with these durations and offsets; levels below from_level are T's."""
    T = T.copy()
    rec = g.rec_s[lv.node]
    d = dur[lv.node]
    base = np.where(lv.anchored, rec, NEG)
    off_e = off[lv.e_at]
    b, eb = lv.bounds, lv.e_bounds
    for L in range(from_level, len(b) - 1):
        a0, a1 = b[L], b[L + 1]
        s = lv.slot[a0:a1]
        val = base[a0:a1].copy()
        m2 = lv.m2[a0:a1]
        if m2.any():
            val = np.where(m2, T[s - 1] + d[a0:a1], val)
        e0, e1 = eb[L], eb[L + 1]
        if e1 > e0:
            h = lv.has[a0:a1]
            red = np.maximum.reduceat(T[lv.e_src[e0:e1]] + off_e[e0:e1], lv.seg[a0:a1][h])
            val[h] = np.maximum(val[h], red)
        T[s] = val
        m0 = lv.m0[a0:a1]
        T[s[m0] + 1] = val[m0] + d[a0:a1][m0]
    return T
