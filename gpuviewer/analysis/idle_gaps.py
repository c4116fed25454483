"""Where a mostly idle GPU waits, when no finding explains it: its idle time split by the length of
the gaps it falls in, and the host ops running through the longer gaps.

The low-utilization finding is then priced by the CUDA-graph bound (no launch overhead), which
removes launch calls and the host's work between launches under a millisecond. That names no cause:
HTA's nccl_parser_config idles about 170 ms a step, of it about 20 ms in gaps under 0.1 ms (the
launch path proper), most in gaps of 0.1-1 ms and 1 ms or more where the host runs framework work
(15 ms of one gap is unflatten_dense_tensors). The split tells launch overhead (fuse kernels,
CUDA graphs) from host work that a faster host loop or moving the work off the step would remove,
and the ops name that work."""

from __future__ import annotations

import dataclasses

import numpy as np

from ..model.trace import Trace
from . import intervals as iv
from .breakdown import RankBreakdown, gpu_ops
from .host import IDLE_WAIT, covering_op
from .host_bound import HOST_GAP_MIN_NS
from .issuers import _PARENS  # the module after an op's name: "FSDP::pre_forward (encoder...)"
from .launch import SHORT_GAP_NS, launch_threads
from .stragglers import ADDRESS

SHORT_NS, LONG_NS = SHORT_GAP_NS, HOST_GAP_MIN_NS  # launch_bound's and host_bound_idle's limits
MAX_GAPS = 2000  # the longest gaps named per rank: their ops are found one gap at a time


def op_label(trace: Trace, i: int) -> str:
    """An op's name as the idle findings say it: its module after the name and its object's
    address left out."""
    return ADDRESS.sub("", _PARENS.sub("", trace.name_of(i)))


def idle_split(trace: Trace, rb: RankBreakdown, around: bool = True) -> dict | None:
    """Per measured step (mean): the GPU's idle ns in gaps under SHORT_NS, up to LONG_NS and
    longer, and the host ops covering most of the gaps of SHORT_NS or more (name, ns a step), most
    first; None where the rank has no GPU work in its measured steps. around: with the idle before
    and after the step's GPU window (else the gaps between its first op and its last only)."""
    ops = rb.ops if rb.ops is not None else gpu_ops(trace, rb.rank)  # (the map drops them)
    fed = [s for s in rb.measured if s.busy_ns > 0]
    if not fed or not len(ops):
        return None
    c = trace.columns
    s0 = np.asarray(c["start"][ops]).astype(np.int64)
    busy = iv.union(s0, s0 + np.asarray(c["dur"][ops]).astype(np.int64))
    a_all, b_all = [], []
    for s in fed:
        lo, hi = (s.start_ns - s.idle_before_ns, s.end_ns + s.idle_after_ns) if around else (s.start_ns, s.end_ns)
        g0, g1 = iv.gaps(busy, lo, hi)
        a_all.append(np.asarray(g0, np.int64))
        b_all.append(np.asarray(g1, np.int64))
    a, b = np.concatenate(a_all), np.concatenate(b_all)
    ln = b - a
    n = len(fed)
    split: dict = {
        "short_ns": int(ln[ln < SHORT_NS].sum()) / n,
        "mid_ns": int(ln[(ln >= SHORT_NS) & (ln < LONG_NS)].sum()) / n,
        "long_ns": int(ln[ln >= LONG_NS].sum()) / n,
    }
    longer = np.flatnonzero(ln >= SHORT_NS)
    # each gap ends at an op's start: the thread that launched it is the one the gap waited on
    split["ops"] = _ops_over(trace, rb.rank, ops, [(int(a[k]), int(b[k]), int(b[k])) for k in longer.tolist()], n)
    return split


def _ops_over(trace: Trace, rank: int, ops: np.ndarray, gaps: list[tuple[int, int, int]], n: int) -> list:
    """The host ops the GPU's gaps (start, end, where the op it waited for starts) fall in: the
    innermost op spanning half of each on the thread that launched that op (fsdp's backward: the
    autograd thread, not the main thread sitting in run_backward), the longest MAX_GAPS gaps named
    (each is a search of the host's lanes); per op name, its time inside them over n steps, most
    first."""
    thread_at = launch_threads(trace, ops)
    by: dict[str, float] = {}
    for x, y, z in sorted(gaps, key=lambda g: g[0] - g[1])[:MAX_GAPS]:
        got = covering_op(trace, rank, x, y, thread=thread_at(z))
        if got is None:
            continue
        name = op_label(trace, got[0])
        if not IDLE_WAIT.match(name):
            by[name] = by.get(name, 0.0) + float(got[1]) / n  # its time inside the gap
    return sorted(by.items(), key=lambda kv: (-kv[1], kv[0]))


def sentence(split: dict, rank: int, ranks: int) -> str:
    """'; where the GPU idles (rank 0): 20.1 ms a step in gaps under 0.1 ms between its ops, ...'."""

    def ms(v: float) -> str:
        return f"{v / 1e6:,.1f} ms"

    who = f" (rank {rank})" if ranks > 1 else ""
    text = (
        f"; where the GPU idles{who}: {ms(split['short_ns'])} a step in gaps under 0.1 ms between its ops "
        f"(launch gaps), {ms(split['mid_ns'])} in gaps of 0.1-1 ms and {ms(split['long_ns'])} in "
        "gaps of 1 ms or more"
    )
    return text + ops_sentence(split)


def ops_sentence(split: dict) -> str:
    """'; in the gaps of 0.1 ms or more the launching thread was in: ...' (up to three ops holding 5%
    of those gaps or more), or ''."""
    ops = _top_ops(split["ops"], split["mid_ns"] + split["long_ns"])
    if not ops:
        return ""
    # each op's time inside the gaps, not the gaps' whole length (nccl_parser_config's batch norm
    # was said for 25.1 ms of gaps it ran 19.6 ms of, more than it ran in all; audits)
    return (
        f"; in the gaps of 0.1 ms or more the launching thread was in: {ops} a step (each op's time inside the "
        "gaps it spans half of or more, its callees' included)"
    )


def _top_ops(ops: list[tuple[str, float]], total_ns: float) -> str:
    """'A 20.8 ms, B 7.0 ms, C 4.8 ms': up to three ops (most first) holding 5% of total_ns or more."""
    top = [(n, v) for n, v in ops if v >= 0.05 * total_ns][:3]
    return ", ".join(f"{n} {v / 1e6:,.1f} ms" for n, v in top)


def launch_path(f, measure) -> float | None:
    """What the launch path alone (launch calls and the host's gaps under SHORT_NS between launches
    gone) saves a step f's change acts in, by the replay `measure` (savings._Start.measure)."""
    import dataclasses

    from .whatif_change import Change

    probe = dataclasses.replace(f, children=[])
    try:
        measure(probe, [Change("no_launch_overhead", gap_ns=SHORT_NS)])
    except ValueError:
        return None
    return probe.saves_ms_in_steps


def _launch_path_clause(ms: float | None) -> str:
    if ms is None:
        return ""
    said = f"about {ms:,.1f} ms" if ms >= 0.05 else "under 0.05 ms"
    return (
        f"; the launch path alone (the CUDA calls' own host time and the host's gaps under 0.1 ms between "
        f"them gone; the calls run in the longer gaps too) would save {said} a step in a replay"
    )


def name_the_waits(trace: Trace, breakdowns: list[RankBreakdown], f, launch_path_ms: float | None) -> None:
    """A host-paced finding (launch.py, host_paced.py) names the host ops its GPU's longer waits
    fall in, on the rank of its ranks waiting most in them, and what the launch path alone saves:
    the rest of its saving is the host's work between launches (fsdp's FSDP hooks). The waits are
    the title's own (launch.step_launch: gaps of SHORT_NS or more between the work other than
    NCCL's that end at an op launched after the GPU went idle, each up to its launch's return), in
    the steps it judged host-paced: every gap in the GPU's ops was another set (NCCL ran in some)
    and named fsdp's _unshard for 10.7 ms a step where 36 ms of the title's waits lie in it."""
    from .launch import step_launch

    hit = set(f.metrics.get("launch_bound_steps") or [])
    splits: list[tuple[dict, int]] = []
    for r in f.ranks:
        rb = next((x for x in breakdowns if x.rank == int(r)), None)
        if rb is None:
            continue
        gpu = rb.ops if rb.ops is not None else gpu_ops(trace, rb.rank)
        if rb.ops is None:  # (the map drops them)
            rb = dataclasses.replace(rb, ops=gpu, op_step=None)
        per = step_launch(trace, rb, spans=True)
        steps = [k for k in per if k in hit] or [k for k in per if k is None]
        if not steps:
            continue
        spans = [
            (x, y, z)
            for k in steps
            for x, y, z in zip(
                *(
                    np.asarray(v).tolist()
                    for v in (*(per[k].get("long_gap_spans") or ((), ())), per[k].get("long_gap_next", ()))
                )
            )
        ]
        total = sum(y - x for x, y, _z in spans) / len(steps)
        splits.append(({"ops": _ops_over(trace, rb.rank, gpu, spans, len(steps)), "waits_ns": total}, int(r)))
    if splits:
        split, rank = max(splits, key=lambda t: (t[0]["waits_ns"], -t[1]))
        said = waits_sentence(split)
        if said and len(f.ranks) > 1:
            said = said.replace("the launching thread was in:", f"rank {rank}'s launching thread was in:", 1)
        f.title += said
        f.metrics["idle_gaps"] = {
            "rank": rank,
            "waits_ms": round(split["waits_ns"] / 1e6, 3),  # the title's waits of 0.1 ms or more, a step
            "ops": [{"name": n, "ms": round(v / 1e6, 3)} for n, v in split["ops"][:10]],
            "launch_path_saves_ms": launch_path_ms,
        }
    f.title += _launch_path_clause(launch_path_ms)


def waits_sentence(split: dict) -> str:
    """'; in those waits of 0.1 ms or more ... the launching thread was in: ...' (up to three ops
    holding 5% of the waits or more), or ''."""
    ops = _top_ops(split["ops"], split["waits_ns"])
    if not ops:
        return ""
    # each op's time inside the waits, not the waits' whole length (fsdp's _unshard was said for
    # 36.0 ms a step, more than its 29.6 ms of calls; helper-110)
    return (
        f"; in those waits of 0.1 ms or more (each up to its launch's return) the launching thread was in: "
        f"{ops} a step (each op's time inside the waits it spans half of or more, its callees' included)"
    )


def _figures(split: dict, rank: int, launch_path_ms: float | None) -> dict:
    return {
        "rank": rank,
        "short_ms": round(split["short_ns"] / 1e6, 3),
        "mid_ms": round(split["mid_ns"] / 1e6, 3),
        "long_ms": round(split["long_ns"] / 1e6, 3),
        "ops": [{"name": n, "ms": round(v / 1e6, 3)} for n, v in split["ops"][:10]],
        "launch_path_saves_ms": launch_path_ms,
    }


def name_the_idle(trace: Trace, breakdowns: list[RankBreakdown], f, launch_path_ms: float | None = None) -> None:
    """The low-utilization finding f (priced by the CUDA-graph bound: nothing else explains its
    idle) says where its worst rank's GPU idles, and keeps the figures in metrics.idle_gaps;
    launch_path_ms: what the launch path alone (launch calls and host gaps under SHORT_NS between
    launches gone) saves a step it acts in, said beside."""
    if not f.ranks:
        return
    rank = int(f.ranks[0])
    rb = next((x for x in breakdowns if x.rank == rank), None)
    split = idle_split(trace, rb) if rb is not None else None
    if split is None:
        return
    f.title += sentence(split, rank, len(f.ranks)) + _launch_path_clause(launch_path_ms)
    f.metrics["idle_gaps"] = _figures(split, rank, launch_path_ms)
