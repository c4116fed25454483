"""Repairs for JSON that strict decoders refuse but trace viewers accept.

Python's json.dumps writes NaN, Infinity and -Infinity; some producers write bytes that are not
UTF-8, or numbers past the double range (1e400). msgspec refuses all of these, as JSON says it
should; Chrome's and Perfetto's importers read such files. These run only on a piece that
failed to decode, so normal files never pay for them.
"""

from __future__ import annotations

import json
import re

from .limits import max_string_bytes

# A whole string (skipped as is), or a bare token outside strings that strict JSON refuses.
_TOKENS = re.compile(rb'"(?:[^"\\]++|\\.)*+"|(-?(?:NaN|Infinity)\b|-?\d+(?:\.\d+)?[eE][+-]?\d{3,})', re.S)
_SUSPECT = re.compile(rb"NaN|Infinity|[eE][+-]?\d{3}")


def _token(m: re.Match) -> bytes:
    t = m.group(1)
    if t is None:
        return m.group(0)
    if not t.endswith((b"NaN", b"Infinity")) and abs(float(t)) < float("inf"):
        return t
    return b'"' + t + b'"'  # as text: a reader's float() still sees NaN / inf and skips it


def sanitize(buf: bytes) -> bytes | None:
    """`buf` with bad UTF-8 replaced (U+FFFD) and NaN / ±Infinity / out-of-range numbers outside
    strings quoted (so a time or duration of NaN is still seen as one, and skipped, rather than
    read as missing); None when there was nothing of the kind to repair."""
    out = buf
    try:
        out.decode("utf-8")
    except UnicodeDecodeError:
        out = out.decode("utf-8", "replace").encode("utf-8")
    if _SUSPECT.search(out):
        out = _TOKENS.sub(_token, out)
    return None if out == buf else out


def loads_lenient(buf: bytes):
    """Decode any JSON the way a browser's trace importer would: NaN and Infinity kept as
    floats, bad UTF-8 replaced. Raises ValueError when it is not JSON at all."""
    import msgspec

    try:
        return msgspec.json.decode(buf)
    except (msgspec.DecodeError, RecursionError):
        pass
    try:
        return json.loads(buf.decode("utf-8", "replace"))
    except RecursionError:
        raise ValueError("nested too deeply") from None


def cap_strings(obj, limit: int | None = None, _depth: int = 0):
    """A copy of a decoded JSON value whose strings are at most `limit` characters (longer ones
    are cut and end with '…'); containers nested past 64 levels are dropped."""
    if limit is None:
        limit = max_string_bytes()
    if isinstance(obj, str):
        return obj if len(obj) <= limit else obj[:limit] + "…"
    if _depth > 64:
        return None
    if isinstance(obj, dict):
        return {cap_strings(k, limit, 64): cap_strings(v, limit, _depth + 1) for k, v in obj.items()}
    if isinstance(obj, list):
        return [cap_strings(v, limit, _depth + 1) for v in obj]
    return obj
