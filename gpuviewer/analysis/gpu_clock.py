"""A rank's GPU clock against its own host's, from a device-wide sync.

A device-wide synchronize (cudaDeviceSynchronize, cuCtxSynchronize) returns only once every op
launched before it has ended. Where the GPU's recorded ends come after the sync's return, its
clock runs ahead of the host's by at least that much: fsdp with rank 0's GPU events moved 8 ms
later shows it by 7.98 ms at its one cudaDeviceSynchronize, and its first step grew 5 ms (the
step ends where that GPU ends) until the dependency model took those 7.98 ms off its GPU times.
Never more than the quickest launch latency seen on the rank: an op cannot start before the call
that launched it. A GPU clock running behind the host's is not told from a GPU that runs behind
its host (queued work), and needs no correction: the model keeps the latencies it sees."""

from __future__ import annotations

import re

import numpy as np

_DEVICE_SYNC = re.compile(r"DeviceSynchroni[sz]e|CtxSynchroni[sz]e")
FLOOR_PERCENTILE = 1  # the quickest launches: the 1st percentile of launch -> start, not one outlier


def gpu_ahead(
    names: list[str],
    node_name: np.ndarray,
    is_sync: np.ndarray,
    rec_s: np.ndarray,
    rec_e: np.ndarray,
    launch_node: np.ndarray,
    host_nodes: dict[int, np.ndarray],
    gpu_nodes: np.ndarray,
    rank: np.ndarray,
) -> dict[int, int]:
    """Per rank: ns its GPU clock runs ahead of its host's (0: no evidence). node_name: each
    node's name id (-1: none); is_sync: whether a node is a synchronize call."""
    dev = np.array([bool(_DEVICE_SYNC.search(n)) for n in names] + [False], bool)  # [-1]: no name
    out: dict[int, int] = {}
    for r, hn in host_nodes.items():
        mine = gpu_nodes[rank[gpu_nodes] == r]
        ds = hn[is_sync[hn] & dev[node_name[hn]]]
        out[r] = 0
        if not len(ds) or not len(mine):
            continue
        linked = mine[launch_node[mine] >= 0]
        if not len(linked):
            continue
        floor = int(np.percentile(rec_s[linked] - rec_s[launch_node[linked]], FLOOR_PERCENTILE))
        lt = np.where(launch_node[mine] >= 0, rec_s[np.maximum(launch_node[mine], 0)], rec_s[mine])
        o = np.argsort(lt, kind="stable")
        last_end = np.maximum.accumulate(rec_e[mine[o]])
        p = np.searchsorted(lt[o], rec_s[ds], side="left") - 1  # ops launched before the sync began
        ok = p >= 0
        if ok.any():
            ahead = int(max(0, (last_end[p[ok]] - rec_e[ds[ok]]).max()))
            out[r] = min(ahead, max(0, floor))
    return out
