"""Plain Python values for JSON output and text: numpy scalars and arrays become ints, floats
and lists, NaN and infinities become null (JSON has no spelling for them), and file names that
hold bytes which are not UTF-8 (kept by Python as lone surrogates) become printable text."""

from __future__ import annotations

import math
import re

import numpy as np


def text(s: str) -> str:
    """A str that encodes as UTF-8: undecodable bytes of a file name shown as \\xNN."""
    try:
        s.encode("utf-8")
        return s
    except UnicodeEncodeError:
        return s.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")


def plain(o):
    """Recursively convert to JSON-encodable plain values."""
    if isinstance(o, str):
        return text(o)
    if isinstance(o, bool) or o is None:
        return o
    if isinstance(o, (int, np.integer)):
        return int(o)
    if isinstance(o, (float, np.floating)):
        f = float(o)
        return f if math.isfinite(f) else None
    if isinstance(o, np.bool_):
        return bool(o)
    if isinstance(o, dict):
        # int keys stay ints (the window reads them; JSON encoders write them as strings)
        return {
            (int(k) if isinstance(k, (int, np.integer)) and not isinstance(k, bool) else text(str(k))): plain(v)
            for k, v in o.items()
        }
    if isinstance(o, np.ndarray):
        return [plain(v) for v in o.tolist()]
    if isinstance(o, (list, tuple, set, frozenset)):
        return [plain(v) for v in o]
    return o


def json_bytes(o) -> bytes:
    import msgspec

    return msgspec.json.encode(plain(o))


# C0 and C1 control characters (and DEL), except tab and newline: a trace can carry escape
# sequences in kernel or thread names that would drive the user's terminal.
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def term(s) -> str:
    """Text safe to print on a terminal: control characters shown as \\xNN."""
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", text(str(s)))


# Every control character, newline and tab included: one line of a message stays one line, so a
# file named "a\ngpuviewer: all good" cannot print a line of its own (line spoofing)
_ANY_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029]")


def line(s) -> str:
    """One line safe to print or show: term() that also escapes newlines and tabs (\\x0a), for
    messages and file names (term() keeps them for multi-line text such as Markdown)."""
    return _ANY_CONTROL.sub(
        lambda m: f"\\x{ord(m.group()):02x}" if ord(m.group()) < 0x100 else f"\\u{ord(m.group()):04x}", text(str(s))
    )
