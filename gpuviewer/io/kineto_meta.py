"""What a Kineto / Chrome trace file says about itself, read leniently: its rank (distributedInfo,
else the file name), its clock base (baseTimeNanoseconds), device properties kept for display,
the ids in pid / tid fields, and the warnings for the events its pieces skipped or coerced."""

from __future__ import annotations

import math
import os
import re

from .chrome_values import num, text
from .limits import max_string_bytes

_RANK_IN_NAME = re.compile(r"rank[-_]?(\d{1,9})", re.IGNORECASE)
_STREAM_NUM = re.compile(r"(?<!\d)(-?\d{1,18})(?!\d)")
ID_MAX = 1 << 62  # pids, tids, streams: anything past this is not a real id
RANK_MAX = 1 << 20  # ranks, world sizes, device ordinals
# baseTimeNanoseconds must be ns since 1970 before 2065, so that ns sums stay in int64
BASE_NS_MAX = 3_000_000_000_000_000_000


def int_or_none(v, bound: int = ID_MAX) -> int | None:
    """An id as an int: a number, or the first number in a string ('stream 7'); None when there
    is none or it is not within (-bound, bound)."""
    if isinstance(v, bool):
        return int(v)
    if isinstance(v, float):
        v = int(v) if math.isfinite(v) and abs(v) < 2**63 else None
    elif isinstance(v, str):
        m = _STREAM_NUM.search(v[:256])
        v = int(m.group(1)) if m else None
    if isinstance(v, int) and -bound < v < bound:
        return v
    return None


def plain(v):
    """A device property kept for display: text, a finite number or an int64; else None."""
    if isinstance(v, str):
        return text(v, 4096)
    if isinstance(v, bool):
        return v
    if isinstance(v, int):
        return v if -(2**63) <= v < 2**63 else None
    if isinstance(v, float):
        return v if math.isfinite(v) else None
    return None


def clock_base_ns(meta: dict, warnings: list[str]) -> int:
    """baseTimeNanoseconds (ns since 1970 that relative ts count from), 0 when absent; an
    absurd value is ignored with a warning rather than shifting or breaking the time axis."""
    base = meta.get("baseTimeNanoseconds")
    if base is None:
        return 0
    v = num(base)
    if 0 <= v <= BASE_NS_MAX:
        return int(base) if type(base) is int else int(v)
    shown = text(base, 40)
    warnings.append(
        f"baseTimeNanoseconds {shown} is not a plausible time (ns since 1970, before "
        "2065): ignored, times are shown as written"
    )
    return 0


def bad_warnings(bad: dict) -> list[str]:
    """The warnings for the events a file's pieces skipped or coerced (kineto_piece's counts)."""
    out = []
    if bad.get("ts"):
        out.append(f"{bad['ts']} events with an unreadable ts (missing, not a number, or out of range) skipped")
    if bad.get("dur"):
        out.append(f"{bad['dur']} events with a negative or unreadable duration skipped")
    if bad.get("odd"):
        out.append(
            f"{bad['odd']} events with a list, object, true/false or out-of-range number as "
            "pid, tid, name or category: kept, with that value shown as text"
        )
    if bad.get("long"):
        out.append(
            f"{bad['long']} events with a name longer than {max_string_bytes():,} characters: "
            "the name is cut (raise GPUVIEWER_MAX_STRING_BYTES to keep it whole)"
        )
    return out


def rank_from_meta(meta: dict, path: str) -> int | None:
    dist = meta.get("distributedInfo")
    if isinstance(dist, dict):
        r = int_or_none(dist.get("rank"), RANK_MAX)
        if r is not None and r >= 0:
            return r
    m = _RANK_IN_NAME.search(os.path.basename(path))
    return int(m.group(1)) if m else None
