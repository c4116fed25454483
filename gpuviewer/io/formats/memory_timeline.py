"""torch.profiler memory timelines (export_memory_timeline's raw JSON rows); they join the
session as memory snapshots do."""

from __future__ import annotations

from ..reader import Probe, Reader
from .memory_snapshot import MEMORY


class MemoryTimeline(Reader):
    name = "torch-memory-timeline"
    order = 40  # before any JSON trace: rows of numbers, not trace events
    companion = MEMORY

    def sniff(self, probe: Probe) -> bool:
        b = probe.body
        return b[:2] == b"[[" and (b[2:3].isdigit() or b[2:4] == b"-1")

    def series(self, path: str) -> list:
        from ..memtimeline import read_memory_timeline

        return [read_memory_timeline(path)]


READERS = [MemoryTimeline()]
