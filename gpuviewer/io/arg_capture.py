"""The arguments kept from a Kineto piece as it is decoded (model/arg_table.py): the keys that
collective matching (io/comm_args.py: of NCCL kernels) and the ops' shapes (io/op_shapes.py: of the
ops with a work rule, model/work_ops.py) read, the only ones any analysis asks about, taken in the
same pass as the columns so an analysis never reads the file again. The decoder hands each value
over as its raw JSON bytes (chrome_events.Args), so nothing is built for them here but one JSON
object per distinct combination."""

from __future__ import annotations

import operator
from collections.abc import Iterable
from itertools import compress, repeat
from operator import and_, ne, or_

import msgspec
import numpy as np

# producer's key -> the field of chrome_events.Args that holds its raw JSON (in this order)
KEPT = {
    "Process Group Name": "pg_name",
    "Process Group Description": "pg_desc",
    "Process Group Ranks": "pg_ranks",
    "Collective name": "coll_name",
    "In msg nelems": "in_nelems",
    "Out msg nelems": "out_nelems",
    "dtype": "dtype",
    "Group size": "group_size",
    "Src Rank": "src_rank",
    "Dst Rank": "dst_rank",
    "Input Dims": "in_dims",
    "Input type": "in_types",
    "Concrete Inputs": "concrete",
}
_FIELDS = tuple(KEPT.values())
_KEYS = tuple(msgspec.json.encode(k) + b":" for k in KEPT)
_NULL = b"null"
_COMM, _SHAPES = _FIELDS[:10], _FIELDS[10:]
# the shapes and, last, PyTorch 1.7-1.8's "Input dims" (kept under "Input Dims" where that is absent)
_GET_COMM, _GET_SHAPES = operator.attrgetter(*_COMM), operator.attrgetter(*_SHAPES, "in_dims_v1")
_NO_COMM, _NO_SHAPES = (None,) * len(_COMM), (None,) * (len(_SHAPES) + 1)
_ARGS = operator.attrgetter("args")


def raw_of(v) -> msgspec.Raw | None:
    """A value from a loosely decoded args object as raw JSON (None when absent or unencodable)."""
    if v is None:
        return None
    try:
        return msgspec.Raw(msgspec.json.encode(v))
    except (TypeError, ValueError, OverflowError, RecursionError):
        return None


def capture(x: list, pos: np.ndarray, shapes_of: list[bool], comm_of: list[bool]) -> dict | None:
    """For the events x (at positions pos of the piece) that carry any kept key with a value
    other than null: {"pos": their positions, "ref": each one's object, "blobs": the distinct
    objects as JSON bytes}; None when none does. The three shape keys count only for the events
    whose shapes_of is true (ops with a work rule, model/work_ops.py), the collective keys only
    for those whose comm_of is true (NCCL kernels): the only ones the analysis asks about."""
    # the caller hands over only events that are one or the other (a few percent of a piece):
    # taking the ten collective values of every event cost ~0.6 us an event, a third of the
    # piece's column extraction. The decoded fields are the truth (a key may be spelled with
    # \u escapes), so the bytes are not searched for keys instead
    rows: list[int] = []
    refs: list[int] = []
    index: dict[tuple, int] = {}
    blobs: list[bytes] = []
    comm, shapes, no_comm, no_shapes = _GET_COMM, _GET_SHAPES, _NO_COMM, _NO_SHAPES
    # the events that can hold a kept value, found in C: an NCCL kernel, or an op with shapes on
    # record (a trace recorded without record_shapes has none: its million aten ops cost ~0.4 us
    # each in the loop below for nothing, a quarter of the piece's column extraction)
    try:
        got = list(map(ne, map(shapes, map(_ARGS, x)), repeat(no_shapes)))
    except AttributeError:  # an event without args: every event is looked at below
        cand: Iterable[int] = range(len(x))
    else:
        cand = compress(range(len(x)), map(or_, map(and_, got, shapes_of), comm_of))
    for j in cand:
        e, want, coll = x[j], shapes_of[j], comm_of[j]
        a = e.args
        if a is None:
            continue
        c = comm(a) if coll else no_comm
        if c == no_comm:
            if not want:
                continue
            d, ty, co, d1 = sh = shapes(a)
            if sh == no_shapes:
                continue
            d = d if d is not None else d1
            vals: tuple = (None, d and bytes(d), ty and bytes(ty), co and bytes(co))
        else:
            d, ty, co, d1 = shapes(a) if want else no_shapes
            d = d if d is not None else d1
            vals = (tuple([v and bytes(v) for v in c]), d and bytes(d), ty and bytes(ty), co and bytes(co))
        r = index.get(vals)
        if r is None:
            flat = (vals[0] or (None,) * len(_COMM)) + vals[1:]
            parts = [k + v for k, v in zip(_KEYS, flat) if v is not None and v != _NULL]
            r = index[vals] = len(blobs) if parts else -1
            if parts:
                blobs.append(b"{" + b",".join(parts) + b"}")
        if r >= 0:
            rows.append(j)
            refs.append(r)
    if not rows:
        return None
    return {"pos": np.asarray(pos)[rows].astype(np.int64), "ref": np.array(refs, np.int32), "blobs": blobs}


class Collected:
    """One file's captured pieces, their objects numbered across the file (and across the
    session through the builder's shared dict)."""

    def __init__(self) -> None:
        self.parts: list[tuple[np.ndarray, np.ndarray]] = []  # (ordinals, refs into the builder's blobs)

    def add(self, got: dict, base: int, blob_ids: dict[bytes, int]) -> None:
        ids = np.array([blob_ids.setdefault(b, len(blob_ids)) for b in got["blobs"]], np.int32)
        self.parts.append((got["pos"] + base, ids[got["ref"]]))

    def hand_over(self, b, source: int) -> None:
        """Into the builder (model/build.py), as this file's rows."""
        for ordinals, refs in self.parts:
            b.arg_parts.append((source, ordinals, refs))
        self.parts = []
