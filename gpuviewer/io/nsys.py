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
import sqlite3
from collections.abc import Callable

import numpy as np

from ..model.build import TraceBuilder, mark_comm_lanes, nccl_name_ids
from ..model.categories import Cat, LaneKind
from ..model.trace import Counter, Source, Trace
from . import sqlite_safe as sq
from .errors import Cancelled, TraceError
from .factorize import factorize
from .nsys_host import NameLUT, graph_events, graph_fetch, host_fetch, osrt, osrt_fetch, runtime_calls, thread_labels
from .nsys_nvtx import fetch_nvtx, nvtx_pids, read_nvtx
from .nsys_report import (
    COPY_KIND,
    GRAPH_ROW,
    GRAPH_TRACE,
    MEM_KIND,
    SYNC_TYPE,
    Report,
    capture_losses,
    col,
    columns,
    rank_in_environment,
)

_BAD_VALUES = (TypeError, ValueError, OverflowError, KeyError, IndexError, AttributeError)


def _copy_code(have: set[str]) -> str:
    """copyKind, srcKind and dstKind in one number (copy_name reads it back): a copy named as
    PyTorch's profiler names it, "Memcpy HtoD (Pinned -> Device)", where the export has the kinds."""
    kinds = (
        f" * 256 + {col(have, 'srcKind', default='15')} * 16 + {col(have, 'dstKind', default='15')}"
        if {"srcKind", "dstKind"} <= have
        else " * 256 + 255"
    )
    return col(have, "copyKind", default="0") + kinds


def copy_name(code: int) -> str | None:
    copy, src, dst = code >> 8, (code >> 4) & 15, code & 15
    what = COPY_KIND.get(copy)
    if what is None:
        return None
    if src in MEM_KIND and dst in MEM_KIND:
        return f"Memcpy {what} ({MEM_KIND[src]} -> {MEM_KIND[dst]})"
    return f"Memcpy {what}"


def _gpu_table(
    rep: Report, table: str, cat: Cat, name_sql: str | Callable[[set[str]], str] | None, extra: tuple[str, ...] = ()
) -> dict | None:
    """The GPU activity of a table as columns; `extra`: integer columns also taken (0 where the
    export has none)."""
    if table not in rep.tables:
        return None
    have = columns(rep.db, table)
    if not {"start", "end"} <= have:
        return None
    # The raw globalPid, split here: SQL would turn text into pid 0, a process that is not there.
    pid = "globalPid" if "globalPid" in have else "-1"
    name = name_sql(have) if callable(name_sql) else (name_sql or "-1")
    exprs = [
        "rowid",
        "start",
        "end",
        col(have, "deviceId"),
        col(have, "streamId"),
        col(have, "correlationId", default="0"),
        pid,
        name,
        *(col(have, c, default="0") for c in extra),
    ]
    a = rep.fetch(table, exprs, required=(0, 1, 2, 6) if pid != "-1" else (0, 1, 2))
    p = (a[:, 6] >> 24) & 0xFFFFFF if pid != "-1" else a[:, 6]
    return {
        "rowid": a[:, 0],
        "start": a[:, 1],
        "end": a[:, 2],
        "device": a[:, 3],
        "stream": a[:, 4],
        "corr": a[:, 5],
        "pid": p,
        "name": a[:, 7],
        "cat": cat,
        **{c: a[:, 8 + k] for k, c in enumerate(extra)},
    }


GROWTH_KEPT = 64  # growths kept a rank and device: each is a one-time cost, a few in a capture


def local_memory_growth(t: dict | None, rank_of: dict[int, int]) -> dict:
    """{rank: {correlation id: [bytes before, bytes after]}} of the kernels whose local memory
    (the export's localMemoryTotal, for the whole device) exceeds that of every kernel before them
    on their process and device: their launch grew it, which the driver does while the launch
    call waits (extra-p's ex-gpu: vector_dot's 3 ms first launch, 127 MB -> 1.9 GB)."""
    out: dict = {}
    if t is None or not len(t["start"]):
        return out
    lm = t["localMemoryTotal"].astype(np.int64)
    for p, d in sorted(set(zip(t["pid"].tolist(), t["device"].tolist()))):
        if p not in rank_of:
            continue
        at = np.flatnonzero((t["pid"] == p) & (t["device"] == d))
        at = at[np.argsort(t["start"][at], kind="stable")]
        v = lm[at]
        top = np.maximum.accumulate(v)
        grew = np.flatnonzero(v[1:] > top[:-1])[:GROWTH_KEPT] + 1  # (the first kernel: nothing to compare)
        for g in grew.tolist():
            out.setdefault(str(rank_of[p]), {})[str(int(t["corr"][at[g]]))] = [int(top[g - 1]), int(v[g])]
    return out


def _graph_table(rep: Report) -> dict | None:
    """Whole CUDA graph launches on the GPU (nsys --cuda-graph-trace=graph), named by graphId."""
    t = _gpu_table(rep, GRAPH_TRACE, Cat.KERNEL, lambda h: col(h, "graphId"))
    if t is not None:
        t["graph"] = True
        keep = t["rowid"] < GRAPH_ROW
        if not keep.all():
            t = {k: (v[keep] if isinstance(v, np.ndarray) else v) for k, v in t.items()}
        if len(t["start"]):
            rep.notes.append(
                f"{len(t['start']):,} CUDA graph launches traced as whole graphs (nsys "
                "--cuda-graph-trace=graph): each is one GPU range 'CUDA graph N'; record "
                "with --cuda-graph-trace=node to see their kernels"
            )
    return t


def _kernel_name(have):
    for c in ("shortName", "demangledName", "mangledName", "name"):
        if c in have:
            return f"coalesce({c}, -1)"
    return "-1"


def read_report(
    b: TraceBuilder,
    path: str,
    file_index: int,
    rank_base: int,
    progress: Callable[[float, str], None] | None = None,
    cancelled=None,
) -> dict:
    rep = Report(path, cancelled)
    db = rep.db
    strings = rep.strings
    warnings: list[str] = []
    try:
        # The large host tables are read by workers while this thread reads the GPU tables (the
        # first needed first); each is waited for where it is used.
        runtime_rows = host_fetch(rep, "CUPTI_ACTIVITY_KIND_RUNTIME", ["correlationId", "nameId", "eventClass"])
        nvtx_rows = fetch_nvtx(rep)
        osrt_rows = osrt_fetch(rep)
        graph_rows = graph_fetch(rep)
        gpu = [
            t
            for t in (
                _gpu_table(rep, "CUPTI_ACTIVITY_KIND_KERNEL", Cat.KERNEL, _kernel_name, ("localMemoryTotal",)),
                _gpu_table(rep, "CUPTI_ACTIVITY_KIND_MEMCPY", Cat.MEMCPY, _copy_code),
                _gpu_table(rep, "CUPTI_ACTIVITY_KIND_MEMSET", Cat.MEMSET, "-1"),
                _gpu_table(
                    rep, "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION", Cat.SYNC, lambda h: col(h, "syncType", default="0")
                ),
                _graph_table(rep),
            )
            if t is not None and len(t["start"])
        ]
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
        runtime = runtime_rows() if runtime_rows else None
        nvtx = nvtx_rows()
        host_pids = set(nvtx_pids(nvtx).tolist())
        if runtime is not None:
            host_pids |= set(factorize(runtime[:, 3])[0].tolist())
        if not procs:
            procs = sorted(host_pids)
        rank_of = {p: rank_base + i for i, p in enumerate(procs)}
        env_rank = rank_in_environment(rep)
        if env_rank is not None and len(procs) == 1 and env_rank not in b.ranks:
            rank_of = {procs[0]: env_rank}  # one rank per report: the launcher's RANK wins
        dropped = sorted(set(host_pids) - set(rank_of))
        names_lut = NameLUT(b, strings)

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
                name = np.array(
                    [b.names.id(f"CUDA graph {g}" if g >= 0 else "CUDA graph") for g in t["name"].tolist()], np.int32
                )
                cats = np.full(len(name), Cat.KERNEL, np.uint8)
            elif cat == Cat.KERNEL:
                name = names_lut.ids(t["name"])
                cats = np.full(len(name), Cat.KERNEL, np.uint8)
                cats[np.isin(name, nccl_name_ids(b.names.strings))] = Cat.COMM_KERNEL
            else:
                labels: dict[int, int]
                if cat == Cat.MEMCPY:
                    labels = {}
                    fallback = b.names.id("Memcpy")
                elif cat == Cat.MEMSET:
                    labels, fallback = {}, b.names.id("Memset")
                else:
                    labels = {k: b.names.id(v) for k, v in SYNC_TYPE.items()}
                    fallback = b.names.id("Synchronization")
                codes, _, inv = factorize(t["name"])  # the labels are interned: a lookup per distinct code
                if cat == Cat.MEMCPY:
                    labels = {k: b.names.id(cn) for k in codes.tolist() if (cn := copy_name(k))}
                name = np.array([labels.get(k, fallback) for k in codes.tolist()], np.int32)[inv]
                cats = np.full(len(name), cat, np.uint8)
            lane = np.empty(len(name), np.int32)
            for p, d, s in set(zip(t["pid"].tolist(), t["device"].tolist(), t["stream"].tolist())):
                m = (t["pid"] == p) & (t["device"] == d) & (t["stream"] == s)
                label = "context sync" if s == 0xFFFFFFFF else f"stream {s}"
                lane[m] = b.lane(rank_of[p], LaneKind.GPU, d, s, label, pid=p, source=file_index)
            b.add(
                start=t["start"] + rep.utc_ns,
                dur=t["end"] - t["start"],
                lane=lane,
                name=name,
                cat=cats,
                corr=np.clip(t["corr"], 0, 0xFFFFFFFF),
                src=t["rowid"] | GRAPH_ROW if t.get("graph") else t["rowid"],
            )
        mark_comm_lanes(b.lanes, b._chunks, source=file_index)

        # -- host lanes: CUDA API, NVTX, OS runtime --------------------------------------------
        if progress:
            progress(0.5, f"{os.path.basename(path)}: CUDA API ({b.n_events:,} events so far)")
        runtime_calls(rep, b, rank_of, names_lut, file_index, runtime)
        del runtime
        graph_events(rep, b, rank_of, strings, file_index, graph_rows() if graph_rows else None)
        if progress:
            progress(0.65, f"{os.path.basename(path)}: NVTX ({b.n_events:,} events so far)")
        read_nvtx(rep, b, rank_of, file_index, warnings, nvtx)
        del nvtx
        if progress:
            progress(0.8, f"{os.path.basename(path)}: OS runtime ({b.n_events:,} events so far)")
        osrt(rep, b, rank_of, names_lut, file_index, osrt_rows() if osrt_rows else None)
        thread_labels(rep, b, file_index)
        _devices(rep, b, rank_of, proc_dev)
        _memory(rep, b, rank_of)
        for p, r in rank_of.items():
            info = b.rank(r)
            info.files.append(os.path.abspath(path))
        if dropped:
            warnings.append(
                f"{len(dropped)} process{'es' if len(dropped) != 1 else ''} without GPU work "
                f"{'are' if len(dropped) != 1 else 'is'} not shown as {'ranks' if len(dropped) != 1 else 'a rank'}"
            )
        for table, n in rep.bad_rows.items():
            warnings.append(
                f"{n:,} row{'s' * (n != 1)} of {table} skipped: a time or id that is "
                "missing, not an integer, out of range, or an end earlier than its start"
            )
        lost, caveats = capture_losses(rep)
        if lost:
            warnings.append("Nsight Systems says the capture may have lost events: " + "; ".join(lost))
        if caveats:
            warnings.append("Nsight Systems notes: " + "; ".join(caveats))
        for w in warnings + rep.notes + db.warnings:
            b.warnings.append(f"{os.path.basename(path)}: {w}")
        st = os.stat(path)
        b.sources.append(Source(path=os.path.abspath(path), format="nsys", size=st.st_size, mtime_ns=st.st_mtime_ns))
        growth = local_memory_growth(next((t for t in gpu if "localMemoryTotal" in t), None), rank_of)
        return {
            "ranks": len(rank_of),
            "utc_ns": rep.utc_ns,
            "version": rep.version(),
            "pids": {str(p): r for p, r in rank_of.items()},
            **({"local_memory_growth": growth} if growth else {}),
        }
    except sqlite3.DatabaseError as e:
        raise sq.explain(db, path, e) from None
    except _BAD_VALUES as e:  # a value of a type no export has: one line, not Python's words
        raise TraceError(
            path,
            "the export holds values of a type or size Nsight Systems does not "
            "write; it is damaged or was made by another program",
        ) from e
    finally:
        rep.close()


def _devices(rep, b, rank_of, proc_dev) -> None:
    gpus = {}
    if "TARGET_INFO_GPU" in rep.tables:
        have = columns(rep.db, "TARGET_INFO_GPU")
        idcol = "id" if "id" in have else ("deviceId" if "deviceId" in have else None)
        fields = [
            c
            for c in (
                "name",
                "busLocation",
                "totalMemory",
                "smCount",
                "chipName",
                "uuid",
                "memoryBandwidth",
                "clockRate",
                "cuDevice",
                "computeMajor",
                "computeMinor",
            )
            if c in have
        ]
        if idcol:
            for row in rep.db.execute(f"SELECT {idcol}, {', '.join(fields) or 'NULL'} FROM TARGET_INFO_GPU"):
                gpus[row[0]] = _props(zip(fields, row[1:]))
    old = ("deviceId", "name", "pciBusId", "globalMemorySize", "numMultiprocessors")  # 2021 exports
    if not gpus and "TARGET_INFO_CUDA_GPU" in rep.tables and set(old) <= columns(rep.db, "TARGET_INFO_CUDA_GPU"):
        for row in rep.db.execute(f"SELECT {', '.join(old)} FROM TARGET_INFO_CUDA_GPU"):
            gpus[row[0]] = _props(zip(("name", "busLocation", "totalMemory", "smCount"), row[1:]))
    # (pid, cudaId) -> gpuId (2025.1+); before that the CUDA ordinal is cuDevice.
    cuda_map = {}
    if "TARGET_INFO_CUDA_DEVICE" in rep.tables and {"gpuId", "cudaId", "pid"} <= columns(
        rep.db, "TARGET_INFO_CUDA_DEVICE"
    ):
        for gid, cid, pid in rep.db.execute("SELECT gpuId, cudaId, pid FROM TARGET_INFO_CUDA_DEVICE"):
            cuda_map[(pid, cid)] = gid
    # the CUDA ordinal -> the GPU: an export may list other adapters with the same cuDevice and
    # nothing else known (a laptop's "Intel(R) HD Graphics 630", "Microsoft Basic Render Driver"
    # beside its GeForce): the row with the most properties recorded is the CUDA device
    by_cu: dict = {}
    for k, v in gpus.items():
        if "cuDevice" in v and (v["cuDevice"] not in by_cu or len(v) > len(gpus[by_cu[v["cuDevice"]]])):
            by_cu[v["cuDevice"]] = k
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
    a = rep.fetch_sql(
        t,
        f"SELECT start, globalPid, deviceId, bytes, memoryOperationType FROM {t} ORDER BY start",
        5,
        required=(0, 1, 2, 3),
        times=(0, None),
    )
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
        raise TraceError(", ".join(empty), "the export holds no events (no GPU or CPU activity was recorded in it)")
    for f in empty:
        b.warnings.append(f"{os.path.basename(f)}: the export holds no events")
    if progress:
        progress(0.9, "sorting and nesting events")
    trace = b.finish()
    trace.metadata["files"] = [os.path.abspath(f) for f in files]
    trace.metadata["per_file"] = [{"path": os.path.abspath(f), **info} for f, info in zip(files, per_file)]
    return trace
