"""Turn one piece of a JAX/XLA trace's event array into columns (the XLA profiler's Chrome trace
JSON, `<host>.trace.json.gz`). Pure and picklable like io/kineto_piece.py, so pieces can be
decoded in worker processes; the reader (io/jax_trace.py) maps each piece's small tables onto
the session's.

XLA writes no categories: what an event is follows from its process (`/device:GPU:N` or
`/host:CPU`, known only from metadata events that may come in any piece), its name and a few
arguments, so a piece only collects them and the reader decides at the end of the file.
"""

from __future__ import annotations

from typing import Any

import msgspec
import numpy as np

from .chrome_events import decode_piece
from .chrome_values import TS_MAX_US, bounded_int, floats, ident, text, us_to_ns
from .limits import max_string_bytes


class JArgs(msgspec.Struct, gc=False):
    """The arguments the store uses; the decoder skips every other key (they are fetched on
    demand for Details). XLA writes numbers as strings ("22"): decoded with strict=False."""

    correlation_id: int | None = None
    step_num: int | None = None
    hlo_op: str | None = None
    name: Any = None  # a metadata event's label


class JEvLoose(msgspec.Struct, gc=False):
    """For a piece whose arguments do not fit JArgs (an id that is no integer, args that are
    not an object): read one by one."""

    ph: Any = None
    name: Any = None
    pid: Any = 0
    tid: Any = 0
    ts: Any = None
    dur: Any = None
    args: Any = None


class JEv(JEvLoose, gc=False):
    """JEvLoose with its arguments decoded as JArgs (the fields keep JEvLoose's order)."""

    args: JArgs | None = None


_typed = msgspec.json.Decoder(list[JEv], strict=False)
_loose = msgspec.json.Decoder(list[JEvLoose])
_INT_MAX = (1 << 63) - 1


class _Index(dict):
    def __missing__(self, key):
        v = self[key] = len(self)
        return v


def decode(buf: bytes) -> list:
    """The events of a JSON array; NaN, Infinity and bad UTF-8 repaired as Chrome reads them."""
    return decode_piece(buf, _typed, _loose, _as_typed)[0]


def _as_typed(e: JEvLoose) -> JEv:
    a = e.args
    args = None
    if isinstance(a, dict):
        h = a.get("hlo_op")
        args = JArgs(
            bounded_int(a.get("correlation_id"), -_INT_MAX, _INT_MAX),
            bounded_int(a.get("step_num"), -_INT_MAX, _INT_MAX),
            h if isinstance(h, str) else None,
            a.get("name"),
        )
    return JEv(e.ph, e.name, e.pid, e.tid, e.ts, e.dur, args)


def extract(buf: bytes, chunk: int) -> dict:
    """Columns of the complete ('X') events of a piece, plus its metadata and instants."""
    evs = decode(buf)
    bad: dict = {}
    limit = max_string_bytes()
    out: dict = {"chunk": chunk, "n_events": len(evs), "bad": bad, "meta": [], "inst": [], "phases": {}}
    xi: list[int] = []
    for i, e in enumerate(evs):
        p = e.ph
        if p == "X":
            xi.append(i)
        elif p == "M":
            a = e.args
            out["meta"].append(
                (text(e.name, 256), ident(e.pid), ident(e.tid), None if a is None else text(a.name, 4096))
            )
        elif p in ("i", "I"):
            out["inst"].append((text(e.name, limit), ident(e.pid), ident(e.tid), e.ts))
        elif p is None and e.name is None and e.ts is None:
            continue  # XLA closes its event list with an empty object
        else:
            k = text(p, 8)
            out["phases"][k] = out["phases"].get(k, 0) + 1
    x = [evs[i] for i in xi] if len(xi) != len(evs) else evs
    pos = np.asarray(xi, np.int64)
    keys, names, hlos = _Index(), _Index(), _Index()
    try:
        key_ids = [keys[(e.pid, e.tid)] for e in x]
        name_ids = [names[e.name] for e in x]
    except TypeError:  # a list or object where a pid, tid or name belongs
        keys, names = _Index(), _Index()
        key_ids = [keys[(ident(e.pid), ident(e.tid))] for e in x]
        name_ids = [names[e.name if isinstance(e.name, str) else text(e.name)] for e in x]
        bad["odd"] = bad.get("odd", 0) + len(x)
    args = [e.args for e in x]
    hlo_ids = [hlos[a.hlo_op if a is not None else None] for a in args]
    ids = [a.correlation_id if a is not None and a.correlation_id is not None else 0 for a in args]
    try:
        corr = np.array(ids, np.int64)
    except OverflowError:  # lax decoding takes "99999999999999999999" as an int: no id of CUDA's
        corr = np.array([c if -_INT_MAX <= c <= _INT_MAX else 0 for c in ids], np.int64)
    corr[corr < 0] = 0
    step_at = [
        (j, a.step_num)
        for j, a in enumerate(args)
        if a is not None and a.step_num is not None and 0 <= a.step_num <= _INT_MAX
    ]
    lane_key = np.array(key_ids, np.int32)
    name = np.array(name_ids, np.int32)
    hlo = np.array(hlo_ids, np.int32)
    ts = floats([e.ts for e in x])
    dur = floats([e.dur if e.dur is not None else 0.0 for e in x])
    ok_ts = np.abs(ts) <= TS_MAX_US  # False for NaN
    ok = ok_ts & (dur >= 0) & (dur <= TS_MAX_US)
    step = np.full(len(x), -1, np.int64)
    step_n = np.zeros(len(x), bool)
    for j, s in step_at:
        step[j], step_n[j] = s, True
    if not ok.all():
        bad["ts"] = bad.get("ts", 0) + int(np.count_nonzero(~ok_ts))
        bad["dur"] = bad.get("dur", 0) + int(np.count_nonzero(ok_ts & ~ok))
        lane_key, name, hlo, corr, pos = lane_key[ok], name[ok], hlo[ok], corr[ok], pos[ok]
        ts, dur, step, step_n = ts[ok], dur[ok], step[ok], step_n[ok]
    out["keys"] = [(ident(p), ident(t)) for p, t in keys]
    out["names"] = [n if type(n) is str and len(n) <= limit else text(n, limit) for n in names]
    out["hlos"] = [h if h is None else text(h, 4096) for h in hlos]
    out.update(
        lane_key=lane_key,
        name=name,
        hlo=hlo,
        corr=corr,
        src=pos,
        start=us_to_ns(ts),
        dur=us_to_ns(dur),
        step=step,
        has_step=step_n,
        min_ts=float(ts.min()) if len(ts) else float("inf"),
    )
    return out
