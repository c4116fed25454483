"""What a user does to an open session, without a window, in three parts a Session is composed
of, each handed what it acts on when it is made: ViewActions (the time range, lane layout,
selection, area, search, steps and findings), NoteActions (annotations and their sidecar) and
TopologyActions. Session offers each of their methods under the same name. Each change is
announced as a plain event (gpuviewer.session.events); the window's controller turns the events
into Qt signals, tests and notebooks connect functions.

Events and their keyword arguments:
  range(t0, t1)             the visible time range changed (absolute ns)
  lanes(state)              the lane layout (a model.layout.ViewState) changed
  selection(event)          an event was selected (None: nothing), also the same one again:
                            views bring it back into sight
  area(t0, t1, lanes)       an area selection (lane indices)
  search(text, count, pos)  a search ran (count matches) or moved to match pos
  highlight(span)           a finding's (t0, t1, ranks) is highlighted (None: none)
  reveal(rank)              bring a rank into view (scroll to its header)
  annotations()             the annotations changed (added, edited, removed, reloaded)
  topology()                a topology joined the session
  analysis(analysis)        an analysis is ready (None: it was dropped and must run again)
  message(text, error)      something to tell the user in one line
  dirty()                   the sidecar should be saved soon (the autosave policy below)
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from ..model.annotations import Annotation
    from ..model.layout import ViewState
    from ..model.trace import Trace
    from .events import Events
    from .notes import Notes
    from .view import View

EVENTS = (
    "range",
    "lanes",
    "selection",
    "area",
    "search",
    "highlight",
    "reveal",
    "annotations",
    "topology",
    "analysis",
    "message",
    "dirty",
)
# Autosave: the sidecar is written this long after the last change, so a burst of edits (or
# a pan) is one write.
AUTOSAVE_DELAY_S = 0.4


class ViewActions:
    """The view: what is shown, selected and searched. `trace` is the session's (a summary
    session replaces it as ranks load; Session keeps this in step); `notes` decides whether a
    view change is saved."""

    def __init__(self, trace: Trace, view: View, events: Events, notes: Notes) -> None:
        self.trace = trace
        self.view = view
        self.events = events
        self.notes = notes

    def set_range(self, t0: int, t1: int, padding: float = 0.0) -> tuple[int, int]:
        """Show [t0, t1] (widened by `padding` of its span on each side, not past the capture's
        ends: a finding's view ran to -29.7 ms, empty grey before the trace; an audit of the
        window; 50 ns at least)."""
        span = max(int(t1) - int(t0), 50)
        pad = int(span * padding)
        a, b = int(t0), int(t0) + span
        lo, hi = self.trace.start_ns, self.trace.end_ns
        rng = (max(a - pad, min(a, lo)), min(b + pad, max(b, hi)))
        if rng != self.view.range:
            self.view.range = rng
            self.events.emit("range", t0=rng[0], t1=rng[1])
            if self.notes.save_on_view_change():
                self.events.emit("dirty")
        return rng

    def set_lanes(self, state) -> None:
        """A lane layout (model.layout.ViewState, or its JSON as the sidecar keeps it)."""
        from ..model.layout import ViewState

        self.view.lanes = ViewState.from_json(state) if isinstance(state, dict) else state
        self.lanes_changed()

    def share_lanes(self, state: ViewState) -> None:
        """The lane layout a view draws from, the same object (its edits in place are announced
        with lanes_changed). Not announced: the view is being built from it."""
        self.view.lanes = state

    def lanes_changed(self) -> None:
        """The lane layout was changed in place (folded, hidden, pinned, moved)."""
        self.events.emit("lanes", state=self.view.lanes)
        if self.notes.save_on_view_change():
            self.events.emit("dirty")

    def select(self, i: int | None) -> None:
        """Select an event (None: nothing). Announced every time, also for the event already
        selected: a view unfolds what hides it again (the user may have folded its rank)."""
        i = None if i is None else int(i)
        if i is not None and not 0 <= i < len(self.trace):
            raise IndexError(f"no event {i} (the session has {len(self.trace)})")
        self.view.selected = i
        self.events.emit("selection", event=i)

    def select_area(self, t0: int, t1: int, lanes: list[int]) -> None:
        self.view.area = (int(t0), int(t1), list(lanes))
        self.events.emit("area", t0=int(t0), t1=int(t1), lanes=list(lanes))

    def show_event(self, i: int) -> None:
        """Select an event and bring it into view (the window centres on it)."""
        self.select(i)
        c = self.trace.columns
        s, d = int(c["start"][i]), int(c["dur"][i])
        if self.view.range is None or d > self.view.range[1] - self.view.range[0]:
            self.set_range(s, s + max(d, 1000), padding=0.1)
        else:
            w = self.view.range[1] - self.view.range[0]
            mid = s + d // 2
            self.set_range(mid - w // 2, mid - w // 2 + w)

    # -- search ----------------------------------------------------------------------------
    def search(self, text: str, regex: bool = False) -> int:
        """Every event whose name holds `text` (or matches the regular expression); the first
        match is selected. A bad pattern is a message and no matches."""
        import re

        from ..model.search import find

        self.view.search, self.view.regex, self.view.match_pos, self.view.search_error = text, regex, -1, ""
        if not text:
            self.view.mask, self.view.matches = None, np.zeros(0, np.int64)
            self.events.emit("search", text=text, count=0, pos=-1)
            return 0
        try:
            self.view.mask, self.view.matches = find(self.trace, text, regex)
        except re.error as e:
            self.view.mask, self.view.matches = None, np.zeros(0, np.int64)
            self.view.search_error = f"bad regex: {e}"
            self.events.emit("search", text=text, count=-1, pos=-1)
            return 0
        self.events.emit("search", text=text, count=len(self.view.matches), pos=-1)
        if len(self.view.matches):
            self.next_match(+1)
        return len(self.view.matches)

    def mark_events(self, events, label: str) -> int:
        """These events as the matches (the timeline highlights them, the search's keys step
        through them), named `label` where the search's text goes; the first is selected. Their
        count."""
        ev = np.unique(np.asarray(events, np.int64))
        mask = np.zeros(len(self.trace.columns["name"]), bool)
        mask[ev] = True
        v = self.view
        v.search, v.regex, v.match_pos, v.search_error = label, False, -1, ""
        v.mask = mask
        v.matches = ev[np.argsort(np.asarray(self.trace.columns["start"])[ev], kind="stable")]
        self.events.emit("search", text=label, count=len(ev), pos=-1)
        if len(ev):
            self.next_match(+1)
        return len(ev)

    def refind(self) -> None:
        """The search again over events that changed (a rank loaded), nothing selected."""
        from ..model.search import find

        v = self.view
        v.match_pos = -1
        if v.search and not v.search_error:
            v.mask, v.matches = find(self.trace, v.search, v.regex)
        else:
            v.mask, v.matches = None, np.zeros(0, np.int64)
        self.events.emit("search", text=v.search, count=len(v.matches) if not v.search_error else -1, pos=-1)

    def next_match(self, direction: int = 1) -> int | None:
        """The next (or previous) match, selected; None when there is none."""
        m = self.view.matches
        if not len(m):
            return None
        self.view.match_pos = (self.view.match_pos + direction) % len(m)
        i = int(m[self.view.match_pos])
        self.show_event(i)
        self.events.emit("search", text=self.view.search, count=len(m), pos=self.view.match_pos)
        return i

    # -- steps and findings ------------------------------------------------------------------
    def goto_step(self, n: int) -> bool:
        from ..model.view import step_range

        rng = step_range(self.trace, n)
        if rng is not None:
            self.set_range(*rng, padding=0.02)
        return rng is not None

    def step_nav(self, direction: int) -> int | None:
        """The step after (or before) the middle of the view, shown; its number."""
        from ..model.view import next_step, step_shown

        if self.view.range is None:
            return None
        # from the step on screen when the view shows one (a late rank's step reaches into the
        # next step's time, so the middle of the view would skip a step); else from the middle
        shown = step_shown(self.trace, *self.view.range)
        numbers = sorted({s.step for s in self.trace.steps})
        n: int | None
        if shown is not None and numbers:
            i = numbers.index(shown) + (1 if direction > 0 else -1)
            n = numbers[min(max(i, 0), len(numbers) - 1)]
        else:
            n = next_step(self.trace, sum(self.view.range) / 2, direction)
        if n is not None:
            self.goto_step(n)
        return n

    def show_finding(self, f) -> int | None:
        """Zoom to a finding's range, highlight it on its ranks and select its first evidence
        (the longest event of that name there); a low-utilization finding, which has none, shows
        what fills its GPU's time instead (analysis.finding_select). Returns the event selected."""
        from ..model.queries import longest_named

        rank = f.ranks[0] if f.ranks else None
        span, ranks = (f.start_ns, f.end_ns), set(f.ranks)
        i = None
        ev = f.evidence_rows(with_excess=True)  # a late rank's excess: the host op it spent longer in
        if ev and rank is not None:
            i = longest_named(self.trace, ev[0]["name"], rank, f.start_ns, f.end_ns)
        if i is None and f.rule == "low_gpu_utilization" and rank is not None:
            from ..analysis.finding_select import utilization_evidence

            own = (f.metrics.get("per_rank") or {}).get(str(rank)) or {}  # a merged finding: its worst rank's
            lo, hi = own.get("window_ns") or f.metrics.get("window_ns") or (f.start_ns, f.end_ns)
            got = utilization_evidence(self.trace, rank, lo, hi, f.metrics.get("mostly") or "idle")
            if got is not None:  # shown where it is, on the worst rank
                i, span, ranks = got[0], (got[1], got[2]), {rank}
                self._say_idle_cause(rank, got)
        if f.metrics.get("host_paced") and rank is not None:
            # host-bound between launches: the GPU's longest wait in its steps and the host op it
            # waited through (FSDP's _unshard), not a kernel, with the rank's host thread folded
            # away below it (an audit of the window)
            from ..analysis.finding_select import paced_evidence
            from ..model.categories import GPU_LANE_KINDS

            ig = f.metrics.get("idle_gaps") or {}
            named = (ig.get("ops") or [{}])[0].get("name")
            rank = int(ig.get("rank", rank))  # the rank whose waits name the op (a merged finding's)
            got = paced_evidence(self.trace, rank, f.start_ns, f.end_ns, named)
            if got is not None and self.trace.lanes[int(self.trace.columns["lane"][got[0]])].kind not in GPU_LANE_KINDS:
                i, span, ranks = got[0], (got[1], got[2]), {rank}
                self._say_idle_cause(rank, got)
        elif i is not None and f.rule == "launch_bound":
            span, ranks = self._launch_window(f, i), {rank}
        if f.rule == "memory_headroom" and rank is not None:
            # the curve's rise and fall over the steps, the peak's moment highlighted: its 2 ms
            # alone showed a few kernels and none of what the finding says (an audit of the window)
            steps = self.trace.steps_of_rank(rank)
            if steps:
                lo, hi = min(st.start for st in steps), max(st.end for st in steps)
                if lo <= f.start_ns and f.end_ns <= hi:
                    self.set_range(lo, hi, padding=0.03)
                    self.set_highlight((f.start_ns, f.end_ns, set(f.ranks)))
                    self.events.emit("reveal", rank=rank)
                    return None
        # one range and one highlight: each change announced once
        self.set_range(*span, padding=0.08 if span == (f.start_ns, f.end_ns) else 0.5)
        self.set_highlight((span[0], span[1], ranks))
        if rank is not None:
            self.events.emit("reveal", rank=rank)
        if i is not None:
            self.select(i)
        return i

    def _launch_window(self, f, i: int) -> tuple[int, int]:
        """Around the selected kernel of a launch-bound finding, about 40 kernels' worth of its step
        (the step's time over its kernels a step): the kernels and the gaps between them in view.
        The whole capture showed the selected 7 µs kernel as a one-pixel tick (an audit of the
        window)."""
        c = self.trace.columns
        t = int(c["start"][i])
        rank = self.trace.lanes[int(c["lane"][i])].rank
        # the host step the kernel ran in, else (a GPU behind its host) the last one begun before it
        steps = sorted(self.trace.steps_of_rank(rank), key=lambda st: st.start)
        step = next((st for st in steps if st.start <= t < st.end), None) or next(
            (st for st in reversed(steps) if st.start <= t), None
        )
        per = float(f.metrics.get("kernels_per_step") or 0.0)
        if step is None or per <= 0:
            return f.start_ns, f.end_ns
        half = int(min(max(20 * (step.end - step.start) / per, 100_000), (step.end - step.start) / 2))
        return t - half, t + int(c["dur"][i]) + half

    def _say_idle_cause(self, rank: int, got: tuple[int, int, int]) -> None:
        """Where a GPU's idle stretch is shown with a host event selected, say why that event: the
        window shows the idle GPU lanes, and the selected event may lie many rows below them."""
        from ..model.categories import GPU_LANE_KINDS
        from ..model.fmt import format_duration

        i, g0, g1 = got
        lane = self.trace.lanes[int(self.trace.columns["lane"][i])]
        if lane.kind in GPU_LANE_KINDS:
            return
        self.events.emit(
            "message",
            text=f"Rank {rank}'s GPU idle {format_duration(g1 - g0)} (highlighted): its launching thread was in "
            f"{_short_frame(self.trace.name_of(i))} (selected, {lane.label})",
            error=False,
        )

    def set_highlight(self, span: tuple[int, int, set] | None) -> None:
        self.view.highlight = span
        self.events.emit("highlight", span=span)


class NoteActions:
    """Annotations: made, edited, removed, gone to, saved with the view in the sidecar beside
    `paths`. `nav` shows what they point at and restores the saved view."""

    def __init__(
        self, trace: Trace, paths: list[str], view: View, events: Events, notes: Notes, nav: ViewActions
    ) -> None:
        self.trace = trace
        self.paths = paths
        self.view = view
        self.events = events
        self.notes = notes
        self.nav = nav

    def keep_in(self, path: str | None) -> None:
        """Where the annotations are saved; None: nowhere (a headless run never writes)."""
        self.notes.sidecar = path

    def open_file(self, path: str) -> None:
        """Annotations from a file (the CLI's --annotations): shown, never written back."""
        self.notes.open_file(path)

    def open_annotations(self) -> str | None:
        """Read the sidecar beside the traces and restore its view; a warning, or None."""
        warning = self.notes.open_for(self.paths)
        view = self.notes.doc.view or {}
        if isinstance(view.get("lanes"), dict) and view["lanes"]:
            self.nav.set_lanes(view["lanes"])
        rng = view.get("range")
        if isinstance(rng, list) and len(rng) == 2 and all(isinstance(x, int) for x in rng) and rng[1] > rng[0]:
            self.nav.set_range(rng[0], rng[1])
        if warning:
            self.events.emit("message", text=warning, error=False)
        return warning

    def save_annotations(self) -> bool:
        """Write the sidecar (atomically) with the view; never the trace."""
        ok, msg = self.notes.save(self.view.to_json() if self.view.range else {})
        if msg:
            self.events.emit("message", text=msg, error=not ok)
        return ok

    def add_note(self, text: str, t: int | None = None, rank: int | None = None, lane: int | None = None) -> Annotation:
        """A note at time t (the middle of the view by default) on a rank and lane."""
        if t is None:
            t = sum(self.view.range) // 2 if self.view.range else self.trace.start_ns
        return self._add(self.notes.note_at(self.trace, text, t, rank, lane))

    def add_region(self, text: str, t0: int, t1: int, rank: int | None = None) -> Annotation:
        from ..model.annotations import Annotation

        r = rank if rank is not None else (self.trace.ranks[0].rank if self.trace.ranks else 0)
        lo, hi = sorted((int(t0), int(t1)))
        return self._add(Annotation("region", text, lo, max(hi, lo + 1), r, None))

    def add_arrow(self, i: int, j: int, text: str = "") -> Annotation:
        """An arrow from event i to event j."""
        return self._add(self.notes.arrow(self.trace, i, j, text))

    def mark(self, text: str, region: bool = False) -> Annotation:
        """M: a note at the selected event (or the middle of the view); Shift+M: a region over
        the area selection (or the selected event)."""
        vis = self.view.range or (self.trace.start_ns, self.trace.end_ns)
        return self._add(
            self.notes.from_selection(
                self.trace,
                text,
                region=region,
                selected=self.view.selected,
                area=self.view.area if region else None,
                visible=vis,
            )
        )

    def edit_annotation(self, a: Annotation, **changes) -> None:
        """Change fields of an annotation (text, title, color, ...)."""
        for k, v in changes.items():
            if not hasattr(a, k):
                raise AttributeError(f"annotations have no field {k!r}")
            setattr(a, k, v)
        self.annotations_edited()

    def remove_annotation(self, a: Annotation) -> None:
        self.notes.doc.annotations.remove(a)
        self.annotations_edited()

    def annotations_edited(self) -> None:
        """The annotations were changed in place (the panel edits its rows directly)."""
        self.notes.edited()
        self.events.emit("dirty")

    def goto_annotation(self, a: Annotation) -> None:
        self.nav.set_range(*self.notes.range_of(a))
        self.events.emit("reveal", rank=a.rank)

    def _add(self, a: Annotation) -> Annotation:
        self.notes.add(a)
        self.events.emit("dirty")
        return a


class TopologyActions:
    """A topology joining the session; `drop_analysis` lets the analysis go (it runs again)."""

    def __init__(self, trace: Trace, events: Events, drop_analysis: Callable[[], None]) -> None:
        self.trace = trace
        self.events = events
        self.drop_analysis = drop_analysis

    def attach_topology(self, topo) -> None:
        """A topology joins the session; the analysis (collectives over slow links) runs again."""
        self.trace.topology = topo
        self.events.emit("topology")
        if len(self.trace):
            self.drop_analysis()

    def attach_topology_files(self, paths: list[str]) -> None:
        """Topology files (JSON or `nvidia-smi topo -m` output); TraceError names a bad one."""
        from ..io.topo import read_topology

        self.attach_topology(read_topology(paths))

    def paste_topology(self, text: str) -> None:
        """Pasted `nvidia-smi topo -m` output; TraceError when it is not that."""
        from ..io.topo import parse_topo_matrix

        self.attach_topology(parse_topo_matrix(text, "pasted"))


def _short_frame(name: str) -> str:
    """A Python frame's name without its file's directories ('_runtime_utils.py(276): _unshard'):
    the status line has room for one line (the whole path cut the thread off at 1366 px)."""
    head, sep, tail = name.partition("): ")
    return (head.rsplit("/", 1)[-1] + sep + tail) if sep and "/" in head else name
