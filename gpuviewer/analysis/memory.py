"""Memory: peak allocated per device (whole trace and per step) against the device's capacity."""

from __future__ import annotations

import numpy as np

from ..model.trace import Trace


def allocated_counters(trace: Trace):
    """The allocator's allocated-bytes curves (Kineto [memory], nsys CUDA memory usage). A
    snapshot replay is relative to its ring buffer's start, so it is not used for peaks."""
    return [c for c in trace.counters if c.name == "allocated" and c.device >= 0 and len(c.v)]


def peak_bytes_by_rank(trace: Trace) -> dict[int, dict[int, int]]:
    """{rank: {device: maximum allocated bytes}}, exactly the counter's maximum."""
    out: dict[int, dict[int, int]] = {}
    for c in allocated_counters(trace):
        d = out.setdefault(c.rank, {})
        d[c.device] = max(d.get(c.device, 0), int(np.max(c.v)))
    return out


def capacity_bytes(trace: Trace, rank: int, device: int) -> int | None:
    info = next((r for r in trace.ranks if r.rank == rank), None)
    if info is None:
        return None
    props = info.device_props.get(device) or {}
    v = props.get("totalGlobalMem") or props.get("totalMemory")
    # a capacity is a positive byte count below an exabyte; a garbage property is no capacity
    return int(v) if isinstance(v, (int, float)) and not isinstance(v, bool) and 0 < v <= 1 << 60 else None


def peaks_per_step(trace: Trace, rank: int, device: int) -> list[dict]:
    """Peak allocated within each step window: the top of the sawtooth."""
    cs = [c for c in allocated_counters(trace) if c.rank == rank and c.device == device]
    if not cs:
        return []
    t = np.asarray(cs[0].t)
    v = np.asarray(cs[0].v)
    out = []
    for st in sorted(trace.steps_of_rank(rank), key=lambda s: s.start):
        lo, hi = np.searchsorted(t, st.start), np.searchsorted(t, st.end, side="right")
        if hi > lo:
            k = lo + int(np.argmax(v[lo:hi]))
            out.append({"step": st.step, "peak_bytes": int(v[k]), "t_ns": int(t[k])})
    return out


# What a peak is made of decides the advice: memory held across steps (parameters, gradients,
# optimizer state, caches, tensors kept alive) is not lowered by activation checkpointing, and
# what each step adds on top of it (activations, temporaries) is not lowered by sharding.
HELD_ADVICE = (
    "Most of the peak is held across steps, not allocated by the step: parameters, gradients, "
    "optimizer state, caches and tensors kept alive between steps (a preloaded dataset or buffer "
    "on the GPU, losses kept with their graphs). Shard parameters, gradients and optimizer state "
    "(FSDP / ZeRO), use 8-bit or CPU-offloaded optimizer state, keep data on the host until a step "
    "needs it and free what the steps do not use; activation checkpointing would not lower it."
)
STEP_ADVICE = (
    "Most of the peak is what each step allocates on top of what is held (activations and "
    "temporaries): use activation checkpointing, a smaller micro-batch with gradient accumulation, "
    "mixed precision and fused kernels (fewer saved intermediates)."
)


def held_and_added(trace: Trace, rank: int, device: int) -> tuple[int, int, int] | None:
    """(bytes held across the steps: the least allocated inside any step, bytes a step adds on
    top: the median over the steps of its peak above that, and how much the steps' lows grew from
    the first step's to the last's), or None without steps or samples."""
    cs = [c for c in allocated_counters(trace) if c.rank == rank and c.device == device]
    if not cs:
        return None
    t, v = np.asarray(cs[0].t), np.asarray(cs[0].v)
    floors, peaks = [], []
    for st in trace.steps_of_rank(rank):
        lo, hi = np.searchsorted(t, st.start), np.searchsorted(t, st.end, side="right")
        if hi > lo:
            floors.append(int(v[lo:hi].min()))
            peaks.append(int(v[lo:hi].max()))
    if not floors:
        return None
    held = min(floors)
    return held, int(np.median([p - held for p in peaks])), max(0, floors[-1] - floors[0])
