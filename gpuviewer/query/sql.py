"""SQL over a session with DuckDB, in process. The tables of query.tables (and the summaries of
query.stats as kern_sum, api_sum, nvtx_sum, mem_sum, nccl_sum) are registered as DuckDB views
over the pandas DataFrames, which DuckDB scans in place; only the tables a query names are
built. The connection cannot touch files or load extensions: a query reads the session only.
"""
from __future__ import annotations

import re
import threading

import duckdb
import pandas as pd

from .tables import TABLES

SUMMARIES = {"kern_sum": "kern", "api_sum": "api", "nvtx_sum": "nvtx", "mem_sum": "mem", "nccl_sum": "nccl"}
ALL_TABLES = (*TABLES, *SUMMARIES)


class QueryError(Exception):
    """DuckDB refused or failed the query; the message is DuckDB's."""


class Query:
    """One connection over one session; `interrupt()` from another thread cancels a running query."""

    def __init__(self, session) -> None:
        self.session = session
        self._con = duckdb.connect(config={"enable_external_access": False,
                                           "autoinstall_known_extensions": False,
                                           "autoload_known_extensions": False})
        self._registered: set[str] = set()
        self._lock = threading.Lock()

    def tables(self) -> list[str]:
        return list(ALL_TABLES)

    def _register(self, sql: str) -> None:
        words = {w.lower() for w in re.findall(r"[A-Za-z_][A-Za-z0-9_]*", sql)}
        for name in ALL_TABLES:
            if name in words and name not in self._registered:
                df = self.session.stats(SUMMARIES[name]) if name in SUMMARIES else getattr(self.session, name)
                self._con.register(name, df)
                self._registered.add(name)

    def run(self, sql: str, limit: int | None = None) -> tuple[pd.DataFrame, bool]:
        """The result (at most `limit` rows when given) and whether rows were left out."""
        with self._lock:
            try:
                self._register(sql)
                res = self._con.execute(sql)
                if res.description is None:  # a statement without a result (SET, ...)
                    return pd.DataFrame(), False
                if limit is None:
                    return res.fetch_df(), False
                rows = res.fetchmany(limit + 1)
                cols = [d[0] for d in res.description]
                df = pd.DataFrame.from_records(rows[:limit], columns=cols)
                return df, len(rows) > limit
            except duckdb.InterruptException:
                raise QueryError("the query was cancelled") from None
            except duckdb.Error as e:
                raise QueryError(str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__) from None

    def interrupt(self) -> None:
        self._con.interrupt()

    def close(self) -> None:
        self._con.close()


def run(session, sql: str) -> pd.DataFrame:
    q = Query(session)
    try:
        return q.run(sql)[0]
    finally:
        q.close()
