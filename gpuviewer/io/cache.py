"""On-disk cache of a session's columns: one .npy per column, memory-mapped on reopen.

.npy + np.load(mmap_mode="r") reopens 10^7 rows in ~1.5 ms (engineering.md 2.4); Arrow IPC is
as fast once imported, but importing pyarrow alone costs ~0.25 s here, the whole reopen budget.
The key covers every file's identity (device and inode, io/cache_paths.py), size, mtime and
ctime plus STORE_VERSION, so an edited file or a newer program never reads stale columns, and
another spelling of the same file's path (a link, a relative path) finds its entry. Writes go to a temporary folder renamed into
place. Every file's size and checksum is in the entry's sums.json (io/cache_check.py): an entry
that does not match is deleted and rebuilt from the trace with one warning, never trusted.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import socket
import tempfile
import time

import msgspec
import numpy as np

from ..model.trace import EVENT_COLUMNS, Counter, Lane, RankInfo, Source, Step, Trace
from .cache_check import Damaged, check_file, open_regular, read_sums, write_sums
from .cache_paths import identity, respell

# 6: key from the paths' bytes; 7: level-of-detail pyramid stored; 8: lane offsets in meta.json;
# 9: sums.json (each file's size and checksum); 10: ProfilerStep#N recorded as an Operator
# (PyTorch 1.8/1.9) is a step; 11: CUPTI range-profiler and MTIA device events on device lanes;
# 12: nsys whole-graph launches (CUPTI_ACTIVITY_KIND_GRAPH_TRACE) are GPU ops, Kineto slices of
# unknown categories on a device's process (MTIA 0...) on its lanes; 13: nsys CUDA_GRAPH_EVENTS
# (graph creation) as instants; 14: the NCCL kernels' and ops' recorded arguments kept
# (argtab_*.npy, model/arg_table.py); 15: nsys copies named with their memory kinds, as PyTorch's
# profiler names them ("Memcpy HtoD (Pinned -> Device)"); 16: a Kineto file without ProfilerStep
# gets its steps from its Optimizer.step ranges; 19: the step a p.step() at the profiler's exit
# leaves is not a step (io/step_stub.py); 20: CUPTI range-profiler events are untimed device ranges;
# 21: their warning's new words (the warnings are cached)
# 22: an nsys runtime call recorded twice (nsys 2021: cudaMemcpy around cudaMemcpy_v3020) is read once
# 23: an nsys device is the adapter with its properties recorded, not another of the same cuDevice
# 24: PyTorch 1.7-1.8's "Input dims" kept as the ops' shapes
# 25: a Kineto step range ends at the profiler's 'Record Window End' (and its warning)
# 26: a Kineto file's host event numbers (per_file host_numbered) and the sampled-trace warning
# 27: an Nsight Systems export's kernels that grew the device's local memory (per_file local_memory_growth)
# 28: each level-of-detail run's busy time (lod_busy): merged runs drawn by how much of them is busy
# 29: a Python frame that never ended, begun in a slice that did, closed where that slice ends (model.depth)
# 30: rows of slices that ended under one still open used again (model.depth: ProfilerStep chains)
# 31: a Kineto GPU lane of stream -1 (CUPTI's context synchronizations) is labelled 'context sync'
# 32: an nsys NVTX lane of a named domain keeps its thread and domain (Lane.tid, Lane.domain)
STORE_VERSION = 32
# Entries up to this size are checked whole when opened: 256 MB hash in ~12 ms from the page
# cache, under 5% of a warm open (BENCHMARKS.md). Bigger ones check each column when first read.
EAGER_CHECK_BYTES = 256 << 20
STALE_S = 3600  # a temporary folder nothing was written into for this long was left behind


def cache_root() -> str:
    env = os.environ.get("GPUVIEWER_CACHE_DIR")
    if env:
        return env
    import platformdirs

    return os.path.join(platformdirs.user_cache_dir("gpuviewer", appauthor=False), "sessions")


def key_for(files: list[str]) -> str:
    """The entry of a session of these files, in this order: by each file's identity, not its
    path (io/cache_paths.py), so every spelling of the same files finds one entry."""
    blob = msgspec.json.encode({"v": STORE_VERSION, "id": [identity(f) for f in files]})
    return hashlib.sha256(blob).hexdigest()[:32]


def _dir_for(key: str) -> str:
    return os.path.join(cache_root(), key)


def store(files: list[str], trace: Trace) -> str | None:
    """Write the cache; failures (read-only disk, full disk) only cost the speed-up."""
    try:
        tmp = new_tmp()
        try:
            arrays = dict(trace.columns)
            arrays["flow_src"], arrays["flow_dst"] = trace.flows
            for k, v in trace.instants.items():
                arrays[f"inst_{k}"] = v
            for i, c in enumerate(trace.counters):
                arrays[f"counter{i}_t"] = c.t
                arrays[f"counter{i}_v"] = c.v
            # the timeline's levels of detail, so a cached session's first paint maps them
            from ..model.queries import lod_pack
            from ..model.view import steps_view

            arrays.update(lod_pack(trace))
            if trace.arg_table is not None:
                arrays.update(trace.arg_table.arrays())
            for name, arr in arrays.items():
                np.save(os.path.join(tmp, f"{name}.npy"), np.ascontiguousarray(arr))
            meta = meta_dict(
                files,
                trace.format,
                len(trace),
                trace.names,
                trace.lanes,
                trace.ranks,
                trace.steps,
                trace.counters,
                trace.sources,
                trace.warnings,
                trace.metadata,
                (trace.start_ns, trace.end_ns),
                steps_view(trace),
                trace.lane_offsets,
            )
            meta["argtab"] = trace.arg_table is not None
            return commit(tmp, meta)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
    except (OSError, TypeError, ValueError, msgspec.EncodeError):
        # the caller keeps this trace (no entry to reopen): it still says why it was read again
        note = _damaged_note(files)
        if note:
            trace.warnings.append(note)
        return None


def _host() -> str:
    return "".join(c for c in socket.gethostname() if c.isalnum())[:32] or "host"


def new_tmp() -> str:
    """A temporary folder in the cache root that commit() renames into place; its name holds
    the building host and process, so a sweep knows when its builder is gone."""
    root = cache_root()
    os.makedirs(root, exist_ok=True)
    return tempfile.mkdtemp(prefix=f".tmp-{_host()}-{os.getpid()}-", dir=root)


def _builder_gone(name: str) -> bool:
    """Whether the process named in a temporary folder's name (.tmp-HOST-PID-...) has ended on
    this host; False when unknown (another host, an older name)."""
    parts = name.split("-")
    if len(parts) < 4 or parts[1] != _host() or not parts[2].isdigit():
        return False
    pid = int(parts[2])
    if pid == os.getpid():
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except OSError:  # exists, owned by another user
        return False
    return False


def sweep(root: str | None = None, keep: str = "", max_age: float = STALE_S) -> list[str]:
    """Remove temporary folders of builds that ended without cleaning up (a killed process, a
    reader the window terminated on Cancel): a build writes for minutes, so each one can hold
    gigabytes. A folder is left behind when its builder process is gone, or none of its files
    was written for max_age seconds (a builder on another host sharing the folder)."""
    root = cache_root() if root is None else root
    removed: list[str] = []
    now = time.time()
    try:
        names = [n for n in os.listdir(root) if n.startswith(".tmp-")]
    except OSError:
        return removed
    for n in names:
        d = os.path.join(root, n)
        if d == keep:
            continue
        try:
            newest = max([os.lstat(d).st_mtime] + [e.stat(follow_symlinks=False).st_mtime for e in os.scandir(d)])
        except OSError:
            continue
        if _builder_gone(n) or now - newest > max_age:
            shutil.rmtree(d, ignore_errors=True)
            removed.append(d)
    return removed


_swept = False


def _sweep_once() -> None:
    """At the first use of the cache in a process."""
    global _swept
    if not _swept:
        _swept = True
        sweep()


def meta_dict(
    files: list[str],
    format: str,
    n: int,
    names: list[str],
    lanes: list[Lane],
    ranks: list[RankInfo],
    steps: list[Step],
    counters: list[Counter],
    sources: list[Source],
    warnings: list[str],
    metadata: dict,
    span: tuple[int, int],
    view: tuple[int, int],
    lane_offsets: np.ndarray,
) -> dict:
    """meta.json: everything of a session of these files that is not a column."""
    return {
        "key": key_for(files),
        "paths": list(files),  # as this open spelled them: another spelling's open says its own
        "version": STORE_VERSION,
        "format": format,
        "n": n,
        "names": names,
        "lanes": [msgspec.structs.asdict(_LaneS(**_lane_dict(ln))) for ln in lanes],
        "ranks": [_rank_dict(r) for r in ranks],
        "steps": [[s.rank, s.step, s.start, s.end] for s in steps],
        "counters": [{"rank": c.rank, "device": c.device, "name": c.name} for c in counters],
        "sources": [s.__dict__ for s in sources],
        "warnings": warnings,
        "metadata": metadata,
        # O(events) to compute: kept so that a cached session opens without a pass
        "span": [int(span[0]), int(span[1])],
        "initial_view": [int(view[0]), int(view[1])],
        "lane_offsets": [int(x) for x in lane_offsets],
    }


def builder_meta(files: list[str], b, n: int, steps: list[Step], span, view, lane_offsets: np.ndarray) -> dict:
    """meta_dict of a session whose names, lanes, ranks, counters, sources, warnings and
    metadata are a model.build.TraceBuilder's (built out of core, or joined from entries)."""
    ranks = [b.ranks[r] for r in sorted(b.ranks)]
    return meta_dict(
        files, b.format, n, b.names.strings, b.lanes, ranks, steps, b.counters, b.sources, b.warnings, b.metadata,
        span, view, lane_offsets,
    )  # fmt: skip


def commit(tmp: str, meta: dict, evicting: bool = True) -> str:
    """Write meta.json into tmp (last: its presence marks a complete cache) and rename tmp to
    the session's folder, then keep the cache under its limit (not for a pointer of a few
    hundred bytes: io/cache_slice.py writes one per file). Returns that folder."""
    final = _dir_for(meta["key"])
    with open(os.path.join(tmp, "meta.json"), "wb") as f:
        f.write(msgspec.json.encode(meta))
        f.flush()
        os.fsync(f.fileno())
    write_sums(tmp)
    if os.path.exists(final):
        shutil.rmtree(final, ignore_errors=True)
    os.replace(tmp, final)
    if evicting:
        evict(keep=final)
    return final


class _LaneS(msgspec.Struct):
    rank: int
    kind: str
    device: int
    stream: int
    label: str
    order: int
    source: int
    pid: int
    tid: int = -1
    domain: str = ""


def _lane_dict(ln: Lane) -> dict:
    return {
        "rank": ln.rank,
        "kind": ln.kind,
        "device": ln.device,
        "stream": ln.stream,
        "label": ln.label,
        "order": ln.order,
        "source": ln.source,
        "pid": ln.pid,
        "tid": ln.tid,
        "domain": ln.domain,
    }


def _rank_dict(r: RankInfo) -> dict:
    return {
        "rank": r.rank,
        "files": r.files,
        "devices": r.devices,
        "device_props": {str(k): v for k, v in r.device_props.items()},
        "host": r.host,
        "clock_offset_ns": r.clock_offset_ns,
        "world_size": r.world_size,
    }


def dir_size(d: str) -> int:
    """Bytes of the files under d (a cache entry), links not followed; files gone meanwhile count 0."""
    total = 0
    for root, _dirs, files in os.walk(d):
        for f in files:
            try:
                total += os.lstat(os.path.join(root, f)).st_size
            except OSError:
                pass
    return total


def evict(keep: str | None = None, max_bytes: int | None = None) -> list[str]:
    """Keep the cache under its size limit (GPUVIEWER_CACHE_MAX_GB, default 20 GB): remove the
    sessions used longest ago. Returns what was removed."""
    if max_bytes is None:
        try:
            max_bytes = int(float(os.environ.get("GPUVIEWER_CACHE_MAX_GB", "20")) * 1e9)
        except ValueError:
            max_bytes = int(20e9)
    root = cache_root()
    sweep(root, keep=keep or "")
    try:
        names = os.listdir(root)
    except OSError:
        return []
    entries = [os.path.join(root, d) for d in names if not d.startswith(".")]
    # builds under way count in the total but are not removed here (sweep does, once left behind)
    building = sum(dir_size(os.path.join(root, d)) for d in names if d.startswith(".tmp-"))
    sized = []
    for d in entries:
        try:
            used = os.lstat(os.path.join(d, "meta.json")).st_mtime
        except OSError:
            used = 0.0
        sized.append((used, d, dir_size(d)))
    total = sum(x[2] for x in sized) + building
    removed = []
    for used, d, size in sorted(sized):
        if total <= max_bytes:
            break
        if d == keep:
            continue
        shutil.rmtree(d, ignore_errors=True)
        total -= size
        removed.append(d)
    return removed


_damaged: dict[str, str] = {}  # key -> why its entry was found damaged in this process


def _session_name(files: list[str]) -> str:
    return files[0] if len(files) == 1 else f"{files[0]} and {len(files) - 1} more"


def _damaged_note(files: list[str]) -> str | None:
    try:
        why = _damaged.pop(key_for(files), None)
    except (OSError, ValueError):
        return None
    return None if why is None else f"the cache of {_session_name(files)} was damaged ({why}) and was rebuilt"


class _Checked(dict):
    """Arrays of a big entry, each checked against its checksum when first read (a whole check
    on open would cost more than 5% of the open). A mismatch then cannot be answered with the
    clean value: the entry is removed and the error says so (the next open rebuilds it)."""

    def __init__(self, arrays: dict, d: str, sums, files: list[str], prefix: str = "") -> None:
        super().__init__(arrays)
        self._d, self._sums, self._files, self._prefix = d, sums, files, prefix
        self._ok: set[str] = set()

    def __getitem__(self, k):
        if k not in self._ok:
            try:
                check_file(self._d, f"{self._prefix}{k}.npy", self._sums)
            except (Damaged, OSError) as e:
                shutil.rmtree(self._d, ignore_errors=True)
                from .errors import TraceError

                raise TraceError(
                    _session_name(self._files),
                    f"its cache was found damaged while reading ({e}) and was removed; "
                    "open it again to rebuild it (the trace itself is fine)",
                ) from None
            self._ok.add(k)
        return super().__getitem__(k)

    def get(self, k, default=None):
        return self[k] if k in self else default

    def values(self):
        return [self[k] for k in self]

    def items(self):
        return [(k, self[k]) for k in self]


def load(files: list[str]) -> Trace | None:
    """The session from its cache entry, or None (no entry, or a damaged one: removed, and the
    warning kept for the trace that is rebuilt from the files)."""
    try:
        key = key_for(files)
    except (OSError, ValueError):
        return None
    _sweep_once()
    d = _dir_for(key)
    try:
        os.lstat(d)
    except OSError:
        return None
    try:
        t = _read(d, key, files)
    except _Pointer:  # a file of an out-of-core session: its entry is cut out (io/cache_slice.py)
        return None
    except (Damaged, OSError, ValueError, KeyError, TypeError, IndexError, msgspec.DecodeError) as e:
        why = str(e) if isinstance(e, Damaged) else f"{type(e).__name__}: {e}"[:200]
        _damaged[key] = why
        shutil.rmtree(d, ignore_errors=True)  # never trusted: rebuilt from the trace
        try:
            os.unlink(d)  # a file or link where the folder was
        except OSError:
            pass
        return None
    note = _damaged_note(files)
    if note:
        t.warnings = list(t.warnings) + [note]
    return t


def pointer(files: list[str]) -> tuple[str, dict] | None:
    """(the folder, meta.json) of the pointer that stands for this file's entry (io/cache_slice.py)."""
    try:
        key = key_for(files)
        d = _dir_for(key)
        _read(d, key, files)
    except _Pointer as p:
        return d, p.meta
    except (Damaged, OSError, ValueError, KeyError, TypeError, IndexError, msgspec.DecodeError):
        pass
    return None


class _Pointer(Exception):
    """The entry is a pointer into an out-of-core session's entry (io/cache_slice.py)."""

    def __init__(self, meta: dict) -> None:
        super().__init__("a pointer")
        self.meta = meta


# Arrays under this size are read, not mapped: a mapping keeps a descriptor open for the
# session's life (Python's mmap holds a copy of it), so 30-odd columns of each small session
# would add up to the 1024 descriptors many systems allow a process
MAP_FROM_BYTES = 4 << 20


def _map_npy(path: str) -> np.ndarray:
    """A .npy file read-only through a descriptor of a regular file (np.load's mmap_mode takes
    only a name, which it would open whatever it is): memory-mapped when big, read when small."""
    fmt = np.lib.format
    with os.fdopen(open_regular(path), "rb") as f:
        version = fmt.read_magic(f)
        read_header = fmt.read_array_header_1_0 if version == (1, 0) else fmt.read_array_header_2_0
        shape, fortran, dtype = read_header(f)
        if dtype.hasobject:
            raise Damaged(f"{os.path.basename(path)} holds objects")
        count = int(np.prod(shape))
        if count == 0:
            return np.zeros(shape, dtype)
        if count * dtype.itemsize >= MAP_FROM_BYTES:
            return np.memmap(f, dtype=dtype, mode="r", shape=shape, order="F" if fortran else "C", offset=f.tell())
        a = np.empty(shape, dtype, order="F" if fortran else "C")
        if f.readinto(a.reshape(-1, order="A").view(np.uint8).data) != a.nbytes:
            raise Damaged(f"{os.path.basename(path)} is shorter than its header says")
        a.flags.writeable = False  # as a mapped column is
        return a


def _read(d: str, key: str, files: list[str]) -> Trace:
    sums = read_sums(d)
    total = sum(size for size, _ in sums.files.values())
    lazy = total > EAGER_CHECK_BYTES
    check_file(d, "meta.json", sums)
    fd = open_regular(os.path.join(d, "meta.json"))
    with os.fdopen(fd, "rb") as f:
        meta = msgspec.json.decode(f.read())
    if meta.get("key") != key or meta.get("version") != STORE_VERSION:
        raise Damaged("meta.json names another session")
    if "in" in meta:
        raise _Pointer(meta)
    n = int(meta["n"])
    big = set(EVENT_COLUMNS) | {
        "inst_t",
        "inst_lane",
        "inst_name",
        "lod_start",
        "lod_end",
        "lod_rep",
        "lod_maxend",
        "lod_busy",
    }

    def arr(name, length=None):
        fname = f"{name}.npy"
        if not (lazy and name in big):
            check_file(d, fname, sums)
        elif sums.files.get(fname, (None,))[0] != os.lstat(os.path.join(d, fname)).st_size:
            raise Damaged(f"{fname} is not the size that was written")
        a = _map_npy(os.path.join(d, fname))
        if length is not None and len(a) != length:
            raise Damaged(f"{fname} has the wrong length")
        return a

    cols = {}
    for name, dtype in EVENT_COLUMNS.items():
        a = arr(name, n)
        if a.dtype != np.dtype(dtype):
            raise Damaged(f"{name}.npy has the wrong type")
        cols[name] = a
    flows = (arr("flow_src"), arr("flow_dst"))
    inst = {k: arr(f"inst_{k}") for k in ("t", "lane", "name")}
    counters = [
        Counter(c["rank"], c["device"], c["name"], arr(f"counter{i}_t"), arr(f"counter{i}_v"))
        for i, c in enumerate(meta["counters"])
    ]
    lanes = [Lane(**ln) for ln in meta["lanes"]]
    ranks = []
    for r in meta["ranks"]:
        r = dict(r)
        r["device_props"] = {int(k): v for k, v in r["device_props"].items()}
        ranks.append(RankInfo(**r))
    offsets = np.array(meta["lane_offsets"], np.int64)
    if len(offsets) != len(lanes) + 1 or offsets[0] != 0 or offsets[-1] != n or (np.diff(offsets) < 0).any():
        raise Damaged("meta.json's lane offsets are inconsistent")
    if lazy:
        cols = _Checked(cols, d, sums, files)
        inst = _Checked(inst, d, sums, files, "inst_")
    t = Trace(
        format=meta["format"],
        columns=cols,
        names=meta["names"],
        lanes=lanes,
        ranks=ranks,
        counters=counters,
        steps=[Step(*s) for s in meta["steps"]],
        flows=flows,
        instants=inst,
        sources=[Source(**s) for s in meta["sources"]],
        warnings=meta["warnings"],
        metadata=meta["metadata"],
        lane_offsets=offsets,
    )
    respell(t, meta.get("paths"), files)
    t.metadata["from_cache"] = True
    if "span" in meta:
        t._span = (int(meta["span"][0]), int(meta["span"][1]))
        t.derived["initial_view"] = (int(meta["initial_view"][0]), int(meta["initial_view"][1]))
    from ..model.queries import LOD_ARRAYS, LOD_RUN_ARRAYS, lod_attach

    lod = {k: arr(k) for k in LOD_ARRAYS}
    if (
        len(lod["lod_index"]) != len(lod["lod_q"])
        or len({len(lod[k]) for k in LOD_ARRAYS[:LOD_RUN_ARRAYS]}) != 1
        or (
            len(lod["lod_index"])
            and int((lod["lod_index"][:, 2] + lod["lod_index"][:, 3]).max()) > len(lod["lod_start"])
        )
    ):
        raise Damaged("the level-of-detail index is inconsistent")
    if lazy:
        lod = _Checked(lod, d, sums, files)
    # each row's events are also checked to lie in its lane when the row is first drawn
    # (queries._from_pack)
    lod_attach(t, lod)
    if meta.get("argtab"):
        from ..model.arg_table import ArgTable

        t.arg_table = ArgTable.from_arrays(
            {k: arr(k) for k in ("argtab_key", "argtab_ref", "argtab_blob", "argtab_off")}
        )
    try:
        os.utime(os.path.join(d, "meta.json"), follow_symlinks=False)  # "used last" for eviction
    except (OSError, NotImplementedError):
        pass
    return t
