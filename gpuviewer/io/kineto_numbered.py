"""Whether a Kineto trace holds every host event the profiler numbered. PyTorch's profiler
numbers its host events in order ("Ev Idx" of CPU ops, annotations, Python functions and instant
events); a file that holds only some of the numbers between its first and its last was sampled
or filtered after it was written (HTA's trace filter keeps ~1% of them), and its host timeline
(idle, time outside ops) is not what the host did. A file written by the profiler holds them all."""

from __future__ import annotations

from operator import attrgetter

import numpy as np

from ..model.numbered import kept_share

_EV_IDX = attrgetter("args.ev_idx")
# the events the profiler numbers: host ops, annotations and Python functions, and instants
_HOST_CATS = frozenset(("cpu_op", "user_annotation", "python_function"))
_INSTANTS = ("i", "I")


def numbered(
    x: list, evs: list, phs: list, n_inst: int, keys: list, lane_key: np.ndarray
) -> tuple[int, int, int] | None:
    """(how many, lowest, highest) "Ev Idx" numbers a piece's complete events `x` (their lane
    keys (cat, pid, tid)) and its `n_inst` instants hold; None when none holds one. The profiler numbers them in
    file order, so a piece whose first and last numbers are no further apart than it has host
    events holds every number between them: its count is their span, found from the events at
    its ends, not from every event (a pass over them all cost 5% of the decode); any other piece
    is counted event by event."""
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
    if all(type(v) is int for v in got):
        lo, hi = min(got), max(got)
        if hi - lo + 1 <= len(at) + n_inst:
            return hi - lo + 1, lo, hi
    # (a tuple's test: a phase may be a list or an object, which a dict cannot look up)
    return _counted(x, [e for e, p in zip(evs, phs) if p in ("i", "I")])


def _number(e):
    a = e.args
    return None if a is None else a.ev_idx


def _counted(x: list, inst: list) -> tuple[int, int, int] | None:
    vals = _values(x) + _values(inst)
    if not vals:
        return None
    try:
        a = np.array(vals, dtype=np.float64)  # None is NaN
    except (TypeError, ValueError, OverflowError):  # a list or text where a number belongs
        a = np.array([v if type(v) is int else np.nan for v in vals], np.float64)
    a = a[np.isfinite(a)] if a.ndim == 1 else np.zeros(0)
    if not len(a):
        return None
    return len(a), int(a.min()), int(a.max())


def _values(evs: list) -> list:
    try:
        return list(map(_EV_IDX, evs))
    except AttributeError:  # events without arguments
        return [e.args.ev_idx for e in evs if e.args is not None]


def add(total: list[int] | None, piece: tuple[int, int, int] | None) -> list[int] | None:
    """The file's [how many, lowest, highest] with a piece's."""
    if piece is None:
        return total
    if total is None:
        return list(piece)
    return [total[0] + piece[0], min(total[1], piece[1]), max(total[2], piece[2])]


def warning(n: list[int] | None) -> str | None:
    """The file's warning (the reader names the file), or None."""
    share = kept_share(n)
    if share is None or n is None:
        return None
    span = n[2] - n[1] + 1
    return (
        f"it holds {n[0]:,} of the {span:,} host events the profiler numbered "
        f"from the first it holds to the last (Ev Idx {n[1]:,} to {n[2]:,}; {_pct(share)}): it was sampled "
        "or filtered after it was written, so its host timeline is incomplete: the host's idle time, "
        "its time outside ops and the ops' shares are of what is left, not of what the host did"
    )


def _pct(share: float) -> str:
    return "under 0.1%" if share < 0.001 else f"{share:.1%}" if share < 0.1 else f"{share:.0%}"
