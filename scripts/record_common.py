"""What the recording scripts share (run on the device machine, beside them in scripts/): the
trace's export as .json.gz, and a step's CUDA-synchronised wall time, unprofiled and profiled."""

import gzip
import os
import shutil
import statistics
import time

import torch
from torch.profiler import ProfilerActivity, profile, schedule


def export(prof, path):
    raw = path[:-3]
    prof.export_chrome_trace(raw)
    with open(raw, "rb") as f, gzip.open(path, "wb", compresslevel=6) as g:
        shutil.copyfileobj(f, g)
    os.remove(raw)


def _timed(step):
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    step()
    torch.cuda.synchronize()
    return (time.perf_counter() - t0) * 1e3


def record(step, path, active, warm=10, plain=30):
    """step() warm times, then timed plain times unprofiled, then 2 + active times under the
    profiler (wait 1, warm-up 1, active): the trace at path and the measured step times."""
    for _ in range(warm):
        step()
    torch.cuda.synchronize()
    unprofiled = [_timed(step) for _ in range(plain)]
    prof_steps = []
    with profile(
        activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA],
        schedule=schedule(wait=1, warmup=1, active=active),
        on_trace_ready=lambda p: export(p, path),
        record_shapes=True,
    ) as p:
        for s in range(2 + active):
            ms = _timed(step)
            if s >= 2:
                prof_steps.append(round(ms, 3))
            p.step()
    return {
        "mean_step_ms": statistics.mean(prof_steps),
        "steps_ms": prof_steps,
        "unprofiled_median_ms": round(statistics.median(unprofiled), 3),
    }
