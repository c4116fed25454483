"""The work of one PyTorch op from its recorded shapes: floating-point operations and bytes moved.

A Kineto trace recorded with shapes (`record_shapes=True`) gives every CPU op `Input Dims` (a
list per argument: a tensor's sizes, [] for a scalar, a list of lists for a tensor list), `Input
type` (c10::BFloat16, float, ...) and `Concrete Inputs` (scalars and int lists as text). From
them, op_work gives the FLOPs of matmuls, convolutions and attention (a multiply-add counts 2)
and the bytes every op reads and writes once (its tensor inputs and its output; no cache reuse,
no re-reads: the least it must move). Elementwise, norm and reduction ops count bytes only.

Attention: QK^T and PV, 4·B·H·L·S·E, halved when causal; its backward 2.5x the forward (two
matmuls more for the gradients and the recomputed scores, as FlashAttention counts them).
Convolution backward: the forward's FLOPs for each gradient asked for (input, weight).
"""

from __future__ import annotations

import ast
import math
from dataclasses import dataclass

from ..model.work_ops import BINARY, ELEMENTWISE, NORM, REDUCTION, UNARY

# Input type -> (precision, bytes an element)
_DTYPES = {
    "c10::BFloat16": ("bf16", 2),
    "c10::Half": ("fp16", 2),
    "float": ("fp32", 4),
    "double": ("fp64", 8),
    "c10::Float8_e4m3fn": ("fp8", 1),
    "c10::Float8_e5m2": ("fp8", 1),
    "c10::Float8_e4m3fnuz": ("fp8", 1),
    "c10::Float8_e5m2fnuz": ("fp8", 1),
    "long int": ("int64", 8),
    "int": ("int32", 4),
    "short int": ("int16", 2),
    "signed char": ("int8", 1),
    "unsigned char": ("uint8", 1),
    "bool": ("bool", 1),
    "c10::complex<float>": ("complex64", 8),
    "c10::complex<double>": ("complex128", 16),
}
FLOAT_PRECISIONS = ("fp64", "fp32", "bf16", "fp16", "fp8")


@dataclass(frozen=True)
class Work:
    kind: str  # gemm, attention, conv, elementwise, norm, reduction
    flops: float  # 0 for ops counted by bytes only
    bytes: float
    precision: str | None  # of the op's first floating-point tensor: bf16, fp16, fp32, fp64, fp8
    shape: tuple[int, int, int, int] | None = None  # a matmul's (M, N, K, batch): the shape finding reads it


def dtype_of(t) -> tuple[str | None, int]:
    """(precision, element size) of an `Input type` entry; (None, 0) when not a tensor type."""
    return _DTYPES.get(t, (None, 0)) if isinstance(t, str) else (None, 0)


def _is_shape(d) -> bool:
    return isinstance(d, list) and all(type(x) is int and x >= 0 for x in d)


def _numel(d) -> int:
    return math.prod(d) if _is_shape(d) else 0


def _tensors(dims, types) -> list[tuple[list, str | None, int]]:
    """(shape, precision, element size) of each tensor argument (non-empty shape and a tensor type),
    tensor lists flattened."""
    out = []
    for i, d in enumerate(dims):
        t = types[i] if i < len(types) else None
        if _is_shape(d):  # [] with a tensor type is a 0-d tensor (one element); with "Scalar", a scalar
            prec, size = dtype_of(t)
            if size:
                out.append((d, prec, size))
        elif isinstance(d, list) and d and all(_is_shape(x) for x in d):  # TensorList: no per-item type
            for x in d:
                if x:
                    out.append((x, None, 0))
    return out


def _arg(dims, types, i: int) -> tuple[int, int] | None:
    """(elements, element size) of tensor argument i, None where it is not a tensor of a known type."""
    if i >= len(dims) or not _is_shape(dims[i]) or i >= len(types):
        return None
    size = dtype_of(types[i])[1]
    return (_numel(dims[i]), size) if size else None


def _precision(ts) -> str | None:
    return next((p for _, p, _ in ts if p in FLOAT_PRECISIONS), None)


def _bytes(ts, out_elems: int | None = None) -> float:
    """Inputs read once plus the output written once: out_elems, or the largest input's size; NaN
    where no tensor's type is on record (PyTorch 1.7-1.8 wrote 'Input type': []): not 0 bytes."""
    if not ts:
        return math.nan
    size = next((s for _, p, s in ts if p in FLOAT_PRECISIONS), 0) or next((s for _, _, s in ts if s), 0)
    read = sum(_numel(d) * (s or size) for d, _, s in ts)
    if out_elems is None:
        out_elems = max((_numel(d) for d, _, _ in ts), default=0)
    return float(read + out_elems * size)


def _scalar(concrete, i: int):
    """Concrete Inputs[i] as a Python value (int, float, bool, list), None if absent or unreadable."""
    if not isinstance(concrete, list) or i >= len(concrete) or not isinstance(concrete[i], str):
        return None
    s = concrete[i].strip()
    if not s or len(s) > 256:
        return None
    if s in ("True", "False"):
        return s == "True"
    try:
        return ast.literal_eval(s)
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        return None


def _ints(v, n: int) -> list[int] | None:
    """An int-list argument (stride, padding...) as n ints: a single int repeated."""
    if type(v) is int:
        return [v] * n
    if isinstance(v, (list, tuple)) and all(type(x) is int for x in v):
        if len(v) == n:
            return list(v)
        if len(v) == 1:
            return list(v) * n
    return None


# -- matmuls ----------------------------------------------------------------------------------


def _gemm(m: int, n: int, k: int, batch: int, ts) -> Work:
    return Work("gemm", 2.0 * batch * m * n * k, _bytes(ts, batch * m * n), _precision(ts), (m, n, k, batch))


def _mm(dims, types, concrete, a=0, b=1):
    ts = _tensors(dims, types)
    if len(dims) <= max(a, b) or not (_is_shape(dims[a]) and _is_shape(dims[b])):
        return None
    x, y = dims[a], dims[b]
    if len(x) != 2 or len(y) != 2 or x[1] != y[0]:
        return None
    return _gemm(x[0], y[1], x[1], 1, ts)


def _bmm(dims, types, concrete, a=0, b=1):
    ts = _tensors(dims, types)
    if len(dims) <= max(a, b) or not (_is_shape(dims[a]) and _is_shape(dims[b])):
        return None
    x, y = dims[a], dims[b]
    if len(x) != 3 or len(y) != 3 or x[0] != y[0] or x[2] != y[1]:
        return None
    return _gemm(x[1], y[2], x[2], x[0], ts)


def _matmul(dims, types, concrete):
    if len(dims) < 2 or not (_is_shape(dims[0]) and _is_shape(dims[1])) or not dims[0] or not dims[1]:
        return None
    x, y = list(dims[0]), list(dims[1])
    x = [1] + x if len(x) == 1 else x  # a vector is a 1-row / 1-column matrix
    y = y + [1] if len(y) == 1 else y
    if x[-1] != y[-2]:
        return None
    bx, by = x[:-2], y[:-2]
    nb = max(len(bx), len(by))
    bx, by = [1] * (nb - len(bx)) + bx, [1] * (nb - len(by)) + by
    if any(p != q and 1 not in (p, q) for p, q in zip(bx, by)):
        return None
    batch = math.prod(max(p, q) for p, q in zip(bx, by))
    return _gemm(x[-2], y[-1], x[-1], batch, _tensors(dims, types))


def _linear(dims, types, concrete):
    """input [..., K], weight [N, K] (bias [N])."""
    if len(dims) < 2 or not (_is_shape(dims[0]) and _is_shape(dims[1])) or not dims[0] or len(dims[1]) != 2:
        return None
    x, w = dims[0], dims[1]
    if x[-1] != w[1]:
        return None
    return _gemm(math.prod(x[:-1]), w[0], w[1], 1, _tensors(dims, types))


# -- convolutions -----------------------------------------------------------------------------


def _conv_flops(x, w, stride, pad, dil, groups, transposed) -> tuple[float, int] | None:
    """(forward FLOPs, output elements) of input x [N, C, *spatial] and weight w."""
    nd = len(x) - 2
    if nd < 1 or len(w) != len(x) or groups is None or groups < 1:
        return None
    stride, pad, dil = _ints(stride, nd), _ints(pad, nd), _ints(dil, nd)
    if stride is None or pad is None or dil is None:
        return None
    ksize = math.prod(w[2:])
    if transposed:  # weight [C_in, C_out/g, k...]: every input element scatters into the output
        c_out = w[1] * groups
        out = [(i - 1) * s - 2 * p + d * (k - 1) + 1 for i, s, p, d, k in zip(x[2:], stride, pad, dil, w[2:])]
        flops = 2.0 * x[0] * math.prod(x[2:]) * x[1] * w[1] * ksize
    else:  # weight [C_out, C_in/g, k...]
        c_out = w[0]
        out = [
            (i + 2 * p - d * (k - 1) - 1) // s + 1 if s > 0 else 0
            for i, s, p, d, k in zip(x[2:], stride, pad, dil, w[2:])
        ]
        flops = 2.0 * x[0] * c_out * math.prod(max(o, 0) for o in out) * w[1] * ksize
    return flops, x[0] * c_out * math.prod(max(o, 0) for o in out)


def _conv(dims, types, concrete, order):
    """order: the argument positions of (input, weight, stride, padding, dilation, transposed,
    groups); transposed None: not an argument (never transposed)."""
    xi, wi, si, pi, di, ti, gi = order
    if len(dims) <= max(xi, wi) or not (_is_shape(dims[xi]) and _is_shape(dims[wi])):
        return None
    transposed = bool(_scalar(concrete, ti)) if ti is not None else False
    got = _conv_flops(
        dims[xi],
        dims[wi],
        _scalar(concrete, si),
        _scalar(concrete, pi),
        _scalar(concrete, di),
        _scalar(concrete, gi),
        transposed,
    )
    if got is None:
        return None
    ts = _tensors(dims, types)
    return Work("conv", got[0], _bytes(ts, got[1]), _precision(ts))


def _conv_backward(dims, types, concrete):
    """aten::convolution_backward(grad_output, input, weight, bias_sizes, stride, padding,
    dilation, transposed, output_padding, groups, output_mask)."""
    if len(dims) < 3 or not all(_is_shape(dims[i]) for i in (0, 1, 2)):
        return None
    transposed = bool(_scalar(concrete, 7))
    got = _conv_flops(
        dims[1],
        dims[2],
        _scalar(concrete, 4),
        _scalar(concrete, 5),
        _scalar(concrete, 6),
        _scalar(concrete, 9),
        transposed,
    )
    if got is None:
        return None
    mask = _scalar(concrete, 10)
    grads = sum(1 for m in (mask[:2] if isinstance(mask, list) and len(mask) >= 2 else [True, True]) if m)
    ts = _tensors(dims, types)
    out = (_numel(dims[1]) if grads and (not isinstance(mask, list) or mask[0]) else 0) + (
        _numel(dims[2]) if isinstance(mask, list) and len(mask) > 1 and mask[1] else 0
    )
    return Work("conv", got[0] * grads, _bytes(ts, out), _precision(ts))


# -- attention --------------------------------------------------------------------------------


def _attention(dims, types, concrete, q, layout, causal_at, backward, causal_mask=False):
    """q: the query's argument position (key and value follow it); layout "BHLE" or "BLHE";
    causal_at: the position of is_causal (or of custom_mask_type, causal_mask: nonzero is causal)."""
    if len(dims) < q + 3 or not all(_is_shape(dims[i]) and len(dims[i]) == 4 for i in (q, q + 1, q + 2)):
        return None
    qd, kd, vd = dims[q], dims[q + 1], dims[q + 2]
    if layout == "BHLE":
        b, h, lq, e = qd
        s, ev = kd[2], vd[3]
    else:
        b, lq, h, e = qd
        s, ev = kd[1], vd[3]
    flops = 2.0 * b * h * lq * s * e + 2.0 * b * h * lq * s * ev
    c = _scalar(concrete, causal_at) if causal_at is not None else None
    if (causal_mask and type(c) is int and c != 0) or (not causal_mask and c is True):
        flops /= 2
    ts = _tensors(dims, types)
    if backward:
        flops *= 2.5
    out = _numel(qd) if not backward else _numel(qd) + _numel(kd) + _numel(vd)
    return Work("attention", flops, _bytes(ts, out), _precision(ts))


# -- bytes only -------------------------------------------------------------------------------


# what an op reads and writes, where not every tensor argument is read and the output is not new
# (an audit found fill_'s and copy_'s destinations and mul's out= counted as read: HTA's
# negative_queue trace's elementwise fp32 at 1462 GB/s where the bytes moved give about 950)
_WRITE_ONLY = ("fill", "zero")  # fill_(self, value), zero_(self): self written, nothing read


def _moves(kind: str, op: str = ""):
    # a tensor past the op's operands is its out= (written, not read)
    arity = 1 if op in UNARY else 2 if op in BINARY else None

    def rule(dims, types, concrete):
        ts = _tensors(dims, types)
        if not ts:
            return None
        # by the arguments' positions (a tensor of a type not known is left out of ts) and each
        # tensor's own element size (AMP's copy_ from fp32 into bf16 moves 6 bytes an element)
        dest = _arg(dims, types, 0)
        if op in _WRITE_ONLY and dest:
            b = float(dest[0] * dest[1])
        elif op == "copy" and dest and (src := _arg(dims, types, 1)):  # copy_(self, src)
            b = float(src[0] * src[1] + dest[0] * dest[1])
        elif arity is not None and len(ts) == arity + 1 and _numel(ts[-1][0]) == max(_numel(d) for d, _, _ in ts):
            out_shape, _, out_size = ts[-1]  # out=: written at its own element size
            b = _bytes(ts[:-1], 0) + _numel(out_shape) * (out_size or ts[0][2])
        else:
            b = _bytes(ts)
        return Work(kind, 0.0, b, _precision(ts)) if b > 0 else None  # a tensor list without types: unknown

    return rule


def _reduction(dims, types, concrete):
    ts = _tensors(dims, types)
    b = _bytes(ts, 0) if ts else 0.0
    return Work("reduction", 0.0, b, _precision(ts)) if b > 0 else None  # the output is small next to its input


def _a(q, layout, causal_at, backward=False, causal_mask=False):
    return lambda d, t, c: _attention(d, t, c, q, layout, causal_at, backward, causal_mask)


def _c(*order):
    return lambda d, t, c: _conv(d, t, c, order)


RULES = {
    "aten::mm": _mm,
    "aten::addmm": lambda d, t, c: _mm(d, t, c, 1, 2),
    "aten::_addmm_activation": lambda d, t, c: _mm(d, t, c, 1, 2),
    "aten::bmm": _bmm,
    "aten::baddbmm": lambda d, t, c: _bmm(d, t, c, 1, 2),
    "aten::matmul": _matmul,
    "aten::linear": _linear,
    "aten::_scaled_mm": _mm,
    # input, weight, stride, padding, dilation, transposed, groups
    "aten::convolution": _c(0, 1, 3, 4, 5, 6, 8),
    "aten::_convolution": _c(0, 1, 3, 4, 5, 6, 8),
    "aten::conv1d": _c(0, 1, 3, 4, 5, None, 6),
    "aten::conv2d": _c(0, 1, 3, 4, 5, None, 6),
    "aten::conv3d": _c(0, 1, 3, 4, 5, None, 6),
    "aten::cudnn_convolution": _c(0, 1, 3, 2, 4, None, 5),  # (self, weight, padding, stride, dilation, groups...)
    "aten::convolution_backward": _conv_backward,
    "aten::scaled_dot_product_attention": _a(0, "BHLE", 5),
    "aten::_scaled_dot_product_flash_attention": _a(0, "BHLE", 4),
    "aten::_scaled_dot_product_efficient_attention": _a(0, "BHLE", 6),
    "aten::_scaled_dot_product_cudnn_attention": _a(0, "BHLE", 6),
    "aten::_cudnn_attention_forward": _a(0, "BHLE", 10),
    "aten::_flash_attention_forward": _a(0, "BLHE", 8),
    "aten::_efficient_attention_forward": _a(0, "BLHE", 9, causal_mask=True),
    "aten::_scaled_dot_product_flash_attention_backward": _a(1, "BHLE", 11, True),
    "aten::_scaled_dot_product_efficient_attention_backward": _a(1, "BHLE", 11, True),
    "aten::_scaled_dot_product_cudnn_attention_backward": _a(1, "BHLE", 14, True),
    "aten::_cudnn_attention_backward": _a(1, "BHLE", 14, True),
    "aten::_flash_attention_backward": _a(1, "BLHE", 11, True),
    "aten::_efficient_attention_backward": _a(1, "BLHE", 14, True, causal_mask=True),
}
for _n in ELEMENTWISE:
    RULES.setdefault("aten::" + _n, _moves("elementwise", _n))
    RULES.setdefault("aten::" + _n + "_", _moves("elementwise", _n))  # in place
for _n in NORM:
    RULES.setdefault("aten::" + _n, _moves("norm"))
for _n in REDUCTION:
    RULES.setdefault("aten::" + _n, _reduction)

FLOP_KINDS = ("gemm", "conv", "attention")


def op_work(name: str, dims, types=None, concrete=None) -> Work | None:
    """The op's work from its recorded arguments; None when it has no rule or its shapes do not fit."""
    rule = RULES.get(name)
    if rule is None or not isinstance(dims, list):
        return None
    types = types if isinstance(types, list) else []
    try:
        return rule(dims, types, concrete)
    except (TypeError, ValueError, IndexError, OverflowError, ZeroDivisionError):
        return None  # a shape the rule cannot read is an op without work, not a crash
