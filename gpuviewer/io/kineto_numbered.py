"""Whether a Kineto trace holds every host event the profiler numbered. PyTorch's profiler
numbers its host events in order ("Ev Idx" of CPU ops, annotations, Python functions and instant
events); a file that holds only some of the numbers between its first and its last was sampled
or filtered after it was written (HTA's trace filter keeps ~1% of them), and its host timeline
(idle, time outside ops) is not what the host did. A file written by the profiler holds them all."""

from __future__ import annotations

from itertools import compress, repeat
from operator import attrgetter, eq

import numpy as np

from ..model.numbered import kept_pct, kept_share

_ARGS, _IDX = attrgetter("args"), attrgetter("ev_idx")
# the events the profiler numbers: host ops, annotations and Python functions, and instants
HOST_CATS = frozenset(("cpu_op", "user_annotation", "python_function"))
_INSTANTS = ("i", "I")
_INSTANT_SET = frozenset(_INSTANTS)


def host_positions(keys: list, lane_key: np.ndarray) -> np.ndarray:
    """Positions of the events the profiler numbers among complete events (keys, lane_key: their
    lane keys (cat, pid, tid)): host ops, annotations and Python functions."""
    host = [k for k, key in enumerate(keys) if key[0] in HOST_CATS]
    return np.flatnonzero(np.isin(lane_key, host)) if host else np.zeros(0, np.intp)


def numbered(x: list, evs: list, phs: list, n_inst: int, at: np.ndarray) -> tuple[int, int, int, int] | None:
    """(how many, lowest, highest, widest gap) of the "Ev Idx" numbers a piece's complete events `x`
    (its host events at positions `at`, host_positions) and its `n_inst` instants hold; the widest
    gap: the most numbers missing between two it holds; None when none holds one. The
    profiler numbers them in file order, so a piece whose first and last numbers are no further
    apart than it has host events holds every number between them (no gap): found from the events
    at its ends, not from every event (a pass over them all cost 5% of the decode; a host event
    without a number only makes this bound looser); any other piece is counted event by event.
    Never raises: the numbers only feed a warning."""
    try:
        if not len(at) and not n_inst:
            return None
        # the numbered events nearest each end (a tiled or merged trace's instants may hold none)
        got = [_first(x, at[:_NEAR].tolist()), _first(x, at[::-1][:_NEAR].tolist())] if len(at) else []
        inst = _instants(phs) if n_inst else []
        if inst:
            got += [_first(evs, inst[:_NEAR]), _first(evs, inst[::-1][:_NEAR])]
        nums = [v for v in got if v is not None]
        if len(nums) == len(got):
            lo, hi = min(nums), max(nums)
            if hi - lo + 1 <= len(at) + n_inst:
                return hi - lo + 1, lo, hi, 0
        return _counted(x, list(map(evs.__getitem__, inst)))
    except (TypeError, ValueError, OverflowError, AttributeError, IndexError):
        return None


_MAX = 1 << 53  # numbers past this are no profiler's (and float64 holds them exactly below it)


_NEAR = 64  # events looked at from each end for a number


def _number(e):
    a = e.args
    return None if a is None else a.ev_idx


def _instants(phs: list) -> list[int]:
    """The instants' positions, in one C pass (by eq where a phase is a list or an object)."""
    try:
        return list(compress(range(len(phs)), map(_INSTANT_SET.__contains__, phs)))
    except TypeError:
        return sorted(i for p in _INSTANTS for i in compress(range(len(phs)), map(eq, phs, repeat(p))))


def _first(evs: list, at) -> int | None:
    """The first whole number in range of the events at positions `at`, or None."""
    for i in at:
        v = _number(evs[i])
        if type(v) is int and 0 <= v < _MAX:
            return v
    return None


def _counted(x: list, inst: list) -> tuple[int, int, int, int] | None:
    v = np.concatenate([_values(x), _values(inst)])
    # whole numbers in range (NaN: absent or null, fails every test)
    v = v[(v >= 0) & (v < _MAX) & (v == np.floor(v))]
    if not len(v):
        return None
    a = np.unique(v)
    return len(v), int(a[0]), int(a[-1]), int(np.diff(a).max()) - 1 if len(a) > 1 else 0


def _values(evs: list) -> np.ndarray:
    """The events' numbers as float64 (exact below _MAX; absent: NaN), from one C pass where it
    can (a scaled trace, whose tiles repeat the numbers, is counted event by event: a list of
    them cost ~0.3 us an event, a third of the piece's extraction)."""
    try:  # (an event without args holds no number: filtered out)
        return np.fromiter(map(_IDX, filter(None, map(_ARGS, evs))), np.float64)
    except (TypeError, ValueError, OverflowError):  # text, a list, 400 digits
        vals = [e.args.ev_idx for e in evs if e.args is not None]
        return np.array([v if type(v) is int and 0 <= v < _MAX else np.nan for v in vals], np.float64)


def add(total: list[int] | None, piece: tuple[int, int, int, int] | None) -> list[int] | None:
    """The file's [how many, lowest, highest, widest gap, the last piece's highest] with the next
    piece's (pieces come in file order, as the numbers do: the gap between two pieces counts too)."""
    if piece is None:
        return total
    if total is None:
        return [*piece, piece[2]]
    between = piece[1] - total[4] - 1
    return [
        total[0] + piece[0],
        min(total[1], piece[1]),
        max(total[2], piece[2]),
        max(total[3], piece[3], between),
        piece[2],
    ]


def warning(n: list[int] | None) -> str | None:
    """The file's warning (the reader names the file), or None."""
    share = kept_share(n)
    if share is None or n is None:
        return None
    span = n[2] - n[1] + 1
    return (
        f"it holds {n[0]:,} of the {span:,} host events the profiler numbered "
        f"from the first it holds to the last (Ev Idx {n[1]:,} to {n[2]:,}; {kept_pct(share)}), the missing "
        "ones spread through them: it was sampled or filtered after it was written, so its host timeline is incomplete: "
        "the host's idle time, its time outside ops and the ops' shares are of what is left, not of what "
        "the host did"
    )
