"""Turn one piece of a Chrome trace's event array into columns. Pure and picklable, so pieces
can be decoded in worker processes: each piece returns its own small string and lane-key
tables, which the main process maps onto the session's.

Fields of the wrong type never raise: an event with an unreadable ts, or a negative or
unreadable duration, is skipped; a list, object, true/false or out-of-range number where a pid,
tid, name or category belongs is turned into text. Each is counted in out["bad"] for a warning.
"""

from __future__ import annotations

from collections import Counter
from itertools import compress, repeat
from operator import attrgetter, eq, is_

import numpy as np

from ..model.categories import is_nccl_name
from ..model.work_ops import NAMES as WORK_OPS
from .arg_capture import capture
from .chrome_events import KeptArgs, decode_events, generic_events
from .chrome_values import (
    TS_MAX_US,
    bump,
    floats,
    ident,
    num,
    odd_cat,
    odd_ident,
    text,
    time_ok,
    us_to_ns,
)
from .kineto_memory import memory_instants
from .kineto_numbered import host_positions, numbered
from .limits import max_string_bytes

FLOW_PHASES = ("s", "t", "f")
_SKIP = dict.fromkeys(("X", *FLOW_PHASES), False)  # phases _others passes over
# the per-event fields taken by map() in C rather than by a Python loop over the events
_PH, _NAME, _TS, _DUR = attrgetter("ph"), attrgetter("name"), attrgetter("ts"), attrgetter("dur")
_KEY, _CORRELATION = attrgetter("cat", "pid", "tid"), attrgetter("args.correlation")
_ARGS, _CORR_OF = attrgetter("args"), attrgetter("correlation")
_NO_ARGS = KeptArgs()


class _Index(dict):
    """value -> small int, first come first numbered (misses handled in __missing__)."""

    def __missing__(self, key):
        v = self[key] = len(self)
        return v


def _corr(x: list, host: np.ndarray) -> np.ndarray:
    """The events' correlation ids (0: none). The host's ops, annotations and Python functions
    (at positions `host`) carry none (the profiler links them to their launches by External id):
    only the others are read (a quarter of a launch-bound trace's events)."""
    a = np.zeros(len(x), np.int64)
    rest = np.ones(len(x), bool)
    rest[host] = False
    at = np.flatnonzero(rest)
    if not len(at):
        return a
    args = list(map(_ARGS, map(x.__getitem__, at.tolist())))
    # the few events without args (Kineto's 'overhead' ones) as ones without an id, so the ids
    # are read in one C pass
    for i in compress(range(len(args)), map(is_, args, repeat(None))):
        args[i] = _NO_ARGS
    try:  # every id a plain int (absent: the default 0)
        a[at] = np.fromiter(map(_CORR_OF, args), np.int64, len(args))
    except (TypeError, ValueError, OverflowError):  # null, text, past 63 bits
        a[at] = _corr_loose([x[i] for i in at.tolist()])
    a[a < 0] = 0
    return a  # int64 here; the file reader densifies ids above 2**32 before storing uint32


def _corr_loose(x) -> np.ndarray:
    try:
        vals = list(map(_CORRELATION, x))
    except AttributeError:  # some have no args
        vals = [(e.args.correlation if e.args is not None else None) for e in x]
    try:
        return np.array([c if c is not None else 0 for c in vals], dtype=np.int64)
    except (TypeError, ValueError, OverflowError):
        return np.array([c if type(c) is int and 0 <= c < 2**63 else 0 for c in vals], np.int64)


def _times(values, n: int) -> np.ndarray | None:
    """Times or durations as float64 from one C pass (18 ns an event less than a list made into an
    array; None becomes NaN), or None where one is not a plain number (floats() reads them then)."""
    try:
        return np.fromiter(values, np.float64, n)
    except (TypeError, ValueError, OverflowError):
        return None


def extract_piece(buf: bytes, chunk: int, evs: list | None = None) -> dict:
    """Columns of the complete ('X') events, plus the few other events as plain tuples."""
    if evs is None:
        evs, buf = decode_events(buf)
    bad: dict = {}
    phs = list(map(_PH, evs))
    try:  # every phase counted in one pass (list.count compares each event: 10 ns a count)
        n_ph = Counter(phs)
    except TypeError:  # a phase that is a list or an object (the loose decode)
        n_ph = Counter(p for p in phs if isinstance(p, str))
    n_flow = n_ph["s"] + n_ph["t"] + n_ph["f"]
    out: dict = {"chunk": chunk, "n_flow": n_flow, "bad": bad}
    if len(evs) and n_ph["X"] == len(evs):
        x = evs
        pos = np.arange(len(evs), dtype=np.int64)
    else:
        xi = list(compress(range(len(phs)), map(eq, phs, repeat("X"))))  # in C (eq: a phase may be a list)
        x = [evs[i] for i in xi]
        pos = np.asarray(xi, dtype=np.int64)
        out["other"] = _others(evs, phs, bad, out)
    if n_ph["C"]:
        out["counters"] = _counters(buf, bad)
    keys, names = _Index(), _Index()
    try:
        key_ids = list(map(keys.__getitem__, map(_KEY, x)))  # __missing__ numbers new ones
        name_ids = list(map(names.__getitem__, map(_NAME, x)))
    except TypeError:  # a list or object where a category, pid, tid or name belongs
        keys, names = _Index(), _Index()
        key_ids = [keys[(text(e.cat) if odd_cat(e.cat) else e.cat, ident(e.pid), ident(e.tid))] for e in x]
        name_ids = [names[e.name if isinstance(e.name, str) else text(e.name)] for e in x]
        bump(bad, "odd", sum(1 for e in x if not _hashable(e)))
    lane_key = np.array(key_ids, np.int32)
    name = np.array(name_ids, np.int32)
    out["keys"], out["names"] = _clean_keys(list(keys), lane_key, bad), _clean_names(list(names), name, bad)
    host = host_positions(out["keys"], lane_key)
    out["numbered"] = numbered(x, evs, phs, n_ph["i"] + n_ph["I"], host)
    ts = _times(map(_TS, x), len(x))
    if ts is None:
        ts = floats(list(map(_TS, x)))
    durs = list(map(_DUR, x))
    # (no duration is 0, not unreadable: np.fromiter would make None NaN, and the event be skipped)
    dur = None if None in durs else _times(durs, len(durs))
    if dur is None:
        dur = floats([d if d is not None else 0.0 for d in durs] if None in durs else durs)
    ok_ts = np.abs(ts) <= TS_MAX_US  # False for NaN
    ok = ok_ts & (dur >= 0) & (dur <= TS_MAX_US)
    corr = _corr(x, host)
    # the analysis' arguments, while the events are at hand: of NCCL kernels, the collective
    # keys (io/comm_args.py asks no other event), of the ops with a work rule, the shapes
    # (io/op_shapes.py); no other event is looked at (most are neither)
    names = out["names"]
    ruled = np.fromiter((n in WORK_OPS for n in names), bool, len(names))
    nccl = np.fromiter((is_nccl_name(n) for n in names), bool, len(names))
    look = np.flatnonzero((ruled | nccl)[name])
    if len(look):
        at = name[look]
        kept = capture([x[j] for j in look.tolist()], pos[look], ruled[at].tolist(), nccl[at].tolist())
        if kept is not None:
            out["kept_args"] = kept
    if not ok.all():
        bump(bad, "ts", np.count_nonzero(~ok_ts))
        bump(bad, "dur", np.count_nonzero(ok_ts & ~ok))
        ts, dur, lane_key, name, corr, pos = ts[ok], dur[ok], lane_key[ok], name[ok], corr[ok], pos[ok]
    out["lane_key"], out["name"] = lane_key, name
    out["min_ts"] = float(ts.min()) if len(ts) else float("inf")
    out["start"] = us_to_ns(ts)
    out["dur"] = us_to_ns(dur)
    out["corr"] = corr
    out["src"] = pos  # position in the piece; the reader adds the piece's first ordinal
    out["n_events"] = len(evs)
    return out


def _hashable(e) -> bool:
    try:
        hash((e.cat, e.pid, e.tid, e.name))
        return True
    except TypeError:
        return False


def _clean_keys(keys: list, lane_key: np.ndarray, bad: dict) -> list:
    """(cat, pid, tid) with odd values as text or bounded ints; events with odd ones counted."""
    odd = [k for k, (c, p, t) in enumerate(keys) if odd_cat(c) or odd_ident(p) or odd_ident(t)]
    if not odd:
        return keys
    bump(bad, "odd", np.count_nonzero(np.isin(lane_key, odd)))
    return [(text(c) if odd_cat(c) else c, ident(p), ident(t)) for c, p, t in keys]


def _clean_names(names: list, name: np.ndarray, bad: dict) -> list:
    """Names as text, at most max_string_bytes characters; events with odd ones counted."""
    limit = max_string_bytes()
    if all(type(n) is str and len(n) <= limit for n in names):
        return names
    odd = [k for k, n in enumerate(names) if not isinstance(n, str) and n is not None]
    long = [k for k, n in enumerate(names) if isinstance(n, str) and len(n) > limit]
    bump(bad, "odd", np.count_nonzero(np.isin(name, odd)) if odd else 0)
    bump(bad, "long", np.count_nonzero(np.isin(name, long)) if long else 0)
    return [n if type(n) is str and len(n) <= limit else text(n, limit) for n in names]


def _others(evs: list, phs: list, bad: dict, out: dict) -> list:
    """Events other than 'X' and flows as tuples, with names, categories and ids made safe and
    unreadable times (as None, or the event skipped where it needs one) counted; the GPU memory
    samples as columns in out["mem"] where none is odd (kineto_memory)."""
    mem, taken = memory_instants(evs, phs, bad)
    if mem is not None:
        out["mem"] = mem
    try:  # the positions left, found in C: most events are complete ones, flows or memory samples
        at = np.flatnonzero(np.fromiter(map(_SKIP.get, phs, repeat(True)), bool, len(phs)))
    except TypeError:  # a phase that is a list or an object
        at = np.arange(len(phs))
    if taken:
        at = np.setdiff1d(at, np.asarray(taken, np.int64), assume_unique=True)
    other = []
    limit = max_string_bytes()
    for i in at.tolist():
        p = phs[i]
        if p == "X" or p in FLOW_PHASES or not isinstance(p, str):
            continue
        e = evs[i]
        a = e.args
        ts = None
        if e.ts is not None or p != "M":
            ts = num(e.ts)
            if not time_ok(ts):
                if p != "M":
                    bump(bad, "ts", 1)
                    continue
                ts = None
        cat, pid, tid, id_, name = e.cat, e.pid, e.tid, e.id, e.name
        if (
            odd_cat(cat)
            or odd_ident(pid)
            or odd_ident(tid)
            or odd_ident(id_)
            or not (name is None or type(name) is str)
        ):
            bump(bad, "odd", 1)
            cat = text(cat) if odd_cat(cat) else cat
            pid, tid, id_ = ident(pid), ident(tid), ident(id_)
            name = None if name is None else text(name, limit)
        elif name is not None and len(name) > limit:
            bump(bad, "long", 1)
            name = text(name, limit)
        other.append(
            (
                p,
                name,
                cat,
                pid,
                tid,
                ts,
                e.dur,
                id_,
                e.s,
                None
                if a is None
                else (a.device_type, a.device_id, a.total_allocated, a.total_reserved, a.name, a.labels),
                i,
            )
        )
    return other


def _counters(buf: bytes, bad: dict) -> list:
    out = []
    for e in generic_events.decode(buf):
        if e.ph != "C" or not isinstance(e.args, dict):
            continue
        ts = num(e.ts)
        if not time_ok(ts):
            bump(bad, "ts", 1)
            continue
        out.append((text(e.name, 4096), ident(e.pid), ident(e.id), ts, e.args))
    return out
