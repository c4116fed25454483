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

import json
import os
import sys

import torch
import torch.nn.functional as F
from record_common import record

DEV = "cuda"
L, D = 16, 2048
B = int(os.environ.get("GV_BATCH", "4096"))  # 16384: the GPU bound, the host hidden behind it
COPY_TARGET = os.environ.get("GV_COPY_TARGET", "1") == "1"  # the target copied too, or only the input
ACTIVE = 6


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
    return record(step, os.path.join(out, f"{tag}.json.gz"), ACTIVE, warm=10)


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
