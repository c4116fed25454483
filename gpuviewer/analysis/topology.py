"""Communication over the topology: which GPUs each rank drives, NCCL time and bytes per rank
and pair, and the topology_split finding (a communication group across NVLink islands or over
PHB/NODE/SYS paths)."""

from __future__ import annotations

import re
from collections.abc import Callable

import numpy as np

from ..model.categories import Cat
from ..model.topology import SLOW, Topology, link_class
from ..model.trace import Trace
from .collectives import dtype_size
from .merge import rank_list

_P2P = re.compile(r"^nccl:(send|recv) (\d+)(->|<-)(\d+)$")


def rank_gpus(trace: Trace) -> dict[int, list[str]]:
    """GPU names (GPU<index>, as nvidia-smi numbers them) per rank."""
    out = {}
    for r in trace.ranks:
        names = []
        for d in r.devices:
            props = r.device_props.get(d) or {}
            idx = props.get("gpuId", props.get("cuDevice", d))
            names.append(f"GPU{idx}")
        out[r.rank] = names
    return out


def groups(trace: Trace) -> list[list[int]]:
    gs = trace.metadata.get("process_groups") or []
    ranks = {r.rank for r in trace.ranks}
    out = [sorted(set(g) & ranks) for g in gs if len(set(g) & ranks) >= 2]
    return out or ([sorted(ranks)] if len(ranks) >= 2 else [])


def comm_stats(trace: Trace, max_args: int = 400, event_args: Callable[[Trace, int], dict] | None = None) -> dict:
    """Per rank: NCCL kernel time, count and bytes (from collective args where the trace has
    them); per pair of ranks: point-to-point sends seen on the host (nccl:send a->b).
    event_args(trace, i): event i's arguments, read from the source file by the caller (io), since
    the analysis never reads files; without it there are no bytes."""
    c = trace.columns
    lane_rank = trace.lane_rank_array()
    cat = np.asarray(c["cat"])
    comm = np.flatnonzero(cat == Cat.COMM_KERNEL)
    per_rank = {}
    for r in trace.ranks:
        idx = comm[lane_rank[np.asarray(c["lane"][comm])] == r.rank] if len(comm) else comm
        nbytes, seen = 0, 0
        if len(idx) and trace.format == "kineto" and event_args is not None:
            step = max(1, len(idx) // max_args)
            for i in idx[::step][:max_args]:
                try:
                    args = event_args(trace, int(i))
                except Exception:  # noqa: BLE001 - bytes are a best effort
                    break
                n = args.get("In msg nelems")
                size = dtype_size(args.get("dtype"))
                if isinstance(n, int) and size is not None:
                    nbytes += n * size
                    seen += 1
            if seen:
                nbytes = int(nbytes * len(idx) / (len(idx[::step][:max_args])))
        per_rank[r.rank] = {
            "nccl_ms": round(float(np.asarray(c["dur"][idx]).sum()) / 1e6, 3),
            "collectives": int(len(idx)),
            "bytes": int(nbytes) if seen else None,
        }
    pairs: dict[tuple[int, int], int] = {}
    from ..model.categories import LaneKind

    host = np.array([ln.kind == LaneKind.CPU for ln in trace.lanes], bool)
    on_host = host[np.asarray(c["lane"])] if len(host) else np.zeros(0, bool)
    names = np.asarray(c["name"])
    for i, n in enumerate(trace.names):
        m = _P2P.match(n)
        if m and m.group(1) == "send":  # host-side ops (their GPU projections are not counted)
            a, b = int(m.group(2)), int(m.group(4))
            cnt = int(((names == i) & on_host).sum())
            pairs[(a, b)] = pairs.get((a, b), 0) + cnt
    return {"ranks": per_rank, "p2p_sends": {f"{a}->{b}": n for (a, b), n in pairs.items()}}


def split_finding(
    topo: Topology, gpu_group: list[str], ranks: list[int] | None = None, start_ns: int = 0, end_ns: int = 0
) -> dict | None:
    """A finding when a communication group spans NVLink islands or crosses slow paths."""
    gpus = [g for g in gpu_group if topo.device(g) is not None]
    if len(gpus) < 2:
        return None
    islands = sorted({topo.island_of(g) for g in gpus})
    slow = []
    for i, a in enumerate(gpus):
        for b in gpus[i + 1 :]:
            ln = topo.link(a, b)
            if ln is not None and link_class(ln.type) in SLOW:
                slow.append({"a": a, "b": b, "type": ln.type})
    if len(islands) <= 1 and not slow:
        return None
    from .rule_base import finding

    isl = topo.islands()
    parts = [f"spans {len(islands)} NVLink islands"] if len(islands) > 1 else []
    if slow:
        kinds = sorted({s["type"] for s in slow})
        parts.append(f"{len(slow)} GPU pairs talk over {'/'.join(kinds)}")
    who = f"ranks {rank_list(sorted(ranks))}" if ranks else ", ".join(gpus)
    f = finding(
        "topology_split",
        "high" if len(islands) > 1 else "medium",
        f"Communication group ({who}) " + " and ".join(parts) + ": collectives run at the speed of the slowest link",
        ranks or [],
        None,
        start_ns,
        end_ns,
        {"gpus": gpus, "islands": [isl[i] for i in islands], "slow_links": slow},
    )
    return f


def topology_findings(trace: Trace, topo: Topology) -> list[dict]:
    rg = rank_gpus(trace)
    out = []
    for g in groups(trace):
        gpus = [name for r in g for name in rg.get(r, [])]
        f = split_finding(topo, gpus, g, trace.start_ns, trace.end_ns)
        if f is not None:
            out.append(f)
    return out
