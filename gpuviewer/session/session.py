"""The Session: one opened set of traces and everything a user does with it (the view, notes,
analysis, queries), without a window. The CLI, reports, notebooks and the window all hold one.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from ..model.trace import Trace
from .actions import EVENTS, NoteActions, TopologyActions, ViewActions
from .events import Events
from .notes import Notes
from .opening import open_session
from .view import View

if TYPE_CHECKING:
    from ..analysis.results import Analysis
    from ..model.annotations import Annotation
    from ..model.layout import ViewState


class Session:
    """An opened session without a window: the trace and what is derived from it (computed once
    on first use), the view, the annotations and their sidecar. Every user action is a method
    that announces its change on `events`; the session is composed of the parts that do them
    (actions.py: view_actions, note_actions, topology_actions), each method here is theirs. The
    window, the command line, reports and notebooks all work through one of these.

    >>> s = Session.open(["samples/ddp"])
    >>> s.kernels.groupby("name", observed=True)["dur"].sum().nlargest(5)
    """

    def __init__(self, trace: Trace, paths: list[str] | None = None) -> None:
        """A session over a trace already read (Session.open reads the files); `paths`: its files."""
        self.paths = list(paths or trace.metadata.get("files", []))
        self._analysis: Analysis | None = None
        self._frames: dict = {}
        self._efficiency_view = None  # session.efficiency_view.EfficiencyView, once computed
        self.events = Events(*EVENTS)
        from ..model.layout import default_state

        self.view = View(lanes=default_state(trace))
        self.notes = Notes()  # empty and kept nowhere until open_annotations()
        self.notes.listeners.append(lambda: self.events.emit("annotations"))
        self.view_actions = ViewActions(trace, self.view, self.events, self.notes)
        self.note_actions = NoteActions(trace, self.paths, self.view, self.events, self.notes, self.view_actions)
        self.topology_actions = TopologyActions(trace, self.events, self.drop_analysis)
        self._trace = trace

    @property
    def trace(self) -> Trace:
        """The opened trace (model.trace.Trace: numpy columns, lanes, ranks, steps, flows)."""
        return self._trace

    @trace.setter
    def trace(self, trace: Trace) -> None:
        """Another trace for this session (a summary's, as ranks load): its parts act on it too."""
        self._trace = trace
        for part in (self.view_actions, self.note_actions, self.topology_actions):
            part.trace = trace

    @classmethod
    def open(
        cls,
        paths,
        *,
        use_cache: bool = True,
        align: bool = True,
        hosts: str | None = None,
        progress: Callable[[float, str], None] | None = None,
        cancelled: Callable[[], bool] | None = None,
    ) -> Session:
        """Open trace files or folders (one path or several) as a new Session, through the column
        cache and with the ranks' clocks aligned unless turned off; `hosts` ("0-3,4-7": ranks 0-3
        on one host, 4-7 on the next) overrides the hosts the files name. An unreadable file
        raises a GpuviewerError naming it."""
        paths = [paths] if isinstance(paths, str) else [str(p) for p in paths]
        return cls(
            open_session(paths, use_cache=use_cache, align=align, hosts=hosts, progress=progress, cancelled=cancelled),
            paths,
        )

    # -- what the files hold -------------------------------------------------------------
    @property
    def topology(self):
        """The topology joined to the session (model.topology.Topology), or None."""
        return self.trace.topology

    @property
    def snapshots(self) -> list:
        """The memory snapshots read with the traces (model.memory.SnapshotSeries each)."""
        return self.trace.snapshots

    @property
    def ranks(self) -> list[int]:
        """The rank numbers in the session."""
        return [r.rank for r in self.trace.ranks]

    @property
    def analysis(self) -> Analysis:
        """Per-step breakdown and findings (analysis.results.Analysis: `to_json()` is what
        `gpuviewer analyze --json` prints), computed on first use."""
        if self._analysis is None:
            self._analysis = self.compute_analysis()
        return self._analysis

    @property
    def analysis_json(self) -> dict:
        """The analysis as plain data (what `gpuviewer analyze --json` prints)."""
        return self.analysis.to_json()

    @property
    def analysis_ready(self) -> Analysis | None:
        """The analysis if it has been computed, else None (never computes)."""
        return self._analysis

    def compute_analysis(self) -> Analysis:
        """The analysis of this session, computed and returned, not kept: safe on a worker
        thread (the window's controller runs it there and hands it to set_analysis)."""
        from .analysis import analyze_session

        return analyze_session(self.trace)

    def run_analysis(self) -> Analysis:
        """Compute the analysis in this thread, keep it and announce it."""
        analysis = self.compute_analysis()
        self.set_analysis(analysis)
        return analysis

    def set_analysis(self, analysis: Analysis | None) -> None:
        """An analysis computed elsewhere (the window's worker thread) for this trace; None
        drops it (the topology changed: it must run again)."""
        self._analysis = analysis
        for name in ("steps", "collectives", "findings"):
            self._frames.pop(name, None)
        self.events.emit("analysis", analysis=analysis)

    def drop_analysis(self) -> None:
        """Forget the analysis and announce it (it is computed again on next use)."""
        self.set_analysis(None)

    # -- tables (pandas DataFrames built from the store's columns; see query/tables.py) ---
    def _frame(self, name: str):
        if name not in self._frames:
            from ..query import tables

            self._frames[name] = getattr(tables, name)(self)
        return self._frames[name]

    @property
    def slices(self):
        """Every slice: id, rank, lane, lane_kind, device, stream, name, category, start, dur,
        end, depth, corr. Filter with `slices_in` to build only part of it."""
        return self._frame("slices")

    def slices_in(
        self,
        *,
        rank: int | None = None,
        kind: str | None = None,
        start_ns: int | None = None,
        end_ns: int | None = None,
    ):
        """Slices of one rank and/or lane kind ("gpu", "comm", "cpu", "cuda_api", "nvtx", ...)
        overlapping [start_ns, end_ns), built from those lanes only."""
        from ..query import tables

        return tables.slices(self, rank=rank, kind=kind, start_ns=start_ns, end_ns=end_ns)

    @property
    def kernels(self):
        """GPU kernels (compute and NCCL), one row each, with a `kind` column."""
        return self._frame("kernels")

    @property
    def memops(self):
        """Memory copies and sets on the GPU, with kind (HtoD, DtoH, ...) and bytes."""
        return self._frame("memops")

    @property
    def steps(self):
        """Profiled steps per rank with their breakdown (compute, communication, idle, ...)."""
        return self._frame("steps")

    @property
    def collectives(self):
        """One row per rank's part in a matched collective: group, name, step, bytes, wait,
        transfer, busbw."""
        return self._frame("collectives")

    @property
    def counters(self):
        """Counter samples (GPU memory allocated/reserved, ...), long form."""
        return self._frame("counters")

    @property
    def findings(self):
        """Findings of the analysis, one row each, sorted by time lost."""
        return self._frame("findings")

    def sql(self, query: str):
        """Run DuckDB SQL over the tables above; returns a DataFrame."""
        from ..query.sql import run

        return run(self, query)

    def stats(
        self,
        report: str = "kern",
        *,
        rank: int | None = None,
        peak_tflops: float | None = None,
        peak_gbps: float | None = None,
    ):
        """A summary table like `nsys stats`: kern, api, nvtx, mem, nccl or efficiency (peak_*:
        the device's roofs for efficiency, overriding the table's)."""
        from ..query.stats import report as make

        return make(self, report, rank=rank, peak_tflops=peak_tflops, peak_gbps=peak_gbps)

    def efficiency(self, *, rank: int | None = None, peak_tflops: float | None = None, peak_gbps: float | None = None):
        """The kernels' work from their ops' shapes, rates against the device's roofs, Tensor-Core
        use (analysis.efficiency.Efficiency: families, ops; MFU per step once the analysis ran)."""
        from .analysis import efficiency_of

        return efficiency_of(self.trace, self._analysis, rank=rank, peak_tflops=peak_tflops, peak_gbps=peak_gbps)

    def kernel_launches(self, ids) -> dict[int, dict]:
        """Launch configurations of the kernels with these event ids, as recorded (Kineto's args
        or XLA's kernel_details): id -> {"grid", "block", "regs", "shared_bytes", "occupancy_pct"}."""
        import numpy as np

        from ..io.kernel_launch import kernel_launches

        return kernel_launches(self.trace, np.asarray(ids, np.int64))

    def efficiency_view(self):
        """The kernels' efficiency of every rank as the window shows it (efficiency_view.EfficiencyView:
        a table by op family, the roofline's points and roofs, each family's kernels), computed
        once and kept; safe on a worker thread."""
        if self._efficiency_view is None:
            from .analysis import EFFICIENCY_RANKS
            from .efficiency_view import build

            # past EFFICIENCY_RANKS ranks one rank stands for the job, as in the analysis (reading
            # every rank's op shapes took minutes at 64 ranks); the view says which
            rank = None if len(self.ranks) <= EFFICIENCY_RANKS else min(self.ranks)
            self._efficiency_view = build(self.trace, self.efficiency(rank=rank), rank, len(self.ranks))
        return self._efficiency_view

    def kernel_work(self, i: int) -> list[tuple[str, str]]:
        """A compute kernel's op, its shapes, FLOPs and achieved rate, as (field, value) rows; []
        for other events, and until efficiency_view() was computed (never computed here: a click
        stays quick)."""
        if self._efficiency_view is None:
            return []
        from ..io.op_shapes import op_shapes
        from .efficiency_view import kernel_rows

        return kernel_rows(self.trace, self._efficiency_view, i, op_shapes)

    def whatif(self, change: str, value: str | None = None, *, peak_gbps: float | None = None):
        """Each step's time re-timed with one change (analysis.whatif): change is "remove-gap"
        (value "RANK:STEP"), "rank-like-median" ("RANK[:host|gpu]"), "no-launch-overhead",
        "comm-at-peak" (peak_gbps, default NVLink 4's 450), "faster" ("NAME_REGEX:PCT"),
        "usual-op" ("RANK:STEP:NAME_REGEX"), "overlap-comm" (NAME_REGEX or None: all), "no-copies"
        or "no-syncs" (RANK, or None: every rank), or an
        analysis.whatif.Change. Returns a WhatIfResult (steps before/after, to_json())."""
        from ..analysis.whatif import Change, parse_change, whatif
        from ..io.comm_args import collective_args

        ch = change if isinstance(change, Change) else parse_change(change, value, peak_gbps)
        return whatif(self.trace, ch, collective_args(self.trace))

    def critical_paths(self):
        """Each step's critical path across ranks (analysis.critical_path): step -> CriticalPath;
        {} for a session without trace events to model (a memory timeline alone)."""
        from ..analysis.critical_path import critical_paths
        from ..io.comm_args import collective_args

        if not len(self.trace):
            return {}
        return critical_paths(self.trace, collective_args(self.trace))

    # -- what a user does (actions.py; each method is its part's, announced on `events`) --
    def set_range(self, t0: int, t1: int, padding: float = 0.0) -> tuple[int, int]:
        """Show [t0, t1], widened by `padding` of its span each side; returns the range now shown."""
        return self.view_actions.set_range(t0, t1, padding)

    def set_lanes(self, state) -> None:
        """Use this lane layout (a ViewState or its sidecar JSON) and announce it."""
        self.view_actions.set_lanes(state)

    def share_lanes(self, state: ViewState) -> None:
        """Draw from this lane layout object itself (not announced: a view is being built from it)."""
        self.view_actions.share_lanes(state)

    def lanes_changed(self) -> None:
        """Announce that the lane layout was changed in place (folded, hidden, pinned, moved)."""
        self.view_actions.lanes_changed()

    def select(self, i: int | None) -> None:
        """Select event i (None: nothing) and announce it, even when it is already selected."""
        self.view_actions.select(i)

    def select_area(self, t0: int, t1: int, lanes: list[int]) -> None:
        """Select the area [t0, t1] over these lane indices and announce it."""
        self.view_actions.select_area(t0, t1, lanes)

    def show_event(self, i: int) -> None:
        """Select event i and bring it into view."""
        self.view_actions.show_event(i)

    def search(self, text: str, regex: bool = False) -> int:
        """Find events whose name holds `text` (or matches it as a regex), select the first; returns the count."""
        return self.view_actions.search(text, regex)

    def mark_events(self, events, label: str) -> int:
        """Make these events the matches, named `label`, and select the first; returns their count."""
        return self.view_actions.mark_events(events, label)

    def refind(self) -> None:
        """Run the current search again over changed events (a rank loaded), selecting nothing."""
        self.view_actions.refind()

    def next_match(self, direction: int = 1) -> int | None:
        """Show the next (direction 1) or previous (-1) match; returns its event, None if no match."""
        return self.view_actions.next_match(direction)

    def goto_step(self, n: int) -> bool:
        """Show step n; returns False when there is no such step."""
        return self.view_actions.goto_step(n)

    def step_nav(self, direction: int) -> int | None:
        """Show the step after (direction 1) or before (-1) the one in view; returns its number or None."""
        return self.view_actions.step_nav(direction)

    def show_finding(self, f) -> int | None:
        """Zoom to a finding, highlight its ranks and select its first evidence; returns that event or None."""
        return self.view_actions.show_finding(f)

    def set_highlight(self, span: tuple[int, int, set] | None) -> None:
        """Highlight (t0, t1, ranks) on the timeline (None: nothing) and announce it."""
        self.view_actions.set_highlight(span)

    def keep_annotations_in(self, path: str | None) -> None:
        """Save annotations to this sidecar path from now on; None: save them nowhere."""
        self.note_actions.keep_in(path)

    def open_annotation_file(self, path: str) -> None:
        """Show the annotations of this file (never written back)."""
        self.note_actions.open_file(path)

    def open_annotations(self) -> str | None:
        """Read the sidecar beside the traces and restore its view; returns a warning or None."""
        return self.note_actions.open_annotations()

    def save_annotations(self) -> bool:
        """Write the sidecar (atomically) with the view; returns whether it was written."""
        return self.note_actions.save_annotations()

    def add_note(self, text: str, t: int | None = None, rank: int | None = None, lane: int | None = None) -> Annotation:
        """Add a note at time t (default: the middle of the view) on a rank and lane; returns it."""
        return self.note_actions.add_note(text, t, rank, lane)

    def add_region(self, text: str, t0: int, t1: int, rank: int | None = None) -> Annotation:
        """Add a region note over [t0, t1] on a rank (default: the first); returns it."""
        return self.note_actions.add_region(text, t0, t1, rank)

    def add_arrow(self, i: int, j: int, text: str = "") -> Annotation:
        """Add an arrow from event i to event j; returns it."""
        return self.note_actions.add_arrow(i, j, text)

    def mark(self, text: str, region: bool = False) -> Annotation:
        """Add a note at the selected event or the middle of the view (region=True: a region over the
        selected area or event); returns it."""
        return self.note_actions.mark(text, region)

    def edit_annotation(self, a: Annotation, **changes) -> None:
        """Change fields of an annotation (text=, title=, color=, ...) and announce it."""
        self.note_actions.edit_annotation(a, **changes)

    def remove_annotation(self, a: Annotation) -> None:
        """Remove an annotation and announce it."""
        self.note_actions.remove_annotation(a)

    def annotations_edited(self) -> None:
        """Announce that annotations were changed in place."""
        self.note_actions.annotations_edited()

    def goto_annotation(self, a: Annotation) -> None:
        """Show the time range of an annotation and bring its rank into view."""
        self.note_actions.goto_annotation(a)

    def attach_topology(self, topo) -> None:
        """Join a topology to the session and announce it; the analysis is dropped, to run again."""
        self.topology_actions.attach_topology(topo)

    def attach_topology_files(self, paths: list[str]) -> None:
        """Join the topology read from these files (JSON or `nvidia-smi topo -m`); TraceError names a bad one."""
        self.topology_actions.attach_topology_files(paths)

    def paste_topology(self, text: str) -> None:
        """Join the topology from pasted `nvidia-smi topo -m` text; TraceError when it is not that."""
        self.topology_actions.paste_topology(text)
