"""Record the TF32 counterpart of ../shared/traces/whatif/launch_eager (and launch_graph) on one GPU.

The what-if of fp32_simt_gemm ("the FP32 SIMT GEMMs on TF32 Tensor Cores, N x faster") needs a
measured run to be checked against: the same inference step (10 passes of a 32-layer 512-wide MLP,
batch 64, fp32 weights) with TF32 allowed, eager and replayed from a CUDA graph. It also times
cuBLAS GEMMs of several shapes in FP32 (SIMT), TF32 and bf16 by their kernels' own durations, to
see how far small GEMMs' kernel time falls on Tensor Cores.

Usage (on the device machine): python3 scripts/record_tf32_pair.py OUTDIR
Writes OUTDIR/{launch_eager,launch_graph}_{fp32,tf32}.json.gz and OUTDIR/tf32_pairs.json.
"""

import json
import os
import statistics
import sys
import tempfile

import torch
from record_common import record
from torch.profiler import ProfilerActivity, profile

DEV = "cuda"
L, D, B, PASSES = 32, 512, 64, 10
ACTIVE = 6


def precision(p):
    torch.set_float32_matmul_precision("highest" if p == "fp32" else "high")


def model():
    torch.manual_seed(0)
    return [torch.nn.Linear(D, D).to(DEV) for _ in range(L)]


def forward(layers, x):
    with torch.no_grad():
        for _ in range(PASSES):
            h = x
            for lin in layers:
                h = torch.nn.functional.gelu(lin(h))
    return h


def run(out, mode, prec):
    precision(prec)
    layers = model()
    x = torch.randn(B, D, device=DEV)
    if mode == "graph":
        for _ in range(3):
            forward(layers, x)
        torch.cuda.synchronize()
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            forward(layers, x)

        def step():
            g.replay()
    else:

        def step():
            forward(layers, x)

    return record(step, os.path.join(out, f"launch_{mode}_{prec}.json.gz"), ACTIVE, warm=20)


def kernel_times(fn, reps=50):
    """Per-call sum of kernel durations (µs, median over calls) and the kernels' names."""
    for _ in range(10):
        fn()
    torch.cuda.synchronize()
    with tempfile.TemporaryDirectory() as d:
        with profile(activities=[ProfilerActivity.CUDA]) as p:
            for _ in range(reps):
                fn()
            torch.cuda.synchronize()
        f = os.path.join(d, "t.json")
        p.export_chrome_trace(f)
        ev = [e for e in json.load(open(f))["traceEvents"] if e.get("cat") == "kernel"]
    ev.sort(key=lambda e: e["ts"])
    per = len(ev) // reps
    calls = [sum(e["dur"] for e in ev[i * per : (i + 1) * per]) for i in range(reps)]
    return round(statistics.median(calls), 3), sorted({e["name"][:90] for e in ev})


def sweep():
    rows = []
    for m, n, k in [
        (64, 512, 512),
        (256, 512, 512),
        (64, 2048, 2048),
        (1024, 1024, 1024),
        (512, 4096, 4096),
        (2048, 2048, 2048),
        (4096, 4096, 4096),
        (8192, 8192, 8192),
    ]:
        row = {"m": m, "n": n, "k": k}
        for prec in ("fp32", "tf32", "bf16"):
            precision(prec)
            dt = torch.bfloat16 if prec == "bf16" else torch.float32
            a = torch.randn(m, k, device=DEV, dtype=dt)
            w = torch.randn(n, k, device=DEV, dtype=dt)
            bias = torch.randn(n, device=DEV, dtype=dt)
            us, names = kernel_times(lambda: torch.nn.functional.linear(a, w, bias))
            row[prec + "_us"] = us
            row[prec + "_kernels"] = names
        print(row, flush=True)
        rows.append(row)
    return rows


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    res = {"device": torch.cuda.get_device_name(), "torch": torch.__version__}
    for mode in ("eager", "graph"):
        for prec in ("fp32", "tf32"):
            res[f"launch_{mode}_{prec}"] = r = run(out, mode, prec)
            print(mode, prec, r, flush=True)
    res["gemm_sweep"] = sweep()
    with open(os.path.join(out, "tf32_pairs.json"), "w") as f:
        json.dump(res, f, indent=1)


if __name__ == "__main__":
    main()
