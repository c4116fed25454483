"""Kernel statistics: top kernels by total time, Tensor-Core share, launch statistics."""
from __future__ import annotations

import re
from functools import lru_cache

import numpy as np

from ..model.categories import Cat
from ..model.trace import Trace
from .breakdown import RankBreakdown

# Kernel names that say they run on Tensor Cores. A name with "gemm" alone does not: sgemm,
# cgemm and implicit_convolve_sgemm are FP32 SIMT kernels (tb_plugin asserts 0% on fp32 ResNet-50).
# - MMA shapes of cuBLAS/cuDNN/CUTLASS SASS kernels: volta_h884gemm, turing_fp16_s1688cudnn,
#   cutlass_80_tensorop_s1688gemm (TF32), i8816 (int8), s16816 / h16816 (Ampere)
# - CUTLASS's operator class (OpClassTensorOp, cutlass_tensorop_*), MMA instructions (wmma, hmma,
#   imma, dmma, Hopper's gmma / wgmma)
# - cuBLASLt's Hopper/Blackwell nvjet GEMMs and FlashAttention (fp16/bf16 only)
TENSOR_CORE = re.compile(r"[hsid](?:884|1688|16816|8816|16832|16864)|tensorop|wmma|hmma|imma|dmma|gmma|"
                         r"nvjet|flash_?(?:fwd|bwd|attn)|flash::", re.IGNORECASE)
# cuDNN/cuBLAS xmma and sm80_/sm90_ kernels and PyTorch's fmha run on Tensor Cores only with a
# reduced-precision type in the name (sm80_xmma_gemm_f32f32_f32f32_..._ffma is SIMT FP32)
_NEEDS_TYPE = re.compile(r"xmma|fmha|(?:^|_)sm\d{2,3}_", re.IGNORECASE)
_LOW_PRECISION = re.compile(r"f16|half|tf32|e4m3|e5m2|fp8|int8|(?<![a-z])[is]8|tensor\d", re.IGNORECASE)
_SIMT = re.compile(r"simt|ffma", re.IGNORECASE)  # CUTLASS/xmma kernels on the CUDA cores


@lru_cache(maxsize=1 << 16)  # every rank of a job names the same kernels: 15% of a 64-rank map
def is_tensor_core(name: str) -> bool:
    if _SIMT.search(name):
        return False
    if TENSOR_CORE.search(name):
        return True
    return bool(_NEEDS_TYPE.search(name) and _LOW_PRECISION.search(name))


def kernel_stats(trace: Trace, rb: RankBreakdown, top: int = 15) -> dict:
    c = trace.columns
    ops = rb.ops if rb.ops is not None else np.zeros(0, np.int64)
    cat = np.asarray(c["cat"][ops])
    k = ops[(cat == Cat.KERNEL) | (cat == Cat.COMM_KERNEL)]
    if not len(k):
        return {"kernels": 0, "top": [], "tensor_core_share": 0.0, "mean_kernel_us": 0.0,
                "mean_gap_us": 0.0, "total_kernel_ns": 0}
    names = np.asarray(c["name"][k])
    dur = np.asarray(c["dur"][k]).astype(np.int64)
    start = np.asarray(c["start"][k]).astype(np.int64)
    total = int(dur.sum())
    uniq, inv = np.unique(names, return_inverse=True)
    tot = np.bincount(inv, weights=dur)
    cnt = np.bincount(inv)
    text = [trace.names[int(u)] for u in uniq]
    # ties broken by the name's text, not its id (ids depend on which files were loaded together)
    order = sorted(range(len(uniq)), key=lambda i: (-tot[i], text[i]))[:top]
    rows = [{"name": text[i], "count": int(cnt[i]), "total_ns": int(tot[i]),
             "mean_ns": float(tot[i] / cnt[i]), "share": float(tot[i] / total) if total else 0.0} for i in order]
    tc_names = np.array([is_tensor_core(t) for t in text])
    tc = float(tot[tc_names].sum() / total) if total else 0.0
    # launch statistics on compute kernels: gaps between consecutive kernels on the same lane
    lanes = np.asarray(c["lane"][k])
    o = np.lexsort((start, lanes))
    s, e, ln = start[o], start[o] + dur[o], lanes[o]
    same = ln[1:] == ln[:-1]
    gap = (s[1:] - e[:-1])[same]
    gap = gap[gap >= 0]
    return {"kernels": int(len(k)), "top": rows, "tensor_core_share": round(tc, 4),
            "mean_kernel_us": float(dur.mean() / 1e3), "median_kernel_us": float(np.median(dur) / 1e3),
            "mean_gap_us": float(gap.mean() / 1e3) if len(gap) else 0.0,
            "median_gap_us": float(np.median(gap) / 1e3) if len(gap) else 0.0,
            "total_kernel_ns": total, "gaps": gap}
