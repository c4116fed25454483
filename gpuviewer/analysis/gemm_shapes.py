"""The gemm_shape finding (analysis/efficiency_findings.py runs it): Tensor-Core GEMM shapes far
under the best shape's % of peak, and why: rows not a multiple of what Tensor Cores read, tile
widths, or too little work per call to fill the GPU."""

from __future__ import annotations

import numpy as np

from ..model.trace import Trace
from .efficiency import Efficiency
from .efficiency_parts import TC_FIXED_NS, kernel_evidence, kernel_span
from .results import Analysis, Finding
from .whatif import Change

SHAPE_MIN_SHARE = 0.02  # of GEMM time
SHAPE_PCT_BELOW = 0.6  # a shape under 60% of the best shape's % of peak


def _sm_count(trace: Trace) -> int | None:
    """The SMs of the session's GPUs (Kineto's numSms), where they all have the same number; None
    where they differ or none is recorded."""
    got = set()
    for r in trace.ranks:
        for d in r.devices:
            n = (r.device_props.get(d) or {}).get("numSms")
            if type(n) is int and n > 0:
                got.add(n)
    return got.pop() if len(got) == 1 else None


def gemm_shapes(trace: Trace, eff: Efficiency, analysis: Analysis, ctx) -> list[Finding]:
    """Tensor-Core GEMM shapes (by their op's M, N, K) far under the best shape's % of peak."""
    if not eff.op_shape:
        return []
    groups: dict[tuple, list[int]] = {}
    for j, (o, f) in enumerate(zip(eff.kernel_op.tolist(), eff.kernel_family.tolist())):
        fam = eff.families[f]
        if o >= 0 and o in eff.op_shape and fam["tensor_cores"] is True and fam.get("peak_tflops"):
            groups.setdefault((tuple(eff.op_shape[o][:4]), f), []).append(j)
    gemm_t = float(sum(r["time_ns"] for r in eff.families if r["kind"] == "gemm")) or 1.0
    rows = []
    for (shape, f), members in groups.items():
        idx = np.asarray(members)
        t = float(ctx["dur"][idx].sum())
        fl = float(np.nansum(eff.kernel_flops[idx]))
        if t > 0 and fl > 0:
            rows.append((shape, f, idx, t, 100.0 * fl / t / 1e3 / eff.families[f]["peak_tflops"]))
    big = [r for r in rows if r[3] >= SHAPE_MIN_SHARE * gemm_t]
    if len(big) < 2:
        return []
    best = max(big, key=lambda r: r[4])
    sms = _sm_count(trace)
    out = []
    for shape, f, idx, t, pct in sorted(big, key=lambda r: -r[3]):
        prec = eff.families[f]["precision"]
        # Tensor Cores want rows of 16 bytes: 8 halves, 4 TF32 words, 16 FP8 bytes
        align = {"fp16": 8, "bf16": 8, "tf32": 4, "fp32": 4, "fp64": 2}.get(
            str(prec), 16 if str(prec).startswith("fp8") else 8
        )
        odd = [f"{n}={v}" for n, v in zip("MNK", shape[:3]) if v % align]
        odd64 = [f"{n}={v}" for n, v in zip("MNK", shape[:3]) if v % 64 and v % align == 0]
        if not (odd or odd64) or pct >= SHAPE_PCT_BELOW * best[4]:
            continue
        m = np.zeros(len(eff.kernel), bool)
        m[idx] = True
        batch = shape[3] if len(shape) > 3 and shape[3] else 1
        # output tiles of 128x128 a call: fewer than the GPU's SMs leave it part idle whatever the
        # alignment (HTA's trace_diff: 1024x96x512, 8 tiles on 108 SMs, a split-K reduce after
        # each; "N=96 not a multiple of 64" named a fix that would not help; an audit's finding)
        tiles = -(-shape[0] // 128) * -(-shape[1] // 128) * batch
        small = sms is not None and tiles < sms
        said = "; ".join(
            x
            for x in (
                f"{', '.join(odd)} not a multiple of {align} (Tensor Cores read rows of 16 bytes)" if odd else "",
                f"{', '.join(odd64)} not a multiple of 64" if odd64 and not small else "",
                f"{2 * shape[0] * shape[1] * shape[2] * batch / 1e6:,.1f} MFLOP a call in {tiles} output tiles of 128x128 "
                f"for the GPU's {sms} SMs: too little work per call to fill it (batch or fuse these matmuls)"
                if small
                else "",
            )
            if x
        )
        fix = [
            Change(
                "faster",
                pct=100 * (1 - pct / best[4]),
                events=eff.kernel[idx],
                label=f"the {'x'.join(map(str, shape[:3]))}{f' (batch {batch:,})' if batch > 1 else ''} {prec} GEMMs at "
                "the best shape's % of peak,",
                fixed_ns=TC_FIXED_NS,  # a Tensor-Core kernel's own few microseconds stay
            )
        ]
        s0, s1 = kernel_span(ctx, m)
        per = f", a batch of {batch:,}" if batch > 1 else ""
        title = (
            f"GEMM of shape {shape[0]}x{shape[1]}x{shape[2]} (MxNxK{per}, {prec}) at {pct:.0f}% of peak, the best of the "
            f"run's shapes with {SHAPE_MIN_SHARE:.0%} or more of GEMM time {'x'.join(map(str, best[0][:3]))} at "
            f"{best[4]:.0f}%: {said} ({t / gemm_t:.0%} of GEMM time)"
        )
        metrics = {
            "batch": batch,
            "output_tiles": tiles,
            "shape": list(shape[:3]),
            "precision": prec,
            "pct_of_peak": round(pct, 2),
            "best_shape": list(best[0][:3]),
            "best_pct_of_peak": round(best[4], 2),
            "time_ms": round(t / 1e6, 3),
            "share_of_gemm": round(t / gemm_t, 4),
            "kernels": int(len(idx)),
            "evidence": kernel_evidence(trace, eff, ctx, m),
        }
        ranks = sorted(int(r) for r in np.unique(ctx["rank"][m]))
        # (its advice: efficiency_findings.ADVICE, set there)
        out.append(Finding("gemm_shape", "medium", title, ranks, None, s0, s1, 0.0, "", metrics, fix=fix))
    return out[:3]
