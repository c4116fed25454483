"""The arguments of NCCL kernels that collective matching needs: process group, collective
name, element counts, dtype and group size (PyTorch profiler traces record them on the kernel
since 2.1). They are kept with the events when the trace is opened (model/arg_table.py); a
session opened without them (other paths into the cache) fetches them from the source once, in
source order (each piece of the file decompressed and decoded once, by a decoder that builds only
these fields). Either way they are kept on the trace for the session."""

from __future__ import annotations

from typing import Any

import msgspec
import numpy as np

from ..model.categories import Cat
from ..model.trace import Trace
from .args_batch import ArgsSpec, kept_args


class _CommArgs(msgspec.Struct):
    group: Any = msgspec.field(default=None, name="Process Group Name")
    group_desc: Any = msgspec.field(default=None, name="Process Group Description")
    group_ranks: Any = msgspec.field(default=None, name="Process Group Ranks")
    collective: Any = msgspec.field(default=None, name="Collective name")
    in_nelems: Any = msgspec.field(default=None, name="In msg nelems")
    out_nelems: Any = msgspec.field(default=None, name="Out msg nelems")
    dtype: Any = None
    group_size: Any = msgspec.field(default=None, name="Group size")
    src_rank: Any = msgspec.field(default=None, name="Src Rank")  # point-to-point: the peer
    dst_rank: Any = msgspec.field(default=None, name="Dst Rank")


_SPEC = ArgsSpec(_CommArgs)


def collective_args(trace: Trace) -> dict[int, dict]:
    """Event index -> {group, group_desc, group_ranks, collective, in_nelems, out_nelems, dtype,
    group_size} (only the keys the producer recorded) for every communication kernel."""
    cached = trace.derived.get("collective_args")
    if cached is not None:
        return cached
    idx = np.flatnonzero(np.asarray(trace.columns["cat"]) == Cat.COMM_KERNEL)
    out = kept_args(trace, idx, _SPEC)  # without them kernels match by name and order
    trace.derived["collective_args"] = out
    return out
