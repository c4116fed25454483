"""The efficiency summary's lines, as `analyze` prints them under "efficiency:" (from the JSON of
analysis.efficiency.Efficiency: a summary or a Dask run prints the same)."""

from __future__ import annotations

import re

import numpy as np

from ..model.peaks import roof_label

# torch.compile's autograd functions: their generated code calls kernels with no aten op recorded
COMPILED = re.compile(r"^CompiledFunction(Backward)?$")


def for_want_of_rule(ops: dict) -> bool:
    """Whether the kernels' work is unknown because none of their ops has a work rule (their
    shapes are read only for ops with one), not because no shapes were recorded (HTA's
    triton_example: an Inductor op with shapes). ops: Efficiency.ops."""
    return not ops.get("shapes_recorded") and ops.get("ruled_ops") == 0 and bool(ops.get("unknown_names"))


def summary_lines(eff: dict) -> list[str]:
    """What `gpuviewer analyze` prints of the efficiency (its JSON): the device and its roof, MFU
    per step, and the families that took most of the GPU's time."""
    p = eff.get("peaks") or {}
    tf = p.get("tflops") or {}
    ref = next((k for k in ("bf16", "fp16") if tf.get(k)), None)
    rates = any(f.get("tflops") or f.get("gbps") for f in eff.get("families") or [])
    roof = (
        f"{roof_label(p.get('model'), p.get('identified'))}, {ref} dense peak {tf[ref]:g} TFLOP/s"
        if ref
        else "peak unknown: achieved rates only"
        if rates
        else "peak unknown"
    )
    parts = ["the measured steps' kernels"] if (eff.get("ops") or {}).get("in_measured_steps") else []
    if any(f.get("ops") for f in eff.get("families") or []):  # by op: the MI250's bias copy is gemm
        parts.append("each in its launching op's family where its work is known (a matmul's copy: gemm), else by name")
    scope = "; the kernel families below: " + ", ".join(parts) if parts else ""
    device = eff.get("device")
    out = [f"efficiency: {device if device and device != 'unknown' else 'device unknown'} ({roof}){scope}"]
    steps = eff.get("steps") or []
    if steps and not any(s.get("flops") for s in steps):
        # no step's work is known (no shapes recorded): one line, not one per rank and step
        n = sum(s.get("flop_kernels_unknown") or 0 for s in steps)
        out.append(
            f"  MFU unknown: the work of every matmul/conv/attention kernel ({n:,} in the steps) is unknown"
            if n
            else "  no matmul/conv/attention kernel in the steps: no MFU to measure"
        )
        steps = []
    if any(s.get("flops") for s in steps):
        # the window each line's time is: ddp_long's 'rank 0 step 6 ... in 73.1 ms' beside a 40.0 ms
        # ProfilerStep#6 and a job step of 79 ms read as a third length for one step (an audit)
        out.append(
            "  (each step's GPU time: from its first GPU op to its last, with the GPU's idle before and after "
            "them while its host prepared or finished the step; not the host's step range)"
        )
    for s in steps:
        # where the known work would print as "0.00 TFLOP" or "MFU at least 0.0%"
        if s.get("flop_kernels_unknown") and ((s.get("flops") or 0) < 5e9 or (s.get("mfu") or 0) < 0.0005):
            # '0.00 TFLOP ... MFU at least 0.0%' read as a measured zero (V100 ResNet-50: every
            # convolution's work unknown, no Concrete Inputs recorded)
            n, known = s["flop_kernels_unknown"], s.get("flops") or 0
            which = f"{n} of its" if known else f"its {n}"
            rest = f" (the others': {known / 1e9:.2f} GFLOP)" if known else ""
            out.append(
                f"  rank {s['rank']} step {s['step']}{' (warm-up)' if s.get('warmup') else ''}: the work of "
                f"{which} matmul/conv/attention kernels is unknown{rest}: MFU unknown"
            )
            continue
        mfu = f"MFU {s['mfu']:.1%}" if s.get("mfu") is not None else "MFU unknown"
        if s.get("flop_kernels_unknown") and s.get("mfu") is not None:
            mfu = f"MFU at least {s['mfu']:.1%} ({s['flop_kernels_unknown']} matmul/conv/attention kernels of unknown work)"
        rate = f"{s['tflops']:.1f} TFLOP/s" if s.get("tflops") is not None else "-"
        out.append(
            f"  rank {s['rank']} step {s['step']}{' (warm-up)' if s.get('warmup') else ''}: "
            f"{s['flops'] / 1e12:.2f} TFLOP of matmul/conv/attention work in {s['time_ns'] / 1e6:.1f} ms of GPU time "
            f"= {rate}, {mfu}"
        )
    work: dict[int, list[float]] = {}  # per rank, its measured steps' known work
    for s in steps:
        if s.get("flops") and not s.get("warmup"):
            work.setdefault(s["rank"], []).append(s["flops"])
    med = {r: float(np.median(v)) for r, v in work.items()}
    if len(med) > 1 and max(med.values()) >= 1.5 * min(med.values()):
        # gpu_straggler's rank 1 runs six planted GEMMs the other does not: its MFU 3.4x rank 0's
        hi, lo = max(med, key=med.__getitem__), min(med, key=med.__getitem__)
        out.append(
            f"  rank {hi} runs {med[hi] / med[lo]:.1f}x the matmul/conv/attention work of rank {lo} a step (medians): "
            "each rank's MFU counts the work it ran, whether or not it is the model's"
        )
    total = sum(f["time_ns"] for f in eff.get("families") or []) or 1
    for f in (eff.get("families") or [])[:6]:
        rate = f" {f['tflops']:.1f} TFLOP/s" if f.get("tflops") else ""
        pct = f" ({f['pct_of_peak']:.0f}% of peak)" if f.get("pct_of_peak") is not None else ""
        bw = f" {f['gbps']:.0f} GB/s" if f.get("gbps") and not f.get("flops") else ""
        bound = f", {f['bound']}-bound" if f.get("bound") else ""
        if f.get("bound") == "memory" and not f.get("flops"):
            # bytes only: 'memory-bound' is the roofline's verdict for no FLOPs, which says nothing
            # of nearing the memory roof (the MI250 toy's 5x128 tensors: 6 GB/s, 0.4% of it)
            pct_bw = f.get("pct_of_bandwidth")
            if pct_bw is None:
                bound = ""  # the device's bandwidth unknown: no verdict
            elif 10 <= round(pct_bw) < 50:
                # 'memory-bound' at 16% of the bandwidth read as at its roof (stall_on's bias
                # gradients: 6x below it; an audit's finding)
                bound = (
                    f", {pct_bw:.0f}% of the memory bandwidth: under half its roof (latency, launches or too "
                    "little work per kernel)"
                )
            elif round(pct_bw) < 10:
                bound = (
                    f", {pct_bw:.1g}% of the memory bandwidth: far below its roof (latency, launches or "
                    "too little work per kernel)"
                    if pct_bw < 1
                    else f", {pct_bw:.0f}% of the memory bandwidth: far below its roof (latency, launches or too "
                    "little work per kernel)"
                )
        if (
            f.get("bound") == "memory"
            and f.get("flops")
            and f.get("intensity")
            and p.get("gbps")
            and f.get("peak_tflops")
        ):
            # a matmul or attention below the ridge is memory-bound by the roofline, which says
            # nothing of reaching the memory roof (single_gpt's attention: 21% of the bandwidth)
            ridge = f["peak_tflops"] * 1e3 / p["gbps"]
            bound += (
                f" by intensity ({f['intensity']:.0f} FLOP/byte, below the ridge at {ridge:.0f}); "
                f"{f['pct_of_bandwidth']:.0f}% of the memory bandwidth"
            )
            if round(f["pct_of_bandwidth"]) < 50 and round(f.get("pct_of_peak") or 0) < 50:  # as printed
                # under both roofs by far: the roofline's verdict is not what limits it
                bound += ", far from both roofs (latency, occupancy or too little work per kernel)"
        elif (
            f.get("bound") == "compute"
            and f.get("intensity")
            and f.get("pct_of_bandwidth") is not None
            and round(f.get("pct_of_peak") or 0) < 50
            and round(f["pct_of_bandwidth"]) < 50
        ):
            # above the ridge by intensity, yet under half of both roofs (launch_eager's 64x512
            # SIMT GEMMs: 6% of peak, 3% of the bandwidth): not what limits it either
            ridge = (
                f", above the ridge at {f['peak_tflops'] * 1e3 / p['gbps']:.0f}"
                if f.get("peak_tflops") and p.get("gbps")
                else ""
            )
            bound += (
                f" by intensity ({f['intensity']:.0f} FLOP/byte{ridge}); {f['pct_of_bandwidth']:.0f}% of the memory "
                "bandwidth, far from both roofs (latency, occupancy or too little work per kernel)"
            )
        out.append(
            f"  {f['name']}: {f['time_ns'] / total:.0%} of compute-kernel time"
            + (f",{rate}{pct}{bw}{bound}" if rate or bw else "")
        )
    beyond = (eff.get("families") or [])[6:]
    if beyond:  # the shares said add up to 100% with them
        share = sum(f["time_ns"] for f in beyond) / total
        out.append(
            f"  {len(beyond)} other famil{'y' if len(beyond) == 1 else 'ies'}: {share:.0%} of compute-kernel time"
        )
    o = eff.get("ops") or {}
    if o.get("unknown") or o.get("unknown_kernels"):
        unknown = o.get("unknown_names") or []
        names = ", ".join(
            f"{u['name']} ({u['ops']}"
            + (f" op{'s' if u['ops'] > 1 else ''}, {u['ms']:,.1f} ms of kernels)" if u.get("ms") else ")")
            for u in unknown
        )
        why = (
            "no shapes, no rule, or arguments a rule cannot read (older PyTorch versions recorded no Concrete Inputs: "
            "no stride or padding)" + (f": {names}" if names else "")
        )
        compiled = [u["name"] for u in unknown if COMPILED.match(u["name"])]
        if compiled:
            why += (
                f"; {' and '.join(compiled)} {'are' if len(compiled) > 1 else 'is'} torch.compile's: its generated "
                "code launches kernels with no op recorded under it, so no shapes"
            )
        orphans, total = o.get("unknown_no_launch_kernels") or 0, o.get("unknown_kernels", 0)
        # kernels whose launch the capture missed have no op to read shapes from
        lost = f"{orphans} ({(o.get('unknown_no_launch_ns') or 0) / 1e6:.1f} ms) have no launch call on record"
        if for_want_of_rule(o):
            # no op of a rule among theirs: the work is unknown for want of a rule, not of shapes
            rule = f"ops have no work rule: {names}"
            said = f"{lost}, so no op; the others' {rule}" if orphans else f"their {rule}"
        elif not o.get("shapes_recorded"):
            said = "no shapes recorded"
        elif not orphans:
            said = f"their ops have {why}"
        else:
            said = f"{lost}, so no op" if orphans == total else f"{lost}, so no op; the others' ops have {why}"
        out.append(
            f"  work unknown for {o.get('unknown_kernels', 0)} of {o.get('kernels', 0)} compute kernels "
            f"({o.get('unknown_time_ns', 0) / 1e6:.1f} ms): {said}"
        )
    return out
