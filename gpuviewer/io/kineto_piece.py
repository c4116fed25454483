"""Turn one piece of a Chrome trace's event array into columns. Pure and picklable, so pieces
can be decoded in worker processes: each piece returns its own small string and lane-key
tables, which the main process maps onto the session's.

Fields of the wrong type never raise: an event with an unreadable ts, or a negative or
unreadable duration, is skipped; a list, object, true/false or out-of-range number where a pid,
tid, name or category belongs is turned into text. Each is counted in out["bad"] for a warning.
"""

from __future__ import annotations

import math
from operator import attrgetter

import numpy as np

from ..model.categories import is_nccl_name
from ..model.work_ops import NAMES as WORK_OPS
from .arg_capture import capture
from .chrome_events import decode_events, generic_events
from .limits import max_string_bytes

FLOW_PHASES = ("s", "t", "f")
# |ts| and dur in µs: past this (year 2065 as epoch µs) ns sums with a base time leave int64
TS_MAX_US = 3.0e15
_INT_MAX = (1 << 63) - 1


def us_to_ns(us: np.ndarray) -> np.ndarray:
    """float µs -> int64 ns, splitting off whole µs so large epoch values keep what precision
    the double has."""
    us = np.nan_to_num(np.asarray(us, np.float64), nan=0.0, posinf=0.0, neginf=0.0)
    whole = np.floor(us)
    return whole.astype(np.int64) * 1000 + np.round((us - whole) * 1000).astype(np.int64)


def floats(values) -> np.ndarray:
    """float64 array; anything that is not a number (or a string of one) becomes NaN."""
    try:
        return np.array(values, dtype=np.float64)
    except (TypeError, ValueError, OverflowError):
        out = np.empty(len(values), np.float64)
        for i, v in enumerate(values):
            out[i] = num(v)
        return out


def num(v) -> float:
    """A number (or a string of one, as Chrome accepts) as a float; NaN when it is not one."""
    if isinstance(v, bool) or v is None:
        return math.nan
    try:
        return float(v)
    except (TypeError, ValueError, OverflowError):
        return math.nan


def bounded_int(v, lo: int, hi: int) -> int | None:
    """A number (or a string of one) as an int within [lo, hi]; None when it is not one (true
    and false are not numbers here) or is out of range."""
    if isinstance(v, bool) or v is None:
        return None
    try:
        n = int(v)
    except (TypeError, ValueError, OverflowError):
        return None
    return n if lo <= n <= hi else None


def time_ok(v: float) -> bool:
    return abs(v) <= TS_MAX_US  # False for NaN


def text(v, limit: int | None = None) -> str:
    """A name or label as text: strings capped at max_string_bytes characters, other JSON
    values written as JSON."""
    if limit is None:
        limit = max_string_bytes()
    if isinstance(v, str):
        return v if len(v) <= limit else v[:limit] + "…"
    if v is None:
        return ""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int) and abs(v) > 10**18:
        return f"{float(v):.6g}" if v.bit_length() < 1000 else "(a very large number)"
    if isinstance(v, (int, float)):
        return str(v)
    import msgspec

    try:
        s = msgspec.json.encode(v).decode()
    except (TypeError, ValueError, OverflowError, RecursionError):
        s = "(unreadable)"
    return s if len(s) <= min(limit, 200) else s[: min(limit, 200)] + "…"


def ident(v):
    """A pid / tid / id as a dict key: an int in int64 range, or text."""
    if v is None or isinstance(v, str) and len(v) <= 256:
        return v
    if isinstance(v, bool):
        return int(v)
    if isinstance(v, int) and -_INT_MAX <= v <= _INT_MAX:
        return v
    if isinstance(v, float) and v.is_integer() and abs(v) < 2**53:
        return int(v)
    return text(v, 256)


def _odd_ident(v) -> bool:
    return not (v is None or type(v) is str and len(v) <= 256 or type(v) is int and -_INT_MAX <= v <= _INT_MAX)


def _odd_cat(c) -> bool:
    return not (c is None or type(c) is str and len(c) <= 256)


# the per-event fields taken by map() in C rather than by a Python loop over the events
_PH, _NAME, _TS, _DUR = attrgetter("ph"), attrgetter("name"), attrgetter("ts"), attrgetter("dur")
_KEY, _CORRELATION = attrgetter("cat", "pid", "tid"), attrgetter("args.correlation")


class _Index(dict):
    """value -> small int, first come first numbered (misses handled in __missing__)."""

    def __missing__(self, key):
        v = self[key] = len(self)
        return v


def _corr(x) -> np.ndarray:
    try:  # one C pass when every event has args (most pieces of GPU and launch events)
        vals = list(map(_CORRELATION, x))
    except AttributeError:  # some have none
        vals = [(e.args.correlation if e.args is not None else None) for e in x]
    try:
        a = np.array([c if c is not None else 0 for c in vals], dtype=np.int64)
    except (TypeError, ValueError, OverflowError):
        a = np.array([c if type(c) is int and 0 <= c < 2**63 else 0 for c in vals], np.int64)
    a[a < 0] = 0
    return a  # int64 here; the file reader densifies ids above 2**32 before storing uint32


def _bump(bad: dict, key: str, n: int | np.integer) -> None:
    if n:
        bad[key] = bad.get(key, 0) + int(n)


def extract_piece(buf: bytes, chunk: int, evs: list | None = None) -> dict:
    """Columns of the complete ('X') events, plus the few other events as plain tuples."""
    if evs is None:
        evs, buf = decode_events(buf)
    bad: dict = {}
    phs = list(map(_PH, evs))
    try:
        n_flow = phs.count("s") + phs.count("t") + phs.count("f")
    except TypeError:  # pragma: no cover - list.count compares, it does not hash
        n_flow = 0
    out: dict = {"chunk": chunk, "n_flow": n_flow, "bad": bad}
    if len(evs) and phs.count("X") == len(evs):
        x = evs
        pos = np.arange(len(evs), dtype=np.int64)
    else:
        xi = [i for i, p in enumerate(phs) if p == "X"]
        x = [evs[i] for i in xi]
        pos = np.asarray(xi, dtype=np.int64)
        out["other"] = _others(evs, phs, bad)
    if "C" in phs:
        out["counters"] = _counters(buf, bad)
    keys, names = _Index(), _Index()
    try:
        key_ids = list(map(keys.__getitem__, map(_KEY, x)))  # __missing__ numbers new ones
        name_ids = list(map(names.__getitem__, map(_NAME, x)))
    except TypeError:  # a list or object where a category, pid, tid or name belongs
        keys, names = _Index(), _Index()
        key_ids = [keys[(text(e.cat) if _odd_cat(e.cat) else e.cat, ident(e.pid), ident(e.tid))] for e in x]
        name_ids = [names[e.name if isinstance(e.name, str) else text(e.name)] for e in x]
        _bump(bad, "odd", sum(1 for e in x if not _hashable(e)))
    lane_key = np.array(key_ids, np.int32)
    name = np.array(name_ids, np.int32)
    out["keys"], out["names"] = _clean_keys(list(keys), lane_key, bad), _clean_names(list(names), name, bad)
    ts = floats(list(map(_TS, x)))
    durs = list(map(_DUR, x))
    dur = floats([d if d is not None else 0.0 for d in durs] if None in durs else durs)
    ok_ts = np.abs(ts) <= TS_MAX_US  # False for NaN
    ok = ok_ts & (dur >= 0) & (dur <= TS_MAX_US)
    corr = _corr(x)
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
        _bump(bad, "ts", np.count_nonzero(~ok_ts))
        _bump(bad, "dur", np.count_nonzero(ok_ts & ~ok))
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
    odd = [k for k, (c, p, t) in enumerate(keys) if _odd_cat(c) or _odd_ident(p) or _odd_ident(t)]
    if not odd:
        return keys
    _bump(bad, "odd", np.count_nonzero(np.isin(lane_key, odd)))
    return [(text(c) if _odd_cat(c) else c, ident(p), ident(t)) for c, p, t in keys]


def _clean_names(names: list, name: np.ndarray, bad: dict) -> list:
    """Names as text, at most max_string_bytes characters; events with odd ones counted."""
    limit = max_string_bytes()
    if all(type(n) is str and len(n) <= limit for n in names):
        return names
    odd = [k for k, n in enumerate(names) if not isinstance(n, str) and n is not None]
    long = [k for k, n in enumerate(names) if isinstance(n, str) and len(n) > limit]
    _bump(bad, "odd", np.count_nonzero(np.isin(name, odd)) if odd else 0)
    _bump(bad, "long", np.count_nonzero(np.isin(name, long)) if long else 0)
    return [n if type(n) is str and len(n) <= limit else text(n, limit) for n in names]


def _others(evs: list, phs: list, bad: dict) -> list:
    """Events other than 'X' and flows as tuples, with names, categories and ids made safe and
    unreadable times (as None, or the event skipped where it needs one) counted."""
    other = []
    limit = max_string_bytes()
    for i, p in enumerate(phs):
        if p == "X" or p in FLOW_PHASES or not isinstance(p, str):
            continue
        e = evs[i]
        a = e.args
        ts = None
        if e.ts is not None or p != "M":
            ts = num(e.ts)
            if not time_ok(ts):
                if p != "M":
                    _bump(bad, "ts", 1)
                    continue
                ts = None
        cat, pid, tid, id_, name = e.cat, e.pid, e.tid, e.id, e.name
        if (
            _odd_cat(cat)
            or _odd_ident(pid)
            or _odd_ident(tid)
            or _odd_ident(id_)
            or not (name is None or type(name) is str)
        ):
            _bump(bad, "odd", 1)
            cat = text(cat) if _odd_cat(cat) else cat
            pid, tid, id_ = ident(pid), ident(tid), ident(id_)
            name = None if name is None else text(name, limit)
        elif name is not None and len(name) > limit:
            _bump(bad, "long", 1)
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
            _bump(bad, "ts", 1)
            continue
        out.append((text(e.name, 4096), ident(e.pid), ident(e.id), ts, e.args))
    return out
