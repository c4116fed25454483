"""The ranks of an out-of-core build (io/out_of_core.py) read by a pool of processes.

Each worker reads one file, commits it as a rank of its own builder (sorted, nested, flows
linked, level-of-detail pyramid packed: ooc_part.make_part) and sends the part back; the
build appends the parts in file order, renumbering names and lanes into the session's, so the
cache is the one the one-file-at-a-time build writes, byte for byte. A worker never knows its
final rank (that depends on the files before it), so it commits as rank 0 and the build moves
lanes, steps, counters and the rank's facts to the rank it gives.

How many at once: one per core, fewer when the files' estimated peaks (PEAK_PER_JSON_BYTE of
decompressed JSON each) would pass the memory budget (half the memory available, or
GPUVIEWER_OOC_MEMORY_MB). GPUVIEWER_OOC_WORKERS sets the pool's size (1: no pool).

Progress and cancel cross through shared memory: each worker writes how far into its file it is;
the build polls it with the caller's cancelled() and, when that says stop, sets a flag the
workers' readers check, so they stop within a piece. A worker that dies (killed, out of memory)
breaks the pool: that is reported as one line naming the files that were being read, not a hang.
"""

from __future__ import annotations

import concurrent.futures as cf
import multiprocessing as mp
import os
import struct
from collections.abc import Iterator
from concurrent.futures.process import BrokenProcessPool

from .errors import Cancelled, TraceError, file_names, unexpected
from .interrupts import held

# a worker's peak per byte of the file's decompressed JSON, with room: a 1.5M-event rank of
# 610 MB of JSON (scale_trace.py, 50 tiles of ddp) went from 34 MB to 303 MB read, committed and
# pickled for the pipe (0.44 a byte)
PEAK_PER_JSON_BYTE = 0.6
BASE_BYTES = 100 << 20  # a worker before it reads: the interpreter and the modules forked with it
_POLL_S = 0.2  # how often the build looks at progress and cancel while it waits for a part

_shared: dict = {}  # in a worker: the cancel flag and the progress arrays (set by _init)


def workers_for(files: list[str]) -> int:
    """The pool's size for these files: one per usable core (GPUVIEWER_OOC_WORKERS), at most one
    per file and as many of the largest as fit the memory budget together; 1 (no pool) where
    processes cannot be forked (or this is a daemonic process, which may not start any)."""
    env = os.environ.get("GPUVIEWER_OOC_WORKERS")
    try:
        n = int(env) if env else len(os.sched_getaffinity(0))
    except (ValueError, AttributeError):
        n = os.cpu_count() or 1
    if n < 2 or len(files) < 2 or not hasattr(os, "fork") or mp.current_process().daemon:
        return 1
    peak = max(peak_bytes(f) for f in files)
    return max(1, min(n, len(files), memory_budget() // max(1, peak)))


def peak_bytes(path: str) -> int:
    """A worker's estimated peak for this file."""
    return int(json_bytes(path) * PEAK_PER_JSON_BYTE) + BASE_BYTES


def json_bytes(path: str) -> int:
    """The file's decompressed size: a gzip member's trailer holds it (mod 4 GiB: a larger one
    is taken as at least its compressed size times 10, the ratio of profiler JSON)."""
    size = os.path.getsize(path)
    try:
        with open(path, "rb") as f:
            if f.read(2) != b"\x1f\x8b":
                return size
            f.seek(-4, os.SEEK_END)
            isize = struct.unpack("<I", f.read(4))[0]
    except OSError:
        return size
    return max(isize, size * 10) if size * 10 > 1 << 32 else isize


def memory_budget() -> int:
    """Bytes the workers' peaks may add up to: GPUVIEWER_OOC_MEMORY_MB, else half of what the
    system says is available."""
    env = os.environ.get("GPUVIEWER_OOC_MEMORY_MB")
    if env:
        try:
            return int(float(env) * 1e6)
        except ValueError:
            pass
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024 // 2
    except OSError:
        pass
    return int(os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")) // 2


def _init(cancel, frac, parent: int) -> None:
    _shared["cancel"] = cancel
    _shared["frac"] = frac
    from .orphans import end_with_parent

    end_with_parent(parent)
    # the pool already has a process per core: each file is decoded in its own worker, not by a
    # second pool of decoders under it
    from . import kineto

    kineto._PARALLEL_MIN_BYTES = 1 << 62


def _read_rank(i: int, path: str, optional: bool) -> dict:
    """In a worker: file i read and committed as rank 0 of a builder of its own; its part and
    what the session needs of the file, or {"error"/"skipped"/"cancelled": ...}."""
    from ..model import heap
    from ..model.build import TraceBuilder
    from .formats.kineto_json import _NOT_A_TRACE
    from .kineto import read_kineto
    from .ooc_part import make_part

    cancel, frac = _shared["cancel"], _shared["frac"]

    def prog(f: float, *_a) -> None:
        frac[i] = f

    def cancelled() -> bool:
        return bool(cancel.value)

    b = TraceBuilder("kineto")
    try:
        info = read_kineto(b, path, 0, progress=prog, cancelled=cancelled)
        if cancelled():
            raise Cancelled()
        n_read = len(b.warnings)
        fr = info["reader"]
        fr.finish(info["meta"], 0, 0, info["base_ns"])
        # the pieces' and the reader's freed heap given back before the part is made and pickled
        # for the pipe (a 1.5M-event rank: the worker's peak 286 -> 227 MB)
        heap.trim()
        part = make_part(b, 0)
        heap.trim()
    except TraceError as e:
        if optional and any(w in e.problem for w in _NOT_A_TRACE):
            return {"skipped": e.problem}
        return {"error": (e.path, e.problem)}
    except Cancelled:
        return {"cancelled": True}
    except Exception as e:  # noqa: BLE001 - named after the file that caused it, as read_each does
        err = unexpected(path, e)
        return {"error": (err.path, err.problem)}
    frac[i] = 1.0
    return {
        "part": part,
        "strings": b.names.strings,
        "lanes": b.lanes,
        "rank_info": b.ranks[0],
        "steps": b.steps,
        "counters": b.counters,
        "source": b.sources[0],
        "read_warnings": b.warnings[:n_read],
        "commit_warnings": b.warnings[n_read:],
        "meta": info["meta"],
        "file_rank": info["rank"],
        "base_ns": info["base_ns"],
        "min_ts_us": info["min_ts_us"],
        "n_flow": fr.n_flow,
        "host_numbered": fr.numbered,
        "n_events": fr.next_ordinal,
        "path": fr.path,
    }


def read_ranks(files: list[str], job, n_workers: int) -> Iterator[tuple[str, dict]]:
    """(file, what _read_rank returned) in file order; errors raised as the serial reader raises
    them (the first file's, in file order), Cancelled when job.cancelled() says so."""
    progress, cancelled = job.progress, job.cancelled
    sizes = [max(1, os.path.getsize(f)) for f in files]
    total = sum(sizes)
    peaks = [peak_bytes(f) for f in files]
    budget = memory_budget()
    ctx = mp.get_context("fork")  # workers inherit the imported modules (spawn re-imports them)
    cancel = ctx.Value("b", 0, lock=False)
    frac = ctx.Array("d", len(files), lock=False)
    pool = cf.ProcessPoolExecutor(n_workers, mp_context=ctx, initializer=_init, initargs=(cancel, frac, os.getpid()))
    futures: dict[int, cf.Future] = {}
    nxt = 0  # the next file to submit
    events = 0
    last_msg = None
    try:
        for i, f in enumerate(files):
            # keep the pool busy and one part ahead, within the memory budget
            while (
                nxt < len(files) and nxt - i < n_workers + 1 and (nxt == i or sum(peaks[i:nxt]) + peaks[nxt] <= budget)
            ):
                with held():  # the first submit forks the workers: Ctrl+C waits for them to be known
                    futures[nxt] = pool.submit(_read_rank, nxt, files[nxt], files[nxt] in job.optional)
                nxt += 1
            while True:
                if cancelled and cancelled():
                    raise Cancelled()
                if progress:
                    last_msg = _report(progress, files, sizes, total, frac, i, nxt, events, last_msg)
                try:
                    res = futures[i].result(timeout=_POLL_S)
                    break
                except cf.TimeoutError:
                    pass
                except BrokenProcessPool:
                    raise TraceError(
                        file_names([files[k] for k in range(i, nxt)]),
                        "a reading process stopped without an answer (killed, or out of "
                        "memory?); open fewer files at once or free memory",
                    ) from None
            del futures[i]
            if "error" in res:  # the first bad file in file order, as the serial reader finds it
                raise TraceError(*res["error"])
            if "cancelled" in res:
                raise Cancelled()
            if "part" in res:
                events += res["n_events"]
            yield f, res
            del res  # the part is in the store: dropped before the next one is taken
    finally:
        cancel.value = 1
        with held():  # the join not interrupted (CPython 3.11 would take the thread as ended)
            pool.shutdown(wait=True, cancel_futures=True)


def _report(progress, files, sizes, total, frac, i, nxt, events, last) -> str:
    """read_each's message, for the first file not yet appended."""
    done = sum(sizes[:i]) + sum(sizes[k] * frac[k] for k in range(i, nxt))
    n = len(files)
    msg = (
        f"reading {os.path.basename(files[i])}: {done / 1e6:,.0f} of {total / 1e6:,.0f} MB, "
        f"{events:,} events · {i} of {n} ranks"
    )
    if msg != last:
        progress(done / total * 0.9, msg)
    return msg
