"""What the efficiency findings share (analysis/efficiency_findings.py, analysis/gemm_shapes.py): a
Tensor-Core kernel's fixed cost, and a finding's span, evidence and the ranks its time is over."""

from __future__ import annotations

import numpy as np

from ..model.trace import Trace
from .efficiency import Efficiency

# A Tensor-Core GEMM kernel takes about 3 µs however small (H200, cuBLAS through PyTorch 2.11:
# 64x512x512 in bf16 2.9 µs, in TF32 3.6-3.9 µs; scripts/record_tf32_pair.py): the peak ratio
# speeds up only a SIMT kernel's time past that. Without it launch_eager's 7 µs SGEMMs were said
# to run 7.4x faster on TF32; measured, 1.8x (whatif/tf32 pair in tests/data).
TC_FIXED_NS = 3_000


def ranks_over(ctx, m) -> str:
    """' over both ranks' / ' over the 8 ranks' / ' over 2 of the 8 ranks' after a time summed over
    the ranks the kernels run on ('38.8 ms' read as one rank's was twice its share of a step); ''
    for one rank."""
    n, of = len(np.unique(ctx["rank"][m])), len(np.unique(ctx["rank"]))
    if n < 2:
        return ""
    if n < of:
        return f" over {n} of the {of} ranks"
    return " over both ranks" if n == 2 else f" over the {n} ranks"


def kernel_span(ctx, m) -> tuple[int, int]:
    s = ctx["start"][m]
    return int(s.min()), int((s + ctx["dur"][m].astype(np.int64)).max())


def kernel_evidence(trace: Trace, eff: Efficiency, ctx, m, top: int = 3) -> list[dict]:
    names = np.asarray(trace.columns["name"])[eff.kernel[m]]
    uniq, inv = np.unique(names, return_inverse=True)
    t = np.bincount(inv, weights=ctx["dur"][m])
    return [{"name": trace.names[int(uniq[i])], "ms": round(float(t[i]) / 1e6, 3)} for i in np.argsort(-t)[:top]]
