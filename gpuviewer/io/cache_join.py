"""One cache for every session of a file: a Kineto session of several files built from the
files' own cache entries, not by parsing them again.

A file opened alone (a `--dask` worker's map, the window, `info FILE`) leaves an entry keyed by
that file's identity (cache.key_for([file]): its inode, size and times, io/cache_paths.py), so
a later session holding that file by any path (the folder it lies in) finds the session's own
entry missing and joins the files' entries instead: each file's columns, memory-mapped, are
appended to the session's entry a file at a time (io/cache_stream.PartStore, as the out-of-core
build does), with lanes, names, flows, instants and level-of-detail runs renumbered. Files of the session without an entry are read
alone first (and so get one), also when none has one: a folder opened cold leaves every file's
entry, so opening one of its files, or another folder holding some of them, parses nothing
again. (Reading file by file holds one file's events in memory at a time, not the session's;
what it costs is writing each file's entry as well as the session's.) A session big enough for
the out-of-core build with no entry at all is built that way (io/out_of_core.py): its files get
pointers into its entry, from which their entries are cut here (io/cache_slice.py), not parsed.

The join gives the session the readers make (formats/kineto_json): every file is one rank,
numbered by the session's rule (a rank named twice, or none, becomes the lowest free one) and
its lanes follow the earlier files' lanes. Two things the join does not redo, so it steps aside
(None) for them: files whose times must be moved onto another file's clock (relative times
beside absolute ones: the files are then read again together), and entries written before this
module kept each file's own rank.
Warnings come file by file, then the session's own (the readers list the reading warnings of
every file first): the same lines, in another order.
"""

from __future__ import annotations

import os
from typing import TypeGuard

import numpy as np

from ..model.build import TraceBuilder
from ..model.trace import EVENT_COLUMNS, Counter, Lane, RankInfo, Source, Step, Trace
from .errors import TraceError
from .reader import Job, Reader

_NOT_A_TRACE = ("not a trace", "no trace events", "not a JSON trace", "no readable trace events")


def wanted(reader: Reader, files: list[str]) -> bool:
    return reader.name == "kineto" and len(files) > 1


def load(files: list[str], reader: Reader, job: Job) -> Trace | None:
    """The session from its files' entries (written into the session's own entry and memory-
    mapped), or None: the join does not apply, or the cache cannot be written (the caller then
    reads the files together as before). Files without an entry are read alone first and leave
    one, so a session opened cold also leaves every file's entry for later sessions; a session
    big enough for the out-of-core build (io/out_of_core.py) with no entry at all is left to it."""
    from . import cache, cache_slice

    entries: dict[str, Trace | None] = {f: cache_slice.load([f]) for f in files}
    reused = sum(1 for t in entries.values() if _usable(t))
    if not reused:
        from . import out_of_core

        if out_of_core.wanted(reader, files):
            return None
    from .cache_stream import PartStore

    try:
        store = PartStore()  # first: a cache that cannot be written is known before any file is read
    except OSError:
        return None
    try:
        parts, skipped, warnings = _parts(files, entries, reader, job)
        if parts is None or any(_offset_needed(parts)):
            store.abort()
            return None
        if job.progress:
            job.progress(0.92, f"joining {len(parts)} ranks from their caches")
        meta = _join(files, parts, skipped, warnings, store)
        store.commit(meta)
    except OSError:
        store.abort()
        return None
    except BaseException:
        store.abort()
        raise
    out = cache.load(files)
    if out is not None:
        out.metadata["from_cache"] = False
        # how this open went (not stored): files taken from their own entries, files parsed
        out.metadata["file_caches"] = {"reused": reused, "read": len(files) - reused - len(skipped)}
    return out


def _parts(files: list[str], entries: dict[str, Trace | None], reader: Reader, job: Job):
    """Each file's entry, the files without one read alone (their entries written): (the
    (file, entry) pairs, or None when an entry cannot be joined; the files skipped; warnings)."""
    parts: list[tuple[str, Trace]] = []
    skipped: list[str] = []
    warnings: list[str] = []
    for i, f in enumerate(files):
        t = entries.pop(f)
        if not _usable(t):
            t = _read_alone(f, reader, _one_of(job, i, len(files), f), skipped, warnings)
            if t is None:
                continue
            if not _usable(t):
                return None, skipped, warnings
        parts.append((f, t))
    if not parts:
        raise TraceError(", ".join(files), "no trace in these files (each is JSON, but not a profiler trace)")
    return parts, skipped, warnings


def _one_of(job: Job, i: int, n: int, f: str) -> Job:
    """The job of reading the i-th of n files alone: its progress is that file's share of the
    session's first 90%."""
    outer = job.progress
    if outer is None:
        return job
    what = f"reading {os.path.basename(f)} · {i} of {n} ranks"
    outer(0.9 * i / n, what)

    def progress(frac: float, msg: str = "") -> None:
        outer(0.9 * (i + min(1.0, max(0.0, frac))) / n, msg or what)

    return Job(progress, job.cancelled, job.optional, job.open)


def _usable(t: Trace | None) -> TypeGuard[Trace]:
    """An entry of one Kineto file that says which rank the file names (entries written before
    that was kept are read again)."""
    if t is None or t.format != "kineto" or len(t.ranks) != 1:
        return False
    pf = t.metadata.get("per_file") or []
    return len(pf) == 1 and "file_rank" in pf[0] and "min_ts_us" in pf[0]


def _read_alone(f: str, reader: Reader, job: Job, skipped: list[str], warnings: list[str]) -> Trace | None:
    """Read one file of the session as a session of its own (its entry written). A file found in
    a folder that is JSON but no trace is skipped, as the folder's reader skips it."""
    from . import cache

    try:
        t = reader.read([f], Job(job.progress, job.cancelled, frozenset(), job.open))
    except TraceError as e:
        if f in job.optional and any(w in e.problem for w in _NOT_A_TRACE):
            skipped.append(f)
            warnings.append(f"{f}: skipped ({e.problem})")
            return None
        raise
    cache.store([f], t)
    mapped = cache.load([f])  # the parse buffers go; the columns are appended from the mapping
    return mapped if mapped is not None else t


def _offset_needed(parts: list[tuple[str, Trace]]):
    """kineto_json's clock rule: a file with relative times is moved onto the earliest absolute
    file's clock when there is one. Such sessions are read whole."""
    info = [t.metadata["per_file"][0] for _f, t in parts]
    absolute = [p for p in info if p["min_ts_us"] is not None and (p["base_ns"] or p["min_ts_us"] > 1e14)]
    for p in info:
        relative = p["min_ts_us"] is not None and not (p["base_ns"] or p["min_ts_us"] > 1e14)
        yield relative and bool(absolute)


def _join(files: list[str], parts: list[tuple[str, Trace]], skipped: list[str], warnings: list[str], store) -> dict:
    from . import cache
    from .out_of_core import _initial_view

    b = TraceBuilder("kineto")  # the session's tables (names, lanes, ranks); the columns go to the store
    rank_warnings: list[str] = []
    used: set[int] = set()
    total = sum(len(t) for _f, t in parts)
    flow_type = np.int32 if total < 2**31 else np.int64  # as TraceBuilder.finish stores them
    lane_counts: list[np.ndarray] = []
    lod_index: list[np.ndarray] = []
    lod_q: list[np.ndarray] = []
    spans: list[tuple[int, int]] = []
    counter_spans: list[tuple[int, int]] = []
    per_file: list[dict] = []
    # the parts' kept arguments (model/arg_table.py), joined when every part has them
    arg_tables = [(src, t.arg_table) for src, (_f, t) in enumerate(parts)]
    for src, (f, t) in enumerate(parts):
        pf = dict(t.metadata["per_file"][0])
        r = pf["file_rank"]
        if r is None or r in used:
            if r is not None:
                rank_warnings.append(f"{os.path.basename(f)}: rank {r} appears twice; shown as another rank")
            r = 0
            while r in used:
                r += 1
        used.add(r)
        lane_lo, at, at_lod = len(b.lanes), store.length("start"), store.length("lod_start")
        names = np.array(b.names.ids(t.names), np.int32) if t.names else np.zeros(0, np.int32)
        for ln in t.lanes:
            b.lanes.append(Lane(r, ln.kind, ln.device, ln.stream, ln.label, 0, src, ln.pid, ln.tid, ln.domain))
        old = t.ranks[0]
        b.ranks[r] = RankInfo(r, [f], list(old.devices), dict(old.device_props), old.host, 0, old.world_size)
        cols = t.columns
        for name, dtype in EVENT_COLUMNS.items():
            a = np.asarray(cols[name])
            if name == "lane":
                a = a + np.int32(lane_lo)
            elif name == "name":
                a = names[a]
            store.append(name, a, dtype)
        lane_counts.append(np.diff(np.asarray(t.lane_offsets, np.int64)))
        inst = t.instants
        store.append("inst_t", np.asarray(inst["t"]), np.int64)
        store.append("inst_lane", np.asarray(inst["lane"]) + np.int32(lane_lo), np.int32)
        store.append("inst_name", names[np.asarray(inst["name"])], np.int32)
        fs, fd = t.flows
        store.append("flow_src", np.asarray(fs, np.int64) + at, flow_type)
        store.append("flow_dst", np.asarray(fd, np.int64) + at, flow_type)
        lod = t.derived.get("lod_packed")
        if lod is None:  # an entry always packs its levels (cache.store); never None in practice
            from ..model.queries import lod_pack

            packed = lod_pack(t)
        else:
            packed = lod[0]
        for k in ("start", "end", "maxend", "busy"):
            store.append(f"lod_{k}", np.asarray(packed[f"lod_{k}"]), np.int64)
        store.append("lod_rep", np.asarray(packed["lod_rep"], np.int64) + at, np.int64)
        index = np.array(packed["lod_index"], np.int64).reshape(-1, 4)
        index[:, 0] += lane_lo
        index[:, 2] += at_lod
        lod_index.append(index)
        lod_q.append(np.asarray(packed["lod_q"], np.float64))
        for c in t.counters:
            i = len(b.counters)
            store.save(f"counter{i}_t", np.asarray(c.t, np.int64))
            store.save(f"counter{i}_v", np.asarray(c.v, np.float64))
            b.counters.append(Counter(r, c.device, c.name, np.zeros(0, np.int64), np.zeros(0, np.float64)))
            if len(c.t):
                counter_spans.append((int(c.t[0]), int(c.t[-1])))
        b.steps.extend(Step(r, s.step, s.start, s.end) for s in t.steps)
        b.sources.extend(Source(**s.__dict__) for s in t.sources)
        warnings.extend(t.warnings)
        for g in t.metadata.get("process_groups", []):
            if g not in b.metadata.setdefault("process_groups", []):
                b.metadata["process_groups"].append(g)
        pf.update(path=f, rank=r, clock_offset_ns=0)
        per_file.append(pf)
        if len(t) or len(inst["t"]):
            spans.append((t.start_ns, t.end_ns))
        del t, cols, inst, packed, lod
    b.warnings = warnings + rank_warnings
    b.metadata["per_file"] = per_file
    b.finish_tables()  # lane order and each rank's devices, as a session read whole
    b.metadata["files"] = [os.path.abspath(f) for f in files if f not in skipped]
    b.metadata["skipped_files"] = [os.path.abspath(f) for f in skipped]
    store.save("lod_index", np.concatenate(lod_index) if lod_index else np.zeros((0, 4), np.int64))
    store.save("lod_q", np.concatenate(lod_q) if lod_q else np.zeros(0, np.float64))
    both = spans or counter_spans  # counters only where nothing else is (Trace._compute_span)
    span = (min(s[0] for s in both), max(s[1] for s in both)) if both else (0, 0)
    steps = sorted(b.steps, key=lambda s: (s.rank, s.step))
    counts = np.concatenate(lane_counts) if lane_counts else np.zeros(0, np.int64)
    lane_offsets = np.concatenate(([0], np.cumsum(counts)))
    meta = cache.builder_meta(
        files, b, store.length("start"), steps, span, _initial_view(store, steps, span), lane_offsets
    )
    meta["argtab"] = all(tab is not None for _s, tab in arg_tables) and len(b.sources) == len(parts)
    if meta["argtab"]:
        from ..model.arg_table import ArgTable

        try:
            joined = ArgTable.join([(s, tab) for s, tab in arg_tables if tab is not None])
        except ValueError:  # not one-file parts: the session fetches them from the files
            meta["argtab"] = False
        else:
            for name, a in joined.arrays().items():
                store.save(name, a)
    return meta
