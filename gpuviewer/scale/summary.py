"""The session summary: a folder OUT.gvsum that holds what the analysis of many ranks found,
small enough for a laptop, without the traces.

  manifest.json     version, files, ranks (what `info` says of each), hosts, alignment, findings,
                    failed ranks, warnings, and the tables below by name
  analysis.json     the rest of `analyze --json` (per-rank steps and kernels, collectives)
  steps.parquet     rank, step and the step's breakdown (busy, compute, comm, wait, ...)
  collectives.parquet  one row per rank's kernel in a matched collective: group, kind, step
                    (null outside every step), order, bytes, start, end, wait, transfer, late rank
  kernels.parquet, host_ops.parquet  per rank and name: count, total, min, max (ns)
  profiles.parquet  per rank and time bin: share of the bin its GPU computed / communicated

Parquet through DuckDB (already a dependency), so writing a summary needs no extra package.
Written into a temporary folder beside OUT and renamed into place: a summary is whole or absent.
"""

from __future__ import annotations

import os
import shutil
import stat
import tempfile
from typing import TYPE_CHECKING

from ..errors import GpuviewerError
from ..io.atomic import umask

if TYPE_CHECKING:
    from ..analysis.results import Analysis

VERSION = 2  # 2: collectives rows of groups one rank holds (transfer_ms null, kernel_ms)
MANIFEST = "manifest.json"


class SummaryError(GpuviewerError):
    """A summary cannot be written or read (str: one line naming the folder). is_summary: the
    folder's manifest says it is a summary (a damaged one), not some other folder."""

    def __init__(self, msg: str, is_summary: bool = False) -> None:
        super().__init__(msg)
        self.is_summary = is_summary


def is_summary(path: str) -> bool:
    """A folder whose manifest.json says it is a gpuviewer summary (a folder of traces, or any
    other, that happens to hold a manifest.json is not one)."""
    if not os.path.isdir(path) or not os.path.isfile(os.path.join(path, MANIFEST)):
        return False
    try:
        # format and version only: a damaged summary is still one, and opening it says what is wrong
        return _manifest_head(path) is not None
    except SummaryError as e:
        return e.is_summary


def check_target(out: str) -> str:
    """The folder a summary would be written to (absolute); SummaryError when something is
    there that gpuviewer did not write: only a folder whose manifest says it is a gpuviewer
    summary and that holds nothing but that summary's files is replaced (asked before the
    analysis, so a long run is not lost to it, and again just before the folder is replaced)."""
    out = os.path.abspath(out.rstrip(os.sep) or os.sep)
    if not os.path.lexists(out):
        return out
    if os.path.islink(out) or not os.path.isdir(out):
        raise SummaryError(f"{out}: exists and is not a gpuviewer summary; not replaced")
    try:
        m = _manifest_head(out)
    except SummaryError:
        m = None
    if m is None:
        raise SummaryError(f"{out}: exists and is not a gpuviewer summary; not replaced")
    tables = m.get("tables")
    if not isinstance(tables, dict):
        tables = {}
    ours = {MANIFEST, m.get("analysis", "analysis.json")}
    ours |= {t.get("file") for t in tables.values() if isinstance(t, dict)}
    ours = {n for n in ours if isinstance(n, str)}
    try:
        names = os.listdir(out)
    except OSError as e:
        raise SummaryError(f"{out}: cannot be listed ({e.strerror}); not replaced") from None
    other = sorted(n for n in names if n not in ours or not _plain_file(os.path.join(out, n)))
    if other:
        shown = ", ".join(other[:3]) + (f" and {len(other) - 3} more" if len(other) > 3 else "")
        raise SummaryError(f"{out}: holds files other than the summary's ({shown}); not replaced")
    return out


def _plain_file(path: str) -> bool:
    try:
        return stat.S_ISREG(os.lstat(path).st_mode)
    except OSError:
        return False


def write(
    out: str,
    *,
    analysis: Analysis,
    parts: list,
    files: list[str],
    fmt: str,
    hosts: dict[int, str | None],
    hosts_from: str,
    alignment: dict,
    offsets: dict[int, int],
    failed: list[dict] | None = None,
    warnings: list[str] | None = None,
    created_by: str = "gpuviewer",
) -> str:
    """analysis: reduce's Analysis (with its breakdowns and matched collectives); parts: the ranks' maps on
    the session's clock; created_by: the program and its version. Returns the folder written."""
    import pandas as pd

    from ..analysis.breakdown import STEP_COLUMNS
    from ..analysis.reduce import arrivals_rows

    out = check_target(out)
    parent = os.path.dirname(out)
    os.makedirs(parent, exist_ok=True)
    tmp = tempfile.mkdtemp(prefix=f".{os.path.basename(out)}.tmp-", dir=parent)
    try:
        os.chmod(tmp, 0o777 & ~umask())  # a folder like any other, not mkdtemp's private one
        tables = {
            "steps": pd.DataFrame(
                [
                    (rb.rank, s.step, *(getattr(s, k) for k in STEP_COLUMNS), s.warmup, s.utilization)
                    for rb in analysis.breakdowns
                    for s in rb.steps
                ],
                columns=["rank", "step", *STEP_COLUMNS, "warmup", "utilization"],
            ).astype({"step": "Int64"}),
            "collectives": pd.DataFrame(
                arrivals_rows(analysis.matched),
                columns=[
                    "rank",
                    "group",
                    "kind",
                    "step",
                    "order",
                    "bytes",
                    "start_ns",
                    "end_ns",
                    "wait_ns",
                    "transfer_ns",
                    "late_rank",
                ],
            ).astype({"bytes": "Int64", "step": "Int64"}),
            "kernels": _per_name(parts, "kernels"),
            "host_ops": _per_name(parts, "host_ops"),
            "profiles": _profiles(parts),
        }
        listed = {}
        for name, df in tables.items():
            _parquet(df, os.path.join(tmp, f"{name}.parquet"))
            listed[name] = {"file": f"{name}.parquet", "rows": int(len(df)), "columns": list(df.columns)}
        whole = analysis.to_json()
        plain_json = {k: (None if k == "findings" else v) for k, v in whole.items()}
        _dump(plain_json, os.path.join(tmp, "analysis.json"))
        ranks = []
        for p in parts:
            info = {k: v for k, v in p.info.items() if k != "format"}
            info.update(host=hosts.get(p.rank), clock_offset_ns=int(offsets.get(p.rank, 0)))
            ranks.append(info)
        manifest = {
            "format": "gvsum",
            "version": VERSION,
            "created_by": created_by,
            "source_format": fmt,
            "files": list(files),
            "ranks": ranks,
            "hosts": {str(r): h for r, h in sorted(hosts.items())},
            "hosts_from": hosts_from,
            "alignment": alignment,
            "findings": whole["findings"],
            "failed_ranks": failed or [],
            "warnings": list(warnings or []),
            "tables": listed,
            "analysis": "analysis.json",
        }
        _dump(manifest, os.path.join(tmp, MANIFEST))  # last: its presence marks a whole summary
        _into_place(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return out


def _into_place(tmp: str, out: str) -> None:
    check_target(out)  # again: the folder may have changed during the analysis
    old = None
    if os.path.exists(out):  # an earlier summary: moved aside, then removed once the new one is in
        old = tempfile.mkdtemp(prefix=f".{os.path.basename(out)}.old-", dir=os.path.dirname(out))
        os.rmdir(old)
        os.replace(out, old)
    try:
        os.replace(tmp, out)
    except BaseException:
        if old is not None:
            os.replace(old, out)
        raise
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)


def _dump(obj, path: str) -> None:
    from ..model.plain import json_bytes

    with open(path, "wb") as f:
        f.write(json_bytes(obj))
        f.flush()
        os.fsync(f.fileno())


def _parquet(df, path: str) -> None:
    import duckdb

    con = duckdb.connect()
    try:
        con.register("t", df)
        con.execute(f"COPY t TO '{path.replace(chr(39), chr(39) * 2)}' (FORMAT parquet)")
    finally:
        con.close()


def _per_name(parts: list, which: str):
    import pandas as pd

    frames = []
    for p in parts:
        st = p.table("op_stats").get(which) or {}
        if st and len(st["name"]):
            f = pd.DataFrame({k: st[k] for k in ("name", "kind", "count", "total_ns", "min_ns", "max_ns")})
            f.insert(0, "rank", p.rank)
            frames.append(f)
    if not frames:
        return pd.DataFrame(
            {
                "rank": pd.Series([], dtype="int64"),
                "name": pd.Series([], dtype="object"),
                "kind": pd.Series([], dtype="object"),
                "count": pd.Series([], dtype="int64"),
                "total_ns": pd.Series([], dtype="int64"),
                "min_ns": pd.Series([], dtype="int64"),
                "max_ns": pd.Series([], dtype="int64"),
            }
        )
    return pd.concat(frames, ignore_index=True)


def _profiles(parts: list):
    import numpy as np
    import pandas as pd

    cols: dict[str, list] = {"rank": [], "bin": [], "start_ns": [], "end_ns": [], "compute": [], "comm": []}
    for p in parts:
        pr = p.table("profile")
        n = len(pr["compute"])
        if not n:
            continue
        b = np.arange(n, dtype=np.int64)
        cols["rank"].append(np.full(n, p.rank, np.int64))
        cols["bin"].append(b)
        cols["start_ns"].append(pr["t0_ns"] + b * pr["bin_ns"])
        cols["end_ns"].append(pr["t0_ns"] + (b + 1) * pr["bin_ns"])
        cols["compute"].append(np.asarray(pr["compute"], np.float32))
        cols["comm"].append(np.asarray(pr["comm"], np.float32))
    dtypes = {
        "rank": np.int64,
        "bin": np.int64,
        "start_ns": np.int64,
        "end_ns": np.int64,
        "compute": np.float32,
        "comm": np.float32,
    }
    return pd.DataFrame({k: (np.concatenate(v) if v else np.zeros(0, dtypes[k])) for k, v in cols.items()})


def _manifest_head(path: str) -> dict | None:
    """The manifest as JSON when it says it is a gpuviewer summary (format and an integer
    version), else None; nothing else of it checked."""
    from .summary_read import read_json

    m = read_json(path, MANIFEST, "manifest", SummaryError)
    if not isinstance(m, dict) or m.get("format") != "gvsum":
        return None
    if not isinstance(m.get("version"), int) or isinstance(m["version"], bool):
        return None
    return m


def read_manifest(path: str) -> dict:
    """The summary's manifest, checked against its schema (SummaryError naming the field)."""
    from .summary_schema import check_manifest

    m = _manifest_head(path)
    if m is None:
        raise SummaryError(f"{path}: not a gpuviewer summary (its manifest says otherwise)")
    if m["version"] > VERSION:
        raise SummaryError(
            f"{path}: a summary of version {m.get('version')}, newer than this gpuviewer reads "
            f"({VERSION}); update gpuviewer",
            True,
        )
    _check(path, "manifest", check_manifest, m)
    return m


def _check(path: str, what: str, check, obj) -> None:
    import msgspec

    try:
        check(obj)
    except msgspec.ValidationError as e:
        raise SummaryError(f"{path}: the summary's {what} is not valid ({e})", True) from None
    except RecursionError:
        raise SummaryError(f"{path}: the summary's {what} is not valid (nested too deeply)", True) from None


def read_analysis(path: str, manifest: dict | None = None):
    """What `gpuviewer analyze` printed when the summary was written (the same JSON). manifest: the
    summary's, when the caller has read it already (read_manifest)."""
    from .summary_read import read_json
    from .summary_schema import check_analysis

    m = manifest if manifest is not None else read_manifest(path)
    a = read_json(path, m.get("analysis", "analysis.json"), "analysis", SummaryError)
    if not isinstance(a, dict):
        raise SummaryError(f"{path}: the summary's analysis is not valid (not a JSON object)", True)
    _check(path, "analysis", check_analysis, a)
    a["findings"] = m["findings"]
    if m.get("failed_ranks"):
        a["failed_ranks"] = m["failed_ranks"]
    from ..analysis.results import Analysis

    return Analysis.from_json(a)


def info(path: str) -> dict:
    """What `gpuviewer info` says of a summary (the shape of info --json for a trace)."""
    m = read_manifest(path)
    ranks = m.get("ranks") or []
    return {
        "format": "gvsum",
        "source_format": m.get("source_format"),
        "files": m.get("files", []),
        "events": sum(int(r.get("events", 0)) for r in ranks),
        "kernels": sum(int(r.get("kernels", 0)) for r in ranks),
        "ranks": ranks,
        "alignment": m.get("alignment"),
        "hosts_from": m.get("hosts_from"),
        "findings": len(m.get("findings") or []),
        "failed_ranks": m.get("failed_ranks", []),
        "warnings": m.get("warnings", []),
        "tables": m.get("tables", {}),
        "created_by": m.get("created_by"),
    }


# -- opening a summary in the window (widgets/summary_window.py) -----------------------------
def summary_folder(path: str) -> str | None:
    """The summary a path opens (absolute): the folder itself, or the folder of its manifest.json
    (a user may drop the manifest); None for anything else."""
    p = os.path.abspath(path)
    if is_summary(p):
        return p
    if os.path.basename(p) == MANIFEST and is_summary(os.path.dirname(p)):
        return os.path.dirname(p)
    return None


def read_table(path: str, manifest: dict, name: str, columns: list[str]):
    """One of the summary's tables (a pandas DataFrame of these columns); SummaryError when it
    is missing, damaged or lacks a column."""
    import duckdb

    from .summary_read import inside

    listed = (manifest.get("tables") or {}).get(name) or {}
    file = inside(path, str(listed.get("file", f"{name}.parquet")), f"{name} table", SummaryError)
    cols = ", ".join('"' + c.replace('"', '""') + '"' for c in columns)
    con = duckdb.connect()
    try:
        return con.execute(f"SELECT {cols} FROM read_parquet('{file.replace(chr(39), chr(39) * 2)}')").df()
    except (duckdb.Error, OSError) as e:
        raise SummaryError(
            f"{path}: the summary's {name} table cannot be read "
            f"({str(e).splitlines()[0] if str(e) else type(e).__name__})"
        ) from None
    finally:
        con.close()


def open_trace(path: str):
    """The summary as the timeline's Trace (model.summary_rows.SummaryTrace: every rank, its
    steps and its summary row from the profiles, no events) and the analysis the panels show.
    Reads the manifest, analysis.json and two small tables; never a trace file."""
    import numpy as np

    from ..model.summary_rows import SummaryRows, SummaryTrace, profile_busy
    from ..model.trace import RankInfo, Step

    m = read_manifest(path)
    a = read_analysis(path, m)
    prof = read_table(path, m, "profiles", ["rank", "start_ns", "end_ns", "compute", "comm"])
    steps = read_table(path, m, "steps", ["rank", "step", "host_start_ns", "host_end_ns"])
    ranks, busy = [], {}
    for info in m.get("ranks") or []:
        r = int(info["rank"])
        ranks.append(
            RankInfo(
                r,
                files=[str(f) for f in info.get("files") or []],
                devices=[int(d) for d in info.get("devices") or []],
                host=info.get("host"),
                clock_offset_ns=int(info.get("clock_offset_ns") or 0),
                world_size=info.get("world_size"),
            )
        )
    ranks.sort(key=lambda ri: ri.rank)
    prof = prof.sort_values(["rank", "start_ns"], kind="stable")
    for r, g in prof.groupby("rank", sort=True):
        s, e = g["start_ns"].to_numpy(np.int64), g["end_ns"].to_numpy(np.int64)
        busy[int(r)] = {
            False: profile_busy(s, e, g["compute"].to_numpy(np.float64)),
            True: profile_busy(s, e, g["comm"].to_numpy(np.float64)),
        }
    # a step without a number (NVTX ranges that name none) has no line to draw
    steps = steps[steps["step"].notna()]
    step_list = sorted(
        (Step(int(r), int(st), int(a0), int(b0)) for r, st, a0, b0 in steps.itertuples(index=False, name=None)),
        key=lambda s: (s.rank, s.step),
    )
    span = [int(i[k]) for i in m.get("ranks") or [] for k in ("start_ns", "end_ns") if i.get("events")]
    rows = SummaryRows(
        path=path,
        format=str(m.get("source_format") or "summary"),
        ranks=ranks,
        steps=step_list,
        busy=busy,
        span=(min(span), max(span)) if span else (0, 0),
        warnings=[str(w) for w in m.get("warnings") or []],
        metadata={
            "summary": path,
            "files": list(m.get("files") or []),
            "alignment": m.get("alignment") or {},
            "hosts_from": m.get("hosts_from"),
            "failed_ranks": list(m.get("failed_ranks") or []),
        },
    )
    return SummaryTrace(rows), a


def rank_files(trace, rank: int) -> list[str]:
    """The files a rank of a summary was read from (what its manifest lists)."""
    info = next((r for r in trace.summary.ranks if r.rank == rank), None)
    return list(info.files) if info is not None else []


def as_summary_rank(loaded, trace, rank: int):
    """A rank's file(s), read as a session of their own (`loaded`), made a rank of the summary
    `trace`: its ranks numbered as the summary numbers them (the file's ranks, in order, are
    the summary's ranks that list the file) and its events moved by the clock offset the
    summary found for it. SummaryError when the file holds other ranks than the summary says."""
    from ..model.align import apply_offsets
    from .work import relabel

    files = {os.path.abspath(f) for f in rank_files(trace, rank)}
    mine = sorted(r.rank for r in trace.summary.ranks if files & {os.path.abspath(f) for f in r.files})
    have = [r.rank for r in loaded.ranks]
    if len(have) != len(mine) or rank not in mine:
        raise SummaryError(
            f"{', '.join(sorted(files))}: holds {len(have)} ranks, the summary says {len(mine)}; "
            "the file changed since the summary was written"
        )
    relabel(loaded, {old: new for old, new in zip(have, mine) if old != new})
    offset = {r.rank: r.clock_offset_ns for r in trace.summary.ranks}
    if any(offset.get(r) for r in mine):
        # the offset at the session's start: the drift over a capture (ppm) is left out
        apply_offsets(loaded, lambda r, _t: offset.get(r, 0))
    return loaded


def load_rank(trace, rank: int, use_cache: bool = True):
    """A rank's events, read here (through the cache), for the summary `trace`: what the window's
    background loader does in another process, for headless renders and tests."""
    from ..io.session import load

    files = rank_files(trace, rank)
    if not files:
        raise SummaryError(f"rank {rank}: the summary lists no file for it")
    return as_summary_rank(load(files, use_cache=use_cache), trace, rank)
