"""Arguments recorded on events that the analysis asks about (NCCL kernels' collective arguments,
CPU ops' recorded shapes), read with the events when a Kineto trace is opened and kept in the
cache, so that analysing a session reads no trace file again.

Keyed by (source file, ordinal of the event in it), the event's identity in every reader and
cache path (the `src` column and the lane's source); each value is one JSON object of the
producer's keys, stored once however many events carry it (a step's shapes and collectives repeat
step after step and rank after rank: 64 ranks of a real DDP trace hold a few thousand distinct
objects for 790k ops)."""

from __future__ import annotations

from collections.abc import Iterable

import msgspec
import numpy as np

ORDINAL_BITS = 40  # ordinals below 2**40 (a trillion events in one file), sources above


class ArgTable:
    def __init__(self, key: np.ndarray, ref: np.ndarray, blob: np.ndarray, off: np.ndarray) -> None:
        """key: int64, sorted, source << ORDINAL_BITS | ordinal; ref: int32, each key's object;
        blob, off: the objects' JSON bytes, object k at blob[off[k]:off[k + 1]]."""
        self.key, self.ref, self.blob, self.off = key, ref, blob, off

    @classmethod
    def build(cls, parts: Iterable[tuple[int, np.ndarray, np.ndarray]], blobs: list[bytes]) -> ArgTable:
        """parts: (source, ordinals, refs into blobs) per file."""
        keys, refs = [], []
        for source, ordinals, ref in parts:
            keys.append((np.int64(source) << ORDINAL_BITS) | np.asarray(ordinals, np.int64))
            refs.append(np.asarray(ref, np.int32))
        key = np.concatenate(keys) if keys else np.zeros(0, np.int64)
        ref = np.concatenate(refs) if refs else np.zeros(0, np.int32)
        o = np.argsort(key, kind="stable")
        off = np.zeros(len(blobs) + 1, np.int64)
        np.cumsum([len(b) for b in blobs], out=off[1:])
        blob = np.frombuffer(b"".join(blobs), np.uint8)
        return cls(key[o], ref[o], blob, off)

    @classmethod
    def join(cls, parts: list[tuple[int, ArgTable]]) -> ArgTable:
        """One table from the tables of one-file sessions (their events all of source 0), each
        given the source it has in the joined session (io/cache_join.py)."""
        keys, refs, blobs, offs = [], [], [], [np.zeros(1, np.int64)]
        n_obj, n_bytes = 0, 0
        low = (np.int64(1) << ORDINAL_BITS) - 1
        for source, t in parts:
            key = np.asarray(t.key, np.int64)
            if len(key) and int(key.max()) > low:
                raise ValueError("a part's table holds more than one source")
            keys.append((np.int64(source) << ORDINAL_BITS) | key)
            refs.append(np.asarray(t.ref, np.int32) + np.int32(n_obj))
            blobs.append(np.asarray(t.blob, np.uint8))
            offs.append(np.asarray(t.off, np.int64)[1:] + n_bytes)
            n_obj += len(t.off) - 1
            n_bytes += len(t.blob)
        key = np.concatenate(keys) if keys else np.zeros(0, np.int64)
        ref = np.concatenate(refs) if refs else np.zeros(0, np.int32)
        o = np.argsort(key, kind="stable")
        blob = np.concatenate(blobs) if blobs else np.zeros(0, np.uint8)
        return cls(key[o], ref[o], blob, np.concatenate(offs))

    def arrays(self) -> dict[str, np.ndarray]:
        return {"argtab_key": self.key, "argtab_ref": self.ref, "argtab_blob": self.blob, "argtab_off": self.off}

    @classmethod
    def from_arrays(cls, a: dict[str, np.ndarray]) -> ArgTable:
        """From arrays() as stored; ValueError when they do not fit together (a damaged entry)."""
        key, ref, blob, off = (np.asarray(a[k]) for k in ("argtab_key", "argtab_ref", "argtab_blob", "argtab_off"))
        if (
            key.dtype != np.int64
            or ref.dtype != np.int32
            or blob.dtype != np.uint8
            or off.dtype != np.int64
            or len(key) != len(ref)
            or not len(off)
            or off[0] != 0
            or off[-1] != len(blob)
            or (np.diff(off) < 0).any()
            or (np.diff(key) < 0).any()
            or (len(ref) and (int(ref.min()) < 0 or int(ref.max()) >= len(off) - 1))
        ):
            raise ValueError("the recorded arguments' table is inconsistent")
        return cls(key, ref, blob, off)

    def __len__(self) -> int:
        return len(self.key)

    def of(self, trace, idx: np.ndarray) -> dict[int, dict]:
        """Event index -> its recorded object (the producer's keys), for the events of idx that
        have one. Each event gets its own decoded object (callers may keep or change it)."""
        idx = np.asarray(idx, np.int64)
        if not len(idx) or not len(self.key):
            return {}
        lane_src = np.array([ln.source for ln in trace.lanes], np.int64)
        c = trace.columns
        k = (lane_src[np.asarray(c["lane"])[idx]] << ORDINAL_BITS) | np.asarray(c["src"])[idx].astype(np.int64)
        at = np.minimum(np.searchsorted(self.key, k), len(self.key) - 1)
        hit = self.key[at] == k
        out: dict[int, dict] = {}
        blob, off = self.blob, self.off
        for i, r in zip(idx[hit].tolist(), self.ref[at[hit]].tolist()):
            try:
                v = msgspec.json.decode(blob[off[r] : off[r + 1]].tobytes())
            except msgspec.DecodeError:  # written by us: only a damaged entry gets here
                continue
            if isinstance(v, dict):
                out[i] = v
        return out
