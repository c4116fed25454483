"""Collectives matched across ranks.

NCCL runs a process group's collectives in the order they were issued, on every member rank, so
the n-th collective of a group in step s is one collective on all its ranks. The group comes
from the kernel's arguments (PyTorch profiler: 'Process Group Name'); without them, from the
order in which the rank's NCCL streams first appear. For one instance: every rank's arrival (its
kernel start), the last arrival, each rank's wait (Instance.waits: last arrival - its arrival,
never past its kernel's end, none for a two-member sender done before the other came), the
transfer (last arrival to the end of the last kernel), bytes, algorithm and bus bandwidth with NCCL's bus
factors (nccl-tests' PERFORMANCE.md). Point-to-point transfers are paired the same way (the n-th
send from rank a to rank b in a step with b's n-th receive from a) when the producer recorded the
peer; they are waits like any other, but late ranks are judged on collectives only (in a pipeline
the waits at sends and receives are its bubble).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import numpy as np

from ..model.categories import Cat
from ..model.trace import Trace
from .breakdown import RankBreakdown, launch_calls, launch_times
from .pairing import end_offsets, ends_agree, lined_up, repaired

_KERNEL_COLL = re.compile(r"nccl(?:Dev)?Kernel_([A-Za-z]+?)(?:_|\(|$)")
# A dtype's size as producers spell it (Kineto: "Float", "BFloat16"; torch.float32; XLA: f32).
# The one table: the topology's bytes per rank read it too.
_DTYPE_BYTES = {
    "float": 4,
    "float32": 4,
    "f32": 4,
    "half": 2,
    "float16": 2,
    "f16": 2,
    "bfloat16": 2,
    "bf16": 2,
    "double": 8,
    "float64": 8,
    "int": 4,
    "int32": 4,
    "long": 8,
    "int64": 8,
    "byte": 1,
    "uint8": 1,
    "char": 1,
    "int8": 1,
    "bool": 1,
    "float8_e4m3fn": 1,
    "float8_e5m2": 1,
}
P2P = {"Send", "Recv", "SendRecv"}  # paired sender to receiver, under the kind "SendRecv"
P2P_UNKNOWN = "p2p, peer not on record, stream"
# the step keys of collectives outside every step, before the first (DDP's first broadcasts, the
# tail of a step that ran before the capture began) and after the last: matched across ranks as
# the steps' are, kept apart from them (Collectives.outside)
OUTSIDE_BEFORE, OUTSIDE_AFTER = -2, -3
OUTSIDE_STEPS = (OUTSIDE_BEFORE, OUTSIDE_AFTER)


_NCCL_OP = re.compile(r"^nccl:(\w+)")  # PyTorch's 'nccl:all_to_all', nsys's NVTX 'nccl:all_to_all, op_id = 5'
# a peerless group whose transfers a collective issued (peerless_group's "(nccl:all_to_all)")
_COLLECTIVE_ISSUER = re.compile(r"\(nccl:(?!send|recv|batch|p2p|coalesced)\w+\)$")


def p2p_issuers(trace: Trace, ops: np.ndarray) -> list[str]:
    """Per kernel: the collective of the host op around its launch call ('nccl:all_to_all'), '' where
    none is on record. NCCL runs all-to-alls, and in some versions all-reduces and all-gathers, as
    SendRecv kernels with no peer on record: issued in different orders on two ranks (HTA's
    trace_filter), they are paired by their collective, not across collectives (an all-to-all's
    kernel beside an all-reduce's made a 130 ms wait of a 44 ms one)."""
    from ..model.categories import LaneKind

    out = [""] * len(ops)
    if not len(ops):
        return out
    calls = launch_calls(trace, ops)
    c = trace.columns
    lane_of = np.asarray(c["lane"])

    def thread(x: int) -> tuple[int, int]:
        ln = trace.lanes[int(lane_of[x])]
        return ln.pid, ln.stream

    threads = {thread(x) for x in calls.tolist() if x >= 0}
    spans: dict[tuple[int, int], list[tuple[int, int, str]]] = {}  # per thread: its nccl:* ops
    for i, ln in enumerate(trace.lanes):
        if ln.kind in (LaneKind.CPU, LaneKind.NVTX) and (ln.pid, ln.thread) in threads:
            sl = trace.lane_slice(i)
            nm = np.asarray(c["name"][sl])
            for k in np.flatnonzero(np.isin(nm, _nccl_op_ids(trace))).tolist():
                st = int(c["start"][sl.start + k])
                m = _NCCL_OP.match(trace.names[int(nm[k])])
                assert m is not None
                spans.setdefault((ln.pid, ln.thread), []).append(
                    (st, st + int(c["dur"][sl.start + k]), f"nccl:{m.group(1)}")
                )
    for j, x in enumerate(calls.tolist()):
        if x < 0:
            continue
        t = int(c["start"][x])
        around = [sp for sp in spans.get(thread(x), []) if sp[0] <= t < sp[1]]
        if around:
            out[j] = max(around, key=lambda sp: sp[0])[2]  # the innermost
    return out


def stream_group(stream_no: int) -> str:
    """The group of collectives with none on record: the rank's NCCL stream, numbered from 1 in
    order of first use (the same on every rank of a job); it read as CUDA's default stream as
    'stream #0'."""
    return f"NCCL stream #{stream_no + 1} (in order of first use)"


def p2p_group(kind: str, rank: int, peer: int) -> str:
    """The group a send or receive with its peer on record is matched in: its transfer's direction
    ("p2p 0->1" for rank 0's send to 1 and 1's receive from 0). rank_comm and the NCCL report's
    kernel table key them alike."""
    pair = (rank, peer) if kind == "Send" else (peer, rank)
    return f"p2p {pair[0]}->{pair[1]}"


def world_of(sizes) -> int | None:
    """The job's size from its ranks' recorded world sizes (None where none is recorded)."""
    return max((s or 0 for s in sizes), default=0) or None


def peerless_group(stream_no: int, issuer: str = "") -> str:
    """The group a transfer without a peer on record is matched in: its rank's NCCL stream (in
    order of first use), and the collective around its launch where one is on record
    (p2p_issuers). rank_comm and the SQL collectives table key them alike."""
    return f"{P2P_UNKNOWN} #{stream_no}" + (f" ({issuer})" if issuer else "")


def _nccl_op_ids(trace: Trace) -> np.ndarray:
    got = trace.derived.get("nccl_op_ids")
    if got is None:
        got = trace.derived["nccl_op_ids"] = np.array(
            [i for i, n in enumerate(trace.names) if _NCCL_OP.match(n)], np.int64
        )
    return got


def p2p_peer(kind: str, a: dict) -> int | None:
    """The other rank of a point-to-point transfer, where recorded: a send's destination, a
    receive's source; None for a SendRecv (an all-to-all's grouped kernel) or a transfer without
    one (nsys exports), which rank_comm keys by stream as P2P_UNKNOWN."""
    if kind == "SendRecv":
        return None
    return arg_int(a.get("dst_rank") if kind == "Send" else a.get("src_rank"))


def collective_kind(arg_name: str | None, kernel_name: str) -> str:
    """A canonical name: AllReduce, AllGather, ReduceScatter, Broadcast, Reduce, AllToAll,
    Send, Recv, SendRecv (or the producer's own word when it is none of those)."""
    for raw in (arg_name, kernel_name):
        if not raw:
            continue
        s = re.sub(r"[^a-z]", "", raw.lower())
        for key, name in (
            ("allreduce", "AllReduce"),
            ("allgather", "AllGather"),
            ("reducescatter", "ReduceScatter"),
            ("alltoall", "AllToAll"),
            ("broadcast", "Broadcast"),
            ("sendrecv", "SendRecv"),
            ("send", "Send"),
            ("recv", "Recv"),
            ("reduce", "Reduce"),
        ):
            if key in s:
                return name
    m = _KERNEL_COLL.search(kernel_name)
    return m.group(1) if m else kernel_name.split("(")[0]


def bus_factor(kind: str, n: int) -> float:
    if n < 2:
        return 1.0
    if kind == "AllReduce":
        return 2 * (n - 1) / n
    if kind in ("AllGather", "ReduceScatter", "AllToAll"):
        return (n - 1) / n
    return 1.0


def arg_int(v) -> int | None:
    try:
        x = int(v)
    except (TypeError, ValueError, OverflowError):
        return None
    return x if 0 <= x < 1 << 62 else None


def dtype_size(dtype) -> int | None:
    """Bytes of one element of a recorded dtype ("Float", "torch.bfloat16", "f16", ...); None when
    the name is not known."""
    return _DTYPE_BYTES.get(str(dtype if dtype is not None else "").lower().replace("torch.", ""))


def arg_nbytes(a: dict, nelems: int) -> int | None:
    """Elements x the dtype's size, when both are on record."""
    size = dtype_size(a.get("dtype"))
    return nelems * size if nelems and size else None


@dataclass
class Instance:
    group: str
    kind: str
    step: int
    order: int
    ranks: list[int]
    idx: np.ndarray  # event index per member rank
    starts: np.ndarray
    ends: np.ndarray
    bytes: int | None
    # per member, from its rank's map (no trace needed later): when the host launched the
    # kernel, whether that launch is on record, and the kernel's step as attributed
    launch: np.ndarray | None = None
    linked: np.ndarray | None = None
    op_step: np.ndarray | None = None

    @property
    def last(self) -> int:
        return int(self.starts.max())

    @property
    def late_rank(self) -> int:
        return self.ranks[int(np.argmax(self.starts))]

    def waits(self) -> np.ndarray:
        """Per member: last arrival - its arrival, never past its own kernel's end. Of two members
        of a broadcast, a reduce or a send/receive pair, the sender can put a small message into
        the receiver's buffers and finish before the receiver arrives: one whose kernel ended by
        the other's arrival was that sender and waited for nothing (with more members the one
        that ended early may be a receiver that waited for the root: the root is not on record).
        No member of an all-reduce, all-gather or all-to-all can finish before all have arrived:
        one that seems to has its clock off by that much, and spent its kernel waiting."""
        waited = np.minimum(self.last, self.ends) - np.minimum(self.starts, self.ends)
        if self.rooted and len(self.ranks) == 2:
            return np.where(self.ends <= self.last, 0, waited)
        return waited

    @property
    def step_no(self) -> int | None:
        """The step it belongs to, None for one outside every step."""
        return None if self.step in OUTSIDE_STEPS else self.step

    @property
    def rooted(self) -> bool:
        """One member sends what others receive (a broadcast, a reduce, a send/receive pair); not
        the SendRecv kernels a collective runs (an all-to-all's: every member sends and receives)."""
        return self.kind in ("Broadcast", "Reduce") or (
            self.kind == "SendRecv" and not _COLLECTIVE_ISSUER.search(self.group)
        )

    @property
    def transfer_ns(self) -> int:
        return max(0, int(self.ends.max()) - self.last)


@dataclass
class Collectives:
    instances: list[Instance] = field(default_factory=list)
    ranks: list[int] = field(default_factory=list)
    unmatched: int = 0  # kernels whose counterpart on another rank was not found
    # instances launched outside every step: no step's figures count them; the NCCL report, the
    # SQL table and the window's details do
    outside: list[Instance] = field(default_factory=list)
    # per rank, its kernels in steps matched with no other rank's: (start, end, step as
    # attributed); their wait is not told apart from their transfer (breakdown.split_wait)
    unmatched_rows: dict[int, list[tuple[int, int, int]]] = field(default_factory=dict)

    def collectives_only(self) -> Collectives:
        return Collectives(
            [i for i in self.instances if i.kind != "SendRecv"], self.ranks, self.unmatched, [], self.unmatched_rows
        )

    def per_step(self) -> dict[int, dict]:
        """step -> {"wait": {rank: ns}, "caused": {rank: ns summed over the ranks that waited},
        "caused_each": {rank: ns per rank that waited}, "n": instances}."""
        out: dict[int, dict] = {}
        for ins in self.instances:
            d = out.setdefault(
                ins.step,
                {
                    "wait": {r: 0 for r in self.ranks},
                    "caused": {r: 0 for r in self.ranks},
                    "caused_each": {r: 0 for r in self.ranks},
                    "n": 0,
                },
            )
            w = ins.waits()
            for r, x in zip(ins.ranks, w.tolist()):
                d["wait"][r] = d["wait"].get(r, 0) + int(x)
            d["caused"][ins.late_rank] = d["caused"].get(ins.late_rank, 0) + int(w.sum())
            # per member that waited for it (a subgroup's collective: only its members)
            d["caused_each"][ins.late_rank] = d["caused_each"].get(ins.late_rank, 0) + int(w.sum()) // max(
                1, len(ins.ranks) - 1
            )
            d["n"] += 1
        return out

    def per_kernel(self) -> dict[int, dict]:
        """Event index -> its instance: wait and transfer on this rank, bytes, busbw, the late
        rank (for the window's details and its wait/transfer drawing); "step" None for one
        launched outside every step."""
        out = {}
        for ins in self.instances + self.outside:
            n = len(ins.ranks)
            algbw = ins.bytes / ins.transfer_ns if ins.bytes and ins.transfer_ns > 0 else None
            waits = ins.waits()
            for k, (r, i) in enumerate(zip(ins.ranks, ins.idx.tolist())):
                w = int(waits[k])
                out[i] = {
                    "collective": ins.kind,
                    "group": ins.group,
                    "order": ins.order,
                    "step": ins.step_no,
                    "ranks": n,
                    "wait_ns": w,
                    "wait_end_ns": int(ins.starts[k]) + w,
                    "transfer_ns": max(0, int(ins.ends[k]) - int(ins.starts[k]) - w),
                    "bytes": ins.bytes,
                    "late_rank": ins.late_rank,
                    "algbw_gbps": algbw,
                    "busbw_gbps": algbw * bus_factor(ins.kind, n) if algbw else None,
                }
        return out

    def summary(self) -> list[dict]:
        """Per group and collective: count, bytes, mean transfer, algbw/busbw, mean wait per rank."""
        groups: dict[tuple[str, str], list[Instance]] = {}
        for ins in self.instances:
            groups.setdefault((ins.group, ins.kind), []).append(ins)
        rows = []
        for (g, kind), inss in sorted(groups.items()):
            tr = np.array([i.transfer_ns for i in inss], np.float64)
            by = [i.bytes for i in inss if i.bytes]
            n = max(len(i.ranks) for i in inss)
            total_bytes = sum(i.bytes for i in inss if i.bytes and i.transfer_ns > 0)
            total_t = sum(i.transfer_ns for i in inss if i.bytes and i.transfer_ns > 0)
            algbw = total_bytes / total_t if total_t else None  # bytes/ns = GB/s
            waits: dict[int, list[int]] = {}
            for i in inss:
                for r, w in zip(i.ranks, i.waits().tolist()):
                    waits.setdefault(r, []).append(w)
            rows.append(
                {
                    "group": g,
                    "name": kind,
                    "count": len(inss),
                    "ranks": n,
                    "bytes": typical_bytes(by),
                    "transfer_ms": round(float(tr.mean()) / 1e6, 4),
                    "algbw_gbps": round(algbw, 3) if algbw else None,
                    "busbw_gbps": round(algbw * bus_factor(kind, n), 3) if algbw else None,
                    "wait_ms": {str(r): round(float(np.mean(w)) / 1e6, 4) for r, w in sorted(waits.items())},
                    "late_count": {str(r): sum(1 for i in inss if i.late_rank == r) for r in sorted(waits)},
                }
            )
        return rows


def arg_group(a: dict) -> str | None:
    """The process group a kernel's arguments name ("0 (default_pg)"), None when not on record."""
    if a.get("group") is None:
        return None
    group = str(a["group"])
    return f"{group} ({a['group_desc']})" if a.get("group_desc") else group


def rank_comm(trace: Trace, rb: RankBreakdown, args: dict[int, dict]) -> dict[tuple, list[tuple]]:
    """The rank's collective arrivals, its part of the map: (group, step) -> [(start, end, idx,
    kind, bytes, launch, linked, op_step)] in issue order, step OUTSIDE_BEFORE or OUTSIDE_AFTER
    for those outside every step (before its first step's start or after); send/recv keyed by
    their pair (p2p_group: "p2p a->b") when the peer is on record. idx is the event index in
    `trace` (only the window uses it, to find a kernel's collective)."""
    if rb.ops is None or not len(rb.ops):
        return {}
    c = trace.columns
    cat = np.asarray(c["cat"][rb.ops])
    m = cat == Cat.COMM_KERNEL
    assert rb.op_step is not None  # breakdown sets op_step with ops
    ops, steps = rb.ops[m], rb.op_step[m]
    start = np.asarray(c["start"][ops]).astype(np.int64)
    end = start + np.asarray(c["dur"][ops]).astype(np.int64)
    lane = np.asarray(c["lane"][ops])
    launch, linked = launch_times(trace, ops)
    raw_step = steps
    o = np.argsort(start, kind="stable")
    lane_rank: dict[int, int] = {}  # fallback group: order of first use of each NCCL stream
    out: dict[tuple, list[tuple]] = {}
    kinds = [collective_kind(args.get(int(i), {}).get("collective"), trace.names[int(c["name"][int(i)])]) for i in ops]
    # the collective around each peerless transfer's launch, looked up once
    unknown = [j for j, k in enumerate(kinds) if k in P2P and p2p_peer(k, args.get(int(ops[j]), {})) is None]
    issuer = dict(zip(unknown, p2p_issuers(trace, ops[unknown]))) if unknown else {}
    if not rb.steps or rb.steps[0].step is None:  # no steps: one window, every op in "step 0"
        steps = np.zeros(len(steps), np.int64)
    # the steps' ops first: streams are numbered by first use among them, as every rank's steps
    # hold the same collectives (what a rank's capture holds before its first step may differ)
    inside = steps[o] >= 0
    first = min((sb.start_ns for sb in rb.steps), default=0)
    for j in np.concatenate([o[inside], o[~inside]]).tolist():
        step = int(steps[j]) if steps[j] >= 0 else OUTSIDE_BEFORE if start[j] < first else OUTSIDE_AFTER
        i = int(ops[j])
        a = args.get(i, {})
        kind = kinds[j]
        if kind in P2P:
            # a send pairs with the peer's receive: the n-th transfer from a to b in a step
            peer = p2p_peer(kind, a)
            nel = arg_int(a.get("in_nelems")) or arg_int(a.get("out_nelems")) or 0
            if peer is None:
                # no peer on record (nsys exports, an all-to-all's grouped SendRecv kernels): kept
                # in issue order per stream; match_arrivals pairs them where two ranks alone have them
                # paired by its collective too: two ranks may issue them in other orders
                key = peerless_group(lane_rank.setdefault(int(lane[j]), len(lane_rank)), issuer.get(j, ""))
            else:
                key = p2p_group(kind, rb.rank, peer)
            out.setdefault((key, step), []).append(
                (
                    int(start[j]),
                    int(end[j]),
                    i,
                    "SendRecv",
                    arg_nbytes(a, nel),
                    int(launch[j]),
                    bool(linked[j]),
                    int(raw_step[j]),
                )
            )
            continue
        group = arg_group(a)
        if group is None:
            group = stream_group(lane_rank.setdefault(int(lane[j]), len(lane_rank)))
        nel = max(arg_int(a.get("in_nelems")) or 0, arg_int(a.get("out_nelems")) or 0)
        out.setdefault((group, step), []).append(
            (int(start[j]), int(end[j]), i, kind, arg_nbytes(a, nel), int(launch[j]), bool(linked[j]), int(raw_step[j]))
        )
    return out


def match(trace: Trace, rbs: list[RankBreakdown], args: dict[int, dict] | None = None) -> Collectives:
    if len(rbs) < 2:
        return Collectives(ranks=[rb.rank for rb in rbs])
    args = args or {}
    world = world_of(getattr(ri, "world_size", None) for ri in trace.ranks)
    return match_arrivals({rb.rank: rank_comm(trace, rb, args) for rb in rbs}, [rb.rank for rb in rbs], world)


def match_arrivals(
    per_rank: dict[int, dict[tuple, list[tuple]]], ranks: list[int], world: int | None = None
) -> Collectives:
    """The reduce's matching: every rank's arrivals (rank_comm) -> collective instances. world:
    the job's size where its traces record it (a session may hold some of its ranks). Paired by
    position in each group and step, then checked (pairing.py): a group-and-step where members'
    ends disagree is paired again by its ends."""
    res = Collectives(ranks=list(ranks))
    if len(ranks) < 2:
        return res
    keys = sorted({k for v in per_rank.values() for k in v}, key=lambda k: (k[1], k[0]))
    made: dict[tuple, tuple[list[int], list[list[tuple]], list[Instance]]] = {}
    for key in keys:
        # those outside every step are matched alike but kept apart, their misses not counted
        # (the step figures never held them)
        outside = key[1] in OUTSIDE_STEPS
        members = [r for r in res.ranks if key in per_rank[r]]
        # transfers without a peer on record pair up only between two ranks: each can only be
        # the other's peer, in NCCL's issue order (more ranks: who sent to whom is unknown). Two
        # ranks of a larger job pair where a collective issued them (an all-to-all's SendRecv
        # kernels: both are its members, as HTA's trace_filter's 2 of 128 ranks), not a send
        # or receive of unknown peer, whose peer may be a rank the session lacks
        peerless = key[0].startswith(P2P_UNKNOWN) and (
            len(members) != 2 or ((world or 2) > 2 and not _COLLECTIVE_ISSUER.search(key[0]))
        )
        if len(members) < 2 or peerless:
            if not outside:
                res.unmatched += sum(len(per_rank[r][key]) for r in members)
                for r in members:
                    res.unmatched_rows.setdefault(r, []).extend((e[0], e[1], e[7]) for e in per_rank[r][key])
            continue
        lists = [per_rank[r][key] for r in members]
        n = min(len(x) for x in lists)
        lined = lined_up(lists, n, key[1] == OUTSIDE_BEFORE)
        made[key] = (members, lists, _instances(key, members, [[x[k] for x in lined] for k in range(n)], range(n)))
    offs = end_offsets(i for _m, _l, made_ in made.values() for i in made_)
    for key, (members, lists, found) in made.items():
        if offs and not all(ends_agree(i, offs) for i in found):
            if len(members) == 2:
                pairs = repaired(lists[0], lists[1], members, offs)
                found = _instances(key, members, [[lists[0][i], lists[1][j]] for i, j in pairs], [i for i, _ in pairs])
            else:
                found = [i for i in found if ends_agree(i, offs)]
        if key[1] in OUTSIDE_STEPS:
            res.outside.extend(found)
            continue
        res.instances.extend(found)
        res.unmatched += sum(len(x) for x in lists) - len(members) * len(found)
        paired = {int(i) for ins in found for i in ins.idx}
        for r, x in zip(members, lists):
            res.unmatched_rows.setdefault(r, []).extend((e[0], e[1], e[7]) for e in x if e[2] not in paired)
    return res


def _instances(key: tuple, members: list[int], rows: list[list[tuple]], orders) -> list[Instance]:
    """One instance per row of the members' arrivals (rank_comm's tuples), but rows holding
    different collectives at the same position."""
    out = []
    for k, row in zip(orders, rows):
        if len({e[3] for e in row}) > 1:
            continue
        nbytes = next((e[4] for e in row if e[4]), None)
        out.append(
            Instance(
                key[0],
                row[0][3],
                key[1],
                k,
                members,
                np.array([e[2] for e in row], np.int64),
                np.array([e[0] for e in row], np.int64),
                np.array([e[1] for e in row], np.int64),
                nbytes,
                np.array([e[5] for e in row], np.int64),
                np.array([e[6] for e in row], bool),
                np.array([e[7] for e in row], np.int64),
            )
        )
    return out


def alone_summary(per_rank: dict[int, dict[tuple, list[tuple]]]) -> list[dict]:
    """Collectives of a process group that only one rank of the session holds (one rank's trace
    of a job, or 2 of 128 ranks in different groups): per group and collective, what can be known
    without the peers, count, bytes and the kernels' time. A group that another rank holds in any
    step is matched by match_arrivals (its kernels without a counterpart counted as unmatched),
    never listed here. Wait and transfer are not told apart (no other arrival), so the bandwidth
    given is bytes over the kernels' time: below the algorithm bandwidth by the wait where the
    rank arrived before its peers, about it where it arrived last. Rows shaped as
    Collectives.summary()'s, with transfer, bandwidths and waits None or empty."""
    holders: dict[str, set[int]] = {}
    for r, keys in per_rank.items():
        for key in keys:
            if key[1] not in OUTSIDE_STEPS:
                holders.setdefault(key[0], set()).add(r)
    groups: dict[tuple[str, str], list[tuple]] = {}
    for r, keys in per_rank.items():
        for key, rows in keys.items():
            if key[1] not in OUTSIDE_STEPS and len(holders[key[0]]) == 1:  # the steps' collectives
                for e in rows:
                    groups.setdefault((key[0], e[3]), []).append(e)
    out: list[dict] = []
    for (g, kind), rows in sorted(groups.items()):
        dur = np.array([e[1] - e[0] for e in rows], np.float64)
        sized = [(e[4], e[1] - e[0]) for e in rows if e[4] and e[1] > e[0]]
        bw = sum(b for b, _ in sized) / sum(t for _, t in sized) if sized else None  # bytes/ns = GB/s
        out.append(
            {
                "group": g,
                "name": kind,
                "count": len(rows),
                "ranks": 1,
                "bytes": typical_bytes([e[4] for e in rows]),
                "transfer_ms": None,
                "algbw_gbps": None,
                "busbw_gbps": None,
                "wait_ms": {},
                "late_count": {},
                "alone": True,
                "kernel_ms": round(float(dur.mean()) / 1e6, 4),
                "kernel_algbw_gbps": round(bw, 3) if bw else None,
            }
        )
    return out


def typical_bytes(sizes: list) -> int | None:
    """The median size, the lower one of the middle two: always a size some instance had (a
    group's broadcasts of 424 and 212,480 bytes are not said to be 106,452)."""
    by = sorted(b for b in sizes if b)
    return int(by[(len(by) - 1) // 2]) if by else None
