"""Bytes moved by memory copies and sets, which the store does not keep: from the export's
MEMCPY/MEMSET tables (nsys: the event's src is its rowid) or the events' "bytes" argument
(PyTorch profiler), fetched once per session and kept on the trace."""

from __future__ import annotations

import sqlite3
from typing import Any

import msgspec
import numpy as np

from ..model.categories import Cat
from ..model.trace import Trace
from .args_batch import ArgsSpec, kineto_args
from .errors import TraceError


class _MemArgs(msgspec.Struct):
    bytes: Any = None


_SPEC = ArgsSpec(_MemArgs)
_TABLE = {Cat.MEMCPY: "CUPTI_ACTIVITY_KIND_MEMCPY", Cat.MEMSET: "CUPTI_ACTIVITY_KIND_MEMSET"}


def memop_bytes(trace: Trace) -> tuple[np.ndarray, np.ndarray]:
    """The store's memcpy/memset rows and the bytes of each (-1 where not recorded), read once."""
    got = trace.derived.get("mem_bytes")
    if got is None:
        idx = np.flatnonzero(np.isin(trace.columns["cat"], np.array(list(_TABLE), np.uint8)))
        got = trace.derived["mem_bytes"] = (idx, _fetch(trace, idx))
    return got


def _fetch(trace: Trace, idx: np.ndarray) -> np.ndarray:
    out = np.full(len(idx), -1, np.int64)
    if not len(idx) or not trace.sources:
        return out
    if all(s.format == "kineto" for s in trace.sources):
        recs = kineto_args(trace, idx, _SPEC)
        for k, i in enumerate(idx.tolist()):
            b = recs.get(i, {}).get("bytes")
            if type(b) is int and b >= 0:
                out[k] = b
        return out
    c = trace.columns
    lane_src = np.array([ln.source for ln in trace.lanes], np.int64)[c["lane"][idx]]
    cats, rowid = c["cat"][idx], c["src"][idx].astype(np.int64)
    for f in np.unique(lane_src).tolist():
        src = trace.sources[min(f, len(trace.sources) - 1)]
        if src.format != "nsys":
            continue
        for cat, table in _TABLE.items():
            m = (lane_src == f) & (cats == cat)
            if m.any():
                out[m] = _nsys_bytes(src.path, table, rowid[m])
    return out


def _nsys_bytes(path: str, table: str, rowids: np.ndarray) -> np.ndarray:
    from .nsys_report import columns, connect, tables

    res = np.full(len(rowids), -1, np.int64)
    try:
        db = connect(path)
    except (TraceError, sqlite3.DatabaseError, OSError):
        return res
    try:
        if table not in tables(db) or "bytes" not in columns(db, table):
            return res
        rows = np.array(
            db.execute(f"SELECT rowid, bytes FROM {table} WHERE typeof(bytes) = 'integer'").fetchall(), np.int64
        ).reshape(-1, 2)
    except (sqlite3.DatabaseError, TraceError, OverflowError):
        return res
    finally:
        db.close()
    order = np.argsort(rows[:, 0])
    rid, b = rows[order, 0], rows[order, 1]
    pos = np.clip(np.searchsorted(rid, rowids), 0, max(len(rid) - 1, 0))
    hit = (rid[pos] == rowids) if len(rid) else np.zeros(len(rowids), bool)
    res[hit] = b[pos[hit]]
    return res
