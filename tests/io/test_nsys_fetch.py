"""Issue 31 item 3: nsys tables read in typed blocks (sqlite_safe.fetch_columns: SQLite's
group_concat text parsed by numpy) give exactly what the row-by-row fetch (fetch_ints) gives,
for clean tables, for every kind of value that is not an integer, and on a real export."""

import sqlite3

import numpy as np
import pytest
from conftest import trace_path

from gpuviewer.io import sqlite_safe as sq

BIG = trace_path("nsys", "nsys_ddp_big.sqlite")
EXPRS = ["rowid", "start", "end", "coalesce(tid, -1)"]


def _table(path, rows, rowids=None):
    db = sqlite3.connect(path)
    db.execute("CREATE TABLE T (start, end, tid)")
    if rowids is None:
        db.executemany("INSERT INTO T VALUES (?, ?, ?)", rows)
    else:
        db.executemany(
            "INSERT INTO T (rowid, start, end, tid) VALUES (?, ?, ?, ?)", [(r, *row) for r, row in zip(rowids, rows)]
        )
    db.commit()
    db.close()


def _both(path, block=4, required=(0, 1, 2), times=(1, 2)):
    db = sq.open_readonly(str(path))
    try:
        fast = sq.fetch_columns(db, "T", EXPRS, required, times, block=block)
        slow = sq.fetch_ints(db, f"SELECT {', '.join(EXPRS)} FROM T", len(EXPRS), required, times)
    finally:
        db.close()
    return fast, slow


CLEAN = [(10 * i, 10 * i + 5, i % 3) for i in range(23)] + [(-7, 9, 1 << 40), ((1 << 62) - 9, (1 << 62) - 2, 2)]


@pytest.mark.parametrize(
    "odd,fast_path",
    [
        (None, True),  # every value an integer: the blocks' texts are used
        ((5, "end", None), False),  # NULL in a required column (counted, dropped)
        ((5, "tid", None), True),  # NULL under coalesce: a value like any other
        ((7, "start", "12"), False),  # text that reads as a number
        ((7, "start", "abc"), False),
        ((9, "end", 1.5), False),  # reals, whole or not, and beyond int64
        ((9, "end", 3.0), False),
        ((9, "tid", 1e30), False),
        ((11, "tid", b"\x01\x02"), False),  # blob
        ((3, "end", "5,6"), False),  # a comma inside a text cannot shift the columns
        ((20, "end", 0), True),  # end before start: counted by the time check
    ],
)
def test_blocks_equal_row_fetch(tmp_path, odd, fast_path):
    rows = [list(r) for r in CLEAN]
    if odd is not None:
        i, col, v = odd
        rows[i][("start", "end", "tid").index(col)] = v
    p = tmp_path / "t.sqlite"
    _table(p, rows)
    (fa, fbad), (sa, sbad) = _both(p)
    assert fbad == sbad
    assert fa.dtype == np.int64 and fa.shape == sa.shape and (fa == sa).all()
    if odd is None:
        assert len(fa) == len(CLEAN) and fa[:, 1].tolist() == [r[0] for r in CLEAN]
    db = sq.open_readonly(str(p))
    try:  # which path read it: the blocks' texts, or (None) the row-by-row fetch
        assert (sq._concat_fetch(db, "T", EXPRS, (1, 2), 4) is not None) == fast_path
    finally:
        db.close()


def test_sparse_and_empty_tables(tmp_path):
    p = tmp_path / "sparse.sqlite"
    _table(p, CLEAN[:5], rowids=[1, 2, 3, 1 << 40, (1 << 62)])  # blocks of rowids would be empty
    (fa, fbad), (sa, sbad) = _both(p)
    assert (fa == sa).all() and fa[:, 0].tolist() == [1, 2, 3, 1 << 40, 1 << 62] and fbad == sbad == 0
    e = tmp_path / "empty.sqlite"
    _table(e, [])
    (fa, _), (sa, _) = _both(e)
    assert fa.shape == sa.shape == (0, len(EXPRS))


def test_rowids_with_gaps_and_an_index(tmp_path):
    """Rows deleted here and there: a block that lacks some rowids of its range reads them as
    text, a full block takes them from the range. An index that holds every column asked for
    does not change the order (NOT INDEXED): each row keeps its own rowid."""
    p = tmp_path / "gaps.sqlite"
    rowids = [i for i in range(1, 26) if i % 5][:20]
    _table(p, CLEAN[:20], rowids=rowids)
    db = sqlite3.connect(p)
    db.execute("CREATE INDEX by_tid ON T (tid, end, start)")  # covering, in another order
    db.commit()
    db.close()
    (fa, fbad), (sa, sbad) = _both(p)
    assert fbad == sbad == 0 and (fa == sa).all()
    assert fa[:, 0].tolist() == rowids and fa[:, 1].tolist() == [r[0] for r in CLEAN[:20]]
    rdb = sq.open_readonly(str(p))
    try:
        assert sq._concat_fetch(rdb, "T", EXPRS, (1, 2), 4) is not None  # read as texts
    finally:
        rdb.close()


@pytest.fixture(scope="module")
def big_db():
    db = sq.open_readonly(BIG)
    yield db
    db.close()


@pytest.mark.parametrize(
    "table,exprs",
    [
        (
            "CUPTI_ACTIVITY_KIND_RUNTIME",
            ["rowid", "start", "end", "globalTid", "coalesce(correlationId, 0)", "coalesce(nameId, -1)"],
        ),
        ("NVTX_EVENTS", ["rowid", "start", "coalesce(end, -5)", "eventType", "coalesce(domainId, 0)"]),
    ],
)
def test_real_tables_equal_row_fetch(big_db, table, exprs):
    """A real export, in blocks smaller than its tables (several blocks) and whole."""
    slow, sbad = sq.fetch_ints(big_db, f"SELECT {', '.join(exprs)} FROM {table}", len(exprs), (0, 1), (1, 2))
    n = big_db.execute(f"SELECT count(*) FROM {table}").fetchone()[0]
    assert len(slow) == n - sbad > 90_000
    for block in (30_000, 1 << 18):
        fast, fbad = sq.fetch_columns(big_db, table, exprs, (0, 1), (1, 2), block=block)
        assert fbad == sbad and (fast == slow).all()
    assert sq._concat_fetch(big_db, table, exprs, (1, 2), 1 << 18) is not None  # read as texts


# -- NVTX texts: joined by SQLite in blocks, or row by row -------------------------------------


def _nvtx_texts(db, block):
    from gpuviewer.io.nsys_nvtx import _SHORT_SQL, _block_codes, _codes, _raw_text

    n = db.execute("SELECT count(*) FROM NVTX_EVENTS").fetchone()[0]
    have = sq.columns(db, "NVTX_EVENTS")
    strings = dict(db.execute("SELECT id, value FROM StringIds"))
    fast = _block_codes(db, n, have, block)
    slow = _codes(db, f"SELECT {_SHORT_SQL}, textId FROM NVTX_EVENTS", n)
    per_row = [[_raw_text(keys[c], strings) for c in codes.tolist()] for codes, keys in filter(None, (fast, slow))]
    return fast is not None, per_row


@pytest.mark.parametrize(
    "odd,fast_path",
    [
        (None, True),
        (("text", ""), True),  # an empty text is not a NULL text
        (("text", "a\x1fb"), False),  # the separator inside a text
        (("text", "\x1e7"), False),  # looks like a NULL text with textId 7
        (("text", 7), False),  # a number or blob as the text
        (("text", b"AB"), False),
        (("textId", "x"), False),
    ],
)
def test_nvtx_text_blocks_equal_rows(tmp_path, odd, fast_path):
    p = tmp_path / "nvtx.sqlite"
    db = sqlite3.connect(p)
    db.executescript(
        "CREATE TABLE StringIds (id, value); CREATE TABLE NVTX_EVENTS (start, end, eventType, "
        "globalTid, text, textId, domainId); INSERT INTO StringIds VALUES (7, 'seven'), (8, 'eight');"
    )
    rows = [
        (
            i,
            i + 1,
            59,
            1,
            f"aten::op{i % 3}, seq = {i}, op_id = {i}" if i % 4 else None,
            7 + i % 2 if i % 4 == 0 else None,
            0,
        )
        for i in range(13)
    ] + [(20, 21, 75, 1, "domain, seq = 1", None, 1), (22, 23, 59, 1, None, None, 0)]
    if odd:
        rows[5] = rows[5][:4] + ((odd[1], None) if odd[0] == "text" else (None, odd[1])) + (0,)
    db.executemany("INSERT INTO NVTX_EVENTS VALUES (?, ?, ?, ?, ?, ?, ?)", rows)
    db.commit()
    db.close()
    rdb = sq.open_readonly(str(p))
    try:
        fast, per_row = _nvtx_texts(rdb, 4)
    finally:
        rdb.close()
    assert fast == fast_path
    if fast:
        assert per_row[0] == per_row[1]
    assert (
        per_row[-1][0] == "seven"
        and per_row[-1][1] == "aten::op1"
        and per_row[-1][4] == "seven"
        and per_row[-1][13] == "domain, seq = 1"
    )


def test_nvtx_texts_of_a_real_export(big_db):
    fast, per_row = _nvtx_texts(big_db, 100_000)
    assert fast and per_row[0] == per_row[1] and len(per_row[0]) == 213_532


@pytest.mark.parametrize(
    "key",
    [
        np.repeat(np.arange(30, dtype=np.int64) << 40, 1000)[::-1],  # few values, far apart
        np.arange(10_000, dtype=np.int64) % 97 - 40,  # negative, every row a repeat
        np.arange(9_000, dtype=np.int64) * 7,  # more distinct values than the sample (a table of the span)
        np.arange(9_000, dtype=np.int64)[::-1] << 30,  # the same, far apart: np.unique
        np.array([3, -(1 << 62), 3, 1 << 62], np.int64),  # a span beyond int64
        np.array([7, 2, 7, 2, 5], np.int32),
        np.concatenate([np.zeros(200_000, np.int64), [5], np.zeros(9, np.int64), [-3]]),  # values first seen late
        np.array([5, 5, 1, 9, 1], np.int64),
        np.zeros(0, np.int64),
    ],
)
def test_factorize_is_unique(key):
    from gpuviewer.io.factorize import factorize

    u, first, inv = factorize(key)
    want = np.unique(key, return_index=True, return_inverse=True)
    assert (u == want[0]).all() and (first == want[1]).all() and (inv == want[2].reshape(-1)).all()


def test_an_expression_asked_twice(big_db):
    """globalTid is asked for twice (process and thread): fetched once, both columns filled."""
    exprs = ["rowid", "start", "end", "globalTid", "globalTid", "coalesce(nameId, -1)"]
    t = "OSRT_API"
    fast, fbad = sq.fetch_columns(big_db, t, exprs, (0, 1, 2, 3), (1, 2))
    slow, sbad = sq.fetch_ints(big_db, f"SELECT {', '.join(exprs)} FROM {t}", len(exprs), (0, 1, 2, 3), (1, 2))
    assert fbad == sbad and (fast == slow).all() and (fast[:, 3] == fast[:, 4]).all() and len(fast) > 100_000
