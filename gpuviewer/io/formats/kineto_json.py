"""PyTorch profiler (Kineto) and other Chrome trace-event JSON, optionally gzipped: one file
per rank, each on its own clock until the ranks are placed on one axis here."""

from __future__ import annotations

import math
import os

from ...model.build import TraceBuilder
from ...model.trace import Trace
from ..errors import Cancelled, TraceError, file_names, unexpected
from ..reader import Job, Probe, Reader


class KinetoJson(Reader):
    name = "kineto"
    order = 50  # after the memory timeline, which is JSON too
    words = "PyTorch profiler / Chrome trace JSON"

    def sniff(self, probe: Probe) -> bool:
        return probe.body[:1] in (b"{", b"[")

    def read(self, files: list[str], job: Job) -> Trace:
        return _load_kineto(files, job.progress, job.cancelled, job.optional)


READERS = [KinetoJson()]


def read_each(b: TraceBuilder, files: list[str], progress, cancelled, optional: frozenset, skipped: list[str]):
    """Read the files one by one into b, yielding what read_kineto returns for each. A job folder
    also holds configs and metrics dumps: JSON that is not a trace is skipped (named in
    `skipped`, with a warning) when the folder was opened, not when the file was named. Used by
    the in-memory path below and by the out-of-core one (io/out_of_core.py)."""
    from ..kineto import read_kineto
    from ..piece_reader import using_pool

    sizes = [max(1, os.path.getsize(f)) for f in files]
    total = sum(sizes)
    done = 0
    n = 0
    events = 0  # trace events of the files read so far (b counts them only when they are committed)
    with using_pool():  # shared with loads in other threads, stopped after the last
        for i, f in enumerate(files):

            def prog(frac, _done=done, _size=sizes[i], _name=os.path.basename(f)):
                if progress:
                    mb = (_done + frac * _size) / 1e6
                    progress(
                        (_done + frac * _size) / total * 0.9,
                        f"reading {_name}: {mb:,.0f} of {total / 1e6:,.0f} MB, {max(events, b.n_events):,} events"
                        + (f" · {n} of {len(files)} ranks" if len(files) > 1 else ""),
                    )

            try:
                info = read_kineto(b, f, n, progress=prog, cancelled=cancelled)
            except TraceError as e:
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
            done += sizes[i]
            n += 1
            events += info["reader"].next_ordinal
            yield info
            del info  # the file's parsed chunks go before the next file is read (out of core)


def _load_kineto(files: list[str], progress, cancelled, optional: frozenset = frozenset()) -> Trace:
    """optional: files found inside an opened folder (others were named by the user)."""
    b = TraceBuilder("kineto")
    skipped: list[str] = []
    per_file = list(read_each(b, files, progress, cancelled, optional, skipped))
    if not per_file:
        raise TraceError(file_names(files), "no trace in these files (each is JSON, but not a profiler trace)")
    from ...model import heap

    heap.trim()  # the decoded pieces' buffers, freed, leave before the columns are committed
    _assign_ranks_and_clocks(b, per_file)
    for info in per_file:  # the readers' own copies of the columns go before the sort
        info["reader"].chunks = []
        info["reader"].inst = []
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
                b.warnings.append(
                    f"{os.path.basename(info['reader'].path)}: rank {r} appears twice; shown as another rank"
                )
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
            b.warnings.append(
                f"{os.path.basename(info['reader'].path)}: no absolute clock; aligned "
                f"at its first event (offset {offset} ns)"
            )
        info["reader"].finish(info["meta"], r, offset, info["base_ns"])
        for g in _process_groups(info["meta"]):
            if g not in b.metadata.setdefault("process_groups", []):
                b.metadata["process_groups"].append(g)
        b.metadata.setdefault("per_file", []).append(
            {
                "path": info["reader"].path,
                "rank": r,
                "clock_offset_ns": offset,
                "base_ns": info["base_ns"],
                "flow_events": info["reader"].n_flow,
                # its host events' "Ev Idx" numbers, summed up (io/kineto_numbered.add)
                "host_numbered": info["reader"].numbered,
                # what a session of this file and others needs of it (io/cache_join.py): the rank
                # the file names (None: none) and its first time
                "file_rank": info["rank"],
                "min_ts_us": info["min_ts_us"] if math.isfinite(info["min_ts_us"]) else None,
            }
        )


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
