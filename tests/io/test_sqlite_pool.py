"""io/sqlite_pool.QueryPool: queries of a file on worker threads, each on a connection of its own
with the reading connection's limits and Cancel. Results equal the reading thread's own fetch;
an SQLite error comes back as the one-line message naming the file; close() and Cancel stop a
query that is running."""

import threading

import numpy as np
import pytest
from conftest import trace_path

from gpuviewer.io import sqlite_safe as sq
from gpuviewer.io.errors import Cancelled, TraceError
from gpuviewer.io.sqlite_pool import QueryPool

PATH = trace_path("nsys", "nsys_ddp.sqlite")
# never ends by itself: only our progress handler (Cancel, close, the step limit) stops it
ENDLESS = "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT count(*) FROM c"


def test_workers_fetch_what_the_reading_thread_fetches():
    db = sq.open_readonly(PATH)
    pool = QueryPool(db)
    try:
        exprs = ["rowid", "start", "end", "globalTid", "coalesce(nameId, -1)"]
        jobs = [pool.submit(sq.fetch_columns, t, exprs, (0, 1, 2), (1, 2)) for t in ("OSRT_API", "OSRT_API")]
        want, want_bad = sq.fetch_columns(db, "OSRT_API", exprs, (0, 1, 2), (1, 2))
        for job in jobs:
            got, bad = job.result()
            assert bad == want_bad and got.shape == want.shape and np.array_equal(got, want)
        assert len(want) > 100_000
    finally:
        pool.close()
        db.close()


def test_an_sqlite_error_is_one_line_naming_the_file():
    db = sq.open_readonly(PATH)
    pool = QueryPool(db)
    try:
        job = pool.submit(lambda c: c.execute("SELECT nothing FROM NO_SUCH_TABLE").fetchall())
        with pytest.raises(TraceError) as e:
            job.result()
        assert PATH in str(e.value) and "\n" not in str(e.value)
    finally:
        pool.close()
        db.close()


def _endless(started):
    def run(c):
        started.set()
        return c.execute(ENDLESS).fetchone()

    return run


def test_close_stops_a_running_query():
    db = sq.open_readonly(PATH)
    pool = QueryPool(db)
    started = threading.Event()
    job = pool.submit(_endless(started))
    started.wait()
    pool.close()  # returns once the worker has stopped
    db.close()
    assert isinstance(job.exception(), Cancelled)


def test_cancel_reaches_the_workers():
    flag = threading.Event()
    db = sq.open_readonly(PATH, cancelled=flag.is_set)
    pool = QueryPool(db)
    try:
        started = threading.Event()
        job = pool.submit(_endless(started))
        started.wait()
        flag.set()
        assert isinstance(job.exception(), Cancelled)
    finally:
        pool.close()
        db.close()
