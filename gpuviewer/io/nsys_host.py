"""The host side of an Nsight Systems export (io/nsys.py reads the GPU side): CUDA API calls, CUDA
graph creation, OS runtime calls, each on a lane per thread of a rank's process, and the
threads' names as those lanes' labels."""

from __future__ import annotations

import re
from collections.abc import Callable

import numpy as np

from ..model.build import TraceBuilder
from ..model.categories import Cat, LaneKind
from .factorize import factorize
from .nsys_report import GRAPH_EVENTS, col, columns

_VERSION_SUFFIX = re.compile(r"_v\d+$")


class NameLUT:
    """StringIds ids -> interned name ids, for the ids a column uses."""

    def __init__(self, b: TraceBuilder, strings: dict) -> None:
        self.b = b
        self.strings = strings

    def ids(self, sid: np.ndarray, transform=None) -> np.ndarray:
        uniq, _, inv = factorize(sid)
        out = np.empty(len(uniq), np.int32)
        for k, s in enumerate(uniq.tolist()):
            text = self.strings.get(s, f"<string {s}>") if s >= 0 else "<unnamed>"
            out[k] = self.b.names.id(transform(text) if transform else text)
        return out[inv]


def host_fetch(rep, table: str, extra: list[str]) -> Callable[[], np.ndarray] | None:
    """Rows of a host-side table as int64 columns (rowid, start, end, pid, tid, *extra), fetched
    on a worker from now on (Report.later); the function returned waits for them. None when the
    table is absent or lacks them."""
    if table not in rep.tables:
        return None
    have = columns(rep.db, table)
    if not {"start", "end", "globalTid"} <= have:
        return None
    cols = [col(have, c, default="0" if c in ("correlationId", "eventClass") else "-1") for c in extra]
    # globalTid twice, split here (SQL would turn text into thread 0 of process 0)
    fetched = rep.later(table, ["rowid", "start", "end", "globalTid", "globalTid"] + cols, required=(0, 1, 2, 3))

    def rows() -> np.ndarray:
        a = fetched()
        a[:, 3] >>= 24
        a[:, 3] &= 0xFFFFFF
        a[:, 4] &= 0xFFFFFF
        return a

    return rows


def _thread_lanes(b, rank_of, pid: np.ndarray, tid: np.ndarray, kind: str, prefix: str, source: int) -> np.ndarray:
    """Each row's lane (-1: not a rank's process); lanes made in the order a set of the rows'
    (pid, tid) pairs gives, as before the columns were vectorised (the lane numbering, and so
    the event order, stays the same)."""
    key = (pid << 24) | tid
    uniq, first, inv = factorize(key)
    by_first = np.argsort(first, kind="stable")
    lane_of = np.full(len(uniq), -1, np.int32)
    pos = {int(u): k for k, u in enumerate(uniq.tolist())}
    for p, t in set(zip((uniq[by_first] >> 24).tolist(), (uniq[by_first] & 0xFFFFFF).tolist())):
        if p in rank_of:
            lane_of[pos[(p << 24) | t]] = b.lane(
                rank_of[p], kind, -1, t, f"{prefix} · thread {t}", pid=p, source=source
            )
    return lane_of[inv]


def _host_rows(b, rank_of, a: np.ndarray | None, kind: str, prefix: str, source: int):
    """The rows of a host-side table (host_fetch's columns) of the ranks' processes, with the lane
    of each row's thread; None when the table is absent or empty."""
    if a is None or not len(a):
        return None
    lane = _thread_lanes(b, rank_of, a[:, 3], a[:, 4], kind, prefix, source)
    keep = lane >= 0
    if keep.all():
        return a, lane
    return a[keep], lane[keep]


def runtime_calls(rep, b, rank_of, names_lut, source, rows) -> None:
    got = _host_rows(b, rank_of, rows, LaneKind.CUDA_API, "CUDA API", source)
    if got is None:
        return
    a, lane = got
    # Names carry a CUPTI version suffix (cudaLaunchKernel_v7000): shown without it.
    name = names_lut.ids(a[:, 6], lambda s: _VERSION_SUFFIX.sub("", s))
    keep = _one_record_a_call(lane, a[:, 5], name, a[:, 2] - a[:, 1])
    if keep is not None:
        a, lane, name = a[keep], lane[keep], name[keep]
    cat = np.where(a[:, 7] == 1, Cat.CUDA_DRIVER, Cat.CUDA_RUNTIME).astype(np.uint8)
    b.add(
        start=a[:, 1] + rep.utc_ns,
        dur=a[:, 2] - a[:, 1],
        lane=lane,
        name=name,
        cat=cat,
        corr=np.clip(a[:, 5], 0, 0xFFFFFFFF),
        src=a[:, 0],
    )


def _one_record_a_call(lane: np.ndarray, corr: np.ndarray, name: np.ndarray, dur: np.ndarray) -> np.ndarray | None:
    """Rows to keep (None: all) when a call is recorded twice: older exports (nsys 2021) hold each
    runtime call as 'cudaMemcpy' (eventClass 67) around 'cudaMemcpy_v3020' (eventClass 0), one
    thread, one correlation id. Kept once, the outer record (the call as the program saw it): two
    nested copies made the blocking copy's host time look like host work of its own (a what-if
    without copies saved 0.07 of their 285 ms). Same thread, correlation id and name only: a
    runtime call and a driver call it makes are different calls."""
    has = corr > 0
    if has.sum() < 2:
        return None
    idx = np.flatnonzero(has)
    order = idx[np.lexsort((-dur[idx], name[idx], corr[idx], lane[idx]))]
    same = (
        (lane[order[1:]] == lane[order[:-1]])
        & (corr[order[1:]] == corr[order[:-1]])
        & (name[order[1:]] == name[order[:-1]])
    )
    if not same.any():
        return None
    keep = np.ones(len(corr), bool)
    keep[order[1:][same]] = False  # every one after the longest of its group
    return keep


def graph_fetch(rep) -> Callable[[], np.ndarray] | None:
    return host_fetch(rep, GRAPH_EVENTS, ["nameId", "graphId"])


def graph_events(rep, b, rank_of, strings, source, rows) -> None:
    """CUDA graph creation and instantiation (graph_fetch's rows): instants on the CUDA API lane
    of their thread, named with the graph ('Graph Creation · graph 1'), so a graph launch's graph
    can be found."""
    got = _host_rows(b, rank_of, rows, LaneKind.CUDA_API, "CUDA API", source)
    if got is None:
        return
    a, lane = got
    name = np.array(
        [
            b.names.id(f"{strings.get(n, 'CUDA graph event')}" + (f" · graph {g}" if g >= 0 else ""))
            for n, g in zip(a[:, 5].tolist(), a[:, 6].tolist())
        ],
        np.int32,
    )
    b.add_instants(a[:, 1] + rep.utc_ns, lane, name)


def osrt_fetch(rep) -> Callable[[], np.ndarray] | None:
    return host_fetch(rep, "OSRT_API", ["nameId"])


def osrt(rep, b, rank_of, names_lut, source, rows) -> None:
    """OS runtime calls (osrt_fetch's rows) on a lane per thread."""
    got = _host_rows(b, rank_of, rows, LaneKind.OSRT, "OS runtime", source)
    if got is not None:
        a, lane = got
        b.add(
            start=a[:, 1] + rep.utc_ns,
            dur=a[:, 2] - a[:, 1],
            lane=lane,
            name=names_lut.ids(a[:, 5]),
            cat=np.full(len(a), Cat.OSRT, np.uint8),
            src=a[:, 0],
        )


def thread_labels(rep, b, source) -> None:
    if "ThreadNames" not in rep.tables:
        return
    names = {}
    for nid, g in rep.db.execute("SELECT nameId, globalTid FROM ThreadNames WHERE typeof(globalTid) = 'integer'"):
        if g is not None:
            names[(g >> 24 & 0xFFFFFF, g & 0xFFFFFF)] = rep.strings.get(nid)
    for ln in b.lanes:
        if ln.source != source or ln.device >= 0:
            continue
        tid = ln.thread  # (a named NVTX domain's lane: its stream is thread * 1000 + domain)
        n = names.get((ln.pid, ln.stream)) or names.get((ln.pid, tid))
        if n:
            ln.label = ln.label.replace(f"thread {tid}", f"{n} ({tid})")
