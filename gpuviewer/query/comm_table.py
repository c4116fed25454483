"""Every communication kernel of a session with what its own arguments say: process group,
collective, group size, dtype and bytes. Unlike the `collectives` table (kernels matched to the
same collective on other ranks), this needs no other rank, so a single rank's trace still shows
its collectives by name, size and group."""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..analysis.collectives import (
    P2P,
    arg_group,
    arg_int,
    arg_nbytes,
    collective_kind,
    p2p_group,
    p2p_issuers,
    p2p_peer,
    peerless_group,
    stream_group,
)
from ..io.comm_args import collective_args
from ..model.categories import Cat


def comm_kernels(session) -> pd.DataFrame:
    """One row per NCCL kernel: id, rank, name, group, collective, ranks (the group's size, -1
    when not on record), dtype, bytes (-1 when not on record), start, end, dur (ns). The group and
    collective are named as the collective matching names them (the same keys join the tables)."""
    trace = session.trace
    c = trace.columns
    idx = np.flatnonzero(np.asarray(c["cat"]) == Cat.COMM_KERNEL).astype(np.int64)
    args = collective_args(trace) if len(idx) else {}
    start = np.asarray(c["start"][idx]).astype(np.int64)
    dur = np.asarray(c["dur"][idx]).astype(np.int64)
    lane = np.asarray(c["lane"][idx])
    lane_rank = np.array([ln.rank for ln in trace.lanes], np.int64)
    rank = lane_rank[lane] if len(idx) else np.zeros(0, np.int64)
    groups: list[tuple[int, str]] = []
    kinds, sizes, dtypes, nbytes = [], [], [], []
    # without a group on record, a rank's NCCL streams are its groups in order of first use: as
    # analysis.collectives.rank_comm numbers them where each stream is first used inside the steps
    # (rank_comm counts the steps' kernels first; a stream first used before them would differ)
    stream_no: dict[tuple[int, int], int] = {}
    per_rank: dict[int, int] = {}
    peerless: list[tuple[int, int]] = []  # (row, its place in groups): keyed by their collective too
    for j in np.lexsort((start, rank)).tolist():
        i = int(idx[j])
        a = args.get(i, {})
        name = trace.names[int(c["name"][i])]
        kind = collective_kind(a.get("collective"), name)
        group = arg_group(a)
        key = (int(rank[j]), int(lane[j]))
        if key not in stream_no:
            stream_no[key] = per_rank.get(key[0], 0)
            per_rank[key[0]] = stream_no[key] + 1
        if group is None:
            group = stream_group(stream_no[key])
        peer = p2p_peer(kind, a) if kind in P2P else None
        if kind in P2P and peer is None:
            group = peerless_group(stream_no[key])  # as collectives.rank_comm keys them
            peerless.append((j, len(groups)))
        elif peer is not None:
            # a send and its receive are one transfer, keyed by its direction as rank_comm keys
            # it, so nccl_sum's kernel rows and matched rows are one row ("p2p 0->1", SendRecv),
            # not "Send"/"Recv" of the process group beside it
            group, kind = p2p_group(kind, int(rank[j]), peer), "SendRecv"
        if kind in P2P:
            nel = arg_int(a.get("in_nelems")) or arg_int(a.get("out_nelems")) or 0
        else:
            nel = max(arg_int(a.get("in_nelems")) or 0, arg_int(a.get("out_nelems")) or 0)
        b = arg_nbytes(a, nel)
        size = arg_int(a.get("group_size"))
        groups.append((j, group))
        kinds.append((j, kind))
        sizes.append((j, size if size else -1))
        dtypes.append((j, str(a["dtype"]) if a.get("dtype") is not None else ""))
        nbytes.append((j, b if b else -1))

    if peerless:  # and by the collective around each launch, looked up together
        for (j, g), who in zip(peerless, p2p_issuers(trace, idx[[j for j, _ in peerless]])):
            groups[g] = (j, peerless_group(stream_no[(int(rank[j]), int(lane[j]))], who))

    def column(pairs, dtype=None):
        out = [None] * len(idx)
        for j, v in pairs:
            out[j] = v
        return np.array(out, dtype) if dtype else out

    return pd.DataFrame(
        {
            "id": idx,
            "rank": rank,
            "name": pd.Categorical([trace.names[int(n)] for n in c["name"][idx]]),
            "group": pd.Categorical(column(groups)),
            "collective": pd.Categorical(column(kinds)),
            "ranks": column(sizes, np.int64),
            "dtype": pd.Categorical(column(dtypes)),
            "bytes": column(nbytes, np.int64),
            "start": start,
            "end": start + dur,
            "dur": dur,
        }
    )
