"""The per-rank map: everything the analysis needs from one rank's events, as small tables.

map_rank(trace, rank) reads the rank's events once and returns a RankPart: its steps with the
per-step breakdown, its collective arrivals (group, kind, step, order, bytes, start, end and the
launch of each NCCL kernel), kernel statistics, per step the time per op name on its GPU and
host (what the late-rank rule compares across ranks), the findings of the rules that need its
events (host-bound, launch-bound, step outliers, memory), pipeline facts, per-name statistics and
a binned GPU profile for drawing a summary row. reduce.py turns the parts of all ranks into the
analysis without any events, so the same two functions run in one process (analyze(trace)) or
with one map per file on Dask (gpuviewer/scale).

A part is plain data (numbers, strings, small numpy arrays, dicts): it pickles to a worker's
client and is written to a summary. Its larger tables (per step per name, profile, per-name
statistics) are Lazy: computed when read, so one process that holds the whole trace computes only
those the reduce asks for (the late ranks'); a part leaving its process is materialized. Its times
are on the clock of the trace it was mapped from; shifted() moves them when the reduce aligns
hosts.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..model.categories import Cat, LaneKind
from ..model.numbered import kept_share
from ..model.trace import Trace
from . import intervals as iv
from . import rules as R
from .breakdown import RankBreakdown, StepBreakdown, rank_breakdown
from .collectives import rank_comm
from .host import explain_steps, measured_once
from .kernels import kernel_stats
from .memory import peak_bytes_by_rank
from .stragglers import step_name_times

PROFILE_BINS = 1024  # a summary row a screen wide
HOST_OP_KINDS = (LaneKind.CPU, LaneKind.CUDA_API, LaneKind.NVTX, LaneKind.OSRT)
_KIND: dict[int, str] = {Cat.KERNEL: "compute", Cat.COMM_KERNEL: "comm", Cat.MEMCPY: "memcpy", Cat.MEMSET: "memset"}


class NameTimes:
    """Per step, time per op name (ns), stored as one name list and a steps x names matrix:
    a rank's hundreds of names over its steps pickle as two arrays, not a dict per step."""

    def __init__(self, per_step: dict[int, dict[str, int]]) -> None:
        self.names = sorted({n for d in per_step.values() for n in d})
        col = {n: i for i, n in enumerate(self.names)}
        self.steps = list(per_step)
        self.values = np.zeros((len(self.steps), len(self.names)), np.int64)
        for k, d in enumerate(per_step.values()):
            for n, v in d.items():
                self.values[k, col[n]] = v

    def get(self, step: int, default=None) -> dict[str, int]:
        """The step's {name: ns} (names with no time left out), or default."""
        if step not in self.steps:
            return {} if default is None else default
        row = self.values[self.steps.index(step)]
        nz = np.flatnonzero(row)
        return {self.names[i]: int(row[i]) for i in nz}


class Lazy:
    """One of a part's larger tables, computed when first read. In one process the reduce reads
    few of them (the late ranks' and those they are compared with) while the trace is still
    there; a part that leaves its process is materialize()d first (pickling does it too), so it
    never drags its trace along."""

    def __init__(self, fn: Callable | None, *args) -> None:  # None: made by of(), done already
        self._fn, self._args, self._value, self._done = fn, args, None, False

    def value(self):
        if not self._done:
            self._value = self._fn(*self._args)
            self._fn = self._args = None  # the trace is let go
            self._done = True
        return self._value

    @classmethod
    def of(cls, value) -> Lazy:
        done = cls(None)
        done._value, done._done = value, True
        return done

    def __getstate__(self) -> dict:
        return {"_fn": None, "_args": None, "_value": self.value(), "_done": True}


@dataclass
class RankPart:
    rank: int
    steps: list[StepBreakdown]  # waits not yet split (the reduce does); warm-up as this rank sees it
    host_steps: list[tuple[int, int, int]]  # (step, start, end) of the host's step ranges
    n_ops: int
    arrivals: dict[tuple, list[tuple]]  # collectives.rank_comm
    kernels: dict  # kernels.kernel_stats, without the gaps
    # rule -> findings, once with this rank's warm-up step kept ("warmup") and, when it has one,
    # once without it ("no_warmup"): the reduce keeps it only when every rank has one
    rules: dict[str, dict[str, list[dict]]]
    memory: list[dict]
    pipeline: dict  # rules.job_facts: what the job rules need of this rank (pipeline, kernel mix)
    info: dict  # what `info` says of the rank: events, kernels, lanes, devices, span, files...
    # Lazy tables, read with table(name): gpu_names, host_names (NameTimes: per step, time per
    # op name on its GPU and host), host_explain (host.explain_steps), profile (t0_ns, bin_ns,
    # compute, comm: busy share per bin), op_stats ("kernels", "host_ops": columns per name)
    tables: dict[str, Lazy] = field(default_factory=dict)
    unplaced: int = 0  # RankBreakdown.unplaced: GPU ops with no launch record and no step
    unplaced_kernels: bool = True
    host_ops_recorded: bool = True  # (breakdown.RankBreakdown's)
    host_longest_call: tuple[str, int] | None = None  # (breakdown.RankBreakdown's)

    def table(self, name: str):
        return self.tables[name].value()

    def materialize(self) -> RankPart:
        for t in self.tables.values():
            t.value()
        return self

    def shifted(self, shift: Callable[[int], int]) -> RankPart:
        """The part with every time on another clock: shift(t) -> ns to add at time t (the
        host's clock correction, as model.align moves events)."""

        def d(t: int) -> int:
            return int(t) + shift(int(t))

        steps = [
            dataclasses.replace(
                s,
                start_ns=d(s.start_ns),
                end_ns=d(s.end_ns),
                host_start_ns=d(s.host_start_ns),
                host_end_ns=d(s.host_end_ns),
            )
            for s in self.steps
        ]
        arrivals = {
            k: [(d(r[0]), d(r[1]), *r[2:5], d(r[5]), *r[6:]) for r in rows] for k, rows in self.arrivals.items()
        }
        rules = {k: {name: [_shift_finding(f, d) for f in fs] for name, fs in v.items()} for k, v in self.rules.items()}
        info = dict(self.info, start_ns=d(self.info["start_ns"]), end_ns=d(self.info["end_ns"]))
        profile = self.table("profile")
        tables = dict(self.tables, profile=Lazy.of(dict(profile, t0_ns=d(profile["t0_ns"]))))
        return dataclasses.replace(
            self,
            steps=steps,
            host_steps=[(s, d(a), d(b)) for s, a, b in self.host_steps],
            arrivals=arrivals,
            rules=rules,
            memory=[_shift_finding(f, d) for f in self.memory],
            info=info,
            tables=tables,
        )


def _shift_finding(f: dict, d: Callable[[int], int]) -> dict:
    g = dict(f, start_ns=d(f["start_ns"]), end_ns=d(f["end_ns"]))
    if isinstance(f["metrics"].get("per_step"), list):  # memory: each step's peak and when
        g["metrics"] = dict(
            f["metrics"], per_step=[dict(p, t_ns=d(p["t_ns"])) if "t_ns" in p else p for p in f["metrics"]["per_step"]]
        )
    return g


def map_rank(
    trace: Trace, rank: int, comm_args: dict[int, dict] | None = None, mem_bytes: R.MemBytes | None = None
) -> RankPart:
    """One rank of `trace` -> its RankPart. comm_args: event index -> NCCL kernel arguments
    (io.comm_args.collective_args); mem_bytes: the memory copies' sizes, asked where copies fill
    the GPU (io.mem_args.memop_bytes). The analysis never reads files."""
    with measured_once(trace):
        return _map_rank(trace, rank, comm_args, mem_bytes)


def _map_rank(
    trace: Trace, rank: int, comm_args: dict[int, dict] | None, mem_bytes: R.MemBytes | None = None
) -> RankPart:
    rb = rank_breakdown(trace, rank)
    # each op's step, kept with the trace: the dependency model of the same session needs them and
    # a part does not carry them (in one process, measuring them again was a third of building it)
    trace.derived.setdefault("rank_ops", {})[rank] = (rb.ops, rb.op_step)
    ks = kernel_stats(trace, rb)
    rules = {"warmup": _rank_rules(trace, rb, ks, mem_bytes)}
    if any(s.warmup for s in rb.steps):
        # the job keeps a warm-up only when every rank has one: the other answer, ready
        plain_rb = dataclasses.replace(rb, steps=[dataclasses.replace(s, warmup=False) for s in rb.steps])
        rules["no_warmup"] = _rank_rules(trace, plain_rb, ks, mem_bytes)
    part = RankPart(
        rank=rank,
        steps=rb.steps,
        host_steps=[(s.step, s.start, s.end) for s in trace.steps_of_rank(rank)],
        n_ops=rb.n_ops,
        arrivals=rank_comm(trace, rb, comm_args or {}),
        kernels={k: v for k, v in ks.items() if k != "gaps"},
        rules=rules,
        memory=R.memory_rule(trace, rank),
        pipeline=R.job_facts(trace, rb),
        info=_info(trace, rank),
        unplaced=rb.unplaced,
        unplaced_kernels=rb.unplaced_kernels,
        host_ops_recorded=rb.host_ops_recorded,
        host_longest_call=rb.host_longest_call,
    )
    names = Lazy(_measured, trace, step_name_times, trace, rb)
    part.tables = {
        "gpu_names": Lazy(lambda: NameTimes(names.value()[0])),
        "host_names": Lazy(lambda: NameTimes(names.value()[1])),
        "host_explain": Lazy(_measured, trace, explain_steps, trace, rank),
        "comm_names": Lazy(_comm_names, trace, rb),
        "profile": Lazy(_profile, trace, rb),
        "op_stats": Lazy(
            lambda: {"kernels": _op_stats(trace, rb.ops), "host_ops": _op_stats(trace, _host_ops(trace, rank))}
        ),
    }
    return part


def _comm_names(trace: Trace, rb: RankBreakdown) -> NameTimes:
    """Per step, the rank's NCCL kernel time by name, each kernel in the step that launched it
    (rb.op_step, as its collectives are matched: collectives.rank_comm); gpu_names leaves them
    out (waiting in a collective is no cause of a late rank). Exposed communication's evidence."""
    per_step: dict[int, dict[str, int]] = {x.step: {} for x in rb.steps if x.step is not None}
    if rb.ops is None or rb.op_step is None or not len(rb.ops):
        return NameTimes(per_step)
    c = trace.columns
    m = (np.asarray(c["cat"][rb.ops]) == Cat.COMM_KERNEL) & np.isin(rb.op_step, list(per_step))
    ops, steps = rb.ops[m], rb.op_step[m]
    names, durs = np.asarray(c["name"][ops]), np.asarray(c["dur"][ops]).astype(np.int64)
    for s, n, d in zip(steps.tolist(), names.tolist(), durs.tolist()):
        got = per_step[s]
        got[trace.names[n]] = got.get(trace.names[n], 0) + d
    return NameTimes(per_step)


def _measured(trace: Trace, fn: Callable, *args):
    with measured_once(trace):
        return fn(*args)


def _rank_rules(trace: Trace, rb: RankBreakdown, ks: dict, mem_bytes: R.MemBytes | None) -> dict[str, list[dict]]:
    """The map rules' findings by rule name (rules.MAP_RULES)."""
    return {name: fn(trace, rb, ks, mem_bytes) for name, fn in R.MAP_RULES.items()}


def _host_ops(trace: Trace, rank: int) -> np.ndarray:
    return trace.events_of_rank(rank, HOST_OP_KINDS)


def _kept(trace: Trace, rank: int) -> float | None:
    shares = [
        kept_share(pf.get("host_numbered")) for pf in trace.metadata.get("per_file") or [] if pf.get("rank") == rank
    ]
    return min((s for s in shares if s is not None), default=None)


def _in_steps(trace: Trace, rank: int, s: np.ndarray, cat: np.ndarray) -> dict[str, dict[str, int]]:
    """Per host step of the rank (its number as text): the NVTX ranges and Python calls beginning in it."""
    # each kind's starts sorted once, counted a step by two binary searches (not a mask of every
    # event a step)
    starts = {k: np.sort(s[cat == v]) for k, v in (("nvtx_ranges", Cat.NVTX), ("python_calls", Cat.PYTHON))}
    out = {}
    for st in trace.steps_of_rank(rank):
        out[str(st.step)] = {
            k: int(np.searchsorted(x, st.end, side="left") - np.searchsorted(x, st.start, side="left"))
            for k, x in starts.items()
        }
    return out


def _info(trace: Trace, rank: int) -> dict:
    """The rank's line of `gpuviewer info` (model.summary.summarize), from its lanes alone."""
    c = trace.columns
    idx = trace.events_of_rank(rank)
    lanes = set(trace.lanes_of_rank(rank))
    il = np.asarray(trace.instants["lane"])
    inst = np.asarray(trace.instants["t"])[np.isin(il, list(lanes))] if len(il) else np.zeros(0, np.int64)
    cat = np.asarray(c["cat"][idx])
    s = np.asarray(c["start"][idx]).astype(np.int64)
    e = s + np.asarray(c["dur"][idx]).astype(np.int64)
    lo = [int(s.min())] if len(s) else []
    hi = [int(e.max())] if len(e) else []
    if len(inst):
        lo.append(int(inst.min()))
        hi.append(int(inst.max()))
    r = next(x for x in trace.ranks if x.rank == rank)
    peaks = peak_bytes_by_rank(trace).get(rank, {})
    return {
        "rank": rank,
        "events": int(len(idx) + len(inst)),
        "kernels": int(((cat == Cat.KERNEL) | (cat == Cat.COMM_KERNEL)).sum()),
        "nccl_kernels": int((cat == Cat.COMM_KERNEL).sum()),
        "lanes": len(lanes),
        "devices": [int(d) for d in r.devices],
        "steps": [s.step for s in trace.steps_of_rank(rank)],
        "start_ns": min(lo) if lo else 0,
        "end_ns": max(hi) if hi else 0,
        "memory_peak_bytes": {str(d): v for d, v in peaks.items()},
        "files": list(r.files),
        # the share of the host events its files' profiler numbered that they hold, where they
        # were sampled or filtered (io/kineto_numbered.py); None: all there, or not numbered
        "host_events_kept": _kept(trace, rank),
        # NVTX ranges (torch.autograd.profiler.emit_nvtx pushes one for every op; the reader keeps
        # their names without its ', seq = N, op_id = N'): their cost is in the host's time (the
        # reduce says so where they are many a step)
        "nvtx_ranges": int((cat == Cat.NVTX).sum()),
        # Python calls the profiler's Python tracer recorded (with_stack): their tracing, too
        "python_calls": int((cat == Cat.PYTHON).sum()),
        # ...of both, those beginning in each of the rank's host steps (a rate a step is of the
        # steps' own: tp's 214 calls outside them made 4,706 a step read 4,777; an audit)
        "in_steps": _in_steps(trace, rank, s, cat),
        "world_size": r.world_size,
        "format": trace.format,
        # what the reduce compares collective bandwidth with (links.py): the GPUs' own properties
        "device_props": {
            str(d): {
                k: v
                for k, v in (r.device_props.get(d) or {}).items()
                if k in ("name", "computeMajor", "computeMinor", "gpuId")
            }
            for d in r.devices
        },
    }


def _profile(trace: Trace, rb: RankBreakdown, bins: int = PROFILE_BINS) -> dict:
    """Share of each time bin the GPU spent computing and communicating: a summary row drawn
    without the events."""
    c = trace.columns
    ops = rb.ops if rb.ops is not None else np.zeros(0, np.int64)
    s = np.asarray(c["start"][ops]).astype(np.int64)
    e = s + np.asarray(c["dur"][ops]).astype(np.int64)
    cat = np.asarray(c["cat"][ops])
    if not len(s):
        z = np.zeros(0, np.float32)
        return {"t0_ns": 0, "bin_ns": 0, "compute": z, "comm": z}
    t0, t1 = int(s.min()), int(e.max())
    width = max(1, -(-(t1 - t0) // bins))
    edges = t0 + width * np.arange(bins + 1, dtype=np.int64)
    out: dict[str, Any] = {"t0_ns": t0, "bin_ns": int(width)}
    for key, m in (("compute", cat != Cat.COMM_KERNEL), ("comm", cat == Cat.COMM_KERNEL)):
        covered = _covered_before(iv.union(s[m], e[m]), edges)
        out[key] = (np.diff(covered) / width).astype(np.float32)
    return out


def _covered_before(ivs: iv.Intervals, t: np.ndarray) -> np.ndarray:
    """For each time in t, the length of the intervals before it."""
    a, b = ivs
    if not len(a):
        return np.zeros(len(t), np.float64)
    cum = np.concatenate(([0], np.cumsum(b - a)))
    k = np.searchsorted(a, t, side="right")  # intervals starting at or before t
    j = np.maximum(k - 1, 0)
    partial = np.where(k > 0, np.clip(t - a[j], 0, b[j] - a[j]), 0)
    return (cum[j] + partial).astype(np.float64)


def _op_stats(trace: Trace, idx: np.ndarray | None) -> dict:
    """Per (name, category): count, total, min and max duration (ns)."""
    c = trace.columns
    if idx is None or not len(idx):
        return {"name": [], "kind": [], "count": [], "total_ns": [], "min_ns": [], "max_ns": []}
    names = np.asarray(c["name"][idx]).astype(np.int64)
    cat = np.asarray(c["cat"][idx]).astype(np.int64)
    dur = np.asarray(c["dur"][idx]).astype(np.int64)
    key = names << 8 | cat
    uk, inv = np.unique(key, return_inverse=True)
    cnt = np.bincount(inv)
    tot = np.bincount(inv, weights=dur).astype(np.int64)
    mx = np.full(len(uk), np.iinfo(np.int64).min, np.int64)
    np.maximum.at(mx, inv, dur)
    mn = np.full(len(uk), np.iinfo(np.int64).max, np.int64)
    np.minimum.at(mn, inv, dur)
    return {
        "name": [trace.names[int(k >> 8)] for k in uk],
        "kind": [_KIND[c] if c in _KIND else _cat_label(c) for c in (int(k & 0xFF) for k in uk)],
        "count": cnt.astype(np.int64),
        "total_ns": tot,
        "min_ns": mn,
        "max_ns": mx,
    }


def _cat_label(ct: int) -> str:
    from ..model.categories import CAT_LABEL

    try:
        return CAT_LABEL[Cat(ct)]
    except ValueError:
        return str(ct)
