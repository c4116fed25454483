"""A host op that took longer than usual in one step, given back its usual time: the what-if of a
stall whose sentence names the op ("sleep took 50 ms more than usual"), and `gpuviewer whatif
--usual-op RANK:STEP:NAME_REGEX`. The op's extra time is host.explain_steps' (its self time in the
step minus its mean over the rank's other steps, as the stall's sentence says it); whatif's
shorten_host takes it out of the host work inside the op's spans."""

from __future__ import annotations

import re

import numpy as np

from ..model.trace import Trace
from . import depgraph as dg
from .host import HOST_KINDS, explain_steps
from .stragglers import ADDRESS
from .whatif_change import Change


def spans(trace: Trace, rank: int, step: int, name: str) -> np.ndarray:
    """The op's spans on the rank's host lanes within the step's window, nested or repeated calls
    merged (rows of start, end relative to the trace's start)."""
    win = [x for x in trace.steps_of_rank(rank) if x.step == step]
    ids = [i for i, nm in enumerate(trace.names) if nm == name]
    if not win or not ids:
        return np.zeros((0, 2), np.int64)
    w0, w1 = win[0].start, win[0].end
    got: list[tuple[int, int]] = []
    for li, ln in enumerate(trace.lanes):
        if ln.rank != rank or ln.kind not in HOST_KINDS:
            continue
        sl = trace.lane_slice(li)
        a = np.asarray(trace.columns["start"][sl], np.int64)
        b = a + np.asarray(trace.columns["dur"][sl], np.int64)
        m = np.isin(trace.columns["name"][sl], ids) & (a < w1) & (b > w0)
        got += zip(np.maximum(a[m], w0).tolist(), np.minimum(b[m], w1).tolist())
    merged: list[list[int]] = []
    for a0, b0 in sorted(got):
        if merged and a0 <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], b0)
        else:
            merged.append([a0, b0])
    return np.array(merged, np.int64).reshape(-1, 2) - int(trace.start_ns)


def change(trace: Trace, rank: int, step: int, name: str, excess_ms: float) -> Change | None:
    """The op `name` (exact) at its usual time: excess_ms less host work inside it; None when the
    op has no span in that step."""
    win = spans(trace, rank, step, name)
    if not len(win):
        return None
    return Change(
        "shorten_host",
        rank=rank,
        step=step,
        windows=win,
        cut_ns=int(excess_ms * 1e6),
        label=f"rank {rank}'s {ADDRESS.sub('', name)} in step {step} at its usual time "
        f"({excess_ms:.1f} ms less host work)",
    )


def resolve(trace: Trace, ch: Change) -> Change:
    """A shorten_host change named by a pattern (the command line's): the first op of the rank's
    step whose name matches, among those that took longer than in its other steps, largest excess
    first."""
    if ch.rank is None or ch.step is None:
        raise ValueError("give RANK:STEP:NAME_REGEX")
    if not any(x.step == ch.step for x in trace.steps_of_rank(ch.rank)):
        raise ValueError(f"rank {ch.rank} has no step {ch.step}")
    rx = re.compile(ch.regex or "", re.IGNORECASE)
    rows = explain_steps(trace, ch.rank, top=1_000_000).get(ch.step, [])
    row = next((r for r in rows if rx.search(r["name"]) and r["excess_ms"] > 0), None)
    if row is None:
        raise ValueError(f"no host op matching /{ch.regex}/ took longer in rank {ch.rank}'s step {ch.step} than usual")
    got = change(trace, ch.rank, ch.step, row["name"], row["excess_ms"])
    if got is None:  # pragma: no cover - explain_steps found it in this step's window
        raise ValueError(f"/{ch.regex}/: no span of {row['name']} in rank {ch.rank}'s step {ch.step}")
    return got


def _overlap(a: np.ndarray, b: np.ndarray, windows: np.ndarray) -> np.ndarray:
    """Per interval [a, b), the time it shares with the windows (disjoint rows of start, end)."""
    got = np.zeros(len(a), np.int64)
    for w0, w1 in np.asarray(windows, np.int64).reshape(-1, 2):
        got += np.maximum(0, np.minimum(b, w1) - np.maximum(a, w0))
    return got


def shorten(g: dg.DepGraph, ch: Change, dur: np.ndarray, off: np.ndarray, notes: list[str]) -> None:
    """shorten_host in place: the rank's host gaps (the time just before each host item) and CUDA
    calls inside the windows lose ch.cut_ns in all, each in proportion to its time inside them."""
    if ch.rank not in g.marks:
        raise ValueError(f"rank {ch.rank} is not in this session (ranks {sorted(g.marks)})")
    if ch.windows is None or not len(ch.windows) or ch.cut_ns <= 0:
        notes.append("no host time to shorten")
        return
    dst = g.e_dst // 2
    e = np.flatnonzero((g.e_kind == dg.E_HOST) & (g.rank[dst] == ch.rank) & (off > 0))
    gap_end = np.where(g.e_dst[e] % 2 == 0, g.rec_s[dst[e]], g.rec_e[dst[e]])
    in_gap = np.minimum(_overlap(gap_end - off[e], gap_end, ch.windows), off[e])
    n = np.flatnonzero((g.kind == dg.HOST) & (g.rank == ch.rank))
    in_call = np.minimum(_overlap(g.rec_s[n], g.rec_e[n], ch.windows), dur[n])
    inside = int(in_gap.sum() + in_call.sum())
    if inside <= 0:
        notes.append(f"rank {ch.rank}: no host work on record inside {ch.label or 'the op'}")
        return
    f = min(1.0, ch.cut_ns / inside)
    off[e] -= (in_gap * f).astype(np.int64)
    dur[n] -= (in_call * f).astype(np.int64)
    notes.append(
        f"rank {ch.rank}: {min(ch.cut_ns, inside) / 1e6:.3f} ms of the {inside / 1e6:.3f} ms of host work "
        f"inside the op removed"
    )
