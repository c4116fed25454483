"""One Nsight Systems SQLite export opened for reading (io/nsys.py reads its events): the tables
the reader may query, its StringIds, the capture's start on the Unix clock, typed fetches that
count the rows they skip, the launcher's RANK if captured, and the whole row of one event for
Details. The file is opened through sqlite_safe: read-only, immutable, bounded, only real tables;
nothing is written to it or beside it.
"""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any

import numpy as np

from ..model.categories import Cat
from . import sqlite_safe as sq
from .errors import TraceError
from .sqlite_pool import QueryPool

NSYS_MARKER_TABLES = (
    "StringIds",
    "TARGET_INFO_GPU",
    "CUPTI_ACTIVITY_KIND_KERNEL",
    "NVTX_EVENTS",
    "CUPTI_ACTIVITY_KIND_RUNTIME",
    "TARGET_INFO_SESSION_START_TIME",
    "ThreadNames",
    "EXPORT_META_DATA",
    "META_DATA_EXPORT",
    "ANALYSIS_DETAILS",
)
TABLE_OF_CAT = {
    Cat.KERNEL: "CUPTI_ACTIVITY_KIND_KERNEL",
    Cat.COMM_KERNEL: "CUPTI_ACTIVITY_KIND_KERNEL",
    Cat.MEMCPY: "CUPTI_ACTIVITY_KIND_MEMCPY",
    Cat.MEMSET: "CUPTI_ACTIVITY_KIND_MEMSET",
    Cat.CUDA_RUNTIME: "CUPTI_ACTIVITY_KIND_RUNTIME",
    Cat.CUDA_DRIVER: "CUPTI_ACTIVITY_KIND_RUNTIME",
    Cat.SYNC: "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION",
    Cat.NVTX: "NVTX_EVENTS",
    Cat.OSRT: "OSRT_API",
}
# CUPTI enum labels, built in: 2022 exports have no ENUM_* tables.
COPY_KIND = {
    0: "Unknown",
    1: "HtoD",
    2: "DtoH",
    3: "HtoA",
    4: "AtoH",
    5: "AtoA",
    6: "AtoD",
    7: "DtoA",
    8: "DtoD",
    9: "HtoH",
    10: "PtoP",
    11: "HtoD (UVM)",
    12: "DtoH (UVM)",
    13: "DtoD (UVM)",
}
MEM_KIND = {
    0: "Pageable",
    1: "Pinned",
    2: "Device",
    3: "Array",
    4: "Managed",
    5: "Device Static",
    6: "Managed Static",
    7: "Unknown",
}
SYNC_TYPE = {0: "Unknown", 1: "Event Sync", 2: "Stream Wait Event", 3: "Stream Sync", 4: "Context Sync"}
# nsys --cuda-graph-trace=graph records each graph launch as one GPU range (no kernel rows): read
# as a kernel named for its graph; its src is the GRAPH_TRACE rowid with this bit set, so the
# details fetch that table's row (rowids of a kernel table never reach 2**31)
GRAPH_TRACE = "CUPTI_ACTIVITY_KIND_GRAPH_TRACE"
GRAPH_EVENTS = "CUDA_GRAPH_EVENTS"  # graph and graph-exec creation, on the thread that made them
GRAPH_ROW = 1 << 31
# Every table this reader queries: a view or virtual table under one of these names is refused.
READ_TABLES = (
    set(NSYS_MARKER_TABLES)
    | set(TABLE_OF_CAT.values())
    | {
        "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION",
        "TARGET_INFO_CUDA_GPU",
        "TARGET_INFO_CUDA_DEVICE",
        "CUDA_GPU_MEMORY_USAGE_EVENTS",
        "META_DATA_CAPTURE",
        "DIAGNOSTIC_EVENT",
        GRAPH_TRACE,
        GRAPH_EVENTS,
    }
)


def connect(path: str, cancelled=None) -> sq.SafeConnection:
    return sq.open_readonly(path, cancelled)


def tables(db: sq.SafeConnection) -> set[str]:
    return sq.real_tables(db, READ_TABLES)


def columns(db: sq.SafeConnection, table: str) -> set[str]:
    return sq.columns(db, table)


def col(have: set[str], *names: str, default: str = "-1") -> str:
    for n in names:
        if n in have:
            return f"coalesce({n}, {default})"
    return default


class Report:
    """One .sqlite file."""

    def __init__(self, path: str, cancelled=None) -> None:
        self.path = path
        self.db = connect(path, cancelled)
        self.bad_rows: dict[str, int] = {}  # table -> rows skipped for bad values
        self.notes: list[str] = []
        self._pool: QueryPool | None = None  # made by the first query sent to a worker
        try:
            self.tables = tables(self.db)
            self._check_nsys()
            # Ids that are not integers name nothing; values that are not text become text.
            self.strings = dict(
                self.db.execute(
                    "SELECT id, CAST(value AS TEXT) FROM StringIds WHERE typeof(id) = 'integer' AND value IS NOT NULL"
                )
            )
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
            t.startswith(("CUPTI_ACTIVITY_KIND_", "TARGET_INFO_")) for t in self.tables
        ):
            raise TraceError(
                path,
                "an SQLite database, but not an Nsight Systems export "
                "(no StringIds, TARGET_INFO_* or CUPTI_ACTIVITY_KIND_* tables)",
            )
        if "StringIds" not in self.tables:
            raise TraceError(
                path,
                "the export has no StringIds table, so no event can be named; "
                "export it again with `nsys export --type sqlite`",
            )

    def _utc_start(self) -> int:
        if "TARGET_INFO_SESSION_START_TIME" in self.tables and "utcEpochNs" in columns(
            self.db, "TARGET_INFO_SESSION_START_TIME"
        ):
            r = self.db.execute("SELECT utcEpochNs FROM TARGET_INFO_SESSION_START_TIME").fetchone()
            if r and type(r[0]) is int and 0 <= r[0] < sq.TIME_LIMIT:
                return r[0]
            if r and r[0] is not None:
                self.notes.append(
                    "the session start time (utcEpochNs) is not a valid number: times are shown from the capture start"
                )
        return 0

    def version(self) -> dict:
        for t in ("META_DATA_EXPORT", "EXPORT_META_DATA"):
            if t in self.tables:
                rows = dict(self.db.execute(f"SELECT name, value FROM {t}").fetchall())
                return {k: str(rows[k]) for k in ("EXPORT_PRODUCT_VERSION", "EXPORT_SCHEMA_VERSION") if k in rows}
        return {}

    def close(self) -> None:
        """Stops the workers' queries and waits for them, then closes the file (its shared lock
        covers their connections)."""
        try:
            if self._pool is not None:
                self._pool.close()
        finally:
            self.db.close()

    def submit(self, fn: Callable[..., Any], *args: Any) -> Future:
        """fn(connection, *args) on a worker thread, started now (sqlite_pool.QueryPool)."""
        if self._pool is None:
            self._pool = QueryPool(self.db)
        return self._pool.submit(fn, *args)

    def later(
        self, table: str, exprs: list[str], required=(0, 1, 2), times=(1, 2), missing: int = -1
    ) -> Callable[[], np.ndarray]:
        """fetch() started on a worker now; the function returned waits for its rows. The rows it
        skipped are counted when that function is called, on the reading thread, so the warnings
        keep the order of the reader's steps whichever query ends first."""
        pending = [self.submit(sq.fetch_columns, table, exprs, required, times, missing)]

        def rows() -> np.ndarray:
            # handed over once: nothing here keeps the table's columns alive after the caller
            # lets them go (millions of rows)
            a, bad = pending.pop().result()
            return self._count_bad(table, a, bad)

        return rows

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


def captured_rank(path: str) -> int | None:
    """The launcher's RANK recorded in a report (None: not recorded): the rank a one-process
    report takes in a session when no earlier report took it (read_report)."""
    rep = Report(path)
    try:
        return rank_in_environment(rep)
    finally:
        rep.close()


_RANK_VARS = ("RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK", "SLURM_PROCID", "PMIX_RANK")


def rank_in_environment(rep: Report) -> int | None:
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


# what Nsight Systems' own diagnostics say when the capture lost events (CUDA events not all
# collected, CUPTI buffers full): a file with three driver calls and no kernel read as "no findings" where
# nsys itself said events were missing (lighttransport's gemm profile; an audit's finding). NVTX's
# absence is not such a loss.
# A driver newer than the nsys build is said too, as a note: its CUDA trace may then be incomplete
# (the same file: "Installed CUDA driver version (13.3) is not supported by this build"), or whole.
_LOSS = re.compile(r"might be missing|might have been collected|were lost|events? (?:were )?dropped", re.IGNORECASE)
# said apart: a caveat of the capture, not a loss (flameox's export: the driver notice alone, all
# 37 CUDA events it counted on record, was passed on as 'may have lost events'; an audit)
_CAVEAT = re.compile(r"not supported by this build", re.IGNORECASE)
_SAID = 300  # characters of one diagnostic kept


def _cut(text: str) -> str:
    """A diagnostic in one line, at most _SAID characters, cut after a sentence (else a word),
    never mid-word ('... and make sure cudaD' was printed), without its closing period."""
    text = " ".join(text.split())
    if len(text) > _SAID:
        head = text[:_SAID]
        end = head.rfind(". ")
        text = head[: end + 1] if end > _SAID // 3 else head.rsplit(" ", 1)[0] + " …"
    return text.rstrip(".")


def capture_losses(rep: Report, most: int = 3) -> tuple[list[str], list[str]]:
    """Nsight Systems' diagnostics (DIAGNOSTIC_EVENT) of events it may have lost, and its caveats
    (a driver its build does not support), first first, at most `most` of each, each cut (_cut)."""
    if "DIAGNOSTIC_EVENT" not in rep.tables:
        return [], []
    lost: list[str] = []
    caveats: list[str] = []
    try:
        for (text,) in rep.db.execute("SELECT text FROM DIAGNOSTIC_EVENT ORDER BY timestamp"):
            if not isinstance(text, str) or "NVTX" in text:
                continue
            into = lost if _LOSS.search(text) else caveats if _CAVEAT.search(text) else None
            if into is not None and len(into) < most:
                into.append(_cut(text))
    except sqlite3.Error:
        return [], []
    return lost, caveats


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
