"""NVTX_EVENTS of an Nsight Systems export (part of nsys.py's reader): ranges, marks, steps.

A row whose thread or event type is not an integer is skipped as it always was; a row whose times
are not integers, are out of range or end before they start is skipped and counted
(rep.bad_rows), checked on whole columns after the loop.
"""
from __future__ import annotations

import re

import numpy as np

from ..model.categories import Cat, LaneKind
from ..model.trace import Step
from . import sqlite_safe as sq

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


def read_nvtx(rep, b, rank_of, source, warnings) -> None:
    """NVTX ranges and marks of the ranks' threads, and steps from ranges named "step N"."""
    t = "NVTX_EVENTS"
    if t not in rep.tables:
        return
    have = sq.columns(rep.db, t)
    if not {"start", "eventType", "globalTid"} <= have:
        return
    text = "text" if "text" in have else "NULL"
    text_id = "textId" if "textId" in have else "NULL"
    end = "end" if "end" in have else "NULL"
    dom = "domainId" if "domainId" in have else "0"
    rows = rep.db.execute(
        f"SELECT rowid, start, {end}, eventType, globalTid, {text}, {text_id}, {dom} FROM {t}").fetchall()
    if not rows:
        return
    # Values are checked in Python, in the loops there are anyway: more SQL costs more (213k rows).
    lim = sq.TIME_LIMIT
    try:
        session_end = max((r[2] or r[1]) for r in rows)
    except TypeError:  # text among the numbers
        session_end = None
    if type(session_end) is not int or not -lim < session_end < lim:
        session_end = max((r[2] or r[1] for r in rows if _nvtx_times_ok(r[1], r[2])), default=0)
    domains = {}
    for r in rows:
        if r[3] == NVTX_DOMAIN_CREATE and type(r[4]) is int:
            name = r[5] if r[5] is not None else rep.strings.get(r[6])
            if name:
                domains[(r[4] >> 24 & 0xFFFFFF, r[7])] = str(name)
    names_cache: dict = {}
    rowid, start, end_l, lane_l, name_l, is_mark = [], [], [], [], [], []
    lane_ids: dict = {}
    open_ended = 0
    for r in rows:
        et = r[3]
        if et not in NVTX_RANGES and et != NVTX_MARK:
            continue
        g = r[4]
        if type(g) is not int:
            continue
        pid, tid = g >> 24 & 0xFFFFFF, g & 0xFFFFFF
        if pid not in rank_of:
            continue
        raw = r[5] if r[5] is not None else rep.strings.get(r[6], "")
        if type(raw) is not str:  # a number or blob stored as the text
            raw = raw.decode("utf-8", "replace") if isinstance(raw, bytes) else str(raw)
        nid = names_cache.get(raw)
        if nid is None:
            nid = names_cache[raw] = b.names.id(_short_nvtx(raw or ""))
        key = (pid, tid, r[7] if type(r[7]) is int else 0)
        ln = lane_ids.get(key)
        if ln is None:
            dname = domains.get((pid, r[7]))
            label = f"NVTX{' ' + dname if dname else ''} · thread {tid}"
            ln = lane_ids[key] = b.lane(rank_of[pid], LaneKind.NVTX, -1, tid * 1000 + key[2] if key[2] else tid,
                                        label, pid=pid, source=source)
        e = r[2]
        if e is None and et != NVTX_MARK:
            e = session_end
            open_ended += 1
        rowid.append(r[0])
        start.append(r[1])
        end_l.append(r[1] if e is None else e)
        lane_l.append(ln)
        name_l.append(nid)
        is_mark.append(et == NVTX_MARK)
    if open_ended:
        warnings.append(f"{open_ended} NVTX ranges without an end (closed at the end of the capture)")
    if not rowid:
        return
    # Times are checked here, on whole columns: a check per row in the loop costs more.
    try:
        start_a, end_a = np.array(start, np.int64), np.array(end_l, np.int64)
        keep = np.ones(len(start_a), bool)
    except (TypeError, ValueError, OverflowError):  # text, NULL or huge values among them
        keep = np.array([_nvtx_times_ok(s, e) for s, e in zip(start, end_l)], bool)
        start_a = np.array([s if k else 0 for s, k in zip(start, keep)], np.int64)
        end_a = np.array([e if k else 0 for e, k in zip(end_l, keep)], np.int64)
    lim = sq.TIME_LIMIT
    keep &= (start_a > -lim) & (start_a < lim) & (end_a >= start_a) & (end_a < lim)
    mark = np.array(is_mark, bool)
    if not keep.all():
        rep.bad_rows[t] = int((~keep).sum())
    dur_a = end_a - start_a
    start_a = start_a + rep.utc_ns
    lane_a = np.array(lane_l, np.int32)
    name_a = np.array(name_l, np.int32)
    rng = ~mark & keep
    mark &= keep
    b.add(start=start_a[rng], dur=dur_a[rng], lane=lane_a[rng], name=name_a[rng],
          cat=np.full(int(rng.sum()), Cat.NVTX, np.uint8), src=np.array(rowid, np.int64)[rng])
    if mark.any():
        b.add_instants(start_a[mark], lane_a[mark], name_a[mark])
    # Steps: NVTX ranges "step N" (or ProfilerStep#N), per rank.
    lane_rank = {ln: b.lanes[ln].rank for ln in set(lane_l)}
    seen = set()
    for s, d, ln, n in zip(start_a[rng].tolist(), dur_a[rng].tolist(), lane_a[rng].tolist(),
                           name_a[rng].tolist()):
        m = _STEP.match(b.names.strings[n])
        if m:
            key = (lane_rank[ln], int(m.group(1)))
            if key not in seen:
                seen.add(key)
                b.steps.append(Step(key[0], key[1], s, s + d))


def _nvtx_times_ok(s, e) -> bool:
    lim = sq.TIME_LIMIT
    return type(s) is int and -lim < s < lim and (e is None or (type(e) is int and s <= e < lim))
