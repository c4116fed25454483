"""The recorded shapes of CPU ops (Kineto `record_shapes`: Input Dims, Input type, Concrete
Inputs) of the ops asked about that have a work rule (model/work_ops.py: the only ops whose shapes
the reader keeps, and the only ones an analysis reads): kept with the events when the trace was
opened (model/arg_table.py), or else fetched from the source files.

A profiler records shapes on every op or on none, so the first few ops are fetched first: when
none of them has shapes, the file is not read any further (a million-event trace without shapes
costs one piece of the file, not all of it)."""

from __future__ import annotations

from typing import Any

import msgspec
import numpy as np

from ..model.trace import Trace
from ..model.work_ops import ruled_names
from .args_batch import ArgsSpec, kept_args


class _Shapes(msgspec.Struct):
    dims: Any = msgspec.field(default=None, name="Input Dims")
    types: Any = msgspec.field(default=None, name="Input type")
    concrete: Any = msgspec.field(default=None, name="Concrete Inputs")
    dims_v1: Any = msgspec.field(default=None, name="Input dims")  # PyTorch 1.7-1.8's spelling


_SPEC = ArgsSpec(_Shapes)
PROBE = 16  # ops looked at before deciding that the file records no shapes


def op_shapes(trace: Trace, idx: np.ndarray) -> dict[int, dict]:
    """Event index -> {dims, types, concrete} (the keys recorded) for the CPU ops idx (distinct)
    that have a work rule and shapes; {} for sources that are not Kineto JSON or recorded none.
    Other ops are left out whatever the source (their shapes are not kept at open), so that the
    answer does not depend on whether a cache entry or the file gave it."""
    idx = np.asarray(idx, np.int64)  # distinct event indices
    if not len(idx) or not trace.sources or not all(s.format == "kineto" for s in trace.sources):
        return {}
    idx = idx[ruled_names(trace)[np.asarray(trace.columns["name"])[idx]]]
    if not len(idx):
        return {}
    src = np.asarray(trace.columns["src"])[idx]
    first = idx[np.argsort(src, kind="stable")[:PROBE]]  # the earliest in the files: the first piece
    probe = _v1(kept_args(trace, first, _SPEC))
    if not any("dims" in v for v in probe.values()):
        return {}
    rest = idx[~np.isin(idx, first)]
    out = {i: v for i, v in probe.items() if "dims" in v}
    out.update({i: v for i, v in _v1(kept_args(trace, rest, _SPEC)).items() if "dims" in v})
    return out


def _v1(got: dict[int, dict]) -> dict[int, dict]:
    """PyTorch 1.7-1.8's "Input dims" as dims where "Input Dims" is absent (read from the file;
    the capture at open keeps it under "Input Dims")."""
    for v in got.values():
        d1 = v.pop("dims_v1", None)
        if "dims" not in v and d1 is not None:
            v["dims"] = d1
    return got
