"""The what-if replay (whatif.replay) computed a level at a time with numpy instead of a slot at a
time in Python. A slot's level is one more than the highest level among the slots its incoming
edges leave from (an end that follows its start: one more than the start's), so the slots of one
level depend only on lower levels and are computed together: the latest of their incoming edges
(numpy.maximum.reduceat), a start with none where it was recorded, an end at least its start plus
its duration. Levels are found once per model (Kahn's order, a level at a time) and kept; each
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


def _layers(g) -> np.ndarray:
    """Per slot, its level: the slots whose inputs are all placed form the next level (Kahn's
    order, a level at a time with numpy; a normal node's end shares its start's level)."""
    n2 = 2 * g.n
    entry = np.arange(n2)
    normal_end = 2 * np.flatnonzero(~g.split) + 1
    entry[normal_end] = normal_end - 1  # computed with its start
    split = np.flatnonzero(g.split)
    u = np.r_[entry[g.e_src], 2 * split]  # and a split node's end waits for its start
    v = np.r_[entry[g.e_dst], 2 * split + 1]
    indeg = np.bincount(v, minlength=n2)
    ou = np.argsort(u, kind="stable")
    v_by_u = v[ou]
    uptr = np.searchsorted(u[ou], np.arange(n2 + 1))
    lv = np.zeros(n2, np.int64)
    is_entry = np.ones(n2, bool)
    is_entry[normal_end] = False
    f = np.flatnonzero(is_entry & (indeg == 0))
    stamp = np.full(n2, -1, np.int64)
    L = 0
    while len(f):
        lo = uptr[f]
        cnt = uptr[f + 1] - lo
        tot = int(cnt.sum())
        if not tot:
            break
        idx = np.repeat(lo - (np.cumsum(cnt) - cnt), cnt) + np.arange(tot)
        t = v_by_u[idx]
        np.subtract.at(indeg, t, 1)  # no sort (np.unique's): a third less time at 64 ranks
        z = t[indeg[t] == 0]
        k = np.arange(len(z))
        stamp[z] = k  # each slot once, though several of this level's edges may reach it
        f = z[stamp[z] == k]
        L += 1
        lv[f] = L
    lv[normal_end] = lv[normal_end - 1]
    return lv


def levels(g, o: np.ndarray, ptr: np.ndarray) -> Levels:
    """The levels of the model's slots (o, ptr: its edges sorted by destination, whatif._incoming)."""
    lv_a = _layers(g)
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


def _rows(lv: Levels):
    """Per level, as plain ints (numpy scalars cost more than the small arrays they index): its
    entries a0:a1, edges e0:e1, entries with edges h0:h1 (of hpos/hseg), normal starts m0:m1 (of
    m0_at/m0_pos/m0_end), and whether it holds a split node's end; kept with the levels."""
    got = getattr(lv, "_rows", None)
    if got is None:
        b = lv.bounds
        lv_ent = np.repeat(np.arange(len(b) - 1), np.diff(b))
        h_at = np.flatnonzero(lv.has)
        m0_at = np.flatnonzero(lv.m0)
        hb = np.searchsorted(h_at, b).tolist()
        mb = np.searchsorted(m0_at, b).tolist()
        m2_cnt = np.r_[0, np.cumsum(lv.m2)][b]
        any2 = (np.diff(m2_cnt) > 0).tolist()
        bl, ebl = b.tolist(), lv.e_bounds.tolist()
        rows = [
            (bl[L], bl[L + 1], ebl[L], ebl[L + 1], hb[L], hb[L + 1], mb[L], mb[L + 1], any2[L])
            for L in range(len(bl) - 1)
        ]
        got = (rows, h_at - b[lv_ent[h_at]], lv.seg[h_at], m0_at, m0_at - b[lv_ent[m0_at]], lv.slot[m0_at] + 1)
        lv._rows = got  # type: ignore[attr-defined]
    return got


def run(g, lv: Levels, dur: np.ndarray, off: np.ndarray, T: np.ndarray, from_level: int = 0) -> np.ndarray:
    """Times of every slot with these durations and offsets; levels below from_level are T's."""
    T = T.copy()
    rows, hpos, hseg, m0_at, m0_pos, m0_end = _rows(lv)
    rec = g.rec_s[lv.node]
    d = dur[lv.node]
    d0 = d[m0_at]
    base = np.where(lv.anchored, rec, NEG)
    off_e = off[lv.e_at]
    slot, m2s, e_src = lv.slot, lv.m2, lv.e_src
    for a0, a1, e0, e1, h0, h1, n0, n1, any2 in rows[from_level:]:
        s = slot[a0:a1]
        val = base[a0:a1].copy()
        if any2:
            val = np.where(m2s[a0:a1], T[s - 1] + d[a0:a1], val)
        if e1 > e0:
            hp = hpos[h0:h1]
            red = np.maximum.reduceat(T[e_src[e0:e1]] + off_e[e0:e1], hseg[h0:h1])
            val[hp] = np.maximum(val[hp], red)
        T[s] = val
        if n1 > n0:  # a normal node's end follows from its start at once
            T[m0_end[n0:n1]] = val[m0_pos[n0:n1]] + d0[n0:n1]
    return T
