"""Turn one piece of a Chrome trace's event array into columns. Pure and picklable, so pieces
can be decoded in worker processes: each piece returns its own small string and lane-key
tables, which the main process maps onto the session's."""
from __future__ import annotations

import numpy as np

from .chrome_json import _generic_events, decode_events

FLOW_PHASES = ("s", "t", "f")


def us_to_ns(us: np.ndarray) -> np.ndarray:
    """float µs -> int64 ns, splitting off whole µs so large epoch values keep what precision
    the double has."""
    us = np.nan_to_num(np.asarray(us, np.float64), nan=0.0)
    whole = np.floor(us)
    return whole.astype(np.int64) * 1000 + np.round((us - whole) * 1000).astype(np.int64)


def floats(values) -> np.ndarray:
    try:
        return np.array(values, dtype=np.float64)
    except (TypeError, ValueError):
        out = np.empty(len(values), np.float64)
        for i, v in enumerate(values):
            try:
                out[i] = float(v)
            except (TypeError, ValueError):
                out[i] = np.nan
        return out


class _Index(dict):
    """value -> small int, first come first numbered (misses handled in __missing__)."""

    def __missing__(self, key):
        v = self[key] = len(self)
        return v


def _corr(x) -> np.ndarray:
    vals = [(e.args.correlation if e.args is not None else None) for e in x]
    try:
        a = np.array([c if c is not None else 0 for c in vals], dtype=np.int64)
    except (TypeError, ValueError, OverflowError):
        a = np.array([c if isinstance(c, int) and 0 <= c < 2**63 else 0 for c in vals], np.int64)
    a[a < 0] = 0
    return a  # int64 here; the file reader densifies ids above 2**32 before storing uint32


def extract_piece(buf: bytes, chunk: int, evs: list | None = None) -> dict:
    """Columns of the complete ('X') events, plus the few other events as plain tuples."""
    if evs is None:
        evs, buf = decode_events(buf)
    phs = [e.ph for e in evs]
    out: dict = {"chunk": chunk, "n_flow": phs.count("s") + phs.count("t") + phs.count("f")}
    if len(evs) and phs.count("X") == len(evs):
        x = evs
        pos = np.arange(len(evs), dtype=np.int64)
    else:
        xi = [i for i, p in enumerate(phs) if p == "X"]
        x = [evs[i] for i in xi]
        pos = np.asarray(xi, dtype=np.int64)
        other = []
        for i in [i for i, p in enumerate(phs) if p != "X" and p not in FLOW_PHASES]:
            e = evs[i]
            a = e.args
            other.append((phs[i], e.name, e.cat, e.pid, e.tid, e.ts, e.dur, e.id, e.s,
                          None if a is None else (a.device_type, a.device_id, a.total_allocated,
                                                  a.total_reserved, a.name, a.labels), i))
        out["other"] = other
    if "C" in phs:
        out["counters"] = [(e.name, e.pid, e.id, e.ts, e.args) for e in _generic_events.decode(buf)
                           if e.ph == "C" and isinstance(e.args, dict)]
    keys, names = _Index(), _Index()
    out["lane_key"] = np.array([keys[(e.cat, e.pid, e.tid)] for e in x], np.int32)
    out["name"] = np.array([names[e.name] for e in x], np.int32)
    out["keys"] = list(keys)
    out["names"] = list(names)
    ts = floats([e.ts for e in x])
    out["min_ts"] = float(np.nanmin(ts)) if len(ts) and not np.all(np.isnan(ts)) else float("inf")
    out["start"] = us_to_ns(ts)
    out["dur"] = us_to_ns(floats([e.dur if e.dur is not None else 0.0 for e in x]))
    out["corr"] = _corr(x)
    out["src"] = pos  # position in the piece; the reader adds the piece's first ordinal
    out["n_events"] = len(evs)
    return out
