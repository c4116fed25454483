"""The rules: each turns the measurements into findings (a place on the timeline, the numbers
behind it, the time it cost, advice in the terms of the bottleneck guide). Per-rank rules report
one rank; findings.py merges the same finding across ranks and ranks them by impact.

Rules that need a rank's events (host-bound, launch-bound, step outliers, memory) run in the
rank's map (rankmap.py); their time lost on the critical path depends on the waits only the
reduce knows, so they leave it as `_lost` (per step) for settle(). Rules over steps alone
(utilization, exposed communication) and across ranks run in the reduce: pipelines and all-to-all
(pipeline.py), unequal compute told apart from SM contention (contention.py); launch-bound is
judged per step in launch.py. Their facts come from each rank's map (job_facts)."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ..model.categories import Cat
from ..model.fmt import format_bytes, number_list, unmatched_nccl_note, unsplit_nccl_note
from ..model.trace import Trace
from . import contention, outliers, pipeline, syncs
from .breakdown import RankBreakdown
from .host_bound import MIN_GPU_TIME_NS, host_bound
from .host_paced import launch_family
from .issuers import FSDP_OFFLOAD_ADVICE, issued_in
from .memory import HELD_ADVICE, STEP_ADVICE, allocated_counters, capacity_bytes, held_and_added, peaks_per_step
from .rule_base import (  # noqa: F401 - used here and by callers
    ADVICE,
    LOW_UTIL_ADVICE,
    critical,
    finding,
    settle,
)

LOW_UTILIZATION = 0.70  # the guide's threshold
MEM_HEADROOM_WARN = 0.80


def _span(rb: RankBreakdown) -> tuple[int, int]:
    st = rb.measured
    return (min(s.start_ns for s in st), max(s.end_ns for s in st)) if st else (0, 0)


def _warm_note(rb: RankBreakdown) -> str:
    w = [s.step for s in rb.steps if s.warmup]
    return f" (warm-up step {w[0]} left out)" if w else ""


def utilization(rb: RankBreakdown, unsplit: bool = False, partial: tuple[int, int] | None = None) -> list[dict]:
    """GPU utilization is the compute share: NCCL kernels spinning while they wait for another
    rank, and copies, keep the GPU busy without doing the model's work. unsplit: none of the
    rank's collectives was matched with another rank's, so its NCCL time is not split into
    waiting and transfer (reduce.nccl_unsplit)."""
    sh = rb.shares()
    if unsplit:
        sh["nccl"] = sh.pop("nccl_wait") + sh.pop("nccl_transfer")
    u = sh["compute"]
    if not rb.measured or u >= LOW_UTILIZATION or not rb.n_ops:
        return []  # no GPU work recorded (a CPU-only trace, a memory snapshot) says nothing
    if min(sum(s.gpu_time_ns for s in rb.measured), sum(s.busy_ns for s in rb.measured)) < MIN_GPU_TIME_NS:
        # a share of microseconds (HTA's large_integer: one 50 us NCCL kernel, "100%") says
        # nothing, nor does a toy's (extra-p's ex-gpu: 30 us of kernels in a 3 ms window, "1%")
        return []
    # a slow outlier step (a stall: its own finding) can hold most of the idle time: say what
    # the other steps keep (the JAX stall's 8% is 37% elsewhere); when they are not low, the
    # outlier's finding is the whole story and the gaps' advice would point the wrong way
    slow = outliers.slow_steps(rb)
    rest = [s for s in rb.measured if s.step not in slow]
    rest_w = sum(s.gpu_time_ns for s in rest)
    u_rest = sum(s.compute_ns for s in rest) / rest_w if slow and rest_w else None
    if u_rest is not None and u_rest >= LOW_UTILIZATION:
        return []
    typical = (
        f"; {u_rest:.0%} in the rank's steps other than its slow step{'s' if len(slow) > 1 else ''} {number_list(slow)}"
        if u_rest is not None and round(u_rest, 2) != round(u, 2)
        else ""
    )
    s0, s1 = _span(rb)
    beside = ", ".join(
        f"{label} {sh[k]:.0%}{note}"
        for k, label, note in (
            ("nccl_wait", "NCCL waiting", ""),
            ("nccl_transfer", "NCCL transfer", unmatched_nccl_note(rb.nccl_unmatched_share())),
            ("nccl", "NCCL", unsplit_nccl_note(partial)),
            ("copy", "copies", ""),
            ("idle", "idle", ""),
        )
        if sh.get(k, 0.0) >= 0.005
    )
    # what fills the GPU's time when it is not computing: the advice is about that (a pageable copy
    # that fills the step is not a GPU waiting for work)
    mostly = max((k for k in ("nccl_wait", "nccl_transfer", "nccl", "copy", "idle") if k in sh), key=lambda k: sh[k])
    if mostly != "idle" and sh[mostly] < 0.5:
        mostly = "idle"  # nothing fills most of it: the default advice, about the gaps
    # where the GPU idles with its next work launched already: it waits on a dependency (another
    # stream, an event, another rank, a graph's order), not on its host (HTA's rank0: 525 of 534
    # ms of long gaps; the default advice, feeding the GPU faster, pointed the wrong way)
    idle_in = sum(s.idle_ns for s in rb.measured)
    queued = sum(s.idle_queued_ns for s in rb.measured) / idle_in if idle_in else 0.0
    waited = (
        f"; {queued:.0%} of its idle time inside the steps is in gaps of 0.1 ms or more before work already "
        "launched: the GPU waited for something other than its host (another stream's or rank's work, an "
        "event, a CUDA graph's own order)"
        if mostly == "idle" and queued >= 0.5
        else ""
    )
    f = finding(
        "low_gpu_utilization",
        "high" if u < 0.4 else "medium",
        f"Rank {rb.rank}: GPU utilization {u:.0%} (compute kernels' share of its time, below "
        f"{LOW_UTILIZATION:.0%}{typical}){'; ' + beside if beside else ''}{_warm_note(rb)}{waited}"
        + (
            f"; {rb.unplaced:,} {'kernels' if rb.unplaced_kernels else 'GPU ops'} without a launch "
            "record are not in any step"
            if rb.unplaced
            else ""
        ),
        [rb.rank],
        None,
        s0,
        s1,
        {
            "utilization": round(u, 4),
            "busy_share": round(sh["busy"], 4),
            "shares": {k: round(v, 4) for k, v in sh.items()},
            "compute_ms": round(rb.total("compute_ns") / 1e6, 3),
            "busy_ms": round(rb.total("busy_ns") / 1e6, 3),
            "gpu_time_ms": round(sum(s.gpu_time_ns for s in rb.measured) / 1e6, 3),
            "idle_ms": round(sum(s.idle_total_ns for s in rb.measured) / 1e6, 3),
            "mostly": mostly,
            # what its shares are of: the steps' GPU windows with the idle before and after them
            "window_ns": [
                min(s.start_ns - s.idle_before_ns for s in rb.measured),
                max(s.end_ns + s.idle_after_ns for s in rb.measured),
            ],
            **({"slow_steps": slow, "utilization_other_steps": round(u_rest, 4)} if u_rest is not None else {}),
        },
        impact_ns=critical(rb, {x.step: x.idle_total_ns for x in rb.measured}),
    )
    f["advice"] = LOW_UTIL_ADVICE.get("queued" if waited else mostly, f["advice"])
    if waited:
        f["metrics"]["idle_queued_share"] = round(queued, 4)
    return [f]


COPY_SHARE = 0.30  # copies filling this share of the GPU's time, more than compute, are the bottleneck
# ...or twice its compute and a tenth of its time: the GPU's work is mostly copies, though it idles
# most of the time for its host (saxpy: blocking pageable copies 26% of the time, compute 8%)
COPY_MIN, COPY_OVER_COMPUTE = 0.10, 2.0


def _copy_heavy(copy: float, compute: float) -> bool:
    return (copy >= COPY_SHARE and copy > compute) or (copy >= COPY_MIN and copy >= COPY_OVER_COMPUTE * compute)


MemBytes = Callable[[Trace], "tuple[np.ndarray, np.ndarray]"]


def _copy_rate(trace: Trace, ops: np.ndarray, mem_bytes: MemBytes, what: str) -> tuple[str, dict] | None:
    """The bytes the copies moved and their rate, said where every one's size is on record: the
    rate tells a link's limit (host-to-device copies near a PCIe link's rate: only moving less
    helps) from copies too small or too scattered to reach it (h100_2gpu_1s: 25.5 GB at 27.7 GB/s
    a GPU; an audit). ('its host-to-device copies move 25.5 GB ... at 27.7 GB/s; ', metrics)."""
    idx, nbytes = mem_bytes(trace)
    if not len(ops) or not len(idx):
        return None
    at = np.minimum(np.searchsorted(idx, ops), len(idx) - 1)
    if not (idx[at] == ops).all():
        return None
    got = nbytes[at]
    if (got < 0).any():  # a size not on record: no rate rather than one of a part
        return None
    total, ns = int(got.sum()), int(np.asarray(trace.columns["dur"][ops]).astype(np.int64).sum())
    if total <= 0 or ns <= 0:
        return None
    n = len(ops)
    each = f", {format_bytes(total / n)} each on average" if n > 1 else ""
    copies = f"{n:,} {what} copies" if n > 1 else f"{what} copy"
    text = f"its {copies} move{'' if n > 1 else 's'} {format_bytes(total)}{each}, at {total / ns:,.1f} GB/s; "
    return text, {"lead_copy_bytes": total, "lead_copy_gbps": round(total / ns, 3)}


def copy_bound(trace: Trace, rb: RankBreakdown, mem_bytes: MemBytes | None = None) -> list[dict]:
    """Memory copies fill the GPU's time, not compute (a pageable host-to-device copy of every
    batch, tensors moved back and forth): the GPU is busy and does none of the model's work.
    mem_bytes: (trace) -> (the memcpy/memset events, the bytes of each; -1 unknown), read from the
    files by the caller (io.mem_args.memop_bytes) and asked only here: the copies' rate."""
    sh = rb.shares()
    if not rb.measured or not _copy_heavy(sh["copy"], sh["compute"]):
        return []
    # in most steps, not one: a single slow copy is that step's outlier (step_outlier says it)
    heavy = [
        _copy_heavy(s.memcpy_ns / max(s.gpu_time_ns, 1), s.compute_ns / max(s.gpu_time_ns, 1)) for s in rb.measured
    ]
    if 2 * sum(heavy) <= len(heavy):
        return []
    c = trace.columns
    ops = rb.ops if rb.ops is not None else np.zeros(0, np.int64)
    # the measured steps' copies, as the time and share the finding leads with (warm-up and copies
    # outside every step were counted in its figures beside them; a review)
    steps = [s.step for s in rb.measured if s.step is not None]
    if steps and rb.op_step is not None and len(rb.op_step) == len(ops):
        ops = ops[np.isin(rb.op_step, steps)]
    cats = np.asarray(c["cat"][ops])
    sets = bool((cats == Cat.MEMSET).any())  # the copy time counts memsets too (copy.json.gz: 0.3 of 90.0 ms)
    ops = ops[cats == Cat.MEMCPY]
    dur = np.asarray(c["dur"][ops]).astype(np.int64)
    names = np.asarray(c["name"][ops]).astype(np.int64)
    uk, inv = np.unique(names, return_inverse=True)
    tot = np.bincount(inv, weights=dur) if len(uk) else np.zeros(0)
    top = sorted(((trace.names[int(n)], int(v)) for n, v in zip(uk, tot)), key=lambda kv: -kv[1])
    what = {"HtoD": "host-to-device", "DtoH": "device-to-host", "DtoD": "device-to-device"}
    key = next((k for k in what if top and k in top[0][0]), None)
    s0, s1 = _span(rb)
    copy_ms = rb.total("memcpy_ns") / 1e6
    # the direction of the most copy time, and its own time: the share is of every copy's
    # (h100_2gpu_1s: 97% of the GPU's time in copies, 920.8 of the 940.4 ms host-to-device)
    lead_ns = sum(v for n, v in top if key and key in n)
    # said apart where it would not print as the whole (0.1 ms steps): memsets are in the copy time
    lead = f", {what[key]} {lead_ns / 1e6:,.1f} ms of it" if key and round(lead_ns / 1e5) < round(copy_ms * 10) else ""
    pinned = sum(v for n, v in top if key and key in n and "(Pinned" in n)
    pinned_already = key == "HtoD" and lead_ns and pinned >= 0.9 * lead_ns
    # said where the host-to-device copies come from pinned memory already: pinning is no fix
    # (h100_2gpu_1s: 223 of 225 pinned, 2% compute to hide them behind; an audit's finding)
    if pinned_already and lead:
        part = "all" if pinned >= lead_ns else "over 99%" if pinned / lead_ns >= 0.995 else f"{pinned / lead_ns:.0%}"
        lead += f", {part} of that from pinned memory already"
    kind = f"{what[key]} copies" if key and not lead else "copies and memsets" if sets else "copies"
    lead_ops = ops[np.isin(names, [i for i in uk.tolist() if key and key in trace.names[int(i)]])] if key else ops
    rate = _copy_rate(trace, lead_ops, mem_bytes, what[key]) if key and mem_bytes is not None else None
    issued = issued_in(trace, lead_ops)
    where = ""
    if issued is not None:
        src, n_in, ms_in, known = issued
        where = f"; {n_in:,} of its {len(lead_ops):,} {what[key] + ' ' if key else ''}copies ({ms_in:,.1f} ms) were issued in {src}"
        if known < len(lead_ops):  # h100_2gpu_1s: 116 of 225 copies have no launch call in the capture
            where += f" ({n_in:,} of the {known:,} whose launch call is on record)"
    compute_ms = rb.total("compute_ns") / 1e6
    # copies far beyond the compute beside them cannot hide behind it: only moving less data helps
    # (h100_2gpu_1s: 920.8 ms of copies, 22.4 ms of compute a GPU; its what-if named 'copying behind
    # compute' beside keeping the data on the GPU for the whole 765 ms; an audit's finding)
    # copies from or to pageable host memory go through a staging buffer, at a fraction of the
    # link's speed and blocking: pinning is a fix beside moving less (saxpy: all 15 pageable at
    # 13-14 GB/s; 'only moving less data' ruled it out; an audit's finding)
    pageable = sum(v for n, v in top if "Pageable" in n)
    total_ns = sum(v for _n, v in top)
    paged = ""
    if total_ns and pageable >= 0.5 * total_ns:
        part = "all" if pageable >= 0.995 * total_ns else f"{pageable / total_ns:.0%}"
        paged = (
            f"; {part} of the copy time is from or to pageable host memory: pinned buffers (pin_memory, "
            "cudaHostAlloc or cudaHostRegister) copy faster, and asynchronously (cudaMemcpyAsync, non_blocking=True)"
        )
    behind = (
        f"; copying behind compute could hide at most its {compute_ms:,.1f} ms of compute: only "
        + ("faster copies (pinned memory) or moving less data remove" if paged else "moving less data removes")
        + " the rest"
        if compute_ms < 0.5 * copy_ms
        else ""
    )
    f = finding(
        "copy_bound",
        "high" if sh["copy"] >= 0.5 else "medium",
        f"Rank {rb.rank}: {kind} fill {sh['copy']:.0%} of the GPU's time ({copy_ms:,.1f} ms{lead}); "
        f"{rate[0] if rate else ''}compute {sh['compute']:.0%}{where}{paged}{behind}",
        [rb.rank],
        None,
        s0,
        s1,
        {
            "copy_share": round(sh["copy"], 4),
            "compute_share": round(sh["compute"], 4),
            "copy_ms": round(copy_ms, 3),
            "evidence": [{"name": n, "ms": round(v / 1e6, 3)} for n, v in top[:5]],
            **(rate[1] if rate else {}),
        },
        impact_ns=rb.total("memcpy_ns"),
    )
    if pinned_already:
        f["advice"] = COPY_PINNED_ADVICE  # pin_memory is done already: what is left to do
    if key == "HtoD" and issued is not None and issued[0].startswith("FSDP::pre_"):
        f["advice"] = FSDP_OFFLOAD_ADVICE
    if issued is not None:
        f["metrics"]["issued_in"] = {
            "name": issued[0],
            "copies": issued[1],
            "ms": round(issued[2], 3),
            "with_launch_call": issued[3],
        }
    return [f]


COPY_PINNED_ADVICE = (
    "The GPU spends its time copying memory, not computing, and the host-to-device copies already "
    "come from pinned memory: move less data (keep it on the GPU between steps, "
    "copy once and reuse, a smaller dtype, preprocessing on the GPU), and hide the copies behind "
    "compute where there is compute to hide them behind."
)


def unplaced(rb: RankBreakdown) -> list[dict]:
    """GPU ops the step attribution could not place: never a silent gap in the numbers."""
    if not rb.unplaced or not rb.steps or rb.steps[0].step is None:
        return []
    what = "kernels" if rb.unplaced_kernels else "GPU ops"
    s0, s1 = min(s.host_start_ns for s in rb.steps), max(s.host_end_ns for s in rb.steps)
    return [
        finding(
            "unattributed_ops",
            "low",
            f"Rank {rb.rank}: {rb.unplaced:,} {what} without a launch record "
            "were not attributed to steps (the step numbers leave them out)",
            [rb.rank],
            None,
            s0,
            s1,
            {"ops": rb.unplaced, "kernels_only": rb.unplaced_kernels},
        )
    ]


def _held_text(held: int, added: int, grew: int) -> str:
    """': 129.5 GB is held across steps and each step adds 3.6 GB on top, freed again by the next step'
    where the steps' lows do not grow (memory_pressure: 'adds' read as a leak; an audit), else
    what they grew by."""
    said = f": {held / 1e9:.1f} GB is held across steps and each step adds {added / 1e9:.1f} GB on top"
    if grew <= max(64 << 20, 0.05 * added):
        return said + ", freed again by the next step"
    return said + f"; the steps' lowest allocation grew {grew / 1e9:.2f} GB from the first step to the last (not freed)"


def spread(ns: list[int]) -> str:
    """Where the steps' figures spread wide, their range beside the median said (ddp_long's
    exposed communication: 1.8-1.9 ms in steps 2-5, 19-48 ms in 6-9; the median of the eight,
    10.5 ms, is no step's): '1.8 to 47.8 ms in the steps', else ''."""
    if len(ns) < 2:
        return ""
    lo, hi, med = min(ns), max(ns), float(np.median(ns))
    if hi - lo < max(1_000_000, 0.5 * med):
        return ""
    return f"{lo / 1e6:.1f} to {hi / 1e6:.1f} ms in the steps"


def wait_clause(exposed_ms: float, wait_ms: float, who: str = "its collectives", spread_text: str = "") -> str:
    """What exposed communication's title says of the waiting, true as written: the wait is
    measured on the collective kernels, exposed or not, so it is never said to be part of the
    exposed time; when it is longer, some of it must have run beside compute."""
    beside = " (some of it while compute runs)" if wait_ms > exposed_ms else ""
    # "a median": in ddp_long rank 0 waits 0 ms in four steps and 26-55 ms in the other four
    wide = f" ({spread_text})" if spread_text else ""
    return f"; {who} wait a median {wait_ms:.1f} ms a step{wide} for other ranks{beside}"


def exposed(rb: RankBreakdown, nouns: tuple[str, str] = ("collectives", "its collectives")) -> list[dict]:
    """nouns: what its NCCL kernels are called (pipeline.comm_nouns)."""
    steps = rb.measured
    if not any(s.comm_ns > 0 for s in steps):
        return []
    exposed = float(np.median([s.exposed_comm_ns for s in steps]))
    # the median of the steps' shares, not one median over another (pp: 69.3 ms, the median
    # step's, over 113.6 ms, another step's, read 61% where the steps hold 54%, 68% and 79%);
    # a median, as the time beside it, so one stalled step does not carry it (nsys_ddp's step 6)
    share = float(np.median([s.exposed_comm_ns / s.window_ns if s.window_ns else 0.0 for s in steps]))
    if share < 0.10 or exposed < 1_000_000:
        return []
    per_step = int(np.median([s.comm_kernels for s in steps]))
    wait = float(np.median([s.wait_ns for s in steps]))
    waits_every_step = all(s.wait_ns >= 500_000 for s in steps)
    # the step shown (its window, its evidence): the one closest to the median said, not the worst,
    # which is a stall's where there is one (nsys_ddp's step 6: 64 ms of all-reduce, mostly waiting)
    worst = min(steps, key=lambda s: (abs(s.exposed_comm_ns - exposed), s.step if s.step is not None else 0))
    wide = spread([s.exposed_comm_ns for s in steps])
    title = (
        f"Rank {rb.rank}: {'a median ' if wide else ''}{exposed / 1e6:.1f} ms a step of communication not overlapped "
        f"with compute ({wide + '; ' if wide else ''}a median {share:.0%} of the step; {per_step} {nouns[0]} a step)"
    )
    if wait >= 500_000:
        title += wait_clause(exposed / 1e6, wait / 1e6, nouns[1], spread([s.wait_ns for s in steps]))
    return [
        finding(
            "exposed_communication",
            "high" if share > 0.3 else "medium",
            title,
            [rb.rank],
            worst.step,
            worst.start_ns,
            worst.end_ns,
            {
                "exposed_ms_per_step": round(exposed / 1e6, 3),
                "share": round(share, 4),
                "comm_ms_per_step": round(float(np.median([s.comm_ns for s in steps])) / 1e6, 3),
                "wait_ms_per_step": round(wait / 1e6, 3),
                "transfer_ms_per_step": round(float(np.median([s.transfer_ns for s in steps])) / 1e6, 3),
                "collectives_per_step": per_step,
                "waits_every_step": waits_every_step,
            },
            impact_ns=critical(rb, {s.step: s.exposed_comm_ns for s in steps}),
        )
    ]


def job_facts(trace: Trace, rb: RankBreakdown) -> dict:
    """What the job rules need of one rank, computed in its map: the pipeline's facts
    (pipeline.pipeline_facts) and, under "kernels", its kernel mix per step (contention.kernel_mix)."""
    return dict(pipeline.pipeline_facts(trace, rb), kernels=contention.kernel_mix(trace, rb))


def memory_rule(trace: Trace, rank: int) -> list[dict]:
    out = []
    for cnt in allocated_counters(trace):
        if cnt.rank != rank:
            continue
        cap = capacity_bytes(trace, rank, cnt.device)
        if not cap:
            continue
        k = int(np.argmax(cnt.v))
        peak = int(cnt.v[k])
        frac = peak / cap
        if frac < MEM_HEADROOM_WARN:
            continue
        per_step = peaks_per_step(trace, rank, cnt.device)
        t = int(cnt.t[k])
        split = held_and_added(trace, rank, cnt.device)
        what = "" if split is None else _held_text(*split)
        # already there at the capture's first memory record (allocated before the profiler ran or
        # recorded: a schedule's wait and warm-up steps record none), so no allocation in the trace
        # says what holds it (memory_pressure's 128 GB tensor; an audit: 'held across steps' read as
        # the model's own state)
        before = int(cnt.v[int(np.argmin(cnt.t))]) if len(cnt.t) else 0
        if split is not None and before >= 0.5 * split[0] and before >= 1 << 30:
            # (the record's total includes its own allocation, whose size the curve does not keep:
            # 'allocated before the capture' is not said, the record's total is)
            what += (
                f"; the capture's first memory record already shows {before / 1e9:.1f} GB allocated (an "
                "allocator snapshot, torch.cuda.memory._record_memory_history in PyTorch, names what holds it)"
            )
        f = finding(
            "memory_headroom",
            "high" if frac >= 0.85 else "medium",
            f"Rank {rank} GPU {cnt.device}: peak {peak / 1e9:.1f} GB allocated of "
            f"{cap / 1e9:.1f} GB ({frac:.0%}); only {(cap - peak) / 1e9:.1f} GB headroom{what}",
            [rank],
            None,
            t - 1_000_000,
            t + 1_000_000,
            {
                "peak_bytes": peak,
                "capacity_bytes": cap,
                "headroom_bytes": cap - peak,
                "fraction": round(frac, 4),
                "device": cnt.device,
                "per_step": per_step,
                "held_bytes": None if split is None else split[0],
                "added_per_step_bytes": None if split is None else split[1],
                "allocated_at_first_record_bytes": before,
            },
        )
        if split is not None:  # advise on the larger part
            f["advice"] = HELD_ADVICE if split[0] >= split[1] else STEP_ADVICE
        out.append(f)
    return out


# -- the registry: every rule by name, where it runs and what it takes -------------------------
# Map rules run once per rank on its events (rankmap.map_rank): fn(trace, rb, kernel_stats,
# mem_bytes) -> findings (mem_bytes: copy_bound's sizes, or None), their impact settled by the reduce (settle). Rank rules run in the reduce on one
# rank's breakdown once the waits are known: fn(rb) -> findings. Job rules see every rank:
# fn(per_rank_facts, rbs) -> findings. The reduce and the map call rules only through these.
MAP_RULES: dict[str, Callable] = {
    "host_bound_idle": lambda trace, rb, ks, mem_bytes: host_bound(trace, rb),
    # launch-bound, else host-bound between launches (the same family, one finding a rank)
    "launch_bound": lambda trace, rb, ks, mem_bytes: launch_family(trace, rb, ks),
    "step_outlier": lambda trace, rb, ks, mem_bytes: outliers.step_outliers(trace, rb),
    "copy_bound": lambda trace, rb, ks, mem_bytes: copy_bound(trace, rb, mem_bytes),
    "host_sync": lambda trace, rb, ks, mem_bytes: syncs.host_syncs(trace, rb),
}
RANK_RULES: dict[str, Callable] = {
    "low_gpu_utilization": utilization,
    "unattributed_ops": unplaced,
    "exposed_communication": exposed,
}
JOB_RULES: dict[str, Callable] = {
    "pipeline_bubble": lambda facts, rbs: [f for f in pipeline.pipeline(facts, rbs) if f["rule"] == "pipeline_bubble"],
    "pipeline_launch_bound": lambda facts, rbs: [
        f for f in pipeline.pipeline(facts, rbs) if f["rule"] == "pipeline_launch_bound"
    ],
    "all_to_all": pipeline.all_to_all,
    # one comparison, three verdicts: other work, the same work beside spinning NCCL kernels, a slower GPU
    "load_imbalance": lambda facts, rbs: [
        f for f in contention.compare_work(facts, rbs) if f["rule"] == "load_imbalance"
    ],
    "sm_contention": lambda facts, rbs: [
        f for f in contention.compare_work(facts, rbs) if f["rule"] == "sm_contention"
    ],
    "slow_gpu": lambda facts, rbs: [f for f in contention.compare_work(facts, rbs) if f["rule"] == "slow_gpu"],
}
# settled in the reduce: their time lost on the critical path needs the waits
SETTLED = ("host_bound_idle", "launch_bound")
