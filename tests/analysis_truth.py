"""Independent reference numbers for the analysis tests (issue 11), read straight from the raw
files with the standard library (json, gzip, sqlite3) and numpy. Nothing here imports gpuviewer:
these are the numbers `gpuviewer analyze --json` is checked against.

Definitions (the ones issue 11 states):
- GPU op: a kernel, memcpy or memset on a GPU stream. Communication = NCCL kernels (name starts
  with "nccl"), compute = every other kernel; memcpy/memset count in busy, not in compute.
- Step of an op: the host step (Kineto "ProfilerStep#N" user_annotation, nsys NVTX "step N") whose
  range holds the start of the CUDA API call that launched it (same correlation id). An op with
  no launch on record takes the step of the previous linked op on its stream (streams are FIFO);
  before the first linked op of its stream it is in no step.
- GPU window of a step: first to last op of the step, started no earlier than the end of the
  previous step's window; the step's ops are clipped to it. busy/compute/comm are interval unions
  inside the window; idle = window - busy.
- Collectives: per process group, the n-th NCCL kernel of the group on each member rank (in start
  order) is one instance. last = latest start; wait(rank) = last - own start, capped at the own
  kernel's duration (a send or broadcast root can finish before its peer arrives); transfer =
  latest end - last; bytes = max(in, out) elements x dtype size; algbw = bytes / transfer; busbw = algbw x
  bus factor (all-reduce 2(n-1)/n, all-gather / reduce-scatter (n-1)/n, others 1).
"""

from __future__ import annotations

import ast
import os
import re
import sqlite3
from dataclasses import dataclass, field

import numpy as np

COMPUTE, COMM, MEMCPY, MEMSET = 0, 1, 2, 3
SHORT_GAP_NS = 100_000  # a launch gap as the launch-bound sentences define it: under 100 µs
GPU_CATS = {"kernel": None, "gpu_memcpy": MEMCPY, "gpu_memset": MEMSET}
DTYPE_BYTES = {
    "float": 4,
    "float32": 4,
    "bfloat16": 2,
    "half": 2,
    "float16": 2,
    "double": 8,
    "float64": 8,
    "int": 4,
    "int32": 4,
    "long": 8,
    "int64": 8,
    "byte": 1,
    "char": 1,
    "int8": 1,
    "uint8": 1,
    "bool": 1,
    "float8_e4m3fn": 1,
    "float8_e5m2": 1,
}
_PROFILER_STEP = re.compile(r"^ProfilerStep#(\d+)$")
_NVTX_STEP = re.compile(r"^step (\d+)$")


# -- intervals ---------------------------------------------------------------------------------


def union(s, e):
    """Disjoint sorted intervals covering [s_i, e_i)."""
    s = np.asarray(s, np.int64)
    e = np.asarray(e, np.int64)
    keep = e > s
    s, e = s[keep], e[keep]
    if not len(s):
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    o = np.argsort(s, kind="stable")
    s, e = s[o], e[o]
    run = np.maximum.accumulate(e)
    new = np.ones(len(s), bool)
    new[1:] = s[1:] > run[:-1]
    first = np.flatnonzero(new)
    return s[first], np.maximum.reduceat(e, first)


def gaps(intervals, w0, w1) -> list:
    """The parts of [w0, w1) that none of the intervals (sorted by start) cover, in order."""
    out = []
    reach = w0
    for a, b in intervals:
        if b <= w0 or a >= w1:
            continue
        if a > reach:
            out.append((reach, a))
        reach = max(reach, b)
    if reach < w1:
        out.append((reach, w1))
    return out


def length(iv) -> int:
    return int((iv[1] - iv[0]).sum())


def union_length(s, e) -> int:
    return length(union(s, e))


def intersect_length(a, b) -> int:
    """Length of the intersection of two unions (sweep)."""
    total, i, j = 0, 0, 0
    (as_, ae), (bs, be) = a, b
    while i < len(as_) and j < len(bs):
        lo, hi = max(as_[i], bs[j]), min(ae[i], be[j])
        if hi > lo:
            total += int(hi - lo)
        if ae[i] < be[j]:
            i += 1
        else:
            j += 1
    return total


# -- one rank's raw data -------------------------------------------------------------------------


@dataclass
class Rank:
    rank: int
    steps: list  # (step, host_start_ns, host_end_ns), by start
    start: np.ndarray  # GPU ops, ns
    end: np.ndarray
    kind: np.ndarray  # COMPUTE / COMM / MEMCPY / MEMSET
    stream: np.ndarray  # an integer per stream
    linked: np.ndarray  # has a launch record
    launch: np.ndarray  # launch call start (ns), meaningful where linked
    names: list
    coll: dict = field(default_factory=dict)  # op index -> collective args (NCCL kernels)
    step: np.ndarray | None = None  # step number of each op, -1: none
    launch_end: np.ndarray | None = None  # when the launch call returned (ns), meaningful where linked
    syncs: tuple | None = None  # the host's synchronize calls and synchronous cudaMemcpy, as union() intervals

    def attribute(self) -> None:
        n = len(self.start)
        step = np.full(n, -1, np.int64)
        hs = np.array([s[1] for s in self.steps], np.int64)
        he = np.array([s[2] for s in self.steps], np.int64)
        nums = np.array([s[0] for s in self.steps], np.int64)
        if len(hs):
            k = np.searchsorted(hs, self.launch, side="right") - 1
            ok = self.linked & (k >= 0)
            ok[ok] &= self.launch[ok] <= he[k[ok]]
            step[ok] = nums[k[ok]]
        # unlinked ops: the step of the previous linked op on the same stream
        order = np.lexsort((np.arange(n), self.start, self.stream))
        cur_stream, cur = None, -1
        for i in order.tolist():
            if self.stream[i] != cur_stream:
                cur_stream, cur = self.stream[i], -1
            if self.linked[i]:
                cur = step[i]
            else:
                step[i] = cur
        self.step = step


def _ns(us) -> int:
    return int(round(float(us) * 1000.0))


def queue_full_launches(events: list[dict]) -> list[dict]:
    """The launch calls (runtime or driver API, paired with a GPU op by correlation id) made while
    1,024 or more of the ops launched onto the same device before them had not started: CUDA's
    launch queue for that device was full, and the call waited for a slot. From one rank's raw
    Kineto events."""
    ops = {
        (e.get("args") or {}).get("correlation"): (e["ts"], (e.get("args") or {}).get("device"))
        for e in events
        if e.get("ph") == "X" and e.get("cat") in GPU_CATS and "correlation" in (e.get("args") or {})
    }
    by_device: dict = {}
    for e in events:
        if e.get("ph") == "X" and e.get("cat") in ("cuda_runtime", "cuda_driver"):
            op = ops.get((e.get("args") or {}).get("correlation"))
            if op is not None:
                by_device.setdefault(op[1], []).append(e)
    # ops launched before the capture began: no call on record, and on their stream ahead of its
    # first op whose call is; they too wait in the queue until they start
    called = {(e.get("args") or {}).get("correlation") for c in by_device.values() for e in c}
    gpu = [e for e in events if e.get("ph") == "X" and e.get("cat") in GPU_CATS]
    first: dict = {}
    for e in gpu:
        a = e.get("args") or {}
        if a.get("correlation") in called:
            k = (a.get("device"), a.get("stream"))
            first[k] = min(first.get(k, e["ts"]), e["ts"])
    early: dict = {}
    for e in gpu:
        a = e.get("args") or {}
        k = (a.get("device"), a.get("stream"))
        if a.get("correlation") not in called and k in first and e["ts"] < first[k]:
            early.setdefault(a.get("device"), []).append(e["ts"])
    out = []
    for dev, calls in by_device.items():
        calls.sort(key=lambda e: e["ts"])
        began = sorted(ops[e["args"]["correlation"]][0] for e in calls)
        before = sorted(early.get(dev, []))
        j = m = 0
        for i, e in enumerate(calls):
            while j < len(began) and began[j] <= e["ts"]:
                j += 1
            while m < len(before) and before[m] <= e["ts"]:
                m += 1
            # launched before this call (in the capture or before it) and not started when it was made
            if i - j + len(before) - m >= 1024:
                out.append(e)
    return out


def load_json(path):
    from kineto_truth import load_json as events_and_meta

    events, meta = events_and_meta(path)
    return dict(meta, traceEvents=events)


def kineto_rank(path: str, fallback_rank: int = 0) -> Rank:
    doc = load_json(path)
    events = doc["traceEvents"] if isinstance(doc, dict) else doc
    meta = doc if isinstance(doc, dict) else {}
    dist = meta.get("distributedInfo") or {}
    rank = int(dist["rank"]) if isinstance(dist.get("rank"), int) else fallback_rank
    steps, launches = {}, {}
    ops, syncs = [], []
    for e in events:
        if e.get("ph") != "X":
            continue
        cat = e.get("cat")
        if cat == "user_annotation":
            m = _PROFILER_STEP.match(str(e.get("name", "")))
            if m and int(m.group(1)) not in steps:
                s = _ns(e["ts"])
                steps[int(m.group(1))] = (int(m.group(1)), s, s + _ns(e["dur"]))
        elif cat in ("cuda_runtime", "cuda_driver"):
            if "Synchronize" in str(e.get("name")) or e.get("name") == "cudaMemcpy":
                syncs.append((_ns(e["ts"]), _ns(e["ts"]) + _ns(e.get("dur", 0))))
            c = (e.get("args") or {}).get("correlation")
            if c is not None and c not in launches:
                launches[c] = (_ns(e["ts"]), _ns(e["ts"]) + _ns(e.get("dur", 0)))
        elif cat in GPU_CATS:
            ops.append(e)
    streams: dict = {}
    n = len(ops)
    start = np.zeros(n, np.int64)
    end = np.zeros(n, np.int64)
    kind = np.zeros(n, np.int8)
    stream = np.zeros(n, np.int64)
    linked = np.zeros(n, bool)
    launch = np.zeros(n, np.int64)
    launch_end = np.zeros(n, np.int64)
    names, coll = [], {}
    for i, e in enumerate(ops):
        name = str(e.get("name", ""))
        args = e.get("args") or {}
        start[i] = _ns(e["ts"])
        end[i] = start[i] + _ns(e.get("dur", 0))
        k = GPU_CATS[e["cat"]]
        if k is None:
            k = COMM if name.startswith("nccl") else COMPUTE
        kind[i] = k
        stream[i] = streams.setdefault((e.get("pid"), e.get("tid")), len(streams))
        c = args.get("correlation")
        if c in launches:
            linked[i] = True
            launch[i], launch_end[i] = launches[c]
        names.append(name)
        if k == COMM and "Process Group Name" in args:
            coll[i] = {
                "group": str(args["Process Group Name"]),
                "name": str(args.get("Collective name", "")),
                "in": int(args.get("In msg nelems") or 0),
                "out": int(args.get("Out msg nelems") or 0),
                "dtype": str(args.get("dtype", "")),
                "size": int(args.get("Group size") or 0),
                "members": _members(args.get("Process Group Ranks")),
                "peer": args.get("Dst Rank", args.get("Src Rank")),
            }
    r = Rank(rank, sorted(steps.values(), key=lambda s: s[1]), start, end, kind, stream, linked, launch, names, coll)
    r.launch_end = launch_end
    r.syncs = union([x[0] for x in syncs], [x[1] for x in syncs])
    r.attribute()
    return r


def _members(v):
    if isinstance(v, list):
        return [int(x) for x in v]
    try:
        return [int(x) for x in ast.literal_eval(str(v))]
    except (ValueError, SyntaxError, TypeError):
        return None


def kineto_files(path: str) -> list[str]:
    if os.path.isdir(path):
        return sorted(os.path.join(path, f) for f in os.listdir(path) if f.endswith((".json", ".json.gz")))
    return [path]


def kineto(path: str) -> list[Rank]:
    ranks = [kineto_rank(f, i) for i, f in enumerate(kineto_files(path))]
    return sorted(ranks, key=lambda r: r.rank)


def nsys(path: str) -> list[Rank]:
    """Ranks of an Nsight Systems export: processes with GPU work, in device order."""
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        tables = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        strings = dict(db.execute("SELECT id, value FROM StringIds")) if "StringIds" in tables else {}
        rows = []  # (pid, device, stream, start, end, corr, kind, name)
        if "CUPTI_ACTIVITY_KIND_KERNEL" in tables:
            for s, e, d, st, c, gp, nm in db.execute(
                "SELECT start, end, deviceId, streamId, correlationId, globalPid, shortName "
                "FROM CUPTI_ACTIVITY_KIND_KERNEL"
            ):
                name = strings.get(nm, "")
                rows.append((gp >> 24 & 0xFFFFFF, d, st, s, e, c, COMM if name.startswith("nccl") else COMPUTE, name))
        for table, k in (("CUPTI_ACTIVITY_KIND_MEMCPY", MEMCPY), ("CUPTI_ACTIVITY_KIND_MEMSET", MEMSET)):
            if table in tables:
                for s, e, d, st, c, gp in db.execute(
                    f"SELECT start, end, deviceId, streamId, correlationId, globalPid FROM {table}"
                ):
                    rows.append((gp >> 24 & 0xFFFFFF, d, st, s, e, c, k, table[21:].lower()))
        launches = {}
        for s, e, c, gt in db.execute("SELECT start, end, correlationId, globalTid FROM CUPTI_ACTIVITY_KIND_RUNTIME"):
            launches.setdefault((gt >> 24 & 0xFFFFFF, c), (s, e))
        steps: dict = {}
        if "NVTX_EVENTS" in tables:
            for s, e, text, tid, g in db.execute(
                "SELECT start, end, text, textId, globalTid FROM NVTX_EVENTS WHERE end IS NOT NULL ORDER BY start"
            ):
                m = _NVTX_STEP.match(str(text if text is not None else strings.get(tid, "")))
                if m:
                    steps.setdefault(g >> 24 & 0xFFFFFF, {}).setdefault(int(m.group(1)), (int(m.group(1)), s, e))
    finally:
        db.close()
    devs: dict = {}
    for r in rows:
        devs.setdefault(r[0], set()).add(r[1])
    procs = sorted(devs, key=lambda p: (min(devs[p]), p))
    out = []
    for rank, p in enumerate(procs):
        mine = [r for r in rows if r[0] == p]
        n = len(mine)
        streams: dict = {}
        rk = Rank(
            rank,
            sorted(steps.get(p, {}).values(), key=lambda s: s[1]),
            np.array([r[3] for r in mine], np.int64),
            np.array([r[4] for r in mine], np.int64),
            np.array([r[6] for r in mine], np.int8),
            np.array([streams.setdefault((r[1], r[2]), len(streams)) for r in mine], np.int64),
            np.array([(p, r[5]) in launches for r in mine], bool),
            np.array([launches.get((p, r[5]), (0, 0))[0] for r in mine], np.int64),
            [r[7] for r in mine],
        )
        rk.launch_end = np.array([launches.get((p, r[5]), (0, 0))[1] for r in mine], np.int64)
        # nsys has no process-group args: one group per job, the kernel name is the collective
        for i in range(n):
            if rk.kind[i] == COMM:
                rk.coll[i] = {
                    "group": "nccl",
                    "name": rk.names[i],
                    "in": 0,
                    "out": 0,
                    "dtype": "",
                    "size": len(procs),
                    "members": list(range(len(procs))),
                    "peer": None,
                }
        rk.attribute()
        out.append(rk)
    return out


_LOADED: dict = {}


def load(path: str) -> list[Rank]:
    """The file's or folder's ranks, read once per test process: many tests' references come from
    the same shared traces, whose JSON decoding is most of their time (fsdp's: 0.5 s a rank). The
    ranks are read, never changed, by the tests (a new list each call; the same Rank objects)."""
    st = os.stat(path)
    key = (os.path.realpath(path), st.st_mtime_ns, st.st_size)
    if key not in _LOADED:
        _LOADED[key] = nsys(path) if path.endswith(".sqlite") else kineto(path)
    return list(_LOADED[key])


# -- per-step breakdown ------------------------------------------------------------------------


def step_breakdown(r: Rank) -> list[dict]:
    """Per step of the rank (in step order, steps with GPU ops only): GPU window and the times."""
    out = []
    prev_end = None
    for num in sorted({int(s) for s in r.step.tolist() if s >= 0}):
        m = r.step == num
        w0, w1 = int(r.start[m].min()), int(r.end[m].max())
        if prev_end is not None:
            w0 = max(w0, prev_end)
        w1 = max(w1, w0)
        # what fills the window: every GPU op of the rank inside it, of this step or another (the
        # next step's work already running there is busy time, not idle)
        s, e, k = np.clip(r.start, w0, w1), np.clip(r.end, w0, w1), r.kind
        busy = union(s, e)
        comp = union(s[k == COMPUTE], e[k == COMPUTE])
        comm = union(s[k == COMM], e[k == COMM])
        host = next((h for h in r.steps if h[0] == num), (num, 0, 0))
        d = {
            "step": num,
            "start_ns": w0,
            "end_ns": w1,
            "window_ns": w1 - w0,
            "host_start_ns": host[1],
            "host_end_ns": host[2],
            "busy_ns": length(busy),
            "compute_ns": length(comp),
            "comm_ns": length(comm),
            "memcpy_ns": union_length(s[k >= MEMCPY], e[k >= MEMCPY]),
            "overlap_ns": intersect_length(comp, comm),
            "ops": int(m.sum()),
        }
        d["idle_ns"] = d["window_ns"] - d["busy_ns"]
        out.append(d)
        prev_end = w1
    return out


def total_busy(r: Rank) -> int:
    """Union of all the rank's GPU ops, in or out of a step."""
    return union_length(r.start, r.end)


# -- collectives across ranks ------------------------------------------------------------------


@dataclass
class Instance:
    group: str
    name: str  # the collective name of the lowest member rank (send/recv pairs differ)
    ranks: list
    starts: list
    ends: list
    steps: list  # each rank's own step for its kernel
    bytes: int
    size: int

    @property
    def last(self) -> int:
        return max(self.starts)

    @property
    def last_rank(self) -> int:
        return self.ranks[int(np.argmax(self.starts))]

    def wait(self, rank) -> int:
        """last arrival - own arrival, at most the own kernel's duration: a rank whose kernel has
        ended waits no more. Of the two ranks of a send/recv pair or a broadcast, the one whose
        kernel ended by the other's arrival was the sender (an eager send, the root: kineto/pp,
        nsys_ddp) and did not wait at all: it wrote into the receiver's buffers; an all-reduce's
        member cannot end before the others arrive."""
        k = self.ranks.index(rank)
        s = re.sub(r"[^a-z]", "", self.name.lower())
        sender = (
            "broadcast" in s
            or "send" in s
            or "recv" in s
            or ("reduce" in s and "allreduce" not in s and "scatter" not in s)
        )
        if sender and len(self.ranks) == 2 and self.ends[k] <= self.last:
            return 0
        return max(0, min(self.last, self.ends[k]) - self.starts[k])

    @property
    def transfer(self) -> int:
        return max(0, max(self.ends) - self.last)


def bus_factor(name: str, n: int) -> float:
    s = name.lower().replace("_", "")
    if "allreduce" in s:
        return 2 * (n - 1) / n
    if "allgather" in s or "reducescatter" in s:
        return (n - 1) / n
    return 1.0


def match(ranks: list[Rank]) -> list[Instance]:
    """The n-th NCCL kernel of a process group on each member rank is one instance. Raises if the
    matched kernels disagree on their collective (a misaligned match)."""
    by = {r.rank: r for r in ranks}
    per: dict = {}  # group -> rank -> op indices in start order
    for r in ranks:
        idx = sorted(r.coll, key=lambda i: (r.start[i], i))
        for i in idx:
            per.setdefault(r.coll[i]["group"], {}).setdefault(r.rank, []).append(i)
    out = []
    for group, rk in per.items():
        members = sorted(rk)
        if len(members) < 2:
            continue
        n = min(len(v) for v in rk.values())
        for j in range(n):
            ops = [(m, rk[m][j]) for m in members]
            cs = [by[m].coll[i] for m, i in ops]
            names = {c["name"] for c in cs}
            if names <= {"send", "recv"} and names:
                assert names == {"send", "recv"}, f"p2p instance {j} of group {group} is not a send/recv pair"
            else:
                assert len(names) == 1, f"instance {j} of group {group}: {names}"
                assert len({(c["in"], c["out"]) for c in cs}) == 1, f"instance {j} of group {group}: sizes differ"
            c0 = cs[0]
            nb = DTYPE_BYTES.get(c0["dtype"].lower(), 0) * max(c0["in"], c0["out"])
            out.append(
                Instance(
                    group,
                    c0["name"],
                    members,
                    [int(by[m].start[i]) for m, i in ops],
                    [int(by[m].end[i]) for m, i in ops],
                    [int(by[m].step[i]) for m, i in ops],
                    nb,
                    c0["size"] or len(members),
                )
            )
    return out


def step_waits(instances: list[Instance]) -> dict:
    """{step: {"wait": {rank: ns}, "caused": {rank: ns}, "late_rank": rank}}. A rank's wait goes to
    the step its own kernel is in; the wait a rank caused goes to the step of the late kernel."""
    out: dict = {}
    for ins in instances:
        for r, st in zip(ins.ranks, ins.steps):
            if st >= 0:
                w = out.setdefault(st, {"wait": {}, "caused": {}})["wait"]
                w[r] = w.get(r, 0) + ins.wait(r)
        late = ins.last_rank
        st = ins.steps[ins.ranks.index(late)]
        if st >= 0:
            c = out.setdefault(st, {"wait": {}, "caused": {}})["caused"]
            c[late] = c.get(late, 0) + sum(ins.wait(r) for r in ins.ranks if r != late)
    for st, d in out.items():
        d["late_rank"] = max(d["caused"], key=d["caused"].get) if d["caused"] else None
    return out


def collective_bw(instances: list[Instance]) -> dict:
    """Per (group, name): count, total bytes, total transfer ns, algbw and busbw in GB/s (total
    bytes / total transfer time), and the mean of the per-instance busbw."""
    out: dict = {}
    for ins in instances:
        d = out.setdefault((ins.group, ins.name), {"count": 0, "bytes": 0, "transfer_ns": 0, "bw": []})
        d["count"] += 1
        d["bytes"] += ins.bytes
        d["transfer_ns"] += ins.transfer
        if ins.transfer > 0:
            d["bw"].append(ins.bytes / ins.transfer * bus_factor(ins.name, ins.size))
        d["size"] = ins.size
    for (g, name), d in out.items():
        d["algbw_gbps"] = d["bytes"] / d["transfer_ns"] if d["transfer_ns"] else 0.0  # bytes/ns == GB/s
        d["busbw_gbps"] = d["algbw_gbps"] * bus_factor(name, d["size"])
        d["mean_busbw_gbps"] = float(np.mean(d["bw"])) if d["bw"] else 0.0
        del d["bw"]
    return out


def nsys_strings(path: str) -> list[str]:
    """Every string an Nsight Systems export holds (its StringIds table: kernel, NVTX and API names),
    read with sqlite3."""
    import sqlite3

    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return [v for (v,) in db.execute("SELECT value FROM StringIds")]
    finally:
        db.close()


def nsys_kernel_names(path: str, column: str = "shortName") -> list[str]:
    """Every kernel's name (shortName or demangledName), one per kernel run, from an Nsight Systems
    export read with sqlite3."""
    import sqlite3

    assert column in ("shortName", "demangledName")
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        q = f"SELECT s.value FROM CUPTI_ACTIVITY_KIND_KERNEL k JOIN StringIds s ON s.id = k.{column}"
        return [n for (n,) in db.execute(q)]
    finally:
        db.close()
