"""Record measured counterparts for `whatif --no-syncs` and `whatif --no-copies` on one GPU.

The same bf16 training step of an MLP (16 layers, 2048 wide, batch 4096, AdamW) three ways:
- base: inputs already on the GPU, no synchronize calls;
- sync: torch.cuda.synchronize() after every layer in the forward and (from a gradient hook on the
  autograd thread) in the backward, as timing or debugging code leaves behind: the host waits for
  the GPU, then the GPU waits for the host's next launches;
- copy: each step's input and target (32 MB fp32 each) come from pageable host memory
  (`tensor.to("cuda")`), as a data loader without pin_memory hands them over.
sync -> base is what removing the syncs saves; copy -> base what keeping the data on the GPU saves.

Usage (on the device machine): python3 scripts/record_sync_copy_pairs.py OUTDIR
Writes OUTDIR/{base,sync,copy,base_again}.json.gz and OUTDIR/pairs.json (each run's profiled step times,
CUDA-synchronised wall time, and the unprofiled median).
"""

import gzip
import json
import os
import shutil
import statistics
import sys
import time

import torch
import torch.nn.functional as F
from torch.profiler import ProfilerActivity, profile, schedule

DEV = "cuda"
L, D = 16, 2048
B = int(os.environ.get("GV_BATCH", "4096"))  # 16384: the GPU bound, the host hidden behind it
COPY_TARGET = os.environ.get("GV_COPY_TARGET", "1") == "1"  # the target copied too, or only the input
ACTIVE = 6


def export(prof, path):
    raw = path[:-3]
    prof.export_chrome_trace(raw)
    with open(raw, "rb") as f, gzip.open(path, "wb", compresslevel=6) as g:
        shutil.copyfileobj(f, g)
    os.remove(raw)


def make(kind):
    torch.manual_seed(0)
    layers = torch.nn.ModuleList(torch.nn.Linear(D, D) for _ in range(L)).to(DEV)
    opt = torch.optim.AdamW(layers.parameters(), lr=1e-4)
    x_host, y_host = torch.randn(B, D), torch.randn(B, D)  # pageable
    x_dev, y_dev = x_host.to(DEV), y_host.to(DEV)

    def sync_hook(g):
        torch.cuda.synchronize()
        return g

    def step():
        if kind == "copy":
            x = x_host.to(DEV)
            y = y_host.to(DEV) if COPY_TARGET else y_dev
        else:
            x, y = x_dev, y_dev
        with torch.autocast(DEV, dtype=torch.bfloat16):
            h = x
            for lin in layers:
                h = F.gelu(lin(h))
                if kind == "sync":
                    torch.cuda.synchronize()
                    if h.requires_grad:
                        h.register_hook(sync_hook)
            loss = F.mse_loss(h.float(), y)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    return step


def run(out, kind, tag):
    step = make(kind)
    for _ in range(10):
        step()
    torch.cuda.synchronize()
    plain = []
    for _ in range(30):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        step()
        torch.cuda.synchronize()
        plain.append((time.perf_counter() - t0) * 1e3)
    path = os.path.join(out, f"{tag}.json.gz")
    prof_steps = []
    with profile(
        activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA],
        schedule=schedule(wait=1, warmup=1, active=ACTIVE),
        on_trace_ready=lambda p: export(p, path),
        record_shapes=True,
    ) as p:
        for s in range(2 + ACTIVE):
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            step()
            torch.cuda.synchronize()
            if s >= 2:
                prof_steps.append(round((time.perf_counter() - t0) * 1e3, 3))
            p.step()
    return {
        "mean_step_ms": statistics.mean(prof_steps),
        "steps_ms": prof_steps,
        "unprofiled_median_ms": round(statistics.median(plain), 3),
    }


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    res = {
        "device": torch.cuda.get_device_name(),
        "torch": torch.__version__,
        "L": L,
        "D": D,
        "B": B,
        "copy_target": COPY_TARGET,
    }
    # base again last: the machine's drift over the runs
    for kind, tag in (("base", "base"), ("sync", "sync"), ("copy", "copy"), ("base", "base_again")):
        res[tag] = r = run(out, kind, tag)
        print(tag, r, flush=True)
    with open(os.path.join(out, "pairs.json"), "w") as f:
        json.dump(res, f, indent=1)


if __name__ == "__main__":
    main()
