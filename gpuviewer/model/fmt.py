"""Numbers and text for people: times in their own unit (s, ms, µs, ns) and HTML escaping.
Qt-free, so reports and the command line format exactly as the window does without loading a
GUI toolkit."""

from __future__ import annotations

import html
import math

from .numbered import kept_pct


def format_ns(v: float, spacing: float | None = None, ref: float | None = None) -> str:
    """A time in the unit of its size (or of `ref`'s: one unit along an axis), with decimals
    enough to tell values `spacing` apart: '20 ms' (not '20000 µs') at a 1 ms spacing,
    '1.0191788 s' (not '1019178800 ns') at 200 ns."""
    size = max(abs(v), abs(ref) if ref is not None else 0.0, abs(spacing) if spacing else 0.0)
    for unit, name in ((1e9, "s"), (1e6, "ms"), (1e3, "µs")):
        if size >= unit:
            return f"{v / unit:.{_dec(spacing, unit)}f} {name}"
    return f"{v:.0f} ns"


def _dec(spacing: float | None, unit: float) -> int:
    """Decimals that tell values `spacing` apart in this unit (3 without a spacing)."""
    if not spacing:
        return 3
    x = abs(spacing) / unit
    if x >= 1:
        return 0 if x == int(x) else 1
    return min(9, math.ceil(-math.log10(x) - 1e-9))


def format_duration(ns: float) -> str:
    """A duration with three decimals in its own unit (format_ns without a tick spacing)."""
    return format_ns(float(ns))


def under_ms(ns: float) -> str:
    """A time under a millisecond for a sentence: '20 ns', '1.5 µs', '188 µs' (a 20 ns span
    printed as '0 µs' read as nothing at all)."""
    if ns < 1_000:
        return f"{ns:.0f} ns"
    return f"{ns / 1e3:.1f} µs" if ns < 10_000 else f"{ns / 1e3:,.0f} µs"


def format_bytes(n: float) -> str:
    """A size in decimal units, as the memory findings say them: '127.4 MB', '1.9 GB'."""
    for unit, name in ((1e12, "TB"), (1e9, "GB"), (1e6, "MB"), (1e3, "KB")):
        if abs(n) >= unit:
            return f"{n / unit:.1f} {name}"
    return f"{n:.0f} B"


def short_name(kernel: str) -> str:
    """A kernel's name without its return type, namespaces' templates and arguments, as a sentence
    can carry it ('void at::native::vectorized_elementwise_kernel<4, ...>(int, ...)' ->
    'at::native::vectorized_elementwise_kernel'); an anonymous namespace is no argument list
    ('at::native::(anonymous namespace)::distribution_..._kernel<...>(...)' was cut to
    'at::native::')."""
    k = kernel.removeprefix("void ").strip()
    k = k.replace("(anonymous namespace)::", "")
    cut = min((i for i in (k.find("<"), k.find("(")) if i > 0), default=len(k))
    return k[:cut]


def esc(s: str) -> str:
    """Text for HTML (reports, Qt rich text): quotes too, since reports put names in attributes."""
    return html.escape(s)


def number_list(nums, dash: str = "-") -> str:
    """Numbers (steps, ranks) for a sentence, sorted, runs of three or more as ranges, the last
    joined by "and": "3", "4 and 5", "2, 4 and 7", "3-9", "0-3, 5 and 8-11"."""
    ns = sorted(nums)
    parts, i = [], 0
    while i < len(ns):
        j = i
        while j + 1 < len(ns) and ns[j + 1] == ns[j] + 1:
            j += 1
        if j - i >= 2:
            parts.append(f"{ns[i]}{dash}{ns[j]}")
        else:
            parts += [str(r) for r in ns[i : j + 1]]
        i = j + 1
    return ", ".join(parts[:-1]) + (" and " if len(parts) > 1 else "") + (parts[-1] if parts else "")


def counted(n: int, noun: str) -> str:
    """ "1 warning", "2 warnings", "12,345 events": the noun agrees with its number."""
    return f"{n:,} {noun}" + ("" if n == 1 else "s")


# what else held the GPU, beside the compute share, in the order the rank line says it
_GPU_PARTS = (("nccl_wait", "NCCL waiting"), ("nccl_transfer", "NCCL transfer"), ("copy", "copies"), ("idle", "idle"))


# beside a rank's one NCCL share where none of its collectives was matched with another rank's
# (the rank line here, the low-utilization finding: analysis.rules.utilization)
UNSPLIT_NCCL_NOTE = " (waiting not told apart from transfer: none of its peers' arrivals on record)"


def unsplit_nccl_note(partial: list[int] | tuple[int, int] | None) -> str:
    """The NCCL note of a rank whose waiting is not told apart: none of its peers on record, or
    (partial: ranks on record, world size) only a part of the job's ranks."""
    if partial:
        return f" (waiting not told apart from transfer: {partial[0]} of the job's {partial[1]} ranks on record)"
    return UNSPLIT_NCCL_NOTE


def unmatched_nccl_note(share: float) -> str:
    """The clause after "NCCL transfer X%" where part of it is kernels matched with no other
    rank's (analysis.pairing: a sampled trace, kernels the other ranks' traces lack)."""
    if share < 0.005:
        return ""
    return f" (including {share:.0%} in kernels matched with no other rank's: their waiting not told apart)"


def gpu_on_record(r: dict) -> bool:
    """Whether a rank's analysis row (analyze --json's ranks[]) has GPU time to share out."""
    sh = r.get("utilization_breakdown") or {}
    return bool(r.get("gpu_utilization")) or any(sh.get(k) for k, _ in _GPU_PARTS)


def utilization_line(r: dict) -> str:
    """One rank's utilization in words, from its analysis row (analyze --json's ranks[]): the GPU
    utilization is the compute share; beside it what else held the GPU, and the host's split."""
    u = r.get("gpu_utilization") or 0.0
    out = f"GPU utilization {u:.0%} (compute)"
    sh = r.get("utilization_breakdown") or {}
    said = [(k, label) for k, label in _GPU_PARTS if k in sh]
    if not gpu_on_record(r):
        # no GPU time to share out (a CPU-only capture, no kernels in its steps): "utilization 0%,
        # idle 0%" would contradict itself
        out, said = "no GPU work on record", []
    parts = [
        (label, sh[k], unmatched_nccl_note(r.get("nccl_unmatched") or 0.0) if k == "nccl_transfer" else "")
        for k, label in said
    ]
    if r.get("nccl_split") is False:  # analysis.reduce._unsplit: none of its peers' arrivals on record
        nccl = sh.get("nccl_transfer", 0.0) + sh.get("nccl_wait", 0.0)
        parts = [("NCCL", nccl, unsplit_nccl_note(r.get("nccl_ranks")))] + [
            (label, sh[k], "") for k, label in said if not k.startswith("nccl_")
        ]
    if parts:
        out += "; " + ", ".join(f"{label} {v:.0%}{note}" for label, v, note in parts)
        # compute beside NCCL (DDP's all-reduce under the backward) counts in both: the shares add
        # up to more than 100%, which a reader adding them should be told, by the printed figures
        over = round(100 * u) + sum(round(100 * v) for _, v, _n in parts) - 100
        # (said wherever the printed figures add up to 102% or more: nsys_ddp's rank 1 printed
        # 102% beside a real 101.2% without a word)
        real = u + sum(v for _, v, _n in parts) - 1
        # (101% too where half a percent or more of the time held two kinds of work: con_kernel's
        # 100.84% printed as 101% without a word beside profile1's 104% with one; an audit)
        if over >= 2 or (over >= 1 and real >= 0.005):
            why = "work ran on two streams at once" if real >= 0.002 else "rounded"
            out += f" (they add up to {100 + over}%: {why})"
    steps = [s for s in r.get("steps") or [] if not s.get("warmup")] or r.get("steps") or []
    span = ""
    gpu_ns = sum(
        s.get("end_ns", 0) - s.get("start_ns", 0) + s.get("idle_before_ns", 0) + s.get("idle_after_ns", 0)
        for s in steps
    )
    busy = sum(s.get("busy_ns", 0) for s in steps)
    if said and 0 < gpu_ns < 1_000_000:  # host_bound.MIN_GPU_TIME_NS: no low-utilization finding below it
        out += f" (of {under_ms(gpu_ns)} of GPU time: too little to judge)"
    elif said and 0 < busy < 1_000_000:  # nor below it of GPU work
        # the shares are of the window, which holds that little work ('idle 98% (of 372 µs of
        # GPU work …)' read as 98% of the 372 µs; an audit's finding)
        out += f" (of {gpu_ns / 1e6:,.1f} ms holding {under_ms(busy)} of GPU work: too little to judge)"
    elif said and len(steps) == 1 and steps[0].get("step") is None and gpu_ns > 0:
        # a capture without steps is measured from its GPU's first op to its last, not over the
        # capture the findings' savings are of (cloverleaf: 342 of 618 ms, 240 ms of cudaMalloc
        # before; breakdown.rank_breakdown)
        out += f" (of the {gpu_ns / 1e6:,.1f} ms from its GPU's first op to its last)"
        span = ", over the same span"  # the host is split over that window too (breakdown.rank_breakdown)
    whole = len(steps) == 1 and steps[0].get("step") is None
    host = r.get("host_breakdown") or {}
    # a capture without steps whose GPU work is too little to judge: its host's shares neither
    if any(host.values()) and (span or not whole):
        # framework time under annotations alone (record_function ranges, no op under them on
        # record: HTA's trace_filter, 98% framework of which about half is '## backward ##' alone)
        note = r.get("host_annotation_only") or 0.0
        pyo = r.get("host_python_only") or 0.0
        # and in Python frames alone: the Python tracer's events, no op or call under them (ddp_clean
        # rank 1's 'framework ops 84%', a quarter of it Python only; an audit)
        incl = [
            f"{note:.0%} in annotated ranges with no op recorded under them" if f"{note:.0%}" != "0%" else "",
            f"{pyo:.0%} in Python code with no op or call under it: the Python tracer's frames alone"
            if f"{pyo:.0%}" != "0%"
            else "",
        ]
        inc = "; ".join(x for x in incl if x)
        within = {"framework": f" (including {inc})" if inc else ""}
        # calls allocating or freeing memory, counted with the launches (extra-p's profile1: 43% of
        # its host time in cudaHostAlloc, cudaFreeHost, cudaMalloc and cudaFree, said as 'launch calls 45%')
        alloc = r.get("host_alloc_calls") or 0.0
        launch_label = "launch calls"
        # (where they are a tenth of that part or more: nsys_single's 1% of 20% is left unsaid)
        inside = []
        if f"{alloc:.0%}" != "0%" and alloc >= 0.1 * (host.get("launch") or 0.0):
            launch_label = "launch and other CUDA calls"
            inside.append(f"{alloc:.0%} in calls allocating or freeing memory: cudaMalloc, cudaFree, cudaHostAlloc…")
        lc = r.get("host_longest_call")  # a capture without steps' one long call (host_split.longest_call)
        if lc:
            inside.append(f"{lc['share']:.0%} in one {lc['name']} call of {lc['ms']:,.1f} ms")
        if inside:
            within["launch"] = f" (including {'; '.join(inside)})"
        kept = r.get("host_events_kept")
        # a sampled or filtered trace: the shares are of the host events left in it (HTA's
        # trace_filter: 1% of them, where "framework ops 98%" read as the host's own time)
        out += (
            "; host"
            + span
            + (
                f" (of the {kept_pct(kept)} of its host events its trace holds: sampled or filtered)"
                if kept is not None
                else ""
            )
            + ": "
        ) + ", ".join(
            # (nsys_single: its 'framework ops 0%' read as no framework overhead, where the capture
            # records no op ranges at all and 'no op recorded 80%' holds that work; an audit's)
            "framework ops: none on record (no op ranges in this capture)"
            if k == "framework" and r.get("host_ops_recorded") is False
            else f"{label} {host[k]:.0%}" + within.get(k, "")
            for k, label in (
                ("framework", "framework ops"),
                ("launch", launch_label),
                # said only where it happened (never as 0%: analyze --json rounds the shares to
                # 4 places, so 0.005 is a share it can give): a GPU-bound run's host waiting in
                # launch calls
                ("queue", "blocked on a full launch queue"),
                # a pageable copy's call holds the host as a sync does, and is counted with them
                # (copy.json.gz: 53 of its 71 points; "syncs" alone sent an audit looking for them)
                ("sync", "syncs and blocking copies"),
                # only where one is on record: the Python tracer's (with_stack) sleep, lock or
                # queue, or nsys's OS runtime trace's sleep or poll on the loop's thread
                ("wait", "waits (sleep, locks, queues, polls)"),
                # only where gloo or MPI ran them on the host's threads (HTA's cpu_only, saxpy's MPI_Send)
                ("coll", "communication on the host (gloo or MPI)"),
                # host time inside no recorded op: untraced Python (an nsys run without NVTX
                # ranges), a sleep, I/O; the profiler cannot tell which, so never called "idle"
                ("idle", "no op recorded"),
            )
            if k in host and (k not in ("queue", "wait", "coll") or f"{host[k]:.0%}" != "0%")
        )
        tw = r.get("host_thread_wait") or 0.0
        if "idle" in host and (f"{tw:.0%}" != "0%" or f"{r.get('host_loop_wait') or 0.0:.0%}" != "0%"):
            # an OS trace shows the loop's thread waiting on another of its threads (nsys_single's
            # main thread in pthread_cond_wait while the autograd thread runs the backward); all
            # of its wait said beside the part in 'no op recorded' (nsys_ddp_big's '8%' read as the
            # loop's whole wait, 50-57% of each step; an audit)
            lw = max(r.get("host_loop_wait") or 0.0, tw)
            out += (
                f" (the loop's thread waits on another of its threads, in a condition variable, lock or join or in "
                f"autograd's run_backward, {lw:.0%} of the host time"
                + (
                    f", {tw:.0%} with nothing else of its launching threads on record: within 'no op recorded')"
                    if f"{tw:.0%}" != "0%"
                    else ": its other threads' work, in the shares above)"
                )
            )
    return out
