"""Open a session: one or more files (or folders) -> one Trace on one time axis."""
from __future__ import annotations

import math
import os
from typing import Callable

from ..model.build import TraceBuilder
from ..model.trace import Trace
from . import sniff as sn
from .errors import Cancelled, TraceError, unexpected

Progress = Callable[[float, str], None]


def _check_readable(path: str) -> None:
    if not os.path.exists(path):
        raise TraceError(path, "no such file or folder")
    if os.path.isdir(path):
        return
    if not sn.is_regular(path):
        raise TraceError(path, "not a regular file (a pipe, socket or device); save the trace to a file first")
    if not os.access(path, os.R_OK):
        raise TraceError(path, "permission denied")
    if os.path.getsize(path) == 0:
        raise TraceError(path, "the file is empty")


def load(paths: list[str], *, use_cache: bool = True, progress: Progress | None = None,
         cancelled: Callable[[], bool] | None = None) -> Trace:
    for p in paths:
        _check_readable(p)
    files, dup_warnings = _dedupe(sn.expand(paths))
    if not files:
        raise TraceError(", ".join(paths), "no trace files found in the folder")
    kinds = {f: sn.sniff(f) for f in files}  # each file's content is looked at once
    named = {os.path.abspath(p) for p in paths if not os.path.isdir(p)}
    optional = frozenset(f for f in files if os.path.abspath(f) not in named)
    trace = _load(files, kinds, use_cache, progress, cancelled, optional)
    for w in dup_warnings:
        if w not in trace.warnings:
            trace.warnings.append(w)
    return trace


_FORMAT_WORDS = {sn.KINETO: "PyTorch profiler / Chrome trace JSON", sn.NSYS_SQLITE: "an Nsight Systems export",
                 sn.NSYS_REP: "an Nsight Systems report"}


def _blank(path: str) -> bool:
    """Only whitespace in the first 64 KB (and nothing else in the file)."""
    try:
        if os.path.getsize(path) > 1 << 16:
            return False
        with open(path, "rb") as f:
            return not f.read().strip()
    except OSError:
        return False


def _names(files: list[str]) -> str:
    """Files for a message: all of a few, the first two and a count of many."""
    if len(files) <= 3:
        return ", ".join(files)
    return f"{files[0]}, {files[1]} and {len(files) - 2} more files"


def _dedupe(files: list[str]) -> tuple[list[str], list[str]]:
    """One file named twice (or by other spellings of its path, or through a link) is one
    rank, not several: keep its first mention and say so."""
    seen: dict[tuple, str] = {}
    out, warnings = [], []
    for f in files:
        try:
            st = os.stat(f)
            ident = (st.st_dev, st.st_ino)
        except OSError:
            ident = ("path", os.path.realpath(f))
        if ident in seen:
            warnings.append(f"{f}: the same file as {seen[ident]}; read once")
            continue
        seen[ident] = f
        out.append(f)
    return out, warnings


def _load(files: list[str], kinds: dict, use_cache: bool, progress, cancelled,
          optional: frozenset = frozenset()) -> Trace:
    """Topology and memory files join the session of the traces beside them."""
    topo = [f for f in files if kinds[f] in (sn.TOPO, sn.TOPO_AUX)]
    if topo:
        from .topo import read_topology
        rest = [f for f in files if f not in topo]
        topology = read_topology(topo)
        trace = _load(rest, kinds, use_cache, progress, cancelled, optional) if rest \
            else _empty_trace(topo, format="nvidia-smi-topo")
        trace.topology = topology
        trace.metadata.setdefault("files", []).extend(os.path.abspath(f) for f in topo)
        return trace
    snaps = [f for f in files if kinds[f] in (sn.MEMSNAP, sn.MEMTIMELINE)]
    if snaps:
        rest = [f for f in files if f not in snaps]
        kind = "torch-memory-timeline" if all(kinds[f] == sn.MEMTIMELINE for f in snaps) else "memory-snapshot"
        trace = _load(rest, kinds, use_cache, progress, cancelled, optional) if rest \
            else _empty_trace(snaps, format=kind)
        return attach_snapshots(trace, snaps, kinds)
    if use_cache:
        from . import cache
        t = cache.load(files)
        if t is not None:
            if progress:
                progress(1.0, "opened from cache")
            return t
    formats = []
    for f in files:
        fmt = kinds[f]
        if fmt is None and sn.is_empty_gzip(f):
            from .streams import gzip_damage
            if gzip_damage(f):
                raise TraceError(f, "the compressed stream is cut short or damaged before any data; "
                                    "copy the file again")
            raise TraceError(f, "the file is empty (a gzip stream of nothing)")
        if fmt is None and _blank(f):
            raise TraceError(f, "the file holds only blank space, no trace")
        if fmt is None:
            raise TraceError(f, "not a trace this program reads (expected PyTorch profiler / Chrome "
                                "trace JSON, optionally gzipped, or an Nsight Systems SQLite export)")
        formats.append(fmt)
    kinds = set(formats)
    if kinds == {sn.KINETO}:
        trace = _load_kineto(files, progress, cancelled, optional)
    elif kinds == {sn.NSYS_SQLITE}:
        from .nsys import load_nsys
        try:
            trace = load_nsys(files, progress=progress, cancelled=cancelled)
        except (TraceError, Cancelled):
            raise
        except Exception as e:  # noqa: BLE001
            raise unexpected(_names(files), e) from e
    elif sn.NSYS_REP in kinds:
        from .nsys_rep import export_reports
        exported = export_reports(files, progress=progress, cancelled=cancelled)
        return _load(exported, {f: sn.sniff(f) for f in exported}, use_cache, progress, cancelled)
    else:
        from collections import Counter as _Count
        common = _Count(formats).most_common(1)[0][0]
        odd, odd_fmt = next((f, fmt) for f, fmt in zip(files, formats) if fmt != common)
        raise TraceError(odd, f"is {_FORMAT_WORDS.get(odd_fmt, 'another format')}, "
                              f"but the other files are {_FORMAT_WORDS.get(common, common)}: open them "
                              "as separate sessions")
    if use_cache:
        from . import cache
        cache.store(files, trace)
        t = cache.load(files)  # reopen memory-mapped so the parse buffers are released
        if t is not None:
            t.metadata["from_cache"] = False
            return t
    return trace


def _load_kineto(files: list[str], progress: Progress | None, cancelled, optional: frozenset = frozenset()) -> Trace:
    """optional: files found inside an opened folder (others were named by the user)."""
    from .kineto import read_kineto, shutdown_pool
    b = TraceBuilder("kineto")
    per_file = []
    sizes = [max(1, os.path.getsize(f)) for f in files]
    total = sum(sizes)
    done = 0
    skipped = []
    for i, f in enumerate(files):
        def prog(frac, _done=done, _size=sizes[i], _name=os.path.basename(f)):
            if progress:
                progress((_done + frac * _size) / total * 0.9, f"reading {_name}")
        try:
            per_file.append(read_kineto(b, f, len(per_file), progress=prog, cancelled=cancelled))
        except TraceError as e:
            # A job folder also holds configs and metrics dumps: JSON that is not a trace is
            # skipped when the folder was opened (not when the file was named), with a word.
            if f in optional and any(w in e.problem for w in _NOT_A_TRACE):
                skipped.append(f)
                b.warnings.append(f"{f}: skipped ({e.problem})")
                done += sizes[i]
                continue
            raise
        except Cancelled:
            raise
        except Exception as e:  # noqa: BLE001 - named after the file that caused it
            raise unexpected(f, e) from e
        finally:
            if i == len(files) - 1:
                shutdown_pool()
        done += sizes[i]
    if not per_file:
        raise TraceError(_names(files), "no trace in these files (each is JSON, but not a profiler trace)")
    _assign_ranks_and_clocks(b, per_file)
    if progress:
        progress(0.95, "sorting and nesting events")
    trace = b.finish()
    trace.metadata["files"] = [os.path.abspath(f) for f in files if f not in skipped]
    trace.metadata["skipped_files"] = [os.path.abspath(f) for f in skipped]
    return trace


_NOT_A_TRACE = ("not a trace", "no trace events", "not a JSON trace", "no readable trace events")


def _assign_ranks_and_clocks(b: TraceBuilder, per_file: list[dict]) -> None:
    used: set[int] = set()
    ranks: list[int] = []
    for info in per_file:
        r = info["rank"]
        if r is None or r in used:
            if r is not None:
                b.warnings.append(f"{os.path.basename(info['reader'].path)}: rank {r} appears twice; "
                                  "shown as another rank")
            r = 0
            while r in used:
                r += 1
        used.add(r)
        ranks.append(r)
    # One host's ranks share a clock: Unix epoch ns (baseTimeNanoseconds + relative µs, or
    # epoch µs). Files whose times are relative with no base are aligned at their first event
    # to the earliest absolute file, and the offset is recorded.
    # A file with no timed slices (only counters) has min_ts_us = inf: it takes no part in this.
    timed = [i for i in per_file if math.isfinite(i["min_ts_us"])]
    absolute = [i for i in timed if i["base_ns"] or i["min_ts_us"] > 1e14]
    ref_ns = min((i["base_ns"] + int(i["min_ts_us"] * 1000) for i in absolute), default=0)
    for info, r in zip(per_file, ranks):
        offset = 0
        if info in timed and not (info["base_ns"] or info["min_ts_us"] > 1e14) and absolute:
            offset = ref_ns - int(info["min_ts_us"] * 1000)
            b.warnings.append(f"{os.path.basename(info['reader'].path)}: no absolute clock; aligned "
                              f"at its first event (offset {offset} ns)")
        info["reader"].finish(info["meta"], r, offset, info["base_ns"])
        for g in _process_groups(info["meta"]):
            if g not in b.metadata.setdefault("process_groups", []):
                b.metadata["process_groups"].append(g)
        b.metadata.setdefault("per_file", []).append(
            {"path": info["reader"].path, "rank": r, "clock_offset_ns": offset,
             "base_ns": info["base_ns"], "flow_events": info["reader"].n_flow})


def _empty_trace(files: list[str], format: str = "memory-snapshot") -> Trace:
    b = TraceBuilder(format)
    b.rank(0).files.extend(os.path.abspath(f) for f in files)
    return b.finish()


def attach_snapshots(trace: Trace, files: list[str], kinds: dict | None = None) -> Trace:
    """Memory snapshots join the session on its Unix-time axis, as rank 0's (or the only
    rank's) devices; their replayed allocated-bytes curve becomes a counter."""
    from ..model.trace import Counter
    from .memsnap import read_snapshot
    from .memtimeline import read_memory_timeline
    rank = trace.ranks[0].rank if trace.ranks else 0
    trace.snapshots = getattr(trace, "snapshots", [])
    for f in files:
        kind = kinds[f] if kinds else sn.sniff(f)
        series = [read_memory_timeline(f)] if kind == sn.MEMTIMELINE else read_snapshot(f)
        for s in series:
            s.rank = rank
            trace.snapshots.append(s)
            label = "allocated (memory timeline)" if not s.allocations else "allocated (snapshot)"
            trace.counters.append(Counter(rank, s.device, label, s.t, s.allocated))
            info = next((r for r in trace.ranks if r.rank == rank), None)
            if info is not None and s.device not in info.devices:
                info.devices.append(s.device)
    trace.metadata.setdefault("files", []).extend(os.path.abspath(f) for f in files)
    trace._span = None
    return trace


def _process_groups(meta: dict) -> list[list[int]]:
    """distributedInfo.pg_config[].ranks (a list, or a string "[0, 1]" in on-demand traces)."""
    import json
    dist = meta.get("distributedInfo")
    out = []
    if isinstance(dist, dict):
        for pg in dist.get("pg_config") or []:
            r = pg.get("ranks") if isinstance(pg, dict) else None
            if isinstance(r, str):
                try:
                    r = json.loads(r)
                except ValueError:
                    r = None
            if isinstance(r, list) and all(isinstance(x, int) for x in r):
                out.append(sorted(r))
    return out
