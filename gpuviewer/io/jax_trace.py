"""JAX / XLA profiler traces (`jax.profiler.start_trace`: plugins/profile/<run>/<host>.trace.json.gz,
Chrome trace JSON) -> TraceBuilder, into the same model as the Kineto reader makes.

What XLA writes: a process per device named `/device:GPU:N` whose threads are CUDA streams
(kernels, memsets and copies, each with hlo_module, hlo_op, correlation_id, kernel_details and
cuda_graph_id args) and a `/host:CPU` process (XLA runtime ops, TraceMe and Python ranges, the
CUDA calls that launched GPU work with the same correlation_id, and StepTraceAnnotation ranges:
an event named as the user named it, with step_num in its args). No categories: what an event
is follows from its process, name and arguments. One file is one host, so one rank; several
GPUs of one process are several devices of that rank.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable

import numpy as np

from ..model.build import TraceBuilder, mark_comm_lanes
from ..model.categories import Cat, LaneKind
from ..model.distinct import narrow_ids
from ..model.trace import Step, Trace
from .chrome_json import Piece, read_chrome_json
from .chrome_values import floats, us_to_ns
from .errors import Cancelled, TraceError, file_names, unexpected
from .jax_piece import extract
from .piece_reader import PieceReader, record_file, using_pool

_DEVICE = re.compile(r"^/device:([A-Za-z_]+):(\d{1,6})")
_HOST = re.compile(r"^/host:")
# XLA's collective thunks and NCCL's kernels: communication, not compute
_COMM = re.compile(
    r"^(nccl|(all-reduce|all-gather|reduce-scatter|all-to-all|ragged-all-to-all|"
    r"collective-permute|collective-broadcast|send|recv)(-start|-done)?([.\d_]|$))",
    re.IGNORECASE,
)
_MEMSET = re.compile(r"^memset", re.IGNORECASE)
_MEMCPY = re.compile(r"^memcpy", re.IGNORECASE)  # MemcpyH2D, MemcpyD2H, MemcpyD2D, MemcpyP2P
_API = re.compile(r"^cu(da)?[A-Z]")  # cuGraphLaunch, cuLaunchKernel, cudaMemcpyAsync, ...
_STREAM_THREAD = re.compile(r"^(stream\b|\d+$)", re.IGNORECASE)
# a jit module's execution on the host: the steps when no StepTraceAnnotation was recorded
_MODULE_RUN = re.compile(r"LoadedExecutable::Execute \((jit_[^)]*)\)$")
_HOST_SUFFIX = re.compile(r"(\.trace)?\.json(\.gz)?$", re.IGNORECASE)
_PARALLEL_MIN_BYTES = 4 << 20  # as io/kineto.py: below this the pool costs more than it saves


def host_of(path: str) -> str:
    """The host a file was written on: XLA names it `<host>.trace.json.gz`."""
    return _HOST_SUFFIX.sub("", os.path.basename(path)) or os.path.basename(path)


class _FileReader(PieceReader):
    """One file's pieces, kept until its process names are known (metadata events may come in
    any piece), then committed to the builder as one rank."""

    def __init__(self, b: TraceBuilder, path: str, source: int, parallel: bool) -> None:
        self.b, self.path, self.source = b, path, source
        super().__init__(parallel)
        self.reset()

    def reset(self) -> None:
        self.keys: dict = {}  # (pid, tid) -> file-level key
        self.hlos: dict = {}  # hlo_op -> file-level id
        self.chunks: list[dict] = []
        self.meta: list[tuple] = []
        self.inst: list[tuple] = []
        self.phases: dict[str, int] = {}
        self.bad: dict[str, int] = {}
        self.reset_pieces()
        self.min_ts = np.inf

    def on_chunk(self, _evs, chunk: int, buf: Piece) -> None:
        # the events handed in (if any) are Kineto's structs, which lack XLA's arguments: the
        # piece's bytes are decoded here (in a worker when the file is big)
        self.piece(extract, buf, chunk)

    def merge_piece(self, r: dict, base: int) -> None:
        for d, k in ((self.bad, "bad"), (self.phases, "phases")):
            for reason, n in r[k].items():
                d[reason] = d.get(reason, 0) + n
        self.meta += r["meta"]
        self.inst += r["inst"]
        if not len(r["start"]):
            return
        key_map = np.array([self.keys.setdefault(k, len(self.keys)) for k in r["keys"]], np.int32)
        hlo_map = np.array([self.hlos.setdefault(h, len(self.hlos)) for h in r["hlos"]], np.int32)
        name_ids = np.array([self.b.names.id(n) for n in r["names"]], np.int32)
        self.min_ts = min(self.min_ts, r["min_ts"])
        self.chunks.append(
            {
                "start": r["start"],
                "dur": r["dur"],
                "key": key_map[r["lane_key"]],
                "name": name_ids[r["name"]],
                "hlo": hlo_map[r["hlo"]],
                "corr": r["corr"],
                "src": r["src"] + base,
                "step": r["step"],
                "has_step": r["has_step"],
            }
        )

    # -- end of file: kinds, lanes, categories, steps -------------------------------------------
    def finish(self, rank: int) -> None:
        b = self.b
        procs = {pid: label for name, pid, _tid, label in self.meta if name == "process_name" and label}
        threads = {(pid, tid): label.strip() for name, pid, tid, label in self.meta if name == "thread_name" and label}
        info = b.rank(rank)
        info.files.append(self.path)
        info.host = host_of(self.path)
        # per file-level key: (lane kind, device, stream or thread)
        other = sorted({p for p in procs.values() if (m := _DEVICE.match(p)) and m.group(1).upper() != "GPU"})
        if other:  # a TPU's or other accelerator's lines: drawn, but not GPU work to analyse
            b.warnings.append(
                f"{os.path.basename(self.path)}: {', '.join(other[:4])}: not a GPU; its "
                "events are shown as annotation lanes, left out of the GPU analysis"
            )
        key_list = list(self.keys)
        kinds = [_lane_kind(procs.get(pid), threads.get((pid, tid))) for pid, tid in key_list]
        key_kind = np.array([LaneKind.ORDER[k[0]] for k in kinds], np.int8)
        strings = b.names.strings
        flags = _name_flags(strings)
        hlo_comm = np.array([bool(h and _COMM.match(h)) for h in self.hlos], bool)
        lanes: dict[tuple[int, bool], int] = {}  # (file key, on the CUDA API lane) -> builder lane

        def lane(k: int, api: bool) -> int:
            got = lanes.get((k, api))
            if got is None:
                (kind, device), (pid, tid) = kinds[k], key_list[k]
                kind = LaneKind.CUDA_API if api else kind
                p = -1 if kind in (LaneKind.GPU, LaneKind.GPU_ANNOTATION) else _int(pid)
                got = lanes[(k, api)] = b.lane(
                    rank, kind, device, _int(tid), _label(kind, tid, threads.get((pid, tid))), pid=p, source=self.source
                )
            return got

        gpu_order = LaneKind.ORDER[LaneKind.GPU]
        ann_order = LaneKind.ORDER[LaneKind.GPU_ANNOTATION]
        for c in self.chunks:
            kk = key_kind[c["key"]]
            f = flags[c["name"]]
            gpu = kk == gpu_order
            cat = np.full(len(kk), Cat.CPU_OP, np.uint8)
            cat[f == _PY] = Cat.PYTHON
            cat[c["has_step"]] = Cat.USER_ANNOTATION
            cat[(f == _COMM_F) & ~gpu] = Cat.COMM_OP
            api = ~gpu & (kk != ann_order) & ((c["corr"] > 0) | (f == _API_F))
            cat[api] = Cat.CUDA_DRIVER
            cat[gpu] = Cat.KERNEL
            cat[gpu & ((f == _COMM_F) | hlo_comm[c["hlo"]])] = Cat.COMM_KERNEL
            cat[gpu & (f == _SET)] = Cat.MEMSET
            cat[gpu & (f == _CPY)] = Cat.MEMCPY
            cat[kk == ann_order] = Cat.GPU_ANNOTATION
            ln = np.empty(len(kk), np.int32)
            for k in np.unique(c["key"]).tolist():
                m = c["key"] == k
                ln[m & ~api] = lane(k, False)
                if (m & api).any():
                    ln[m & api] = lane(k, True)
            c["cat"], c["lane"] = cat, ln
        self._steps(rank)
        mark_comm_lanes(b.lanes, self.chunks, self.source)
        self._dense_correlation()
        for c in self.chunks:
            b.add(
                start=c["start"],
                dur=c["dur"],
                lane=c["lane"],
                name=c["name"],
                cat=c["cat"],
                corr=c["corr"],
                src=c["src"],
            )
        self._instants(lane)

    def _dense_correlation(self) -> None:
        """The store keeps correlation ids as uint32 (model.distinct.narrow_ids: ids past that,
        of merged or scaled traces, renumbered, keeping which events share one)."""
        for c, q in zip(self.chunks, narrow_ids([c["corr"] for c in self.chunks])):
            c["corr"] = q

    def _steps(self, rank: int) -> None:
        """StepTraceAnnotation ranges (the most common name carrying step_num), else each run of
        the most run jit module."""
        named: dict[int, list] = {}
        for c in self.chunks:
            m = c["has_step"] & (c["cat"] == Cat.USER_ANNOTATION)
            for n, s, t, d in zip(
                c["name"][m].tolist(), c["step"][m].tolist(), c["start"][m].tolist(), c["dur"][m].tolist()
            ):
                named.setdefault(n, []).append((s, t, t + d))
        if named:
            rows = max(named.values(), key=len)
        else:
            runs: dict[str, list] = {}
            strings = self.b.names.strings
            for c in self.chunks:
                host = c["cat"] == Cat.CPU_OP
                for n, t, d in zip(c["name"][host].tolist(), c["start"][host].tolist(), c["dur"][host].tolist()):
                    mm = _MODULE_RUN.search(strings[n])
                    if mm:
                        runs.setdefault(mm.group(1), []).append((t, t + d))
            best = max(runs.values(), key=lambda r: (len(r), sum(e - s for s, e in r)), default=[])
            rows = [(i, s, e) for i, (s, e) in enumerate(sorted(best))]
        seen = set()
        for s, t0, t1 in sorted(rows, key=lambda r: r[1]):
            if s not in seen:  # the first range of a step number is the step
                seen.add(s)
                self.b.steps.append(Step(rank, s, t0, t1))

    def _instants(self, lane: Callable) -> None:
        rows = [(self.keys[(pid, tid)], name, ts) for name, pid, tid, ts in self.inst if (pid, tid) in self.keys]
        if not rows:
            return
        t = floats([r[2] for r in rows])
        ok = np.abs(t) <= 3.0e15
        self.b.add_instants(
            us_to_ns(t[ok]),
            np.array([lane(r[0], False) for r, k in zip(rows, ok) if k], np.int32),
            np.array([self.b.names.id(r[1]) for r, k in zip(rows, ok) if k], np.int32),
        )


_PY, _COMM_F, _API_F, _SET, _CPY = 1, 2, 3, 4, 5


def _name_flags(strings: list[str]) -> np.ndarray:
    """What each interned name says about its event, whatever process it is in."""
    out = np.zeros(len(strings), np.int8)
    for i, s in enumerate(strings):
        if s.startswith("$"):  # the Python tracer's ranges: "$file.py:12 fn"
            out[i] = _PY
        elif _COMM.match(s):
            out[i] = _COMM_F
        elif _MEMSET.match(s):
            out[i] = _SET
        elif _MEMCPY.match(s):
            out[i] = _CPY
        elif _API.match(s):
            out[i] = _API_F
    return out


def _int(v) -> int:
    return v if type(v) is int and -(1 << 62) < v < (1 << 62) else -1


def _lane_kind(process: str | None, thread: str | None) -> tuple[str, int]:
    """(lane kind, device) of a thread of a process. A device's threads are its streams,
    except the lines XLA derives from them ("XLA Ops", "XLA Modules", "Steps"), which annotate."""
    m = _DEVICE.match(process or "")
    if m is None:
        return LaneKind.CPU, -1
    device = int(m.group(2))
    if m.group(1).upper() != "GPU" or (thread and not _STREAM_THREAD.match(thread)):
        return LaneKind.GPU_ANNOTATION, device
    return LaneKind.GPU, device


def _label(kind: str, tid, thread: str | None) -> str:
    if kind == LaneKind.GPU:
        detail = re.sub(r"^Stream\s*#?\s*\d+\s*", "", thread or "").strip()
        return f"stream {tid}" + (f" {detail}" if detail else "")
    if kind == LaneKind.GPU_ANNOTATION:
        return thread or f"annotations {tid}"
    if kind == LaneKind.CUDA_API:
        return f"CUDA API · {thread or f'thread {tid}'}"
    return thread or f"thread {tid}"


def _warnings(r: _FileReader) -> list[str]:
    out = []
    if r.bad.get("ts"):
        out.append(f"{r.bad['ts']} events with an unreadable ts skipped")
    if r.bad.get("dur"):
        out.append(f"{r.bad['dur']} events with a negative or unreadable duration skipped")
    if r.bad.get("odd"):
        out.append(f"{r.bad['odd']} events with a list or object as pid, tid or name: kept, shown as text")
    if r.phases:
        shown = ", ".join(f"{n:,} '{p}'" for p, n in sorted(r.phases.items(), key=lambda kv: -kv[1]))
        out.append(f"events of phases this reader does not draw ({shown}) left out")
    return out


def read_file(b: TraceBuilder, path: str, source: int, progress=None, cancelled=None) -> _FileReader:
    fr = _FileReader(b, path, source, os.path.getsize(path) >= _PARALLEL_MIN_BYTES)
    _meta, chunks, warnings, gz = read_chrome_json(
        path, fr.on_chunk, progress=progress, cancelled=cancelled, restart=fr.reset, flush=fr.flush
    )
    fr.flush()
    fr.chunk_ordinals(chunks)
    warnings += _warnings(fr)
    if not fr.chunks:
        raise TraceError(
            path, "no complete events (ph 'X') in this XLA trace" + (": " + "; ".join(warnings) if warnings else "")
        )
    record_file(b, path, chunks, gz, warnings)
    return fr


def _without_perfetto_copies(files: list[str]) -> tuple[list[str], list[str]]:
    """create_perfetto_trace=True writes perfetto_trace.json.gz beside <host>.trace.json.gz with
    the same events: a run folder opened whole would show that host twice."""
    dirs = {os.path.dirname(os.path.abspath(f)) for f in files if not os.path.basename(f).startswith("perfetto_trace.")}
    copies = [
        f
        for f in files
        if os.path.basename(f).startswith("perfetto_trace.") and os.path.dirname(os.path.abspath(f)) in dirs
    ]
    return [f for f in files if f not in copies], copies


def _file_progress(progress, done: int, size: int, total: int, name: str):
    def prog(frac: float) -> None:
        if progress:
            progress((done + frac * size) / total * 0.9, f"reading {name}")

    return prog


def load_jax(files: list[str], progress=None, cancelled=None) -> Trace:
    """One rank per file (one file per host), times as XLA wrote them (µs from the capture's start)."""
    b = TraceBuilder("jax")
    files, copies = _without_perfetto_copies(files)
    for f in copies:
        b.warnings.append(
            f"{f}: left out: jax.profiler's copy for Perfetto of the <host>.trace.json.gz beside it (the same events)"
        )
    total = sum(max(1, os.path.getsize(f)) for f in files)
    done = 0
    with using_pool():  # shared with loads in other threads, stopped after the last
        for i, f in enumerate(files):
            size = max(1, os.path.getsize(f))
            try:
                fr = read_file(b, f, i, _file_progress(progress, done, size, total, os.path.basename(f)), cancelled)
                fr.finish(i)
            except (TraceError, Cancelled):
                raise
            except Exception as e:  # a failure no check foresaw: named after the file that caused it
                raise unexpected(f, e) from e
            done += size
    if not b.ranks:
        raise TraceError(file_names(files), "no trace in these files")
    if progress:
        progress(0.95, "sorting and nesting events")
    trace = b.finish()
    trace.metadata["files"] = [os.path.abspath(f) for f in files]
    trace.metadata["skipped_files"] = [os.path.abspath(f) for f in copies]
    trace.metadata["per_file"] = [
        {"path": os.path.abspath(f), "rank": i, "clock_offset_ns": 0, "base_ns": 0} for i, f in enumerate(files)
    ]
    return trace
