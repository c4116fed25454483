"""What-if replay: re-time the dependency model (depgraph.py) with a change and report each step's
new time.

Each node keeps its own duration and each edge its offset (host work between calls, launch latency,
transfer time) unless the change alters them; the replay is a longest-path pass in an order that
respects every edge. A step's time runs from the end of the step before (its first step: from the
earliest host start of the step) to the last of its ranks' host step ends and GPU ops.

Changes (Change.kind):
- remove_gap (rank, step): the longest host gap in that rank's step (host time between two CUDA
  calls, or between a call and the step's boundary) shrinks to the rank's usual gap; step None:
  every step of the rank;
- rank_like_median (rank, part "host" | "gpu" | "both"): per step, the rank's host work (gaps and
  call durations) and/or its compute kernels scaled down to the median of the other ranks' totals;
- no_launch_overhead: launch calls take no time, the host work between two launches (under 1 ms:
  longer is other work, a data loader, kept) is gone and
  a GPU op starts as soon as its stream and inputs allow (what CUDA graphs do);
- comm_at_peak (peak_gbps): each collective whose size is recorded transfers at that bus bandwidth;
- faster (regex, pct): GPU ops whose name matches (a case-insensitive search) take pct % less time;
- no_copies: memory copies and sets take no time, nor their calls on the host (the data kept on
  the GPU, or copied from pinned memory asynchronously, hidden behind compute): the most that
  fixing a copy-bound step could save;
- shorten_host (rank, windows, cut_ns, label): a host op that took longer than usual (a stall's
  named cause) at its usual time: the rank's host work inside its windows (gaps and CUDA calls
  other than syncs) shrinks by cut_ns in all, in proportion;
- overlap_comm (regex or None: every collective): collectives overlapped with the compute before
  them on other streams: they no longer wait for it (their inputs taken as ready), the most that
  overlapping them could save; sends, collectives behind a kernel on their stream, without a launch or
  without a match on another rank are left as they were (overlap_comm.py says why).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import numpy as np

from ..model.trace import Trace
from . import depgraph as dg
from . import replay_levels
from .graph_calls import kept_calls, kept_names
from .host import EXPLICIT_SYNC
from .overlap_comm import overlap_comm
from .step_windows import step_ends
from .usual_op import resolve, shorten
from .whatif_change import DEFAULT_PEAK_BUSBW_GBPS, OTHER_WORK_NS, Change, parse_change
from .whatif_copies import no_copies

__all__ = ["DEFAULT_PEAK_BUSBW_GBPS", "Change", "StepTime", "WhatIfResult", "whatif", "parse_change"]


@dataclass
class StepTime:
    step: int
    before_ns: int
    after_ns: int

    @property
    def saves_ns(self) -> int:
        return self.before_ns - self.after_ns

    def to_json(self) -> dict:
        return {
            "step": self.step,
            "before_ms": round(self.before_ns / 1e6, 4),
            "after_ms": round(self.after_ns / 1e6, 4),
            "saves_ms": round(self.saves_ns / 1e6, 4),
        }


@dataclass
class WhatIfResult:
    change: Change
    steps: list[StepTime] = field(default_factory=list)
    assumptions: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # what the change touched, or why it could not

    @property
    def saves_ns(self) -> int:
        return sum(s.saves_ns for s in self.steps)

    def to_json(self) -> dict:
        return {
            "change": self.change.to_json(),
            "steps": [s.to_json() for s in self.steps],
            "saves_ms": round(self.saves_ns / 1e6, 4),
            "notes": list(self.notes),
            "assumptions": list(self.assumptions),
        }


def graph(trace: Trace, args: dict[int, dict] | None = None, rbs: list | None = None, colls=None) -> dg.DepGraph:
    """The session's dependency model, built once and kept with the trace (depgraph.build: rbs and
    colls may be handed in by an analysis that has them)."""
    g = trace.derived.get("depgraph")
    if g is None:
        g = dg.build(trace, args, rbs, colls)
        trace.derived["depgraph"] = g
    return g


class Replay:
    """Times of every slot (2i start, 2i+1 end of node i), relative to g.t0; `bind` (computed when
    first asked: the critical path needs it, a what-if does not) says per slot which incoming edge
    (index into the edges sorted by destination) set it: -1 anchored, -2 the node's own duration."""

    def __init__(self, g: dg.DepGraph, t: np.ndarray, dur: np.ndarray, off: np.ndarray) -> None:
        self.g, self.t, self._dur, self._off = g, t, dur, off
        self._bind: np.ndarray | None = None

    @property
    def bind(self) -> np.ndarray:
        if self._bind is None:
            self._bind = _binding(self.g, self.t, self._dur, self._off)
        return self._bind


def _incoming(g: dg.DepGraph) -> tuple[np.ndarray, np.ndarray]:
    if getattr(g, "_in", None) is None:
        o = np.argsort(g.e_dst, kind="stable")
        ptr = np.searchsorted(g.e_dst[o], np.arange(2 * g.n + 1))
        g._in = (o, ptr)
    return g._in


def _plan(g: dg.DepGraph) -> list[tuple]:
    """Per slot to compute, in order: (slot, first and end edge, node, mode: 0 a start whose end
    follows from its duration, 1 a start alone, 2 the end of a sync or collective). Kept with the
    graph: a replay is then one tight loop (3x faster than looking each of these up)."""
    if getattr(g, "_plan", None) is None:
        o, ptr = _incoming(g)
        order = g.order
        nodes = order >> 1
        mode = np.where(order & 1, 2, np.where(g.split[nodes], 1, 0))
        g._plan = list(zip(order.tolist(), ptr[order].tolist(), ptr[order + 1].tolist(), nodes.tolist(), mode.tolist()))
        g._src = g.e_src[o].tolist()
    return g._plan


def replay(
    g: dg.DepGraph,
    dur: np.ndarray | None = None,
    off: np.ndarray | None = None,
    base: Replay | None = None,
    first: int | None = None,
) -> Replay:
    """Longest-path pass over the model: each slot is the latest of its incoming edges (source
    slot + offset); a start with none stays where it was recorded; an end is at least its start
    plus the node's duration. With `base` (a replay of the same model), only what comes after
    the first slot the change touches is computed again: everything before it is base's (first:
    that slot's place in the order, when the caller knows it)."""
    dur = g.dur if dur is None else dur
    off = g.e_off if off is None else off
    touched = None
    if base is not None and first is None:
        touched = np.r_[
            g.e_dst[off != base._off], 2 * np.flatnonzero(dur != base._dur), 2 * np.flatnonzero(dur != base._dur) + 1
        ]
        if not len(touched):
            return Replay(g, base.t, dur, off)
    if len(g.marks) < LEVELS_MIN_RANKS:
        # few ranks: few slots a level (2 ranks: about 7), where the loop is faster
        if touched is not None:
            first = int(_position(g)[touched].min())
        return _replay_loop(g, dur, off, base, first or 0)
    lv = _levels(g)
    T = base.t if base is not None else np.zeros(2 * g.n, np.int64)
    if touched is not None:
        from_level = int(lv.level_of_slot[touched].min())
    elif first:
        from_level = int(lv.level_of_slot[g.order[first:]].min()) if first < len(g.order) else len(lv.bounds)
    else:
        from_level = 0
    return Replay(g, replay_levels.run(g, lv, dur, off, T, from_level), dur, off)


# a level at a time (replay_levels) from this many ranks: their slots run side by side, hundreds a
# level (64 ranks: 0.1 s a replay instead of 0.4 s; 2 ranks: slower than the loop)
LEVELS_MIN_RANKS = 8


def _levels(g: dg.DepGraph) -> replay_levels.Levels:
    """The model's slots by level (replay_levels), found once and kept with it."""
    if getattr(g, "_levels", None) is None:
        o, ptr = _incoming(g)
        g._levels = replay_levels.levels(g, o, ptr)
    return g._levels


def _replay_loop(g: dg.DepGraph, dur: np.ndarray, off: np.ndarray, base: Replay | None, first: int) -> Replay:
    """The replay a slot at a time, in the model's order (replay_levels computes the same a level
    at a time), from the place `first` on; before it, base's times."""
    plan = _plan(g)
    o, _ = _incoming(g)
    src = g._src
    off_l = off[o].tolist()
    dur_l = dur.tolist()
    rec = g.rec_s.tolist()
    T = base.t.tolist() if base is not None else [0] * (2 * g.n)
    for slot, a, b, i, m in plan[first:] if first else plan:
        if m == 2:
            t = T[slot - 1] + dur_l[i]
        elif a == b:
            t = rec[i]
        else:
            t = T[src[a]] + off_l[a]
            a += 1
        while a < b:
            x = T[src[a]] + off_l[a]
            if x > t:
                t = x
            a += 1
        T[slot] = t
        if m == 0:
            T[slot + 1] = t + dur_l[i]
    return Replay(g, np.fromiter(T, np.int64, len(T)), dur, off)


def _position(g: dg.DepGraph) -> np.ndarray:
    """Per slot, its place in the replay's order (a normal node's end: its start's)."""
    if getattr(g, "_pos", None) is None:
        pos = np.zeros(2 * g.n, np.int64)
        pos[g.order] = np.arange(len(g.order))
        normal = np.flatnonzero(~g.split)
        pos[2 * normal + 1] = pos[2 * normal]
        g._pos = pos
    return g._pos


def _binding(g: dg.DepGraph, T: np.ndarray, dur: np.ndarray, off: np.ndarray) -> np.ndarray:
    """Per slot, the edge that set it (the first one reaching its time, as the replay's loop
    keeps the first of equal candidates), -2 its own duration (which wins ties), -1 anchored."""
    o, _ = _incoming(g)
    src, dst = g.e_src[o], g.e_dst[o]
    hit = np.flatnonzero(T[src] + off[o] == T[dst])
    B = np.full(2 * g.n, -1, np.int64)
    B[dst[hit[::-1]]] = hit[::-1]  # the first hit of each slot written last
    ends = B[1::2]
    ends[T[1::2] == T[0::2] + dur] = -2
    return B


def recorded(g: dg.DepGraph) -> Replay:
    """The replay with no change (the recording, as the model reproduces it), kept with the model:
    every what-if and the critical paths start from it. The recorded times are checked against the
    replay's rule for every slot at once; the loop runs only from the first slot they break (the
    model is built so that the recording meets every binding constraint: most sessions need none)."""
    if getattr(g, "_recorded", None) is None:
        T = np.ravel(np.column_stack((g.rec_s, g.rec_e + (g.dur - (g.rec_e - g.rec_s)) * ~g.split)))
        bad = np.flatnonzero(_expected(g, T) != T)
        if not len(bad):
            g._recorded = Replay(g, T, g.dur, g.e_off)
        else:
            base = Replay(g, T, g.dur, g.e_off)
            g._recorded = replay(g, base=base, first=int(_position(g)[bad].min()))
    return g._recorded


def _expected(g: dg.DepGraph, T: np.ndarray) -> np.ndarray:
    """Per slot, what the replay's rule gives from the other slots' times T: a start, the latest of
    its incoming edges (none: where recorded); a sync's or collective's end, the latest of its edges
    and its start plus its duration; any other end, its start plus its duration."""
    o, ptr = _incoming(g)
    cand = T[g.e_src[o]] + g.e_off[o]
    has = ptr[1:] > ptr[:-1]
    mx = np.full(2 * g.n, np.iinfo(np.int64).min, np.int64)
    if len(cand):
        red = np.maximum.reduceat(cand, np.minimum(ptr[:-1], len(cand) - 1))
        mx[has] = red[has]
    out = np.empty(2 * g.n, np.int64)
    starts = T[0::2]
    out[0::2] = np.where(has[0::2], mx[0::2], g.rec_s)
    own_end = starts + g.dur
    out[1::2] = np.where(g.split & has[1::2], np.maximum(own_end, mx[1::2]), own_end)
    return out


def step_times(g: dg.DepGraph, rp: Replay, begin: int | None = None) -> dict[int, int]:
    steps, starts, ends, _ = step_ends(g, rp, begin)
    return {s: int(e - a) for s, a, e in zip(steps, starts, ends)}


def recorded_begin(g: dg.DepGraph) -> int:
    """When the first step began in the replay with no change."""
    return int(step_ends(g, recorded(g))[3])


def recorded_error(g: dg.DepGraph) -> float:
    """Largest relative difference between a step's time replayed with no change and recorded."""
    rp = recorded(g)
    rec = Replay(g, np.ravel(np.column_stack((g.rec_s, g.rec_e))), g.dur, g.e_off)
    a, b = step_times(g, rp), step_times(g, rec)
    return max((abs(a[s] - b[s]) / b[s] for s in b if b[s] > 0), default=0.0)


# -- changes --------------------------------------------------------------------------------


def apply(
    g: dg.DepGraph, ch: Change, args: dict[int, dict] | None = None, trace: Trace | None = None
) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """(durations, edge offsets, notes) with the change applied (args: the NCCL kernels' recorded
    collective arguments, io.comm_args.collective_args, which overlap_comm reads; trace: the
    session's events, for notes that name what filled a removed gap)."""
    dur, off = g.dur.copy(), g.e_off.copy()
    notes: list[str] = []
    dst_node = g.e_dst // 2
    host_edge = g.e_kind == dg.E_HOST
    if ch.kind == "remove_gap":
        if ch.rank not in g.marks:
            raise ValueError(f"rank {ch.rank} is not in this session (ranks {sorted(g.marks)})")
        steps = [ch.step] if ch.step is not None else sorted(g.marks[ch.rank])
        if ch.step is not None and ch.step not in g.marks[ch.rank]:
            raise ValueError(f"rank {ch.rank} has no step {ch.step} (steps {sorted(g.marks[ch.rank])})")
        mine = host_edge & (g.rank[dst_node] == ch.rank)
        pos_gaps = off[mine & (off > 0)]
        usual = int(np.median(pos_gaps)) if len(pos_gaps) else 0
        for s in steps:
            cand = np.flatnonzero(mine & (g.step[dst_node] == s))
            if not len(cand):
                notes.append(f"rank {ch.rank} step {s}: no host gap on record")
                continue
            j = cand[np.argmax(off[cand])]
            gap = int(off[j])
            cut = max(0, gap - usual)
            off[j] -= cut
            what = g.names[g.name[dst_node[j]]] if g.name[dst_node[j]] >= 0 else "the step's end"
            # under a millisecond it is the host's work between launches (Python, the optimizer),
            # not a stall: said, as the step's time shrinks by it all the same (stall_off: 0.2-0.4 ms)
            small = (
                f"; under {OTHER_WORK_NS / 1e6:g} ms: the host's own work between launches more than a stall"
                if 0 < gap < OTHER_WORK_NS
                else ""
            )
            notes.append(
                f"rank {ch.rank} step {s}: {cut / 1e6:.3f} ms of host time before {what} removed "
                f"(kept {usual / 1e6:.3f} ms, the rank's usual gap){_filled_by(g, trace, j)}{small}"
            )
    elif ch.kind == "rank_like_median":
        if ch.rank not in g.marks:
            raise ValueError(f"rank {ch.rank} is not in this session (ranks {sorted(g.marks)})")
        if len(g.marks) < 2:
            raise ValueError(f"rank {ch.rank} is the session's only rank: there is no other rank to be as fast as")
        ranks = sorted(g.marks)
        steps = g.steps()
        rpos = {r: k for k, r in enumerate(ranks)}

        def per_rank_step(node, weight):
            """weight summed per (rank, step) of `node` (a matrix ranks x steps)."""
            k = np.searchsorted(steps, g.step[node])
            ok = (g.step[node] >= 0) & (k < len(steps))
            ok[ok] &= np.asarray(steps)[k[ok]] == g.step[node][ok]
            ri = np.array([rpos.get(int(r), 0) for r in range(int(g.rank.max()) + 1)])[g.rank[node[ok]]]
            m = np.bincount(ri * len(steps) + k[ok], weights=weight[ok], minlength=len(ranks) * len(steps)).reshape(
                len(ranks), len(steps)
            )
            return m, ok, k

        def scale(tot, what):
            """Per step, the factor that brings the rank's total down to the median of the others'."""
            others = np.delete(tot, rpos[ch.rank], axis=0)
            med = np.median(others, axis=0) if len(others) else tot[rpos[ch.rank]]
            mine = tot[rpos[ch.rank]]
            f = np.where((mine > med) & (med > 0), med / np.maximum(mine, 1), 1.0)
            for s, x, a_, b_ in zip(steps, f.tolist(), mine.tolist(), med.tolist()):
                if x < 1:
                    notes.append(f"step {s}: rank {ch.rank}'s {what} x{x:.2f} ({a_ / 1e6:.2f} -> {b_ / 1e6:.2f} ms)")
                    if what == "host work":
                        ch.host_scaled.append((int(s), float(a_), float(b_)))
            return f

        ch.host_scaled.clear()  # this replay's, not an earlier one's

        if ch.part in ("host", "both") and steps:
            he = np.flatnonzero(host_edge)
            hn = np.flatnonzero(g.kind == dg.HOST)
            t_e, ok_e, k_e = per_rank_step(dst_node[he], np.maximum(off[he], 0).astype(float))
            t_n, ok_n, k_n = per_rank_step(hn, dur[hn].astype(float))
            f = scale(t_e + t_n, "host work")
            sel = ok_e & (g.rank[dst_node[he]] == ch.rank) & (off[he] > 0)
            off[he[sel]] = (off[he[sel]] * f[k_e[sel]]).astype(np.int64)
            sel = ok_n & (g.rank[hn] == ch.rank)
            dur[hn[sel]] = (dur[hn[sel]] * f[k_n[sel]]).astype(np.int64)
        if ch.part in ("gpu", "both") and steps:
            kn = np.flatnonzero(g.kind == dg.KERNEL)
            t_k, ok_k, k_k = per_rank_step(kn, dur[kn].astype(float))
            f = scale(t_k, "compute kernels")
            sel = ok_k & (g.rank[kn] == ch.rank)
            dur[kn[sel]] = (dur[kn[sel]] * f[k_k[sel]]).astype(np.int64)
        if not notes:
            notes.append(f"rank {ch.rank} is not slower than the median rank in any step")
    elif ch.kind == "no_launch_overhead":
        launches = g.kind == dg.HOST
        kept = launches & kept_calls(g)
        launches &= ~kept
        dur[launches] = 0
        # host work between two launches (not after a sync, not at a step's boundary) is gone,
        # where it is the launch path's: a gap of a millisecond or more is the host doing other
        # work (the data loader's next batch, a sleep), which a captured graph still waits for
        src_node = g.e_src // 2
        between = host_edge & launches[src_node] & launches[dst_node] & (g.e_off < min(ch.gap_ns, OTHER_WORK_NS))
        off[between] = 0
        # a GPU op starts no sooner after its launch than the quickest launch seen on its rank
        le = g.e_kind == dg.E_LAUNCH
        floor = np.array([g.launch_floor.get(int(r), 0) for r in range(int(g.rank.max()) + 1)] if g.n else [0])
        off[le] = np.maximum(0, floor[g.rank[dst_node[le]]])
        # ops follow each other on a stream at the spacing the rank's streams show when ops were
        # queued back to back (the median of those recorded gaps)
        # (per rank at once: a mask per rank over every edge took 0.2 s at 64 ranks)
        st = g.e_kind == dg.E_STREAM
        b2b = st & (off > 0) & (off <= dg.STREAM_TOL_NS)
        rk = g.rank[dst_node]
        gap_of = np.zeros(int(g.rank.max()) + 1 if g.n else 1, np.int64)
        if b2b.any():
            o = np.lexsort((off[b2b], rk[b2b]))
            r_s, o_s = rk[b2b][o], off[b2b][o]
            ur, first, cnt = np.unique(r_s, return_index=True, return_counts=True)
            # the median of each rank's gaps, as np.median gives it (the mean of the two middle ones)
            gap_of[ur] = ((o_s[first + (cnt - 1) // 2] + o_s[first + cnt // 2]) / 2).astype(np.int64)
        off[st] = gap_of[rk[st]]
        notes.append(
            f"{int(launches.sum()):,} CUDA calls and {int(between.sum()):,} host gaps between launches set to 0"
            + (
                f"; {int(kept.sum()):,} calls a graph does not remove kept ({kept_names(g, kept, g.dur)})"
                if kept.any()
                else ""
            )
        )
    elif ch.kind == "comm_at_peak":
        if not (ch.peak_gbps > 0):
            raise ValueError("the peak bus bandwidth must be above 0 GB/s")
        m = g.e_kind == dg.E_COLL
        known = m & (g.coll_bytes > 0)
        off[known] = np.minimum(off[known], (g.coll_bytes[known] / ch.peak_gbps).astype(np.int64))
        if m.any() and not known.any():
            notes.append("no collective's size is on record: nothing changed")
        elif not m.any():
            notes.append("no collective matched across ranks: nothing changed")
    elif ch.kind == "faster":
        try:
            rx = re.compile(ch.regex or "", re.IGNORECASE)
        except re.error as e:
            raise ValueError(f"/{ch.regex}/ is not a regular expression: {e}") from None
        if not 0 <= ch.pct <= 100:
            raise ValueError("the percentage must be between 0 and 100")
        if ch.events is not None:
            chosen = np.isin(g.ev, np.asarray(ch.events, np.int64))
        else:
            chosen = np.isin(g.name, np.array([i for i, nm in enumerate(g.names) if rx.search(nm)], np.int64))
        hit = (g.kind >= dg.KERNEL) & (g.kind <= dg.COPY) & chosen
        f = 1 - ch.pct / 100
        fixed = np.minimum(dur[hit], max(int(ch.fixed_ns), 0))
        dur[hit] = fixed + ((dur[hit] - fixed) * f).astype(np.int64)
        ce = (g.e_kind == dg.E_COLL) & hit[dst_node]
        fixed = np.minimum(off[ce], max(int(ch.fixed_ns), 0))
        off[ce] = fixed + ((off[ce] - fixed) * f).astype(np.int64)
        notes.append(f"{int(hit.sum()):,} GPU ops match")
    elif ch.kind == "shorten_host":
        shorten(g, ch, dur, off, notes)
    elif ch.kind == "no_copies":
        no_copies(g, dur, off, notes)
    elif ch.kind == "no_syncs":
        # the explicit syncs' waits (not a blocking cudaMemcpy's: the host needs the data it
        # copies) stop holding the call: it returns after its own time
        if ch.rank is not None and ch.rank not in g.marks:
            raise ValueError(f"rank {ch.rank} is not in this session (ranks {sorted(g.marks)})")
        hit = (g.e_kind == dg.E_SYNC) & _waits_for_work(g)[dst_node]
        if ch.rank is not None:
            hit &= g.rank[dst_node] == ch.rank
        off[hit] = NEVER
        notes.append(f"{len(np.unique(dst_node[hit])):,} synchronize calls no longer wait for the GPU")
    elif ch.kind == "overlap_comm":
        overlap_comm(g, ch, off, notes, args or {})
    else:
        raise ValueError(f"unknown change {ch.kind}")
    _keep_before_steps(g, dur, off)
    return dur, off, notes


def _filled_by(g: dg.DepGraph, trace: Trace | None, edge: int) -> str:
    """What the host did in a gap (host edge `edge`), by host.host_did, as the critical path
    names host work: nsys_ddp's 48 ms before a CUDA call was an OS runtime clock_nanosleep."""
    if trace is None:
        return ""
    from .host import host_did

    u, v = int(g.e_src[edge]), int(g.e_dst[edge]) // 2
    a = g.t0 + int(g.rec_e[u // 2] if u % 2 else g.rec_s[u // 2])
    b = g.t0 + int(g.rec_s[v])
    did = host_did(trace, int(g.rank[v]), a, b) if b > a else None
    if did is None:
        return ""
    name, ns, own = did
    if name is None:
        return f"; no op was recorded for {ns / 1e6:.1f} ms of its {(b - a) / 1e6:.1f} ms"
    where = f"{name}'s own code (not the ops it calls)" if own else name
    return f"; the host was in {where} for {ns / 1e6:.1f} ms of its {(b - a) / 1e6:.1f} ms"


# an edge offset that never binds (a removed wait): far below any time, far from overflowing int64
NEVER = -(1 << 60)


def _explicit_sync(g: dg.DepGraph) -> np.ndarray:
    """Per node: a synchronize call (cudaStreamSynchronize, cudaEventSynchronize,
    cudaDeviceSynchronize, cuCtxSynchronize...), not a blocking copy."""
    ids = np.array([bool(EXPLICIT_SYNC.search(n)) for n in g.names] or [False])
    return (g.kind == dg.SYNC) & (g.name >= 0) & ids[np.maximum(g.name, 0)]


def _waits_for_work(g: dg.DepGraph) -> np.ndarray:
    """Per node: a synchronize call that waits for queued work, not for data (one that reads a
    copy's result, host.reads_copy, the host needs)."""
    return _explicit_sync(g) & ~g.reads_copy


def _keep_before_steps(g: dg.DepGraph, dur: np.ndarray, off: np.ndarray) -> None:
    """Work recorded before the first step keeps its recorded times: a change acts in the
    profiled steps. (Compressing a warm-up before them, e.g. its launch gaps, moved the whole
    first step earlier, and measured from its recorded begin that step came out shorter than
    itself: negative, on nsys_single's 1.2 s warm-up.)"""
    firsts = [m[min(m)][0] for m in g.marks.values() if m]
    if not firsts:
        return
    pre = g.rec_s < min(int(g.rec_s[a]) for a in firsts)
    if not pre.any():
        return
    dur[pre] = g.dur[pre]
    into = pre[g.e_dst // 2]
    off[into] = g.e_off[into]


def _longer_steps(g: dg.DepGraph, rp: Replay, base: dict[int, int], after: dict[int, int]) -> list[str]:
    """A step a change makes longer, said with its cause: a step runs from the end of the one
    before, and where that end moves earlier by more than the step's own end, the step is
    measured as longer (trace_diff/test's no-copies: two steps 0.2-0.4 ms longer, the run 20.8 ms
    shorter). Its ends before and after, so the sentence is checked by the numbers."""
    longer = [s for s in base if after.get(s, base[s]) > base[s]]
    if not longer:
        return []
    steps, _a, e_rec, _b = step_ends(g, recorded(g))
    _s, _a2, e_new, _b2 = step_ends(g, rp, recorded_begin(g))
    pos = {s: k for k, s in enumerate(steps)}
    out = []
    for s in longer:
        k = pos[s]
        moved = (e_rec[k] - e_new[k]) / 1e6
        if k == 0:  # the first step's start is the recording's: its own end moved later
            out.append(f"step {s} ends {-moved:.3f} ms later than recorded")
            continue
        prev = (e_rec[k - 1] - e_new[k - 1]) / 1e6
        out.append(
            f"step {s} ends {moved:.3f} ms earlier, the step before it {prev:.3f} ms earlier: what holds "
            f"step {s}'s end moved less, so from the earlier start it takes {(after[s] - base[s]) / 1e6:.3f} ms longer"
        )
    return out


def whatif(trace: Trace, change: Change, args: dict[int, dict] | None = None) -> WhatIfResult:
    g = graph(trace, args)
    if change.kind == "shorten_host" and change.windows is None:  # named by a pattern: found here
        change = resolve(trace, g, change)
    base = step_times(g, recorded(g))
    dur, off, notes = apply(g, change, args, trace)
    rp = replay(g, dur, off, base=recorded(g))
    after = step_times(g, rp, recorded_begin(g))
    res = WhatIfResult(change, [StepTime(s, base[s], after[s]) for s in sorted(base)], list(g.assumptions), notes)
    res.notes += _longer_steps(g, rp, base, after)
    err = recorded_error(g)
    if err > 0.01:  # ops recorded before their launch, or other times no edge can reproduce
        res.notes.append(
            f"with no change the replay differs from the recorded steps by up to {err:.0%}: 'before' is the replay's"
        )
    return res
