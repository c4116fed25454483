"""A dependency model of the whole session, across ranks, for the critical path and what-if replay.

Nodes: each rank's host items (the top-level CUDA API calls of the threads that launch GPU work,
in time order) and GPU ops per stream (kernels, NCCL kernels, memcpy/memset). Each node has a
start slot (2i) and an end slot (2i+1); an edge says "slot v is at least slot u + offset". Edges:

- host order: a host item starts after the previous one ends, plus the host work recorded
  between them (the gap is kept as work unless a change removes it);
- launch: a GPU op starts at least its launch latency after its CUDA call began (flows /
  correlation ids);
- stream order: an op starts after the previous op on its stream ends;
- cross-stream waits: not recorded as such; an op that started later than both its launch and its
  stream allowed, right after an op on another stream of its rank ended, is taken to wait for it;
- blocking syncs (cudaStreamSynchronize, cudaDeviceSynchronize, cudaEventSynchronize, blocking
  cudaMemcpy): the call ends after the last op launched before it on each stream that ended
  before the call returned;
- collectives (analysis.collectives.match): an NCCL kernel's transfer starts when the last member
  arrives and ends on every member that transfer time later.

With no change the replay reproduces the recorded times (every constraint is built to be met with
equality by the binding one). Qt-free; reads only the Trace.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..model.categories import Cat, LaneKind
from ..model.trace import Step, Trace
from .breakdown import breakdown
from .collectives import bus_factor, match
from .event_waits import recorded_waits
from .gpu_clock import FLOOR_PERCENTILE, gpu_ahead
from .host import HOST_SYNC_OP, launch_sources, name_ids, reads_copy, sync_name_ids
from .host_split import framework_waits

# node kinds
HOST, SYNC, KERNEL, COMM, COPY, MARK = 0, 1, 2, 3, 4, 5  # MARK: a step's host start or end
KIND_NAME = {HOST: "host", SYNC: "host", KERNEL: "gpu", COMM: "comm", COPY: "copy", MARK: "host"}
# edge kinds
E_HOST, E_HOST_START, E_LAUNCH, E_STREAM, E_XSTREAM, E_SYNC, E_COLL = range(7)
STREAM_TOL_NS = 5_000  # an op starting within this of the previous op's end was waiting for its stream
XDEP_TOL_NS = 20_000  # ... within this of an op on another stream: waiting for that op
LAUNCH_MAX_NS = 200_000  # a launch latency this far above the quickest is not the launch's: the op waited for more
BLOCKED_NS = 50_000  # a CUDA call this long that returns within this of a GPU op's end waited for it


@dataclass
class DepGraph:
    t0: int
    rank: np.ndarray  # per node
    kind: np.ndarray
    lane: np.ndarray
    ev: np.ndarray  # event index in the trace
    rec_s: np.ndarray  # recorded start, relative to t0
    rec_e: np.ndarray
    dur: np.ndarray  # own duration (start slot -> end slot)
    step: np.ndarray  # step number (-1: none)
    split: np.ndarray  # bool: the end slot has edges of its own (sync, collective)
    e_src: np.ndarray  # edges: slot u -> slot v, offset
    e_dst: np.ndarray
    e_off: np.ndarray
    e_kind: np.ndarray
    order: np.ndarray  # slots to compute, in an order that respects every edge
    # per rank: host steps (step, start, end relative to t0) and host nodes in time order
    host_steps: dict[int, list[tuple[int, int, int]]] = field(default_factory=dict)
    host_nodes: dict[int, np.ndarray] = field(default_factory=dict)
    marks: dict[int, dict[int, tuple[int, int]]] = field(default_factory=dict)  # rank -> step -> (start, end node)
    # per collective edge: (bytes x bus factor), 0 unknown
    coll_bytes: np.ndarray = field(default_factory=lambda: np.zeros(0, np.float64))
    launch_floor: dict[int, int] = field(default_factory=dict)  # rank -> quickest launch latency seen
    assumptions: list[str] = field(default_factory=list)
    names: list[str] = field(default_factory=list)
    name: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))  # name id per node
    # per node: a synchronize call that reads a copy's result (host.reads_copy), which the host
    # needs: `whatif --no-syncs` keeps its wait
    reads_copy: np.ndarray = field(default_factory=lambda: np.zeros(0, bool))
    whole: bool = False  # no step ranges on record: each rank's whole capture is one step (WHOLE)
    gpu_ahead: dict[int, int] = field(default_factory=dict)  # rank -> ns its GPU times were taken earlier (gpu_clock)
    # Kept with the model by whatif.py, each computed on first use (getattr(g, name, None) is None
    # until then): edges by destination, the replay's plan and sources, levels, slot positions, the
    # recorded replay and the steps' GPU end slots. Any where the type lives in a module importing this one.
    _in: tuple[np.ndarray, np.ndarray] = field(init=False, repr=False, compare=False)
    _plan: list[tuple] = field(init=False, repr=False, compare=False)
    _src: list[int] = field(init=False, repr=False, compare=False)
    _levels: Any = field(init=False, repr=False, compare=False)  # replay_levels.Levels
    _pos: np.ndarray = field(init=False, repr=False, compare=False)
    _recorded: Any = field(init=False, repr=False, compare=False)  # whatif.Replay
    _gpu_ends: tuple[np.ndarray, np.ndarray, np.ndarray] = field(init=False, repr=False, compare=False)

    @property
    def n(self) -> int:
        return len(self.rank)

    def steps(self) -> list[int]:
        return sorted({s for v in self.host_steps.values() for s, _, _ in v})


def _host_nodes(trace: Trace, rank: int, launch_src: np.ndarray) -> np.ndarray:
    """Top-level CUDA API calls of the rank's threads that launched GPU work, by start; and those
    threads' framework calls that wait for the device (JAX's block_until_ready, device_get:
    HOST_SYNC_OP) where no CUDA call of theirs is on record inside them (one that is, a
    synchronize, is the node). jax_train_stall's host waits in block_until_ready each step while
    its GPU runs: held as host work, no GPU change could shorten its steps in a replay."""
    c = trace.columns
    lanes = [i for i, ln in enumerate(trace.lanes) if ln.rank == rank and ln.kind == LaneKind.CUDA_API]
    out = []
    for ln in lanes:
        sl = trace.lane_slice(ln)
        if not np.any((launch_src >= sl.start) & (launch_src < sl.stop)):
            continue  # a thread that never launches (NCCL watchdog, event polling) does not feed the GPU
        idx = np.arange(sl.start, sl.stop)
        out.append(idx[np.asarray(c["depth"][idx]) == 0])
    if not out:
        return np.zeros(0, np.int64)
    idx = np.r_[np.concatenate(out), framework_waits(trace, rank, HOST_SYNC_OP)]
    return idx[np.argsort(np.asarray(c["start"][idx]), kind="stable")]


WHOLE = 0  # the step number of a whole capture with no step ranges


def _whole_step(trace: Trace, rank: int, host: np.ndarray, ops: np.ndarray | None) -> Step:
    """A rank's whole capture as one step: from its first launching call or GPU op to the last end."""
    c = trace.columns
    idx = np.r_[host, ops if ops is not None else np.zeros(0, np.int64)].astype(np.int64)
    if not len(idx):
        return Step(rank, WHOLE, int(trace.start_ns), int(trace.start_ns))
    s = np.asarray(c["start"][idx]).astype(np.int64)
    return Step(rank, WHOLE, int(s.min()), int((s + np.asarray(c["dur"][idx])).max()))


def _top_level(trace: Trace, ev: np.ndarray) -> np.ndarray:
    """The depth-0 event on the same lane that holds each event (a driver call nested in a
    runtime call launches for its parent)."""
    c = trace.columns
    depth = np.asarray(c["depth"][ev])
    out = ev.copy()
    nested = np.flatnonzero(depth > 0)
    for j in nested.tolist():  # few: kineto nests driver calls under runtime calls
        i = int(ev[j])
        ln = int(c["lane"][i])
        lo = trace.lane_slice(ln).start
        k = i
        while k > lo and int(c["depth"][k]) > 0:
            k -= 1
        out[j] = k
    return out


def build(trace: Trace, args: dict[int, dict] | None = None, rbs: list | None = None, colls=None) -> DepGraph:
    """The model of the whole session. rbs (breakdown.breakdown, with each rank's ops) and colls
    (collectives.match) may be handed in by an analysis that already has them."""
    c = trace.columns

    def g_name(evs):
        return np.where(evs >= 0, np.asarray(c["name"][np.maximum(evs, 0)]), -1)

    start = np.asarray(c["start"])
    dur_all = np.asarray(c["dur"])
    if rbs is None or any(rb.ops is None for rb in rbs):
        rbs = breakdown(trace)
        colls = None
    if colls is None:
        colls = match(trace, rbs, args or {})
    assumptions: list[str] = []
    flow_src, flow_dst = (np.asarray(x, np.int64) for x in trace.flows)
    # the calls that launch GPU work, not NCCL's watchdog polling (taken as the loop's, it cut
    # nsys_ddp's planted 50.3 ms sleep at 48.2 ms)
    launch_src = launch_sources(trace)
    t0 = int(trace.start_ns)
    sync_ids = set(sync_name_ids(trace).tolist()) | set(name_ids(trace, HOST_SYNC_OP).tolist())

    # a session with no step ranges (a capture of a few seconds, an inference run): the whole
    # capture of each rank is one step, WHOLE, so the what-if and the critical path still have one
    whole = not trace.steps and len(rbs) > 0
    if whole:
        assumptions.append(f"no step ranges on record: the whole capture is one step (numbered {WHOLE})")
    rank_l, kind_l, lane_l, ev_l, step_l, t_l = [], [], [], [], [], []
    host_nodes: dict[int, np.ndarray] = {}
    host_steps: dict[int, list] = {}
    marks: dict[int, dict[int, tuple[int, int]]] = {}  # rank -> step -> (start node, end node)
    offset = 0
    for rb in rbs:
        r = rb.rank
        steps = sorted(trace.steps_of_rank(r), key=lambda s: s.start)
        h = _host_nodes(trace, r, launch_src)
        if whole:
            steps = [_whole_step(trace, r, h, rb.ops)]
        host_steps[r] = [(s.step, s.start - t0, s.end - t0) for s in steps]
        names = np.asarray(c["name"][h]) if len(h) else np.zeros(0, np.int32)
        is_sync = np.isin(names, list(sync_ids)) if sync_ids else np.zeros(len(h), bool)
        hs = np.asarray(start[h]).astype(np.int64)
        # the steps' host boundaries are zero-length nodes of the host sequence, so a gap is cut
        # where a step begins or ends and the step's end moves with the host work before it
        m_t = np.array([x for s in steps for x in (s.start, s.end)], np.int64)
        m_step = np.array([s.step for s in steps for _ in (0, 1)], np.int64)
        m_end = np.array([e for _ in steps for e in (False, True)], bool)
        t_all = np.r_[hs, m_t]
        ev_all = np.r_[h, np.full(len(m_t), -1, np.int64)]
        kd_all = np.r_[np.where(is_sync, SYNC, HOST), np.full(len(m_t), MARK)]
        if steps:
            st0 = np.array([s.start for s in steps], np.int64)
            st1 = np.array([s.end for s in steps], np.int64)
            k = np.searchsorted(st0, hs, side="right") - 1
            ok = (k >= 0) & (hs <= st1[np.maximum(k, 0)])
            hstep = np.where(ok, np.array([s.step for s in steps])[np.maximum(k, 0)], -1)
        else:
            hstep = np.full(len(h), -1)
        # a step's start marker holds no gap of the step (the gap before it is the step before's)
        st_all = np.r_[hstep, np.where(m_end, m_step, -1)]
        # markers sort after calls starting at the same time when they end a step, before when they start one
        o = np.lexsort((np.r_[np.ones(len(h)), np.where(m_end, 2, 0)], t_all))
        nodes = np.arange(offset, offset + len(o))
        host_nodes[r] = nodes
        pos = np.empty(len(o), np.int64)
        pos[o] = nodes
        mk = pos[len(h) :]
        marks[r] = {int(m_step[j]): (int(mk[j]), int(mk[j + 1])) for j in range(0, len(m_t), 2)}
        rank_l.append(np.full(len(o), r))
        kind_l.append(kd_all[o])
        lane_l.append(np.full(len(o), -1))
        ev_l.append(ev_all[o])
        step_l.append(st_all[o])
        t_l.append(t_all[o])
        offset += len(o)
        ops = rb.ops if rb.ops is not None else np.zeros(0, np.int64)
        cat = np.asarray(c["cat"][ops])
        kind = np.where(cat == Cat.COMM_KERNEL, COMM, np.where(cat == Cat.KERNEL, KERNEL, COPY))
        rank_l.append(np.full(len(ops), r))
        kind_l.append(kind)
        lane_l.append(np.asarray(c["lane"][ops]))
        ev_l.append(ops)
        step_l.append(
            np.full(len(ops), WHOLE) if whole else rb.op_step if rb.op_step is not None else np.full(len(ops), -1)
        )
        t_l.append(np.asarray(start[ops]).astype(np.int64))
        offset += len(ops)
    cat_ = lambda xs, dt: np.concatenate(xs).astype(dt) if xs else np.zeros(0, dt)  # noqa: E731
    rank, kind, lane, ev, step = (
        cat_(rank_l, np.int32),
        cat_(kind_l, np.int8),
        cat_(lane_l, np.int32),
        cat_(ev_l, np.int64),
        cat_(step_l, np.int64),
    )
    n = len(ev)
    rec_s = cat_(t_l, np.int64) - t0
    rec_e = rec_s + np.where(ev >= 0, dur_all[np.maximum(ev, 0)], 0).astype(np.int64)
    lane[ev >= 0] = np.asarray(c["lane"][ev[ev >= 0]])
    dur = rec_e - rec_s
    split = np.zeros(n, bool)
    src, dst, off, ek = [], [], [], []

    def edges(u, v, o, k):
        src.append(np.asarray(u, np.int64))
        dst.append(np.asarray(v, np.int64))
        off.append(np.asarray(o, np.int64))
        ek.append(np.full(len(np.atleast_1d(u)), k, np.int8))

    # host order (one sequence per rank: its launching threads take turns - the main thread
    # blocks in backward() while autograd's thread launches)
    for r, hn in host_nodes.items():
        if len(hn) < 2:
            continue
        prev, cur = hn[:-1], hn[1:]
        # the previous item that ended last (a call on another thread may still run)
        pe = rec_e[prev]
        run_max = np.maximum.accumulate(pe)
        which = prev[np.maximum.accumulate(np.where(pe == run_max, np.arange(len(prev)), 0))]
        overl = rec_e[which] > rec_s[cur]
        ok = ~overl
        edges(2 * which[ok] + 1, 2 * cur[ok], rec_s[cur[ok]] - rec_e[which[ok]], E_HOST)
        if overl.any():  # overlapping calls of two threads: start follows start
            edges(2 * which[overl], 2 * cur[overl], rec_s[cur[overl]] - rec_s[which[overl]], E_HOST_START)
    if len(host_nodes) and any(len(v) for v in host_nodes.values()):
        assumptions.append(
            "a rank's launching threads are one host sequence in time order "
            "(the main thread blocks while autograd's thread launches the backward)"
        )

    # launch -> op
    host_idx = np.concatenate(list(host_nodes.values())) if host_nodes else np.zeros(0, np.int64)
    host_idx = host_idx[ev[host_idx] >= 0]
    host_ev = ev[host_idx]
    o = np.argsort(host_ev)
    host_ev_sorted, host_idx_sorted = host_ev[o], host_idx[o]
    launch_node = np.full(n, -1, np.int64)
    if len(flow_dst) and len(host_ev_sorted):
        fo = np.argsort(flow_dst, kind="stable")
        fd, fs = flow_dst[fo], flow_src[fo]
        gpu = np.flatnonzero((kind >= KERNEL) & (kind <= COPY))
        pos = np.minimum(np.searchsorted(fd, ev[gpu]), len(fd) - 1)
        hit = fd[pos] == ev[gpu]
        srcs = _top_level(trace, fs[pos[hit]])
        p2 = np.minimum(np.searchsorted(host_ev_sorted, srcs), len(host_ev_sorted) - 1)
        ok = host_ev_sorted[p2] == srcs
        launch_node[gpu[hit][ok]] = host_idx_sorted[p2[ok]]

    # per stream: stream order, launch latency, cross-stream waits
    gpu_nodes = np.flatnonzero((kind >= KERNEL) & (kind <= COPY))
    # a GPU clock running ahead of its host's (a device-wide sync returned before the ops launched
    # before it ended): the rank's GPU times taken that much earlier, before any edge is measured
    ahead = gpu_ahead(trace.names, g_name(ev), kind == SYNC, rec_s, rec_e, launch_node, host_nodes, gpu_nodes, rank)
    for r, a in sorted(ahead.items()):
        if a > 0:
            on = gpu_nodes[rank[gpu_nodes] == r]
            rec_s[on] -= a
            rec_e[on] -= a
            assumptions.append(
                f"rank {r}'s GPU clock runs {a / 1e6:.2f} ms ahead of its host's (a device-wide sync returned "
                "before the work launched before it ended): its GPU times are taken that much earlier"
            )
    launch_floor: dict[int, int] = {}
    names_all = g_name(ev)
    n_waits = 0
    for r in host_nodes:
        mine = gpu_nodes[rank[gpu_nodes] == r]
        if not len(mine):
            continue
        mine = mine[np.lexsort((rec_s[mine], lane[mine]))]
        ln = lane[mine]
        first = np.r_[True, ln[1:] != ln[:-1]]
        prev_end = np.where(first, np.iinfo(np.int64).min // 4, np.r_[0, rec_e[mine[:-1]]])
        gap = rec_s[mine] - prev_end
        stream_bound = ~first & (gap <= STREAM_TOL_NS)
        ln_node = launch_node[mine].copy()
        # a CUDA graph launch is one launch: its first op on a stream waits for it, the rest
        # follow that op in stream order (their latency from the call is the graph's, not a launch's)
        ln_node[~first & (ln_node >= 0) & (ln_node == np.r_[-1, ln_node[:-1]])] = -1
        linked = ln_node >= 0
        # a long call (the runtime loading a kernel's code at its first launch: HTA's MI250 trace,
        # a 6.5 ms hipLaunchKernel) submits its op as it returns: an op that started after such a
        # call ended is timed from the call's end, so shortening the call moves the op with it
        ln0 = np.maximum(ln_node, 0)
        from_end = linked & (dur[ln0] > BLOCKED_NS) & (rec_s[mine] >= rec_e[ln0])
        lat = np.where(linked, rec_s[mine] - np.where(from_end, rec_e[ln0], rec_s[ln0]), 0)
        # cross-stream: the op on another stream of this rank that ended last at or before the start
        by_end = mine[np.argsort(rec_e[mine], kind="stable")]
        xe = rec_e[by_end]
        p = np.searchsorted(xe, rec_s[mine], side="right") - 1
        xdep = np.full(len(mine), -1, np.int64)
        # step back over ops of the same stream (a few at most)
        for back in range(4):
            q = p - back
            okq = (q >= 0) & (xdep < 0)
            cand = np.where(okq, by_end[np.maximum(q, 0)], -1)
            good = okq & (lane[np.maximum(cand, 0)] != ln) & (rec_s[mine] - rec_e[np.maximum(cand, 0)] <= XDEP_TOL_NS)
            xdep = np.where(good, cand, xdep)
        waits_x = ~stream_bound & (xdep >= 0) & (~linked | (lat > 2 * XDEP_TOL_NS))
        cand = linked & ~stream_bound & ~waits_x
        # an op that started far later than launches usually take waited for something not on
        # record (the GPU runs behind the host): the gap on its stream is kept, not the latency
        # the quickest launches seen: the least a launch takes to reach the GPU, plus whatever
        # offset the GPU's clock has from the host's (measured from it, so a GPU clock running
        # behind changes nothing)
        floor = int(np.percentile(lat[linked], FLOOR_PERCENTILE)) if linked.any() else 0
        launch_floor[r] = floor
        # ...and one that started while its call still ran was fed by that call, however late
        # (a pageable cudaMemcpyAsync stages its data first: tb_plugin's 19 MB input copies start
        # 250 us into a 2.5 ms call); taken as waiting for its stream, a data-loader stall before
        # the call stayed in every replay
        # (not a blocking call's: a synchronous cudaMemcpy waits for its stream to drain first)
        launch_bound = cand & ((lat - floor <= LAUNCH_MAX_NS) | ((rec_s[mine] < rec_e[ln0]) & (kind[ln0] != SYNC)))
        # the usual latency of a launch the GPU waited for (none: the quickest launches seen)
        typical = int(np.median(lat[launch_bound])) if launch_bound.any() else floor
        lat_used = np.where(launch_bound, lat, np.minimum(lat, typical))
        lk = linked
        edges(2 * ln_node[lk] + from_end[lk], 2 * mine[lk], np.maximum(lat_used[lk], 0), E_LAUNCH)
        # stream order: the gap is kept when nothing else explains it
        sk = ~first
        keep_gap = stream_bound | ~linked | (cand & ~launch_bound)
        edges(2 * mine[:-1][sk[1:]] + 1, 2 * mine[sk], np.where(keep_gap[sk], gap[sk], 0), E_STREAM)
        if waits_x.any():
            edges(2 * xdep[waits_x] + 1, 2 * mine[waits_x], rec_s[mine[waits_x]] - rec_e[xdep[waits_x]], E_XSTREAM)
        # (an unlinked op first on its stream, with nothing before it: anchored where recorded)
        wu, wv, wo = recorded_waits(trace, host_nodes[r], names_all, lane, rec_s, rec_e, launch_node, mine, XDEP_TOL_NS)
        if len(wu):
            edges(2 * wu + 1, 2 * wv, wo, E_XSTREAM)
            n_waits += len(wu)
    if n_waits:
        assumptions.append(
            f"cross-stream waits: {n_waits:,} cudaStreamWaitEvent calls with no launch between them and the "
            "cudaEventRecord before them (their streams and events are not recorded): each is taken as the op "
            "its thread launches next waiting for the op it launched last before the record"
        )
    assumptions.append(
        f"{'other ' if n_waits else ''}cross-stream waits are not recorded: an op that started after "
        "both its launch and its stream allowed, within 20 us of an op ending on another "
        "stream of its rank, is taken to wait for that op"
    )

    # (GPU times are on the host's clock here: a GPU clock's offset was taken off above)
    def wait_edges(calls, ops):
        adj = rec_e[ops]
        tail = np.maximum(0, rec_e[calls] - np.maximum(adj, rec_s[calls]))
        # an op that had ended before the call began was not waited for: the call cannot return
        # before it ends, nothing more (its whole time as the offset pinned the call to that op,
        # a copy of step 0 holding a sync of step 7 once a change moved the steps between earlier)
        edges(2 * ops + 1, 2 * calls + 1, np.where(adj >= rec_s[calls], tail, 0), E_SYNC)
        split[calls] = True
        np.minimum.at(dur, calls, tail)  # the call's own time: what is left after the wait

    # blocking syncs: on each stream, the last op launched by or before the call that ended before it
    # returned (an event recorded before the last launches: the op it waited for is an earlier one)
    for r, hn in host_nodes.items():
        syncs = hn[kind[hn] == SYNC]
        mine = gpu_nodes[rank[gpu_nodes] == r]
        if not len(syncs) or not len(mine):
            continue
        lt = np.where(launch_node[mine] >= 0, rec_s[np.maximum(launch_node[mine], 0)], rec_s[mine])
        for lane_id in np.unique(lane[mine]).tolist():
            ops = mine[lane[mine] == lane_id]
            lts = lt[lane[mine] == lane_id]
            o2 = np.argsort(lts, kind="stable")
            ops, lts = ops[o2], lts[o2]
            # launched at the call's start or before: a blocking cudaMemcpy waits for its own copy
            # (launched by the call itself, at its start), which 'before' alone left out: its
            # host time stayed fixed when the copy was made shorter (saxpy's device-to-host copies)
            p = np.searchsorted(lts, rec_s[syncs], side="right") - 1
            # a stream runs in launch order: its ends rise with it
            q = np.searchsorted(np.maximum.accumulate(rec_e[ops]), rec_e[syncs], side="right") - 1
            # (the call's own copy counts where it ended before the call returned: a pageable
            # host-to-device copy returns once its data is staged, before its copy ends on the GPU,
            # and tying the call to that end broke the critical path of cloverleaf's steps)
            p = np.minimum(p, q)
            okp = p >= 0
            if okp.any():
                wait_edges(syncs[okp], ops[p[okp]])
    # other calls that block until the GPU moves on (a full launch queue, a pageable memcpy, the
    # allocator): a long call that returned right after an op of its rank ended waited for it
    blocked = 0
    for r, hn in host_nodes.items():
        calls = hn[(kind[hn] == HOST) & (dur[hn] > BLOCKED_NS)]
        mine = gpu_nodes[rank[gpu_nodes] == r]
        if not len(calls) or not len(mine):
            continue
        by_end = mine[np.argsort(rec_e[mine], kind="stable")]
        ends = rec_e[by_end]
        p = np.searchsorted(ends, rec_e[calls], side="right") - 1
        okp = p >= 0
        op = by_end[np.maximum(p, 0)]
        okp &= (rec_e[op] > rec_s[calls]) & (rec_e[calls] - rec_e[op] <= np.maximum(BLOCKED_NS, dur[calls] // 20))
        # nor for the op it launched itself, queued as it returned (HTA's MI250 trace: a 6.5 ms
        # hipLaunchKernel, the code loaded at its first launch, whose 5 us kernel ran right after
        # it, before the call's end once the GPU clock's offset is taken off): that is no wait
        okp &= launch_node[op] != calls
        # a call that launched an op running through most of it (a pageable memcpy) waits for that op
        own = mine[launch_node[mine] >= 0]
        own = own[np.isin(launch_node[own], calls)]
        ov = np.minimum(rec_e[own], rec_e[launch_node[own]]) - np.maximum(rec_s[own], rec_s[launch_node[own]])
        own = own[ov * 2 > dur[launch_node[own]]]
        where = np.searchsorted(calls, launch_node[own])
        op[where] = own
        okp[where] = True
        if okp.any():
            wait_edges(calls[okp], op[okp])
            blocked += int(okp.sum())
    if blocked:
        assumptions.append(
            f"{blocked} CUDA calls that are not syncs ran over 50 us and returned right after "
            "a GPU op ended (launch queue full, pageable memcpy): taken to wait for it"
        )

    # collectives: ends follow the last arrival on every member
    gpu_ev = ev[gpu_nodes]
    go = np.argsort(gpu_ev)
    gsorted, gnodes = gpu_ev[go], gpu_nodes[go]
    cb_u, cb_v, cb_o, cb_b = [], [], [], []
    for ins in colls.instances:
        pos = np.searchsorted(gsorted, ins.idx)
        nodes = gnodes[np.minimum(pos, len(gnodes) - 1)]
        if not np.all(gsorted[np.minimum(pos, len(gnodes) - 1)] == ins.idx):
            continue
        # the model's times, not the trace's: a GPU clock's offset from its host is taken off them
        last = int(rec_s[nodes].max())
        bf = (ins.bytes or 0) * bus_factor(ins.kind, len(ins.ranks))
        tr = rec_e[nodes] - last
        # a member that finished before the last arrival (a broadcast's root) keeps its own duration
        vs, trs = nodes[tr >= 0], tr[tr >= 0]
        split[vs] = True
        dur[vs] = 0
        # every member's start -> each transferring member's end (member by member, as arrays:
        # 64 ranks make 4,096 edges a collective)
        cb_u.append(np.tile(2 * nodes, len(vs)))
        cb_v.append(np.repeat(2 * vs + 1, len(nodes)))
        cb_o.append(np.repeat(trs, len(nodes)))
        cb_b.append(np.full(len(vs) * len(nodes), bf, np.float64))
    n_coll = sum(len(x) for x in cb_u)
    if n_coll:
        edges(np.concatenate(cb_u), np.concatenate(cb_v), np.concatenate(cb_o), E_COLL)
    coll_b = np.zeros(sum(len(x) for x in src), np.float64)
    if n_coll:
        coll_b[-n_coll:] = np.concatenate(cb_b)
    if colls.instances and not any(ins.bytes for ins in colls.instances):
        assumptions.append(
            "collectives matched by kernel name and stream order; their sizes are not recorded (no NCCL payload)"
        )
    if colls.unmatched:
        assumptions.append(
            f"{colls.unmatched} NCCL kernels had no counterpart on another rank: their own recorded duration is kept"
        )

    e_src = np.concatenate(src) if src else np.zeros(0, np.int64)
    e_dst = np.concatenate(dst) if dst else np.zeros(0, np.int64)
    e_off = np.concatenate(off) if off else np.zeros(0, np.int64)
    e_kind = np.concatenate(ek) if ek else np.zeros(0, np.int8)
    order = _order(n, split, rec_s, rec_e, e_src, e_dst)
    return DepGraph(
        t0,
        rank,
        kind,
        lane,
        ev,
        rec_s,
        rec_e,
        dur,
        step,
        split,
        e_src,
        e_dst,
        e_off,
        e_kind,
        order,
        host_steps,
        host_nodes,
        marks,
        coll_b,
        launch_floor,
        assumptions,
        list(trace.names),
        np.where(ev >= 0, np.asarray(c["name"][np.maximum(ev, 0)]), -1),
        _reads_copy(trace, kind, ev),
        whole,
        {r: a for r, a in ahead.items() if a > 0},
    )


def _reads_copy(trace: Trace, kind: np.ndarray, ev: np.ndarray) -> np.ndarray:
    out = np.zeros(len(kind), bool)
    at = np.flatnonzero((kind == SYNC) & (ev >= 0))
    out[at] = reads_copy(trace, ev[at])
    return out


def _order(
    n: int, split: np.ndarray, rec_s: np.ndarray, rec_e: np.ndarray, e_src: np.ndarray, e_dst: np.ndarray
) -> np.ndarray:
    """Slots to compute, in recorded-time order; ties (and the rare edge against recorded time)
    settled by raising the later slot's key until every edge goes forward."""
    # entries: start slot of every node; end slot of split nodes. A normal node's end is
    # computed with its start, so an edge from it leaves from the start's entry.
    slots = np.r_[2 * np.arange(n), 2 * np.flatnonzero(split) + 1]
    key = np.empty(2 * n, np.int64)
    key[0::2] = rec_s * 4
    key[1::2] = rec_e * 4 + 2
    entry_of = np.arange(2 * n)
    normal_end = 2 * np.flatnonzero(~split) + 1
    entry_of[normal_end] = normal_end - 1
    key[normal_end] = key[normal_end - 1]
    u = np.r_[entry_of[e_src], 2 * np.flatnonzero(split)]
    v = np.r_[entry_of[e_dst], 2 * np.flatnonzero(split) + 1]
    for _ in range(10_000):
        bad = key[u] >= key[v]
        if not bad.any():
            break
        np.maximum.at(key, v[bad], key[u[bad]] + 1)
    return slots[np.argsort(key[slots], kind="stable")]


def coll_at_peak(g: DepGraph, peak_gbps: float) -> np.ndarray:
    """Per edge: the transfer time at peak bus bandwidth (collective edges with known sizes), else
    the recorded offset."""
    out = g.e_off.copy()
    m = (g.e_kind == E_COLL) & (g.coll_bytes > 0)
    out[m] = np.minimum(out[m], (g.coll_bytes[m] / peak_gbps).astype(np.int64))  # bytes / (bytes/ns)
    return out
