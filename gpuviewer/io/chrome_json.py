"""Chunked decoding of Chrome trace JSON (object or array form, plain or gzip).

The traceEvents array is cut into pieces of a few MB at event boundaries and each piece is
decoded with msgspec into typed structs that declare only the fields we use (io/chrome_events.py;
400 MB/s here, against 52 MB/s for json.load). Memory stays bounded by one piece, and
decompression runs in a thread beside the decoder (io/json_blocks.py). What the fast path cannot cut (an event past max_event_bytes, odd
layouts) is walked exactly by json_scan, in bounded memory; a piece that fails to decode only
for NaN / Infinity / bad UTF-8 is repaired (json_sanitize); one that fails for other reasons
sends the whole document through json_scan. A document that ends early keeps its complete
events, and only a document whose data really stops inside it is said to end early.
"""

from __future__ import annotations

import re
from collections.abc import Callable

import msgspec

from .chrome_events import decode_events
from .errors import Cancelled, TraceError
from .json_blocks import BlockReader, size_words
from .json_sanitize import cap_strings, loads_lenient
from .limits import max_event_bytes
from .streams import damage_words

_BOUNDARY = re.compile(rb"\}\s*,\s*\{")
_EVENTS_KEY = re.compile(rb'"traceEvents"\s*:\s*\[')
_WS = b" \t\r\n"
_BOM = b"\xef\xbb\xbf"
# every warning of a document read only up to a cut says this (readers and the analysis' note key on it)
ENDS_EARLY = "ends early"
_CUT_WORDS = f"the file {ENDS_EARLY}, inside its event list"
_PREFIX_MAX = 16 << 20  # top-level keys before traceEvents decoded by the fast path
_any = msgspec.json.Decoder()


class Fallback(Exception):
    """The fast path could not cut this document; walk it exactly (json_scan)."""


# on_chunk(events or None, chunk index, JSON array): events is None when the sink is to decode
# the array itself (possibly in a worker process); a sink raises Fallback when it does not
# decode, and the whole document is then walked exactly. The array is bytes, or (events not
# given) a tuple of parts ('[', the events' bytes in a part or two, ']'), views valid only during
# the call, which the sink copies once where it wants them (piece_reader: into a worker's slot)
# rather than joins here and a copy there (10M events: 0.7 s of the main process's CPU).
Piece = bytes | tuple[bytes | memoryview, ...]
OnChunk = Callable[[list | None, int, Piece], None]


def joined(piece: Piece) -> bytes:
    """The array's bytes from what on_chunk was given."""
    return piece if isinstance(piece, bytes) else b"".join(piece)


class _Out:
    """Where pieces go: the caller's on_chunk, the chunk table and the warnings."""

    def __init__(self, path, on_chunk, restart, progress, cancelled, chunk_bytes) -> None:
        self.path, self.on_chunk, self._restart = path, on_chunk, restart
        self.progress, self.cancelled, self.chunk_bytes = progress, cancelled, chunk_bytes
        self.chunks: list[list[int]] = []
        self.warnings: list[str] = []

    def send(self, offset: int, parts: list) -> None:
        """A piece for the sink to decode (maybe in a worker), as its parts in order."""
        self.on_chunk(None, len(self.chunks), (b"[", *parts, b"]"))
        self.chunks.append([offset, sum(map(len, parts)), len(self.chunks)])

    def emit(self, evs: list, offset: int, piece: bytes, decoded: bytes) -> None:
        """A piece already decoded (from `decoded`, which may be `piece` repaired)."""
        self.on_chunk(evs, len(self.chunks), decoded)
        self.chunks.append([offset, len(piece), len(self.chunks)])

    def restart(self) -> None:
        self.chunks.clear()
        if self._restart is not None:
            self._restart()

    def tick(self, reader: BlockReader) -> None:
        if self.cancelled is not None and self.cancelled():
            raise Cancelled()
        if self.progress is not None:
            self.progress(reader.fraction())


def read_chrome_json(
    path: str,
    on_chunk: OnChunk,
    *,
    progress: Callable[[float], None] | None = None,
    cancelled: Callable[[], bool] | None = None,
    chunk_bytes: int = 2 << 20,
    restart: Callable[[], None] | None = None,
    flush: Callable[[], None] | None = None,
) -> tuple[dict, list[list[int]], list[str], bool]:
    """Decode a Chrome/Kineto JSON trace, calling on_chunk per piece of the event array.

    Returns (top-level metadata, chunk table [[decompressed offset, length, chunk index]],
    warnings, gzip).
    """
    out = _Out(path, on_chunk, restart, progress, cancelled, chunk_bytes)
    reader = BlockReader(path, chunk_bytes)
    try:
        try:
            meta = _fast(reader, out)
            if flush is not None:
                flush()  # collect pieces still decoding; may raise Fallback
        except Fallback:
            reader.close()
            out.restart()
            out.warnings.clear()
            reader = BlockReader(path, chunk_bytes)
            try:
                meta = _exact(reader, out)
                if flush is not None:
                    flush()
            except Fallback:  # cannot happen: the walk hands over decoded pieces only
                raise TraceError(
                    path, "damaged beyond repair: its events do not decode; copy or export it again"
                ) from None
        if reader.gzip:  # the JSON may stop before the stream does: learn whether it is damaged
            while reader.read():
                pass
        if reader.damage:  # one warning that says why the data stops, rather than two
            what = damage_words(reader.damage)
            early = [w for w in out.warnings if w.startswith(_CUT_WORDS)]
            out.warnings = [w for w in out.warnings if w not in early]
            out.warnings.insert(
                0,
                f"{what}, so the data {ENDS_EARLY}: kept the complete events in the "
                f"{size_words(reader.total)} of JSON before that"
                if early
                else f"{what}: read the {size_words(reader.total)} of JSON it holds",
            )
        if progress is not None:
            progress(1.0)
        return meta, out.chunks, out.warnings, reader.gzip
    except OSError as e:
        raise TraceError(path, f"cannot read it ({e.strerror or e}); check the disk, or copy the file again") from None
    finally:
        reader.close()


def _start(reader: BlockReader) -> tuple[bytes, int]:
    """The first block with JSON in it, from its first byte that is not whitespace (or a BOM),
    and that byte's offset; whitespace before it is dropped as it is read."""
    lead = 0
    while True:
        b = reader.read()
        if not b:
            if reader.damage and lead == 0:
                raise TraceError(
                    reader.path,
                    f"{damage_words(reader.damage)} before any data: there "
                    "is nothing to read; copy or export the file again",
                )
            raise TraceError(
                reader.path,
                "the file is empty (nothing was written to it)"
                if lead == 0
                else "the file holds only whitespace, no JSON; export the trace again",
            )
        if lead == 0 and b.startswith(_BOM):
            b, lead = b[3:], 3
        body = b.lstrip(_WS)
        if body:
            return body, lead + len(b) - len(body)
        lead += len(b)


def _fast(reader: BlockReader, out: _Out) -> dict:
    chunk_bytes = out.chunk_bytes
    body, lead = _start(reader)
    eof = False
    first = body[:1]
    meta: dict = {}
    if first == b"[":
        form = "array"
        data_abs = lead + 1
        data = body[1:]
    elif first == b"{":
        form = "object"
        buf, m, seen = body, _EVENTS_KEY.search(body), 0
        while m is None and not eof and len(buf) < _PREFIX_MAX:
            b = reader.read()
            eof = not b
            seen = max(0, len(buf) - 64)
            buf += b
            m = _EVENTS_KEY.search(buf, seen)
        if m is None:
            raise Fallback()
        meta = _prefix_meta(buf[: m.start()])
        data_abs = lead + m.end()
        data = buf[m.end() :]
    else:
        raise TraceError(
            reader.path,
            "not a JSON trace (it does not start with '{' or '['); open a PyTorch profiler / Chrome trace JSON file",
        )

    limit = max_event_bytes()
    parts = [data]
    size = len(data)
    while True:
        out.tick(reader)
        while size < chunk_bytes and not eof:
            b = reader.read()
            if not b:
                eof = True
                break
            parts.append(b)
            size += len(b)
        if not eof and len(parts) > 1 and len(parts[-1]) >= _WINDOW:
            # the boundary searched in the last block (it holds the whole window searched, so
            # the cut is the same): the piece goes as its parts, not joined first
            last = parts[-1]
            cut = _last_boundary(last)
            if cut is not None:
                out.send(data_abs, [*parts[:-1], memoryview(last)[:cut]])
                comma = last.find(b",", cut)
                data_abs += size - len(last) + comma + 1
                rest = last[comma + 1 :]
                parts, size, chunk_bytes = [rest], len(rest), out.chunk_bytes
                continue
        data = b"".join(parts) if len(parts) > 1 else parts[0]
        if eof:
            break
        cut = _last_boundary(data)
        if cut is None:
            if _blank(data):  # whitespace between events: drop it, never hold it
                data_abs += len(data)
                parts, size = [b""], 0
                continue
            if size < limit:  # one large event: read on
                parts, size = [data], len(data)
                chunk_bytes *= 2
                continue
            # no boundary within the limit: walk this stretch exactly, then cut again
            state, data, data_abs = _walk(reader, out, data, data_abs, form, meta, until_clean=True)
            if state != "clean":
                return meta
            parts, size, chunk_bytes = [data], len(data), out.chunk_bytes
            continue
        out.send(data_abs, [memoryview(data)[:cut]])  # copied once, with its brackets, by the sink
        comma = data.find(b",", cut)  # the comma between this piece and the next event
        rest = data[comma + 1 :]
        data_abs += comma + 1
        parts, size, chunk_bytes = [rest], len(rest), out.chunk_bytes  # a large event is behind

    # -- the final piece: events, the array's closing bracket, and the trailing keys --
    done = _quick_tail(data, form)
    if done is None:
        _walk(reader, out, data, data_abs, form, meta, until_clean=False)
        return meta
    (evs, dec), n, tail_meta = done
    if evs:
        out.emit(evs, data_abs, data[:n], dec)
    meta.update(cap_strings(tail_meta))
    return meta


def _blank(data: bytes) -> bool:
    """Only whitespace? (bytes.count runs at memory speed; a regex or strip is 3-10x slower)"""
    n = data.count(b" ")
    return n == len(data) or n + data.count(b"\n") + data.count(b"\t") + data.count(b"\r") == len(data)


def _prefix_meta(prefix: bytes) -> dict:
    """The top-level keys before traceEvents."""
    prefix = prefix.rstrip(_WS).rstrip(b",") + b"}"
    try:
        meta = loads_lenient(prefix)
    except ValueError:
        raise Fallback() from None
    if not isinstance(meta, dict):
        raise Fallback()
    return cap_strings(meta)


_WINDOW = 1 << 20  # the boundary is searched for in the last MB of a piece's bytes


def _last_boundary(data: bytes, window: int = _WINDOW) -> int | None:
    """Offset just after the '}' of the last '}, {' boundary in the last `window` bytes."""
    # from the end, '}' by '}' (rfind runs at memory speed): the boundary is usually within an
    # event or two of the end, where a regex scan of the whole window cost ~2 ms a piece; after
    # 32 tries (a run of '}' inside a string: a Python step each) one regex pass, as before
    lo = max(0, len(data) - window)
    p = data.rfind(b"}", lo)
    for _ in range(32):
        if p < 0:
            return None
        if _BOUNDARY.match(data, p):
            return p + 1
        p = data.rfind(b"}", lo, p)
    last = None  # the last boundary starting at or before p (those after it were tried)
    for m in _BOUNDARY.finditer(data, lo):
        if m.start() > p:
            break
        last = m
    return None if last is None else last.start() + 1


def _quick_tail(data: bytes, form: str):
    """The last piece of the usual shape: events, ']', then (object form) a few small keys and
    '}'. Returns ((events, decoded bytes), length of the events' bytes, tail metadata), or
    None for anything else (json_scan then walks it exactly)."""
    stripped = data.rstrip(_WS)
    try:
        if form == "array":
            if stripped.endswith(b"]"):
                return decode_events(b"[" + stripped[:-1] + b"]"), len(stripped) - 1, {}
            return None
        for p in _array_ends(stripped):
            rest = stripped[p + 1 :].strip(_WS)
            if _EVENTS_KEY.search(rest):
                return None  # a second traceEvents key
            if rest.startswith(b","):
                mt = b"{" + rest[1:]
            elif rest == b"}":
                mt = b"{}"
            else:
                continue
            try:
                tail_meta = _any.decode(mt)
            except msgspec.DecodeError:
                continue
            if isinstance(tail_meta, dict):
                return decode_events(b"[" + stripped[:p] + b"]"), p, tail_meta
    except (msgspec.DecodeError, RecursionError):
        pass
    return None


def _array_ends(data: bytes, most: int = 16, looked: int = 4096):
    """From the end, up to `most` places where the event array may close: a ']' after an
    event's '}' (or at the very start), before ',"key"' or the final '}'. rfind, not a regex:
    this runs on every file's last piece."""
    p = len(data)
    for _ in range(looked):
        p = data.rfind(b"]", 0, p)
        if p < 0:
            return
        before = data[max(0, p - 64) : p].rstrip(_WS)
        after = data[p + 1 : p + 65].lstrip(_WS)
        if (before.endswith(b"}") or not before and p < 64) and (
            after.startswith(b",") and after[1:].lstrip(_WS)[:1] == b'"' or after == b"}"
        ):
            yield p
            most -= 1
            if not most:
                return


def _walk(
    reader: BlockReader, out: _Out, data: bytes, data_abs: int, form: str, meta: dict, until_clean: bool
) -> tuple[str, bytes, int]:
    """Walk exactly from an element boundary of the event array (json_scan). Returns ('clean',
    rest of the data, its offset) when the fast path can go on, else the final state."""
    from .json_scan import Cursor, Walker

    cur = Cursor(reader.read, data, data_abs, lambda: out.tick(reader))
    w = Walker(cur, out.emit, out.restart, decode_events, out.chunk_bytes, arrays=1)
    w.kept_here = len(out.chunks)
    state = w.events(data_abs + len(data) if until_clean else None)
    if state == "clean":
        out.warnings.extend(w.warnings())
        return state, bytes(cur.buf[cur.i :]), cur.pos()
    _finish(w, state, form, meta, out)
    return state, b"", cur.pos()


def _exact(reader: BlockReader, out: _Out) -> dict:
    """The whole document walked exactly (json_scan): any key order, duplicate keys, damage."""
    from .json_scan import Cursor, Walker

    body, lead = _start(reader)
    cur = Cursor(reader.read, body, lead, lambda: out.tick(reader))
    w = Walker(cur, out.emit, out.restart, decode_events, out.chunk_bytes)
    meta: dict = {}
    c = body[:1]
    cur.i = 1
    if c == b"[":
        w.start_array()
        _finish(w, w.events(), "array", meta, out)
    elif c == b"{":
        state = w.object_rest(meta)
        if not w.arrays:
            if state == "cut" and _intact_end(cur.last, "object"):
                raise TraceError(
                    reader.path,
                    "not valid JSON: damaged before its event list (a quote or "
                    "bracket out of place); export the trace again",
                )
            if state == "cut":
                raise TraceError(
                    reader.path,
                    "the file ends before its first complete event (cut off while writing?); copy or export it again",
                )
            if state == "damaged":
                raise TraceError(
                    reader.path,
                    f"not valid JSON: damaged at byte {cur.pos():,}, before any trace events; copy or export it again",
                )
            if w.events_not_list:
                raise TraceError(reader.path, "JSON, but not a trace: its traceEvents is not a list of events")
            raise TraceError(
                reader.path,
                "JSON, but not a trace: no traceEvents array (open a PyTorch profiler / Chrome trace JSON file)",
            )
        _object_end(w, state, out)
    else:
        raise TraceError(
            reader.path,
            "not a JSON trace (it does not start with '{' or '['); open a PyTorch profiler / Chrome trace JSON file",
        )
    return meta


def _intact_end(tail: bytes, form: str) -> bool:
    """Does the document end as a trace does (']' for the array form; '] , "key": ... }' for
    the object form)? Then a walk that met the end inside a value saw damage, not a cut."""
    stripped = tail.rstrip(_WS)
    if form == "array":
        return stripped.endswith(b"]")
    for p in _array_ends(stripped):
        rest = stripped[p + 1 :].strip(_WS)
        try:
            if rest == b"}" or isinstance(_any.decode(b"{" + rest[1:]), dict):
                return True
        except msgspec.DecodeError:
            continue
    return False


def _finish(w, state: str, form: str, meta: dict, out: _Out) -> None:
    """After the event array: the rest of the top-level object, and what the ending means."""
    if state == "cut":
        out.warnings.extend(w.warnings())
        if _intact_end(w.cur.last, form):  # the data does not really stop there
            out.warnings.append(
                f"the file is damaged from byte {w.cut_at:,} on (a quote or bracket "
                "out of place): kept the events before the damage; those after it "
                "could not be read"
            )
        else:
            out.warnings.append(_CUT_WORDS + " (cut off while writing?): kept the complete events before the cut")
        return
    if form == "object":
        _object_end(w, w.object_rest(meta), out)
    else:
        out.warnings.extend(w.warnings())
        _trailing(w, out)


def _object_end(w, state: str, out: _Out) -> None:
    out.warnings.extend(w.warnings())
    if state == "cut":
        if w.arrays and _intact_end(w.cur.last, "object"):
            out.warnings.append(
                "the file is damaged after its event list (a quote or bracket out of "
                "place): the events were read, metadata after them may be missing"
            )
        elif w.arrays:
            out.warnings.append(
                f"the file {ENDS_EARLY}, after its event list (cut off while writing?): "
                "the events were read, metadata after them may be missing"
            )
    elif state == "damaged":
        out.warnings.append(
            f"the file is damaged at byte {w.cur.pos():,} (not JSON there), after its event list: the rest was not read"
        )
    else:
        _trailing(w, out)


def _trailing(w, out: _Out) -> None:
    c = w.cur.peek()
    if c is not None:
        out.warnings.append(f"ignored what follows the end of the JSON document (from byte {w.cur.pos():,})")
