"""Findings from the kernels' efficiency (efficiency.py), each with the what-if change that removes
its cause (results.Finding.fix: the kernels made faster, replayed by savings.py on the dependency
model, so only time on the critical path counts, never idle time):

- fp32_simt_gemm, fp32_simt_conv: matmuls, and convolutions, in FP32 on the SIMT units, with how much faster TF32 or bf16 Tensor
  Cores would run them: at the same % of the TF32 peak as the run's best Tensor-Core GEMMs reach
  of theirs where shapes give rates, else at the same % of the TF32 peak as they reach of the FP32
  peak (the ratio of the two peaks); on an unknown device the least such ratio of the data-centre
  GPUs in the table, said so; only each kernel's time past a Tensor-Core kernel's fixed cost
  (TC_FIXED_NS) is sped up;
- gemm_shape: a GEMM shape whose M, N or K is not a multiple of 64 (or of 8) running at a fraction
  of the % of peak the run's best GEMM shape reaches (what-if: at that %);
- elementwise_bound: elementwise and norm kernels (memory-bound: no FLOPs to speak of) taking a
  tenth of the steps' GPU time or more (what-if: fused, assumed to halve their time).
"""

from __future__ import annotations

import re
from collections import Counter

import numpy as np

from ..model import peaks as peak_table
from ..model.categories import Cat
from ..model.trace import Trace
from . import kernel_class
from .efficiency import Efficiency, conv_launched, launch_parents, step_gpu_time_ns
from .efficiency_parts import TC_FIXED_NS, kernel_evidence, kernel_span, ranks_over
from .foreach import FOREACH as _FOREACH
from .foreach import FUSED_ALREADY as _FUSED_ALREADY
from .foreach import foreach_clause, optimizer_kernels, unfused_foreach
from .gemm_shapes import gemm_shapes
from .results import Analysis, Finding
from .whatif import Change

SIMT_MIN_SHARE = 0.01  # of kernel time: less is not worth a finding
ELEMENTWISE_MIN_SHARE = 0.10  # of the steps' GPU time
FUSED_PCT = 50.0  # fusing elementwise chains: assumed to halve their time (said in the saving)
FOREACH_SHARE = 0.25  # of the elementwise time: the foreach kernels said apart
_NOT_OPTIMIZER = re.compile(r"unscale|NonFinite|Norm", re.IGNORECASE)  # AMP's unscale, gradient norms
# less gain than this over the kernels' whole time (tiny GEMMs, mostly that fixed cost) is no finding
MIN_SIMT_SPEEDUP = 1.2
_DATACENTRE = ("A100", "H100", "H200", "B200")
# the FP32 SIMT findings: the kind of kernel (a GEMM kernel a convolution launched is convolution
# work: efficiency.py), its rule, its words, and the flag that lets it use TF32
_SIMT = (
    ("gemm", "fp32_simt_gemm", "matmuls", "GEMM"),
    ("conv", "fp32_simt_conv", "convolutions", "convolution"),
)
_TF32_FLAG = {"gemm": "torch.backends.cuda.matmul.allow_tf32", "conv": "torch.backends.cudnn.allow_tf32"}

_ELEMENTWISE = (
    "Elementwise and normalization kernels read and write their tensors at memory bandwidth and do little "
    "arithmetic: fuse chains of them so tensors stay in registers ({how})."
)
ADVICE = {
    "fp32_simt_gemm": "These matmuls run in FP32 on the SIMT units, not on Tensor Cores. Train in bf16 "
    "(torch.autocast(device_type='cuda', dtype=torch.bfloat16)) or let FP32 matmuls use TF32 "
    "Tensor Cores: torch.backends.cuda.matmul.allow_tf32 = True (or "
    "torch.set_float32_matmul_precision('high')), and torch.backends.cudnn.allow_tf32 = True "
    "for convolutions.",
    "fp32_simt_conv": "These convolutions run in FP32 on the SIMT units (cuDNN's FP32 algorithms: implicit "
    "GEMM, FFT, Winograd), not on Tensor Cores. Train in bf16 (torch.autocast(device_type='cuda', "
    "dtype=torch.bfloat16)), with the channels_last memory format, or let cuDNN use TF32: "
    "torch.backends.cudnn.allow_tf32 = True (PyTorch's default); torch.backends.cudnn.benchmark = True "
    "lets cuDNN time its algorithms for each shape.",
    "gemm_shape": "Tensor Cores work on tiles: a dimension that is not a multiple of 8 (16-bit types; 16 for "
    "fp8) leaves them partly idle or falls back to slower kernels, and one that is not a multiple "
    "of 64 wastes part of the last tile. Pad it: the vocabulary to a multiple of 64 (50304, not "
    "50257), hidden and FFN sizes, batch x sequence.",
    # every fusion named; _elementwise_advice names those the kernels run call for
    "elementwise_bound": _ELEMENTWISE.format(
        how="torch.compile, fused optimizers and LayerNorm/RMSNorm, FlashAttention instead of separate softmax and masking"
    ),
}
# the same where other kernels of the kind run on TF32 Tensor Cores: TF32 is allowed already
TF32_ALLOWED_ADVICE = {
    "fp32_simt_gemm": "These matmuls run in FP32 on the SIMT units, not on Tensor Cores, though TF32 is "
    "allowed (other matmuls of this run use it): cuBLAS chose FP32 kernels for their shapes. Train in bf16 "
    "(torch.autocast(device_type='cuda', dtype=torch.bfloat16)).",
    "fp32_simt_conv": "These convolutions run in FP32 on the SIMT units, not on Tensor Cores, though TF32 is "
    "allowed (other convolutions of this run use it): cuDNN chose FP32 algorithms for them. Train in bf16 "
    "(torch.autocast(device_type='cuda', dtype=torch.bfloat16)), with the channels_last memory format; "
    "torch.backends.cudnn.benchmark = True lets cuDNN time its algorithms for each shape.",
}
# the same for a GPU whose Tensor Cores take fp16 only (Volta, Turing: no TF32, no bf16)
FP16_ADVICE = {
    "fp32_simt_gemm": "These matmuls run in FP32 on the SIMT units, not on Tensor Cores, and this GPU's "
    "Tensor Cores take fp16 only (no TF32 or bf16): train in fp16 mixed precision "
    "(torch.autocast(device_type='cuda', dtype=torch.float16) with torch.cuda.amp.GradScaler), with "
    "dimensions that are multiples of 8.",
    "fp32_simt_conv": "These convolutions run in FP32 on the SIMT units (cuDNN's FP32 algorithms: implicit "
    "GEMM, FFT, Winograd), not on Tensor Cores, and this GPU's Tensor Cores take fp16 only (no TF32 or "
    "bf16): train in fp16 mixed precision (torch.autocast(device_type='cuda', dtype=torch.float16) with "
    "torch.cuda.amp.GradScaler), with the channels_last memory format; torch.backends.cudnn.benchmark = True "
    "lets cuDNN time its algorithms for each shape.",
}


def _finding(rule: str, title: str, ranks, start: int, end: int, metrics: dict, fix: list[Change]) -> Finding:
    return Finding(
        rule,
        "medium",
        title,
        sorted(int(r) for r in ranks),
        None,
        int(start),
        int(end),
        0.0,
        ADVICE[rule],
        metrics,
        fix=fix,
    )


def findings(trace: Trace, eff: Efficiency, analysis: Analysis) -> list[Finding]:
    if not len(eff.kernel):
        return []
    c = trace.columns
    ctx = {
        "dur": np.asarray(c["dur"])[eff.kernel].astype(np.float64),
        "start": np.asarray(c["start"])[eff.kernel].astype(np.int64),
        "rank": trace.lane_rank_array()[np.asarray(c["lane"])[eff.kernel]],
    }
    out = []
    for rule in (_fp32_simt, gemm_shapes, _elementwise):
        out.extend(rule(trace, eff, analysis, ctx))
    for f in out:
        f.advice = f.advice or ADVICE[f.rule]
    return out


def _same_names(trace: Trace, eff: Efficiency, m, conv: bool | None = None) -> np.ndarray:
    """Every compute kernel of the session named like the kernels m (every rank's, where the
    efficiency measured one rank of many). conv: of those, only the ones a convolution launched
    (True) or did not (False), as the efficiency told the kinds apart: one volta_sgemm name runs
    both a ResNet's convolutions and its linear layer, each finding replays its own."""
    name = np.asarray(trace.columns["name"])
    kernels = np.flatnonzero(np.asarray(trace.columns["cat"]) == Cat.KERNEL)
    out = kernels[np.isin(name[kernels], np.unique(name[eff.kernel[m]]))]
    if conv is None or not len(out):
        return out
    by_op = conv_launched(trace, out)
    if conv:  # a kernel whose own name says convolution is one, whoever launched it
        ids, inv = np.unique(name[out], return_inverse=True)
        named_conv = np.array([kernel_class.kind(trace.names[int(i)]) == "conv" for i in ids], bool)[inv]
        return out[by_op | named_conv]
    return out[~by_op]


def _compute_major(trace: Trace) -> tuple[int, str] | None:
    """The recorded compute capability's major version of the first device that has one, and how
    it is known; where none is recorded, the newest architecture the kernels' names are built for
    (libraries run an older architecture's kernels on a newer GPU, never the reverse: an A100 runs
    volta_sgemm beside its sm80_ kernels, a V100 only volta_)."""
    for r in trace.ranks:
        for _, p in sorted(r.device_props.items()):
            v = p.get("computeMajor")
            if isinstance(v, int) and not isinstance(v, bool):
                return v, f"compute capability {v}.x"
    kern = np.asarray(trace.columns["cat"]) == Cat.KERNEL
    got = kernel_class.newest_arch(
        [trace.names[int(i)] for i in np.unique(np.asarray(trace.columns["name"])[kern]).tolist()]
    )
    if got is None:
        return None
    return got[0], f"likely compute capability {got[0]}.x, the newest its kernels are built for ({got[1]})"


def _memory_roof(x: dict[str, float], rows: list[dict], rate: float, gbps: float | None) -> str:
    """Cap each precision's speedup where the memory roof binds first (in place): the kernels'
    FLOPs over their bytes (halved in a 16-bit type) at the device's bandwidth is the most they
    can reach, whatever their Tensor Cores could do; the words that say so, or ''."""
    flops = sum(r.get("flops") or 0 for r in rows)
    nbytes = sum(r.get("bytes") or 0 for r in rows)
    if not (flops and nbytes and gbps and rate):
        return ""
    capped = []
    for q in list(x):
        roof = flops / (nbytes / (2 if q in ("bf16", "fp16") else 1)) * gbps / 1e3  # TFLOP/s
        if roof / rate < x[q]:
            x[q] = max(1.0, roof / rate)
            capped.append(f"{roof:,.0f} TFLOP/s in {q.upper() if q == 'tf32' else q}")
    if not capped:
        return ""
    return (
        f"; capped by the memory roof: at {flops / nbytes:.0f} FLOP/byte and {gbps:,.0f} GB/s they reach at most "
        + " or ".join(capped)
    )


def _past_fixed(durs: np.ndarray, x: float) -> float:
    """How much faster kernels of these durations (ns) run when their time past TC_FIXED_NS each
    runs x times faster."""
    d = np.asarray(durs, np.float64)
    fixed = np.minimum(d, TC_FIXED_NS)
    after = float((fixed + (d - fixed) / x).sum())
    return float(d.sum()) / after if after > 0 else 1.0


def _simt_speedup(
    trace: Trace, eff: Efficiency, simt_rows: list[dict], kind: str, durs: np.ndarray, tf32_on: bool = False
) -> dict | None:
    """What FP32 SIMT kernels of a kind (gemm, conv) could run on and how much faster: {"advice", "speedup" (the
    precision the what-if replays: how much faster each kernel's time past TC_FIXED_NS runs), "label",
    "speedups": {precision: x over the kernels' whole time}}; None where the device has no matrix units
    to move them to (Pascal and older: no Tensor Cores)."""
    p = eff.peaks
    fp32 = p.peak("fp32")
    if p.model is not None:
        ref = p
        grounds = ""
    else:
        known = _compute_major(trace)
        major, said = known if known is not None else (None, "")
        if major is not None and major < 7:
            return None  # compute capability 6.x and older: no Tensor Cores
        named = p.device not in ("", "unknown")
        # Volta / Turing (7.x): fp16 Tensor Cores only, like the V100; others: the data-centre GPU
        # whose TF32 peak is the least multiple of its FP32 peak (the smallest claim)
        if major == 7:
            model = "V100 SXM2"
            how = f"{said}, with fp16 Tensor Cores only, as on the {model}"
        else:
            model = min(
                (r for r in peak_table.rows() if r["model"].startswith(_DATACENTRE) and r["tf32"] and r["fp32"]),
                key=lambda r: (r["tf32"] / r["fp32"], r["model"]),
            )["model"]
            how = (
                f"on the {model} (of the {'/'.join(_DATACENTRE)} GPUs the one whose TF32 peak is the least "
                "multiple of its FP32 peak)"
            )
        ref = peak_table.of_model(model)
        what = f"the device, {p.device}, is not in the peak table" if named else "the device is not recorded"
        grounds = f"{what}: at the same % of the peak, {how}"
        fp32 = ref.peak("fp32")
    # matrix precisions the device has: TF32 and bf16 (Ampere on), else fp16 (Volta, Turing)
    have: dict[str, float] = {q: v for q in ("tf32", "bf16", "fp16") if (v := ref.peak(q))}
    if "tf32" in have:
        have.pop("fp16", None)
    elif "bf16" in have:
        have.pop("fp16", None)
    if not have or not fp32:
        return None
    time = sum(r["time_ns"] for r in simt_rows)
    flops = sum(r["flops"] or 0 for r in simt_rows)
    best = max(
        (
            r
            for r in eff.families
            if r["kind"] == "gemm" and r["tensor_cores"] is True and r.get("pct_of_peak") and r["time_ns"] > 0
        ),
        key=lambda r: r["pct_of_peak"],
        default=None,
    )
    names = "/".join(q.upper() if q == "tf32" else q for q in have)
    if p.model is not None and flops and time and best is not None:
        rate = flops / time / 1e3  # TFLOP/s they reach now
        at = best["pct_of_peak"] / 100
        x = {q: max(1.0, at * v / rate) for q, v in have.items()}
        grounds = (
            f"at the {best['pct_of_peak']:.0f}% of the {names} peak the run's best GEMMs reach "
            f"({best['name']}); they reach {rate:.1f} TFLOP/s now"
        )
        grounds += _memory_roof(x, simt_rows, rate, p.gbps)
    else:
        x = {q: v / fp32 for q, v in have.items()}
        if p.model is not None:
            peaks_ = "/".join(f"{v:g}" for v in have.values())
            word = "peaks" if len(have) > 1 else "peak"
            grounds = (
                f"at the same % of the {p.model} {names} {word} ({peaks_} TFLOP/s) as they reach of its FP32 "
                f"peak ({fp32:g})"
            )
            if flops and time:
                grounds += _memory_roof(x, simt_rows, flops / time / 1e3, p.gbps)
    # the peak ratios speed up the kernels' time past a Tensor-Core kernel's fixed cost only
    work = dict(x)
    x = {q: _past_fixed(durs, v) for q, v in work.items()}
    grounds += (
        f"; each kernel's first {TC_FIXED_NS / 1e3:g} µs not shortened: a Tensor-Core kernel takes about "
        "that however small, as measured on an H200"
    )
    if "tf32" in x and tf32_on and "bf16" in x:
        # TF32 is already allowed: the library chose FP32 kernels for these shapes, so the flag
        # would change nothing (HTA's trace_filter: cutlass tensorop s1688 GEMMs beside ampere_sgemm)
        advice = f"bf16 autocast would make them up to about {x['bf16']:.1f}x faster " + (
            "(TF32 is already allowed for convolutions here: cuDNN runs other convolutions of this run on TF32 "
            "Tensor Cores and chose FP32 algorithms for these; torch.backends.cudnn.benchmark=True times the "
            "alternatives)"
            if kind == "conv"
            else "(TF32 is already allowed for matmuls here: cuBLAS runs other matmuls of this run on TF32 "
            "Tensor Cores and chose FP32 kernels for these shapes)"
        )
        return {"advice": advice, "grounds": grounds, "speedup": work["bf16"], "on": "bf16", "speedups": x}
    if "tf32" in x:
        alt = "bf16" if "bf16" in x else None
        advice = (
            ("bf16 autocast or " if alt else "")
            + _TF32_FLAG[kind]
            + "=True would make them up to about "
            + (f"{x['bf16']:.1f}x (bf16) or " if alt else "")
            + f"{x['tf32']:.1f}x (TF32) faster"
        )
        return {"advice": advice, "grounds": grounds, "speedup": work["tf32"], "on": "TF32", "speedups": x}
    q = "bf16" if "bf16" in x else "fp16"
    device = p.model or ref.model
    advice = (
        f"{q} autocast ("
        + ("with a GradScaler; " if q == "fp16" else "")
        + f"the {device} has no TF32"
        + (" or bf16" if q == "fp16" else "")
        + f" Tensor Cores) would make them up to about {x[q]:.1f}x faster"
    )
    return {"advice": advice, "grounds": grounds, "speedup": work[q], "on": q, "speedups": x}


def _fp32_simt(trace: Trace, eff: Efficiency, analysis: Analysis, ctx) -> list[Finding]:
    """FP32 matmuls, and FP32 convolutions, on the SIMT units: a finding each."""
    total = float(ctx["dur"].sum())
    # kinds of which some kernels of the run run on TF32 Tensor Cores: TF32 is allowed for them
    tf32_on = {r["kind"] for r in eff.families if r["tensor_cores"] is True and r["precision"] == "tf32"}
    out = []
    for kind, rule, what, kernels in _SIMT:
        rows = [
            i
            for i, r in enumerate(eff.families)
            if r["kind"] == kind and r["tensor_cores"] is False and r["precision"] in ("fp32", None)
        ]
        if not rows or not total:
            continue
        of_kind = float(sum(r["time_ns"] for r in eff.families if r["kind"] == kind))
        m = np.isin(eff.kernel_family, rows)
        t = float(ctx["dur"][m].sum())
        if t < SIMT_MIN_SHARE * total:
            continue
        got = _simt_speedup(trace, eff, [eff.families[i] for i in rows], kind, ctx["dur"][m], kind in tf32_on)
        if got is None:
            continue
        if max(got["speedups"].values()) < MIN_SIMT_SPEEDUP:
            continue  # the kernels are mostly a kernel's fixed cost: Tensor Cores would not help
        k = got["speedup"]
        # cuBLAS's split-K reduces join their GEMM's family (kernel_class.follow_split_k): said, as
        # they multiply no matrices (launch_graph: 4.6 of its 18.1 ms; an audit)
        ids = np.asarray(trace.columns["name"])[eff.kernel[m]]
        red = np.isin(ids, [i for i in np.unique(ids) if kernel_class.SPLIT_K.search(trace.names[int(i)])])
        t_red = float(ctx["dur"][m][red].sum())
        fast = m.copy()  # the what-if's: the reduces left as they are (no matrix work for Tensor Cores)
        fast[np.flatnonzero(m)[red]] = False
        split_k = f", {t_red / 1e6:.1f} ms of it in their split-K reduce kernels" if t_red >= 0.05e6 else ""
        fix = [
            Change(
                "faster",
                pct=100 * (1 - 1 / k),
                events=_same_names(trace, eff, fast, conv=kind == "conv"),
                label=f"the FP32 SIMT {kernels} kernels on {got['on']} Tensor Cores,",
                fixed_ns=TC_FIXED_NS,
                # (ns_resolution: its 47.3 ms (49%) read as a prediction; helper-100's)
                after=" (at the same share of that peak as of the FP32 one: an upper bound"
                + ("; their split-K reduce kernels as they are)" if split_k else ")"),
            )
        ]
        s0, s1 = kernel_span(ctx, m)
        # a convolution's FP32 kernels that multiply no matrices (Winograd and FFT transforms) run
        # without Tensor Cores too: said, not sped up (the V100 ResNet-50's 94% was 100% with them)
        # only those the same ops launched: nccl_parser_config's 1.0 ms of reductions came from the
        # backward of its TF32 convolutions, not from the three SIMT ones
        helpers = 0.0
        if kind == "conv":  # (the launching ops looked up only where the clause can be said)
            aids = [i for i, r in enumerate(eff.families) if r["kind"] == kind and r["tensor_cores"] is None]
            aids = [i for i in aids if eff.families[i]["precision"] == "fp32"]
            par = launch_parents(trace, kernels=eff.kernel)[1]  # each kernel's op, with work or not
            helpers = float(ctx["dur"][np.isin(eff.kernel_family, aids) & np.isin(par, par[m][par[m] >= 0])].sum())
        with_helpers = (
            f"; {(t + helpers) / of_kind:.0%} with the {helpers / 1e6:.1f} ms of FP32 helper kernels around them (transforms, "
            "reductions), which multiply no matrices (not sped up here)"
            if kind == "conv" and helpers >= 0.005 * of_kind
            else ""
        )
        title = (
            f"FP32 {what} without Tensor Cores: {t / of_kind:.0%} of {kernels} time ({t / 1e6:.1f} ms{split_k}"
            f"{ranks_over(ctx, m)}, {t / total:.0%} of compute-kernel time{with_helpers}); {got['advice']} "
            f"({got['grounds']})"
        )
        metrics = {
            "time_ms": round(t / 1e6, 3),
            f"share_of_{kind}": round(t / of_kind, 4),
            "share_of_kernels": round(t / total, 4),
            "kernels": int(m.sum()),
            **{f"speedup_{q}": round(v, 2) for q, v in got["speedups"].items()},
            "evidence": kernel_evidence(trace, eff, ctx, m),
        }
        f = _finding(rule, title, np.unique(ctx["rank"][m]).tolist(), s0, s1, metrics, fix)
        if got["on"] == "fp16":  # bf16 and TF32 advice would be false on this GPU (ns_resolution's V100)
            f.advice = FP16_ADVICE[rule]
        elif kind in tf32_on:  # the title says TF32 is allowed: the advice does not ask to allow it (trace_filter)
            f.advice = TF32_ALLOWED_ADVICE[rule]
        out.append(f)
    return out


def _elementwise(trace: Trace, eff: Efficiency, analysis: Analysis, ctx) -> list[Finding]:
    rows = [i for i, r in enumerate(eff.families) if r["kind"] in ("elementwise", "norm")]
    # each step's GPU window and the GPU idle around it that belongs to the step: the steps' GPU
    # time, as the rank lines' shares and MFU count it (stall_on's 4 ms windows are 29.7 ms steps)
    windows = [
        (r["rank"], s["start_ns"], s["end_ns"], step_gpu_time_ns(s))
        for r in analysis.ranks
        for s in r.get("steps") or []
        if not s.get("warmup") and s.get("end_ns") is not None and s.get("start_ns") is not None
    ]
    ranks = set(ctx["rank"].tolist())
    windows = [w for w in windows if w[0] in ranks]
    if not rows or not windows:
        return []
    el = np.isin(eff.kernel_family, rows)
    inside = np.zeros(len(eff.kernel), bool)
    for r, a, b, _ in windows:
        inside |= (ctx["rank"] == r) & (ctx["start"] >= a) & (ctx["start"] < b)
    m = el & inside
    step_t = float(sum(w[3] for w in windows))
    t = float(ctx["dur"][m].sum())
    if not step_t or t < ELEMENTWISE_MIN_SHARE * step_t:
        return []
    known = [eff.families[i] for i in rows if eff.families[i].get("gbps") is not None]
    bw = ""
    if known and eff.peaks.gbps:
        moved = sum(r["bytes"] for r in known)
        tt = sum(r["time_ns"] for r in known)
        bw = (
            f"; those whose shapes are recorded at {moved / tt:.0f} GB/s, {moved / tt / eff.peaks.gbps:.0%} of the "
            f"memory bandwidth"
            if tt
            else ""
        )
    fix = [
        Change(
            "faster",
            pct=FUSED_PCT,
            events=_same_names(trace, eff, m),
            label="the elementwise and norm kernels fused (assumed to halve their time),",
        )
    ]
    s0, s1 = kernel_span(ctx, m)
    # the steps' time (the GPU's busy and idle time in them) is what a fix shortens; their share
    # of the compute kernels' time beside it (stall_on: 15% of the steps, most of the kernels)
    kt = float(ctx["dur"][inside].sum())
    # the optimizer's foreach kernels (multi_tensor_apply) are fused across tensors already: a
    # fused optimizer, not torch.compile, is their fix (nsys_ddp: 47% of these kernels' time)
    foreach = unfused_foreach(trace, np.asarray(trace.columns["name"])[eff.kernel[m]])
    opt_t = float(ctx["dur"][m][foreach].sum())
    how, in_opt = "fuse them (torch.compile)", None
    if opt_t >= FOREACH_SHARE * t:
        where = optimizer_kernels(trace, eff.kernel[m][foreach])
        in_opt = None if where is None else float(ctx["dur"][m][foreach][where[0]].sum())
        how += foreach_clause(opt_t / t, None if in_opt is None else in_opt / t, where[1] if where else [])
    # a capture without steps (its one window: the GPU's first op to its last) has no steps to name
    of = "the GPU's time in the capture" if not trace.steps else "the steps' time on the GPU"
    n_steps = max(Counter(w[0] for w in windows).values())  # the time is their sum (an audit: read as a step's)
    span = "" if not trace.steps else f" in {n_steps} step{'s' * (n_steps != 1)}"
    title = (
        f"Memory-bound elementwise and norm ops take {t / step_t:.0%} of {of} "
        f"({t / kt:.0%} of its compute-kernel time; {t / 1e6:.1f} ms in {int(m.sum()):,} kernels{span}{ranks_over(ctx, m)}{bw}): "
        f"{how}"
    )
    metrics = {
        "share_of_steps": round(t / step_t, 4),
        "share_of_kernels": round(t / kt, 4),
        "time_ms": round(t / 1e6, 3),
        "kernels": int(m.sum()),
        "foreach_ms": round(opt_t / 1e6, 3),  # of time_ms: foreach kernels not of a fused optimizer
        # of foreach_ms: launched in an optimizer's step (None: not said, or no step range on record)
        "foreach_optimizer_ms": None if in_opt is None else round(in_opt / 1e6, 3),
        "steps": len(windows),
        "evidence": kernel_evidence(trace, eff, ctx, m),
    }
    f = _finding("elementwise_bound", title, sorted({w[0] for w in windows}), s0, s1, metrics, fix)
    f.advice = _elementwise_advice(trace, eff)
    return [f]


_LAYER_NORM = re.compile(r"layer_?norm|rms_?norm", re.IGNORECASE)
_SOFTMAX = re.compile(r"softmax", re.IGNORECASE)
# a loss's log-softmax (cross entropy: softmax_warp_forward<..., true> is PyTorch's log variant) is no attention
_LOG_SOFTMAX = re.compile(r"log_?softmax|softmax_warp_\w+<[^>]*,\s*true>", re.IGNORECASE)


def _elementwise_advice(trace: Trace, eff) -> str:
    """The fusions that fit the kernels run: a fused optimizer where the optimizer runs unfused,
    LayerNorm/RMSNorm where their kernels run, FlashAttention
    where softmax kernels run and no fused attention does (mfu_2gpu runs flash_fwd_kernel already;
    the V100 ResNet-50 has neither: 'FlashAttention instead of separate softmax' fitted neither)."""
    names = {trace.names[int(i)] for i in np.unique(np.asarray(trace.columns["name"])[eff.kernel])}
    fused_attention = any(r["kind"] == "attention" for r in eff.families)
    how = ["torch.compile"]
    # a fused optimizer where the optimizer runs unfused: foreach kernels not of a fused one, or an
    # optimizer step (PyTorch's Optimizer.step#... range) none of whose kernels is fused (a per-
    # parameter loop); not for a run already fused, nor one with no optimizer on record (inference)
    fused = any(_FUSED_ALREADY.search(n) for n in names)
    # (GradScaler's unscale and clip_grad_norm_'s norms run foreach kernels beside a fused optimizer)
    if any(_FOREACH.search(n) and not _FUSED_ALREADY.search(n) and not _NOT_OPTIMIZER.search(n) for n in names) or (
        not fused and any(n.startswith("Optimizer.step#") for n in trace.names)
    ):
        how.append("fused optimizers")
    if any(_LAYER_NORM.search(n) for n in names):
        how.append("fused LayerNorm/RMSNorm")
    if not fused_attention and any(_SOFTMAX.search(n) and not _LOG_SOFTMAX.search(n) for n in names):
        how.append("FlashAttention (scaled_dot_product_attention) instead of separate softmax and masking")
    return _ELEMENTWISE.format(how=", ".join(how))
