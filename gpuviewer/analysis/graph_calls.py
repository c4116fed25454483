"""The CUDA calls a CUDA graph does not take off the host (`whatif --no-launch-overhead` keeps
them): the graph's own launch (launch_graph already replays a graph: its cudaGraphLaunch is 1.1-1.3
ms a step), module loading, allocations and their mappings, stream and context set-up
(nsys_single's step 0: 132 ms of cuLibraryLoadData were counted as launch overhead). Not the
stream-ordered allocations (cudaMallocAsync, cudaFreeAsync, ...): a capture makes them graph
memory nodes."""

from __future__ import annotations

import re

import numpy as np

from . import depgraph as dg

NOT_LAUNCH_PATH = re.compile(
    r"Graph(?:Exec)?(?:Launch|Instantiate|Upload)|LibraryLoad|ModuleLoad|LinkComplete|LinkAdd|"
    r"(?:Malloc|MemAlloc|Free)(?!\w*Async)|MemCreate|MemMap|MemUnmap|MemRelease|MemSetAccess|MemAddress|"
    r"MemImport|MemExport|HostAlloc|HostRegister|cuInit|PrimaryCtx|CtxCreate|StreamCreate|"
    r"KernelSetAttribute|FuncSetAttribute|MemPool|DeviceSetLimit|DeviceReset",
    re.IGNORECASE,
)


def kept_calls(g: dg.DepGraph) -> np.ndarray:
    """Per node: a call a graph does not remove."""
    out = np.zeros(g.n, bool)
    named = np.flatnonzero(g.name >= 0) if len(g.name) else np.zeros(0, np.int64)
    if len(named):
        ids, inv = np.unique(g.name[named], return_inverse=True)
        out[named] = np.array([bool(NOT_LAUNCH_PATH.search(g.names[int(i)])) for i in ids], bool)[inv]
    return out


def kept_names(g: dg.DepGraph, kept: np.ndarray, dur: np.ndarray) -> str:
    """The kept calls' names that took the most time (by count, nsys_ddp's note named its many
    short cuMemRelease and cuMemMap calls, not its 326 ms of cuLibraryLoadData)."""
    at = np.flatnonzero(kept)
    ids, inv = np.unique(g.name[at], return_inverse=True)
    t = np.bincount(inv, weights=dur[at].astype(float), minlength=len(ids))
    top = np.argsort(-t, kind="stable")[:3]
    return ", ".join(g.names[int(ids[i])] for i in top) + (", ..." if len(ids) > 3 else "")
