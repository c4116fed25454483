"""Values of a Chrome trace's events read as the store needs them, whatever the JSON holds: times
in µs as int64 ns, numbers (or strings of one) as floats, names and ids as text or bounded ints,
and the counts of events mended or skipped (bump). Shared by the Kineto and JAX readers and the
metadata and memory readers; no other reader module is imported here (they import this)."""

from __future__ import annotations

import math

import numpy as np

from .limits import max_string_bytes

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
        arr = np.array(values, dtype=np.float64)
        if arr.ndim == 1:
            return arr
    except (TypeError, ValueError, OverflowError):
        pass
    out = np.empty(len(values), np.float64)  # one at a time (lists of one length made a 2-D array)
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


def odd_ident(v) -> bool:
    return not (v is None or type(v) is str and len(v) <= 256 or type(v) is int and -_INT_MAX <= v <= _INT_MAX)


def odd_cat(c) -> bool:
    return not (c is None or type(c) is str and len(c) <= 256)


def bump(bad: dict, key: str, n: int | np.integer) -> None:
    if n:
        bad[key] = bad.get(key, 0) + int(n)
