"""Issue 18, hostile Nsight Systems SQLite inputs: each file here is built by its test and opened
with the real CLI in a child process. A user must get a clear one-line message naming the file
(or the trace, with a counted warning), never a hang, a traceback or Python's own error words,
and the file and its folder must be left exactly as they were."""

import itertools
import json
import os
import shutil
import sqlite3
import subprocess
import sys

import pytest
from conftest import trace_path
from hostile import assert_refused, folder_state, run

from gpuviewer.io import sqlite_safe as sq
from gpuviewer.io.errors import Cancelled, TraceError

SINGLE = trace_path("nsys", "nsys_single.sqlite")
HANG = 180  # seconds: only to tell a hang from an answer
PID = 100 << 24  # globalPid of the synthetic process; its thread 101 is PID | 101


def _info(path, env=None, fork=None):
    return run("info", str(path), "--json", "--no-cache", env=env, timeout=HANG, fork=fork)


def _copy(tmp_path, name="x.sqlite", src=SINGLE):
    p = tmp_path / name
    shutil.copyfile(src, p)  # not shutil.copy: the shared exports are read-only
    return p


@pytest.fixture(scope="module")
def single_kernels():
    r = _info(SINGLE)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)["kernels"]


def _opened(r) -> dict:
    assert "Traceback" not in r.stderr, r.stderr[-3000:]
    assert r.returncode == 0, r.stderr[-2000:]
    return json.loads(r.stdout)


def _no_python_words(text):
    for w in ("unhashable", "could not convert", "invalid literal", "NoneType", "Error:", "object has no"):
        assert w not in text, text


# -- 1. SQL stored in the file never runs ---------------------------------------------------------

_KERNEL = (
    "CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL (start INTEGER, end INTEGER, deviceId INTEGER, "
    "streamId INTEGER, globalPid INTEGER, shortName INTEGER)"
)
_STRINGS = "CREATE TABLE StringIds (id INTEGER PRIMARY KEY, value TEXT)"
# The recursion never ends and returns no row (a hang), or returns rows forever (memory).
_NEVER_ENDS = (
    "CREATE VIEW StringIds AS WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c "
    "WHERE x > 0) SELECT x AS id, 'n' AS value FROM c WHERE x < 0"
)
_GROWS = (
    "CREATE VIEW StringIds AS WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) "
    "SELECT x AS id, printf('%.200d', x) AS value FROM c"
)
HOSTILE_SCHEMAS = {
    "recursive_view_never_ends": ([_KERNEL, _NEVER_ENDS], "StringIds is a view"),
    "recursive_view_grows": ([_KERNEL, _GROWS], "StringIds is a view"),
    "view_as_kernel_table": (
        [
            _STRINGS,
            "CREATE VIEW CUPTI_ACTIVITY_KIND_KERNEL AS WITH RECURSIVE c(x) AS "
            "(SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT x AS start, x AS end FROM c",
        ],
        "CUPTI_ACTIVITY_KIND_KERNEL is a view",
    ),
    "virtual_table": ([_KERNEL, "CREATE VIRTUAL TABLE StringIds USING fts5(id, value)"], "is a virtual table"),
    "computed_column": (
        [
            _STRINGS,
            "CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL (x INTEGER, start INTEGER "
            "GENERATED ALWAYS AS (length(zeroblob(900000000))) VIRTUAL, end INTEGER, globalPid INTEGER)",
        ],
        "is computed by SQL",
    ),
}


def _build(path, statements, page_size=1024):
    db = sqlite3.connect(path)
    db.execute(f"PRAGMA page_size = {page_size}")
    for s in statements:
        db.execute(s)
    if any("CUPTI_ACTIVITY_KIND_KERNEL (start" in s for s in statements):
        db.execute("INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL VALUES (1, 2, 0, 7, ?, 1)", (PID,))
    if any("KERNEL (x INTEGER" in s for s in statements):
        db.execute("INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL (x, end, globalPid) VALUES (1, 2, ?)", (PID,))
    db.commit()
    db.close()


@pytest.mark.parametrize("case", sorted(HOSTILE_SCHEMAS))
def test_sql_in_the_file_is_never_run(tmp_path, case):
    statements, needle = HOSTILE_SCHEMAS[case]
    p = tmp_path / f"{case}.sqlite"
    _build(p, statements)
    assert os.path.getsize(p) <= 8192
    before = folder_state(tmp_path)
    r = _info(p, fork=False)
    line = assert_refused(r, p, needle)
    assert "never run" in line
    assert r.rss_mb < 1000, r.rss_mb  # the growing view is never evaluated
    assert folder_state(tmp_path) == before


def _view_db(tmp_path):
    p = tmp_path / "loop.sqlite"
    _build(p, [_KERNEL, _NEVER_ENDS])
    return p


def test_step_limit_stops_a_query_that_never_ends(tmp_path, monkeypatch):
    """Second line of defence, should SQL from the file ever be queried: the step budget."""
    p = str(_view_db(tmp_path))
    db = sq.open_readonly(p)
    monkeypatch.setenv("GPUVIEWER_MAX_SQLITE_KSTEPS", "2000")
    db2 = sq.open_readonly(p)  # the budget is read when a file is opened
    try:
        with pytest.raises(sqlite3.OperationalError) as ei:
            db2.execute("SELECT count(*) FROM StringIds").fetchall()
        err = sq.explain(db2, "loop.sqlite", ei.value)
        assert isinstance(err, TraceError) and "ran past" in str(err) and "MAX_SQLITE_KSTEPS" in str(err)
        assert db._max_calls > db2._max_calls
    finally:
        db.close()
        db2.close()


def test_cancel_stops_a_running_query(tmp_path):
    db = sq.open_readonly(str(_view_db(tmp_path)), cancelled=lambda: True)
    try:
        with pytest.raises(sqlite3.OperationalError) as ei:
            db.execute("SELECT count(*) FROM StringIds").fetchall()
        assert isinstance(sq.explain(db, "loop.sqlite", ei.value), Cancelled)
    finally:
        db.close()


def test_cancel_reaches_the_reader_queries():
    from gpuviewer.io.nsys import load_nsys

    calls = itertools.count()
    # the first call is load_nsys's own check before the file; later ones come from SQLite
    with pytest.raises(Cancelled):
        load_nsys([trace_path("nsys", "nsys_ddp_big.sqlite")], cancelled=lambda: next(calls) >= 3)
    assert next(calls) >= 4


# -- 2. nothing beside the file, WAL and journal content, locks ------------------------------------


def _to_wal(p):
    db = sqlite3.connect(p)
    assert db.execute("PRAGMA journal_mode = WAL").fetchone()[0] == "wal"
    db.close()  # the last connection checkpoints and removes -wal and -shm


def test_wal_mode_export_leaves_nothing_beside_it(tmp_path, single_kernels):
    p = _copy(tmp_path)
    _to_wal(p)
    assert sorted(os.listdir(tmp_path)) == ["x.sqlite"]
    before = folder_state(tmp_path)
    out = _opened(_info(p))
    assert out["kernels"] == single_kernels
    assert folder_state(tmp_path) == before  # no x.sqlite-wal, x.sqlite-shm


def test_wal_mode_export_in_read_only_folder(tmp_path, single_kernels):
    """SQLite in mode=ro wants to create -shm beside a WAL-mode file: in a read-only folder it
    failed ("damaged"). Run as root (as here in CI) chmod does not stop writes, so the check that
    no file appears is what catches it then; the refusal itself shows only for other users."""
    d = tmp_path / "ro"
    d.mkdir()
    p = _copy(d)
    _to_wal(p)
    before = folder_state(d)
    os.chmod(d, 0o555)
    try:
        if os.geteuid() != 0:  # the folder is really read-only only for other users
            with pytest.raises(PermissionError):
                open(d / "probe", "w")
        out = _opened(_info(p))
    finally:
        os.chmod(d, 0o755)
    assert out["kernels"] == single_kernels
    assert folder_state(d) == before


def _crash_after(p, statements, pragmas=()):
    """A child that runs `statements` in one transaction and dies without closing the file,
    as a crashed or killed writer would."""
    code = (
        "import sqlite3, os, sys\n"
        "db = sqlite3.connect(sys.argv[1], isolation_level=None)\n"
        f"for s in {list(pragmas)!r}: db.execute(s)\n"
        "db.execute('BEGIN')\n"
        f"for s in {list(statements)!r}: db.execute(s)\n"
        "if sys.argv[2] == 'commit': db.execute('COMMIT')\n"
        "os._exit(0)\n"
    )
    return code


def test_committed_wal_content_is_read_from_a_copy(tmp_path, single_kernels):
    data = tmp_path / "data"  # the cache folder is made beside it
    data.mkdir()
    p = _copy(data)
    _to_wal(p)
    code = _crash_after(
        p, ["DELETE FROM CUPTI_ACTIVITY_KIND_KERNEL WHERE rowid % 2 = 0"], ["PRAGMA wal_autocheckpoint = 0"]
    )
    subprocess.run([sys.executable, "-c", code, str(p), "commit"], check=True)
    assert os.path.getsize(str(p) + "-wal") > 0
    db = sqlite3.connect(f"file:{p}?mode=ro", uri=True)  # a normal reader sees the WAL
    expected = db.execute("SELECT count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL").fetchone()[0]
    db.close()
    assert 0 < expected < single_kernels
    cache = tmp_path / "cache"
    before = folder_state(data)
    for _ in range(2):  # the second open reuses the copy
        out = _opened(_info(p, env={"GPUVIEWER_CACHE_DIR": str(cache / "sessions")}))
        assert out["kernels"] == expected
        assert any("-wal file beside it" in w for w in out["warnings"]), out["warnings"]
        copies = [n for n in os.listdir(cache / "sqlite-recovered") if not n.startswith(".")]
        assert len(copies) == 1, copies
        assert folder_state(data) == before  # x.sqlite, -wal and -shm unchanged


def test_event_arguments_come_from_the_same_copy(tmp_path, monkeypatch):
    import numpy as np

    from gpuviewer.io.args import event_args
    from gpuviewer.io.session import load
    from gpuviewer.model.categories import Cat

    data = tmp_path / "data"
    data.mkdir()
    p = _copy(data)
    _to_wal(p)
    code = _crash_after(
        p,
        [
            "UPDATE StringIds SET value = 'renamed_in_wal' WHERE id IN "
            "(SELECT shortName FROM CUPTI_ACTIVITY_KIND_KERNEL)"
        ],
        ["PRAGMA wal_autocheckpoint = 0"],
    )
    subprocess.run([sys.executable, "-c", code, str(p), "commit"], check=True)
    monkeypatch.setenv("GPUVIEWER_CACHE_DIR", str(tmp_path / "cache" / "sessions"))
    before = folder_state(data)
    t = load([str(p)], use_cache=False)
    k = int(np.flatnonzero(t.columns["cat"] == Cat.KERNEL)[0])
    assert t.name_of(k) == "renamed_in_wal"
    assert event_args(t, k)["shortName"] == "renamed_in_wal"
    assert folder_state(data) == before


def test_wal_that_is_not_a_file_is_ignored(tmp_path, single_kernels):
    p = _copy(tmp_path)
    os.symlink("/dev/zero", str(p) + "-wal")  # copying it would never end
    before = folder_state(tmp_path)
    out = _opened(_info(p))
    assert out["kernels"] == single_kernels and not out["warnings"]
    assert folder_state(tmp_path) == before


def test_hot_journal_is_rolled_back_on_a_copy(tmp_path, single_kernels):
    """A writer killed mid-transaction leaves pages of the file rewritten and the originals in
    the -journal; read as is, the kernels are gone."""
    data = tmp_path / "data"
    data.mkdir()
    p = _copy(data)
    code = _crash_after(
        p,
        ["DELETE FROM CUPTI_ACTIVITY_KIND_KERNEL", "DELETE FROM CUPTI_ACTIVITY_KIND_RUNTIME"],
        ["PRAGMA cache_size = 2"],
    )  # a tiny cache spills the change into the file
    subprocess.run([sys.executable, "-c", code, str(p), "no"], check=True)
    assert os.path.getsize(str(p) + "-journal") > 0
    torn = sqlite3.connect(f"file:{p}?mode=ro&immutable=1", uri=True)
    assert torn.execute("SELECT count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL").fetchone()[0] != single_kernels
    torn.close()
    before = folder_state(data)
    out = _opened(_info(p, env={"GPUVIEWER_CACHE_DIR": str(tmp_path / "cache" / "sessions")}))
    assert out["kernels"] == single_kernels
    assert any("-journal file beside it" in w for w in out["warnings"]), out["warnings"]
    assert folder_state(data) == before


LOCKERS = {
    "begin_exclusive": ([], ["BEGIN EXCLUSIVE"]),
    "wal_locking_mode_exclusive": (
        ["PRAGMA journal_mode = WAL", "PRAGMA locking_mode = EXCLUSIVE"],
        ["DELETE FROM StringIds WHERE id < 0"],
    ),
}


def _hold(p, statements: list[str]) -> subprocess.Popen:
    """Another program with the file open, having run these statements, until its stdin closes."""
    code = (
        "import sqlite3, sys\n"
        "db = sqlite3.connect(sys.argv[1], isolation_level=None)\n"
        f"for s in {list(statements)!r}: db.execute(s)\n"
        "print('ready', flush=True)\n"
        "sys.stdin.read()\n"
    )
    holder = subprocess.Popen(
        [sys.executable, "-c", code, str(p)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    assert holder.stdout.readline().strip() == "ready"
    return holder


@pytest.mark.parametrize("case", sorted(LOCKERS))
def test_file_locked_by_another_program(tmp_path, case):
    p = _copy(tmp_path)
    pragmas, statements = LOCKERS[case]
    holder = _hold(p, pragmas + statements)
    try:
        before = folder_state(tmp_path)
        r = _info(p)
        line = assert_refused(r, p, "locked by another program (close it or wait)")
        assert "damaged" not in line
        assert folder_state(tmp_path) == before
    finally:
        holder.stdin.close()
        holder.wait(timeout=HANG)
    _opened(_info(p))  # once the other program lets go


def test_reader_and_writer_in_progress_do_not_block(tmp_path, single_kernels):
    """Another reader, or a writer that has not started to commit, leaves the file readable."""
    p = _copy(tmp_path)
    holder = _hold(p, ["BEGIN IMMEDIATE", "DELETE FROM StringIds WHERE id < 0"])
    try:
        out = _opened(_info(p))
        assert out["kernels"] == single_kernels
        assert not out["warnings"]  # its -journal is in use, not left behind
    finally:
        holder.stdin.close()
        holder.wait(timeout=HANG)


@pytest.mark.parametrize(
    "name", ["with space.sqlite", "what?.sqlite", "hash#1.sqlite", "pct%41.sqlite", "amp&mode=rw.sqlite"]
)
def test_awkward_file_names(tmp_path, name, single_kernels):
    p = _copy(tmp_path, name)
    before = folder_state(tmp_path)
    assert _opened(_info(p))["kernels"] == single_kernels
    assert folder_state(tmp_path) == before


# -- 3. messages for empty, cut, foreign and badly typed files -------------------------------------


def _activity_tables(db):
    out = []
    for (t,) in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'").fetchall():
        cols = {r[1] for r in db.execute(f"PRAGMA table_info({t})")}
        if "start" in cols:
            out.append(t)
    return out


def _empty_export(tmp_path, name="empty.sqlite"):
    p = _copy(tmp_path, name)
    db = sqlite3.connect(p)
    tables = _activity_tables(db)
    assert "CUPTI_ACTIVITY_KIND_KERNEL" in tables and "NVTX_EVENTS" in tables
    for t in tables:
        db.execute(f"DELETE FROM {t}")
    db.commit()
    db.close()
    return p


def test_export_without_events_is_refused(tmp_path):
    p = _empty_export(tmp_path)
    before = folder_state(tmp_path)
    assert_refused(_info(p), p, "holds no events")
    assert folder_state(tmp_path) == before


def test_empty_export_in_a_session_is_named(tmp_path, single_kernels):
    p = _empty_export(tmp_path)
    r = run("info", str(p), SINGLE, "--json", "--no-cache", timeout=HANG)
    out = _opened(r)
    assert out["kernels"] == single_kernels
    assert any("empty.sqlite" in w and "no events" in w for w in out["warnings"]), out["warnings"]


@pytest.mark.parametrize("cut", [2048, 4096, 65536, 300_000, 1_000_000, 2_000_000])
def test_cut_short(tmp_path, cut):
    p = tmp_path / f"cut{cut}.sqlite"
    p.write_bytes(open(SINGLE, "rb").read()[:cut])
    before = folder_state(tmp_path)
    line = assert_refused(_info(p), p, "damaged or cut short")
    _no_python_words(line)
    assert folder_state(tmp_path) == before


def test_header_only(tmp_path):
    p = tmp_path / "header.sqlite"
    p.write_bytes(open(SINGLE, "rb").read()[:60])
    line = assert_refused(_info(p), p)
    assert "SQLite" in line or "damaged" in line
    _no_python_words(line)


def test_sqlite_that_is_not_an_export(tmp_path):
    p = tmp_path / "app.sqlite"
    db = sqlite3.connect(p)
    db.execute("CREATE TABLE users (id INTEGER PRIMARY KEY, name TEXT, start TEXT)")
    db.execute("CREATE TABLE orders (id, user_id, total REAL)")
    db.execute("CREATE VIEW totals AS SELECT user_id, sum(total) FROM orders GROUP BY 1")
    db.execute("INSERT INTO users VALUES (1, 'a', 'now')")
    db.commit()
    db.close()
    before = folder_state(tmp_path)
    assert_refused(_info(p), p, "not an Nsight Systems export")
    assert folder_state(tmp_path) == before


def _synthetic(path, bad: bool):
    """A small export in nsys's shape, without NOT NULL constraints so that any value fits: one
    process on GPU 0 with 10 kernels, 10 CUDA API calls on thread 101, NVTX "step 1"; `bad`
    adds rows with text, NULL, huge and reversed values."""
    tid = PID | 101
    db = sqlite3.connect(path)
    db.executescript("""
        CREATE TABLE StringIds (id, value);
        CREATE TABLE TARGET_INFO_SESSION_START_TIME (utcEpochNs);
        CREATE TABLE TARGET_INFO_GPU (id, name, totalMemory, smCount, busLocation);
        CREATE TABLE META_DATA_EXPORT (name, value);
        CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL (start, end, deviceId, streamId, correlationId, globalPid, shortName);
        CREATE TABLE CUPTI_ACTIVITY_KIND_RUNTIME (start, end, globalTid, correlationId, nameId, eventClass);
        CREATE TABLE NVTX_EVENTS (start, end, eventType, globalTid, text, textId, domainId);
        CREATE TABLE ThreadNames (nameId, globalTid);
        CREATE TABLE CUDA_GPU_MEMORY_USAGE_EVENTS (start, globalPid, deviceId, bytes, memoryOperationType);
    """)
    ins = db.executemany
    ins("INSERT INTO StringIds VALUES (?, ?)", [(1, "gemm_kernel"), (2, "cudaLaunchKernel_v7000"), (3, "main")])
    db.execute("INSERT INTO TARGET_INFO_SESSION_START_TIME VALUES (1700000000000000000)")
    db.execute("INSERT INTO TARGET_INFO_GPU VALUES (0, 'NVIDIA H200', 150000000000, 132, '0000:01:00.0')")
    db.execute("INSERT INTO META_DATA_EXPORT VALUES ('EXPORT_SCHEMA_VERSION', '3.24.0')")
    ins(
        "INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL VALUES (?, ?, 0, 7, ?, ?, 1)",
        [(1000 + 100 * i, 1050 + 100 * i, i, PID) for i in range(10)],
    )
    ins(
        "INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME VALUES (?, ?, ?, ?, 2, 0)",
        [(990 + 100 * i, 1000 + 100 * i, tid, i) for i in range(10)],
    )
    ins(
        "INSERT INTO NVTX_EVENTS VALUES (?, ?, ?, ?, ?, NULL, 0)",
        [(900, 3000, 59, tid, "step 1"), (950, None, 34, tid, "mark")],
    )
    db.execute("INSERT INTO ThreadNames VALUES (3, ?)", (tid,))
    db.execute("INSERT INTO CUDA_GPU_MEMORY_USAGE_EVENTS VALUES (1000, ?, 0, 4096, 0)", (PID,))
    if bad:
        db.executescript(f"""
            INSERT INTO StringIds VALUES ('x', 'text id'), (4, X'ff00'), (5, NULL), (6, 12345);
            UPDATE TARGET_INFO_SESSION_START_TIME SET utcEpochNs = 'yesterday';
            INSERT INTO TARGET_INFO_GPU VALUES ('one', X'00ff', 'lots', 1.5, 7);
            INSERT INTO META_DATA_EXPORT VALUES ('EXPORT_PRODUCT_VERSION', X'01');
            INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL VALUES
                ('abc', 10, 0, 7, 1, {PID}, 1),
                (10, NULL, 0, 7, 1, {PID}, 1),
                (1e30, 1e30, 0, 7, 1, {PID}, 1),
                (10, 99999999999999999999999, 0, 7, 1, {PID}, 1),
                (500, 400, 0, 7, 1, {PID}, 1),
                (9223372036854775000, 9223372036854775807, 0, 7, 1, {PID}, 1),
                (10, 20, 0, 7, 1, 'pid', 1),
                (10, 20, 0, 7, 1, NULL, 1),
                (X'0102', 20, 0, 7, 1, {PID}, 1),
                (2000, 2010, 'dev', 'stream', 'corr', {PID}, 'name'),
                (2100, 2110, 0, 7, 1.5, {PID}, 99);
            INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME VALUES
                ('x', 10, {tid}, 1, 2, 0), (10, 5, {tid}, 1, 2, 0), (10, 20, 'thread', 1, 2, 0),
                (10, 20, NULL, 1, 2, 0), (10, 20, {tid}, 'c', 'n', 'e');
            INSERT INTO NVTX_EVENTS VALUES
                ('x', 10, 59, {tid}, 'bad start', NULL, 0),
                (10, 5, 59, {tid}, 'reversed', NULL, 0),
                (10, 'later', 59, {tid}, 'text end', NULL, 0),
                (10, 20, 'push', {tid}, 'text type', NULL, 0),
                (10, 20, 59, NULL, 'no thread', NULL, 0),
                (10, 20, 59, {tid}, X'41', NULL, 'domain'),
                (30, 40, 59, {tid}, 7, NULL, 0),
                (60, 70, 59, {tid}, 'step 99999999999999999999999', NULL, 0),
                (50, 60, 59, {tid}, NULL, 'textid', 0);
            INSERT INTO ThreadNames VALUES (3, 'thread'), (X'00', {tid});
            INSERT INTO CUDA_GPU_MEMORY_USAGE_EVENTS VALUES (1100, {PID}, 0, 'many', 0), (NULL, {PID}, 0, 1, 0);
        """)
    db.commit()
    db.close()


def test_synthetic_export_opens(tmp_path):
    p = tmp_path / "good.sqlite"
    _synthetic(p, bad=False)
    out = _opened(_info(p))
    assert out["kernels"] == 10 and not out["warnings"]
    assert [r["steps"] for r in out["ranks"]] == [[1]]


def test_badly_typed_values_are_skipped_and_counted(tmp_path):
    p = tmp_path / "typed.sqlite"
    _synthetic(p, bad=True)
    before = folder_state(tmp_path)
    r = _info(p)
    _no_python_words(r.stderr + r.stdout)
    out = _opened(r)
    # 10 good kernels + 2 whose optional columns are bad (kept); 9 with bad times or process skipped
    assert out["kernels"] == 12
    assert [r["steps"] for r in out["ranks"]] == [[1]]
    w = "\n".join(out["warnings"])
    assert "9 rows of CUPTI_ACTIVITY_KIND_KERNEL skipped" in w, w
    assert "4 rows of CUPTI_ACTIVITY_KIND_RUNTIME skipped" in w, w
    assert "3 rows of NVTX_EVENTS skipped" in w, w
    assert "2 rows of CUDA_GPU_MEMORY_USAGE_EVENTS skipped" in w, w
    assert "session start time" in w, w
    assert folder_state(tmp_path) == before


def test_real_export_with_text_and_reversed_times(tmp_path, single_kernels):
    p = _copy(tmp_path)
    db = sqlite3.connect(p)
    db.execute(
        "UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET start = 'abc' WHERE rowid IN "
        "(SELECT rowid FROM CUPTI_ACTIVITY_KIND_KERNEL LIMIT 3)"
    )
    db.execute(
        "UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET end = start - 10 WHERE rowid IN "
        "(SELECT rowid FROM CUPTI_ACTIVITY_KIND_KERNEL ORDER BY rowid DESC LIMIT 2)"
    )
    db.commit()
    db.close()
    r = _info(p)
    _no_python_words(r.stderr + r.stdout)
    out = _opened(r)
    assert out["kernels"] == single_kernels - 5
    assert any("5 rows of CUPTI_ACTIVITY_KIND_KERNEL skipped" in w for w in out["warnings"]), out["warnings"]


# -- .nsys-rep export --------------------------------------------------------------------------------


def _fake_nsys(tmp_path, body):
    d = tmp_path / "bin"
    d.mkdir()
    f = d / "nsys"
    f.write_text("#!/bin/sh\n" + body + "\n")
    f.chmod(0o755)
    return str(d)


def test_nsys_export_failure_is_one_line(tmp_path):
    rep = tmp_path / "r.nsys-rep"
    rep.write_bytes(b"\0" * 64)
    path = _fake_nsys(tmp_path, 'echo "Error: the report is damaged" >&2\nexit 1')
    r = run(
        "info",
        str(rep),
        "--no-cache",
        env={"PATH": path + ":/usr/bin:/bin", "GPUVIEWER_CACHE_DIR": str(tmp_path / "c" / "sessions")},
        timeout=HANG,
    )
    line = assert_refused(r, rep, "nsys export failed")
    assert "report is damaged" in line
    assert not [n for n in os.listdir(tmp_path / "c" / "nsys-export")]  # no half-written export kept


def test_nsys_export_honours_cancel(tmp_path, monkeypatch):
    from gpuviewer.io.nsys_rep import export_reports

    rep = tmp_path / "r.nsys-rep"
    rep.write_bytes(b"\0" * 64)
    monkeypatch.setenv("PATH", _fake_nsys(tmp_path, "exec sleep 600") + ":/usr/bin:/bin")
    monkeypatch.setenv("GPUVIEWER_CACHE_DIR", str(tmp_path / "c" / "sessions"))
    calls = itertools.count()
    with pytest.raises(Cancelled):
        export_reports([str(rep)], cancelled=lambda: next(calls) >= 2)
    assert not os.listdir(tmp_path / "c" / "nsys-export")
