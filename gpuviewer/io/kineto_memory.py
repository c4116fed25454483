"""The '[memory]' instant events of a piece (PyTorch's profile_memory: one per allocation and free,
a tenth of a Kineto trace's events) as columns, picked out by map and compress in C. Made one
tuple each and walked again by the reader, they took 13% of a rank's read (py-spy, one 1.5M-event
rank of the 100M session). A piece where any of them is odd (a category or id that is not plain
text or an int, a time or byte count that is not a plain number, a phase or argument that cannot
be hashed) is left to the general path (kineto_piece._others), which counts and mends such events;
the samples kept are the same either way (tests/io/test_memory_samples.py)."""

from __future__ import annotations

from itertools import compress, repeat
from operator import attrgetter, eq

import numpy as np

from .chrome_values import TS_MAX_US, bump, floats, odd_cat, odd_ident
from .kineto_meta import RANK_MAX, int_or_none

INSTANT = dict.fromkeys(("i", "I", "R", "n"), True)  # the phases the reader takes memory from
_NOT_GPU = -(1 << 62)  # a sample not taken: not a CUDA device's
NO_ID = -(1 << 61)  # a CUDA device's sample without a device id: its time counts, it is not drawn
_TIMES, _BYTES = {int, float}, {int, float, type(None)}
_NAME, _ARGS, _TS = attrgetter("name"), attrgetter("args"), attrgetter("ts")
_IDS = attrgetter("cat", "pid", "tid", "id")
_KIND = attrgetter("device_type", "device_id")
_ALLOC, _RES = attrgetter("total_allocated"), attrgetter("total_reserved")


def memory_instants(evs: list, phs: list, bad: dict) -> tuple[dict | None, list[int]]:
    """({"t": µs, "dev", "alloc", "res"} of the CUDA devices' memory samples, dev NO_ID where the
    sample names none; the positions taken), or (None, []) when the piece has none or any is odd.
    Samples with an out-of-range time are counted in bad["ts"] and dropped, as the general path
    does."""
    try:
        at = list(compress(range(len(evs)), map(INSTANT.get, phs, repeat(False))))
    except TypeError:  # a phase that is a list or an object
        return None, []
    inst = [evs[i] for i in at]
    try:
        sel = list(map(eq, map(_NAME, inst), repeat("[memory]")))
    except TypeError:  # pragma: no cover - == does not raise for JSON values
        return None, []
    at, inst = list(compress(at, sel)), list(compress(inst, sel))
    args = list(map(_ARGS, inst))
    if any(a is None for a in args):  # without args it is an instant like any other
        has = [a is not None for a in args]
        at, inst, args = list(compress(at, has)), list(compress(inst, has)), list(compress(args, has))
    if not at:
        return None, []
    try:
        ids = set(map(_IDS, inst))
        kinds = list(map(_KIND, args))
        per_kind = dict.fromkeys(kinds)
    except TypeError:  # an id or argument that is a list or an object
        return None, []
    if any(odd_cat(c) or odd_ident(p) or odd_ident(t) or odd_ident(i) for c, p, t, i in ids):
        return None, []
    tss, allocs, ress = list(map(_TS, inst)), list(map(_ALLOC, args)), list(map(_RES, args))
    # plain numbers only (a type test in C): true/false, strings, lists take the general path,
    # whose num() reads them as the reader always has (a bool is no time, a string of one is)
    if not set(map(type, tss)) <= _TIMES or not set(map(type, allocs + ress)) <= _BYTES:
        return None, []
    for dt, dv in per_kind:
        d = int_or_none(dv, RANK_MAX)
        # the reader's rule: a CUDA device's sample (type 1), or no type and a device id; a CUDA
        # sample without an id is kept for the file's first time and then dropped, as before
        gpu = dt in (1, "1") or (dt is None and d not in (None, -1))
        per_kind[(dt, dv)] = (NO_ID if d is None else d) if gpu else _NOT_GPU
    ts = floats(tss)
    ok = np.abs(ts) <= TS_MAX_US  # False for NaN
    bump(bad, "ts", len(ts) - int(np.count_nonzero(ok)))
    dev = np.fromiter(map(per_kind.__getitem__, kinds), np.int64, len(kinds))
    keep = ok & (dev != _NOT_GPU)
    alloc, res = floats(allocs), floats(ress)  # None is NaN
    return {"t": ts[keep], "dev": dev[keep], "alloc": alloc[keep], "res": res[keep]}, at
