"""A file's own cache entry cut from the entry of an out-of-core session that holds it.

The out-of-core build (io/out_of_core.py) writes one entry for the whole session and none for
its files: a copy of every file's columns would double the disk it takes. It leaves instead,
under each file's own key (cache.key_for([file])), a pointer: a small entry naming the session's
entry and the file's place in it (its rows, instants, flows, lanes, warnings, and its names in
the order reading it alone interns them, part_names.npy). The session's entry is unchanged. The first open of that file alone, or of another session
holding it (io/cache_join.py), finds the pointer and cuts the file's entry out of the session's:
its rows copied, lanes and names renumbered as reading the file alone numbers them, its level
of detail packed again from them, nothing parsed. The disk is spent when a file is opened alone,
as reading it would spend it.

A pointer is left only for a file whose part is what reading it alone gives: its rank the one
it names (or 0) and its clock not moved. The pointer is found by the file's identity, so a file
changed since finds none; the session's entry may since have gone (evicted, or damaged): then
the pointer is removed and the file is read.
"""

from __future__ import annotations

import os

import numpy as np

from ..model.build import TraceBuilder
from ..model.trace import EVENT_COLUMNS, Counter, Lane, RankInfo, Source, Trace


def load(files: list[str]) -> Trace | None:
    """cache.load, and for one file that has a pointer instead of an entry: its entry cut out of
    the session's, then loaded (a pointer that leads nowhere is removed: the file is read)."""
    import shutil

    from . import cache

    t = cache.load(files)
    if t is not None or len(files) != 1:
        return t
    found = cache.pointer(files)
    if found is None:
        return None
    d, meta = found
    if cut(files[0], meta, d):
        return cache.load(files)
    shutil.rmtree(d, ignore_errors=True)
    return None


def record(pf: dict, names_map, read_warnings: list[str], lanes: tuple[int, int]) -> None:
    """Keep in the build's per-file record (pf) what cutting the file's entry out needs: names_map
    is the session's ids of the file's names, in the order reading the file alone interns them."""
    at = pf["at"]
    pf["part"] = {
        "events": [at["events"], at["n"]],
        "inst": [at["inst"], at["n_inst"]],
        "flows": [at["flows"], at["n_flows"]],
        "lanes": [lanes[0], lanes[1]],
        "read_warnings": list(read_warnings),
    }
    pf["names_map"] = np.asarray(names_map, np.int32)


def places(per_file: list[dict]) -> list[dict | None]:
    """Each file's place in the session (None: its part is not what reading it alone gives)."""
    from .formats.kineto_json import _process_groups

    out: list[dict | None] = []
    for k, pf in enumerate(per_file):
        alone = 0 if pf["file_rank"] is None else pf["file_rank"]
        if pf["rank"] != alone or pf["offset"] or "part" not in pf:
            out.append(None)
            continue
        p = dict(pf["part"])
        p.update(source=k, rank=pf["rank"], warnings=p.pop("read_warnings") + list(pf["warnings"]))
        p.update(process_groups=_process_groups(pf["meta"]), path=pf["path"], names_map=pf["names_map"])
        out.append(p)
    return out


def point(session_key: str, parts: list[dict | None]) -> None:
    """After the session's entry is committed: a pointer under each cut-able file's own key,
    where that file has no entry yet. Failures only cost the speed-up."""
    import shutil

    from . import cache

    for p in parts:
        if p is None:
            continue
        part = {n: v for n, v in p.items() if n != "names_map"}
        try:
            key = cache.key_for([p["path"]])
            if os.path.lexists(os.path.join(cache.cache_root(), key)):
                continue
            tmp = cache.new_tmp()
            try:
                np.save(os.path.join(tmp, "part_names.npy"), p["names_map"])
                meta = {"key": key, "version": cache.STORE_VERSION, "in": session_key, "part": part}
                cache.commit(tmp, meta, evicting=False)
            except BaseException:
                shutil.rmtree(tmp, ignore_errors=True)
                raise
        except (OSError, ValueError):
            continue


def cut(f: str, pointer: dict, pointer_dir: str) -> bool:
    """Write file f's own entry from the session's entry a pointer names; False when that entry
    is gone or is not what the pointer says (the caller reads the file)."""
    import msgspec

    from . import cache
    from .cache_check import Damaged, check_file, read_sums
    from .errors import TraceError

    name = str(pointer.get("in"))
    if len(name) != 32 or any(c not in "0123456789abcdef" for c in name):
        return False  # not an entry's name
    d = os.path.join(cache.cache_root(), name)
    try:
        with open(os.path.join(d, "meta.json"), "rb") as fh:
            smeta = msgspec.json.decode(fh.read())
        part = pointer["part"]
        check_file(pointer_dir, "part_names.npy", read_sums(pointer_dir))
        ids = np.load(os.path.join(pointer_dir, "part_names.npy"))
        # the session's entry as it was written (its other files may have changed since: the
        # part of this file, found by this file's identity, is still this file's)
        s = cache._read(d, smeta["key"], smeta["paths"])
        t = _part_trace(s, part, f, ids)
    except (Damaged, OSError, ValueError, KeyError, TypeError, IndexError, msgspec.DecodeError, TraceError):
        return False  # a big entry found damaged as its columns were read was removed: read the file
    return cache.store([f], t) is not None


def _part_trace(s: Trace, part: dict, f: str, ids: np.ndarray) -> Trace:
    """File f's session, as reading it alone makes it, from its part of session s (ids: the
    session's ids of the file's names, in the file's order)."""
    a, n = part["events"]
    lane_lo, n_lanes = part["lanes"]
    nn = len(ids)
    ids = ids.astype(np.int64)
    local = np.full(len(s.names), -1, np.int32)
    local[ids] = np.arange(nn, dtype=np.int32)
    cols = {name: np.array(s.columns[name][a : a + n]) for name in EVENT_COLUMNS}
    cols["lane"] -= np.int32(lane_lo)
    cols["name"] = local[cols["name"]]
    ia, inn = part["inst"]
    inst = {
        "t": np.array(s.instants["t"][ia : ia + inn]),
        "lane": np.array(s.instants["lane"][ia : ia + inn]) - np.int32(lane_lo),
        "name": local[np.asarray(s.instants["name"][ia : ia + inn])],
    }
    if (len(cols["name"]) and cols["name"].min() < 0) or (inn and inst["name"].min() < 0):
        raise ValueError("a name of the part is not among its names")
    fa, fn = part["flows"]
    flow_type = np.int32 if n < 2**31 else np.int64
    flows = tuple(np.asarray(x[fa : fa + fn], np.int64) - a for x in s.flows)
    r = part["rank"]
    old = next(i for i in s.ranks if i.rank == r)
    b = TraceBuilder(s.format)  # the lanes' order and the rank's devices, as a read of the file alone
    b.lanes = [
        Lane(r, ln.kind, ln.device, ln.stream, ln.label, 0, 0, ln.pid, ln.tid, ln.domain)
        for ln in s.lanes[lane_lo : lane_lo + n_lanes]
    ]
    b.ranks[r] = RankInfo(r, [f], list(old.devices), dict(old.device_props), old.host, 0, old.world_size)
    b.finish_tables()
    pf = dict(s.metadata["per_file"][part["source"]])
    pf["path"] = f
    metadata: dict = {}
    if part["process_groups"]:
        metadata["process_groups"] = [list(g) for g in part["process_groups"]]
    metadata["per_file"] = [pf]
    metadata["files"] = [os.path.abspath(f)]
    metadata["skipped_files"] = []
    offsets = np.asarray(s.lane_offsets[lane_lo : lane_lo + n_lanes + 1], np.int64)
    return Trace(
        format=s.format,
        columns=cols,
        names=[s.names[i] for i in ids],
        lanes=b.lanes,
        ranks=[b.ranks[r]],
        counters=[Counter(c.rank, c.device, c.name, np.array(c.t), np.array(c.v)) for c in s.counters if c.rank == r],
        steps=[st for st in s.steps if st.rank == r],
        flows=(flows[0].astype(flow_type), flows[1].astype(flow_type)),
        instants=inst,
        sources=[Source(**s.sources[part["source"]].__dict__)],
        warnings=list(part["warnings"]),
        metadata=metadata,
        lane_offsets=offsets - offsets[0],
    )
