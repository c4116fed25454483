"""A big multi-rank Kineto session opened one file (one rank) at a time into the column cache.

The in-memory path (formats/kineto_json.py) reads every file, then sorts the whole session: its
peak is about 160 bytes an event (1.6 GB at 10M events, 16 GB at 100M). Here each file is read,
committed as its rank, sorted and nested, its flows linked and its level-of-detail pyramid built,
and then appended to the cache's column files (io/cache_stream.py) and dropped, so the peak is
one file's worth. The session is then what cache.load memory-maps.

The parts laid end to end are the columns TraceBuilder.finish() makes: every file is one rank
(a rank named twice becomes another one), so its lanes are new and numbered after the earlier
files' lanes; lanes, flows (joined on rank and correlation id) and instants never cross files.
What needs every file, the clock offset of files without an absolute clock, is applied at the
end to the parts it moves (rare: it needs files with and without a clock base in one session).
No file gets an entry of its own (a copy of every column): each gets a pointer to its place in
the session's, from which its entry is cut when it is first opened alone (io/cache_slice.py).
"""

from __future__ import annotations

import math
import os

import numpy as np

from ..model.build import TraceBuilder
from ..model.trace import EVENT_COLUMNS, Counter, Step, Trace
from .cache_slice import places, point, record
from .errors import TraceError, file_names
from .ooc_part import make_part
from .reader import Job, Reader

DEFAULT_MIN_MB = 256  # below this much input, the in-memory path (a few GB at most) is kept


def wanted(reader: Reader, files: list[str]) -> bool:
    """Whether a session is built file by file: several Kineto files of at least
    GPUVIEWER_OUT_OF_CORE_MB (default 256) MB in all."""
    if reader.name != "kineto" or len(files) < 2:
        return False
    try:
        limit = float(os.environ.get("GPUVIEWER_OUT_OF_CORE_MB", DEFAULT_MIN_MB)) * 1e6
    except ValueError:
        limit = DEFAULT_MIN_MB * 1e6
    return sum(os.path.getsize(f) for f in files) >= limit


def load(files: list[str], job: Job) -> Trace | None:
    """Build the session's cache file by file and memory-map it; None when the cache cannot be
    written (the caller reads in memory instead). Reading errors raise as the reader's do."""
    from . import cache
    from .cache_stream import PartStore

    try:
        store = PartStore()
    except OSError:
        return None
    try:
        meta, where = _build(files, job, store)
        store.commit(meta)
        point(meta["key"], where)  # each file's own entry, cut from this one when first asked for
    except OSError:
        # the cache's own failure (disk full, read-only): reading errors arrive as TraceError
        store.abort()
        return None
    except BaseException:
        store.abort()
        raise
    t = cache.load(files)
    if t is not None:
        t.metadata["from_cache"] = False
    return t


class _Parts:
    """Where each file's events, instants, level-of-detail runs and counters went in the store."""

    def __init__(self, store) -> None:
        self.store = store
        self.lod_index: list[np.ndarray] = []
        self.lod_q: list[np.ndarray] = []
        self.lane_counts: list[np.ndarray] = []  # events of each lane, in lane order

    def add(self, b: TraceBuilder, lane_lo: int) -> dict:
        return self.append(make_part(b, lane_lo), 0, None)

    def append(self, part: dict, lane_shift: int, names: np.ndarray | None) -> dict:
        """Store a part made by make_part; a worker's part (io/ooc_pool.py) has its own lanes
        and names: lane_shift is added to its lanes, names maps its name ids to the session's."""
        cols, inst, lod = part["cols"], part["inst"], part["lod"]
        if lane_shift:
            cols["lane"] += np.int32(lane_shift)
            inst["lane"] += np.int32(lane_shift)
            lod["lod_index"][:, 0] += lane_shift
        if names is not None:
            cols["name"] = names[cols["name"]]
            inst["name"] = names[inst["name"]]
        st = self.store
        at = {
            "events": st.length("start"),
            "n": len(cols["start"]),
            "inst": st.length("inst_t"),
            "n_inst": len(inst["t"]),
            "flows": st.length("flow_src"),
            "n_flows": len(part["flow_src"]),
            "lod": st.length("lod_start"),
            "span": part["span"],
        }
        for name, dtype in EVENT_COLUMNS.items():
            st.append(name, cols[name], dtype)
        self.lane_counts.append(part["lane_counts"])
        for k, dtype in (("t", np.int64), ("lane", np.int32), ("name", np.int32)):
            st.append(f"inst_{k}", inst[k], dtype)
        st.append("flow_src", part["flow_src"].astype(np.int64) + at["events"], np.int64)
        st.append("flow_dst", part["flow_dst"].astype(np.int64) + at["events"], np.int64)
        for k in ("start", "end", "maxend", "busy"):
            st.append(f"lod_{k}", lod[f"lod_{k}"], np.int64)
        st.append("lod_rep", lod["lod_rep"] + at["events"], np.int64)
        index = lod["lod_index"].copy()
        index[:, 2] += at["lod"]
        self.lod_index.append(index)
        self.lod_q.append(lod["lod_q"])
        at["n_lod"] = st.length("lod_start") - at["lod"]
        return at

    def counters(self, b: TraceBuilder, lo: int) -> list[int]:
        """Write the counters added since lo and keep only their names (they can be large)."""
        for i in range(lo, len(b.counters)):
            c = b.counters[i]
            self.store.save(f"counter{i}_t", np.asarray(c.t, np.int64))
            self.store.save(f"counter{i}_v", np.asarray(c.v, np.float64))
            empty = np.zeros(0, np.int64)
            b.counters[i] = Counter(c.rank, c.device, c.name, empty, empty.astype(np.float64))
        return list(range(lo, len(b.counters)))

    def shift(self, at: dict, counters: list[int], offset: int) -> None:
        """Move one file's times by its clock offset (found once every file was read)."""
        st = self.store
        st.cols["start"].add(at["events"], at["events"] + at["n"], offset)
        st.cols["inst_t"].add(at["inst"], at["inst"] + at["n_inst"], offset)
        for k in ("start", "end", "maxend"):
            st.cols[f"lod_{k}"].add(at["lod"], at["lod"] + at["n_lod"], offset)
        for i in counters:
            st.save(f"counter{i}_t", st.load(f"counter{i}_t") + offset)
        if at["span"] is not None:
            at["span"] = (at["span"][0] + offset, at["span"][1] + offset)


def _build(files: list[str], job: Job, store) -> tuple[dict, list]:
    """The session's meta.json, and each file's place in it (io/cache_slice.py)."""
    from . import cache
    from .formats.kineto_json import _process_groups, read_each

    progress, cancelled, optional = job.progress, job.cancelled, job.optional
    b = TraceBuilder("kineto")
    parts = _Parts(store)
    skipped: list[str] = []
    per_file: list[dict] = []  # what the session needs of each file once its events are stored
    used: set[int] = set()
    rank_warnings: list[str] = []
    from .ooc_pool import read_ranks, workers_for

    n_workers = workers_for(files)
    if n_workers > 1:
        # ranks read and committed by a pool of processes, appended here in file order
        for f, res in read_ranks(files, job, n_workers):
            if "skipped" in res:  # as read_each skips JSON in a folder that is no trace
                skipped.append(f)
                b.warnings.append(f"{f}: skipped ({res['skipped']})")
                continue
            per_file.append(_commit_worker_part(b, parts, res, used, rank_warnings))
            del res
    else:
        w0 = len(b.warnings)
        for info in read_each(b, files, progress, cancelled, optional, skipped):
            # the file's reading warnings (a skipped file's line is the session's)
            said = [w for w in b.warnings[w0:] if not any(w.startswith(f"{f}: skipped (") for f in skipped)]
            per_file.append(_commit_file(b, parts, info, used, rank_warnings, said))
            w0 = len(b.warnings)
            del info  # the file's reader and its parsed chunks go before the next file is read
    if not per_file:
        raise TraceError(file_names(files), "no trace in these files (each is JSON, but not a profiler trace)")
    if progress:
        progress(0.95, "placing the ranks on one clock")
    b.warnings.extend(rank_warnings)
    _clocks(b, parts, per_file)
    for pf in per_file:
        for g in _process_groups(pf["meta"]):
            if g not in b.metadata.setdefault("process_groups", []):
                b.metadata["process_groups"].append(g)
        b.metadata.setdefault("per_file", []).append(
            {
                "path": pf["path"],
                "rank": pf["rank"],
                "clock_offset_ns": pf["offset"],
                "base_ns": pf["base_ns"],
                "flow_events": pf["n_flow"],
                "host_numbered": pf["host_numbered"],
                "file_rank": pf["file_rank"],
                "min_ts_us": pf["min_ts_us"] if math.isfinite(pf["min_ts_us"]) else None,
            }
        )
    b.finish_tables()
    b.metadata["files"] = [os.path.abspath(f) for f in files if f not in skipped]
    b.metadata["skipped_files"] = [os.path.abspath(f) for f in skipped]
    n = store.length("start")
    if n < 2**31:  # 8 bytes a flow, not 16, as TraceBuilder.finish stores them
        store.narrow("flow_src", np.int32)
        store.narrow("flow_dst", np.int32)
    store.save("lod_index", np.concatenate(parts.lod_index) if parts.lod_index else np.zeros((0, 4), np.int64))
    store.save("lod_q", np.concatenate(parts.lod_q) if parts.lod_q else np.zeros(0, np.float64))
    span = _span(b, per_file, store)
    steps = sorted(b.steps, key=lambda s: (s.rank, s.step))
    view = _initial_view(store, steps, span)
    counts = np.concatenate(parts.lane_counts) if parts.lane_counts else np.zeros(0, np.int64)
    lane_offsets = np.concatenate(([0], np.cumsum(counts)))
    meta = cache.builder_meta(files, b, n, steps, span, view, lane_offsets)
    return meta, places(per_file)


def _commit_file(b: TraceBuilder, parts: _Parts, info: dict, used: set, rank_warnings: list, said: list) -> dict:
    """Give a file just read its rank (as kineto_json does: a rank taken by an earlier file, or
    none, becomes the lowest free one), commit it on its own clock and store its events."""
    fr = info["reader"]
    r = _free_rank(info["rank"], fr.path, used, rank_warnings)
    n_warn, lane_lo, c_lo, s_lo = len(b.warnings), len(b.lanes), len(b.counters), len(b.steps)
    fr.finish(info["meta"], r, 0, info["base_ns"])
    # warnings of the commit come after every file's reading warnings, as in kineto_json
    later = b.warnings[n_warn:]
    del b.warnings[n_warn:]
    at = parts.add(b, lane_lo)
    counters = parts.counters(b, c_lo)
    out = {
        "path": fr.path,
        "n_flow": fr.n_flow,
        "host_numbered": fr.numbered,
        "meta": info["meta"],
        "rank": r,
        "file_rank": info["rank"],
        "base_ns": info["base_ns"],
        "min_ts_us": info["min_ts_us"],
        "at": at,
        "counters": counters,
        "steps": (s_lo, len(b.steps)),
        "warnings": later,
        "offset": 0,
    }
    # the names in the order reading the file alone interns them: its own map's, first seen first
    record(out, list(dict.fromkeys(fr.names.values())), said, (lane_lo, len(b.lanes) - lane_lo))
    return out


def _free_rank(r: int | None, path: str, used: set, rank_warnings: list) -> int:
    """kineto_json's rule: a rank taken by an earlier file, or none, becomes the lowest free one."""
    if r is None or r in used:
        if r is not None:
            rank_warnings.append(f"{os.path.basename(path)}: rank {r} appears twice; shown as another rank")
        r = 0
        while r in used:
            r += 1
    used.add(r)
    return r


def _commit_worker_part(b: TraceBuilder, parts: _Parts, res: dict, used: set, rank_warnings: list) -> dict:
    """A file a worker read and committed as rank 0 of its own builder (io/ooc_pool.py) made
    what _commit_file makes of it here: its names interned in their order (so the ids are the
    ones reading it here gives), its lanes numbered after the earlier files', its rank given."""
    r = _free_rank(res["file_rank"], res["path"], used, rank_warnings)
    lane_lo, c_lo, s_lo = len(b.lanes), len(b.counters), len(b.steps)
    source = len(b.sources)
    names = np.array(b.names.ids(res["strings"]), np.int32)
    for ln in res["lanes"]:
        ln.rank, ln.source = r, source
        b._lane_index[(r, ln.kind, ln.device, ln.pid, ln.stream)] = len(b.lanes)
        b.lanes.append(ln)
    b.sources.append(res["source"])
    b.warnings.extend(res["read_warnings"])
    info = res["rank_info"]
    info.rank = r
    b.ranks[r] = info
    b.steps.extend(Step(r, s.step, s.start, s.end) for s in res["steps"])
    b.counters.extend(Counter(r, c.device, c.name, c.t, c.v) for c in res["counters"])
    at = parts.append(res["part"], lane_lo, names)
    counters = parts.counters(b, c_lo)
    out = {
        "path": res["path"],
        "n_flow": res["n_flow"],
        "host_numbered": res.get("host_numbered"),
        "meta": res["meta"],
        "rank": r,
        "file_rank": res["file_rank"],
        "base_ns": res["base_ns"],
        "min_ts_us": res["min_ts_us"],
        "at": at,
        "counters": counters,
        "steps": (s_lo, len(b.steps)),
        "warnings": res["commit_warnings"],
        "offset": 0,
    }
    record(out, names, res["read_warnings"], (lane_lo, len(b.lanes) - lane_lo))
    return out


def _clocks(b: TraceBuilder, parts: _Parts, per_file: list[dict]) -> None:
    """kineto_json's clock rule: files with relative times and no base are aligned at their
    first event to the earliest absolute file."""
    timed = [p for p in per_file if math.isfinite(p["min_ts_us"])]
    absolute = [p for p in timed if p["base_ns"] or p["min_ts_us"] > 1e14]
    ref_ns = min((p["base_ns"] + int(p["min_ts_us"] * 1000) for p in absolute), default=0)
    for p in per_file:
        relative = math.isfinite(p["min_ts_us"]) and not (p["base_ns"] or p["min_ts_us"] > 1e14)
        if relative and absolute:
            p["offset"] = offset = ref_ns - int(p["min_ts_us"] * 1000)
            b.warnings.append(
                f"{os.path.basename(p['path'])}: no absolute clock; aligned at its first event (offset {offset} ns)"
            )
            parts.shift(p["at"], p["counters"], offset)
            lo, hi = p["steps"]
            b.steps[lo:hi] = [Step(s.rank, s.step, s.start + offset, s.end + offset) for s in b.steps[lo:hi]]
            b.ranks[p["rank"]].clock_offset_ns = offset
        b.warnings.extend(p["warnings"])


def _span(b: TraceBuilder, per_file: list[dict], store) -> tuple[int, int]:
    spans = [p["at"]["span"] for p in per_file if p["at"]["span"] is not None]
    if spans:
        return min(s[0] for s in spans), max(s[1] for s in spans)
    lo, hi = [], []
    for i, _c in enumerate(b.counters):  # no events: the counters' span (Trace._compute_span)
        t = store.load(f"counter{i}_t")
        if len(t):
            lo.append(int(t[0]))
            hi.append(int(t[-1]))
    return (min(lo), max(hi)) if lo else (0, 0)


def _initial_view(store, steps: list[Step], span: tuple[int, int]) -> tuple[int, int]:
    """model.view.initial_view over the stored columns, read a chunk at a time."""
    from ..model.categories import Cat
    from ..model.view import MARGIN

    if not steps:
        return span
    s0 = min(s.start for s in steps)
    s1 = max(s.end for s in steps)
    gpu_cats = np.array([Cat.KERNEL, Cat.COMM_KERNEL, Cat.MEMCPY, Cat.MEMSET], np.uint8)
    last = s1
    cols = store.cols
    for cat, start, dur in zip(cols["cat"].chunks(), cols["start"].chunks(), cols["dur"].chunks()):
        # GPU work launched inside the steps runs on after them when the GPU is behind
        inside = np.isin(cat, gpu_cats) & (start >= s0) & (start <= s1)
        if inside.any():
            last = max(last, int((start[inside] + dur[inside]).max()))
    pad = int((last - s0) * MARGIN)
    return max(span[0], s0 - pad), min(span[1], last + pad)
