"""The Trace: a session of one or more files, as columns plus small tables.

Events are a struct of numpy arrays sorted by (lane, start, -duration), so every lane is one
contiguous slice [lane_offsets[l], lane_offsets[l+1]). Times are int64 nanoseconds on the
session's axis (Unix epoch ns where the producer recorded it).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from .arg_table import ArgTable

# Column name -> dtype. About 35 bytes an event (see BENCHMARKS.md for the measured figure).
EVENT_COLUMNS: dict[str, Any] = {
    "start": np.int64,
    "dur": np.int64,
    "lane": np.int32,
    "depth": np.uint16,
    "name": np.int32,
    "cat": np.uint8,
    "corr": np.uint32,  # CUDA correlation id, 0 when none
    "src": np.uint32,  # position of the event in its source (JSON ordinal, or table rowid)
}


@dataclass
class Lane:
    rank: int
    kind: str  # a LaneKind value
    device: int  # GPU ordinal, -1 for host lanes
    stream: int  # stream id (GPU lanes) or thread id (host lanes); -1 when unknown
    label: str
    order: int = 0
    source: int = 0  # index into Trace.sources
    pid: int = -1
    # an nsys NVTX lane of a named domain (one lane per thread and domain, its stream numbered
    # thread * 1000 + domain; io/nsys_nvtx.py): its thread and its domain's name; -1 and "" else
    tid: int = -1
    domain: str = ""

    @property
    def thread(self) -> int:
        """The host thread whose events the lane holds: its stream, or its tid where the stream is
        not the thread (a named NVTX domain's lane). Matching lanes to a thread by stream missed
        those: MPI's and tools' ranges on the launching thread were 'no op recorded' (an audit)."""
        return self.tid if self.tid >= 0 else self.stream

    @property
    def key(self) -> str:
        """Stable identity for saved view state (independent of lane numbering)."""
        return f"r{self.rank}/{self.kind}/{self.device}/{self.pid}/{self.stream}"


@dataclass
class RankInfo:
    rank: int
    files: list[str] = field(default_factory=list)
    devices: list[int] = field(default_factory=list)
    device_props: dict[int, dict] = field(default_factory=dict)
    host: str | None = None
    clock_offset_ns: int = 0
    world_size: int | None = None


@dataclass
class Counter:
    rank: int
    device: int
    name: str  # e.g. "allocated", "reserved"
    t: np.ndarray  # int64 ns
    v: np.ndarray  # float64


@dataclass
class Step:
    rank: int
    step: int
    start: int
    end: int


@dataclass
class Source:
    """One input file, and what is needed to fetch an event's arguments from it later."""

    path: str
    format: str
    size: int
    mtime_ns: int
    # Kineto: list of [decompressed byte offset, length, first ordinal] of each decoded chunk.
    chunks: list[list[int]] = field(default_factory=list)
    gzip: bool = False


class Trace:
    def __init__(
        self,
        *,
        format: str,
        columns: dict[str, np.ndarray],
        names: list[str],
        lanes: list[Lane],
        ranks: list[RankInfo],
        counters: list[Counter] | None = None,
        steps: list[Step] | None = None,
        flows: tuple[np.ndarray, np.ndarray] | None = None,
        instants: dict[str, np.ndarray] | None = None,
        sources: list[Source] | None = None,
        warnings: list[str] | None = None,
        metadata: dict | None = None,
        lane_offsets: np.ndarray | None = None,
    ) -> None:
        self.format = format
        self.columns = columns
        self.names = names
        self.lanes = lanes
        self.ranks = ranks
        self.counters = counters or []
        self.steps = steps or []
        empty = np.zeros(0, np.int64)
        self.flows = flows if flows is not None else (empty, empty)
        self.instants = instants or {"t": empty, "lane": np.zeros(0, np.int32), "name": np.zeros(0, np.int32)}
        self.sources = sources or []
        self.warnings = warnings or []
        self.metadata = metadata or {}
        if lane_offsets is None:
            lane = columns["lane"]
            # keys of the column's dtype: int64 keys make numpy cast (copy) the whole column first
            lane_offsets = np.searchsorted(lane, np.arange(len(lanes) + 1, dtype=lane.dtype))
        # given by the cache: 700 binary searches of a memory-mapped column fault in (with the
        # kernel's read-ahead) 280 MB at 100M events
        self.lane_offsets = np.asarray(lane_offsets, np.int64)
        # what is computed from the columns once and kept with them, by whoever computes it:
        # per-lane end and max-end arrays and the LOD pyramid (model/queries.py), the initial
        # view, fetched event arguments (io/*_args.py), per-session analysis caches
        self.derived: dict = {}
        self._span: tuple[int, int] | None = None
        self.snapshots: list = []  # memory snapshot replays (model.memory.SnapshotSeries)
        self.topology = None  # model.topology.Topology, when a topology file joined the session
        # model.arg_table.ArgTable: arguments the analysis reads, kept at open (Kineto); None:
        # not kept (other readers, sessions joined from older cache entries), fetched from the files
        self.arg_table: ArgTable | None = None

    # -- basic shape -------------------------------------------------------------------
    def __len__(self) -> int:
        return len(self.columns["start"])

    @property
    def n_events(self) -> int:
        """Slices plus instants shown on lanes."""
        return len(self) + len(self.instants["t"])

    @property
    def start_ns(self) -> int:
        if self._span is None:
            self._span = self._compute_span()
        return self._span[0]

    @property
    def end_ns(self) -> int:
        if self._span is None:
            self._span = self._compute_span()
        return self._span[1]

    def _compute_span(self) -> tuple[int, int]:
        s = self.columns["start"]
        it = self.instants["t"]
        lo = [int(s.min())] if len(s) else []
        hi = [int((s + self.columns["dur"]).max())] if len(s) else []
        if len(it):
            lo.append(int(it.min()))
            hi.append(int(it.max()))
        if not lo:  # no events (a memory snapshot alone): the counters' span
            for c in self.counters:
                if len(c.t):
                    lo.append(int(c.t[0]))
                    hi.append(int(c.t[-1]))
        return (min(lo), max(hi)) if lo else (0, 0)

    def lane_slice(self, lane: int) -> slice:
        return slice(int(self.lane_offsets[lane]), int(self.lane_offsets[lane + 1]))

    def lanes_of_rank(self, rank: int) -> list[int]:
        return [i for i, ln in enumerate(self.lanes) if ln.rank == rank]

    def events_of_rank(self, rank: int, kinds=None) -> np.ndarray:
        """Event indices of the rank's lanes (of those kinds, where given), lane by lane."""
        parts = [
            np.arange(self.lane_slice(i).start, self.lane_slice(i).stop, dtype=np.int64)
            for i, ln in enumerate(self.lanes)
            if ln.rank == rank and (kinds is None or ln.kind in kinds)
        ]
        return np.concatenate(parts) if parts else np.zeros(0, np.int64)

    def name_of(self, i: int) -> str:
        return self.names[int(self.columns["name"][i])]

    def steps_of_rank(self, rank: int) -> list[Step]:
        return [s for s in self.steps if s.rank == rank]

    def lane_rank_array(self) -> np.ndarray:
        return np.array([ln.rank for ln in self.lanes], dtype=np.int32)
