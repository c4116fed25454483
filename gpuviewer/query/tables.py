"""A session's tables as pandas DataFrames, built from the store's numpy columns.

Times are int64 nanoseconds on the session's axis; names, categories and lane kinds are
categoricals over the store's string table (no Python string per row). A full-store column is
handed to pandas without a copy where pandas allows it (start, dur, corr); a filtered table
gathers only its rows. Everything here is Qt-free and reads no file except through io.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..analysis.breakdown import STEP_COLUMNS
from ..model.categories import CAT_LABEL, Cat, LaneKind

_CATS = [CAT_LABEL.get(Cat(i), str(i)) for i in range(max(Cat) + 1)]
_KINDS = sorted(LaneKind.ORDER, key=lambda k: LaneKind.ORDER[k])


def _names(trace) -> tuple[np.ndarray, list[str]]:
    """code -> category position, and the categories (the string table with duplicates merged:
    a categorical needs unique categories)."""
    cached = trace.derived.get("query_names")
    if cached is None:
        first: dict[str, int] = {}
        remap = np.array([first.setdefault(n, len(first)) for n in trace.names] or [0], np.int32)
        cached = trace.derived["query_names"] = (remap, list(first))
    return cached


def name_column(trace, codes: np.ndarray) -> pd.Categorical:
    remap, cats = _names(trace)
    if len(cats) == len(trace.names):  # the usual case: codes are already positions
        return pd.Categorical.from_codes(codes, categories=cats, validate=False)
    return pd.Categorical.from_codes(remap[codes], categories=cats, validate=False)


_I64 = np.iinfo(np.int64)


def _ids(values) -> np.ndarray:
    """Ranks, devices and streams as int64: a file may carry any integer there (an nsys export
    with deviceId 2**40 overflowed int32); one beyond int64 is shown as -1, unknown."""
    vals = list(values) or [0]
    try:
        return np.array(vals, np.int64)
    except OverflowError:
        return np.array([v if _I64.min <= v <= _I64.max else -1 for v in vals], np.int64)


def _lane_table(trace) -> dict[str, np.ndarray]:
    cached = trace.derived.get("query_lanes")
    if cached is None:
        ln = trace.lanes
        cached = trace.derived["query_lanes"] = {
            "rank": _ids(x.rank for x in ln),
            "kind": np.array(
                [_KINDS.index(x.kind) if x.kind in _KINDS else _KINDS.index(LaneKind.OTHER) for x in ln] or [0], np.int8
            ),
            "device": _ids(x.device for x in ln),
            "stream": _ids(x.stream for x in ln),
        }
    return cached


def _frame(trace, idx: np.ndarray | None, extra: dict | None = None) -> pd.DataFrame:
    """Rows idx of the store (None: every row, without copying the big columns)."""
    c = trace.columns
    take = (lambda a: a) if idx is None else (lambda a: a[idx])
    lane = take(c["lane"])
    lt = _lane_table(trace)
    start, dur = take(c["start"]), take(c["dur"])
    data = {
        "id": np.arange(len(c["start"]), dtype=np.int64) if idx is None else idx.astype(np.int64),
        "rank": lt["rank"][lane],
        "lane": lane,
        "lane_kind": pd.Categorical.from_codes(lt["kind"][lane], categories=_KINDS, validate=False),
        "device": lt["device"][lane],
        "stream": lt["stream"][lane],
        "name": name_column(trace, take(c["name"])),
        "category": pd.Categorical.from_codes(take(c["cat"]).astype(np.int8), categories=_CATS, validate=False),
        "start": start,
        "dur": dur,
        "end": start + dur,
        "depth": take(c["depth"]),
        "corr": take(c["corr"]),
    }
    if extra:
        data.update(extra)
    return pd.DataFrame(data, copy=False)


def _rows(trace, cats) -> np.ndarray:
    return np.flatnonzero(np.isin(trace.columns["cat"], np.array(cats, np.uint8)))


def slices(
    session, *, rank: int | None = None, kind: str | None = None, start_ns: int | None = None, end_ns: int | None = None
) -> pd.DataFrame:
    """Every slice, or those of one rank / lane kind overlapping [start_ns, end_ns): only the
    matching lanes are read (a lane is a contiguous, start-sorted slice of the store)."""
    trace = session.trace
    if rank is None and kind is None and start_ns is None and end_ns is None:
        return _frame(trace, None)
    parts = []
    for li, ln in enumerate(trace.lanes):
        if (rank is not None and ln.rank != rank) or (kind is not None and ln.kind != kind):
            continue
        sl = trace.lane_slice(li)
        lo, hi = sl.start, sl.stop
        st = trace.columns["start"][lo:hi]
        if end_ns is not None:  # starts are sorted within a lane: cut at the window's end
            hi = lo + int(np.searchsorted(st, end_ns, side="left"))
        idx = np.arange(lo, hi, dtype=np.int64)
        if start_ns is not None and len(idx):
            idx = idx[trace.columns["start"][idx] + trace.columns["dur"][idx] > start_ns]
        parts.append(idx)
    idx = np.concatenate(parts) if parts else np.zeros(0, np.int64)
    return _frame(trace, idx)


def of_categories(session, cats) -> pd.DataFrame:
    """The slices of some categories (Cat values), every rank."""
    return _frame(session.trace, _rows(session.trace, cats))


def kernels(session) -> pd.DataFrame:
    """GPU kernels: compute and NCCL (kind "compute" / "comm"), as `info` counts them."""
    trace = session.trace
    idx = _rows(trace, (Cat.KERNEL, Cat.COMM_KERNEL))
    kind = pd.Categorical.from_codes(
        (trace.columns["cat"][idx] == Cat.COMM_KERNEL).astype(np.int8), categories=["compute", "comm"], validate=False
    )
    df = _frame(trace, idx, {"kind": kind})
    return df.drop(columns=["category", "depth", "lane_kind"])


def memops(session) -> pd.DataFrame:
    """Memory copies and sets: kind (HtoD, DtoH, DtoD, PtoP, memset, ...), bytes (from the source
    file; -1 when it did not record them) and GB/s."""
    from ..io.mem_args import memop_bytes

    trace = session.trace
    idx, nbytes = memop_bytes(trace)
    dur = trace.columns["dur"][idx]
    with np.errstate(divide="ignore", invalid="ignore"):
        gbps = np.where((nbytes >= 0) & (dur > 0), nbytes / np.maximum(dur, 1), np.nan)  # bytes/ns = GB/s
    codes, inverse = np.unique(trace.columns["name"][idx], return_inverse=True)
    kinds = [copy_kind(trace.names[int(c)]) for c in codes]
    labels = sorted(set(kinds)) or ["memset"]
    lut = np.array([labels.index(k) for k in kinds] or [0], np.int32)
    kind = pd.Categorical.from_codes(lut[inverse.reshape(-1)], categories=labels, validate=False)
    df = _frame(trace, idx, {"kind": kind, "bytes": nbytes, "gbps": gbps})
    return df.drop(columns=["depth", "lane_kind"])


def copy_kind(name: str) -> str:
    """ "Memcpy HtoD (Pageable -> Device)" (PyTorch) and "Memcpy HtoD" (nsys) -> "HtoD"; a
    memset -> "memset"; the pageable/pinned part is kept where the producer wrote it."""
    low = name.lower()
    if low.startswith("memset"):
        return "memset"
    parts = name.split(None, 1)
    return parts[1] if len(parts) > 1 else "unknown"


def steps(session) -> pd.DataFrame:
    """Profiled steps per rank, with the analysis' breakdown of each (ns)."""
    rows = [
        {
            "rank": r["rank"],
            "step": s["step"],
            **{k: s.get(k) for k in STEP_COLUMNS},
            "warmup": bool(s.get("warmup")),
            "utilization": s.get("utilization"),
        }
        for r in session.analysis.ranks
        for s in r["steps"]
    ]
    df = pd.DataFrame(rows, columns=["rank", "step", *STEP_COLUMNS, "warmup", "utilization"])
    df = df.rename(
        columns={"start_ns": "start", "end_ns": "end", "host_start_ns": "host_start", "host_end_ns": "host_end"}
    )
    df.insert(4, "dur", df["end"] - df["start"])
    # a rank without steps has one window, step None: the column is nullable (int64 raised a
    # TypeError, so `s.steps` and `sql ... FROM steps` failed on every trace without steps)
    return df.astype({c: "Int64" if c == "step" else "int64" for c in df.columns if c not in ("warmup", "utilization")})


def collectives(session) -> pd.DataFrame:
    """One row per NCCL kernel matched to a collective: rank, group, collective, step (NULL
    outside every step), order, bytes, wait (for the last rank to arrive), transfer, algbw/busbw
    (GB/s), the late rank."""
    per = session.analysis.kernel_collectives
    trace = session.trace
    idx = np.array(sorted(per), np.int64)
    lt = _lane_table(trace)
    recs = [per[i] for i in idx.tolist()]

    def col(key, dtype, missing=-1):
        return np.array([missing if r.get(key) is None else r[key] for r in recs], dtype)

    start = trace.columns["start"][idx]
    return pd.DataFrame(
        {
            "id": idx,
            "rank": lt["rank"][trace.columns["lane"][idx]],
            "group": pd.Categorical([r["group"] for r in recs]),
            "collective": pd.Categorical([r["collective"] for r in recs]),
            # NULL for a collective launched outside every step (DDP's first broadcasts)
            "step": pd.array([r.get("step") for r in recs], dtype="Int64"),
            "order": col("order", np.int64),
            "ranks": col("ranks", np.int64),
            "name": name_column(trace, trace.columns["name"][idx]),
            "start": start,
            "end": start + trace.columns["dur"][idx],
            "bytes": col("bytes", np.int64),
            "wait": col("wait_ns", np.int64),
            "transfer": col("transfer_ns", np.int64),
            "late_rank": col("late_rank", np.int64),
            "algbw_gbps": col("algbw_gbps", np.float64, np.nan),
            "busbw_gbps": col("busbw_gbps", np.float64, np.nan),
        }
    )


def counters(session) -> pd.DataFrame:
    """Counter samples in long form: rank, device, name, t (ns), value."""
    cs = session.trace.counters
    n = [len(c.t) for c in cs]
    names = sorted({c.name for c in cs})
    return pd.DataFrame(
        {
            "rank": np.repeat(_ids(c.rank for c in cs)[: len(cs)], n),
            "device": np.repeat(_ids(c.device for c in cs)[: len(cs)], n),
            "name": pd.Categorical.from_codes(
                np.repeat(np.array([names.index(c.name) for c in cs], np.int32), n) if cs else np.zeros(0, np.int32),
                categories=names or ["-"],
            ),
            "t": np.concatenate([np.asarray(c.t, np.int64) for c in cs]) if cs else np.zeros(0, np.int64),
            "value": np.concatenate([np.asarray(c.v, np.float64) for c in cs]) if cs else np.zeros(0),
        }
    )


def findings(session) -> pd.DataFrame:
    """Findings, one row each (symptoms after their cause, `parent` holding the cause's `finding`), in the
    analysis' order: by what fixing them saves (saves_ms, the what-if replay; NaN where none), then time lost."""
    rows: list[dict] = []

    def add(f, parent):
        rows.append(
            {
                "finding": len(rows),
                "parent": parent,
                "rule": f.rule,
                "severity": f.severity,
                "impact_ms": f.impact_ms,
                "saves_ms": f.saves_ms,
                "title": f.title,
                "ranks": ",".join(str(r) for r in f.ranks),
                "step": f.step,
                "start": f.start_ns,
                "end": f.end_ns,
                "advice": f.advice,
            }
        )
        me = rows[-1]["finding"]
        for ch in f.children:
            add(ch, me)

    for f in session.analysis.findings:
        add(f, None)
    return pd.DataFrame(
        rows,
        columns=[
            "finding",
            "parent",
            "rule",
            "severity",
            "impact_ms",
            "saves_ms",
            "title",
            "ranks",
            "step",
            "start",
            "end",
            "advice",
        ],
    ).astype(
        {
            "parent": "Int64",
            "step": "Int64",
            "start": "Int64",
            "end": "Int64",
            "impact_ms": "float64",
            "saves_ms": "float64",
        }
    )


TABLES = ("slices", "kernels", "memops", "steps", "collectives", "counters", "findings")


def event_at(trace, rank: int, t_ns: int) -> int | None:
    """The event a result row points at by rank and time: the one on that rank's GPU lanes (then
    its other lanes) that starts at t_ns, or else the longest one covering t_ns."""
    lanes = sorted(trace.lanes_of_rank(rank), key=lambda li: LaneKind.ORDER.get(trace.lanes[li].kind, 9))
    best, best_dur = None, -1
    c = trace.columns
    for li in lanes:
        sl = trace.lane_slice(li)
        st = c["start"][sl]
        k = int(np.searchsorted(st, t_ns, side="left"))
        if k < len(st) and st[k] == t_ns:
            return sl.start + k
        # the lane's events starting before t_ns that are still running (depth stacks are short)
        lo = max(0, k - 256)
        ends = st[lo:k] + c["dur"][sl][lo:k]
        hit = np.flatnonzero(ends > t_ns)
        if len(hit):
            j = lo + int(hit[np.argmax(c["dur"][sl][lo:k][hit])])
            if int(c["dur"][sl.start + j]) > best_dur:
                best, best_dur = sl.start + j, int(c["dur"][sl.start + j])
    return best
