"""The arguments of NCCL kernels that collective matching needs: process group, collective
name, element counts, dtype and group size (PyTorch profiler traces record them on the kernel
since 2.1). The store keeps no arguments, so they are fetched from the source once per session,
in source order (each piece of the file decoded once), and kept on the trace."""
from __future__ import annotations

import numpy as np

from ..model.categories import Cat
from ..model.trace import Trace
from .errors import TraceError

_KEYS = {"Process Group Name": "group", "Process Group Description": "group_desc",
         "Process Group Ranks": "group_ranks", "Collective name": "collective",
         "In msg nelems": "in_nelems", "Out msg nelems": "out_nelems", "dtype": "dtype",
         "Group size": "group_size"}


def collective_args(trace: Trace) -> dict[int, dict]:
    """Event index -> {group, group_desc, group_ranks, collective, in_nelems, out_nelems, dtype,
    group_size} (only the keys the producer recorded) for every communication kernel."""
    cached = trace._lane_cache.get("collective_args")
    if cached is not None:
        return cached
    out: dict[int, dict] = {}
    idx = np.flatnonzero(np.asarray(trace.columns["cat"]) == Cat.COMM_KERNEL)
    if len(idx) and trace.sources and all(s.format == "kineto" for s in trace.sources):
        from .args import event_args
        lane_src = np.array([ln.source for ln in trace.lanes], np.int64)
        src_file = lane_src[np.asarray(trace.columns["lane"][idx])]
        order = np.lexsort((np.asarray(trace.columns["src"][idx]), src_file))
        for i in idx[order].tolist():
            try:
                a = event_args(trace, i)
            except (TraceError, OSError, ValueError, KeyError, IndexError):
                break  # the file changed or cannot be read again: match by kernel name and order
            rec = {v: a[k] for k, v in _KEYS.items() if k in a}
            if rec:
                out[i] = rec
    trace._lane_cache["collective_args"] = out
    return out
