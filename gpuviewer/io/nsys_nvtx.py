"""NVTX_EVENTS of an Nsight Systems export (part of nsys.py's reader): ranges, marks, steps.

A row whose thread or event type is not an integer is skipped as it always was; a row whose times
are not integers, are out of range or end before they start is skipped and counted
(rep.bad_rows), checked on whole columns after the loop.
"""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Callable

import numpy as np

from ..model.categories import Cat, LaneKind
from ..model.trace import Step
from . import sqlite_safe as sq
from .factorize import factorize

NVTX_RANGES = (59, 60, 70, 71)  # push/pop and start/end ranges (and their NVTXt twins)
NVTX_MARK = 34
NVTX_DOMAIN_CREATE = 75
# At most 18 digits: a step number must fit int64 (the cache and JSON output hold it as one).
_STEP = re.compile(r"^(?:step[ _#]?|ProfilerStep#)(\d{1,18})$", re.IGNORECASE)


def _short_nvtx(s: str) -> str:
    """PyTorch emit_nvtx names ("aten::add, seq = 3, op_id = 7, sizes = [...]") are grouped by
    the op; the rest stays in the row's arguments."""
    cut = s.find(", ")
    if cut > 0 and ("op_id =" in s or "seq =" in s or "sizes =" in s):
        return s[:cut]
    return s


# Sentinels of the integer fetch (below any valid time, so a bad value fails the time check):
# a value that is not an integer, and an end that is NULL (an open range, or a mark).
BAD = -(1 << 63) + 1
NULL_END = BAD + 1
# The emit_nvtx name cut (_short_nvtx) done by SQLite for the rows that have 'op_id =' (every
# emit_nvtx name has it, 'seq =' only some), so that the Python side sees a few hundred distinct
# names rather than one per op; _short_nvtx runs again on each distinct one (it cuts the rest; a
# cut name is cut no further).
_SHORT_SQL = (
    "CASE WHEN eventType != 75 AND typeof(text) = 'text' AND instr(text, 'op_id =') > 0 AND "
    "instr(text, ', ') > 1 THEN substr(text, 1, instr(text, ', ') - 1) ELSE text END"
)
_SEP, _ID = "\x1f", "\x1e"  # between the texts of a block; before a textId (the text is NULL)


def fetch_nvtx(rep) -> Callable[[], dict | None]:
    """The integer columns of NVTX_EVENTS, every row (rowid, start, end, eventType, globalTid,
    domainId), and its texts (_texts_of), each fetched on a worker from now on (Report.submit);
    the function returned waits for the integer columns (None when the table is absent or lacks
    them), the texts stay a Future until read_nvtx needs them."""
    t = "NVTX_EVENTS"
    if t not in rep.tables:
        return lambda: None
    have = sq.columns(rep.db, t)
    if not {"start", "eventType", "globalTid"} <= have:
        return lambda: None
    end = f"coalesce(end, {NULL_END})" if "end" in have else str(NULL_END)
    dom = "coalesce(domainId, 0)" if "domainId" in have else "0"
    # a NULL start, type or thread becomes BAD (missing=) like any value that is not an integer
    ints = rep.later(t, ["rowid", "start", end, "eventType", "globalTid", dom], (), None, BAD)
    texts = [rep.submit(_texts_of, have)]  # a second scan, beside the first

    def nvtx() -> dict:
        a = ints()
        g = a[:, 4]
        return {
            "have": have,
            "texts": texts.pop(),  # handed over: read_nvtx's caller lets it go
            "rowid": a[:, 0],
            "start": a[:, 1],
            "end": a[:, 2],
            "type": a[:, 3],
            "gtid": g,
            "dom": a[:, 5],
            "pid": (g >> 24) & 0xFFFFFF,
        }

    return nvtx


def nvtx_pids(nv: dict | None) -> np.ndarray:
    """Processes with NVTX rows (any event type), for sessions without GPU work."""
    if nv is None or not len(nv["gtid"]):
        return np.zeros(0, np.int64)
    return factorize(nv["pid"][nv["gtid"] >= 0])[0]


def _texts_of(db, have: set[str]) -> tuple[np.ndarray, list]:
    return _texts(db, have, db.execute("SELECT count(*) FROM NVTX_EVENTS").fetchone()[0])


def _texts(db, have: set[str], n: int) -> tuple[np.ndarray, list]:
    """Each row's (text, textId) as a code into the distinct pairs (in order of first
    appearance): the text is a Python string per row only while its chunk is fetched."""
    text = _SHORT_SQL if "text" in have else "NULL"
    text_id = "textId" if "textId" in have else "NULL"
    sql = f"SELECT {text}, {text_id} FROM NVTX_EVENTS NOT INDEXED"  # rowid order, as the integer columns
    factory = db.text_factory
    db.text_factory = str  # C decoding; text that is not UTF-8 is read again with the replacing decoder
    try:
        for f in (str, factory):
            db.text_factory = f
            try:
                got = _block_codes(db, n, have) if {"text", "textId"} <= have else None
                return got if got is not None else _codes(db, sql, n)
            except sqlite3.OperationalError:
                if db.stopped is not None or f is factory:
                    raise
    finally:
        db.text_factory = factory
    raise AssertionError("unreachable")


def _block_codes(db, n: int, have: set[str], block: int = 1 << 18) -> tuple[np.ndarray, list] | None:
    """_codes without a Python tuple per row: SQLite joins a block's texts with \\x1f between them
    (a NULL text as \\x1e and its textId). None (read row by row) unless every text is text and
    every textId an integer or NULL, and the block splits into exactly its rows and NULL texts."""
    t = "NVTX_EVENTS"
    lo = db.execute(f"SELECT min(rowid) FROM {t}").fetchone()[0]
    hi = db.execute(f"SELECT max(rowid) FROM {t}").fetchone()[0]
    if n == 0 or type(lo) is not int or type(hi) is not int or hi - lo >= 2 * n + block:
        return None
    sql = (
        f"SELECT count(*), group_concat(coalesce({_SHORT_SQL}, char(30) || coalesce(textId, '')), "
        "char(31)), count(text), typeof(min(text)), typeof(max(text)), typeof(min(textId)), "
        f"typeof(max(textId)) FROM {t} NOT INDEXED WHERE rowid BETWEEN ? AND ?"
    )
    codes = np.empty(n, np.int32)
    lut: dict = {}
    k = 0
    for first in range(lo, hi + 1, block):
        m, joined, texts, *kinds = db.execute(sql, (first, min(first + block - 1, hi))).fetchone()
        if not m:
            continue
        if not (
            set(kinds[:2]) <= {"text", "null"}
            and set(kinds[2:]) <= {"integer", "null"}
            and type(joined) is str
            and joined.count(_ID) == m - texts
            and k + m <= n
        ):
            return None
        items = joined.split(_SEP)
        del joined
        if len(items) != m:
            return None
        codes[k : k + m] = [lut.setdefault(x, len(lut)) for x in items]
        k += m
    if k != n:
        return None
    keys = [(None, int(x[1:]) if len(x) > 1 else None) if x[:1] == _ID else (x, None) for x in lut]
    return codes, keys


def _codes(db, sql: str, n: int) -> tuple[np.ndarray, list]:
    cur = db.execute(sql)
    codes = np.empty(n, np.int32)
    lut: dict = {}
    k = 0
    while True:
        chunk = cur.fetchmany(sq.CHUNK)
        if not chunk:
            break
        codes[k : k + len(chunk)] = [lut.setdefault(r, len(lut)) for r in chunk]
        k += len(chunk)
    if k != n:  # the file is immutable while we read: two scans see the same rows
        raise sqlite3.DatabaseError("NVTX_EVENTS changed while it was read")
    return codes, list(lut)


def _raw_text(key, strings) -> str:
    text, text_id = key
    raw = text if text is not None else strings.get(text_id, "")
    if type(raw) is not str:  # a number or blob stored as the text
        raw = raw.decode("utf-8", "replace") if isinstance(raw, bytes) else str(raw)
    return raw


def _first_order(key: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(the row where each distinct key first appears, in order of appearance; each row's
    position in that order)."""
    _, first, inv = factorize(key)
    order = np.argsort(first, kind="stable")
    pos = np.empty(len(order), np.int64)
    pos[order] = np.arange(len(order))
    return first[order], pos[inv]


def read_nvtx(rep, b, rank_of, source, warnings, nv: dict | None) -> None:
    """NVTX ranges and marks of the ranks' threads, and steps from ranges named "step N";
    nv: fetch_nvtx's columns."""
    t = "NVTX_EVENTS"
    if nv is None or not len(nv["rowid"]):
        return
    lim = sq.TIME_LIMIT
    start, end, et, g = nv["start"], nv["end"], nv["type"], nv["gtid"]
    is_null_end = end == NULL_END
    # The capture's end closes ranges without one: the latest end (or start, for a row without
    # one) of any row; only rows with valid times count when some are not.
    last = np.where(is_null_end | (end == 0), start, end)
    session_end = int(last.max())
    if not -lim < session_end < lim or (start == BAD).any() or (end == BAD).any():
        ok = (start > -lim) & (start < lim) & (is_null_end | ((end >= start) & (end < lim)))
        session_end = int(last[ok].max()) if ok.any() else 0
    del last
    codes, keys = nv["texts"].result()
    if len(codes) != len(start):  # the file is immutable while we read: two scans see the same rows
        raise sqlite3.DatabaseError("NVTX_EVENTS changed while it was read")
    strings = rep.strings
    valid_g = g != BAD
    domains = {}
    for i in np.flatnonzero((et == NVTX_DOMAIN_CREATE) & valid_g).tolist():
        name = _raw_text(keys[codes[i]], strings)
        if name:
            domains[(int(nv["pid"][i]), int(nv["dom"][i]))] = str(name)
    ranks = np.array(sorted(rank_of), np.int64)
    keep = np.isin(et, NVTX_RANGES + (NVTX_MARK,)) & valid_g & np.isin(nv["pid"], ranks)
    rows = np.flatnonzero(keep)
    del keep, valid_g
    if not len(rows):
        return
    # Columns of millions of rows: each temporary is let go as soon as it has served (the x10
    # tiles' peak memory is here).
    # names: interned in order of first appearance, as a row-by-row reader would
    row_codes = codes[rows]
    first, name_pos = _first_order(row_codes)
    name_of = np.array(
        [b.names.id(_short_nvtx(_raw_text(keys[c], strings) or "")) for c in row_codes[first].tolist()], np.int32
    )
    name_a = name_of[name_pos]
    del row_codes, name_pos
    # lanes: one per (process, thread, domain), made in order of first appearance
    thread = g[rows] & 0xFFFFFFFFFFFF  # (pid << 24) | tid
    dom = nv["dom"][rows]
    dom0 = np.where(dom == BAD, 0, dom) if (dom == BAD).any() else dom
    dvals, _, dcode = factorize(dom0)
    if len(dvals) == 1:
        lane_key = thread
    elif len(dvals) < 1 << 14:
        lane_key = thread * len(dvals) + dcode
    else:  # thousands of domains: number (thread, domain) pairs another way
        _, lane_key = np.unique(np.stack([thread, dom0], 1), axis=0, return_inverse=True)
        lane_key = lane_key.reshape(-1)
    del dcode
    first, lane_pos = _first_order(lane_key)
    del lane_key
    lane_of = np.empty(len(first), np.int32)
    for k, i in enumerate(first.tolist()):
        th_key, d0 = int(thread[i]), int(dom0[i])
        p, th = th_key >> 24, th_key & 0xFFFFFF
        dname = domains.get((p, int(dom[i])))
        label = f"NVTX{' ' + dname if dname else ''} · thread {th}"
        lane_of[k] = b.lane(
            rank_of[p],
            LaneKind.NVTX,
            -1,
            th * 1000 + d0 if d0 else th,
            label,
            pid=p,
            source=source,
            tid=th if d0 else -1,
            domain=(dname or "") if d0 else "",
        )
    del thread, dom, dom0
    lane_a = lane_of[lane_pos]
    del lane_pos
    is_mark = et[rows] == NVTX_MARK
    start_a, end_a = start[rows], end[rows]
    null_end = is_null_end[rows]
    del is_null_end
    open_range = null_end & ~is_mark
    open_ended = int(open_range.sum())
    if open_ended:
        warnings.append(f"{open_ended} NVTX ranges without an end (closed at the end of the capture)")
    if null_end.any():
        end_a = np.where(open_range, session_end, np.where(null_end, start_a, end_a))
    del null_end, open_range
    # Times are checked here, on whole columns.
    ok = (start_a > -lim) & (start_a < lim) & (end_a >= start_a) & (end_a < lim)
    if not ok.all():
        rep.bad_rows[t] = int((~ok).sum())
    dur_a = end_a - start_a
    del end_a
    start_a += rep.utc_ns  # a copy (indexed by rows): changed in place
    src = nv["rowid"][rows]
    del rows
    rng = ~is_mark & ok
    mark = is_mark & ok
    every = bool(rng.all())  # no marks, no bad times: the columns as they are, not copies
    b.add(
        start=start_a if every else start_a[rng],
        dur=dur_a if every else dur_a[rng],
        lane=lane_a if every else lane_a[rng],
        name=name_a if every else name_a[rng],
        cat=np.full(int(rng.sum()), Cat.NVTX, np.uint8),
        src=src if every else src[rng],
    )
    del src
    if mark.any():
        b.add_instants(start_a[mark], lane_a[mark], name_a[mark])
    # Steps: NVTX ranges "step N" (or ProfilerStep#N), per rank; the first of each wins.
    step_of = {}
    for n in np.unique(name_of).tolist():
        m = _STEP.match(b.names.strings[n])
        if m:
            step_of[n] = int(m.group(1))
    if not step_of:
        return
    cand = np.flatnonzero(rng & np.isin(name_a, np.array(list(step_of), np.int32)))
    seen = set()
    for i in cand.tolist():
        key = (b.lanes[int(lane_a[i])].rank, step_of[int(name_a[i])])
        if key not in seen:
            seen.add(key)
            s = int(start_a[i])
            b.steps.append(Step(key[0], key[1], s, s + int(dur_a[i])))
