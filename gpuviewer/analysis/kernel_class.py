"""What a GPU kernel's name says about it: its kind (gemm, attention, conv, embedding,
elementwise, norm, reduction), the precision it computes in, and whether it runs on Tensor Cores.

The library kernels say so in their names: cuBLAS/CUTLASS `sm80_xmma_gemm_f32f32_..._ffma_...`
multiply on the FP32 SIMT units (ffma: fused multiply-add instructions), `sgemm`/`dgemm` and
CUTLASS `_simt_` too; `hmma`/`imma`/`qmma`/`gmma`/`wgmma` (the matrix instructions), `tensorop`,
`tf32`, `bf16`, `f16`, `e4m3`, cuBLASLt's `nvjet` (Hopper and later) and flash/fused attention
kernels use Tensor Cores; cuDNN's `scudnn` kernels are single-precision SIMT convolutions. A name
that says neither: unknown (None). The precision is read from library kernels' names (matmul,
convolution, attention), not from PyTorch's templated ones, whose signatures name every type.

torch.compile (Inductor) names its Triton kernels triton_<kind>_fused_<ops>_<n>: poi(ntwise) and
for(each) are "fused elementwise", red(uction), per(sistent reduction) and spl(it scan) "fused
reduction" (already fused: advice to fuse elementwise ops is not for them), tem(plate) kernels
matmuls unless their ops say attention or conv. The kind comes from that prefix, not from the
fused ops' names (a pointwise kernel fused into a convolution's backward is not a convolution)."""

from __future__ import annotations

import re
from functools import lru_cache

import numpy as np

# Kernel names that say they run on Tensor Cores (the one set of these rules: kernels.is_tensor_core
# and the efficiency both ask tensor_cores). A name with "gemm" alone does not: sgemm, cgemm and
# implicit_convolve_sgemm are FP32 SIMT kernels (tb_plugin asserts 0% on fp32 ResNet-50); nor does a
# type alone: ncclDevKernel_AllReduce_Sum_bf16 and fbgemm's FP8 quantize kernels are no matrix kernels.
# - MMA shapes of cuBLAS/cuDNN/CUTLASS SASS kernels: volta_h884gemm, turing_fp16_s1688cudnn,
#   cutlass_80_tensorop_s1688gemm (TF32), i8816 (int8), s16816 / h16816 (Ampere)
# - CUTLASS's operator class (OpClassTensorOp, cutlass_tensorop_*), MMA instructions (wmma, hmma,
#   imma, dmma, Hopper's gmma / wgmma)
# - cuBLASLt's Hopper/Blackwell nvjet GEMMs and FlashAttention (fp16/bf16 only)
_TC = re.compile(
    r"[hsid](?:884|1688|16816|8816|16832|16864)|tensorop|wmma|hmma|imma|dmma|qmma|gmma|"
    r"nvjet|flash_?(?:fwd|bwd|attn)|flash::",
    re.IGNORECASE,
)
# cuDNN/cuBLAS xmma and sm80_/sm90_ kernels and PyTorch's fmha run on Tensor Cores only with a
# reduced-precision type in the name (sm80_xmma_gemm_f32f32_f32f32_..._ffma is SIMT FP32)
_NEEDS_TYPE = re.compile(r"xmma|fmha|(?:^|_)sm\d{2,3}_", re.IGNORECASE)
_LOW_PRECISION = re.compile(r"f16|half|tf32|e4m3|e5m2|fp8|int8|(?<![a-z])[is]8|tensor\d", re.IGNORECASE)
_ON_CUDA_CORES = re.compile(r"simt|ffma", re.IGNORECASE)  # CUTLASS/xmma kernels on the CUDA cores, always
# cgemm/zgemm: BLAS's complex single/double GEMMs (cuDNN's FFT convolutions run ampere_gcgemm_*)
_SIMT = re.compile(r"sgemm|dgemm|cgemm|zgemm|dfma|gemm_f32f32|gemm_f64f64|gemv|scudnn", re.IGNORECASE)
_KINDS = (
    ("attention", re.compile(r"flash|fmha|sdpa|attention|attn", re.IGNORECASE)),
    (
        "conv",
        re.compile(
            r"convolution|conv\d|conv_|_conv(?!ert)|scudnn|wgrad|dgrad|implicit_gemm|implicit_convolve|winograd|"
            # cuDNN's FFT convolutions' transforms (fft2d_r2c_32x32<float, ...>(..., cudnn::reduced_divisor, ...))
            r"fft\dd_[rc]2[rc]\w*<.*cudnn::|^fft2d_[rc]2[rc]_\d+x\d+$",  # (an nsys export's short name)
            re.IGNORECASE,
        ),
    ),
    # "gemm" not inside "fbgemm" (the library's permute, quantize and embedding kernels are none)
    ("gemm", re.compile(r"(?<!fb)gemm|gemv|xmma|cutlass|nvjet|cublas|matmul|_mma|tensorop", re.IGNORECASE)),
    # embedding lookups and their backward (FBGEMM's table-batched ones fuse the optimizer in):
    # gathers by index, not a chain of elementwise ops for a compiler to fuse
    ("embedding", re.compile(r"embedding", re.IGNORECASE)),
    # cuDNN's batch norm: bn_fw_tr_* (training), bn_fw_inf_* (inference), bn_bw_*
    ("norm", re.compile(r"norm|gammabeta|(?<![a-z])bn_(?:fw|bw)", re.IGNORECASE)),
    # not cuDNN's reduced_divisor, an argument type of its FFT and other kernels
    ("reduction", re.compile(r"reduce(?!d_divisor)|reduction", re.IGNORECASE)),
    (
        "elementwise",
        re.compile(
            r"elementwise|copy|fill|softmax|gather|scatter|index|cat_|catarray|"
            r"multi_tensor_apply|dropout|memset|memcpy",
            re.IGNORECASE,
        ),
    ),
)
_TRITON = re.compile(r"^triton_(poi|for|red|per|spl|tem)_", re.IGNORECASE)
_TRITON_KIND = {
    "poi": "fused elementwise",
    "for": "fused elementwise",
    "red": "fused reduction",
    "per": "fused reduction",
    "spl": "fused reduction",
    "tem": "gemm",
}
_PREC = (
    ("fp8", re.compile(r"e4m3|e5m2|fp8", re.IGNORECASE)),
    ("tf32", re.compile(r"tf32", re.IGNORECASE)),
    ("bf16", re.compile(r"bf16|bfloat16", re.IGNORECASE)),
    ("fp16", re.compile(r"f16f16|fp16|_h1688|_h16816|hgemm|half|\bf16|_f16", re.IGNORECASE)),
    ("fp64", re.compile(r"dgemm|zgemm|f64f64|dfma|double", re.IGNORECASE)),
    ("fp32", re.compile(r"sgemm|cgemm|f32f32|ffma|scudnn|\bfloat\b", re.IGNORECASE)),
)


@lru_cache(maxsize=1 << 16)  # every rank of a job names the same kernels
def tensor_cores(name: str) -> bool | None:
    """True: a Tensor-Core kernel; False: a matrix kernel on the SIMT units; None: not said."""
    if _ON_CUDA_CORES.search(name) or (_SIMT.search(name) and not re.search(r"tf32|hmma|gmma", name, re.IGNORECASE)):
        return False
    if _TC.search(name) or (_NEEDS_TYPE.search(name) and _LOW_PRECISION.search(name)):
        return True
    return None


# XLA's fused kernels (JAX): a loop fusion is elementwise ops fused into one loop; an input fusion
# is named for its root op, a reduction (input_reduce_fusion) or else a scatter, transpose... moving
# data (jax_train_stall's loop_subtract_fusion_3, loop_add_fusion: 31% of its compute said as
# "other"; an audit). A copy's number follows as _N or .N.
_XLA = re.compile(r"^(loop|input)_([a-z0-9_]*)fusion(?:[._]\d+)?$", re.IGNORECASE)


def kind(name: str) -> str:
    m = _TRITON.match(name)
    x = _XLA.match(name) if m is None else None
    if x is not None:
        reduce = x.group(1).lower() == "input" and "reduce" in x.group(2).lower()
        return "fused reduction" if reduce else "fused elementwise"
    if m is None:
        return next((k for k, rx in _KINDS if rx.search(name)), "other")
    k = _TRITON_KIND[m.group(1).lower()]
    rx = dict(_KINDS)
    if k == "gemm":  # a template: flex attention, a convolution, else a matmul (mm, bmm, addmm)
        return next((x for x in ("attention", "conv") if rx[x].search(name)), "gemm")
    return k


# cuDNN's generated kernels (its SDPA: cudnn_generated_fort_native_sdpa_..._wgmma_f16_...) say
# "f16" for either 16-bit type: the same kernel runs PyTorch's bf16 attention
_CUDNN_GENERATED = re.compile(r"cudnn_generated", re.IGNORECASE)


def precision(name: str) -> str | None:
    """The precision a matmul, convolution or attention kernel's name says it computes in; None
    for other kernels (an elementwise kernel's template names float, double... whatever it uses).
    "16-bit": fp16 or bf16, the name does not say which."""
    if kind(name) not in ("gemm", "conv", "attention"):
        return None
    p = next((p for p, rx in _PREC if rx.search(name)), None)
    return "16-bit" if p == "fp16" and _CUDNN_GENERATED.search(name) else p


# the architecture cuBLAS / cuDNN / CUTLASS kernels are built for, named in them (volta_sgemm_*,
# turing_fp16_*, ampere_bf16_*, sm80_xmma_*, sm90_xmma_*): major compute capability
_ARCH_IN_NAME = (
    (re.compile(r"(?:^|[^a-z0-9])(?:volta|sm_?70)_", re.I), 7, "volta_*"),
    (re.compile(r"(?:^|[^a-z0-9])(?:turing|sm_?75)_", re.I), 7, "turing_*"),
    (re.compile(r"(?:^|[^a-z0-9])(?:ampere|sm_?8[0-9])_", re.I), 8, "ampere_* / sm8x_*"),
    (re.compile(r"(?:^|[^a-z0-9])(?:hopper|sm_?90a?)_", re.I), 9, "sm90_*"),
    (re.compile(r"(?:^|[^a-z0-9])(?:blackwell|sm_?10[0-9]a?)_", re.I), 10, "sm100_*"),
)


def newest_arch(names: list[str]) -> tuple[int, str] | None:
    """The newest architecture the kernels' names are built for, as (major compute capability,
    the names' pattern): libraries run an older architecture's kernels on a newer GPU, never the
    reverse (an A100 runs volta_sgemm beside its sm80_ kernels, a V100 only volta_)."""
    best = None
    for pat, major, tag in _ARCH_IN_NAME:
        if (best is None or major > best[0]) and any(pat.search(n) for n in names):
            best = (major, tag)
    return best


# cuBLAS's split-K reduce (cublasLt::splitKreduce_kernel) sums the partial products of the GEMM
# launched right before it on its stream: part of that GEMM's work
SPLIT_K = re.compile(r"splitKreduce|splitk_?reduce", re.IGNORECASE)


def follow_split_k(tc_code: np.ndarray, names: list[str], inv: np.ndarray, lanes: np.ndarray) -> np.ndarray:
    """Give each split-K reduce kernel the Tensor-Core verdict of the GEMM kernel before it on its
    lane (in place; kernels in event order, so a lane's are in start order). Without ops on record
    its family was its own 'gemm fp32' (launch_graph: 75% of GEMM time on the SIMT units where the
    eager run of the same kernels, whose op joins them, said 100%). Returns inv with each such
    reduce given its GEMM's name: the family it joins (its own name's 'float' is no GEMM's
    precision: launch_graph_tf32's reduces read 'gemm fp32, Tensor Cores' beside their TF32 GEMMs)."""
    split = np.array([bool(SPLIT_K.search(n)) for n in names], bool)[inv] if len(inv) else np.zeros(0, bool)
    gemm = np.array([kind(n) == "gemm" and not SPLIT_K.search(n) for n in names], bool)[inv] if len(inv) else split
    at = np.flatnonzero(split[1:]) + 1
    ok = gemm[at - 1] & (lanes[at] == lanes[at - 1])
    tc_code[at[ok]] = tc_code[at[ok] - 1]
    joined = inv.copy()
    joined[at[ok]] = inv[at[ok] - 1]
    return joined
