"""A session's annotations without a window: the document, where it is kept (a sidecar beside
the traces, or nowhere for a file the user named), when it is saved, and the notes, regions and
arrows made from what the user has selected. Changes are announced to plain callbacks (the
window turns them into repaints and an autosave timer). Qt-free; tests drive it directly."""

from __future__ import annotations

import os
from collections.abc import Callable

from ..model.annotations import Annotation, AnnotationDoc
from ..model.trace import Trace


class Notes:
    def __init__(self) -> None:
        self.doc = AnnotationDoc()
        self.sidecar: str | None = None
        self.listeners: list[Callable[[], None]] = []

    # -- where they live -----------------------------------------------------------------
    def open_for(self, paths: list[str]) -> str | None:
        """The sidecar of these traces; returns a warning when it could not be read (a damaged
        sidecar is never overwritten: saving moves it aside first) or holds more annotations
        than are shown."""
        from ..io.errors import TraceError
        from ..io.sidecar import load_doc, sidecar_path

        self.sidecar = sidecar_path(paths)
        try:
            self.doc = load_doc(self.sidecar, keep_rest=True)
            return "; ".join(f"Annotations: {self.sidecar} {w}" for w in self.doc.warnings) or None
        except TraceError as e:
            self.doc = AnnotationDoc()
            return f"Annotations not loaded: {e}"
        finally:
            self._changed()

    def open_file(self, path: str) -> None:
        """Annotations from a file (the CLI's --annotations): shown, never written back."""
        from ..io.sidecar import load_doc

        self.doc = load_doc(path)
        self.sidecar = None
        self._changed()

    def save(self, view: dict) -> tuple[bool, str | None]:
        """Write the sidecar atomically, with the view, merged with what another session saved
        there since (io.sidecar.save_doc); (saved, a message for the user: conflicts, a damaged
        file moved aside). The document then holds the other session's annotations too."""
        if self.sidecar is None:
            return False, None
        from ..io.sidecar import save_doc

        self.doc.view = view
        try:
            messages, changed = save_doc(self.sidecar, self.doc)
        except OSError as e:
            return False, f"Could not save annotations to {self.sidecar}: {e.strerror}"
        if changed:
            self._changed()  # another session's annotations: shown now
        return True, ("; ".join(messages) if messages else None)

    def save_on_view_change(self) -> bool:
        """The view is saved with the annotations, but panning alone never creates a file beside
        the user's trace: only once there is an annotation (or the sidecar exists)."""
        if not self.sidecar:
            return False
        return bool(self.doc.annotations) or os.path.exists(self.sidecar)

    # -- edits ---------------------------------------------------------------------------
    def add(self, a: Annotation) -> Annotation:
        self.doc.annotations.append(a)
        self._changed()
        return a

    def edited(self) -> None:
        """An annotation was changed or removed in place (the annotations panel)."""
        self._changed()

    def _changed(self) -> None:
        for f in list(self.listeners):
            f()

    # -- annotations from a selection ----------------------------------------------------
    @staticmethod
    def from_selection(
        trace: Trace,
        text: str,
        *,
        region: bool,
        selected: int | None,
        area: tuple[int, int, list[int]] | None,
        visible: tuple[int, int],
    ) -> Annotation:
        """M: a note at the selected event (or the middle of the view); Shift+M: a region over
        the area selection (or the selected event)."""
        c = trace.columns
        rank, lane_key, t0, t1 = trace.ranks[0].rank if trace.ranks else 0, None, None, None
        if region and area is not None:
            t0, t1, lanes = area
            ranks = sorted({trace.lanes[ln].rank for ln in lanes}) or [rank]
            rank = ranks[0]
            lane_key = trace.lanes[lanes[0]].key if len(lanes) == 1 else None
        elif selected is not None:
            lane = trace.lanes[int(c["lane"][selected])]
            rank, lane_key = lane.rank, lane.key
            t0 = int(c["start"][selected])
            t1 = t0 + int(c["dur"][selected])
        else:
            t0 = t1 = (visible[0] + visible[1]) // 2
        if region:
            return Annotation("region", text, int(t0), int(max(t1, t0 + 1)), rank, lane_key if area is None else None)
        return Annotation("note", text, int(t0), None, rank, lane_key)

    @staticmethod
    def arrow(trace: Trace, i: int, j: int, text: str = "") -> Annotation:
        """An arrow from event i to event j."""
        c = trace.columns
        la, lb = trace.lanes[int(c["lane"][i])], trace.lanes[int(c["lane"][j])]
        return Annotation(
            "arrow", text, int(c["start"][i]), int(c["start"][j]), la.rank, la.key, end_rank=lb.rank, end_lane=lb.key
        )

    @staticmethod
    def note_at(trace: Trace, text: str, t: int, rank: int | None, lane: int | None) -> Annotation:
        """A note at time t on a rank (and lane) the user pointed at."""
        r = rank if rank is not None and rank >= 0 else trace.ranks[0].rank
        return Annotation("note", text, int(t), None, r, trace.lanes[lane].key if lane is not None else None)

    @staticmethod
    def range_of(a: Annotation) -> tuple[int, int]:
        """The time range to show an annotation in: a quarter of its span (2 ms at least) either side."""
        t1 = a.end_ns if a.end_ns is not None else a.start_ns
        lo, hi = min(a.start_ns, t1), max(a.start_ns, t1)
        span = max(hi - lo, 2_000_000)
        return lo - span // 4, hi + span // 4
