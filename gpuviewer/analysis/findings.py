"""analyze(): the analysis of a loaded trace, as a per-rank map and a cross-rank reduce.

Every rank of the trace is mapped (rankmap.map_rank: its events -> small tables and its own
findings), then reduce.reduce matches collectives across ranks, splits waits, finds late ranks,
merges and ranks the findings. The Dask path (gpuviewer/scale) runs the same two functions with
one map per file, so both give the same answer. A topology that joined the session adds its
findings to the reduce. In process, each step's critical path is added (critical_path.attach_paths)."""

from __future__ import annotations

from collections.abc import Callable

from ..model.trace import Trace
from .critical_path import attach_paths
from .rankmap import map_rank
from .reduce import reduce
from .results import Analysis
from .rule_base import ADVICE
from .rules import MemBytes

__all__ = ["analyze", "ADVICE"]


def analyze(
    trace: Trace,
    comm_args: dict[int, dict] | None = None,
    event_args: Callable[[Trace, int], dict] | None = None,
    *,
    keep_parts: bool = False,
    mem_bytes: MemBytes | None = None,
) -> Analysis:
    """comm_args: event index -> NCCL kernel arguments (io.comm_args.collective_args); without
    them collectives are matched by kernel name and stream order. event_args: one event's
    arguments (io.args.event_args), for the bytes of the communication over a topology.
    keep_parts: also keep the ranks' maps in Analysis.parts (a summary is written from them).
    mem_bytes: the memory copies' sizes (io.mem_args.memop_bytes), asked where copies fill a GPU."""
    parts = [map_rank(trace, r.rank, comm_args, mem_bytes) for r in trace.ranks]
    extra, comm, links = [], None, None
    topo = getattr(trace, "topology", None)
    if topo is not None:
        from .topology import comm_stats, rank_gpus, topology_findings

        extra = topology_findings(trace, topo)
        comm = comm_stats(trace, event_args=event_args)
        links = (topo, rank_gpus(trace))
    out = reduce(
        parts,
        hosts={r.rank: r.host for r in trace.ranks},
        alignment=trace.metadata.get("alignment"),
        extra_findings=extra,
        comm=comm,
        topology=links,
    )
    if out.comm is not None:
        # the NCCL kernels' transfer (their time less the wait for the last rank) in the measured
        # steps: a topology's link said 'collectives 37 ms', the smaller rank's kernel time, of it
        # 6 ms transfer (an audit of the window)
        for rb in out.breakdowns or []:
            row = out.comm["ranks"].get(rb.rank)
            if row is not None and rb.measured:
                row["transfer_ms"] = round(sum(sb.transfer_ns for sb in rb.measured) / 1e6, 3)
                row["steps"] = len(rb.measured)
    if keep_parts:
        out.parts = parts
    # each step's critical path across ranks (the dependency model is kept with the trace: the
    # savings replay the same one)
    attach_paths(trace, out, comm_args)
    return out
