"""Per rank and step: the step's GPU window and what filled it (busy, compute, communication
split into waiting for other ranks and transfer, memcpy, idle).

Step attribution: a GPU op belongs to the step whose host window (ProfilerStep#N, NVTX "step N")
holds the CUDA call that launched it (flows by correlation id). An op with no launch on record
(a memset, work launched by a library thread) takes the step of the previous linked op on its
stream, since a stream runs in launch order; before the first linked op it belongs to no step
(it is the tail of a step before the capture). On a stream with no launch record at all, an op
takes the step whose host range (or the gap after it, the GPU running behind the host) holds its
own start; ops left outside every step that way are counted (RankBreakdown.unplaced) and said in
a finding.
A step's GPU window runs from its first op to its last and never starts before the previous
step's window ended, so one rank's windows are disjoint and follow the GPU when it runs steps
behind the host. What fills a window (busy, compute, communication, idle) is measured on the
rank's whole GPU timeline, so work of the next step already running inside it counts as busy
there, not as idle; the op counts are the step's own. GPU idle between two windows is kept
beside them (idle_before / idle_after: the host preparing the next step, or finishing the
last), so a slow input pipeline still shows. A first step much slower than the rest on every
rank is marked warm-up.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

import numpy as np

from ..model.categories import GPU_LANE_KINDS, Cat
from ..model.trace import Trace
from . import intervals as iv
from .host import flows_by_dst
from .host_split import host_split, longest_call

WARMUP_FACTOR = 2.0  # a first step this many times the median of the others is warm-up
# ...or one whose GPU window this much of is work launched before the capture (the shared and
# compat traces: 0%, or 16% and 23%)
BACKLOG_SHARE = 0.10


@dataclass
class StepBreakdown:
    step: int | None
    start_ns: int  # GPU window
    end_ns: int
    host_start_ns: int = 0  # the host's step range
    host_end_ns: int = 0
    busy_ns: int = 0
    compute_ns: int = 0
    comm_ns: int = 0
    wait_ns: int = 0  # part of comm_ns spent waiting for the last rank to arrive
    transfer_ns: int = 0  # comm_ns - wait_ns
    caused_ns: int = 0  # wait this rank caused at collectives where it came last, per rank that waited
    memcpy_ns: int = 0
    overlap_ns: int = 0
    exposed_comm_ns: int = 0
    idle_ns: int = 0  # inside the window
    idle_before_ns: int = 0  # GPU idle before the window while the host prepared this step
    idle_after_ns: int = 0  # GPU idle after it while the host finished this step
    ops: int = 0
    kernels: int = 0
    comm_kernels: int = 0
    warmup: bool = False
    # GPU work launched before the capture began, running in the first step's GPU window: its time
    # and ops (said only where there is some)
    backlog_ns: int = 0
    backlog_ops: int = 0
    backlog_warm: bool = False  # warm-up for that reason (_mark_backlog), not for its length
    # the host's step range, split (host_split.host_split): Python / framework ops, launch API calls,
    # launch calls blocked on a full launch queue, blocking syncs, Python calls that block (sleep,
    # locks, queues), nothing on record; they add up to host_end_ns - host_start_ns
    host_framework_ns: int = 0
    host_launch_ns: int = 0
    host_queue_ns: int = 0
    host_sync_ns: int = 0
    host_wait_ns: int = 0
    host_idle_ns: int = 0
    # of host_idle_ns: the loop's thread blocked on another of its threads (an OS trace's
    # pthread_cond_wait: the main thread while the autograd thread runs the backward)
    host_idle_thread_ns: int = 0
    # all the loop's thread spent blocked on another of its threads, while they worked too (nsys_ddp_big:
    # 50-57% of each step, 8% with nothing else on record; an audit)
    host_loop_wait_ns: int = 0
    # of host_framework_ns: inside Python frames alone (the Python tracer's: no op, range or call
    # under them on record)
    host_python_ns: int = 0
    # of host_framework_ns: inside annotated ranges alone (record_function, '## backward ##'), no
    # op under them on record: Python ran there, the profiler did not say what
    host_annotation_ns: int = 0
    # collectives gloo runs on the host (host_split.HOST_COLL): apart from the framework's time,
    # said only where there are some (a CPU-only job's gloo all-reduces)
    host_coll_ns: int = 0
    # of host_launch_ns: calls that allocate or free memory (host_split.ALLOC_CALL), said only
    # where there are some
    host_alloc_ns: int = 0
    # of idle_ns: in gaps of QUEUED_GAP_NS or more before work launched before the gap began (the
    # GPU waited on something not on record, not on its host; HTA's rank0: 525 of 534 ms)
    idle_queued_ns: int = 0

    @property
    def window_ns(self) -> int:
        return self.end_ns - self.start_ns

    @property
    def gpu_time_ns(self) -> int:
        """The window and the GPU idle around it that belongs to this step."""
        return self.window_ns + self.idle_before_ns + self.idle_after_ns

    @property
    def idle_total_ns(self) -> int:
        return self.idle_ns + self.idle_before_ns + self.idle_after_ns

    @property
    def utilization(self) -> float:
        """GPU utilization: the share of the step's GPU time spent in compute kernels (not NCCL
        kernels, which occupy the GPU while they wait for other ranks, nor copies)."""
        return self.compute_ns / self.gpu_time_ns if self.gpu_time_ns > 0 else 0.0

    @property
    def busy_share(self) -> float:
        """Share of the GPU time with anything running (NCCL waits and copies included)."""
        return self.busy_ns / self.gpu_time_ns if self.gpu_time_ns > 0 else 0.0

    def as_dict(self) -> dict:
        d = asdict(self)
        if not self.backlog_ns:
            del d["backlog_ns"], d["backlog_ops"]
        if not self.backlog_warm:
            del d["backlog_warm"]
        if not self.host_coll_ns:
            del d["host_coll_ns"]
        if not self.host_alloc_ns:
            del d["host_alloc_ns"]
        if not self.idle_queued_ns:
            del d["idle_queued_ns"]
        d["utilization"] = round(self.utilization, 4)
        d["busy_share"] = round(self.busy_share, 4)
        return d


# A step's times and counts as the step tables carry them, in their order (between the step's
# number and its warm-up flag): the session's `steps` (query.tables) and a summary's steps.parquet
STEP_COLUMNS = (
    "start_ns",
    "end_ns",
    "host_start_ns",
    "host_end_ns",
    "busy_ns",
    "compute_ns",
    "comm_ns",
    "wait_ns",
    "transfer_ns",
    "caused_ns",
    "memcpy_ns",
    "overlap_ns",
    "exposed_comm_ns",
    "idle_ns",
    "idle_before_ns",
    "idle_after_ns",
    "ops",
    "kernels",
    "comm_kernels",
)


@dataclass
class RankBreakdown:
    rank: int
    steps: list[StepBreakdown] = field(default_factory=list)
    ops: np.ndarray | None = None  # event indices of the rank's GPU work (not shipped by the map)
    op_step: np.ndarray | None = None  # step number of each op (-1: outside every step)
    n_ops: int = 0  # len(ops), which the reduce still needs after ops are dropped
    # per step: the part of its NCCL transfer in kernels matched with no other rank's (their
    # wait not told apart from transfer; split_wait), where a rank holds such kernels
    unmatched_ns: dict = field(default_factory=dict)
    # ops with no launch on record that no step could be given (by stream order or by time), and
    # whether they are all kernels: the per-step numbers leave them out, which must be said
    unplaced: int = 0
    unplaced_kernels: bool = True
    # any framework op or range (CPU op, NVTX range other than the steps') on the launching threads:
    # an nsys capture without op ranges has none, and its "framework ops 0%" is unmeasured, not none
    host_ops_recorded: bool = True
    # a capture without steps: its launch part's one long call, where it holds much of that part
    # (host_split.longest_call: a first launch loading its module); None otherwise
    host_longest_call: tuple[str, int] | None = None

    @property
    def measured(self) -> list[StepBreakdown]:
        """The steps summaries and outlier detection use: all but warm-up."""
        return [s for s in self.steps if not s.warmup] or self.steps

    @property
    def gpu_utilization(self) -> float:
        """Compute share of the measured steps' GPU time (StepBreakdown.utilization)."""
        return self.shares()["compute"]

    def shares(self) -> dict[str, float]:
        """What filled the measured steps' GPU time, as shares of it: compute kernels, NCCL
        transfer, NCCL waiting for the last rank, copies, idle, and busy (anything running).
        Compute may run beside communication or copies, so the first four can add up to more
        than busy; busy + idle is 1."""
        steps = self.measured
        w = sum(s.gpu_time_ns for s in steps)
        keys = (
            ("compute", "compute_ns"),
            ("nccl_transfer", "transfer_ns"),
            ("nccl_wait", "wait_ns"),
            ("copy", "memcpy_ns"),
            ("idle", "idle_total_ns"),
            ("busy", "busy_ns"),
        )
        return {k: (sum(getattr(s, a) for s in steps) / w if w else 0.0) for k, a in keys}

    def host_shares(self) -> dict[str, float]:
        """The measured steps' host time split: framework, launch, queue, sync, wait, idle, and coll
        where gloo ran collectives on the host (shares)."""
        steps = self.measured
        keys = ("framework", "launch", "queue", "sync", "wait", "idle", "coll")
        tot = [sum(getattr(s, f"host_{k}_ns") for s in steps) for k in keys]
        w = sum(tot)
        out = {k: (v / w if w else 0.0) for k, v in zip(keys, tot)}
        if not tot[-1]:  # (only where gloo ran collectives on the host)
            del out["coll"]
        return out

    def _of_host(self, attr: str) -> float:
        """The measured steps' `attr` (a StepBreakdown host part's ns) as a share of their host time."""
        steps = self.measured
        w = sum(s.host_end_ns - s.host_start_ns for s in steps)
        return sum(getattr(s, attr) for s in steps) / w if w > 0 else 0.0

    def host_thread_wait_share(self) -> float:
        """Of the measured steps' host time: the loop's thread blocked on another of its threads
        where nothing else is on record (a part of host_shares' idle)."""
        return self._of_host("host_idle_thread_ns")

    def host_loop_wait_share(self) -> float:
        """Of the measured steps' host time: the loop's thread blocked on another of its threads,
        all of it (whether or not its other threads' work is on record meanwhile)."""
        return self._of_host("host_loop_wait_ns")

    def host_python_share(self) -> float:
        """Of the measured steps' host time: framework time inside Python frames alone (a part of
        host_shares' framework)."""
        return self._of_host("host_python_ns")

    def host_alloc_share(self) -> float:
        """Of the measured steps' host time: launch-part time in calls that allocate or free
        memory (a part of host_shares' launch)."""
        return self._of_host("host_alloc_ns")

    def host_annotation_share(self) -> float:
        """Of the measured steps' host time: framework time inside annotated ranges alone (a part
        of host_shares' framework)."""
        return self._of_host("host_annotation_ns")

    def nccl_unmatched_share(self) -> float:
        """Of the measured steps' GPU time: NCCL kernels matched with no other rank's (a part of
        shares' nccl_transfer, their wait not told apart)."""
        steps = self.measured
        w = sum(s.gpu_time_ns for s in steps)
        return sum(self.unmatched_ns.get(s.step, 0) for s in steps) / w if w else 0.0

    def total(self, key: str) -> int:
        return sum(getattr(s, key) for s in self.measured)


def gpu_ops(trace: Trace, rank: int) -> np.ndarray:
    lanes = [i for i, ln in enumerate(trace.lanes) if ln.rank == rank and ln.kind in GPU_LANE_KINDS]
    if not lanes:
        return np.zeros(0, np.int64)
    parts = [np.arange(trace.lane_slice(ln).start, trace.lane_slice(ln).stop) for ln in lanes]
    idx = np.concatenate(parts)
    cat = np.asarray(trace.columns["cat"][idx])
    keep = (cat == Cat.KERNEL) | (cat == Cat.COMM_KERNEL) | (cat == Cat.MEMCPY) | (cat == Cat.MEMSET)
    return idx[keep]


def launch_calls(trace: Trace, ops: np.ndarray) -> np.ndarray:
    """The event of the CUDA call that launched each op (its flow's source), -1 where none is on record."""
    out = np.full(len(ops), -1, np.int64)
    d_sorted, s_by_dst = flows_by_dst(trace)
    if len(d_sorted) and len(ops):
        pos = np.minimum(np.searchsorted(d_sorted, ops), len(d_sorted) - 1)
        hit = d_sorted[pos] == ops
        out[hit] = s_by_dst[pos[hit]]
    return out


def launch_ends(trace: Trace, ops: np.ndarray) -> np.ndarray:
    """When the call that launched each op returned; the largest int64 where none is on record."""
    call = launch_calls(trace, ops)
    hit = call >= 0
    out = np.full(len(ops), np.iinfo(np.int64).max, np.int64)
    c = trace.columns
    out[hit] = np.asarray(c["start"][call[hit]]).astype(np.int64) + np.asarray(c["dur"][call[hit]]).astype(np.int64)
    return out


def latest_by_start(starts: np.ndarray, ends: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each distinct start (sorted), and the latest of `ends` among the ops starting there: when
    the last of the calls that launched them returned."""
    o = np.argsort(starts, kind="stable")
    uniq, first = np.unique(starts[o], return_index=True)
    return uniq, (np.maximum.reduceat(ends[o], first) if len(first) else np.zeros(0, np.int64))


def launch_times(trace: Trace, ops: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Start of the CUDA call that launched each op, and whether one is on record."""
    start = np.asarray(trace.columns["start"])
    call = launch_calls(trace, ops)
    linked = call >= 0
    out = start[ops].copy()
    out[linked] = start[call[linked]]
    return out, linked


def attribute_steps(
    trace: Trace, ops: np.ndarray, host_st: np.ndarray, host_en: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Index into the host steps of each op (-1: none), by launch, then by stream order, then
    by time; which ops had no launch on record and still got no step; and which were launched
    before the capture (no launch on record, ahead of their stream's first op with one)."""
    if not len(ops):
        return np.zeros(0, np.int64), np.zeros(0, bool), np.zeros(0, bool)
    launch, linked = launch_times(trace, ops)
    k = np.searchsorted(host_st, launch, side="right") - 1
    inside = linked & (k >= 0) & (launch <= host_en[np.maximum(k, 0)])
    k = np.where(inside, k, -1)
    # Ops without a launch record: the step of the previous linked op on the same lane. An op
    # linked to a launch outside every step stays outside (it is still "linked").
    lane = np.asarray(trace.columns["lane"][ops])
    start = np.asarray(trace.columns["start"][ops])
    order = np.lexsort((start, lane))
    k_o, linked_o, lane_o = k[order], linked[order], lane[order]
    # carry the last linked position forward; one carried over from an earlier lane is void
    carried = np.maximum.accumulate(np.where(linked_o, np.arange(len(ops)), -1))
    first_of_lane = np.r_[True, lane_o[1:] != lane_o[:-1]]
    lane_start = np.flatnonzero(first_of_lane)[np.cumsum(first_of_lane) - 1]
    carried = np.where(carried >= lane_start, carried, -1)
    filled = np.where(carried >= 0, k_o[np.maximum(carried, 0)], -1)
    k_o = np.where(linked_o, k_o, filled)
    out = np.empty_like(k)
    out[order] = k_o
    before = np.empty(len(ops), bool)
    before[order] = ~linked_o & (carried < 0)
    # A stream with no launch record at all: the step whose host range holds the op's start, or
    # whose range ended before it while the next had not begun (the GPU runs behind the host);
    # after the last step's range, none. (Unlinked ops before a stream's first linked op are not
    # placed by time: they are the tail of the step before the capture, still running.)
    loose = ~np.isin(lane, np.unique(lane[linked]))
    if loose.any():
        t = start[loose]
        kt = np.searchsorted(host_st, t, side="right") - 1
        last = len(host_st) - 1
        ok = (kt >= 0) & ((kt < last) | (t <= host_en[min(last, len(host_en) - 1)]))
        out[loose] = np.where(ok, kt, -1)
    return out, loose & (out < 0), before & ~loose


def rank_breakdown(trace: Trace, rank: int) -> RankBreakdown:
    c = trace.columns
    ops = gpu_ops(trace, rank)
    steps = sorted(trace.steps_of_rank(rank), key=lambda s: s.start)
    rb = RankBreakdown(rank)
    s_all = np.asarray(c["start"][ops]).astype(np.int64)
    e_all = s_all + np.asarray(c["dur"][ops]).astype(np.int64)
    cat = np.asarray(c["cat"][ops])
    windows: list[tuple[int | None, int, int]]  # (step, start, end); step None: the whole capture
    if steps:
        host_st = np.array([s.start for s in steps], np.int64)
        host_en = np.array([s.end for s in steps], np.int64)
        k, unplaced, pre = attribute_steps(trace, ops, host_st, host_en)
        rb.unplaced = int(unplaced.sum())
        rb.unplaced_kernels = bool(np.all(np.isin(cat[unplaced], (Cat.KERNEL, Cat.COMM_KERNEL))))
        windows = [(s.step, s.start, s.end) for s in steps]
    else:
        lo = int(s_all.min()) if len(s_all) else 0
        hi = int(e_all.max()) if len(e_all) else lo
        k = np.zeros(len(ops), np.int64)
        windows = [(None, lo, hi)]
    rb.ops = ops
    rb.n_ops = int(len(ops))
    step_no = np.array([w[0] if w[0] is not None else -1 for w in windows], np.int64)
    rb.op_step = np.where(k >= 0, step_no[np.maximum(k, 0)], -1) if len(k) else np.zeros(0, np.int64)
    # A step's GPU window runs from its first op to its last, never starting before the previous
    # step's window ended. GPU idle between two windows is kept beside them: the part after the
    # host began the next step is that step's idle_before (the host was preparing it: a slow input
    # pipeline), the part before is the previous step's idle_after (the host was finishing it).
    busy_all = iv.union(s_all, e_all)
    # what fills a window is measured on the rank's whole GPU timeline, not only on the step's own
    # ops: where work of the next step already runs inside this window (another stream, the GPU
    # behind the host), counting only this step's ops called that busy time idle
    comp_all = iv.union(s_all[cat == Cat.KERNEL], e_all[cat == Cat.KERNEL])
    comm_all = iv.union(s_all[cat == Cat.COMM_KERNEL], e_all[cat == Cat.COMM_KERNEL])
    mem = (cat == Cat.MEMCPY) | (cat == Cat.MEMSET)
    filled = (busy_all, comp_all, comm_all, iv.union(s_all[mem], e_all[mem]), iv.intersect(comp_all, comm_all))
    queued = _queued_gaps(trace, ops, s_all, busy_all)
    # the ops grouped by step once (a mask per step made 40,000 steps quadratic), in their order
    by_step = np.argsort(k, kind="stable")
    bounds = np.searchsorted(k[by_step], np.arange(len(windows) + 1))
    s_g, e_g, c_g = s_all[by_step], e_all[by_step], cat[by_step]
    prev_end = None
    for i, (step, h0, h1) in enumerate(windows):
        a, b = int(bounds[i]), int(bounds[i + 1])
        if b > a:
            w0, w1 = int(s_g[a:b].min()), int(e_g[a:b].max())
        else:  # no GPU work: an empty window
            w0 = w1 = int(h0) if prev_end is None else prev_end
        if prev_end is not None:
            w0 = max(w0, prev_end)
            w1 = max(w1, w0)
        sb = StepBreakdown(step, w0, w1, int(h0), int(h1))
        _fill(sb, filled, c_g[a:b])
        sb.idle_queued_ns = iv.length(iv.clip(queued, w0, w1))
        if prev_end is not None and w0 > prev_end:
            split = min(max(int(h0), prev_end), w0)
            sb.idle_before_ns = iv.length(iv.gaps(busy_all, split, w0))
            rb.steps[-1].idle_after_ns = iv.length(iv.gaps(busy_all, prev_end, split))
        elif prev_end is None and b > a and w0 > int(h0):
            # the first step has no window before it, yet its host may stall before its first op
            # like every other step's (a slow input pipeline): the GPU idle from the host's start
            # (work still running from before the capture is busy, not idle)
            sb.idle_before_ns = iv.length(iv.gaps(busy_all, int(h0), w0))
        rb.steps.append(sb)
        prev_end = w1
    # (where the text says the GPU's shares too little to judge, the JSON holds no host split either)
    judged = bool(rb.steps) and min(rb.steps[0].window_ns, rb.steps[0].busy_ns) >= HOST_SPAN_NS
    if steps or judged:
        # a capture without steps: its host is measured over its GPU's window, as its GPU is (its
        # start-up's cudaMalloc calls, cloverleaf's 240 ms, are no loop's launch calls); it used
        # to have no host line at all (an audit)
        info: dict = {}
        for sb, hs in zip(rb.steps, host_split(trace, rank, [(w[1], w[2]) for w in windows], info)):
            (
                sb.host_framework_ns,
                sb.host_launch_ns,
                sb.host_queue_ns,
                sb.host_sync_ns,
                sb.host_wait_ns,
                sb.host_idle_ns,
                sb.host_idle_thread_ns,
                sb.host_annotation_ns,
                sb.host_coll_ns,
                sb.host_loop_wait_ns,
                sb.host_python_ns,
                sb.host_alloc_ns,
            ) = hs
        rb.host_ops_recorded = bool(info.get("ops", 1))
        if not steps:
            sb = rb.steps[0]
            rb.host_longest_call = longest_call(
                trace, info["events"], sb.start_ns, sb.end_ns, sb.host_launch_ns - sb.host_alloc_ns
            )
    if steps:
        _mark_backlog(rb, pre, s_all, e_all)
    _mark_warmup(rb)
    return rb


# the least GPU window and GPU work of a capture without steps whose host is split (as
# host_bound.MIN_GPU_TIME_NS and the rank line, model.fmt: less is too little to judge)
HOST_SPAN_NS = 1_000_000


QUEUED_GAP_NS = 100_000  # shorter gaps between queued ops are the GPU's own scheduling


def _queued_gaps(trace: Trace, ops: np.ndarray, s_all: np.ndarray, busy) -> tuple[np.ndarray, np.ndarray]:
    """The gaps of QUEUED_GAP_NS or more between the GPU's busy stretches whose next work had been
    launched before the gap began (every op starting the next stretch launched by a call that had
    returned by then; an op with no launch on record is not counted): the GPU waited for something
    other than its host (another stream, an event, another rank, a CUDA graph's own order)."""
    bs, be = busy
    none = (np.zeros(0, np.int64), np.zeros(0, np.int64))
    if len(bs) < 2 or not len(ops):
        return none
    starts, late = latest_by_start(s_all, launch_ends(trace, ops))
    nxt = bs[1:]
    pos = np.minimum(np.searchsorted(starts, nxt), len(starts) - 1)
    launched = np.where(starts[pos] == nxt, late[pos], np.iinfo(np.int64).max)
    g0, g1 = be[:-1], nxt
    q = (g1 - g0 >= QUEUED_GAP_NS) & (launched <= g0)
    return g0[q].astype(np.int64), g1[q].astype(np.int64)


def _mark_backlog(rb: RankBreakdown, pre: np.ndarray, s: np.ndarray, e: np.ndarray) -> None:
    """The first step's GPU window holds GPU work launched before the capture (`pre`, from
    attribute_steps: ops with no launch on record ahead of their stream's first op launched in the
    capture; a stream runs in launch order).
    Where they fill BACKLOG_SHARE of the window or more, the step is warm-up: its figures hold the
    step before's work (HTA's rank0: 59 ms of 368, a 24 ms SendRecv launched before the capture made
    step 550 an 'outlier'; trace_diff's test: step 1009's compute 120 ms against 84-88; audits'
    findings)."""
    sb = rb.steps[0]
    if not pre.any() or sb.window_ns <= 0:
        return
    # inside its GPU window: what its figures count beside its own work (work that ran before the
    # window, while the host began the step, is what a GPU-bound pipeline does in every step: pp_gpu's
    # GPU runs 160 ms behind its host, and its first step's savings are as the others')
    inside = pre & (e > sb.start_ns) & (s < sb.end_ns)
    sb.backlog_ns = iv.length(iv.clip(iv.union(s[pre], e[pre]), sb.start_ns, sb.end_ns))
    sb.backlog_ops = int(inside.sum())
    numbered = [x for x in rb.steps if x.step is not None]
    if len(numbered) >= 2 and sb.backlog_ns >= BACKLOG_SHARE * sb.window_ns:
        sb.warmup = sb.backlog_warm = True


def _fill(sb: StepBreakdown, filled: tuple, ct: np.ndarray) -> None:
    """Measure the window on the rank's GPU timeline (filled: the unions of all its ops, its
    kernels, communication kernels, memory ops, and kernels overlapping communication), so that
    the windows of one rank add up to its GPU time; the op counts are the step's own ops."""
    busy, comp, comm, mem, ovl = (iv.clip(u, sb.start_ns, sb.end_ns) for u in filled)
    sb.busy_ns = iv.length(busy)
    sb.compute_ns = iv.length(comp)
    sb.comm_ns = iv.length(comm)
    sb.transfer_ns = sb.comm_ns
    sb.memcpy_ns = iv.length(mem)
    sb.overlap_ns = iv.length(ovl)
    sb.exposed_comm_ns = sb.comm_ns - sb.overlap_ns
    sb.idle_ns = max(0, sb.window_ns - sb.busy_ns)
    sb.ops = int(len(ct))
    sb.kernels = int(((ct == Cat.KERNEL) | (ct == Cat.COMM_KERNEL)).sum())
    sb.comm_kernels = int((ct == Cat.COMM_KERNEL).sum())


def _mark_warmup(rb: RankBreakdown) -> None:
    """Only the first step can be warm-up, and only when the rank has at least three steps."""
    st = [s for s in rb.steps if s.step is not None]
    if len(st) < 3:
        return
    rest = np.median([s.window_ns for s in st[1:]])
    if rest > 0 and st[0].window_ns > WARMUP_FACTOR * rest:
        st[0].warmup = True


def breakdown(trace: Trace) -> list[RankBreakdown]:
    rbs = [rank_breakdown(trace, r.rank) for r in trace.ranks]
    # warm-up is a property of the job: a first step slow on every rank
    if len(rbs) > 1:
        warm = all(rb.steps and rb.steps[0].warmup for rb in rbs if rb.steps)
        if not warm:
            for rb in rbs:
                for s in rb.steps:
                    s.warmup = False
    return rbs


def set_caused(rbs: list[RankBreakdown], per_step: dict[int, dict]) -> None:
    """Per rank and step, the wait it caused each rank that waited for it."""
    for rb in rbs:
        for sb in rb.steps:
            d = per_step.get(sb.step) if sb.step is not None else None  # a whole capture (None): no collectives' step
            if d is not None:
                sb.caused_ns = int(d["caused_each"].get(rb.rank, 0))


def split_wait(rbs: list[RankBreakdown], colls) -> None:
    """Per rank, from its matched collective kernels (colls: collectives.Collectives): the union
    of [start, start + its wait) in a step's window is its wait (Instance.waits: to the last
    arrival, or its own end if that comes first; none for a sender done before its peer came),
    the rest of comm its transfer, of which the time of kernels matched with no other rank's
    (colls.unmatched_rows: their wait not told apart) is RankBreakdown.unmatched_ns. Works on
    the instances alone (each member's start, end and step), so the reduce needs no events."""
    acc: dict[int, tuple[list, list, list]] = {}
    for ins in colls.instances:
        waits = ins.waits()
        for k, r in enumerate(ins.ranks):
            a = acc.setdefault(r, ([], [], []))
            a[0].append(int(ins.starts[k]))
            a[1].append(int(ins.starts[k]) + int(waits[k]))
            a[2].append(int(ins.op_step[k]))
    for rb in rbs:
        w = acc.get(rb.rank)
        if w is None:
            continue
        s, wend, st = (np.array(x, np.int64) for x in w)
        rows = getattr(colls, "unmatched_rows", {}).get(rb.rank, [])
        us, ue, ust = (np.array([e[k] for e in rows], np.int64) for k in range(3))
        for sb in rb.steps:
            m = st == (sb.step if sb.step is not None else -1)
            um = ust == (sb.step if sb.step is not None else -1)
            waited = iv.EMPTY
            if m.any():
                a = np.clip(s[m], sb.start_ns, sb.end_ns)
                b = np.clip(np.maximum(wend[m], s[m]), sb.start_ns, sb.end_ns)
                waited = iv.union(a, b)
                sb.wait_ns = min(sb.comm_ns, iv.length(waited))
                sb.transfer_ns = sb.comm_ns - sb.wait_ns
            if um.any():
                u = iv.union(np.clip(us[um], sb.start_ns, sb.end_ns), np.clip(ue[um], sb.start_ns, sb.end_ns))
                both = iv.union(np.concatenate([waited[0], u[0]]), np.concatenate([waited[1], u[1]]))
                rb.unmatched_ns[sb.step] = min(sb.transfer_ns, iv.length(both) - iv.length(waited))
