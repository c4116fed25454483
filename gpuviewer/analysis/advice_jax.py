"""Advice in JAX's terms for a trace that JAX wrote (io/jax_trace.py): the default advice speaks
PyTorch (DataLoader, .item(), torch.compile), which a JAX user cannot act on. Rules not named here
keep their advice (topology, links and memory advice hold for any framework)."""

from __future__ import annotations

import re

import numpy as np

JAX_ADVICE = {
    "low_gpu_utilization": "The GPU waits for work most of the step. Find what the host does in the gaps "
    "(see the other findings): prefetch input batches to the device (e.g. "
    "flax.jax_utils.prefetch_to_device, tf.data/grain with prefetch), keep the whole "
    "step inside one jax.jit so XLA launches fewer, fused kernels, and give each step "
    "more work (larger batch, bf16 so Tensor Cores are used).",
    "host_bound_idle": "The GPU drains while the host is busy elsewhere at the start of the step: an input "
    "pipeline that is too slow. Prefetch batches to the device ahead of the step "
    "(jax.device_put of the next batch, prefetch_to_device), run the input pipeline in "
    "background threads (grain/tf.data with parallel map and prefetch), and move "
    "preprocessing into the jitted step.",
    "launch_bound": "Many tiny kernels separated by about the launch cost: the host cannot launch fast "
    "enough. Put the whole step (and loops: lax.scan, lax.fori_loop) inside one jax.jit so "
    "XLA fuses and launches it as one program, and let XLA use CUDA graphs "
    "(--xla_gpu_enable_command_buffer); batch more work per kernel.",
    "step_outlier": "One step is far slower than the rest. Look for host work inside the step: a value "
    "pulled to the host (float(x), x.item(), np.asarray(x), jax.device_get, printing or "
    "logging a device array) blocks until the device catches up; a recompilation (a new "
    "shape or a Python value passed as a static argument: jax.log_compiles shows it); "
    "checkpointing or evaluation inside the step.",
    "host_sync": "The host waits in block_until_ready (or another wait for the device) until the GPU has "
    "finished its queued work, so it cannot dispatch the next step meanwhile and the GPU waits for it "
    "after each wait. JAX dispatches asynchronously: block only where a value is needed on the host "
    "(logging every N steps, not every step), and let the next step's dispatch overlap this one's work.",
    "copy_bound": "The GPU spends its time copying memory, not computing. Keep arrays on the device "
    "between steps (no jax.device_get / np.asarray round trips), put input batches on the "
    "device once (jax.device_put, prefetching the next one), and donate buffers you replace "
    "(jax.jit(..., donate_argnums=...)).",
    "straggler": "One rank arrived late and every other rank waited for it in the collectives. Look at "
    "what that host did (the evidence): input loading, logging, checkpointing, a "
    "recompilation on that host only, a slow node. Balance the work or move the stall off "
    "the step.",
    "exposed_communication": "Communication is not hidden behind compute. Let XLA overlap it: the latency-"
    "hiding scheduler (--xla_gpu_enable_latency_hiding_scheduler=true), "
    "collective combining thresholds, sharding that keeps the chattiest axis inside "
    "an NVLink domain; fix the late rank first if one rank waits in every collective.",
    "warmup": "The first step pays one-time costs: jit compilation and autotuning (XLA), the CUDA "
    "context, NCCL communicator set-up. Profile after it (start the trace after a step or "
    "two), or use the persistent compilation cache (jax.config.update("
    "'jax_compilation_cache_dir', ...)).",
}


# Where each step already runs one jitted program, "keep the step inside one jax.jit" asks for what
# is done (an audit of jax_train_stall: jit_update once in each of its 8 steps, as a command buffer)
ONE_JIT_ADVICE = {
    "low_gpu_utilization": "The GPU waits for work most of the step, and the step already runs as one "
    "jitted program ({program}, once a step): the time is the host's between programs. Find what "
    "the host does in the gaps (see the other findings): prefetch input batches to the device "
    "(e.g. flax.jax_utils.prefetch_to_device, tf.data/grain with prefetch), keep values on the "
    "device instead of pulling them to the host each step, and give each step more work (larger "
    "batch, bf16 so Tensor Cores are used).",
    "launch_bound": "Many tiny kernels separated by about the launch cost, though the step already "
    "runs as one jitted program ({program}, once a step): let XLA launch it as CUDA graphs "
    "(--xla_gpu_enable_command_buffer), roll loops into lax.scan / lax.fori_loop so XLA fuses "
    "their bodies, and batch more work per kernel.",
}
# the host event each run of a jitted program leaves (XLA's GPU module, named after the jit)
_PROGRAM = re.compile(r"^(jit_[\w.\-]+):XLA GPU module$")


def one_program_per_step(trace) -> str | None:
    """The jitted program's name where each of the trace's steps runs it exactly once and no
    other jitted program runs; None otherwise."""
    if not trace.steps:
        return None
    ids = [i for i, n in enumerate(trace.names) if _PROGRAM.match(n)]
    named = {_PROGRAM.match(trace.names[i]).group(1) for i in ids}  # type: ignore[union-attr]
    if len(named) != 1:
        return None
    runs = np.flatnonzero(np.isin(np.asarray(trace.columns["name"]), ids))
    starts = np.sort(np.asarray(trace.columns["start"])[runs].astype(np.int64))
    for st in trace.steps:
        if np.searchsorted(starts, st.end, "left") - np.searchsorted(starts, st.start, "left") != 1:
            return None
    return named.pop()


def for_framework(analysis, trace) -> None:
    """Give each finding of a JAX trace the advice in JAX's terms (in place)."""
    if getattr(trace, "format", None) != "jax":
        return
    program = one_program_per_step(trace)
    for f in analysis.all_findings():
        mostly = f.metrics.get("mostly", "idle") if f.rule == "low_gpu_utilization" else "idle"
        if f.metrics.get("host_paced"):  # the host's Python between dispatches, not the launches' cost
            from .host_paced import JAX_ADVICE as PACED

            f.advice = PACED
            continue
        if mostly == "copy":
            f.advice = JAX_ADVICE["copy_bound"]  # copies fill the GPU: what copy_bound tells a JAX user
        elif mostly == "idle" and program is not None and f.rule in ONE_JIT_ADVICE:
            f.advice = ONE_JIT_ADVICE[f.rule].format(program=program)
        elif mostly == "idle":
            f.advice = JAX_ADVICE.get(f.rule, f.advice)
        # communication: the advice is in no framework's terms
