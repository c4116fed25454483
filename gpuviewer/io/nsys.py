"""Nsight Systems SQLite exports (schemas 2021-2026) -> Trace.

Facts: formats.md section A. Every table and non-core column is optional (lazy exports, drifting
columns); SELECTs are built from what PRAGMA table_info reports. Times are ns since the capture
started; TARGET_INFO_SESSION_START_TIME.utcEpochNs anchors them to Unix time so several
reports share one axis. The file is opened through sqlite_safe: read-only, immutable, bounded,
only real tables; nothing is written to it or beside it. A row whose times are not integers, are
out of range or run backwards is skipped and counted in a warning.
The captured environment (META_DATA_CAPTURE, TARGET_INFO_SYSTEM_ENV) is never read here.
"""
from __future__ import annotations

import os
import re
import sqlite3
from collections.abc import Callable
from typing import Any

import numpy as np

from ..model.build import TraceBuilder, mark_comm_lanes, nccl_name_ids
from ..model.categories import Cat, LaneKind
from ..model.trace import Counter, Source, Trace
from . import sqlite_safe as sq
from .errors import Cancelled, TraceError
from .factorize import factorize
from .nsys_nvtx import fetch_nvtx, nvtx_pids, read_nvtx

NSYS_MARKER_TABLES = ("StringIds", "TARGET_INFO_GPU", "CUPTI_ACTIVITY_KIND_KERNEL", "NVTX_EVENTS",
                      "CUPTI_ACTIVITY_KIND_RUNTIME", "TARGET_INFO_SESSION_START_TIME", "ThreadNames",
                      "EXPORT_META_DATA", "META_DATA_EXPORT", "ANALYSIS_DETAILS")
TABLE_OF_CAT = {
    Cat.KERNEL: "CUPTI_ACTIVITY_KIND_KERNEL", Cat.COMM_KERNEL: "CUPTI_ACTIVITY_KIND_KERNEL",
    Cat.MEMCPY: "CUPTI_ACTIVITY_KIND_MEMCPY", Cat.MEMSET: "CUPTI_ACTIVITY_KIND_MEMSET",
    Cat.CUDA_RUNTIME: "CUPTI_ACTIVITY_KIND_RUNTIME", Cat.CUDA_DRIVER: "CUPTI_ACTIVITY_KIND_RUNTIME",
    Cat.SYNC: "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION", Cat.NVTX: "NVTX_EVENTS", Cat.OSRT: "OSRT_API",
}
# CUPTI enum labels, built in: 2022 exports have no ENUM_* tables.
COPY_KIND = {0: "Unknown", 1: "HtoD", 2: "DtoH", 3: "HtoA", 4: "AtoH", 5: "AtoA", 6: "AtoD",
             7: "DtoA", 8: "DtoD", 9: "HtoH", 10: "PtoP", 11: "HtoD (UVM)", 12: "DtoH (UVM)",
             13: "DtoD (UVM)"}
MEM_KIND = {0: "Pageable", 1: "Pinned", 2: "Device", 3: "Array", 4: "Managed", 5: "Device Static",
            6: "Managed Static", 7: "Unknown"}
SYNC_TYPE = {0: "Unknown", 1: "Event Sync", 2: "Stream Wait Event", 3: "Stream Sync", 4: "Context Sync"}
_VERSION_SUFFIX = re.compile(r"_v\d+$")
# nsys --cuda-graph-trace=graph records each graph launch as one GPU range (no kernel rows): read
# as a kernel named for its graph; its src is the GRAPH_TRACE rowid with this bit set, so the
# details fetch that table's row (rowids of a kernel table never reach 2**31)
GRAPH_TRACE = "CUPTI_ACTIVITY_KIND_GRAPH_TRACE"
GRAPH_EVENTS = "CUDA_GRAPH_EVENTS"  # graph and graph-exec creation, on the thread that made them
GRAPH_ROW = 1 << 31
# Every table this reader queries: a view or virtual table under one of these names is refused.
READ_TABLES = set(NSYS_MARKER_TABLES) | set(TABLE_OF_CAT.values()) | {
    "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION", "TARGET_INFO_CUDA_GPU", "TARGET_INFO_CUDA_DEVICE",
    "CUDA_GPU_MEMORY_USAGE_EVENTS", "META_DATA_CAPTURE", GRAPH_TRACE, GRAPH_EVENTS}
_BAD_VALUES = (TypeError, ValueError, OverflowError, KeyError, IndexError, AttributeError)


def connect(path: str, cancelled=None) -> sq.SafeConnection:
    return sq.open_readonly(path, cancelled)


def tables(db: sq.SafeConnection) -> set[str]:
    return sq.real_tables(db, READ_TABLES)


def columns(db: sq.SafeConnection, table: str) -> set[str]:
    return sq.columns(db, table)


def _col(have: set[str], *names: str, default: str = "-1") -> str:
    for n in names:
        if n in have:
            return f"coalesce({n}, {default})"
    return default


class _Report:
    """One .sqlite file."""

    def __init__(self, path: str, cancelled=None) -> None:
        self.path = path
        self.db = connect(path, cancelled)
        self.bad_rows: dict[str, int] = {}  # table -> rows skipped for bad values
        self.notes: list[str] = []
        try:
            self.tables = tables(self.db)
            self._check_nsys()
            # Ids that are not integers name nothing; values that are not text become text.
            self.strings = dict(self.db.execute(
                "SELECT id, CAST(value AS TEXT) FROM StringIds WHERE typeof(id) = 'integer' AND value IS NOT NULL"))
            self.utc_ns = self._utc_start()
        except sqlite3.DatabaseError as e:
            self.db.close()
            raise sq.explain(self.db, path, e) from None
        except BaseException:
            self.db.close()
            raise

    def _check_nsys(self) -> None:
        path = self.path
        if not (self.tables & set(NSYS_MARKER_TABLES)) and not any(
                t.startswith(("CUPTI_ACTIVITY_KIND_", "TARGET_INFO_")) for t in self.tables):
            raise TraceError(path, "an SQLite database, but not an Nsight Systems export "
                                   "(no StringIds, TARGET_INFO_* or CUPTI_ACTIVITY_KIND_* tables)")
        if "StringIds" not in self.tables:
            raise TraceError(path, "the export has no StringIds table, so no event can be named; "
                                   "export it again with `nsys export --type sqlite`")

    def _utc_start(self) -> int:
        if "TARGET_INFO_SESSION_START_TIME" in self.tables and \
                "utcEpochNs" in columns(self.db, "TARGET_INFO_SESSION_START_TIME"):
            r = self.db.execute("SELECT utcEpochNs FROM TARGET_INFO_SESSION_START_TIME").fetchone()
            if r and type(r[0]) is int and 0 <= r[0] < sq.TIME_LIMIT:
                return r[0]
            if r and r[0] is not None:
                self.notes.append("the session start time (utcEpochNs) is not a valid number: times "
                                  "are shown from the capture start")
        return 0

    def version(self) -> dict:
        for t in ("META_DATA_EXPORT", "EXPORT_META_DATA"):
            if t in self.tables:
                rows = dict(self.db.execute(f"SELECT name, value FROM {t}").fetchall())
                return {k: str(rows[k]) for k in ("EXPORT_PRODUCT_VERSION", "EXPORT_SCHEMA_VERSION")
                        if k in rows}
        return {}

    def fetch(self, table: str, exprs: list[str], required=(0, 1, 2), times=(1, 2)) -> np.ndarray:
        """`SELECT exprs FROM table` as int64 columns (typed, in blocks: sqlite_safe.fetch_columns)."""
        a, bad = sq.fetch_columns(self.db, table, exprs, required, times)
        return self._count_bad(table, a, bad)

    def fetch_sql(self, table: str, sql: str, ncols: int, required=(0, 1, 2), times=(1, 2)) -> np.ndarray:
        a, bad = sq.fetch_ints(self.db, sql, ncols, required, times, rows=sq.row_bound(self.db, table))
        return self._count_bad(table, a, bad)

    def _count_bad(self, table: str, a: np.ndarray, bad: int) -> np.ndarray:
        if bad:
            self.bad_rows[table] = self.bad_rows.get(table, 0) + bad
        return a


def _gpu_table(rep: _Report, table: str, cat: Cat, name_sql: str | Callable[[set[str]], str] | None) -> dict | None:
    if table not in rep.tables:
        return None
    have = columns(rep.db, table)
    if not {"start", "end"} <= have:
        return None
    # The raw globalPid, split here: SQL would turn text into pid 0, a process that is not there.
    pid = "globalPid" if "globalPid" in have else "-1"
    name = name_sql(have) if callable(name_sql) else (name_sql or "-1")
    exprs = ["rowid", "start", "end", _col(have, "deviceId"), _col(have, "streamId"),
             _col(have, "correlationId", default="0"), pid, name]
    a = rep.fetch(table, exprs, required=(0, 1, 2, 6) if pid != "-1" else (0, 1, 2))
    p = (a[:, 6] >> 24) & 0xFFFFFF if pid != "-1" else a[:, 6]
    return {"rowid": a[:, 0], "start": a[:, 1], "end": a[:, 2], "device": a[:, 3], "stream": a[:, 4],
            "corr": a[:, 5], "pid": p, "name": a[:, 7], "cat": cat}


def _graph_table(rep: _Report) -> dict | None:
    """Whole CUDA graph launches on the GPU (nsys --cuda-graph-trace=graph), named by graphId."""
    t = _gpu_table(rep, GRAPH_TRACE, Cat.KERNEL, lambda h: _col(h, "graphId"))
    if t is not None:
        t["graph"] = True
        keep = t["rowid"] < GRAPH_ROW
        if not keep.all():
            t = {k: (v[keep] if isinstance(v, np.ndarray) else v) for k, v in t.items()}
        if len(t["start"]):
            rep.notes.append(f"{len(t['start']):,} CUDA graph launches traced as whole graphs (nsys "
                             "--cuda-graph-trace=graph): each is one GPU range 'CUDA graph N'; record "
                             "with --cuda-graph-trace=node to see their kernels")
    return t


def _kernel_name(have):
    for c in ("shortName", "demangledName", "mangledName", "name"):
        if c in have:
            return f"coalesce({c}, -1)"
    return "-1"


def read_report(b: TraceBuilder, path: str, file_index: int, rank_base: int,
                progress: Callable[[float, str], None] | None = None, cancelled=None) -> dict:
    rep = _Report(path, cancelled)
    db = rep.db
    strings = rep.strings
    warnings: list[str] = []
    try:
        gpu = [t for t in (
            _gpu_table(rep, "CUPTI_ACTIVITY_KIND_KERNEL", Cat.KERNEL, _kernel_name),
            _gpu_table(rep, "CUPTI_ACTIVITY_KIND_MEMCPY", Cat.MEMCPY,
                       lambda h: _col(h, "copyKind", default="0")),
            _gpu_table(rep, "CUPTI_ACTIVITY_KIND_MEMSET", Cat.MEMSET, "-1"),
            _gpu_table(rep, "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION", Cat.SYNC,
                       lambda h: _col(h, "syncType", default="0")),
            _graph_table(rep),
        ) if t is not None and len(t["start"])]
        if progress:
            progress(0.3, f"{os.path.basename(path)}: GPU activity ({b.n_events:,} events so far)")
        # Ranks: processes that own GPU work, in device order.
        proc_dev: dict[int, set[int]] = {}
        for t in gpu:
            if t["cat"] == Cat.SYNC:
                continue
            for p, d in set(zip(t["pid"].tolist(), t["device"].tolist())):
                proc_dev.setdefault(p, set()).add(d)
        procs = sorted(proc_dev, key=lambda p: (min(proc_dev[p]), p))
        # host tables fetched before the ranks are known: their processes stand in for ranks
        # when no process has GPU work
        runtime = _host_fetch(rep, "CUPTI_ACTIVITY_KIND_RUNTIME", ["correlationId", "nameId", "eventClass"])
        nvtx = fetch_nvtx(rep)
        host_pids = set(nvtx_pids(nvtx).tolist())
        if runtime is not None:
            host_pids |= set(factorize(runtime[:, 3])[0].tolist())
        if not procs:
            procs = sorted(host_pids)
        rank_of = {p: rank_base + i for i, p in enumerate(procs)}
        env_rank = _captured_rank(rep)
        if env_rank is not None and len(procs) == 1 and env_rank not in b.ranks:
            rank_of = {procs[0]: env_rank}  # one rank per report: the launcher's RANK wins
        dropped = sorted(set(host_pids) - set(rank_of))
        names_lut = _NameLUT(b, strings)

        # -- GPU lanes ------------------------------------------------------------------------
        for t in gpu:
            keep = np.isin(t["pid"], list(rank_of)) if rank_of else np.zeros(len(t["pid"]), bool)
            if not keep.all():
                t = {k: (v[keep] if isinstance(v, np.ndarray) else v) for k, v in t.items()}
            if not len(t["start"]):
                continue
            cat = t["cat"]
            if cat == Cat.SYNC:
                # CUPTI reports the sync's device as 0 for every process here (nsys 2025.3); a
                # process that owns one GPU waits on that GPU.
                dev = t["device"].copy()
                for p, ds in proc_dev.items():
                    if len(ds) == 1:
                        dev[t["pid"] == p] = next(iter(ds))
                t = dict(t, device=dev)
            if t.get("graph"):
                name = np.array([b.names.id(f"CUDA graph {g}" if g >= 0 else "CUDA graph")
                                 for g in t["name"].tolist()], np.int32)
                cats = np.full(len(name), Cat.KERNEL, np.uint8)
            elif cat == Cat.KERNEL:
                name = names_lut.ids(t["name"])
                cats = np.full(len(name), Cat.KERNEL, np.uint8)
                cats[np.isin(name, nccl_name_ids(b.names.strings))] = Cat.COMM_KERNEL
            else:
                if cat == Cat.MEMCPY:
                    labels = {k: b.names.id(f"Memcpy {v}") for k, v in COPY_KIND.items()}
                    fallback = b.names.id("Memcpy")
                elif cat == Cat.MEMSET:
                    labels, fallback = {}, b.names.id("Memset")
                else:
                    labels = {k: b.names.id(v) for k, v in SYNC_TYPE.items()}
                    fallback = b.names.id("Synchronization")
                name = np.array([labels.get(k, fallback) for k in t["name"].tolist()], np.int32)
                cats = np.full(len(name), cat, np.uint8)
            lane = np.empty(len(name), np.int32)
            for (p, d, s) in set(zip(t["pid"].tolist(), t["device"].tolist(), t["stream"].tolist())):
                m = (t["pid"] == p) & (t["device"] == d) & (t["stream"] == s)
                label = "context sync" if s == 0xFFFFFFFF else f"stream {s}"
                lane[m] = b.lane(rank_of[p], LaneKind.GPU, d, s, label, pid=p, source=file_index)
            b.add(start=t["start"] + rep.utc_ns, dur=t["end"] - t["start"], lane=lane, name=name,
                  cat=cats, corr=np.clip(t["corr"], 0, 0xFFFFFFFF),
                  src=t["rowid"] | GRAPH_ROW if t.get("graph") else t["rowid"])
        mark_comm_lanes(b.lanes, b._chunks, source=file_index)

        # -- host lanes: CUDA API, NVTX, OS runtime --------------------------------------------
        if progress:
            progress(0.5, f"{os.path.basename(path)}: CUDA API ({b.n_events:,} events so far)")
        _runtime(rep, b, rank_of, names_lut, file_index, runtime)
        del runtime
        _graph_events(rep, b, rank_of, strings, file_index)
        if progress:
            progress(0.65, f"{os.path.basename(path)}: NVTX ({b.n_events:,} events so far)")
        read_nvtx(rep, b, rank_of, file_index, warnings, nvtx)
        del nvtx
        if progress:
            progress(0.8, f"{os.path.basename(path)}: OS runtime ({b.n_events:,} events so far)")
        _osrt(rep, b, rank_of, names_lut, file_index)
        _thread_labels(rep, b, file_index)
        _devices(rep, b, rank_of, proc_dev)
        _memory(rep, b, rank_of)
        for p, r in rank_of.items():
            info = b.rank(r)
            info.files.append(os.path.abspath(path))
        if dropped:
            warnings.append(f"{len(dropped)} processes without GPU work are not shown as ranks")
        for table, n in rep.bad_rows.items():
            warnings.append(f"{n:,} row{'s' * (n != 1)} of {table} skipped: a time or id that is "
                            "missing, not an integer, out of range, or an end earlier than its start")
        for w in warnings + rep.notes + db.warnings:
            b.warnings.append(f"{os.path.basename(path)}: {w}")
        st = os.stat(path)
        b.sources.append(Source(path=os.path.abspath(path), format="nsys", size=st.st_size,
                                mtime_ns=st.st_mtime_ns))
        return {"ranks": len(rank_of), "utc_ns": rep.utc_ns, "version": rep.version(),
                "pids": {str(p): r for p, r in rank_of.items()}}
    except sqlite3.DatabaseError as e:
        raise sq.explain(db, path, e) from None
    except _BAD_VALUES as e:  # a value of a type no export has: one line, not Python's words
        raise TraceError(path, "the export holds values of a type or size Nsight Systems does not "
                               "write; it is damaged or was made by another program") from e
    finally:
        db.close()


def captured_rank(path: str) -> int | None:
    """The launcher's RANK recorded in a report (None: not recorded): the rank a one-process
    report takes in a session when no earlier report took it (read_report)."""
    rep = _Report(path)
    try:
        return _captured_rank(rep)
    finally:
        rep.db.close()


_RANK_VARS = ("RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK", "SLURM_PROCID", "PMIX_RANK")


def _captured_rank(rep: _Report) -> int | None:
    """RANK (or the MPI/Slurm equivalents) from the captured environment of the profiled
    process. Only these variables are looked at; nothing else of the environment is kept."""
    if "META_DATA_CAPTURE" not in rep.tables:
        return None
    try:
        rows = rep.db.execute("SELECT value FROM META_DATA_CAPTURE WHERE name LIKE 'PROCESS_%:ENVIRONMENT_VARIABLE'")
        for (v,) in rows:
            if not isinstance(v, str) or "=" not in v:
                continue
            key, _, val = v.partition("=")
            if key.strip() in _RANK_VARS:
                val = val.strip().strip('"')
                if val.isdigit():
                    return int(val)
    except sqlite3.Error:
        return None
    return None


class _NameLUT:
    """StringIds ids -> interned name ids, for the ids a column uses."""

    def __init__(self, b: TraceBuilder, strings: dict) -> None:
        self.b = b
        self.strings = strings

    def ids(self, sid: np.ndarray, transform=None) -> np.ndarray:
        uniq, _, inv = factorize(sid)
        out = np.empty(len(uniq), np.int32)
        for k, s in enumerate(uniq.tolist()):
            text = self.strings.get(s, f"<string {s}>") if s >= 0 else "<unnamed>"
            out[k] = self.b.names.id(transform(text) if transform else text)
        return out[inv]


def _host_fetch(rep, table: str, extra: list[str]) -> np.ndarray | None:
    """Rows of a host-side table as int64 columns (rowid, start, end, pid, tid, *extra); None
    when the table is absent or lacks them."""
    if table not in rep.tables:
        return None
    have = columns(rep.db, table)
    if not {"start", "end", "globalTid"} <= have:
        return None
    cols = [_col(have, c, default="0" if c in ("correlationId", "eventClass") else "-1") for c in extra]
    # globalTid twice, split here (SQL would turn text into thread 0 of process 0)
    a = rep.fetch(table, ["rowid", "start", "end", "globalTid", "globalTid"] + cols, required=(0, 1, 2, 3))
    a[:, 3] >>= 24
    a[:, 3] &= 0xFFFFFF
    a[:, 4] &= 0xFFFFFF
    return a


def _thread_lanes(b, rank_of, pid: np.ndarray, tid: np.ndarray, kind: str, prefix: str,
                  source: int) -> np.ndarray:
    """Each row's lane (-1: not a rank's process); lanes made in the order a set of the rows'
    (pid, tid) pairs gives, as before the columns were vectorised (the lane numbering, and so
    the event order, stays the same)."""
    key = (pid << 24) | tid
    uniq, first, inv = factorize(key)
    by_first = np.argsort(first, kind="stable")
    lane_of = np.full(len(uniq), -1, np.int32)
    pos = {int(u): k for k, u in enumerate(uniq.tolist())}
    for p, t in set(zip((uniq[by_first] >> 24).tolist(), (uniq[by_first] & 0xFFFFFF).tolist())):
        if p in rank_of:
            lane_of[pos[(p << 24) | t]] = b.lane(rank_of[p], kind, -1, t, f"{prefix} · thread {t}", pid=p,
                                                 source=source)
    return lane_of[inv]


def _host_rows(rep, b, rank_of, table: str, extra: list[str], kind: str, prefix: str, source: int,
               a: np.ndarray | None = None):
    """Rows of a host-side table (rowid, start, end, pid, tid, *extra) of the ranks' processes,
    with the lane of each row's thread; None when the table is absent or empty. `a`: the rows,
    when _host_fetch already read them."""
    if a is None:
        a = _host_fetch(rep, table, extra)
    if a is None or not len(a):
        return None
    lane = _thread_lanes(b, rank_of, a[:, 3], a[:, 4], kind, prefix, source)
    keep = lane >= 0
    if keep.all():
        return a, lane
    return a[keep], lane[keep]


def _runtime(rep, b, rank_of, names_lut, source, rows) -> None:
    got = _host_rows(rep, b, rank_of, "CUPTI_ACTIVITY_KIND_RUNTIME", ["correlationId", "nameId", "eventClass"],
                     LaneKind.CUDA_API, "CUDA API", source, rows)
    if got is None:
        return
    a, lane = got
    # Names carry a CUPTI version suffix (cudaLaunchKernel_v7000): shown without it.
    name = names_lut.ids(a[:, 6], lambda s: _VERSION_SUFFIX.sub("", s))
    cat = np.where(a[:, 7] == 1, Cat.CUDA_DRIVER, Cat.CUDA_RUNTIME).astype(np.uint8)
    b.add(start=a[:, 1] + rep.utc_ns, dur=a[:, 2] - a[:, 1], lane=lane, name=name, cat=cat,
          corr=np.clip(a[:, 5], 0, 0xFFFFFFFF), src=a[:, 0])


def _graph_events(rep, b, rank_of, strings, source) -> None:
    """CUDA graph creation and instantiation: instants on the CUDA API lane of their thread,
    named with the graph ('Graph Creation · graph 1'), so a graph launch's graph can be found."""
    got = _host_rows(rep, b, rank_of, GRAPH_EVENTS, ["nameId", "graphId"], LaneKind.CUDA_API, "CUDA API", source)
    if got is None:
        return
    a, lane = got
    name = np.array([b.names.id(f"{strings.get(n, 'CUDA graph event')}" + (f" · graph {g}" if g >= 0 else ""))
                     for n, g in zip(a[:, 5].tolist(), a[:, 6].tolist())], np.int32)
    b.add_instants(a[:, 1] + rep.utc_ns, lane, name)


def _osrt(rep, b, rank_of, names_lut, source) -> None:
    got = _host_rows(rep, b, rank_of, "OSRT_API", ["nameId"], LaneKind.OSRT, "OS runtime", source)
    if got is not None:
        a, lane = got
        b.add(start=a[:, 1] + rep.utc_ns, dur=a[:, 2] - a[:, 1], lane=lane, name=names_lut.ids(a[:, 5]),
              cat=np.full(len(a), Cat.OSRT, np.uint8), src=a[:, 0])


def _thread_labels(rep, b, source) -> None:
    if "ThreadNames" not in rep.tables:
        return
    names = {}
    for nid, g in rep.db.execute("SELECT nameId, globalTid FROM ThreadNames WHERE typeof(globalTid) = 'integer'"):
        if g is not None:
            names[(g >> 24 & 0xFFFFFF, g & 0xFFFFFF)] = rep.strings.get(nid)
    for ln in b.lanes:
        if ln.source != source or ln.device >= 0:
            continue
        tid = ln.stream // 1000 if ln.kind == LaneKind.NVTX and ln.stream >= 1000 * (1 << 24) else ln.stream
        n = names.get((ln.pid, ln.stream)) or names.get((ln.pid, tid))
        if n:
            ln.label = ln.label.replace(f"thread {tid}", f"{n} ({tid})")


def _devices(rep, b, rank_of, proc_dev) -> None:
    gpus = {}
    if "TARGET_INFO_GPU" in rep.tables:
        have = columns(rep.db, "TARGET_INFO_GPU")
        idcol = "id" if "id" in have else ("deviceId" if "deviceId" in have else None)
        fields = [c for c in ("name", "busLocation", "totalMemory", "smCount", "chipName", "uuid",
                              "memoryBandwidth", "clockRate", "cuDevice", "computeMajor", "computeMinor")
                  if c in have]
        if idcol:
            for row in rep.db.execute(f"SELECT {idcol}, {', '.join(fields) or 'NULL'} FROM TARGET_INFO_GPU"):
                gpus[row[0]] = _props(zip(fields, row[1:]))
    old = ("deviceId", "name", "pciBusId", "globalMemorySize", "numMultiprocessors")  # 2021 exports
    if not gpus and "TARGET_INFO_CUDA_GPU" in rep.tables and set(old) <= columns(rep.db, "TARGET_INFO_CUDA_GPU"):
        for row in rep.db.execute(f"SELECT {', '.join(old)} FROM TARGET_INFO_CUDA_GPU"):
            gpus[row[0]] = _props(zip(("name", "busLocation", "totalMemory", "smCount"), row[1:]))
    # (pid, cudaId) -> gpuId (2025.1+); before that the CUDA ordinal is cuDevice.
    cuda_map = {}
    if "TARGET_INFO_CUDA_DEVICE" in rep.tables and {"gpuId", "cudaId", "pid"} <= columns(rep.db, "TARGET_INFO_CUDA_DEVICE"):
        for gid, cid, pid in rep.db.execute("SELECT gpuId, cudaId, pid FROM TARGET_INFO_CUDA_DEVICE"):
            cuda_map[(pid, cid)] = gid
    by_cu = {v.get("cuDevice"): k for k, v in gpus.items() if "cuDevice" in v}
    for pid, r in rank_of.items():
        info = b.rank(r)
        for d in sorted(proc_dev.get(pid, ())):
            gid = cuda_map.get((pid, d), by_cu.get(d, d))
            g = gpus.get(gid)
            if g is not None:
                props = dict(g)
                if "totalMemory" in props:
                    props["totalGlobalMem"] = props["totalMemory"]
                props["gpuId"] = gid
                info.device_props[d] = props


def _props(pairs) -> dict:
    """Device properties of the types an export writes (text names, numeric sizes); others dropped."""
    text = ("name", "busLocation", "chipName", "uuid")
    return {k: v for k, v in pairs if (type(v) is str) == (k in text) and type(v) in (str, int, float)}


def _memory(rep, b, rank_of) -> None:
    t = "CUDA_GPU_MEMORY_USAGE_EVENTS"
    if t not in rep.tables:
        return
    have = columns(rep.db, t)
    if not {"start", "bytes", "memoryOperationType", "globalPid", "deviceId"} <= have:
        return
    a = rep.fetch_sql(t, f"SELECT start, globalPid, deviceId, bytes, memoryOperationType FROM {t} ORDER BY start",
                  5, required=(0, 1, 2, 3), times=(0, None))
    a[:, 1] = (a[:, 1] >> 24) & 0xFFFFFF
    for p, d in set(zip(a[:, 1].tolist(), a[:, 2].tolist())):
        if p not in rank_of:
            continue
        m = (a[:, 1] == p) & (a[:, 2] == d)
        sign = np.where(a[m, 4] == 1, -1, 1)  # 0 alloc, 1 free
        v = np.cumsum(sign * a[m, 3]).astype(np.float64)
        b.counters.append(Counter(rank_of[p], d, "allocated", a[m, 0] + rep.utc_ns, v))


def load_nsys(files: list[str], *, progress=None, cancelled=None) -> Trace:
    b = TraceBuilder("nsys")
    per_file = []
    empty: list[str] = []
    for i, f in enumerate(files):
        if cancelled and cancelled():
            raise Cancelled()
        base = max(b.ranks) + 1 if b.ranks else 0
        before = (len(b._chunks), len(b._inst), len(b.counters))  # b.add skips empty chunks
        per_file.append(read_report(b, f, i, base, progress, cancelled))
        if (len(b._chunks), len(b._inst), len(b.counters)) == before:
            empty.append(f)
    # An empty capture (profiling stopped before anything ran, or every activity table empty)
    # is refused rather than shown as a blank window; in a session it is named and skipped.
    if empty and len(empty) == len(files):
        raise TraceError(", ".join(empty), "the export holds no events (no GPU or CPU activity was "
                                           "recorded in it)")
    for f in empty:
        b.warnings.append(f"{os.path.basename(f)}: the export holds no events")
    if progress:
        progress(0.9, "sorting and nesting events")
    trace = b.finish()
    trace.metadata["files"] = [os.path.abspath(f) for f in files]
    trace.metadata["per_file"] = [{"path": os.path.abspath(f), **info} for f, info in zip(files, per_file)]
    return trace


def row_args(path: str, cat: int, rowid: int) -> dict:
    """Every column of the event's row, ids resolved to strings and enums to labels."""
    table = TABLE_OF_CAT.get(Cat(cat))
    if cat == Cat.KERNEL and rowid >= GRAPH_ROW:
        table, rowid = GRAPH_TRACE, rowid - GRAPH_ROW
    if table is None:
        return {}
    db = connect(path)
    try:
        if table not in tables(db):
            return {}
        columns(db, table)  # refuses computed columns before SELECT * would run them
        cur = db.execute(f"SELECT * FROM {table} WHERE rowid = ?", (rowid,))
        row = cur.fetchone()
        if row is None:
            return {}
        cols = [d[0] for d in cur.description]
        out: dict[str, Any] = {}
        for k, v in zip(cols, row):
            if v is None:
                continue
            if k in ("shortName", "demangledName", "mangledName", "nameId", "textId") and isinstance(v, int):
                s = db.execute("SELECT value FROM StringIds WHERE id = ?", (v,)).fetchone()
                v = s[0] if s else v
            elif k == "copyKind":
                v = COPY_KIND.get(v, v)
            elif k in ("srcKind", "dstKind", "memKind"):
                v = MEM_KIND.get(v, v)
            elif k == "syncType":
                v = SYNC_TYPE.get(v, v)
            elif k in ("globalTid", "globalPid") and type(v) is int:
                out["pid"] = (v >> 24) & 0xFFFFFF
                if k == "globalTid":
                    out["tid"] = v & 0xFFFFFF
                continue
            out[k] = v
        if all(type(out.get(k)) is int for k in ("bytes", "start", "end")) and out["end"] > out["start"]:
            out["bandwidth GB/s"] = round(out["bytes"] / (out["end"] - out["start"]), 3)
        return out
    except sqlite3.DatabaseError as e:
        raise sq.explain(db, path, e) from None
    finally:
        db.close()
