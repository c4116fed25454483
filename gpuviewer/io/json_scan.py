"""An exact, streaming walk over a Chrome trace JSON document, for what the fast path in
chrome_json cannot cut at a '}, {' boundary: other key orders, a second traceEvents key, events
larger than the limit, long runs of whitespace, damaged events, a document that ends early.

It follows strings and nesting with a few regular expressions (run in C), so it is exact where
the fast path guesses, and it holds at most one piece of events or one value: an event larger
than limits.max_event_bytes is skipped as it streams past, and whitespace between values is
dropped as it is read. It runs at Python speed (tens of MB/s), which is why it is the fallback.
"""

from __future__ import annotations

import re
from collections.abc import Callable

import msgspec

from .json_sanitize import cap_strings, loads_lenient
from .limits import max_event_bytes

_WSRE = re.compile(rb"[ \t\r\n]*+")
_BOUNDARY = re.compile(rb"\}\s*,\s*\{")  # between two events, as the fast path cuts
# inside an object or array: runs without brackets or quotes, and whole strings
_IN = re.compile(rb'(?:[^"{}\[\]]++|"(?:[^"\\]++|\\.)*+")*+', re.S)
_ATOM = re.compile(rb'[^\s,\]}{\[":]*+')  # a number or literal
GAP = -2  # peek(): the whitespace after an open piece grew past the gap limit
_GAP_MAX = 1 << 20  # whitespace kept inside one piece (pieces are contiguous slices of the file)
_KEY_MAX = 4096
_OPEN_BRACE, _OPEN_BRACKET, _CLOSE_BRACKET, _CLOSE_BRACE, _QUOTE, _COMMA, _COLON = b'{[]}",:'
_META_MAX = 4 << 20  # one top-level value other than traceEvents
_META_TOTAL = 16 << 20  # all of them together


class Cursor:
    """A window on the decompressed stream: buf[0] lies at absolute offset `base`. Bytes before
    the scan position are dropped when more is read, except from `keep` (absolute) on."""

    def __init__(
        self, read: Callable[[], bytes], data: bytes = b"", base: int = 0, tick: Callable[[], None] | None = None
    ) -> None:
        self.read, self.tick = read, tick
        self.buf = bytearray(data)
        self.base = base
        self.i = 0
        self.eof = False
        self.keep: int | None = None
        self.big = False  # the last value() ran past its limit (its bytes were dropped)
        self.last = bytes(data[-65536:])  # the end of what was read: is the document's end intact?

    def pos(self) -> int:
        return self.base + self.i

    def more(self) -> bool:
        drop = self.i if self.keep is None else min(self.i, self.keep - self.base)
        if drop > 0:
            del self.buf[:drop]
            self.base += drop
            self.i -= drop
        if self.eof:
            return False
        if self.tick is not None:
            self.tick()
        b = self.read()
        if not b:
            self.eof = True
            return False
        self.last = b
        self.buf += b
        return True

    def peek(self, gap_from: int | None = None) -> int | None:
        """The next byte that is not whitespace (the whitespace is consumed), None at the end,
        GAP when whitespace since `gap_from` grew past _GAP_MAX."""
        while True:
            self.i = _WSRE.match(self.buf, self.i).end()  # type: ignore[union-attr]  # \s* always matches
            if self.i < len(self.buf):
                return self.buf[self.i]
            if gap_from is not None and self.base + self.i - gap_from > _GAP_MAX:
                return GAP
            if not self.more():
                return None

    def value(self, limit: int, on_big: Callable[[], None] | None = None) -> int:
        """Scan the value at the cursor. Returns its end offset (absolute), or -1 when the input
        ends inside it. Its bytes stay in buf (keep is lowered to its start) unless it is longer
        than `limit`: then on_big() is called, the bytes are dropped as they stream past and
        self.big is set."""
        buf = self.buf
        start = self.base + self.i
        outer_keep = self.keep
        self.keep = start if outer_keep is None else min(outer_keep, start)
        self.big = False
        i = self.i
        c = buf[i]
        depth, in_str = 0, False
        if c == _OPEN_BRACE or c == _OPEN_BRACKET:
            depth, i = 1, i + 1
        elif c == _QUOTE:
            in_str, i = True, i + 1
        while True:
            n = len(buf)
            if in_str:  # find the closing quote at memchr speed, stepping over escapes
                held = False
                while True:
                    q = buf.find(b'"', i)
                    bs = buf.find(b"\\", i, q if q >= 0 else n)
                    if bs < 0:
                        break
                    if bs + 1 >= n:  # a backslash ends the buffer: its escape comes with more input
                        i, q, held = bs, -1, True
                        break
                    i = bs + 2
                if q >= 0:
                    in_str, i = False, q + 1
                    if depth == 0:
                        break
                    continue
                if not held:
                    i = n
            elif depth == 0:
                i = _ATOM.match(buf, i).end()  # type: ignore[union-attr]  # matches empty too
                if i < n:
                    break
            else:
                i = _IN.match(buf, i).end()  # type: ignore[union-attr]  # matches empty too
                if i < n:
                    c = buf[i]
                    i += 1
                    if c == _QUOTE:
                        in_str = True
                    elif c == _OPEN_BRACE or c == _OPEN_BRACKET:
                        depth += 1
                    else:
                        depth -= 1
                        if depth == 0:
                            break
                    continue
            self.i = i
            if not self.big and self.base + i - start > limit:
                self.big = True
                if on_big is not None:
                    on_big()
                self.keep = outer_keep = None
            if not self.more():
                self.keep = outer_keep
                return -1
            i = self.i
        self.i = i
        if self.big:
            self.keep = outer_keep
        return self.base + i

    def take(self, start: int, end: int) -> bytes:
        return bytes(self.buf[start - self.base : end - self.base])


# emit(events, absolute offset of the piece, piece bytes, the bytes the events decoded from)
Emit = Callable[[list, int, bytes, bytes], None]


class Walker:
    """Walks event arrays and the top-level object, emitting pieces of decoded events."""

    def __init__(
        self,
        cur: Cursor,
        emit: Emit,
        restart: Callable[[], None],
        decode: Callable,
        chunk_bytes: int,
        had_events: bool = False,
        arrays: int = 0,
    ) -> None:
        self.cur, self.emit, self.restart, self.decode = cur, emit, restart, decode
        self.chunk_bytes = chunk_bytes
        self.limit = max_event_bytes()
        self.had_events = had_events  # events were kept from an earlier traceEvents array
        self.arrays = arrays
        self.piece: list[int] | None = None  # [start, end] of the open piece
        self.bounds: list[tuple[int, int]] = []  # each event of the open piece
        self.counts = {"big": 0, "not_events": 0, "damaged": 0, "arrays": 0, "meta_big": 0}
        self.kept_here = 0
        self.meta_bytes = 0
        self.events_not_list = False  # a traceEvents key whose value is not an array
        self.cut_at = -1  # where the element began that the input ended inside
        self.resyncs = 0

    # -- pieces ------------------------------------------------------------------------------
    def flush(self) -> None:
        if self.piece is None:
            return
        cur = self.cur
        s, e = self.piece
        data = cur.take(s, e)
        bounds = self.bounds
        self.piece, self.bounds, cur.keep = None, [], None
        try:
            evs, dec = self.decode(b"[" + data + b"]")
            self._emit(evs, s, data, dec)
            return
        except (msgspec.DecodeError, RecursionError):
            pass
        run: list[tuple[int, int]] = []  # consecutive events that decode
        for a, b in bounds:
            try:
                self.decode(b"[" + data[a - s : b - s] + b"]")
            except (msgspec.DecodeError, RecursionError):
                self.counts["damaged"] += 1
                self._run(run, data, s)
                run = []
                continue
            run.append((a, b))
        self._run(run, data, s)

    def _run(self, run, data: bytes, s: int) -> None:
        """Emit events that decode one by one: together when they also do (a piece must be a
        slice of the file), else each alone (what lies between them is damaged)."""
        if not run:
            return
        piece = data[run[0][0] - s : run[-1][1] - s]
        try:
            evs, dec = self.decode(b"[" + piece + b"]")
        except (msgspec.DecodeError, RecursionError):
            if len(run) > 1:
                for ab in run:
                    self._run([ab], data, s)
            return
        self._emit(evs, run[0][0], piece, dec)

    def _resync(self, start: int) -> bool:
        """The input ended inside an element that began at `start`, but a '}, {' boundary
        follows it: a quote or bracket out of place made it swallow the rest. Count it as
        damaged and go on from the next event (its bytes are all still in the buffer)."""
        cur = self.cur
        m = _BOUNDARY.search(cur.buf, start - cur.base + 1) if self.resyncs < 1000 else None
        if m is None:
            return False
        self.resyncs += 1
        self.counts["damaged"] += 1
        self.flush()
        cur.i = m.end() - 1
        return True

    def _emit(self, evs, offset, piece, dec) -> None:
        if evs:
            self.kept_here += len(evs)
            self.emit(evs, offset, piece, dec)

    # -- the event array ---------------------------------------------------------------------
    def events(self, until: int | None = None) -> str:
        """Walk an event array from an element boundary. Returns 'closed' after its ']', 'cut'
        when the input ends inside it, or (with `until`, an offset) 'clean' once the walk is past
        `until` and the cursor sits at the start of an element, so a faster cutter can go on."""
        cur = self.cur
        while True:
            c = cur.peek(self.piece[1] if self.piece else None)
            if c == GAP:
                self.flush()
                continue
            if c is None:
                self.flush()
                self.cut_at = cur.pos()
                return "cut"
            if c == _CLOSE_BRACKET:
                cur.i += 1
                self.flush()
                return "closed"
            if c == _COMMA:
                cur.i += 1
                if until is not None and cur.pos() >= until:
                    self.flush()
                    if cur.peek() not in (None, _COMMA, _CLOSE_BRACKET):
                        return "clean"
                continue
            start = cur.pos()
            end = cur.value(self.limit, self.flush)
            if end < 0:  # the input ends inside this element: cut short, or damaged?
                if not cur.big and self._resync(start):
                    continue
                self.flush()
                self.cut_at = start
                return "cut"
            if cur.big:
                self.counts["big"] += 1
                continue
            if end == start:  # a stray '}' or ':' where an element belongs
                cur.i += 1
                self.flush()
                self.counts["damaged"] += 1
                continue
            if c != _OPEN_BRACE:
                self.flush()
                self.counts["not_events"] += 1
                continue
            if cur.buf[end - cur.base - 1] != _CLOSE_BRACE:  # '{' closed by ']': a brace is missing
                if not self._resync(start):
                    self.flush()
                    self.counts["damaged"] += 1
                continue
            if self.had_events and self.arrays > 1 and not self.kept_here and self.piece is None:
                self.restart()  # a later non-empty traceEvents wins, as in JSON readers
                self.had_events = False
                self.counts["arrays"] += 1
            if self.piece is None:
                self.piece = [start, end]
            else:
                self.piece[1] = end
            cur.keep = self.piece[0]
            self.bounds.append((start, end))
            if end - self.piece[0] >= self.chunk_bytes:
                self.flush()

    # -- the top-level object ----------------------------------------------------------------
    def object_rest(self, meta: dict) -> str:
        """Keys of the top-level object from the cursor (just after '{' or after a value).
        Returns 'closed', 'cut' (the input ends inside it) or 'damaged'."""
        cur = self.cur
        while True:
            c = cur.peek()
            if c is None:
                return "cut"
            if c == _CLOSE_BRACE:
                cur.i += 1
                return "closed"
            if c == _COMMA:
                cur.i += 1
                continue
            if c != _QUOTE:
                return "damaged"
            start = cur.pos()
            end = cur.value(_KEY_MAX)
            if end < 0:
                return "cut"
            key = None if cur.big else _text(cur.take(start, end))
            cur.keep = None
            c = cur.peek()
            if c is None:
                return "cut"
            if c != _COLON:
                return "damaged"
            cur.i += 1
            c = cur.peek()
            if c is None:
                return "cut"
            if key == "traceEvents" and c == _OPEN_BRACKET:
                cur.i += 1
                self.start_array()
                if self.events() == "cut":
                    return "cut"
                continue
            if key == "traceEvents":
                self.events_not_list = True
            start = cur.pos()
            end = cur.value(min(_META_MAX, max(0, _META_TOTAL - self.meta_bytes)))
            if end < 0:
                return "cut"
            if cur.big or key is None:
                self.counts["meta_big"] += 1
                continue
            raw = cur.take(start, end)
            cur.keep = None
            self.meta_bytes += len(raw)
            try:
                meta[key] = cap_strings(loads_lenient(raw))
            except ValueError:
                pass  # a damaged metadata value: the events do not need it

    def start_array(self) -> None:
        self.arrays += 1
        self.had_events = self.had_events or self.kept_here > 0
        self.kept_here = 0

    def warnings(self) -> list[str]:
        from .limits import max_event_bytes as _m

        c, out = self.counts, []
        mb = f"{_m() / (1 << 20):g} MB"
        if c["big"]:
            out.append(
                f"skipped {c['big']} event(s) larger than {mb} (a hostile or damaged file?); "
                "raise GPUVIEWER_MAX_EVENT_BYTES to read them"
            )
        if c["meta_big"]:
            out.append(
                f"skipped {c['meta_big']} top-level value(s) other than traceEvents that are "
                f"larger than {_META_MAX >> 20} MB or have an unreadable key"
            )
        if c["damaged"]:
            out.append(f"skipped {c['damaged']} damaged event(s) (not valid JSON, or nested too deeply)")
        if c["not_events"]:
            out.append(f"skipped {c['not_events']} entries of traceEvents that are not events (not JSON objects)")
        if c["arrays"]:
            out.append(
                "the file has more than one traceEvents array: read the last one with events, as JSON readers do"
            )
        return out


def _text(raw: bytes) -> str | None:
    try:
        v = loads_lenient(raw)
    except ValueError:
        return None
    return v if isinstance(v, str) else None
