"""Reading an SQLite file that may be hostile or half-written, and leaving it exactly as it was.

- Opened with the URI parameters mode=ro&immutable=1: SQLite then takes no locks and creates no
  -journal, -wal or -shm file, so a file in a read-only folder opens and nothing appears beside it.
- immutable=1 also ignores a -wal file (transactions committed but not yet copied into the file)
  and a hot -journal (a writer stopped mid-transaction). When one of those is beside the file,
  the file and it are copied into the cache folder, SQLite finishes the job on the copy, and the
  copy is read, with a warning.
- Another program's exclusive lock (SQLite's POSIX byte-range locks, os_unix.c) is seen at once
  and named. While we read we hold SQLite's shared lock ourselves, so no SQLite writer can change
  the file under us although immutable=1 told SQLite it cannot change.
- Every statement runs under a progress handler that honours Cancel and stops a query after
  limits.max_sqlite_steps() thousand virtual-machine steps, plus STEPS_PER_BYTE per byte of the
  file: a query over real tables costs steps in proportion to their size (the largest one on
  nsys_ddp_big, the NVTX scan, ~0.07 per byte), so a 10 GB export is not refused for being big,
  while a small file built to loop (none of its SQL is run, but whatever slips through) is
  stopped soon.
- Only real tables are read: a view, a virtual table or a computed column in place of a table
  would run SQL written by whoever made the file (real_tables, columns).
"""

from __future__ import annotations

import errno
import hashlib
import os
import pathlib
import re
import shutil
import sqlite3
import stat
import tempfile
import time
import warnings
import weakref
from collections.abc import Callable, Iterable

import numpy as np

from . import limits
from .errors import Cancelled, TraceError

LOCKED = "locked by another program (close it or wait)"
TIME_LIMIT = 1 << 62  # |start|, |end| below this: adding a Unix-epoch anchor cannot overflow int64
STEPS_PER_BYTE = 4
_EVERY = 100_000  # VM steps between progress-handler calls: ~1 ms, costs nothing measurable
# SQLite's lock bytes on POSIX: PENDING, RESERVED, then the 510-byte SHARED range.
_PENDING = 0x40000000
_RESERVED = _PENDING + 1
_SHARED_FIRST, _SHARED_SIZE = _PENDING + 2, 510
_VIRTUAL = re.compile(r"\s*CREATE\s+VIRTUAL\b", re.IGNORECASE)


class SafeConnection(sqlite3.Connection):
    """A connection whose every execute() gets a fresh step budget; `source` is the file named in
    messages (the original even when a recovered copy is read); `warnings` says what was done."""

    source = ""
    target = ""  # the file SQLite reads: source, or a recovered copy of it
    warnings: list[str]
    stopped: str | None = None
    _calls = 0
    _max_calls = 0
    _cancelled: Callable[[], bool] | None = None
    _release: Callable[[], None] | None = None

    def execute(self, sql, parameters=(), /):
        self._calls = 0  # the limit is per query
        self.stopped = None
        return super().execute(sql, parameters)

    def _tick(self) -> int:
        # Returning non-zero makes SQLite stop the statement with "interrupted"; explain() turns
        # that into Cancelled or a one-line message.
        self._calls += 1
        if self._cancelled is not None and self._cancelled():
            self.stopped = "cancelled"
            return 1
        if self._calls > self._max_calls:
            self.stopped = "steps"
            return 1
        return 0

    def close(self) -> None:
        try:
            super().close()
        finally:
            if self._release is not None:
                self._release()


def open_readonly(path: str, cancelled: Callable[[], bool] | None = None) -> SafeConnection:
    """The file, read-only and bounded; raises TraceError with one clear sentence."""
    lock_fd = _hold_shared_lock(path)
    try:
        sidecar = _pending_sidecar(path, lock_fd)
        note = None
        target = path
        if sidecar is not None:
            target, note = _recovered_copy(path, sidecar)
        db = _open(target, path, cancelled)
    except BaseException:
        if lock_fd is not None:
            os.close(lock_fd)
        raise
    if lock_fd is not None:
        if sidecar is not None:
            os.close(lock_fd)  # the copy is ours: nothing to guard
        else:
            db._release = weakref.finalize(db, os.close, lock_fd)
    if note:
        db.warnings.append(note)
    return db


def _open(target: str, source: str, cancelled) -> SafeConnection:
    uri = pathlib.Path(os.path.abspath(target)).as_uri() + "?mode=ro&immutable=1"  # quotes ? # % and spaces
    try:
        db = sqlite3.connect(uri, uri=True, timeout=0, factory=SafeConnection)
    except sqlite3.Error as e:
        raise TraceError(source, f"cannot open the SQLite database ({e})") from None
    db.source = source
    db.target = target
    db.warnings = []
    db._cancelled = cancelled
    try:
        size = os.path.getsize(target)
    except OSError:
        size = 0
    db._max_calls = max(1, (limits.max_sqlite_steps() * 1000 + STEPS_PER_BYTE * size) // _EVERY)
    db.set_progress_handler(db._tick, _EVERY)
    try:
        # SQL stored in the file (views, triggers, generated columns) may then call only
        # functions SQLite marks harmless; nothing here writes (query_only).
        db.execute("PRAGMA trusted_schema = OFF")
    except sqlite3.Error:
        pass  # SQLite before 3.31: real_tables() and columns() still refuse such objects
    try:
        db.execute("PRAGMA query_only = 1")
    except sqlite3.Error as e:
        db.close()
        raise TraceError(source, f"cannot open the SQLite database ({e})") from None
    # Strings written by other tools are not always UTF-8 (a Latin-1 author name in the Extra-P
    # samples): show a replacement character rather than refuse the file.
    db.text_factory = lambda b: b.decode("utf-8", "replace")
    return db


def sibling(db: SafeConnection, stop: Callable[[], bool] | None = None) -> SafeConnection:
    """A second connection to the file `db` reads, with the same limits and Cancel, for a query
    on another thread (make it on that thread); `stop` also stops its queries, as Cancel does. It
    takes no lock of its own: closing a descriptor of the file would drop every POSIX lock this
    process holds on it, db's too; db's shared lock covers both while db is open."""
    cancelled = db._cancelled
    if stop is not None and cancelled is not None:
        return _open(db.target, db.source, lambda: cancelled() or stop())
    return _open(db.target, db.source, stop or cancelled)


def explain(db: SafeConnection | None, path: str, e: BaseException) -> BaseException:
    """The exception to raise for an sqlite3 error met while reading `path`."""
    stopped = getattr(db, "stopped", None)
    if stopped == "cancelled":
        return Cancelled()
    if stopped is None and str(e) == "interrupted" and isinstance(e, sqlite3.OperationalError):
        # Our progress handler stopped the statement without saying why: Ctrl+C's KeyboardInterrupt
        # was raised inside it (and swallowed by sqlite3); the file is not damaged.
        return KeyboardInterrupt()
    if stopped == "steps" and db is not None:
        n = db._max_calls * _EVERY // 1000
        return TraceError(
            path,
            f"a query ran past {n:,} thousand SQLite steps and was stopped: the "
            "export is damaged or built never to finish (GPUVIEWER_MAX_SQLITE_KSTEPS "
            "raises the limit)",
        )
    if getattr(e, "sqlite_errorcode", None) in (5, 6) or str(e).startswith("database is locked"):
        return TraceError(path, LOCKED)  # SQLITE_BUSY, SQLITE_LOCKED
    return TraceError(path, f"the export is damaged or cut short (sqlite: {e})")


# -- what may be read --------------------------------------------------------------------------


def real_tables(db: SafeConnection, read: Iterable[str]) -> set[str]:
    """Names of the ordinary tables. A view or virtual table under a name the reader reads
    (`read`) is refused: querying it would run SQL from the file (a recursive view never ends)."""
    wanted = {n.casefold() for n in read}  # SQLite names are case-insensitive
    out = set()
    for typ, name, sql in db.execute("SELECT type, name, sql FROM sqlite_master"):
        if not isinstance(name, str):
            continue
        virtual = typ == "table" and isinstance(sql, str) and _VIRTUAL.match(sql) is not None
        if typ == "table" and not virtual:
            out.add(name)
        elif name.casefold() in wanted and (virtual or typ == "view"):
            what = "a virtual table" if virtual else "a view"
            raise TraceError(
                db.source,
                f"damaged or not an Nsight Systems export: {name} is {what}, "
                "not a table (SQL stored in a file is never run)",
            )
    return out


def columns(db: SafeConnection, table: str) -> set[str]:
    """Column names of a table; a column computed on read (GENERATED ... VIRTUAL) is refused."""
    try:
        rows = db.execute(f'PRAGMA table_xinfo("{table}")').fetchall()
        hidden = 6
    except sqlite3.OperationalError:  # SQLite before 3.26 has no generated columns either
        rows = db.execute(f'PRAGMA table_info("{table}")').fetchall()
        hidden = None
    for r in rows:
        if hidden is not None and r[hidden] == 2:
            raise TraceError(
                db.source,
                f"damaged or not an Nsight Systems export: column {r[1]} of "
                f"{table} is computed by SQL stored in the file (never run)",
            )
    return {r[1] for r in rows if hidden is None or r[hidden] in (0, 3)}


CHUNK = 1 << 16  # rows a fetchmany() turns into Python tuples at a time (never the whole table's)


def row_bound(db: SafeConnection, table: str) -> int:
    """max(rowid) of a table, at most one row per 8 bytes of the file: the rows a fetch can
    return (nsys numbers rows 1..n), to size its columns once. 0 when unknown."""
    try:
        r = db.execute(f'SELECT max(rowid) FROM "{table}"').fetchone()
        size = os.path.getsize(db.source) if db.source and os.path.exists(db.source) else 0
    except (sqlite3.Error, OSError):
        return 0
    if not r or type(r[0]) is not int:
        return 0
    return max(0, min(r[0], size // 8)) if size else 0


def fetch_ints(
    db: SafeConnection,
    sql: str,
    ncols: int,
    required: Iterable[int] = (),
    times: tuple[int, int | None] | None = None,
    rows: int = 0,
    missing: int = -1,
) -> tuple[np.ndarray, int]:
    """(rows as int64, rows dropped). A row is dropped when a `required` column is not an
    integer, or its times (start, end column indexes) are out of range or end before they start;
    other columns that are not integers become `missing`.

    Fetched CHUNK rows at a time into one array of `rows` rows (grown if more come), column-major
    so that a[:, i] is contiguous: only one chunk's Python tuples live at a time. Pages of the
    array never written are never touched, so a generous `rows` costs address space only."""
    cur = db.execute(sql)
    out = np.empty((max(rows, 0), ncols), np.int64, order="F")
    n = bad = 0
    required = tuple(required)
    while True:
        chunk = cur.fetchmany(CHUNK)
        if not chunk:
            break
        try:
            a = np.array(chunk, dtype=np.int64)
            if a.shape != (len(chunk), ncols):
                raise ValueError
        except (TypeError, ValueError, OverflowError):
            a, dropped = _clean(chunk, ncols, required, missing)  # text, NULLs or huge REALs somewhere
            bad += dropped
        del chunk
        if times is not None and len(a):
            s = a[:, times[0]]
            keep = (s > -TIME_LIMIT) & (s < TIME_LIMIT)
            if times[1] is not None:
                e = a[:, times[1]]
                keep &= (e >= s) & (e < TIME_LIMIT)
            if not keep.all():
                bad += int((~keep).sum())
                a = a[keep]
        if n + len(a) > len(out):
            grown = np.empty((max(n + len(a), 2 * len(out)), ncols), np.int64, order="F")
            grown[:n] = out[:n]
            out = grown
        out[n : n + len(a)] = a
        n += len(a)
    return out[:n], bad


def fetch_columns(
    db: SafeConnection,
    table: str,
    exprs: list[str],
    required: Iterable[int] = (),
    times: tuple[int, int | None] | None = None,
    missing: int = -1,
    block: int = 1 << 18,
) -> tuple[np.ndarray, int]:
    """fetch_ints of `SELECT exprs FROM table`, without a Python object per value where every
    value is an integer: SQLite writes each column of a block of rows as one decimal text
    (group_concat) that numpy parses into the preallocated column. Where a value is not an
    integer the table is read by fetch_ints instead, so the result is the same either way: a NULL
    is seen by the block's text holding fewer values than its rows (group_concat leaves NULLs
    out), a text or blob by max(e) being one (they sort after numbers), a real by its text ('1.5',
    '1.0e+30', 'Inf'), which numpy refuses as an int64."""
    try:
        got = _concat_fetch(db, table, exprs, times, block)
    except sqlite3.OperationalError as e:
        # stopped by our limits or Cancel, or "interrupted": Ctrl+C's KeyboardInterrupt raised in
        # the progress handler and swallowed by sqlite3 (explain() turns it back): never retried
        if db.stopped is not None or str(e) == "interrupted":
            raise
        got = None  # fetch_ints meets the same error and says it
    if got is not None:
        return got
    return fetch_ints(
        db,
        f"SELECT {', '.join(exprs)} FROM {table} NOT INDEXED",  # rowid order, as the blocks
        len(exprs),
        required,
        times,
        rows=row_bound(db, table),
        missing=missing,
    )


def _concat_fetch(
    db: SafeConnection, table: str, exprs: list[str], times: tuple[int, int | None] | None, block: int
) -> tuple[np.ndarray, int] | None:
    # blocks of rowids: 256k rows make ~3 MB of text a column, held once by SQLite, once by Python
    count = db.execute(f"SELECT count(*) FROM {table}").fetchone()[0]
    if not count:
        return np.zeros((0, len(exprs)), np.int64), 0
    lo = db.execute(f"SELECT min(rowid) FROM {table}").fetchone()[0]
    hi = db.execute(f"SELECT max(rowid) FROM {table}").fetchone()[0]
    if type(lo) is not int or type(hi) is not int or hi - lo >= 2 * count + block:
        return None  # rowids far apart: blocks of rowids would be mostly empty
    # A NULL is left out by group_concat, so the parse finds fewer than count(*) values (a text
    # that adds a comma makes max() a text): no count(e) per column (the x10 tiles' NVTX blocks:
    # 2.6 -> 1.7 CPU seconds of SQLite). An expression asked for twice (globalTid, split into
    # process and thread) is fetched once. The rowid is not written as text where a block holds
    # every rowid of its range: NOT INDEXED leaves SQLite only the table's own b-tree, which it
    # visits in rowid order, so the block's rowids are the range (the NVTX table's blocks: 2.5 ->
    # 1.75 CPU seconds).
    uniq = [e for e in dict.fromkeys(exprs) if e != "rowid"]
    text = "".join(f", group_concat({e}, ','), typeof(max({e}))" for e in uniq)
    place = [[j for j, x in enumerate(exprs) if x == e] for e in uniq]
    rowid_at = [j for j, x in enumerate(exprs) if x == "rowid"]
    out = np.empty((count, len(exprs)), np.int64, order="F")
    n = bad = 0
    for first in range(lo, hi + 1, block):
        last = min(first + block - 1, hi)
        cur = db.execute(f"SELECT count(*){text} FROM {table} NOT INDEXED WHERE rowid BETWEEN ? AND ?", (first, last))
        row = cur.fetchone()
        k = row[0]
        if not k:
            continue
        if n + k > count:
            return None
        a = out[n : n + k]
        for u, js in enumerate(place):
            s, top = row[1 + 2 * u : 3 + 2 * u]
            col = _parse_ints(s, k) if top == "integer" else None
            if col is None:
                return None
            for j in js:
                a[:, j] = col
        if rowid_at:
            if k == last - first + 1:
                col = np.arange(first, last + 1, dtype=np.int64)
            else:  # rows deleted from the range: its rowids as text, in the same order
                ids = db.execute(
                    f"SELECT group_concat(rowid, ',') FROM {table} NOT INDEXED WHERE rowid BETWEEN ? AND ?",
                    (first, last),
                ).fetchone()[0]
                col = _parse_ints(ids, k)
                if col is None:
                    return None
            for j in rowid_at:
                a[:, j] = col
        del row
        if times is not None:
            st = a[:, times[0]]
            keep = (st > -TIME_LIMIT) & (st < TIME_LIMIT)
            if times[1] is not None:
                e = a[:, times[1]]
                keep &= (e >= st) & (e < TIME_LIMIT)
            if not keep.all():
                bad += int((~keep).sum())
                m = int(keep.sum())
                a[:m] = a[keep]
                k = m
        n += k
    return out[:n], bad


def _parse_ints(s, k: int) -> np.ndarray | None:
    """k integers written by SQLite with commas between them; None when the text holds anything
    else (a real's '.', 'e' or 'Inf') or another count."""
    if type(s) is not str:
        return None
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # numpy warns, or raises, where it stops reading
        try:
            col = np.fromstring(s, dtype=np.int64, sep=",")
        except (ValueError, DeprecationWarning):
            return None
    return col if len(col) == k else None


def _clean(rows: list, ncols: int, required: tuple[int, ...], missing: int = -1) -> tuple[np.ndarray, int]:
    out = []
    bad = 0
    for r in rows:
        if any(type(r[i]) is not int for i in required):
            bad += 1
            continue
        out.append([v if type(v) is int else missing for v in r])  # SQLite's integers fit int64
    if not out:
        return np.zeros((0, ncols), np.int64), bad
    return np.array(out, dtype=np.int64).reshape(len(out), ncols), bad


# -- locks and sidecar files -----------------------------------------------------------------


def _hold_shared_lock(path: str) -> int | None:
    """Take SQLite's shared lock on the file as SQLite itself would (read locks on PENDING, then
    on the SHARED range; PENDING let go), without waiting. Returns the descriptor that holds it,
    or None where POSIX locks are not available. Raises TraceError when a writer holds the file.

    POSIX locks belong to the process: closing this descriptor also drops locks that another
    SQLite connection of this process holds on the file. This program opens files only here,
    with immutable=1 (which takes no locks), so there are none to drop."""
    try:
        import fcntl
    except ImportError:  # Windows: SQLite's locks there are LockFileEx; read without the check
        return None
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NONBLOCK", 0))
    except OSError as e:
        raise TraceError(path, f"cannot open it ({e.strerror})") from None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise TraceError(path, "not a regular file")
        fcntl.lockf(fd, fcntl.LOCK_SH | fcntl.LOCK_NB, 1, _PENDING)
        fcntl.lockf(fd, fcntl.LOCK_SH | fcntl.LOCK_NB, _SHARED_SIZE, _SHARED_FIRST)
        fcntl.lockf(fd, fcntl.LOCK_UN, 1, _PENDING)
    except OSError as e:
        os.close(fd)
        if e.errno in (errno.EACCES, errno.EAGAIN):
            raise TraceError(path, LOCKED) from None
        return None  # no lock support here (ENOLCK on some network file systems): read anyway
    except BaseException:
        os.close(fd)
        raise
    return fd


def _reserved_by_other(fd: int | None) -> bool:
    """Whether a writer holds RESERVED: its -journal is then in use, not left behind."""
    if fd is None:
        return False
    import fcntl

    try:
        fcntl.lockf(fd, fcntl.LOCK_SH | fcntl.LOCK_NB, 1, _RESERVED)
    except OSError:
        return True
    fcntl.lockf(fd, fcntl.LOCK_UN, 1, _RESERVED)
    return False


def _regular(p: str, min_size: int) -> bool:
    try:
        st = os.lstat(p)  # never follow a link: -wal -> /dev/zero would never finish copying
    except OSError:
        return False
    return stat.S_ISREG(st.st_mode) and st.st_size > min_size


def _pending_sidecar(path: str, fd: int | None) -> str | None:
    """The -wal file, or hot -journal, beside the file whose content immutable=1 would miss."""
    if _regular(path + "-wal", 32):  # more than the 32-byte WAL header: it holds frames
        return path + "-wal"
    j = path + "-journal"
    if _regular(j, 0) and not _reserved_by_other(fd):
        try:
            with open(j, "rb") as f:
                first = f.read(1)
        except OSError:
            return None
        if first not in (b"", b"\0"):  # a zeroed header (journal_mode=PERSIST) is not hot
            return j
    return None


def copies_root() -> str:
    from .cache import cache_root

    return os.path.join(os.path.dirname(cache_root()), "sqlite-recovered")


def _recovered_copy(path: str, sidecar: str) -> tuple[str, str]:
    """A copy of the file with the sidecar's content applied, in the cache folder (reused while
    neither file changes, so event arguments read later see the same rows); and the warning."""
    suffix = sidecar[len(path) :]
    root = copies_root()
    try:
        os.makedirs(root, exist_ok=True)
        st, sst = os.stat(path), os.stat(sidecar)
    except OSError as e:
        raise TraceError(path, f"cannot read the {suffix} file beside it ({e.strerror})") from None
    tag = hashlib.sha256(os.path.abspath(path).encode()).hexdigest()[:16]
    key = hashlib.sha256(
        f"{st.st_size}:{st.st_mtime_ns}:{suffix}:{sst.st_size}:{sst.st_mtime_ns}".encode()
    ).hexdigest()[:16]
    dest = os.path.join(root, f"{tag}-{key}.sqlite")
    if suffix == "-wal":
        note = (
            f"a {suffix} file beside it holds transactions not yet written into the file; they are "
            f"read from a copy in {root} (the file and its {suffix} are left as they are)"
        )
    else:
        note = (
            f"a {suffix} file beside it shows an interrupted write; the file is read as it was "
            f"before that write, from a copy in {root} (the file is left as it is)"
        )
    if os.path.isfile(dest):
        return dest, note
    need = st.st_size + sst.st_size
    try:
        free = shutil.disk_usage(root).free
    except OSError:
        free = need + (64 << 20)
    if free < need + (64 << 20):
        raise TraceError(
            path,
            f"a {suffix} file beside it must be read from a copy, and {root} has less than {need / 1e9:.1f} GB free",
        )
    _drop_stale(root, tag)
    tmp = tempfile.mkdtemp(prefix=".tmp-", dir=root)
    try:
        work = os.path.join(tmp, "copy.sqlite")
        shutil.copyfile(path, work)
        shutil.copyfile(sidecar, work + suffix)
        db = sqlite3.connect(work, timeout=0)  # our own copy: SQLite may write beside it
        try:
            db.execute("PRAGMA trusted_schema = OFF")
            db.execute("SELECT count(*) FROM sqlite_master").fetchone()  # rolls a hot journal back
            db.execute("PRAGMA journal_mode = DELETE").fetchone()  # moves the WAL's frames in
        finally:
            db.close()
        os.replace(work, dest)
    except sqlite3.Error as e:
        raise TraceError(
            path, f"the export is damaged or cut short (sqlite, with the {suffix} file beside it: {e})"
        ) from None
    except OSError as e:
        raise TraceError(path, f"cannot copy it to read the {suffix} file beside it ({e.strerror})") from None
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return dest, note


def _drop_stale(root: str, tag: str) -> None:
    """Older copies of the same file, and work folders a killed reader left a day ago or more."""
    try:
        names = os.listdir(root)
    except OSError:
        return
    for n in names:
        p = os.path.join(root, n)
        try:
            if n.startswith(tag + "-"):
                os.remove(p)
            elif n.startswith(".tmp-") and time.time() - os.stat(p).st_mtime > 86400:
                shutil.rmtree(p, ignore_errors=True)
        except OSError:
            pass
