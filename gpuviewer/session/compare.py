"""The comparison of two sessions, Qt-free: the diff (analysis/diff.py) computed from Sessions, its
headline, its tables as DataFrames, which step each side shows, and which events a table row stands
for. The Compare window (widgets/compare_window.py, compare_tables.py) shows it; tests and notebooks
can use it without a window."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from ..analysis.collectives import collective_kind
from ..analysis.diff import DiffError, diff, parse_steps
from ..analysis.diff_tables import NO_STEP, Measured
from ..analysis.diff_text import collective_verdict, headline, significant_parts, size_text, verdict
from ..io.errors import Cancelled, TraceError

__all__ = [
    "Cancelled",
    "Comparison",
    "DiffError",
    "NO_STEP",
    "Measured",
    "TraceError",
    "collective_kind",
    "collective_mask",
    "collectives_frame",
    "compute",
    "diff",
    "first_in",
    "headline",
    "name_mask",
    "named_frame",
    "parse_steps",
    "part_mask",
    "parts_frame",
    "run_name",
    "run_names",
    "session_name",
    "slower_names",
    "step_time",
    "step_window",
    "typical_step",
    "typical_steps",
    "verdict",
]


@dataclass
class Comparison:
    d: dict  # what `gpuviewer diff --json` prints
    measured: tuple[Measured, Measured]
    comm_args: tuple[dict, dict]  # event index -> NCCL kernel arguments, per side
    windows: tuple[dict, dict]  # (rank, step) -> (start, end) ns: host step start to its last GPU op
    host_ranges: tuple[dict, dict]  # (rank, step) -> the host's step range (host ops belong by start)
    op_steps: tuple[tuple, tuple]  # (GPU ops sorted, the step that launched each), per side
    shown_steps: list[int] = field(default_factory=lambda: [NO_STEP, NO_STEP])


SIDE = {"a": 0, "b": 1}


def session_name(session) -> str:
    return run_name(session.paths)


# what ends the common prefix of one run's per-rank files: "ddp_nop2p_rank0.json" -> "ddp_nop2p"
_RANK_TAIL = re.compile(r"[\s._-]*(?:rank|r|worker|proc|process|gpu|host)?[\s._-]*\d*$", re.IGNORECASE)


def run_name(paths) -> str:
    """A run in titles, on one line: its folder, or the common prefix of its files ("ddp_nop2p"
    for ddp_nop2p_rank0/1.json), never just the first of its files."""
    from ..model.plain import line

    paths = [os.path.abspath(str(p)).rstrip("/\\") for p in paths] or [""]
    if len(paths) == 1:
        return line(os.path.basename(paths[0])) or "session"
    names = [os.path.basename(p) for p in paths]
    prefix = _RANK_TAIL.sub("", os.path.commonprefix(names))
    if len(prefix) >= 3:
        return line(prefix)
    try:
        common = os.path.commonpath(paths)
    except ValueError:  # different drives
        common = ""
    return line(os.path.basename(common)) or line(names[0]) + f" and {len(names) - 1} more"


def run_names(paths_a, paths_b) -> tuple[str, str]:
    """The two runs' names, told apart: same-named runs are named with the folder above them."""
    a, b = run_name(paths_a), run_name(paths_b)
    if a == b and [str(p) for p in paths_a] != [str(p) for p in paths_b]:

        def up(paths) -> str:
            parent = os.path.commonpath([os.path.dirname(os.path.abspath(str(p)).rstrip("/\\")) for p in paths])
            return os.path.basename(parent)

        ua, ub = up(paths_a), up(paths_b)
        if ua != ub:
            a, b = f"{ua}/{a}", f"{ub}/{b}"
    return a, b


def norm_steps(steps) -> tuple:
    """None, one spec, or a pair (A, B); a spec is 'all', 'median', 7, '3-5', [2, 4]."""
    if steps is None:
        return ("all", "all")
    if not (isinstance(steps, tuple) and len(steps) == 2):
        steps = (steps, steps)

    def one(s):
        if isinstance(s, (int, np.integer)):
            return [int(s)]
        if isinstance(s, str):
            return parse_steps(s)
        return sorted({int(x) for x in s})

    return one(steps[0]), one(steps[1])


def compute(
    session_a, session_b, ranks=None, steps=None, progress=None, cancelled=None, start: float = 0.0
) -> Comparison:
    """The diff and what the window needs beside it; raises DiffError in the user's terms.
    progress(fraction, what) is told each stage (from `start` to 1); cancelled() True between
    stages raises io.errors.Cancelled."""
    from ..analysis.breakdown import breakdown
    from ..session.analysis import measure_for_diff

    def stage(frac: float, what: str) -> None:
        if cancelled is not None and cancelled():
            raise Cancelled("comparison cancelled")
        if progress is not None:
            progress(start + (1 - start) * frac, what)

    for s in (session_a, session_b):
        if not len(s.trace):
            raise DiffError(f"{session_name(s)} holds no trace events to compare")
    one = session_b is session_a
    stage(0.0, "measuring A's steps")
    ma, aa = measure_for_diff(session_a.trace)
    # one session: the same Measured twice, which is how diff() knows ranks are of one run
    stage(0.4, "measuring B's steps")
    mb, ab = (ma, aa) if one else measure_for_diff(session_b.trace)
    stage(0.75, "comparing A and B, step by step")
    d = diff(ma, mb, ranks=ranks, steps=norm_steps(steps))
    stage(0.85, "finding each step's window")
    d["a"]["paths"], d["b"]["paths"] = list(session_a.paths[:1]), list(session_b.paths[:1])

    def steps_of(trace) -> tuple[dict, dict, tuple]:
        win, host, ops, op_step = {}, {}, [], []
        for rb in breakdown(trace):
            if rb.ops is not None:
                ops.append(np.asarray(rb.ops, np.int64))
                op_step.append(np.asarray(rb.op_step, np.int64))
            for s in rb.steps:
                if s.step is None:
                    win[(rb.rank, NO_STEP)] = host[(rb.rank, NO_STEP)] = (trace.start_ns, trace.end_ns)
                    continue
                start = s.host_start_ns or s.start_ns
                # the GPU often runs behind the host: the step lasts until its last op ends
                win[(rb.rank, int(s.step))] = (start, max(s.host_end_ns, s.end_ns))
                host[(rb.rank, int(s.step))] = (s.host_start_ns, s.host_end_ns)
        ops_all = np.concatenate(ops) if ops else np.zeros(0, np.int64)
        steps_all = np.concatenate(op_step) if op_step else np.zeros(0, np.int64)
        o = np.argsort(ops_all, kind="stable")
        return win, host, (ops_all[o], steps_all[o])

    sa = steps_of(session_a.trace)
    sb = sa if session_b is session_a else steps_of(session_b.trace)
    cmp = Comparison(d, (ma, mb), (aa, ab), (sa[0], sb[0]), (sa[1], sb[1]), (sa[2], sb[2]))
    cmp.shown_steps = typical_steps(cmp)
    stage(1.0, "done")
    return cmp


def typical_step(cmp: Comparison, side: str, among: list[int] | None = None) -> int:
    """The side's step whose time is nearest the side's value: the step the timeline shows first."""
    per = _step_times(cmp, side)
    if among:
        per = per[per.index.isin(among)]
    if not len(per):
        return (among or cmp.d[side]["steps"])[0]
    return int((per - _side_value(cmp, side)).abs().idxmin())


def typical_steps(cmp: Comparison) -> list[int]:
    """A typical step of each side; the same step number on both when they share steps (as when
    steps pair by number), the one nearest both sides' values, so the two views tell one story."""
    common = [s for s in cmp.d["a"]["steps"] if s in set(cmp.d["b"]["steps"])]
    ta, tb = _step_times(cmp, "a"), _step_times(cmp, "b")
    common = [s for s in common if s in ta.index and s in tb.index]
    if common:
        va, vb = _side_value(cmp, "a") or 1, _side_value(cmp, "b") or 1
        best = min(common, key=lambda s: abs(ta[s] - va) / va + abs(tb[s] - vb) / vb)
        return [best, best]
    return [typical_step(cmp, "a"), typical_step(cmp, "b")]


def _step_times(cmp: Comparison, side: str) -> pd.Series:
    x = cmp.d[side]
    m = cmp.measured[0 if side == "a" else 1]
    p = m.parts[(m.parts["part"] == "step") & m.parts["rank"].isin(x["ranks"]) & m.parts["step"].isin(x["steps"])]
    return p.groupby("step")["value"].mean()


def _side_value(cmp: Comparison, side: str) -> float:
    return float(next(r for r in cmp.d["step_parts"] if r["part"] == "step")[f"{side}_ns"])


def step_time(cmp: Comparison, side: str, step: int) -> float | None:
    """One step's time on the side (its host step range, the mean over its ranks), as the tables count it."""
    t = _step_times(cmp, side)
    return float(t[step]) if step in t.index else None


def step_window(cmp: Comparison, side: str, step: int) -> tuple[int, int]:
    """The step on the side's ranks: earliest start to latest end."""
    w = cmp.windows[0 if side == "a" else 1]
    got = [w[(r, step)] for r in cmp.d[side]["ranks"] if (r, step) in w]
    if not got:
        return 0, 1
    return min(g[0] for g in got), max(g[1] for g in got)


# -- the tables as DataFrames ---------------------------------------------------------------------


def _tone(sig: bool, delta) -> int:
    """+1: B significantly slower (more time), -1: faster, 0: within noise."""
    return 0 if not sig or not delta else (1 if delta > 0 else -1)


def _f(ns) -> float:
    return np.nan if ns is None else ns / 1e6


def parts_frame(d: dict) -> pd.DataFrame:
    """The step parts, for all the compared ranks and then rank by rank; _a_ranks and _b_ranks
    (hidden): the ranks each row stands for on each side (what a click outlines)."""
    sets = [("all", d["step_parts"], d["a"]["ranks"], d["b"]["ranks"])]
    for p in d["step_parts_by_rank"]:
        b = ("median " if len(p["b_ranks"]) > 1 else "") + ",".join(map(str, p["b_ranks"]))
        sets.append((f"{','.join(map(str, p['a_ranks']))} vs {b}", p["parts"], p["a_ranks"], p["b_ranks"]))
    rows = [
        {
            "part": r["part"],
            "ranks": who,
            "Δ ms": _f(r["delta_ns"]),
            "A ms": _f(r["a_ns"]),
            "B ms": _f(r["b_ns"]),
            "verdict": verdict(r["significant"]),
            "noise ms": _f(r["noise_ns"]),
            "_tone": _tone(r["significant"], r["delta_ns"]),
            "_a_ranks": list(a_ranks),
            "_b_ranks": list(b_ranks),
        }
        for who, parts, a_ranks, b_ranks in sets
        for r in parts
    ]
    cols = ["part", "ranks", "Δ ms", "A ms", "B ms", "verdict", "noise ms", "_tone", "_a_ranks", "_b_ranks"]
    return pd.DataFrame(rows, columns=cols)


NAMED_COLS = [
    "name",
    "Δ ms",
    "A ms",
    "B ms",
    "verdict",
    "only in",
    "kind",
    "count A",
    "count B",
    "mean A µs",
    "mean B µs",
    "share A",
    "share B",
    "noise ms",
    "_tone",
]


def named_frame(rows: list[dict], with_comm: bool = True) -> pd.DataFrame:
    """GPU ops or host ops, in the analysis' order (by |Δ|). Without with_comm, NCCL kernels are
    left out: their time is mostly waiting for other ranks, which the Collectives tab splits off."""
    out = [
        {
            "name": r["name"],
            "kind": r["kind"],
            "Δ ms": _f(r["delta_ns"]),
            "A ms": _f(r["a_total_ns"]),
            "B ms": _f(r["b_total_ns"]),
            "verdict": verdict(r["significant"]),
            "only in": (r["only"] or "").upper(),
            "count A": r["a_count"],
            "count B": r["b_count"],
            "mean A µs": np.nan if r["a_mean_ns"] is None else r["a_mean_ns"] / 1e3,
            "mean B µs": np.nan if r["b_mean_ns"] is None else r["b_mean_ns"] / 1e3,
            "share A": r["a_share"],
            "share B": r["b_share"],
            "noise ms": _f(r["noise_ns"]),
            "_tone": _tone(r["significant"], r["delta_ns"]),
        }
        for r in rows
        if with_comm or r["kind"] != "comm"
    ]
    return pd.DataFrame(out, columns=NAMED_COLS)


def collectives_frame(d: dict, by_size: bool = False) -> pd.DataFrame:
    rows = []
    for r in d["collectives" if by_size else "collective_totals"]:
        sig = significant_parts(r)
        big = max(sig, key=lambda p: abs(r[f"delta_{p}_ns"])) if sig else None
        rows.append(
            {
                "collective": r["name"],
                "group": r["group"],
                "bytes": size_text(r["bytes"]),
                "Δ wait ms": _f(r["delta_wait_ns"]),
                "Δ transfer ms": _f(r["delta_transfer_ns"]),
                "verdict": collective_verdict(r),
                "wait A ms": _f(r["a_wait_ns"]),
                "wait B ms": _f(r["b_wait_ns"]),
                "transfer A ms": _f(r["a_transfer_ns"]),
                "transfer B ms": _f(r["b_transfer_ns"]),
                "busbw A GB/s": r["a_busbw_gbps"],
                "busbw B GB/s": r["b_busbw_gbps"],
                "count A": r["a_count"],
                "count B": r["b_count"],
                "ranks": r["ranks"],
                "_tone": _tone(bool(big), r[f"delta_{big}_ns"] if big else 0),
            }
        )
    cols = [
        "collective",
        "group",
        "bytes",
        "Δ wait ms",
        "Δ transfer ms",
        "verdict",
        "wait A ms",
        "wait B ms",
        "transfer A ms",
        "transfer B ms",
        "busbw A GB/s",
        "busbw B GB/s",
        "count A",
        "count B",
        "ranks",
        "_tone",
    ]
    return pd.DataFrame(rows, columns=cols)


def slower_names(d: dict) -> tuple[list[str], list[tuple[str, str]]]:
    """What got significantly slower from A to B: GPU op names, and collectives (kind, group)
    whose transfer did (a wait is the other ranks' lateness, not the collective's)."""
    ops = [r["name"] for r in d["kernels"] if r["significant"] and r["delta_ns"] > 0]
    coll = [
        (r["name"], r["group"])
        for r in d["collective_totals"]
        if r["transfer_significant"] and r["delta_transfer_ns"] > 0
    ]
    return ops, coll


# -- which events a row stands for -------------------------------------------------------------


def name_mask(trace, names) -> np.ndarray:
    """Every event whose name is one of names."""
    want = set(names)
    ids = np.array([i for i, n in enumerate(trace.names) if n in want], np.int64)
    col = np.asarray(trace.columns["name"])
    return np.isin(col, ids) if len(ids) else np.zeros(len(col), bool)


# the step parts whose events a Compare window outlines: the GPU ops of each GPU part, the host
# calls of each host part (analysis/host_split.host_events); a part of no events (idle, no op
# recorded) is the time between them, and the step's totals stand for everything
_GPU_PART_CATS = {
    "compute": ("KERNEL",),
    "comm wait": ("COMM_KERNEL",),
    "comm transfer": ("COMM_KERNEL",),
    "memcpy/memset": ("MEMCPY", "MEMSET"),
}
_HOST_PART_EVENTS = {
    "host: framework ops": ("framework", "coll"),
    "host: launch calls": ("launch",),
    "host: launch queue": ("queue",),
    "host: syncs": ("sync",),
    "host: waits": ("wait", "os_wait"),
}
GAP_PARTS = {
    "GPU idle": "GPU idle is the time between the GPU's ops (the gaps in its lanes): no event to outline",
    "host: no op recorded": "'no op recorded' is the host's time with nothing on record on its launching "
    "threads (the gaps in their lanes): no event to outline",
}


def part_mask(trace, ranks: list[int], part: str) -> np.ndarray | None:
    """The events a step part's row stands for on the ranks: its GPU ops (NCCL kernels for both
    of a collective's parts) or its host calls; None for a part made of gaps or of everything."""
    from ..analysis.host_split import host_events
    from ..model.categories import Cat

    c = trace.columns
    lane_rank = np.array([ln.rank for ln in trace.lanes], np.int64)
    on = np.isin(lane_rank[np.asarray(c["lane"])], ranks)
    if part in _GPU_PART_CATS:
        return on & np.isin(np.asarray(c["cat"]), [int(getattr(Cat, k)) for k in _GPU_PART_CATS[part]])
    if part in _HOST_PART_EVENTS:
        mask = np.zeros(len(c["start"]), bool)
        for r in ranks:
            ev = host_events(trace, r)
            for k in _HOST_PART_EVENTS[part]:
                mask[ev[k]] = True
        return mask
    return None


def collective_mask(trace, comm_args: dict, colls) -> np.ndarray:
    """The NCCL kernels of the collectives colls [(kind, group)], as diff_tables groups them."""
    from ..model.categories import Cat

    mask = np.zeros(len(trace), bool)
    if not colls:
        return mask
    want = set(colls)
    kinds = {k for k, _g in colls}
    c = trace.columns
    for i in np.flatnonzero(np.asarray(c["cat"]) == Cat.COMM_KERNEL).tolist():
        a = comm_args.get(i, {})
        kind = collective_kind(a.get("collective"), trace.names[int(c["name"][i])])
        kind = "SendRecv" if kind in ("Send", "Recv") else kind
        if kind not in kinds:
            continue
        group = (
            str(a["group"]) + (f" ({a['group_desc']})" if a.get("group_desc") else "")
            if a.get("group") is not None
            else None
        )
        # without a group on record the analysis names it by stream order: the kind decides
        mask[i] = group is None or kind == "SendRecv" or (kind, group) in want
    return mask


def first_in(cmp: Comparison, side: str, step: int, trace, mask: np.ndarray) -> int | None:
    """The earliest masked event of the side's step on its ranks: a GPU op launched in the step
    (its GPU may run it later), a host event starting in its rank's host step range; as the
    tables count them (analysis/diff_tables.py)."""
    i = SIDE[side]
    ranks = cmp.d[side]["ranks"]
    idx = np.flatnonzero(mask)
    if not len(idx):
        return None
    c = trace.columns
    lane_rank = np.array([ln.rank for ln in trace.lanes], np.int64)
    rank = lane_rank[np.asarray(c["lane"])[idx]]
    start = np.asarray(c["start"])[idx]
    ok = np.isin(rank, ranks)
    if step != NO_STEP:
        ops, op_step = cmp.op_steps[i]
        pos = np.minimum(np.searchsorted(ops, idx), max(len(ops) - 1, 0))
        is_op = ops[pos] == idx if len(ops) else np.zeros(len(idx), bool)
        in_host = np.zeros(len(idx), bool)
        for r in ranks:
            h0, h1 = cmp.host_ranges[i].get((r, step), (0, 0))
            in_host |= (rank == r) & (start >= h0) & (start < h1)
        ok &= np.where(is_op, op_step[pos] == step if len(ops) else False, in_host)
    if not ok.any():
        return None
    return int(idx[ok][np.argmin(start[ok])])
