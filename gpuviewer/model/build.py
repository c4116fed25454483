"""TraceBuilder: readers append column chunks; finish() sorts, nests and links them."""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from . import heap
from .categories import GPU_WORK, Cat, is_nccl_name
from .depth import lane_depth
from .strings import Interner
from .trace import EVENT_COLUMNS, Counter, Lane, RankInfo, Source, Step, Trace

_API = np.array([Cat.CUDA_RUNTIME, Cat.CUDA_DRIVER], dtype=np.uint8)
_GPU = np.array(list(GPU_WORK) + [Cat.SYNC, Cat.CUDA_EVENT], dtype=np.uint8)
# threads nesting lanes at once: two, each lane's depths hold 40-50 bytes an event while found
_THREADS = max(1, min(2, os.cpu_count() or 1))


class TraceBuilder:
    def __init__(self, format: str) -> None:
        self.format = format
        self.names = Interner()
        self.lanes: list[Lane] = []
        self._lane_index: dict[tuple, int] = {}
        self._chunks: list[dict[str, np.ndarray]] = []
        self._inst: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
        self.ranks: dict[int, RankInfo] = {}
        self.counters: list[Counter] = []
        self.steps: list[Step] = []
        self.sources: list[Source] = []
        self.warnings: list[str] = []
        self.metadata: dict = {}
        self.n_events = 0  # added so far (for progress messages)
        # (source, ordinals, refs into arg_blobs) per file of a reader that keeps recorded
        # arguments at open (io/arg_capture.py); None: this reader keeps none
        self.arg_parts: list[tuple[int, np.ndarray, np.ndarray]] | None = None
        self.arg_blobs: dict[bytes, int] = {}

    # -- lanes ---------------------------------------------------------------------------
    def lane(
        self,
        rank: int,
        kind: str,
        device: int,
        stream: int,
        label: str,
        *,
        pid: int = -1,
        source: int = 0,
        tid: int = -1,
        domain: str = "",
    ) -> int:
        key = (rank, kind, device, pid, stream)
        i = self._lane_index.get(key)
        if i is None:
            i = self._lane_index[key] = len(self.lanes)
            self.lanes.append(Lane(rank, kind, device, stream, label, 0, source, pid, tid, domain))
        return i

    def rank(self, r: int) -> RankInfo:
        info = self.ranks.get(r)
        if info is None:
            info = self.ranks[r] = RankInfo(r)
        return info

    # -- events --------------------------------------------------------------------------
    def add(self, **cols: np.ndarray) -> None:
        n = len(cols["start"])
        if n == 0:
            return
        self.n_events += n
        chunk = {}
        for name, dtype in EVENT_COLUMNS.items():
            v = cols.get(name)
            chunk[name] = np.zeros(n, dtype) if v is None else np.asarray(v, dtype=dtype)
        self._chunks.append(chunk)

    def add_instants(self, t: np.ndarray, lane: np.ndarray, name: np.ndarray) -> None:
        if len(t):
            self.n_events += len(t)
            self._inst.append((np.asarray(t, np.int64), np.asarray(lane, np.int32), np.asarray(name, np.int32)))

    # -- finish --------------------------------------------------------------------------
    def finish(self) -> Trace:
        chunks, self._chunks = self._chunks, []  # _concat empties them column by column
        cols = sort_and_nest(_concat(chunks), 0, len(self.lanes))
        inst = _concat_inst(self._inst)
        flows = link_flows(cols, np.array([ln.rank for ln in self.lanes], np.int64))
        self.finish_tables()
        t = Trace(
            format=self.format,
            columns=cols,
            names=self.names.strings,
            lanes=self.lanes,
            ranks=[self.ranks[r] for r in sorted(self.ranks)],
            counters=self.counters,
            steps=sorted(self.steps, key=lambda s: (s.rank, s.step)),
            flows=flows,
            instants=inst,
            sources=self.sources,
            warnings=self.warnings,
            metadata=self.metadata,
        )
        if self.arg_parts is not None:
            from .arg_table import ArgTable

            t.arg_table = ArgTable.build(self.arg_parts, list(self.arg_blobs))
        return t

    def take_part(self, lane_lo: int) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
        """The events and instants added since the last call, sorted and nested like finish()
        sorts the whole session, and dropped from the builder. For a session built one file at a
        time (io/out_of_core.py): a file's lanes are numbered after every earlier file's
        (lane_lo is its first), so the parts laid end to end are the columns finish() makes."""
        chunks, self._chunks = self._chunks, []
        cols = sort_and_nest(_concat(chunks), lane_lo, len(self.lanes))
        inst = _concat_inst(self._inst)
        self._inst = []
        return cols, inst

    def finish_tables(self) -> None:
        """What finish() does besides the columns: lane order and each rank's devices."""
        self._order_lanes()
        for info in self.ranks.values():
            info.devices = sorted(
                {ln.device for ln in self.lanes if ln.rank == info.rank and ln.device >= 0} | set(info.devices)
            )

    def _order_lanes(self) -> None:
        from .categories import LaneKind

        ranked = sorted(
            range(len(self.lanes)),
            key=lambda i: (
                self.lanes[i].rank,
                LaneKind.ORDER.get(self.lanes[i].kind, 9),
                self.lanes[i].device,
                self.lanes[i].pid,
                self.lanes[i].stream,
            ),
        )
        for pos, i in enumerate(ranked):
            self.lanes[i].order = pos


def sort_and_nest(cols: dict[str, np.ndarray], lane_lo: int, lane_hi: int) -> dict[str, np.ndarray]:
    """Sort events by (lane, start, -duration) and give each its depth in its lane; lane ids of
    cols lie in [lane_lo, lane_hi)."""
    cols["dur"] = np.maximum(cols["dur"], 0)
    order = sort_order(cols["lane"], cols["start"], cols["dur"])
    # one column at a time, each unsorted one dropped as its sorted copy is made: the columns
    # are held once and a column more, not twice (10M events: 0.2 GB less at the peak; two
    # columns at once in two threads gained 0.05 s for 45 MB more)
    for k in list(cols):
        cols[k] = cols[k][order]
    del order
    return nest(cols, lane_lo, lane_hi)


def nest(cols: dict[str, np.ndarray], lane_lo: int, lane_hi: int) -> dict[str, np.ndarray]:
    """Each sorted event's depth in its lane, lanes in two threads (NumPy's sorts and searches
    run without the GIL), largest first: the CPU threads of an 8-rank session nest at once."""
    offsets = np.searchsorted(cols["lane"], np.arange(lane_lo, lane_hi + 1, dtype=cols["lane"].dtype))
    depth, start, dur, cat = cols["depth"], cols["start"], cols["dur"], cols["cat"]
    spans = sorted(
        ((int(offsets[j]), int(offsets[j + 1])) for j in range(lane_hi - lane_lo)), key=lambda ab: ab[0] - ab[1]
    )

    def one(ab: tuple[int, int]) -> None:
        a, b = ab
        if b > a:
            depth[a:b] = lane_depth(start[a:b], dur[a:b], cat[a:b])

    with ThreadPoolExecutor(_THREADS) as pool:
        list(pool.map(one, spans))
    # the threads' malloc arenas keep what their lanes freed (arrays under glibc's 32 MB mmap
    # threshold): given back here, or the flows found next stack on it (10M events: 100 MB)
    heap.trim()
    return cols


def sort_order(lane: np.ndarray, start: np.ndarray, dur: np.ndarray) -> np.ndarray:
    """np.lexsort((-dur, start, lane)), about 4x faster: one stable argsort of lane and start
    packed into one int64 (when the lanes fit 19 bits and the starts a 2**44 ns span, 4.9 hours),
    then the few events that share a lane and a start put longest first, as they came."""
    if len(start) == 0:
        return np.zeros(0, np.intp)
    lo = int(start.min())
    if int(start.max()) - lo >= 1 << 44 or int(lane.max()) >= 1 << 19 or int(lane.min()) < 0:
        return np.lexsort((-dur, start, lane))
    key = lane.astype(np.int64) << 44
    key |= start - lo
    order = np.argsort(key, kind="stable")
    ks = key[order]
    del key
    tie = ks[1:] == ks[:-1]
    if tie.any():
        m = np.zeros(len(ks), bool)
        m[1:] |= tie
        m[:-1] |= tie
        pos = np.flatnonzero(m)
        sub = order[pos]
        order[pos] = sub[np.lexsort((sub, -dur[sub], ks[pos]))]
    return order


def _concat(chunks: list[dict[str, np.ndarray]]) -> dict[str, np.ndarray]:
    if not chunks:
        return {k: np.zeros(0, d) for k, d in EVENT_COLUMNS.items()}
    if len(chunks) == 1:
        return dict(chunks[0])
    # column by column, each column's pieces dropped once joined and their heap pages given
    # back: the pieces and the whole are held together for one column, not for all of them
    out = {}
    for k in EVENT_COLUMNS:
        out[k] = np.concatenate([c.pop(k) for c in chunks])
        heap.trim()
    return out


def _concat_inst(parts) -> dict[str, np.ndarray]:
    if not parts:
        return {"t": np.zeros(0, np.int64), "lane": np.zeros(0, np.int32), "name": np.zeros(0, np.int32)}
    t = np.concatenate([p[0] for p in parts])
    lane = np.concatenate([p[1] for p in parts])
    name = np.concatenate([p[2] for p in parts])
    o = np.lexsort((t, lane))
    return {"t": t[o], "lane": lane[o], "name": name[o]}


def nccl_name_ids(strings: list[str]) -> np.ndarray:
    """Interned ids of NCCL kernel names (categories.is_nccl_name)."""
    return np.array([i for i, s in enumerate(strings) if is_nccl_name(s)], np.int32)


def mark_comm_lanes(lanes: list[Lane], chunks: list[dict[str, np.ndarray]], source: int | None = None) -> None:
    """GPU lanes that run only NCCL kernels become communication lanes; lanes that mix them
    with compute say so in their label. `source` limits the relabelling to one file's lanes."""
    per_lane: dict[int, list[int]] = {}
    for c in chunks:
        cat = c["cat"]
        k = (cat == Cat.KERNEL) | (cat == Cat.COMM_KERNEL)
        if not k.any():
            continue
        ln, is_comm = c["lane"][k], cat[k] == Cat.COMM_KERNEL
        for lane_id in np.unique(ln).tolist():
            m = ln == lane_id
            t = per_lane.setdefault(lane_id, [0, 0])
            t[0] += int(m.sum())
            t[1] += int(is_comm[m].sum())
    from .categories import LaneKind

    for lane_id, (n, n_comm) in per_lane.items():
        lane = lanes[lane_id]
        if source is not None and lane.source != source:
            continue
        if n_comm and n_comm == n:
            lane.kind = LaneKind.COMM
            lane.label = f"stream {lane.stream} · NCCL"
        elif n_comm:
            lane.label = f"stream {lane.stream} · compute + NCCL"


def link_flows(cols: dict[str, np.ndarray], lane_rank: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """CPU launch -> GPU work pairs, joined on (rank, correlation id)."""
    corr, cat = cols["corr"], cols["cat"]
    if len(corr) == 0 or len(lane_rank) == 0:
        e = np.zeros(0, np.int64)
        return e, e
    has = corr > 0
    api = np.flatnonzero(has & np.isin(cat, _API))
    gpu = np.flatnonzero(has & np.isin(cat, _GPU))
    if len(api) == 0 or len(gpu) == 0:
        e = np.zeros(0, np.int64)
        return e, e
    lane = cols["lane"]
    # keys of the launches and the GPU work only, not of every event (10M events: 48 MB less)
    ak = lane_rank[lane[api]] << 32 | corr[api].astype(np.int64)
    o = np.argsort(ak, kind="stable")
    ak, api = ak[o], api[o]
    gk = lane_rank[lane[gpu]] << 32 | corr[gpu].astype(np.int64)
    pos = np.searchsorted(ak, gk)
    pos_c = np.minimum(pos, len(ak) - 1)
    ok = ak[pos_c] == gk
    itype = np.int32 if len(corr) < 2**31 else np.int64  # 8 bytes a flow, not 16
    return api[pos_c[ok]].astype(itype), gpu[ok].astype(itype)
