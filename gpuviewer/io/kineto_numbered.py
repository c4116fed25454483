"""Whether a Kineto trace holds every host event the profiler numbered. PyTorch's profiler
numbers its host events in order ("Ev Idx" of CPU ops, annotations, Python functions and instant
events); a file that holds only some of the numbers between its first and its last was sampled
or filtered after it was written (HTA's trace filter keeps ~1% of them), and its host timeline
(idle, time outside ops) is not what the host did. A file written by the profiler holds them all."""

from __future__ import annotations

from operator import attrgetter

import numpy as np

from ..model.numbered import kept_pct, kept_share

_EV_IDX = attrgetter("args.ev_idx")
# the events the profiler numbers: host ops, annotations and Python functions, and instants
_HOST_CATS = frozenset(("cpu_op", "user_annotation", "python_function"))
_INSTANTS = ("i", "I")  # (compared, not looked up: a hostile phase may be a list)


def numbered(
    x: list, evs: list, phs: list, n_inst: int, keys: list, lane_key: np.ndarray
) -> tuple[int, int, int, int] | None:
    """(how many, lowest, highest, widest gap) of the "Ev Idx" numbers a piece's complete events `x`
    and its `n_inst` instants hold (keys, lane_key: x's lane keys (cat, pid, tid)); the widest gap:
    the most numbers missing between two it holds; None when none holds one. The
    profiler numbers them in file order, so a piece whose first and last numbers are no further
    apart than it has host events holds every number between them (no gap): found from the events
    at its ends, not from every event (a pass over them all cost 5% of the decode; a host event
    without a number only makes this bound looser); any other piece is counted event by event.
    Never raises: the numbers only feed a warning."""
    try:
        host = [k for k, key in enumerate(keys) if key[0] in _HOST_CATS]
        at = np.flatnonzero(np.isin(lane_key, host)) if host else np.zeros(0, np.intp)
        if not len(at) and not n_inst:
            return None
        ends = [x[at[0]], x[at[-1]]] if len(at) else []
        if n_inst:
            back = phs[::-1]
            first = min(phs.index(p) for p in _INSTANTS if p in phs)
            last = len(phs) - 1 - min(back.index(p) for p in _INSTANTS if p in back)
            ends += [evs[first], evs[last]]
        got = [_number(e) for e in ends]
        if all(type(v) is int and 0 <= v < _MAX for v in got):
            lo, hi = min(got), max(got)
            if hi - lo + 1 <= len(at) + n_inst:
                return hi - lo + 1, lo, hi, 0
        # (a tuple's test: a phase may be a list or an object, which a dict cannot look up)
        return _counted(x, [e for e, p in zip(evs, phs) if p in _INSTANTS])
    except (TypeError, ValueError, OverflowError, AttributeError, IndexError):
        return None


_MAX = 1 << 53  # numbers past this are no profiler's (and float64 holds them exactly below it)


def _number(e):
    a = e.args
    return None if a is None else a.ev_idx


def _counted(x: list, inst: list) -> tuple[int, int, int, int] | None:
    vals = [v for v in _values(x) + _values(inst) if type(v) is int and 0 <= v < _MAX]
    if not vals:
        return None
    a = np.unique(np.array(vals, dtype=np.int64))
    return len(vals), int(a[0]), int(a[-1]), int(np.diff(a).max()) - 1 if len(a) > 1 else 0


def _values(evs: list) -> list:
    try:
        return list(map(_EV_IDX, evs))
    except AttributeError:  # events without arguments
        return [e.args.ev_idx for e in evs if e.args is not None]


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
