"""Some arguments of many events at once, fetched from Kineto sources in file order: each piece
of the file is decompressed and decoded once, by a msgspec decoder that builds only the fields
of a given struct (every other key is skipped). The store keeps no arguments; collective
matching (NCCL arguments) and memory-copy statistics (bytes) read theirs through here."""

from __future__ import annotations

import bisect
import os
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import msgspec
import numpy as np

from ..model.trace import Source, Trace
from .errors import TraceError
from .json_sanitize import loads_lenient
from .streams import open_salvage


class ArgsSpec:
    """The fields to read: a msgspec Struct whose field names are ours and whose encode names are
    the producer's keys."""

    def __init__(self, struct: Any) -> None:
        self.struct = struct  # a msgspec Struct class, built at run time
        ev: Any = msgspec.defstruct("Ev", [("args", struct | None, None)])
        loose: Any = msgspec.defstruct("EvLoose", [("args", Any, None)])
        self.fast = msgspec.json.Decoder(list[ev])
        self.loose = msgspec.json.Decoder(list[loose])
        # a piece split into its events' raw bytes (3.4x faster than building every event), then
        # only the wanted events decoded
        self.raw = msgspec.json.Decoder(list[msgspec.Raw])
        self.one = msgspec.json.Decoder(ev)
        self.one_loose = msgspec.json.Decoder(loose)
        self.keys = {f.encode_name: f.name for f in msgspec.structs.fields(struct)}

    def as_dict(self, a) -> dict:
        return {f: v for f in self.struct.__struct_fields__ if (v := getattr(a, f)) is not None}

    def pick(self, a: dict) -> dict:
        """From a raw args object: our names for the keys that are present."""
        return {v: a[k] for k, v in self.keys.items() if k in a}

    def decode_some(self, piece: bytes, positions: list[int], n_events: int) -> dict[int, tuple]:
        """{position: (args, how to read them)} for the events at these positions of the piece
        (of about n_events events: past a quarter of them, the whole piece is decoded at once)."""
        if 4 * len(positions) > n_events:
            raw, conv = self.decode(piece)
            return {p: (raw[p], conv) for p in positions if 0 <= p < len(raw)}
        try:
            items = self.raw.decode(piece)
        except msgspec.DecodeError:  # NaN, bad UTF-8...: the whole piece, leniently
            raw, conv = self.decode(piece)
            return {p: (raw[p], conv) for p in positions if 0 <= p < len(raw)}
        out = {}
        for p in positions:
            if not 0 <= p < len(items):
                continue
            try:
                out[p] = (self.one.decode(items[p]).args, self.as_dict)
            except msgspec.ValidationError:  # an args value that is not an object
                out[p] = (self.one_loose.decode(items[p]).args, self.pick)
        return out

    def decode(self, piece: bytes):
        """The events' args and how to read them: the struct (fast), or raw objects when an args
        value is not an object or the piece needs the lenient decoder (NaN, bad UTF-8)."""
        try:
            return [e.args for e in self.fast.decode(piece)], self.as_dict
        except msgspec.ValidationError:
            return [e.args for e in self.loose.decode(piece)], self.pick
        except msgspec.DecodeError:
            evs = loads_lenient(piece)
            return [e.get("args") if isinstance(e, dict) else None for e in evs or []], self.pick


def kineto_args(trace: Trace, idx: np.ndarray, spec: ArgsSpec) -> dict[int, dict]:
    """Event index -> its fields (only those recorded), for the events idx of Kineto sources.
    A source that changed or cannot be read now gives nothing (callers work without)."""
    out: dict[int, dict] = {}
    if not len(idx) or not trace.sources or not all(s.format == "kineto" for s in trace.sources):
        return out
    c = trace.columns
    lane_src = np.array([ln.source for ln in trace.lanes], np.int64)
    src_file = lane_src[np.asarray(c["lane"][idx])]
    ordinal = np.asarray(c["src"][idx]).astype(np.int64)
    files = np.unique(src_file).tolist()

    def one(f):
        m = src_file == f
        try:
            return m, from_source(trace.sources[min(f, len(trace.sources) - 1)], ordinal[m], spec)
        except (TraceError, OSError, EOFError, ValueError, msgspec.DecodeError):
            return m, []

    # one file a thread: their decompression (ISA-L, zlib) runs without the GIL, so many ranks'
    # files are read side by side (64 files: 2.0 s one after another on the device machine)
    workers = min(len(files), os.cpu_count() or 1, 8)
    if workers > 1:
        with ThreadPoolExecutor(workers) as pool:
            results = list(pool.map(one, files))
    else:
        results = [one(f) for f in files]
    for m, got in results:
        for i, rec in zip(idx[m].tolist(), got):
            if rec:
                out[i] = rec
    return out


def kept_args(trace: Trace, idx: np.ndarray, spec: ArgsSpec) -> dict[int, dict]:
    """kineto_args, from the arguments kept when the session was opened (trace.arg_table, whose
    keys include every key of spec) when it has them: then no file is read."""
    tab = trace.arg_table
    if tab is None:
        return kineto_args(trace, idx, spec)
    out: dict[int, dict] = {}
    if not len(idx) or not trace.sources or not all(s.format == "kineto" for s in trace.sources):
        return out
    keys = spec.keys.items()
    for i, d in tab.of(trace, idx).items():
        rec = {f: v for k, f in keys if (v := d.get(k)) is not None}
        if rec:
            out[i] = rec
    return out


def from_source(src: Source, ordinals: np.ndarray, spec: ArgsSpec) -> list[dict]:
    from .args import _check_unchanged, _piece

    _check_unchanged(src)
    chunks = src.chunks
    if not chunks:
        return [{} for _ in ordinals]
    firsts = [ch[2] for ch in chunks]
    want: dict[int, list[tuple[int, int]]] = {}  # chunk -> [(position in chunk, output slot)]
    for slot, o in enumerate(ordinals.tolist()):
        k = max(0, bisect.bisect_right(firsts, o) - 1)
        offset, _length, first = chunks[k]
        want.setdefault(k, []).append((o - first if offset >= 0 else o, slot))
    out: list[dict] = [{} for _ in ordinals]
    with open_salvage(src.path) as fh:
        pos = 0
        for k in sorted(want, key=lambda k: chunks[k][0]):
            offset, length, _ = chunks[k]
            if offset < 0:  # decoded as a whole document: the bounded, lenient args reader's
                raw = [
                    e.get("args") if isinstance(e, dict) else None
                    for e in _piece(src.path, src.size, src.mtime_ns, offset, length)
                ]
                conv = spec.pick
            else:
                while pos < offset:  # decompress forward to the piece (streams cannot seek back)
                    got = fh.read(min(offset - pos, 16 << 20))
                    if not got:
                        break
                    pos += len(got)
                data = fh.read(length)
                pos += len(data)
                n_ev = firsts[k + 1] - firsts[k] if k + 1 < len(firsts) else length // 200  # ~200 bytes an event
                found = spec.decode_some(b"[" + data + b"]", [p for p, _ in want[k]], n_ev)
                for p, slot in want[k]:
                    a, conv_p = found.get(p, (None, None))
                    if isinstance(a, (dict, spec.struct)):
                        out[slot] = conv_p(a)
                continue
            for p, slot in want[k]:
                a = raw[p] if 0 <= p < len(raw) else None
                if isinstance(a, (dict, spec.struct)):
                    out[slot] = conv(a)
    return out
