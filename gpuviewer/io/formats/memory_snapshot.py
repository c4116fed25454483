"""PyTorch CUDA memory snapshots (torch.cuda.memory._snapshot(), pickled), and the companion
that joins memory files (these and memory timelines) to the session beside them."""

from __future__ import annotations

import os

from ...model.trace import Trace
from ..reader import Companion, Probe, Reader, empty_trace


def _join(files: list[str], kinds: dict, rest) -> Trace:
    alone = (
        "torch-memory-timeline" if all(kinds[f].name == "torch-memory-timeline" for f in files) else "memory-snapshot"
    )
    trace = rest() if rest else empty_trace(files, format=alone)
    return attach_snapshots(trace, files, kinds)


MEMORY = Companion("memory", order=20, join=_join)


def attach_snapshots(trace: Trace, files: list[str], kinds: dict) -> Trace:
    """Memory snapshots join the session on its Unix-time axis, as rank 0's (or the only
    rank's) devices; their replayed allocated-bytes curve becomes a counter."""
    from ...model.trace import Counter

    rank = trace.ranks[0].rank if trace.ranks else 0
    trace.snapshots = getattr(trace, "snapshots", [])
    for f in files:
        for s in kinds[f].series(f):
            s.rank = rank
            trace.snapshots.append(s)
            label = "allocated (memory timeline)" if not s.allocations else "allocated (snapshot)"
            trace.counters.append(Counter(rank, s.device, label, s.t, s.allocated))
            info = next((r for r in trace.ranks if r.rank == rank), None)
            if info is not None and s.device not in info.devices:
                info.devices.append(s.device)
    trace.metadata.setdefault("files", []).extend(os.path.abspath(f) for f in files)
    trace._span = None
    return trace


class MemorySnapshot(Reader):
    name = "memory-snapshot"
    order = 20
    companion = MEMORY

    def sniff(self, probe: Probe) -> bool:
        h = probe.head
        return h.startswith(b"\x80") and len(h) > 1 and h[1] in (2, 3, 4, 5)  # a pickle's header

    def series(self, path: str) -> list:
        from ..memsnap import read_snapshot

        return read_snapshot(path)


READERS = [MemorySnapshot()]
