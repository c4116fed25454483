"""The arguments of NCCL kernels that collective matching needs: process group, collective
name, element counts, dtype and group size (PyTorch profiler traces record them on the kernel
since 2.1). The store keeps no arguments, so they are fetched from the source once per session,
in source order (each piece of the file decompressed and decoded once, by a decoder that builds
only these fields), and kept on the trace."""
from __future__ import annotations

import bisect
from typing import Any

import msgspec
import numpy as np

from ..model.categories import Cat
from ..model.trace import Source, Trace
from .errors import TraceError
from .json_sanitize import loads_lenient
from .streams import open_salvage


class _CommArgs(msgspec.Struct):
    group: Any = msgspec.field(default=None, name="Process Group Name")
    group_desc: Any = msgspec.field(default=None, name="Process Group Description")
    group_ranks: Any = msgspec.field(default=None, name="Process Group Ranks")
    collective: Any = msgspec.field(default=None, name="Collective name")
    in_nelems: Any = msgspec.field(default=None, name="In msg nelems")
    out_nelems: Any = msgspec.field(default=None, name="Out msg nelems")
    dtype: Any = None
    group_size: Any = msgspec.field(default=None, name="Group size")
    src_rank: Any = msgspec.field(default=None, name="Src Rank")  # point-to-point: the peer
    dst_rank: Any = msgspec.field(default=None, name="Dst Rank")


class _Ev(msgspec.Struct):
    args: _CommArgs | None = None  # only these keys are built; every other key is skipped


class _EvLoose(msgspec.Struct):
    args: Any = None


_pieces = msgspec.json.Decoder(list[_Ev])
_loose = msgspec.json.Decoder(list[_EvLoose])


def collective_args(trace: Trace) -> dict[int, dict]:
    """Event index -> {group, group_desc, group_ranks, collective, in_nelems, out_nelems, dtype,
    group_size} (only the keys the producer recorded) for every communication kernel."""
    cached = trace._lane_cache.get("collective_args")
    if cached is not None:
        return cached
    out: dict[int, dict] = {}
    c = trace.columns
    idx = np.flatnonzero(np.asarray(c["cat"]) == Cat.COMM_KERNEL)
    if len(idx) and trace.sources and all(s.format == "kineto" for s in trace.sources):
        lane_src = np.array([ln.source for ln in trace.lanes], np.int64)
        src_file = lane_src[np.asarray(c["lane"][idx])]
        ordinal = np.asarray(c["src"][idx]).astype(np.int64)
        for f in np.unique(src_file).tolist():
            m = src_file == f
            try:
                got = _from_source(trace.sources[min(f, len(trace.sources) - 1)], ordinal[m])
            except (TraceError, OSError, EOFError, ValueError, msgspec.DecodeError):
                continue  # changed or unreadable now: these kernels match by name and order
            for i, rec in zip(idx[m].tolist(), got):
                if rec:
                    out[i] = rec
    trace._lane_cache["collective_args"] = out
    return out


def _from_source(src: Source, ordinals: np.ndarray) -> list[dict]:
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
                raw = [e.get("args") if isinstance(e, dict) else None
                       for e in _piece(src.path, src.size, src.mtime_ns, offset, length)]
                conv = _pick
            else:
                while pos < offset:  # decompress forward to the piece (streams cannot seek back)
                    got = fh.read(min(offset - pos, 16 << 20))
                    if not got:
                        break
                    pos += len(got)
                data = fh.read(length)
                pos += len(data)
                raw, conv = _decode(b"[" + data + b"]")
            for p, slot in want[k]:
                a = raw[p] if 0 <= p < len(raw) else None
                if isinstance(a, (dict, _CommArgs)):
                    out[slot] = conv(a)
    return out


def _decode(piece: bytes):
    """The events' args and how to read them: the struct of our keys (fast), or raw objects
    when an args value is not an object or the piece needs the lenient decoder (NaN, bad UTF-8)."""
    try:
        return [e.args for e in _pieces.decode(piece)], _as_dict
    except msgspec.ValidationError:
        return [e.args for e in _loose.decode(piece)], _pick
    except msgspec.DecodeError:
        evs = loads_lenient(piece)
        return [e.get("args") if isinstance(e, dict) else None for e in evs or []], _pick


# the producer's key -> our name, from the struct's field names
_KEYS = {f.encode_name: f.name for f in msgspec.structs.fields(_CommArgs)}


def _as_dict(a: _CommArgs) -> dict:
    return {f: v for f in _CommArgs.__struct_fields__ if (v := getattr(a, f)) is not None}


def _pick(a: dict) -> dict:
    """From a raw args object: our names for the keys that are present."""
    return {v: a[k] for k, v in _KEYS.items() if k in a}
