"""Summaries in the manner of `nsys stats`: one row per name (or kind, or collective) with count,
total, average, median, min, max and standard deviation of the durations, and its share of the
total. Times in ns. Every report is one pandas group-by over a table of query.tables.

Reports: kern (cuda_gpu_kern_sum), api (cuda_api_sum: runtime and driver calls), nvtx
(nvtx_sum; PyTorch's record_function ranges count as NVTX ranges, except its
"nccl:*" ranges, which are communication ops), mem (cuda_gpu_mem_time_sum
and _size_sum together: by copy kind, with bytes and GB/s), nccl (collectives by process group
and name: every NCCL kernel with its group, name and size from its own arguments, and where the
collective was matched on the other ranks, this rank's transfer and wait time and bus bandwidth).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..model.categories import Cat
from . import tables
from .report_names import REPORTS  # apart, so the window lists them without pandas


def report(
    session,
    which: str = "kern",
    *,
    rank: int | None = None,
    peak_tflops: float | None = None,
    peak_gbps: float | None = None,
) -> pd.DataFrame:
    """One summary table; rank None: every rank together. peak_*: efficiency's roofs overridden."""
    if which not in REPORTS:
        raise ValueError(f"unknown report {which!r}: choose one of {', '.join(REPORTS)}")
    if which == "efficiency":
        return efficiency_table(session.efficiency(rank=rank, peak_tflops=peak_tflops, peak_gbps=peak_gbps))
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
        from .comm_table import comm_kernels

        kern = comm_kernels(session)
        return _nccl(df, kern if rank is None else kern[kern["rank"] == rank])
    extra = {"kind": ("kind", "first")} if which == "kern" else {}
    return _durations(df, ["name"], extra)


_EFF_COLS = [
    "family",
    "time_pct",
    "time_ns",
    "kernels",
    "ops",
    "tflop",
    "tflops",
    "peak_tflops",
    "pct_of_peak",
    "gbps",
    "pct_of_bandwidth",
    "intensity",
    "bound",
    "precision",
    "tensor_cores",
    "top_kernel",
]


def efficiency_table(eff) -> pd.DataFrame:
    """Per kernel family (analysis.efficiency): its time and share, the work done (TFLOP, from the
    ops' shapes; empty where unknown), the rate (TFLOP/s, GB/s) against the roof of its precision,
    arithmetic intensity (FLOP/byte), compute- or memory-bound, Tensor-Core use, its longest kernel."""
    fam = eff.families
    total = sum(f["time_ns"] for f in fam)
    rows = [
        {
            "family": f["name"],
            "time_pct": 100.0 * f["time_ns"] / total if total else 0.0,
            "time_ns": f["time_ns"],
            "kernels": f["kernels"],
            "ops": f["ops"],
            "tflop": f["flops"] / 1e12 if f["flops"] is not None else None,
            "tflops": f["tflops"],
            "peak_tflops": f.get("peak_tflops"),
            "pct_of_peak": f["pct_of_peak"],
            "gbps": f["gbps"],
            "pct_of_bandwidth": f["pct_of_bandwidth"],
            "intensity": f["intensity"],
            "bound": f["bound"],
            "precision": f["precision"],
            "tensor_cores": f["tensor_cores"],
            "top_kernel": (f["top_kernels"] or [None])[0],
        }
        for f in fam
    ]
    df = pd.DataFrame(rows, columns=_EFF_COLS)
    return df.astype(
        {
            "time_ns": "int64",
            "kernels": "int64",
            "ops": "int64",
            **{
                c: "float64"
                for c in ("tflop", "tflops", "peak_tflops", "pct_of_peak", "gbps", "pct_of_bandwidth", "intensity")
            },
        }
    )


def _durations(df: pd.DataFrame, by: list[str], extra: dict | None = None, col: str = "dur") -> pd.DataFrame:
    g = df.groupby(by, observed=True, sort=False)[col]
    out = pd.DataFrame(
        {
            "total_ns": g.sum(),
            "instances": g.size(),
            "avg_ns": g.mean(),
            "med_ns": g.median(),
            "min_ns": g.min(),
            "max_ns": g.max(),
            "stddev_ns": g.std(ddof=1).fillna(0.0),
        }
    )
    for name, (src, how) in (extra or {}).items():
        out[name] = df.groupby(by, observed=True, sort=False)[src].agg(how)
    total = out["total_ns"].sum()
    out.insert(0, "time_pct", 100.0 * out["total_ns"] / total if total else 0.0)
    out = out.reset_index().sort_values(["total_ns", *by], ascending=[False] + [True] * len(by), kind="stable")
    return out.reset_index(drop=True).astype(
        {"total_ns": "int64", "instances": "int64", "min_ns": "int64", "max_ns": "int64"}
    )


def _mem(df: pd.DataFrame) -> pd.DataFrame:
    out = _durations(df, ["kind"])
    known = df[df["bytes"] >= 0]
    g = known.groupby("kind", observed=True)
    b = pd.DataFrame({"total_bytes": g["bytes"].sum(), "avg_bytes": g["bytes"].mean(), "busy_ns": g["dur"].sum()})
    out = out.merge(b, left_on="kind", right_index=True, how="left")
    out["gbps"] = np.where(out["busy_ns"] > 0, out["total_bytes"] / out["busy_ns"], np.nan)  # bytes/ns = GB/s
    out["total_bytes"] = out["total_bytes"].fillna(-1).astype("int64")
    return out.drop(columns=["busy_ns"])


_NCCL_COLS = [
    "group",
    "collective",
    "time_pct",
    "kernel_total_ns",
    "kernels",
    "matched",
    "ranks",
    "bytes_med",
    "dtype",
    "transfer_total_ns",
    "instances",
    "transfer_avg_ns",
    "transfer_med_ns",
    "transfer_min_ns",
    "transfer_max_ns",
    "transfer_stddev_ns",
    "wait_total_ns",
    "busbw_gbps",
]


def _nccl(df: pd.DataFrame, kern: pd.DataFrame) -> pd.DataFrame:
    """Per (group, collective), from every NCCL kernel (kern: query.comm_table): kernels, their
    total time (waiting and transfer together) and share, the group's size, median bytes and dtype
    from the kernels' arguments; from the kernels matched to the same collective on other ranks
    (df: the collectives table): instances matched, this rank's (or every rank's) transfer time
    stats, wait, and bus bandwidth weighted by transfer time. A rank alone (or a collective whose
    other members are not in the session) has kernels but no matched columns (empty)."""
    key = ["group", "collective"]
    if kern.empty and df.empty:
        return pd.DataFrame(
            {c: pd.Series(dtype="object" if c in ("group", "collective", "dtype") else "float64") for c in _NCCL_COLS}
        )
    k = kern.assign(
        group=kern["group"].astype(str), collective=kern["collective"].astype(str), dtype=kern["dtype"].astype(str)
    )
    kg = k.groupby(key, sort=False)
    known = k[k["bytes"] >= 0].groupby(key)["bytes"].median()
    sized = k[k["ranks"] > 0].groupby(key)["ranks"].max()
    out = pd.DataFrame(
        {
            "kernel_total_ns": kg["dur"].sum(),
            "kernels": kg.size(),
            "dtype": kg["dtype"].agg(lambda x: ",".join(sorted(set(v for v in x if v)))),
        }
    )
    out = out.join(known.rename("bytes_med"), how="left").join(sized.rename("ranks"), how="left")
    if not df.empty:
        m = df.assign(group=df["group"].astype(str), collective=df["collective"].astype(str))
        t = _durations(m.assign(dur=m["transfer"]), key).drop(columns=["time_pct"]).set_index(key)
        t.columns = ["transfer_" + c if c != "instances" else c for c in t.columns]
        g = m.groupby(key)
        ok = m[(m["transfer"] > 0) & m["busbw_gbps"].notna()]
        w = ok.assign(x=ok["busbw_gbps"] * ok["transfer"]).groupby(key)
        extra = pd.DataFrame(
            {
                # a collective is one (step, order) of its group: counted over distinct pairs
                "matched": m.drop_duplicates([*key, "step", "order"]).groupby(key).size(),
                "matched_ranks": g["ranks"].max(),
                "wait_total_ns": g["wait"].sum(),
                "busbw_gbps": w["x"].sum() / w["transfer"].sum(),
            }
        )
        out = out.join(t.join(extra), how="outer")
        out["ranks"] = out[["ranks", "matched_ranks"]].max(axis=1)
        out = out.drop(columns=["matched_ranks"])
    out = out.reindex(columns=[c for c in _NCCL_COLS if c not in key])
    out["matched"] = out["matched"].fillna(0)
    total = out["kernel_total_ns"].sum()
    out["time_pct"] = 100.0 * out["kernel_total_ns"] / total if total else 0.0
    out = out.reset_index().sort_values(["kernel_total_ns", *key], ascending=[False, True, True], kind="stable")
    ints = {
        c: "Int64"
        for c in (
            "kernel_total_ns",
            "kernels",
            "matched",
            "ranks",
            "transfer_total_ns",
            "instances",
            "transfer_min_ns",
            "transfer_max_ns",
            "wait_total_ns",
        )
    }
    return out.reset_index(drop=True)[_NCCL_COLS].astype(ints)


def longest(session, which: str, name: str, rank: int | None = None) -> int | None:
    """The store index of the longest instance of `name` in a kern, api or nvtx summary."""
    df = {
        "kern": lambda: session.kernels,
        "api": lambda: tables.of_categories(session, (Cat.CUDA_RUNTIME, Cat.CUDA_DRIVER)),
        "nvtx": lambda: tables.of_categories(session, (Cat.NVTX, Cat.USER_ANNOTATION)),
    }.get(which)
    if df is None:
        return None
    df = df()
    m = df["name"] == name
    if rank is not None:
        m &= df["rank"] == rank
    if not m.any():
        return None
    return int(df.loc[df.loc[m, "dur"].idxmax(), "id"])
