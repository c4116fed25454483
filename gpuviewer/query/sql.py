"""SQL over a session with DuckDB, in process. The tables of query.tables (and the summaries of
query.stats as kern_sum, api_sum, nvtx_sum, mem_sum, nccl_sum) are registered as DuckDB views
over the pandas DataFrames, which DuckDB scans in place; only the tables a query names are
built. The connection cannot touch files or load extensions: a query reads the session only.

Bounds: DuckDB's memory_limit (default a quarter of the machine's memory, or of the cgroup's
limit) with no temp_directory, so nothing spills beside the user's files, and the configuration is
locked so a query cannot SET them away; a timeout interrupts the connection from a timer thread
(DuckDB has no statement timeout of its own).
"""

from __future__ import annotations

import os
import re
import threading

import duckdb
import pandas as pd

from ..errors import GpuviewerError
from .tables import TABLES

SUMMARIES = {"kern_sum": "kern", "api_sum": "api", "nvtx_sum": "nvtx", "mem_sum": "mem", "nccl_sum": "nccl"}
ALL_TABLES = (*TABLES, *SUMMARIES)


class QueryError(GpuviewerError):
    """DuckDB refused or failed the query; the message is DuckDB's (or says which bound stopped it)."""


def default_memory_limit() -> int:
    """A quarter of the memory this process may use: the machine's RAM, or the cgroup's limit
    when a container sets a lower one."""
    try:
        total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        total = 8 << 30
    for path in ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"):
        try:
            with open(path, encoding="ascii") as f:
                v = f.read(64).strip()
            if v.isdigit() and 0 < int(v) < total:
                total = int(v)
        except (OSError, ValueError):
            pass
    return max(64 << 20, total // 4)


_UNITS = {
    "": 1,
    "B": 1,
    "K": 1 << 10,
    "KB": 1 << 10,
    "KIB": 1 << 10,
    "M": 1 << 20,
    "MB": 1 << 20,
    "MIB": 1 << 20,
    "G": 1 << 30,
    "GB": 1 << 30,
    "GIB": 1 << 30,
    "T": 1 << 40,
    "TB": 1 << 40,
    "TIB": 1 << 40,
}


def parse_size(text: str) -> int:
    """'4GB', '512 MiB', '1.5G', '1000000' -> bytes (binary units); ValueError otherwise."""
    m = re.fullmatch(r"\s*([0-9]+(?:\.[0-9]*)?)\s*([A-Za-z]*)\s*", text or "")
    if not m or m.group(2).upper() not in _UNITS:
        raise ValueError(f"{text!r} is not a size (e.g. 4GB, 512MB)")
    n = int(float(m.group(1)) * _UNITS[m.group(2).upper()])
    if not (1 << 20) <= n <= (1 << 50):
        raise ValueError(f"{text!r} is out of range (1MB to 1PB)")
    return n


def size_text(n: int) -> str:
    for unit, k in (("GB", 1 << 30), ("MB", 1 << 20)):
        if n >= k:
            return f"{n / k:.4g} {unit}"
    return f"{n} bytes"


def is_empty(sql: str) -> bool:
    """Nothing but blanks, semicolons and comments: DuckDB returns no result object for it."""
    text = re.sub(r"--[^\n]*|/\*.*?(\*/|$)", " ", sql or "", flags=re.S)
    return not text.replace(";", " ").strip()


_CATALOG = re.compile(r"\bshow\s+(?:all\s+)?tables\b|information_schema|duckdb_(?:tables|views)\b", re.I)


class Query:
    """One connection over one session; `interrupt()` from another thread cancels a running query.
    `memory_limit` (bytes) bounds what DuckDB itself allocates (None: default_memory_limit())."""

    def __init__(self, session, memory_limit: int | None = None) -> None:
        self.session = session
        self.memory_limit = int(memory_limit or default_memory_limit())
        self._con = duckdb.connect(
            config={
                "enable_external_access": False,
                "autoinstall_known_extensions": False,
                "autoload_known_extensions": False,
                "memory_limit": f"{self.memory_limit}B",
                "temp_directory": "",
            }
        )  # never spill beside the inputs
        self._con.execute("SET lock_configuration = true")  # a query cannot lift the bounds
        self._registered: set[str] = set()
        self._lock = threading.Lock()
        self._timed_out = self._cancelled = False

    def tables(self) -> list[str]:
        return list(ALL_TABLES)

    def _register(self, sql: str) -> None:
        words = {w.lower() for w in re.findall(r"[A-Za-z_][A-Za-z0-9_]*", sql)}
        # a question about the catalog (SHOW TABLES named none: it listed nothing) sees every table
        catalog = bool(_CATALOG.search(sql))
        for name in ALL_TABLES:
            if (catalog or name in words) and name not in self._registered:
                df = self.session.stats(SUMMARIES[name]) if name in SUMMARIES else getattr(self.session, name)
                if name == "collectives":  # unknown sizes as NULL in SQL (-1 made sum(bytes) wrong)
                    df = df.assign(**{k: df[k].where(df[k] >= 0).astype("Int64") for k in ("bytes", "ranks")})
                self._con.register(name, df)
                self._registered.add(name)

    def run(self, sql: str, limit: int | None = None, timeout: float | None = None) -> tuple[pd.DataFrame, bool]:
        """The result (at most `limit` rows when given) and whether rows were left out; a query
        still running after `timeout` seconds is interrupted (QueryError saying so)."""
        if is_empty(sql):
            raise QueryError("the query is empty")
        with self._lock:
            self._timed_out = self._cancelled = False
            timer = None
            try:
                self._register(sql)
                if timeout is not None:
                    timer = threading.Timer(timeout, self._time_out)
                    timer.daemon = True
                    timer.start()
                return self._execute_interruptible(sql, limit)
            except duckdb.InterruptException:
                if self._timed_out:
                    raise QueryError(f"the query ran longer than {timeout:g} s and was stopped (--timeout)") from None
                if self._cancelled:
                    raise QueryError("the query was cancelled") from None
                # neither the timer nor interrupt(): DuckDB saw Ctrl+C; the command ends as any does
                raise KeyboardInterrupt from None
            except duckdb.OutOfMemoryException:
                raise QueryError(
                    f"the query needed more than {size_text(self.memory_limit)} of memory and was "
                    "stopped (--memory-limit)"
                ) from None
            except duckdb.Error as e:
                raise QueryError(str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__) from None
            finally:
                if timer is not None:
                    timer.cancel()

    def _execute(self, sql: str, limit: int | None) -> tuple[pd.DataFrame, bool]:
        res = self._con.execute(sql)
        if res is None or res.description is None:  # a statement without a result
            return pd.DataFrame(), False
        if limit is None:
            return res.fetch_df(), False
        rows = res.fetchmany(limit + 1)
        cols = [d[0] for d in res.description]
        df = pd.DataFrame.from_records(rows[:limit], columns=cols)
        return df, len(rows) > limit

    def _execute_interruptible(self, sql: str, limit: int | None) -> tuple[pd.DataFrame, bool]:
        """_execute, so that Ctrl+C stops it. DuckDB runs a query without looking at signals, and
        Python runs its SIGINT handler only when the main thread is back in Python: so on the
        main thread the query runs on a helper thread while this one waits (a wait signals do
        end); Ctrl+C then interrupts the connection and KeyboardInterrupt goes on up."""
        if threading.current_thread() is not threading.main_thread():
            return self._execute(sql, limit)
        out: dict = {}
        done = threading.Event()

        def work() -> None:
            try:
                out["result"] = self._execute(sql, limit)
            except BaseException as e:  # noqa: BLE001 - handed to the waiting thread
                out["error"] = e
            finally:
                done.set()

        # An Event, not Thread.join: a join that Ctrl+C interrupts marks the thread as ended
        # while it still runs (CPython 3.11), and the connection would be closed under it.
        threading.Thread(target=work, name="gpuviewer-sql", daemon=True).start()
        try:
            while not done.wait(0.5):  # a timed wait returns to Python, where the SIGINT handler runs
                pass
        except BaseException:  # Ctrl+C, or the RuntimeError it makes of a wait it breaks (3.11)
            self._con.interrupt()
            done.wait()
            raise
        if "error" in out:
            raise out["error"]
        return out["result"]

    def _time_out(self) -> None:
        self._timed_out = True
        self._con.interrupt()

    def interrupt(self) -> None:
        self._cancelled = True
        self._con.interrupt()

    def close(self) -> None:
        self._con.close()


def run(session, sql: str, *, timeout: float | None = None, memory_limit: int | None = None) -> pd.DataFrame:
    q = Query(session, memory_limit=memory_limit)
    try:
        return q.run(sql, timeout=timeout)[0]
    finally:
        q.close()
