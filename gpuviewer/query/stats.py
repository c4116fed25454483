"""Summaries in the manner of `nsys stats`: one row per name (or kind, or collective) with count,
total, average, median, min, max and standard deviation of the durations, and its share of the
total. Times in ns. Every report is one pandas group-by over a table of query.tables.

Reports: kern (cuda_gpu_kern_sum), api (cuda_api_sum: runtime and driver calls), nvtx
(nvtx_sum; PyTorch's record_function ranges count as NVTX ranges, except its
"nccl:*" ranges, which are communication ops), mem (cuda_gpu_mem_time_sum
and _size_sum together: by copy kind, with bytes and GB/s), nccl (collectives by process group
and name: this rank's transfer and wait time, bytes, bus bandwidth).
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from ..model.categories import Cat
from . import tables

REPORTS = {"kern": "GPU kernels", "api": "CUDA API calls", "nvtx": "NVTX ranges",
           "mem": "GPU memory operations", "nccl": "collectives"}


def report(session, which: str = "kern", *, rank: int | None = None) -> pd.DataFrame:
    """One summary table; rank None: every rank together."""
    if which not in REPORTS:
        raise ValueError(f"unknown report {which!r}: choose one of {', '.join(REPORTS)}")
    if which == "kern":
        df = session.kernels
    elif which == "api":
        df = tables.of_categories(session, (Cat.CUDA_RUNTIME, Cat.CUDA_DRIVER))
    elif which == "nvtx":
        df = tables.of_categories(session, (Cat.NVTX, Cat.USER_ANNOTATION))
    elif which == "mem":
        df = session.memops
    else:
        df = session.collectives
    if rank is not None:
        df = df[df["rank"] == rank]
    if which == "mem":
        return _mem(df)
    if which == "nccl":
        return _nccl(df)
    extra = {"kind": ("kind", "first")} if which == "kern" else {}
    return _durations(df, ["name"], extra)


def _durations(df: pd.DataFrame, by: list[str], extra: dict | None = None, col: str = "dur") -> pd.DataFrame:
    g = df.groupby(by, observed=True, sort=False)[col]
    out = pd.DataFrame({
        "total_ns": g.sum(), "instances": g.size(), "avg_ns": g.mean(), "med_ns": g.median(),
        "min_ns": g.min(), "max_ns": g.max(), "stddev_ns": g.std(ddof=1).fillna(0.0)})
    for name, (src, how) in (extra or {}).items():
        out[name] = df.groupby(by, observed=True, sort=False)[src].agg(how)
    total = out["total_ns"].sum()
    out.insert(0, "time_pct", 100.0 * out["total_ns"] / total if total else 0.0)
    out = out.reset_index().sort_values(["total_ns", *by], ascending=[False] + [True] * len(by), kind="stable")
    return out.reset_index(drop=True).astype({"total_ns": "int64", "instances": "int64", "min_ns": "int64",
                                               "max_ns": "int64"})


def _mem(df: pd.DataFrame) -> pd.DataFrame:
    out = _durations(df, ["kind"])
    known = df[df["bytes"] >= 0]
    g = known.groupby("kind", observed=True)
    b = pd.DataFrame({"total_bytes": g["bytes"].sum(), "avg_bytes": g["bytes"].mean(),
                      "busy_ns": g["dur"].sum()})
    out = out.merge(b, left_on="kind", right_index=True, how="left")
    out["gbps"] = np.where(out["busy_ns"] > 0, out["total_bytes"] / out["busy_ns"], np.nan)  # bytes/ns = GB/s
    out["total_bytes"] = out["total_bytes"].fillna(-1).astype("int64")
    return out.drop(columns=["busy_ns"])


def _nccl(df: pd.DataFrame) -> pd.DataFrame:
    """Per (group, collective): instances (matched across ranks), this rank's (or every rank's)
    transfer time stats, wait, median bytes, and bus bandwidth weighted by transfer time."""
    out = _durations(df.assign(dur=df["transfer"]), ["group", "collective"])
    g = df.groupby(["group", "collective"], observed=True)
    ok = df[(df["transfer"] > 0) & df["busbw_gbps"].notna()]
    w = ok.assign(x=ok["busbw_gbps"] * ok["transfer"]).groupby(["group", "collective"], observed=True)
    extra = pd.DataFrame({
        # a collective is one (step, order) of its group: counted over distinct pairs (a groupby
        # apply here returned a frame, not a column, when there were no collectives at all)
        "matched": df.drop_duplicates(["group", "collective", "step", "order"])
                     .groupby(["group", "collective"], observed=True).size(),
        "ranks": g["ranks"].max(), "bytes_med": g["bytes"].median(), "wait_total_ns": g["wait"].sum(),
        "busbw_gbps": w["x"].sum() / w["transfer"].sum()})
    out = out.merge(extra, left_on=["group", "collective"], right_index=True, how="left")
    return out.rename(columns={"total_ns": "transfer_total_ns", "avg_ns": "transfer_avg_ns",
                               "med_ns": "transfer_med_ns", "min_ns": "transfer_min_ns",
                               "max_ns": "transfer_max_ns", "stddev_ns": "transfer_stddev_ns"})


def longest(session, which: str, name: str, rank: int | None = None) -> int | None:
    """The store index of the longest instance of `name` in a kern, api or nvtx summary."""
    df = {"kern": lambda: session.kernels,
          "api": lambda: tables.of_categories(session, (Cat.CUDA_RUNTIME, Cat.CUDA_DRIVER)),
          "nvtx": lambda: tables.of_categories(session, (Cat.NVTX, Cat.USER_ANNOTATION))}.get(which)
    if df is None:
        return None
    df = df()
    m = df["name"] == name
    if rank is not None:
        m &= df["rank"] == rank
    if not m.any():
        return None
    return int(df.loc[df.loc[m, "dur"].idxmax(), "id"])
