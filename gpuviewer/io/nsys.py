"""Nsight Systems SQLite exports (schemas 2021-2026) -> Trace.

Facts: formats.md section A. Every table and non-core column is optional (lazy exports, drifting
columns); SELECTs are built from what PRAGMA table_info reports. Times are ns since the capture
started; TARGET_INFO_SESSION_START_TIME.utcEpochNs anchors them to Unix time so several
reports share one axis. The file is opened read-only (URI mode=ro) and nothing is written to it.
The captured environment (META_DATA_CAPTURE, TARGET_INFO_SYSTEM_ENV) is never read here.
"""
from __future__ import annotations

import os
import re
import sqlite3
from typing import Callable

import numpy as np

from ..model.build import TraceBuilder, mark_comm_lanes, nccl_name_ids
from ..model.categories import Cat, LaneKind
from ..model.trace import Counter, Source, Step, Trace
from .errors import TraceError

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
NVTX_RANGES = (59, 60, 70, 71)  # push/pop and start/end ranges (and their NVTXt twins)
NVTX_MARK = 34
NVTX_DOMAIN_CREATE = 75
_STEP = re.compile(r"^(?:step[ _#]?|ProfilerStep#)(\d+)$", re.IGNORECASE)
_VERSION_SUFFIX = re.compile(r"_v\d+$")


def connect(path: str) -> sqlite3.Connection:
    try:
        from urllib.parse import quote
        db = sqlite3.connect(f"file:{quote(os.path.abspath(path))}?mode=ro", uri=True)
        db.execute("PRAGMA query_only = 1")
        # Strings written by other tools are not always UTF-8 (a Latin-1 author name in the
        # Extra-P samples): show a replacement character rather than refuse the file.
        db.text_factory = lambda b: b.decode("utf-8", "replace")
        return db
    except sqlite3.Error as e:
        raise TraceError(path, f"cannot open the SQLite database ({e})") from None


def tables(db: sqlite3.Connection) -> set[str]:
    return {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type IN ('table','view')")}


def columns(db: sqlite3.Connection, table: str) -> set[str]:
    return {r[1] for r in db.execute(f"PRAGMA table_info({table})")}


def _col(have: set[str], *names: str, default: str = "-1") -> str:
    for n in names:
        if n in have:
            return f"coalesce({n}, {default})"
    return default


def _fetch_int(db, sql: str, ncols: int) -> np.ndarray:
    rows = db.execute(sql).fetchall()
    if not rows:
        return np.zeros((0, ncols), np.int64)
    return np.array(rows, dtype=np.int64).reshape(len(rows), ncols)


class _Report:
    """One .sqlite file."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.db = connect(path)
        try:
            self.tables = tables(self.db)
        except sqlite3.DatabaseError as e:
            raise TraceError(path, f"the export is damaged or cut short (sqlite: {e})") from None
        if not (self.tables & set(NSYS_MARKER_TABLES)) and not any(
                t.startswith(("CUPTI_ACTIVITY_KIND_", "TARGET_INFO_")) for t in self.tables):
            raise TraceError(path, "an SQLite database, but not an Nsight Systems export "
                                   "(no StringIds, TARGET_INFO_* or CUPTI_ACTIVITY_KIND_* tables)")
        if "StringIds" not in self.tables:
            raise TraceError(path, "the export has no StringIds table, so no event can be named; "
                                   "export it again with `nsys export --type sqlite`")
        try:
            self.strings = dict(self.db.execute("SELECT id, value FROM StringIds"))
        except sqlite3.DatabaseError as e:
            raise TraceError(path, f"the export is damaged or cut short (sqlite: {e})") from None
        self.utc_ns = self._utc_start()

    def _utc_start(self) -> int:
        if "TARGET_INFO_SESSION_START_TIME" in self.tables and \
                "utcEpochNs" in columns(self.db, "TARGET_INFO_SESSION_START_TIME"):
            r = self.db.execute("SELECT utcEpochNs FROM TARGET_INFO_SESSION_START_TIME").fetchone()
            if r and r[0]:
                return int(r[0])
        return 0

    def version(self) -> dict:
        for t in ("META_DATA_EXPORT", "EXPORT_META_DATA"):
            if t in self.tables:
                rows = dict(self.db.execute(f"SELECT name, value FROM {t}").fetchall())
                return {k: rows[k] for k in ("EXPORT_PRODUCT_VERSION", "EXPORT_SCHEMA_VERSION")
                        if k in rows}
        return {}


def _gpu_table(rep: _Report, table: str, cat: Cat, name_sql: str | None) -> dict | None:
    if table not in rep.tables:
        return None
    have = columns(rep.db, table)
    if not {"start", "end"} <= have:
        return None
    pid = "(globalPid >> 24) & 16777215" if "globalPid" in have else "-1"
    name = name_sql(have) if callable(name_sql) else (name_sql or "-1")
    sql = (f"SELECT rowid, start, end, {_col(have, 'deviceId')}, {_col(have, 'streamId')}, "
           f"{_col(have, 'correlationId', default='0')}, {pid}, {name} FROM {table}")
    a = _fetch_int(rep.db, sql, 8)
    return {"rowid": a[:, 0], "start": a[:, 1], "end": a[:, 2], "device": a[:, 3], "stream": a[:, 4],
            "corr": a[:, 5], "pid": a[:, 6], "name": a[:, 7], "cat": cat}


def _kernel_name(have):
    for c in ("shortName", "demangledName", "mangledName", "name"):
        if c in have:
            return f"coalesce({c}, -1)"
    return "-1"


def read_report(b: TraceBuilder, path: str, file_index: int, rank_base: int,
                progress: Callable[[float, str], None] | None = None) -> dict:
    rep = _Report(path)
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
        ) if t is not None and len(t["start"])]
        if progress:
            progress(0.3, f"{os.path.basename(path)}: GPU activity")
        # Ranks: processes that own GPU work, in device order.
        proc_dev: dict[int, set[int]] = {}
        for t in gpu:
            if t["cat"] == Cat.SYNC:
                continue
            for p, d in set(zip(t["pid"].tolist(), t["device"].tolist())):
                proc_dev.setdefault(p, set()).add(d)
        procs = sorted(proc_dev, key=lambda p: (min(proc_dev[p]), p))
        host_pids = _host_pids(rep)
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
            if cat == Cat.KERNEL:
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
                  cat=cats, corr=np.clip(t["corr"], 0, 0xFFFFFFFF), src=t["rowid"])
        mark_comm_lanes(b.lanes, b._chunks, source=file_index)

        # -- host lanes: CUDA API, NVTX, OS runtime --------------------------------------------
        if progress:
            progress(0.5, f"{os.path.basename(path)}: CUDA API")
        _runtime(rep, b, rank_of, names_lut, file_index)
        if progress:
            progress(0.65, f"{os.path.basename(path)}: NVTX")
        _nvtx(rep, b, rank_of, file_index, warnings)
        if progress:
            progress(0.8, f"{os.path.basename(path)}: OS runtime")
        _osrt(rep, b, rank_of, names_lut, file_index)
        _thread_labels(rep, b, file_index)
        _devices(rep, b, rank_of, proc_dev)
        _memory(rep, b, rank_of)
        for p, r in rank_of.items():
            info = b.rank(r)
            info.files.append(os.path.abspath(path))
        if dropped:
            warnings.append(f"{len(dropped)} processes without GPU work are not shown as ranks")
        for w in warnings:
            b.warnings.append(f"{os.path.basename(path)}: {w}")
        st = os.stat(path)
        b.sources.append(Source(path=os.path.abspath(path), format="nsys", size=st.st_size,
                                mtime_ns=st.st_mtime_ns))
        return {"ranks": len(rank_of), "utc_ns": rep.utc_ns, "version": rep.version(),
                "pids": {str(p): r for p, r in rank_of.items()}}
    except sqlite3.DatabaseError as e:
        raise TraceError(path, f"the export is damaged or cut short (sqlite: {e})") from None
    finally:
        db.close()


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
        uniq, inv = np.unique(sid, return_inverse=True)
        out = np.empty(len(uniq), np.int32)
        for k, s in enumerate(uniq.tolist()):
            text = self.strings.get(s, f"<string {s}>") if s >= 0 else "<unnamed>"
            out[k] = self.b.names.id(transform(text) if transform else text)
        return out[inv]


def _host_pids(rep: _Report) -> set[int]:
    pids: set[int] = set()
    for t in ("CUPTI_ACTIVITY_KIND_RUNTIME", "NVTX_EVENTS"):
        if t in rep.tables and "globalTid" in columns(rep.db, t):
            pids |= {r[0] for r in rep.db.execute(
                f"SELECT DISTINCT (globalTid >> 24) & 16777215 FROM {t} WHERE globalTid IS NOT NULL")}
    return pids


def _host_rows(rep, b, rank_of, table: str, extra: list[str], kind: str, prefix: str, source: int):
    """Rows of a host-side table (rowid, start, end, pid, tid, *extra) of the ranks' processes,
    with the lane of each row's thread; None when the table is absent or empty."""
    if table not in rep.tables:
        return None
    have = columns(rep.db, table)
    if not {"start", "end", "globalTid"} <= have:
        return None
    cols = ", ".join(_col(have, c, default="0" if c in ("correlationId", "eventClass") else "-1") for c in extra)
    a = _fetch_int(rep.db, f"SELECT rowid, start, end, (globalTid >> 24) & 16777215, globalTid & 16777215, "
                           f"{cols} FROM {table}", 5 + len(extra))
    if not len(a):
        return None
    lane = np.full(len(a), -1, np.int32)
    pid, tid = a[:, 3], a[:, 4]
    for p, t in set(zip(pid.tolist(), tid.tolist())):
        if p in rank_of:
            lane[(pid == p) & (tid == t)] = b.lane(rank_of[p], kind, -1, t, f"{prefix} · thread {t}", pid=p,
                                                   source=source)
    keep = lane >= 0
    return a[keep], lane[keep]


def _runtime(rep, b, rank_of, names_lut, source) -> None:
    got = _host_rows(rep, b, rank_of, "CUPTI_ACTIVITY_KIND_RUNTIME", ["correlationId", "nameId", "eventClass"],
                     LaneKind.CUDA_API, "CUDA API", source)
    if got is None:
        return
    a, lane = got
    # Names carry a CUPTI version suffix (cudaLaunchKernel_v7000): shown without it.
    name = names_lut.ids(a[:, 6], lambda s: _VERSION_SUFFIX.sub("", s))
    cat = np.where(a[:, 7] == 1, Cat.CUDA_DRIVER, Cat.CUDA_RUNTIME).astype(np.uint8)
    b.add(start=a[:, 1] + rep.utc_ns, dur=a[:, 2] - a[:, 1], lane=lane, name=name, cat=cat,
          corr=np.clip(a[:, 5], 0, 0xFFFFFFFF), src=a[:, 0])


def _short_nvtx(s: str) -> str:
    """PyTorch emit_nvtx names ("aten::add, seq = 3, op_id = 7, sizes = [...]") are grouped by
    the op; the rest stays in the row's arguments."""
    cut = s.find(", ")
    if cut > 0 and ("op_id =" in s or "seq =" in s or "sizes =" in s):
        return s[:cut]
    return s


def _nvtx(rep, b, rank_of, source, warnings) -> None:
    t = "NVTX_EVENTS"
    if t not in rep.tables:
        return
    have = columns(rep.db, t)
    if not {"start", "eventType", "globalTid"} <= have:
        return
    text = "text" if "text" in have else "NULL"
    text_id = "textId" if "textId" in have else "NULL"
    end = "end" if "end" in have else "NULL"
    dom = "domainId" if "domainId" in have else "0"
    rows = rep.db.execute(
        f"SELECT rowid, start, {end}, eventType, globalTid, {text}, {text_id}, {dom} FROM {t}").fetchall()
    if not rows:
        return
    session_end = max((r[2] or r[1]) for r in rows)
    domains = {}
    for r in rows:
        if r[3] == NVTX_DOMAIN_CREATE:
            name = r[5] if r[5] is not None else rep.strings.get(r[6])
            if name:
                domains[(r[4] >> 24 & 0xFFFFFF, r[7])] = name
    names_cache: dict = {}
    rowid, start, dur, lane_l, name_l, is_mark = [], [], [], [], [], []
    lane_ids: dict = {}
    open_ended = 0
    for r in rows:
        et = r[3]
        if et not in NVTX_RANGES and et != NVTX_MARK:
            continue
        g = r[4]
        if g is None:
            continue
        pid, tid = g >> 24 & 0xFFFFFF, g & 0xFFFFFF
        if pid not in rank_of:
            continue
        raw = r[5] if r[5] is not None else rep.strings.get(r[6], "")
        nid = names_cache.get(raw)
        if nid is None:
            nid = names_cache[raw] = b.names.id(_short_nvtx(raw or ""))
        key = (pid, tid, r[7])
        ln = lane_ids.get(key)
        if ln is None:
            dname = domains.get((pid, r[7]))
            label = f"NVTX{' ' + dname if dname else ''} · thread {tid}"
            ln = lane_ids[key] = b.lane(rank_of[pid], LaneKind.NVTX, -1, tid * 1000 + r[7] if r[7] else tid,
                                        label, pid=pid, source=source)
        e = r[2]
        if e is None and et != NVTX_MARK:
            e = session_end
            open_ended += 1
        rowid.append(r[0])
        start.append(r[1])
        dur.append(0 if e is None else e - r[1])
        lane_l.append(ln)
        name_l.append(nid)
        is_mark.append(et == NVTX_MARK)
    if open_ended:
        warnings.append(f"{open_ended} NVTX ranges without an end (closed at the end of the capture)")
    if not rowid:
        return
    mark = np.array(is_mark, bool)
    start_a = np.array(start, np.int64) + rep.utc_ns
    lane_a = np.array(lane_l, np.int32)
    name_a = np.array(name_l, np.int32)
    rng = ~mark
    b.add(start=start_a[rng], dur=np.array(dur, np.int64)[rng], lane=lane_a[rng], name=name_a[rng],
          cat=np.full(int(rng.sum()), Cat.NVTX, np.uint8), src=np.array(rowid, np.int64)[rng])
    if mark.any():
        b.add_instants(start_a[mark], lane_a[mark], name_a[mark])
    # Steps: NVTX ranges "step N" (or ProfilerStep#N), per rank.
    lane_rank = {ln: b.lanes[ln].rank for ln in set(lane_l)}
    seen = set()
    for s, d, ln, n in zip(start_a[rng].tolist(), np.array(dur)[rng].tolist(), lane_a[rng].tolist(),
                           name_a[rng].tolist()):
        m = _STEP.match(b.names.strings[n])
        if m:
            key = (lane_rank[ln], int(m.group(1)))
            if key not in seen:
                seen.add(key)
                b.steps.append(Step(key[0], key[1], s, s + d))


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
    for nid, g in rep.db.execute("SELECT nameId, globalTid FROM ThreadNames"):
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
                gpus[row[0]] = {k: v for k, v in zip(fields, row[1:]) if v is not None}
    if not gpus and "TARGET_INFO_CUDA_GPU" in rep.tables:  # 2021 exports
        for row in rep.db.execute("SELECT deviceId, name, pciBusId, globalMemorySize, numMultiprocessors "
                                  "FROM TARGET_INFO_CUDA_GPU"):
            gpus[row[0]] = {"name": row[1], "busLocation": row[2], "totalMemory": row[3], "smCount": row[4]}
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


def _memory(rep, b, rank_of) -> None:
    t = "CUDA_GPU_MEMORY_USAGE_EVENTS"
    if t not in rep.tables:
        return
    have = columns(rep.db, t)
    if not {"start", "bytes", "memoryOperationType", "globalPid", "deviceId"} <= have:
        return
    a = _fetch_int(rep.db, f"SELECT start, (globalPid >> 24) & 16777215, deviceId, bytes, memoryOperationType "
                           f"FROM {t} ORDER BY start", 5)
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
    for i, f in enumerate(files):
        if cancelled and cancelled():
            from .errors import Cancelled
            raise Cancelled()
        base = max(b.ranks) + 1 if b.ranks else 0
        per_file.append(read_report(b, f, i, base, progress))
    if progress:
        progress(0.9, "sorting and nesting events")
    trace = b.finish()
    trace.metadata["files"] = [os.path.abspath(f) for f in files]
    trace.metadata["per_file"] = [{"path": os.path.abspath(f), **info} for f, info in zip(files, per_file)]
    return trace


def row_args(path: str, cat: int, rowid: int) -> dict:
    """Every column of the event's row, ids resolved to strings and enums to labels."""
    table = TABLE_OF_CAT.get(Cat(cat))
    if table is None:
        return {}
    db = connect(path)
    try:
        cur = db.execute(f"SELECT * FROM {table} WHERE rowid = ?", (rowid,))
        row = cur.fetchone()
        if row is None:
            return {}
        cols = [d[0] for d in cur.description]
        out = {}
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
            elif k in ("globalTid", "globalPid"):
                out["pid"] = (v >> 24) & 0xFFFFFF
                if k == "globalTid":
                    out["tid"] = v & 0xFFFFFF
                continue
            out[k] = v
        if "bytes" in out and "start" in out and "end" in out and out["end"] > out["start"]:
            out["bandwidth GB/s"] = round(out["bytes"] / (out["end"] - out["start"]), 3)
        return out
    finally:
        db.close()
