"""On-disk cache of a session's columns: one .npy per column, memory-mapped on reopen.

.npy + np.load(mmap_mode="r") reopens 10^7 rows in ~1.5 ms (engineering.md 2.4); Arrow IPC is
as fast once imported, but importing pyarrow alone costs ~0.25 s here, the whole reopen budget.
The key covers every file's absolute path, size and mtime plus STORE_VERSION, so an edited
file or a newer program never reads stale columns. Writes go to a temporary folder renamed into
place, and anything unreadable is deleted and rebuilt, never trusted.
"""
from __future__ import annotations

import hashlib
import os
import shutil
import tempfile

import msgspec
import numpy as np

from ..model.trace import EVENT_COLUMNS, Counter, Lane, RankInfo, Source, Step, Trace

# 6: key from the paths' bytes; 7: level-of-detail pyramid stored; 8: lane offsets in meta.json
STORE_VERSION = 8


def cache_root() -> str:
    env = os.environ.get("GPUVIEWER_CACHE_DIR")
    if env:
        return env
    import platformdirs
    return os.path.join(platformdirs.user_cache_dir("gpuviewer", appauthor=False), "sessions")


def key_for(files: list[str]) -> str:
    parts = []
    for f in files:
        st = os.stat(f)
        # the path's bytes, so names that are not UTF-8 get a key too
        parts.append([os.fsencode(os.path.abspath(f)).hex(), st.st_size, st.st_mtime_ns])
        for side in ("-wal", "-journal"):  # SQLite commits into these without touching the file
            try:
                ss = os.stat(f + side)
                parts.append([side, ss.st_size, ss.st_mtime_ns])
            except OSError:
                pass
    blob = msgspec.json.encode({"v": STORE_VERSION, "files": parts})
    return hashlib.sha256(blob).hexdigest()[:32]


def _dir_for(key: str) -> str:
    return os.path.join(cache_root(), key)


def store(files: list[str], trace: Trace) -> str | None:
    """Write the cache; failures (read-only disk, full disk) only cost the speed-up."""
    try:
        key = key_for(files)
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
            from ..model.view import initial_view
            arrays.update(lod_pack(trace))
            for name, arr in arrays.items():
                np.save(os.path.join(tmp, f"{name}.npy"), np.ascontiguousarray(arr))
            meta = meta_dict(key, trace.format, len(trace), trace.names, trace.lanes, trace.ranks,
                             trace.steps, trace.counters, trace.sources, trace.warnings,
                             trace.metadata, (trace.start_ns, trace.end_ns), initial_view(trace),
                             trace.lane_offsets)
            return commit(tmp, meta)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
    except (OSError, TypeError, ValueError, msgspec.EncodeError):
        return None


def new_tmp() -> str:
    """A temporary folder in the cache root that commit() renames into place."""
    root = cache_root()
    os.makedirs(root, exist_ok=True)
    return tempfile.mkdtemp(prefix=".tmp-", dir=root)


def meta_dict(key: str, format: str, n: int, names: list[str], lanes: list[Lane],
              ranks: list[RankInfo], steps: list[Step], counters: list[Counter],
              sources: list[Source], warnings: list[str], metadata: dict,
              span: tuple[int, int], view: tuple[int, int], lane_offsets: np.ndarray) -> dict:
    """meta.json: everything of a session that is not a column."""
    return {
        "key": key, "version": STORE_VERSION, "format": format, "n": n,
        "names": names,
        "lanes": [msgspec.structs.asdict(_LaneS(**_lane_dict(ln))) for ln in lanes],
        "ranks": [_rank_dict(r) for r in ranks],
        "steps": [[s.rank, s.step, s.start, s.end] for s in steps],
        "counters": [{"rank": c.rank, "device": c.device, "name": c.name} for c in counters],
        "sources": [s.__dict__ for s in sources],
        "warnings": warnings,
        "metadata": metadata,
        # O(events) to compute: kept so that a cached session opens without a pass
        "span": [int(span[0]), int(span[1])], "initial_view": [int(view[0]), int(view[1])],
        "lane_offsets": [int(x) for x in lane_offsets],
    }


def commit(tmp: str, meta: dict) -> str:
    """Write meta.json into tmp (last: its presence marks a complete cache) and rename tmp to
    the session's folder. Returns that folder."""
    final = _dir_for(meta["key"])
    with open(os.path.join(tmp, "meta.json"), "wb") as f:
        f.write(msgspec.json.encode(meta))
        f.flush()
        os.fsync(f.fileno())
    if os.path.exists(final):
        shutil.rmtree(final, ignore_errors=True)
    os.replace(tmp, final)
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


def _lane_dict(ln: Lane) -> dict:
    return {"rank": ln.rank, "kind": ln.kind, "device": ln.device, "stream": ln.stream,
            "label": ln.label, "order": ln.order, "source": ln.source, "pid": ln.pid}


def _rank_dict(r: RankInfo) -> dict:
    return {"rank": r.rank, "files": r.files, "devices": r.devices,
            "device_props": {str(k): v for k, v in r.device_props.items()}, "host": r.host,
            "clock_offset_ns": r.clock_offset_ns, "world_size": r.world_size}


def _dir_size(d: str) -> int:
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
    try:
        entries = [os.path.join(root, d) for d in os.listdir(root) if not d.startswith(".")]
    except OSError:
        return []
    sized = []
    for d in entries:
        try:
            used = os.stat(os.path.join(d, "meta.json")).st_mtime
        except OSError:
            used = 0.0
        sized.append((used, d, _dir_size(d)))
    total = sum(x[2] for x in sized)
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


def load(files: list[str]) -> Trace | None:
    try:
        key = key_for(files)
    except (OSError, ValueError):
        return None
    d = _dir_for(key)
    meta_path = os.path.join(d, "meta.json")
    if not os.path.exists(meta_path):
        return None
    try:
        with open(meta_path, "rb") as f:
            meta = msgspec.json.decode(f.read())
        if meta.get("key") != key or meta.get("version") != STORE_VERSION:
            raise ValueError("stale cache")
        n = int(meta["n"])

        def arr(name, length=None):
            a = np.load(os.path.join(d, f"{name}.npy"), mmap_mode="r", allow_pickle=False)
            if length is not None and len(a) != length:
                raise ValueError(f"{name}: wrong length")
            return a

        cols = {}
        for name, dtype in EVENT_COLUMNS.items():
            a = arr(name, n)
            if a.dtype != np.dtype(dtype):
                raise ValueError(f"{name}: wrong dtype")
            cols[name] = a
        flows = (arr("flow_src"), arr("flow_dst"))
        inst = {k: arr(f"inst_{k}") for k in ("t", "lane", "name")}
        counters = [Counter(c["rank"], c["device"], c["name"], arr(f"counter{i}_t"), arr(f"counter{i}_v"))
                    for i, c in enumerate(meta["counters"])]
        lanes = [Lane(**ln) for ln in meta["lanes"]]
        ranks = []
        for r in meta["ranks"]:
            r = dict(r)
            r["device_props"] = {int(k): v for k, v in r["device_props"].items()}
            ranks.append(RankInfo(**r))
        offsets = np.array(meta["lane_offsets"], np.int64)
        if len(offsets) != len(lanes) + 1 or offsets[0] != 0 or offsets[-1] != n or (np.diff(offsets) < 0).any():
            raise ValueError("lane offsets: inconsistent")
        t = Trace(format=meta["format"], columns=cols, names=meta["names"], lanes=lanes,
                  ranks=ranks, counters=counters, steps=[Step(*s) for s in meta["steps"]],
                  flows=flows, instants=inst, sources=[Source(**s) for s in meta["sources"]],
                  warnings=meta["warnings"], metadata=meta["metadata"], lane_offsets=offsets)
        t.metadata["from_cache"] = True
        if "span" in meta:
            t._span = (int(meta["span"][0]), int(meta["span"][1]))
            t.derived["initial_view"] = (int(meta["initial_view"][0]), int(meta["initial_view"][1]))
        from ..model.queries import LOD_ARRAYS, lod_attach
        lod = {k: arr(k) for k in LOD_ARRAYS}
        if len(lod["lod_index"]) != len(lod["lod_q"]) or len({len(lod[k]) for k in LOD_ARRAYS[:4]}) != 1 \
                or (len(lod["lod_index"]) and int((lod["lod_index"][:, 2] + lod["lod_index"][:, 3]).max()) > len(lod["lod_start"])):
            raise ValueError("level of detail: inconsistent")
        # each row's events are checked to lie in its lane when the row is first drawn
        # (queries._from_pack): a check of the whole lod_rep here would read 150 MB at 100M events
        lod_attach(t, lod)
        try:
            os.utime(meta_path)  # "used last" for eviction
        except OSError:
            pass
        return t
    except (OSError, ValueError, KeyError, TypeError, msgspec.DecodeError):
        shutil.rmtree(d, ignore_errors=True)  # corrupt or stale: rebuild
        return None
