"""The CPU ops whose work (FLOPs, bytes moved) a rule can compute from their recorded shapes
(analysis/flops.py: RULES has a rule for each of these names and no other). The Kineto reader
keeps the recorded shapes of these ops only (io/arg_capture.py): no analysis reads another op's
shapes, and skipping them takes a third of the capture's time on a trace recorded with shapes."""

from __future__ import annotations

from typing import Any

import numpy as np

# matmuls, convolutions and attention: FLOPs from their shapes
FLOP_OPS = (
    "aten::mm",
    "aten::addmm",
    "aten::_addmm_activation",
    "aten::bmm",
    "aten::baddbmm",
    "aten::matmul",
    "aten::linear",
    "aten::_scaled_mm",
    "aten::convolution",
    "aten::_convolution",
    "aten::conv1d",
    "aten::conv2d",
    "aten::conv3d",
    "aten::cudnn_convolution",
    "aten::convolution_backward",
    "aten::scaled_dot_product_attention",
    "aten::_scaled_dot_product_flash_attention",
    "aten::_scaled_dot_product_efficient_attention",
    "aten::_scaled_dot_product_cudnn_attention",
    "aten::_cudnn_attention_forward",
    "aten::_flash_attention_forward",
    "aten::_efficient_attention_forward",
    "aten::_scaled_dot_product_flash_attention_backward",
    "aten::_scaled_dot_product_efficient_attention_backward",
    "aten::_scaled_dot_product_cudnn_attention_backward",
    "aten::_cudnn_attention_backward",
    "aten::_flash_attention_backward",
    "aten::_efficient_attention_backward",
)
# elementwise ops of one and of two tensor operands (analysis/flops.py: a tensor past them is an
# out=, written and not read)
UNARY = (
    "neg",
    "abs",
    "exp",
    "log",
    "sqrt",
    "rsqrt",
    "sigmoid",
    "tanh",
    "relu",
    "gelu",
    "silu",
    "reciprocal",
    "sin",
    "cos",
)
BINARY = (
    "add",
    "sub",
    "mul",
    "div",
    "pow",
    "maximum",
    "minimum",
)
# bytes moved only; each also in place (name_)
ELEMENTWISE = (
    *BINARY,
    *UNARY,
    "gelu_backward",
    "silu_backward",
    "threshold_backward",
    "sigmoid_backward",
    "tanh_backward",
    "where",
    "masked_fill",
    "clamp",
    "copy",
    "fill",
    "zero",
    "lerp",
    "addcmul",
    "addcdiv",
    "native_dropout",
    "native_dropout_backward",
    "_softmax",
    "_log_softmax",
    "_softmax_backward_data",
    "_log_softmax_backward_data",
    "cat",
    "index_select",
    "embedding",
    "embedding_dense_backward",
    "nll_loss_forward",
    "nll_loss_backward",
    "clone",
    "_to_copy",
    "stack",
    "mse_loss",
    "mse_loss_backward",
)
# bytes moved only
NORM = (
    "native_layer_norm",
    "native_layer_norm_backward",
    "native_batch_norm",
    "native_batch_norm_backward",
    "cudnn_batch_norm",
    "cudnn_batch_norm_backward",
    "native_group_norm",
    "native_group_norm_backward",
    "_fused_rms_norm",
    "_fused_rms_norm_backward",
    "rms_norm",
    "_batch_norm_impl_index",
    "_batch_norm_impl_index_backward",
)
REDUCTION = (
    "sum",
    "mean",
    "amax",
    "amin",
    "max",
    "min",
    "norm",
    "linalg_vector_norm",
    "var_mean",
    "std",
    "var",
    "argmax",
    "argmin",
    "nll_loss2d_forward",
)


def _names() -> frozenset[str]:
    out = set(FLOP_OPS)
    out.update(f"aten::{n}" for n in ELEMENTWISE)
    out.update(f"aten::{n}_" for n in ELEMENTWISE)
    out.update(f"aten::{n}" for n in NORM + REDUCTION)
    return frozenset(out)


NAMES = _names()


def ruled_names(trace: Any) -> np.ndarray:
    """Per name of the trace (trace.names), whether it is one of NAMES; kept with the trace
    (trace.derived), as the efficiency and the shape reader both ask for every name."""
    got = trace.derived.get("work_op_names")
    if got is None or len(got) != len(trace.names):
        got = np.fromiter((n in NAMES for n in trace.names), bool, len(trace.names))
        trace.derived["work_op_names"] = got
    return got
