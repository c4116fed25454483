"""What every rule builds on: the advice of the bottleneck guide by rule, the finding record, and
the time a map-side finding lost on the critical path (settled in the reduce). Apart from rules.py,
which imports the rule modules to register them, so those modules import this, not rules.py."""

from __future__ import annotations

import re

from .breakdown import RankBreakdown

# low_gpu_utilization's advice when something other than idling fills most of the GPU's time (the
# default advice says it waits for work): by that share, when it is half the GPU's time or more
# (shares may overlap compute, so a smaller one says nothing about what is exposed); framework-neutral
LOW_UTIL_ADVICE = {
    "queued": "The GPU idles with its next work already launched: it waits on a dependency, not on the "
    "host. Look at what the op after each long gap waits for: an event recorded on another stream "
    "(cudaStreamWaitEvent, a stream's wait_stream), a collective or copy on another stream or rank, or "
    "a CUDA graph's own order; start that work earlier or overlap it, and move host syncs (.item(), "
    ".cpu()) that then wait on this backlog later in the step.",
    "copy": "Memory copies fill most of the GPU's time, not compute. Keep data on the device between "
    "steps (no round trips to the host), copy input batches from pinned memory asynchronously so "
    "the copy overlaps compute, and move less data per step.",
    "nccl_wait": "Communication kernels fill most of the GPU's time waiting for other ranks or stages to "
    "arrive: what makes those late is the thing to fix (see the other findings), not the link.",
    "nccl": "Communication kernels fill most of the GPU's time, and with no other rank's trace in the "
    "session their waiting for the others is not told apart from their moving data: open the job's "
    "ranks together. Waiting: fix what makes the others late; moving data: overlap it with compute "
    "and send less per step.",
    "nccl_transfer": "Collectives moving data fill most of the GPU's time, not compute. Overlap "
    "communication with compute, send less per step, and check the link's bandwidth.",
}

# low_gpu_utilization's advice under such a finding: not an input pipeline's (HTA's alexnet: its 99%
# idle is 30 s of CUDA context and library start-up, where 'DataLoader workers' fitted nothing)
WHOLE_CAPTURE_IDLE_ADVICE = (
    "The GPU waits for the host most of the capture, and the trace marks no steps: see the finding "
    "above for where the host was; one-time start-up costs can weigh as much as the work in such a capture."
)

# host_bound_idle's advice for a capture that marks no steps: its gap is not an input pipeline
# (nothing says it recurs), and such a capture often holds a process's one-time start-up
# (a PyTorch profiler capture's, an Nsight Systems capture's)
WHOLE_CAPTURE_ADVICE = (
    "The trace marks no steps, so its one-time costs (the first CUDA calls, loading libraries and kernels, "
    "cuDNN autotuning, the first allocations) are measured with the work and can weigh as much. Profile training steps after a "
    "warm-up: torch.profiler's schedule (wait, warmup, active) with prof.step() once an iteration; then "
    "see whether the host still keeps the GPU waiting in every step.",
    "The trace marks no steps, so its one-time costs (the first CUDA calls, loading libraries and kernels, "
    "the first allocations) are measured with the work and can weigh as much. Mark each iteration with an "
    "NVTX range (nvtxRangePushA/nvtxRangePop in C/C++; torch.cuda.nvtx.range or nvtx.annotate in Python) "
    "and capture after a warm-up (nsys --capture-range=cudaProfilerApi "
    "or --capture-range=nvtx); then see whether the host still keeps the GPU waiting in every step.",
)

ADVICE = {
    "low_gpu_utilization": "The GPU waits for work most of the step. Find what the host does in the gaps "
    "(see the other findings): feed it faster (DataLoader workers, pin_memory, GPU-side "
    "preprocessing), launch less often (torch.compile, CUDA graphs), or give it more "
    "work per launch (larger batch, AMP so Tensor Cores are used).",
    "host_bound_idle": "The GPU drains while the host is busy elsewhere at the start of the step: an input "
    "pipeline that is too slow. Use DataLoader(num_workers>0, pin_memory=True, "
    "persistent_workers=True, prefetch_factor), move preprocessing to the GPU, and "
    "overlap the next batch's copy (non_blocking=True) with this step's compute.",
    "launch_bound": "Many tiny kernels separated by about the launch cost: the CPU cannot launch fast "
    "enough. Fuse them (torch.compile), capture the step in CUDA graphs, use a fused "
    "optimizer (fused=True, as in torch.optim.AdamW(..., fused=True): one kernel for all parameters, where "
    "the default foreach still launches several a parameter group), and use bigger tensors per kernel (batch more).",
    "exposed_communication": "Communication is not hidden behind compute. Overlap it: DDP bucket size "
    "(bucket_cap_mb), gradient accumulation with no_sync, FSDP prefetch; keep "
    "tensor parallel inside an NVLink domain; fix the late rank first if one "
    "rank waits in every collective.",
    "straggler": "One rank arrived late and every other rank waited for it in the collectives. Look at "
    "what that rank's host did (the evidence): data loading, logging, checkpointing, "
    "garbage collection, a slow node. Balance the work or move the stall off the step.",
    "step_outlier": "One step is far slower than the rest. Look for synchronous host-device copies "
    "(.cpu(), .item(), pageable memory), allocator churn (cudaMalloc/cudaFree after "
    "empty_cache), checkpointing or evaluation inside the step; pin memory and keep "
    "tensors on the GPU.",
    "pipeline_bubble": "Pipeline stages sit idle at the ramp-up and ramp-down. Use more micro-batches "
    "(bubble = (p-1)/(m+p-1)), an interleaved 1F1B schedule, and balance the layers "
    "so no stage is heavier than the others (the last stage holds the LM head and loss).",
    "pipeline_launch_bound": "The pipeline is slowed by kernel launches, not by its schedule: the stage with "
    "the most work idles between its own tiny kernels and the other stages wait for it. "
    "More micro-batches would add launches. Capture each stage's forward and backward in "
    "CUDA graphs or torch.compile it (mode='reduce-overhead'), use fewer, larger "
    "micro-batches and fused optimizers; then look at the bubble again.",
    "all_to_all": "All-to-all exchanges (MoE expert parallelism, sharded embedding tables, sequence "
    "parallelism) send every rank's share to every other rank: their time grows with the "
    "group and its slowest link. Keep the group inside an NVLink domain, balance the splits "
    "(tokens per expert, ids per shard), and overlap the exchange with compute.",
    "sm_contention": "The ranks run the same kernels, but on the rank that waits at the collectives they "
    "share the SMs with its NCCL kernels, which occupy SMs while they spin waiting for the "
    "late rank. It is a symptom of the wait: fix the late rank first (see the straggler "
    "finding); NCCL_MAX_CTAS / NCCL_NCHANNELS_PER_NET_PEER limit the SMs NCCL holds.",
    "slow_gpu": "The ranks run the same kernels but one rank's GPU takes longer, not while it "
    "communicates: check its clocks, power and thermal throttling (nvidia-smi -q -d "
    "PERFORMANCE,CLOCK), ECC and XID errors, and other processes on that GPU.",
    "load_imbalance": "Ranks do unequal work, so the fast ones wait for the slow one at every "
    "collective. Balance the partition (layers per pipeline stage, sequence lengths "
    "per data-parallel rank) or move extra work off the slow rank.",
    "topology_split": "The communication group crosses slow paths (another NVLink island, a PCIe "
    "host bridge, the inter-socket link). Keep tensor parallel and the chattiest "
    "groups inside an NVLink domain; place ranks so each group maps to one island; "
    "check NCCL_P2P_LEVEL and that P2P is not disabled.",
    "copy_bound": "The GPU spends its time copying memory, not computing. Keep data on the GPU between "
    "steps (no .cpu()/.to() round trips), copy from pinned memory with non_blocking=True so the "
    "copy overlaps compute (DataLoader(pin_memory=True)), copy once and reuse, and move "
    "preprocessing to the GPU.",
    "host_sync": "The host stops at synchronize calls until the GPU has finished its queued work, so it "
    "cannot queue the next work meanwhile and the GPU waits for it after each one. Remove the syncs "
    "the host does not need a result from (timing, error checks, torch.cuda.synchronize() left in "
    "the loop); order work between "
    "streams with events (stream.wait_event) instead of host syncs. Syncs inside a framework "
    "(FSDP's limit_all_gathers rate limiter, cuDNN benchmark autotuning in the first steps) are "
    "its settings' to change.",
    "slow_link": "The collectives move data far slower than the link between these GPUs carries: NCCL's "
    "peer-to-peer path is not used, so every transfer is staged through host memory. Check "
    "NCCL_P2P_DISABLE and NCCL_P2P_LEVEL (unset them), that the IOMMU / PCIe ACS does not block "
    "P2P (nvidia-smi topo -p2p r), that the GPUs are visible to one process or container together, "
    "and run NCCL_DEBUG=INFO: its log says 'via P2P' or 'via SHM' for each channel.",
    "warmup": "The first step pays one-time costs (CUDA context, cuDNN/cuBLAS autotuning, NCCL "
    "communicator set-up, allocator growth, torch.compile). Profile after it: a profiler "
    "schedule with wait/warmup steps, or skip it when reading the numbers.",
    "unattributed_ops": "These GPU ops have no launch record (no correlation to a CUDA call) and start "
    "outside every step's host range, so the per-step numbers (busy, utilization, "
    "windows) leave them out. Record CPU and CUDA activities together "
    "(torch.profiler activities=[CPU, CUDA]; nsys -t cuda) so each op's launch is "
    "kept, and profile whole steps.",
    "memory_headroom": "Peak allocated memory is close to the device's capacity: an OOM risk and "
    "allocator thrash. Use activation checkpointing, a smaller micro-batch, 8-bit "
    "optimizers or sharded optimizer state (ZeRO/FSDP), and free tensors held "
    "outside the step.",
}


def finding(rule, severity, title, ranks, step, start, end, metrics, impact_ns=0.0) -> dict:
    return {
        "rule": rule,
        "severity": severity,
        "title": title,
        "ranks": [int(r) for r in ranks],
        "step": None if step is None else int(step),
        "start_ns": int(start),
        "end_ns": int(end),
        "metrics": metrics,
        "advice": ADVICE[rule],
        "impact_ms": round(float(impact_ns) / 1e6, 3),
        "children": [],
    }


def deferred(f: dict, lost: dict) -> dict:
    """A map-side finding whose impact the reduce settles (critical() needs the waits)."""
    f["_lost"] = lost
    return f


def settle(f: dict, rb: RankBreakdown) -> dict:
    """The reduce's half of deferred(): the impact, now that rb's steps know their waits."""
    lost = f.pop("_lost", None)
    if lost is not None:
        f["impact_ms"] = round(critical(rb, lost) / 1e6, 3)
    return f


def critical(rb: RankBreakdown, lost: dict) -> float:
    """Time lost on the job's critical path: per step, what the rank lost beyond the time it
    waited for other ranks anyway (a rank that waits at the collectives would only wait longer
    if its own losses went away) and beyond the time it made the others wait (that is the late
    rank's finding: its GPU idling while its host is late is the same lost time)."""
    return float(sum(max(0.0, float(lost.get(s.step, 0)) - s.wait_ns - s.caused_ns) for s in rb.measured))


# the advice's hint to move matmuls onto Tensor Cores ("larger batch, AMP so Tensor Cores are used")
TC_HINT = re.compile(r", (AMP|bf16) so Tensor Cores are used\)")
TC_ALREADY = 0.8  # of the matmul, convolution and attention kernels' time on Tensor Cores


def drop_tensor_core_hint(findings, families: list[dict]) -> None:
    """Where most of the matmul, convolution and attention kernels' time already runs on Tensor
    Cores (the efficiency families), the advice does not ask for them (the JAX trace's GEMMs and
    nsys_single's: 'bf16 so Tensor Cores are used' asked for what was done). In place."""
    mm = [f for f in families if f.get("kind") in ("gemm", "conv", "attention")]
    t = sum(f["time_ns"] for f in mm)
    if not t or sum(f["time_ns"] for f in mm if f.get("tensor_cores") is True) < TC_ALREADY * t:
        return
    for f in findings:
        if f.advice:
            f.advice = TC_HINT.sub(")", f.advice)
