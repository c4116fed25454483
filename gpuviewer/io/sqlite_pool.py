"""Queries of one SQLite file run on a few threads beside the reading one, each on a connection of
its own (sqlite_safe.sibling: the same limits and Cancel). SQLite lets go of the GIL while it
steps a statement, so scans of several tables overlap on a machine with more than one core (an
Nsight Systems export's NVTX, CUDA API and OS runtime tables: most of its reading time)."""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

from . import sqlite_safe as sq


class QueryPool:
    """submit(fn, *args) runs fn(connection, *args) on a worker; its Future gives the result or
    raises what it met (an SQLite error already turned into the one-line message). close() stops
    the queries still running (as Cancel would) and waits for them: call it before closing `db`,
    whose shared lock covers the workers' connections."""

    def __init__(self, db: sq.SafeConnection, workers: int | None = None) -> None:
        self.db = db
        self._closing = False
        # two at least: one scan beside the reading thread even on one core, as before the pool
        n = workers or max(2, min(4, os.cpu_count() or 1))
        self._pool = ThreadPoolExecutor(max_workers=n, thread_name_prefix="sqlite-query")

    def submit(self, fn: Callable[..., Any], *args: Any) -> Future:
        return self._pool.submit(self._run, fn, args)

    def _run(self, fn: Callable[..., Any], args: tuple) -> Any:
        db = sq.sibling(self.db, stop=lambda: self._closing)
        try:
            return fn(db, *args)
        except sqlite3.Error as e:
            raise sq.explain(db, db.source, e) from None
        finally:
            db.close()

    def close(self) -> None:
        self._closing = True
        self._pool.shutdown(wait=True, cancel_futures=True)
