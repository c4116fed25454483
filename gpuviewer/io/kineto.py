"""PyTorch profiler (Kineto) and generic Chrome trace JSON -> TraceBuilder.

Meaning follows formats.md section C: GPU events have pid = device and tid = stream; host
events pid/tid of the OS thread; `[memory]` instants are allocator counters; ProfilerStep#N
are steps; NCCL kernels and record_param_comms / nccl:* ops are communication.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Callable

import numpy as np

from ..model.build import TraceBuilder, mark_comm_lanes, nccl_name_ids
from ..model.categories import Cat, LaneKind
from ..model.distinct import narrow_ids
from ..model.trace import Counter, Step
from . import kineto_numbered
from .arg_capture import Collected
from .chrome_json import ENDS_EARLY, Piece, read_chrome_json
from .chrome_values import floats, num, text, us_to_ns
from .errors import TraceError
from .kineto_cats import PROFILER_RANGE, CatMap, device_processes, profiler_range_warning, unknown_warning
from .kineto_memory import NO_ID
from .kineto_meta import RANK_MAX, bad_warnings, clock_base_ns, int_or_none, plain, rank_from_meta
from .kineto_piece import extract_piece
from .piece_reader import PieceReader, record_file, shutdown_pool  # noqa: F401 - app/cli.py stops the pool through this module
from .step_stub import duration_words, stopped_step

_GPU_KINDS = (LaneKind.GPU, LaneKind.GPU_ANNOTATION)
_STEP = re.compile(r"^ProfilerStep#(\d{1,18})$")  # 19 digits and more do not fit int64
_HUGE_STEP = re.compile(r"^ProfilerStep#\d{19,}$")
# torch.optim's own range around each optimizer step ("Optimizer.step#SGD.step"): the iterations
# of a capture made without the profiler's schedule, which records no ProfilerStep
OPTIMIZER_STEP = re.compile(r"^Optimizer\.step#")
MEM_BYTES_MAX = float(1 << 60)  # an allocator counter past an exabyte is garbage
# compressed or plain size above which the pool pays off (ooc_pool's workers set it out of reach)
_PARALLEL_MIN_BYTES = 4 << 20


class _NameMap(dict):
    def __init__(self, interner) -> None:
        super().__init__()
        self.interner = interner

    def __missing__(self, name):
        s = name if isinstance(name, str) else ("" if name is None else str(name))
        v = self[name] = self.interner.id(s)
        return v


class _FileReader(PieceReader):
    def __init__(self, b: TraceBuilder, path: str, file_index: int, parallel: bool) -> None:
        self.b = b
        self.path = path
        self.source = file_index
        self.cut_short = False  # the file ends early (read_kineto sets it): its last step is not judged
        super().__init__(parallel)
        self.reset()

    def reset(self) -> None:
        self.cats = CatMap()
        self.names = _NameMap(self.b.names)
        self.lanes: list[dict] = []  # local lanes: kind, device, stream, pid, pidtid
        self.lane_index: dict = {}
        self.chunks: list[dict] = []
        self.inst: list[tuple] = []
        self.begins: list[tuple] = []  # B/E and b/e events, matched at the end
        # GPU memory samples in file order: a piece's columns (kineto_memory), or (ts, device,
        # allocated, reserved) of a piece the general path read
        self.mem: list[dict | tuple] = []
        self.counters: dict[tuple, list] = {}
        self.meta_events: list[tuple] = []
        self.n_flow = 0
        self.numbered: list[int] | None = None  # its "Ev Idx" numbers, summed up (kineto_numbered.add)
        self.min_ts = np.inf
        self.reset_pieces()
        self.bad: dict[str, int] = {}  # events skipped or coerced, by reason (kineto_piece)
        self.unknown_cats: dict[str, int] = {}  # slices of a category not understood, by category
        self.unknown_lanes: dict[int, int] = {}  # ... by local lane
        self.profiler_ranges = 0  # kernels under CUPTI's range profiler (kineto_cats.PROFILER_RANGE)
        self.range_lanes: set[int] = set()  # the local lanes they are on
        self.annotated_lanes: set[int] = set()  # local lanes with other GPU annotations
        self.kept = Collected()  # the analysis' arguments (io/arg_capture.py)

    def lane_for(self, kind: str, pid, tid) -> int:
        device: int | None
        p: int | None
        if kind in _GPU_KINDS:
            device, stream, p = int_or_none(pid, RANK_MAX), int_or_none(tid), -1
            device = -1 if device is None else device
        else:
            device, stream, p = -1, int_or_none(tid), int_or_none(pid)
        key = (kind, device, -1 if p is None else p, -1 if stream is None else stream)
        i = self.lane_index.get(key)
        if i is None:
            i = self.lane_index[key] = len(self.lanes)
            self.lanes.append({"kind": kind, "device": key[1], "pid": key[2], "stream": key[3], "pidtid": (pid, tid)})
        return i

    # -- pieces ----------------------------------------------------------------------------
    def on_chunk(self, evs, chunk: int, buf: Piece) -> None:
        # pieces already decoded (by the exact walk) are turned into columns here
        self.piece(extract_piece, buf, chunk, evs, here=evs is not None)

    def merge_piece(self, r: dict, base: int) -> None:
        self.n_flow += r["n_flow"]
        self.numbered = kineto_numbered.add(self.numbered, r.get("numbered"))
        for k, n in r.get("bad", {}).items():
            self.bad[k] = self.bad.get(k, 0) + n
        if "mem" in r:
            self.mem.append(r["mem"])
        if r.get("other"):
            self._others(r["other"], base)
        for name, pid, id_, ts, args in r.get("counters", ()):
            self._counter(name, pid, id_, ts, args)
        if "kept_args" in r:
            self.kept.add(r["kept_args"], base, self.b.arg_blobs)
        if not len(r["start"]):
            return
        keys = r["keys"]
        key_lane = np.empty(len(keys), np.int32)
        key_cat = np.empty(len(keys), np.uint8)
        unknown, ranges = [], []
        for k, (cat, pid, tid) in enumerate(keys):
            c, kind = self.cats[cat]
            key_lane[k] = self.lane_for(kind, pid, tid)
            key_cat[k] = c
            if cat in self.cats.unknown:
                unknown.append((k, cat))
            elif isinstance(cat, str) and cat.lower() == PROFILER_RANGE:
                ranges.append(k)
            elif kind == LaneKind.GPU_ANNOTATION:
                self.annotated_lanes.add(int(key_lane[k]))  # a lane shared with other ranges keeps its name
        if ranges or unknown:
            per_key = np.bincount(r["lane_key"], minlength=len(keys))  # events of each key
        for k in ranges:
            self.profiler_ranges += int(per_key[k])
            self.range_lanes.add(int(key_lane[k]))
        for k, cat in unknown:
            name = text(cat, 80)
            self.unknown_cats[name] = self.unknown_cats.get(name, 0) + int(per_key[k])
            li = int(key_lane[k])
            self.unknown_lanes[li] = self.unknown_lanes.get(li, 0) + int(per_key[k])
        name_ids = np.array([self.names[n] for n in r["names"]], np.int32)
        lk = r["lane_key"]
        self.min_ts = min(self.min_ts, r["min_ts"])
        self.chunks.append(
            {
                "start": r["start"],
                "dur": r["dur"],
                "lane": key_lane[lk],
                "cat": key_cat[lk],
                "name": name_ids[r["name"]],
                "corr": r["corr"],
                "src": r["src"] + base,
            }
        )

    def _others(self, other: list, base: int) -> None:
        inst_t, inst_lane, inst_name = [], [], []
        for ph, name, cat, pid, tid, ts, dur, id_, scope, a, pos in other:
            if ph in ("i", "I", "R", "n"):
                if name == "[memory]" and a is not None:
                    dtype, dev, alloc, res = a[0], int_or_none(a[1], RANK_MAX), a[2], a[3]
                    if dtype in (1, "1") or (dtype is None and dev not in (None, -1)):
                        self.mem.append((ts, dev, alloc, res))
                    continue
                if ph == "n":
                    continue
                kind = LaneKind.OTHER if scope == "g" else self.cats[cat][1]
                if kind == LaneKind.GPU_ANNOTATION:
                    kind = LaneKind.GPU
                inst_lane.append(self.lane_for(kind, pid, tid))
                inst_t.append(ts)
                inst_name.append(self.names[name])
            elif ph in ("B", "E", "b", "e"):
                self.begins.append((ph, name, cat, pid, tid, ts, id_, base + pos))
            elif ph == "M":
                self.meta_events.append((name, pid, tid, a))
        if inst_t:
            self.inst.append((us_to_ns(floats(inst_t)), np.array(inst_lane, np.int32), np.array(inst_name, np.int32)))
            self.min_ts = min(self.min_ts, float(np.nanmin(floats(inst_t))))

    def _counter(self, name, pid, id_, ts, args) -> None:
        if ts is None:
            return
        series = {}
        for k, v in args.items():
            f = num(v)
            if math.isfinite(f):
                series[text(k, 256)] = f
        for k, v in series.items():
            cname = f"{name}" if len(series) == 1 else f"{name}.{k}"
            if id_ is not None:
                cname = f"{cname}[{id_}]"
            self.counters.setdefault((str(pid), cname), []).append((ts, v))

    # -- end of file -----------------------------------------------------------------------
    def finish(self, meta: dict, rank: int, offset_ns: int, base_ns: int) -> None:
        """Commit this file's events to the builder as rank `rank`, shifted onto the session axis."""
        b = self.b
        self._match_begin_end()
        add = base_ns + offset_ns
        lane_map = np.empty(len(self.lanes), np.int32)
        for i, ln in enumerate(self.lanes):
            lane_map[i] = b.lane(rank, ln["kind"], ln["device"], ln["stream"], "", pid=ln["pid"], source=self.source)
        self.global_lanes = lane_map
        self._densify_correlation()
        for c in self.chunks:
            c["start"] += add
            c["lane"] = lane_map[c["lane"]]
        self._nccl_and_comm()
        for c in self.chunks:
            b.add(**c)
        if b.arg_parts is None:
            b.arg_parts = []
        self.kept.hand_over(b, self.source)
        for t, ln, nm in self.inst:
            b.add_instants(t + add, lane_map[ln], nm)
        info = b.rank(rank)
        info.files.append(self.path)
        info.clock_offset_ns = offset_ns
        dist = meta.get("distributedInfo")
        if not isinstance(dist, dict):
            dist = {}
        ws = dist.get("world_size")
        if type(ws) is int and 0 < ws < RANK_MAX:
            info.world_size = ws
        props = meta.get("deviceProperties")
        for dp in props if isinstance(props, list) else []:
            if isinstance(dp, dict) and type(dp.get("id")) is int and 0 <= dp["id"] < RANK_MAX:
                info.device_props[dp["id"]] = {text(k, 256): p for k, v in dp.items() if (p := plain(v)) is not None}
        if isinstance(meta.get("host_name"), str):
            info.host = text(meta["host_name"], 4096)
        self._labels()
        self._steps(rank, add)
        self._memory(rank, add)
        for (pid, name), pts in self.counters.items():
            arr = np.array(pts, dtype=np.float64)
            o = np.argsort(arr[:, 0], kind="stable")
            dev = int_or_none(pid, RANK_MAX)
            b.counters.append(Counter(rank, -1 if dev is None else dev, name, us_to_ns(arr[o, 0]) + add, arr[o, 1]))

    def _densify_correlation(self) -> None:
        """Correlation ids only matter for equality within a rank: ids past 32 bits (merged or
        scaled traces) are renumbered (model.distinct.narrow_ids) so the column stays uint32."""
        for c, q in zip(self.chunks, narrow_ids([c["corr"] for c in self.chunks])):
            c["corr"] = q

    def device_lanes(self) -> dict[str, int]:
        """Lanes of a device's process (its name or label 'MTIA 0', 'GPU 1'...) that hold only
        slices of categories not understood become that device's lanes (the slices stay 'other',
        out of the GPU analysis). Returns {device process label: slices} for the warning."""
        dev = device_processes(self.meta_events) if self.unknown_lanes else {}
        if not dev:
            return {}
        per_lane = np.zeros(len(self.lanes), np.int64)
        for c in self.chunks:
            per_lane += np.bincount(c["lane"], minlength=len(self.lanes))[: len(self.lanes)]
        out: dict[str, int] = {}
        for li, n in self.unknown_lanes.items():
            ln = self.lanes[li]
            pid = ln["pidtid"][0]
            if ln["kind"] != LaneKind.CPU or pid not in dev or per_lane[li] != n:
                continue
            label, ordinal = dev[pid]
            ln["kind"] = LaneKind.GPU
            d = int_or_none(pid, RANK_MAX)
            ln["device"] = ordinal if ordinal is not None else d if d is not None and d >= 0 else -1
            out[label] = out.get(label, 0) + n
        return out

    def _match_begin_end(self) -> None:
        if not self.begins:
            return
        stacks: dict = {}
        async_open: dict = {}
        starts, durs, lanes, names, cats, srcs = [], [], [], [], [], []
        last_ts = 0.0
        for row in self.begins:
            try:
                last_ts = max(last_ts, float(row[5]))
            except (TypeError, ValueError):
                pass
        unmatched = 0

        def emit(row, ts1, name, is_async=False):
            _ph, _n, cat, pid, tid, ts0, _id, src = row
            c, kind = self.cats[cat]
            starts.append(float(ts0))
            durs.append(max(0.0, float(ts1) - float(ts0)))
            if is_async:
                lanes.append(self.lane_for(LaneKind.OTHER, pid, f"async {cat}"))
                cats.append(Cat.ASYNC)
            else:
                lanes.append(self.lane_for(kind, pid, tid))
                cats.append(c)
            names.append(self.names[name])
            srcs.append(src)

        for row in self.begins:
            ph, name, cat, pid, tid, ts, id_, _src = row
            if ts is None:
                continue
            if ph == "B":
                stacks.setdefault((pid, tid), []).append(row)
            elif ph == "E":
                st = stacks.get((pid, tid))
                if st:
                    rb = st.pop()
                    emit(rb, ts, rb[1] if rb[1] is not None else name)
                else:
                    unmatched += 1
                    emit(row, ts, name or "(end without begin)")
            elif ph == "b":
                async_open.setdefault((cat, id_, name), []).append(row)
            elif ph == "e":
                st = async_open.get((cat, id_, name)) or async_open.get((cat, id_, None))
                if st:
                    rb = st.pop()
                    emit(rb, ts, rb[1], True)
                else:
                    unmatched += 1
        for st in stacks.values():
            for rb in st:
                unmatched += 1
                emit(rb, last_ts, rb[1])
        for st in async_open.values():
            for rb in st:
                unmatched += 1
                emit(rb, last_ts, rb[1], True)
        if unmatched:
            self.b.warnings.append(
                f"{os.path.basename(self.path)}: {unmatched} begin/end events "
                "without a partner (kept; open ones end at the last event)"
            )
        if starts:
            self.chunks.append(
                {
                    "start": us_to_ns(np.array(starts)),
                    "dur": us_to_ns(np.array(durs)),
                    "lane": np.array(lanes, np.int32),
                    "name": np.array(names, np.int32),
                    "cat": np.array(cats, np.uint8),
                    "corr": np.zeros(len(starts), np.int64),
                    "src": np.array(srcs, np.int64),
                }
            )
            self.min_ts = min(self.min_ts, min(starts))

    def _labels(self) -> None:
        proc, thread = {}, {}
        for name, pid, tid, a in self.meta_events:
            if a is None:
                continue
            label = a[4] if not isinstance(a[4], str) else text(a[4], 4096)
            if name == "process_name" and isinstance(label, str):
                proc[pid] = label
            elif name == "thread_name" and isinstance(label, str):
                thread[(pid, tid)] = label.strip()
        for i, local in enumerate(self.lanes):
            lane = self.b.lanes[self.global_lanes[i]]
            if lane.label:
                continue
            pid, tid = local["pidtid"]
            tname = thread.get((pid, tid))
            if lane.kind in _GPU_KINDS or lane.kind == LaneKind.COMM:
                # stream -1: CUPTI's context-wide synchronizations ('Context Sync'), as nsys names
                # them (alexnet's 'GPU 0 · stream -1'; an audit of the window)
                base = "context sync" if lane.stream == -1 else f"stream {lane.stream}"
                lane.label = f"{base} annotations" if lane.kind == LaneKind.GPU_ANNOTATION else base
                if i in self.range_lanes and i not in self.annotated_lanes:
                    lane.label = "kernels under CUPTI's range profiler"
            elif lane.kind == LaneKind.CUDA_API:
                lane.label = f"CUDA API · {tname or f'thread {tid}'}"
            elif lane.kind == LaneKind.CPU:
                lane.label = tname or f"thread {tid}"
            elif pid in (-1, "-1"):
                lane.label = "profiler overhead"
            else:
                lane.label = str(pid) if pid not in ("", None) else "trace"
                if isinstance(tid, str) and tid.startswith("async "):
                    lane.label = f"{lane.label} · {tid}"

    def _nccl_and_comm(self) -> None:
        """NCCL kernels -> COMM_KERNEL; CPU-side collectives -> COMM_OP; stream lanes that run
        only NCCL kernels become communication lanes."""
        strings = self.b.names.strings
        nccl = nccl_name_ids(strings)
        comm_ops = np.array(
            [
                i
                for i, s in enumerate(strings)
                if s.startswith("nccl:") or s == "record_param_comms" or s.startswith("c10d::")
            ],
            np.int32,
        )
        for c in self.chunks:
            cat = c["cat"]
            if len(nccl):
                cat[(cat == Cat.KERNEL) & np.isin(c["name"], nccl)] = Cat.COMM_KERNEL
            if len(comm_ops):
                host = (cat == Cat.CPU_OP) | (cat == Cat.USER_ANNOTATION)
                cat[host & np.isin(c["name"], comm_ops)] = Cat.COMM_OP
        mark_comm_lanes(self.b.lanes, self.chunks)

    def _steps(self, rank: int, add: int) -> None:
        """The rank's steps from its ProfilerStep ranges (add: the shift onto the session's axis,
        which the chunks have had and the instants have not)."""
        strings = self.b.names.strings
        step_ids = {i: int(m.group(1)) for i, s in enumerate(strings) if (m := _STEP.match(s))}
        huge = sum(1 for s in strings if s.startswith("ProfilerStep#") and _HUGE_STEP.match(s))
        if huge:
            self.b.warnings.append(
                f"{os.path.basename(self.path)}: {huge} ProfilerStep annotation "
                "name(s) with a step number too large to be one (19 digits or "
                "more): shown, but not used as steps"
            )
        if not step_ids:
            self._optimizer_steps(rank)
            return
        ids = np.array(list(step_ids), np.int32)
        seen = set()
        first = len(self.b.steps)
        # PyTorch 1.10+ records ProfilerStep#N as a user_annotation; 1.8/1.9 as an `Operator`
        # (cpu_op) event. The annotation wins where a trace holds both for one step.
        for cat in (Cat.USER_ANNOTATION, Cat.CPU_OP):
            for c in self.chunks:
                m = np.isin(c["name"], ids) & (c["cat"] == cat)
                for s, d, n in zip(c["start"][m].tolist(), c["dur"][m].tolist(), c["name"][m].tolist()):
                    step = step_ids[n]
                    if step in seen:
                        continue
                    seen.add(step)
                    self.b.steps.append(Step(rank, step, s, s + d))
        stub = None if self.cut_short else stopped_step(self.chunks, self.b.steps[first:], ids)
        if stub is not None:
            self.b.steps.remove(stub)
            self.b.warnings.append(
                f"{os.path.basename(self.path)}: ProfilerStep#{stub.step} ({duration_words(stub.end - stub.start)}, "
                "the last, after every other step) has no op, call or kernel starting in it, as the range a p.step() "
                "right before the profiler's exit leaves: drawn on the timeline, not counted as a step"
            )
        self._clip_to_record_window(first, add)

    def _clip_to_record_window(self, first: int, add: int) -> None:
        """A step range running past Kineto's 'Record Window End' instant ends there: nothing after
        it was recorded (HTA's triton_example: ProfilerStep#1 closed 13.3 s after the window's end,
        1.8 ms after its start; its host time was '100% no op recorded'). Said in a warning."""
        nid = self.b.names.find("Record Window End")
        if nid is None:
            return
        ends = [np.asarray(t)[np.asarray(nm) == nid] for t, _ln, nm in self.inst]
        got = np.concatenate(ends) if ends else np.zeros(0, np.int64)
        if not len(got):
            return
        end = int(got.max()) + add  # the instants are moved onto the session's axis at commit (add)
        for st in self.b.steps[first:]:
            if st.start < end < st.end:
                self.b.warnings.append(
                    f"{os.path.basename(self.path)}: ProfilerStep#{st.step} runs "
                    f"{duration_words(st.end - end)} past the profiler's record window (its 'Record Window End'): "
                    "measured to the window's end, as nothing after it was recorded"
                )
                st.end = end

    def _optimizer_steps(self, rank: int) -> None:
        """No ProfilerStep ranges: a step is the span from one optimizer step's end to the next's
        (zero_grad, forward, backward and the step itself), numbered from 1; the part of an
        iteration before the first optimizer step, cut by the capture's start, is in none."""
        ids = np.array([i for i, s in enumerate(self.b.names.strings) if OPTIMIZER_STEP.match(s)], np.int32)
        if not len(ids):
            return
        spans: list[tuple[int, int]] = []
        for cat in (Cat.USER_ANNOTATION, Cat.CPU_OP):  # the annotation wins, as for ProfilerStep
            for c in self.chunks:
                m = np.isin(c["name"], ids) & (c["cat"] == cat)
                spans += zip(c["start"][m].tolist(), (c["start"][m] + c["dur"][m]).tolist())
            if spans:
                break
        outer: list[tuple[int, int]] = []
        for s0, e0 in sorted(spans, key=lambda x: (x[0], -x[1])):
            if outer and s0 < outer[-1][1]:
                continue  # inside the one before (a wrapper optimizer's step around its inner one)
            outer.append((s0, e0))
        for k in range(1, len(outer)):
            self.b.steps.append(Step(rank, k, outer[k - 1][1], outer[k][1]))

    def _memory_columns(self) -> dict | None:
        """The memory samples' columns in file order (t µs, dev, alloc, res), rows of pieces the
        general path read made columns the same way kineto_memory makes them."""
        parts: list[dict] = []
        rows: list[tuple] = []

        def flush() -> None:
            kept = [r for r in rows if r[0] is not None]
            if kept:
                parts.append(
                    {
                        "t": floats([r[0] for r in kept]),
                        "dev": np.array([NO_ID if r[1] is None else r[1] for r in kept], np.int64),
                        "alloc": floats([r[2] for r in kept]),
                        "res": floats([r[3] for r in kept]),
                    }
                )
            rows.clear()

        for m in self.mem:
            if isinstance(m, dict):
                flush()
                parts.append(m)
            else:
                rows.append(m)
        flush()
        if not parts:
            return None
        return {k: np.concatenate([p[k] for p in parts]) for k in ("t", "dev", "alloc", "res")}

    def _memory(self, rank: int, add: int) -> None:
        cols = self._memory_columns() if self.mem else None
        if cols is None or not len(cols["t"]):
            return
        bad = 0
        devs, first = np.unique(cols["dev"], return_index=True)
        for dev in devs[np.argsort(first)].tolist():  # in the order the devices first appear
            if dev == NO_ID:  # a CUDA sample naming no device: no curve to draw it on
                continue
            on = cols["dev"] == dev
            t = us_to_ns(cols["t"][on]) + add  # times were checked in kineto_piece / kineto_memory
            o = np.argsort(t, kind="stable")
            for key, name in (("alloc", "allocated"), ("res", "reserved")):
                v = cols[key][on][o]
                ok = ~np.isnan(v)
                # bytes are finite, not negative and below an exabyte: anything else (inf, -5e9,
                # 1e300) is a broken sample that would make peaks and axes absurd
                sane = ok & (v >= 0) & (v <= MEM_BYTES_MAX)
                bad += int(np.count_nonzero(ok & ~sane))
                if sane.any():
                    self.b.counters.append(Counter(rank, dev, name, t[o][sane], v[sane]))
        if bad:
            self.b.warnings.append(
                f"{os.path.basename(self.path)}: {bad:,} [memory] byte counts that are "
                "infinite, negative or over 1 EB skipped"
            )


def read_kineto(
    b: TraceBuilder, path: str, file_index: int, *, progress: Callable | None = None, cancelled: Callable | None = None
) -> dict:
    """Read one Chrome/Kineto JSON file. Returns per-file facts for the session (rank, clock
    base, metadata) and the reader, whose finish() commits the events once ranks are known."""
    parallel = os.path.getsize(path) >= _PARALLEL_MIN_BYTES
    fr = _FileReader(b, path, file_index, parallel)
    meta, chunks, warnings, gz = read_chrome_json(
        path, fr.on_chunk, progress=progress, cancelled=cancelled, restart=fr.reset, flush=fr.flush
    )
    fr.flush()
    fr.chunk_ordinals(chunks)
    early = next((w for w in warnings if ENDS_EARLY in w), None)
    fr.cut_short = early is not None  # its last step is not judged (step_stub)
    if fr.min_ts == np.inf:  # no slices or instants: begin/end pairs, memory or counters only?
        mem = fr._memory_columns()
        times = (
            [r[5] for r in fr.begins]
            + (mem["t"].tolist() if mem is not None else [])
            + [p[0] for pts in fr.counters.values() for p in pts]
        )
        fr.min_ts = float(min(times)) if times else np.inf
    warnings.extend(bad_warnings(fr.bad))
    if w := kineto_numbered.warning(fr.numbered):
        warnings.append(w)
    if fr.unknown_cats:
        warnings.append(unknown_warning(fr.unknown_cats, fr.device_lanes()))
    if fr.profiler_ranges:
        warnings.append(profiler_range_warning(fr.profiler_ranges))
    if fr.min_ts == np.inf:
        if early is not None and early.startswith("the compressed"):
            raise TraceError(path, early.split(", so ")[0] + ": there is no complete event before that")
        if early is not None:
            raise TraceError(
                path, "the file ends before its first complete event (cut off while writing?); copy or export it again"
            )
        if warnings:
            raise TraceError(path, "no readable trace events: " + "; ".join(warnings))
        raise TraceError(path, "no trace events in the file (its event list is empty)")
    base_ns = clock_base_ns(meta, warnings)
    record_file(b, path, chunks, gz, warnings)
    return {"reader": fr, "meta": meta, "rank": rank_from_meta(meta, path), "base_ns": base_ns, "min_ts_us": fr.min_ts}
