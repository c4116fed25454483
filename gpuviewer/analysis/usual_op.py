"""A host op that took longer than usual in one step, given back its usual time: the what-if of a
stall whose sentence names the op ("sleep took 50 ms more than usual"), and `gpuviewer whatif
--usual-op RANK:STEP:NAME_REGEX`. The op's extra time is host.explain_steps' (its self time in the
step minus its median over the rank's other steps, on the lane where it ran, as the stall's sentence
says it); shorten() takes it out of the host work (host gaps and CUDA calls, not syncs) inside the
op's spans on that lane, in proportion, and never more than that host work: the rest of the extra
was waiting, which no change to the host's own work removes."""

from __future__ import annotations

import re

import numpy as np

from ..model.trace import Trace
from . import depgraph as dg
from . import intervals as iv
from .host import API_CATS, HOST_KINDS, IDLE_WAIT, explain_steps, lane_words
from .stragglers import ADDRESS
from .whatif_change import Change


def spans(trace: Trace, rank: int, step: int, name: str, lane: str | None = None) -> np.ndarray:
    """The op's spans on the rank's host lanes (only the one `lane` names, by lane_words' text or
    its label, when given) within the step's window, merged (rows of start, end relative to the
    trace's start)."""
    win = [x for x in trace.steps_of_rank(rank) if x.step == step]
    ids = [i for i, nm in enumerate(trace.names) if nm == name]
    if not win or not ids:
        return np.zeros((0, 2), np.int64)
    w0, w1 = win[0].start, win[0].end
    a_all, b_all = [], []
    for li, ln in enumerate(trace.lanes):
        if (
            ln.rank != rank
            or ln.kind not in HOST_KINDS
            or (lane is not None and lane not in (lane_words(ln), ln.label))
        ):
            continue
        sl = trace.lane_slice(li)
        a = np.asarray(trace.columns["start"][sl], np.int64)
        b = a + np.asarray(trace.columns["dur"][sl], np.int64)
        m = np.isin(trace.columns["name"][sl], ids) & (a < w1) & (b > w0)
        a_all.append(np.maximum(a[m], w0))
        b_all.append(np.minimum(b[m], w1))
    if not a_all:
        return np.zeros((0, 2), np.int64)
    s, e = iv.union(np.concatenate(a_all), np.concatenate(b_all))
    return np.column_stack((s, e)).astype(np.int64) - int(trace.start_ns)


def _overlap(a: np.ndarray, b: np.ndarray, windows: np.ndarray) -> np.ndarray:
    """Per interval [a, b), the time it shares with the windows (sorted, disjoint rows of start,
    end): the windows' covered length up to b minus up to a, each by one binary search."""
    w = np.asarray(windows, np.int64).reshape(-1, 2)
    if not len(w) or not len(a):
        return np.zeros(len(a), np.int64)
    w0, w1 = w[:, 0], w[:, 1]
    before = np.r_[0, np.cumsum(w1 - w0)]  # covered length before each window

    def covered(t: np.ndarray) -> np.ndarray:
        k = np.searchsorted(w0, t, side="right") - 1
        kk = np.maximum(k, 0)
        return np.where(k < 0, 0, before[kk] + np.clip(t - w0[kk], 0, w1[kk] - w0[kk]))

    return np.maximum(0, covered(np.asarray(b, np.int64)) - covered(np.asarray(a, np.int64)))


def _inside(g: dg.DepGraph, rank: int, windows: np.ndarray, dur: np.ndarray, off: np.ndarray):
    """The rank's host gaps (edge indices, their time inside the windows) and CUDA calls other
    than syncs (node indices, theirs). A host gap is the time just before its item starts."""
    e = np.flatnonzero((g.e_kind == dg.E_HOST) & (g.rank[g.e_dst // 2] == rank) & (off > 0))
    gap_end = g.rec_s[g.e_dst[e] // 2]  # host-order edges end at an item's start slot
    in_gap = np.minimum(_overlap(gap_end - off[e], gap_end, windows), off[e])
    n = np.flatnonzero((g.kind == dg.HOST) & (g.rank == rank))
    in_call = np.minimum(_overlap(g.rec_s[n], g.rec_e[n], windows), dur[n])
    return e, in_gap, n, in_call


def host_work_inside(g: dg.DepGraph, rank: int, windows: np.ndarray) -> int:
    """ns of host work (gaps and CUDA calls, not syncs) the model holds inside the windows."""
    _e, in_gap, _n, in_call = _inside(g, rank, windows, g.dur, g.e_off)
    return int(in_gap.sum() + in_call.sum())


def shorten(g: dg.DepGraph, ch: Change, dur: np.ndarray, off: np.ndarray, notes: list[str]) -> None:
    """shorten_host in place: the rank's host work inside the windows loses ch.cut_ns in all (at
    most all of it), each gap and call in proportion to its time inside them."""
    if ch.rank not in g.marks:
        raise ValueError(f"rank {ch.rank} is not in this session (ranks {sorted(g.marks)})")
    if ch.windows is None or not len(ch.windows) or ch.cut_ns <= 0:
        notes.append("no host time to shorten")
        return
    e, in_gap, n, in_call = _inside(g, ch.rank, ch.windows, dur, off)
    inside = int(in_gap.sum() + in_call.sum())
    if inside <= 0:
        notes.append(f"rank {ch.rank}: no host work on record inside the op")
        return
    f = min(1.0, ch.cut_ns / inside)
    off[e] -= (in_gap * f).astype(np.int64)
    dur[n] -= (in_call * f).astype(np.int64)
    notes.append(
        f"rank {ch.rank}: {min(ch.cut_ns, inside) / 1e6:.3f} ms of the {inside / 1e6:.3f} ms of host work "
        f"inside the op removed"
    )


def change(
    trace: Trace, g: dg.DepGraph, rank: int, step: int, name: str, excess_ms: float, lane: str | None = None
) -> Change | None:
    """The op `name` (exact; on `lane` when given) at its usual time: its extra time less host work
    inside it, or all the host work there is when the extra was partly waiting (said so); None
    when the op has no span in that step."""
    win = spans(trace, rank, step, name, lane)
    if not len(win):
        return None
    want = int(excess_ms * 1e6)
    cut = min(want, host_work_inside(g, rank, win))
    said = f"{cut / 1e6:.1f} ms less host work"
    if cut < want - 50_000:  # the rest of its extra time was spent waiting (syncs, a blocked call)
        said += f": all the host work inside it, of its {excess_ms:.1f} ms extra"
    return Change(
        "shorten_host",
        rank=rank,
        step=step,
        windows=win,
        cut_ns=cut,
        label=f"rank {rank}'s {ADDRESS.sub('', name)} in step {step} at its usual time ({said})",
    )


def resolve(trace: Trace, g: dg.DepGraph, ch: Change) -> Change:
    """A shorten_host change named by a pattern (the command line's): of the rank's host ops in the
    step that took longer than in its other steps (as a stall names them: not an idle helper
    thread's wait, not NCCL), the one matching with the most extra time."""
    if ch.rank is None or ch.step is None:
        raise ValueError("give RANK:STEP:NAME_REGEX")
    if ch.rank not in g.marks:
        raise ValueError(f"rank {ch.rank} is not in this session (ranks {sorted(g.marks)})")
    steps = sorted({x.step for x in trace.steps_of_rank(ch.rank)})
    if ch.step not in steps:
        raise ValueError(f"rank {ch.rank} has no step {ch.step} (steps {steps})")
    rx = re.compile(ch.regex or "", re.IGNORECASE)
    rows = explain_steps(trace, ch.rank, top=1_000_000).get(ch.step, [])
    if len(steps) < 2:
        # no other step to say what an op usually takes; a runtime call's is microseconds, taken
        # as none: all its time in the step is extra, as the host-bound finding prices it
        matching = [r for r in rows if rx.search(r["name"])]
        rows = [r for r in matching if r["category"] in API_CATS]
        if matching and not rows:
            raise ValueError(
                f"rank {ch.rank} has one step: no other step says what {matching[0]['name']} usually takes "
                "(a runtime call's usual time, microseconds, is taken as none; other ops need a second step)"
            )
    row = next(
        (
            r
            for r in rows
            if r["excess_ms"] > 0
            and rx.search(r["name"])
            and not IDLE_WAIT.match(ADDRESS.sub("", r["name"]))
            and "nccl" not in r["name"].lower()
        ),
        None,
    )
    if row is None:
        raise ValueError(
            f"no host op matching /{ch.regex}/ took longer in rank {ch.rank}'s step {ch.step} than in its other steps"
        )
    got = change(trace, g, ch.rank, ch.step, row["name"], row["excess_ms"], row["lane"])
    if got is None:  # pragma: no cover - explain_steps found it in this step's window
        raise ValueError(f"/{ch.regex}/: no span of {row['name']} in rank {ch.rank}'s step {ch.step}")
    return got
