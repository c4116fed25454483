"""Event arguments, fetched on demand from the source file (the store keeps none of them).

Kineto: an event's src is its ordinal in traceEvents; the chunk table of the source says where
each piece of the event array lies in the decompressed file, so one piece is decoded again.
nsys: src is the rowid in the table its category comes from, and one row is selected. The last piece is kept, so
clicking around one region costs one decode.
"""

from __future__ import annotations

import os
from functools import lru_cache

from ..model.trace import Source, Trace
from .errors import TraceError
from .json_sanitize import cap_strings, loads_lenient
from .limits import max_event_bytes
from .streams import open_salvage


def event_args(trace: Trace, i: int) -> dict:
    lane = trace.lanes[int(trace.columns["lane"][i])]
    if not trace.sources:
        return {}
    src = trace.sources[min(lane.source, len(trace.sources) - 1)]
    code = int(trace.columns["src"][i])
    _check_unchanged(src)
    if src.format == "kineto":
        ev = _kineto_event(src.path, src.size, src.mtime_ns, tuple(map(tuple, src.chunks)), code)
        args = ev.get("args") if isinstance(ev, dict) else None
        return cap_strings(args) if isinstance(args, dict) else {}
    if src.format == "nsys":
        from .nsys_report import row_args

        return row_args(src.path, int(trace.columns["cat"][i]), code)
    return {}


def _check_unchanged(src: Source) -> None:
    try:
        st = os.stat(src.path)
    except OSError as e:
        raise TraceError(src.path, f"cannot read the arguments: {e.strerror}") from None
    if st.st_size != src.size or st.st_mtime_ns != src.mtime_ns:
        raise TraceError(src.path, "the file changed since it was opened; reopen it to see arguments")


@lru_cache(maxsize=2)
def _piece(path: str, size: int, mtime: int, offset: int, length: int) -> list:
    """The events of one piece, decoded as a browser would (NaN kept, bad UTF-8 replaced)."""
    with open_salvage(path) as f:
        if offset < 0:  # "the whole document" (caches from before pieces were exact)
            data = _read(f, 4 * max_event_bytes())
            if data is None:
                raise TraceError(path, "too large to fetch arguments from without the cache; reopen it")
            try:
                doc = loads_lenient(data)
            except ValueError:
                return []
            ev = doc.get("traceEvents") if isinstance(doc, dict) else doc
            return ev if isinstance(ev, list) else []
        remaining = offset
        while remaining > 0:
            got = f.read(min(remaining, 16 << 20))
            if not got:
                break
            remaining -= len(got)
        data = _read(f, length, whole=False) or b""
    try:
        ev = loads_lenient(b"[" + data + b"]")
    except ValueError:
        return []
    return ev if isinstance(ev, list) else []


def _read(f, n: int, whole: bool = True) -> bytes | None:
    """Up to n bytes; (whole) None when the stream holds more than n."""
    parts, got = [], 0
    while got < n + whole:
        b = f.read(min(16 << 20, n + whole - got))
        if not b:
            break
        parts.append(b)
        got += len(b)
    return None if got > n else b"".join(parts)


def _kineto_event(path: str, size: int, mtime: int, chunks: tuple, ordinal: int) -> dict:
    if not chunks:
        return {}
    firsts = [c[2] for c in chunks]
    import bisect

    k = max(0, bisect.bisect_right(firsts, ordinal) - 1)
    offset, length, first = chunks[k]
    pos = ordinal - first if offset >= 0 else ordinal
    events = _piece(path, size, mtime, offset, length)
    return events[pos] if 0 <= pos < len(events) else {}
