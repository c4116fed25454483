"""The window's side of annotations: the Qt-free Notes (gpuviewer.notes) drawn on the timeline
and listed in the panel, saved by a short timer after each change, and made from the keyboard
(M, Shift+M) and the timeline's context menu."""
from __future__ import annotations

from PySide6.QtCore import QTimer


class NotesMixin:
    def _init_notes(self) -> None:
        from ..notes import Notes
        self.notes = Notes()
        self.notes.listeners.append(self._apply_annotations)
        self._save_timer = QTimer(self)
        self._save_timer.setSingleShot(True)
        self._save_timer.setInterval(400)
        self._save_timer.timeout.connect(self.save_annotations)
        self.annotations.jumpTo.connect(self.goto_annotation)
        self.annotations.changed.connect(self._annotations_changed)

    # the document and its file, as the window's callers (tests, reports) name them
    @property
    def doc(self):
        return self.notes.doc

    @property
    def sidecar(self) -> str | None:
        return self.notes.sidecar

    @sidecar.setter
    def sidecar(self, path: str | None) -> None:  # None: a headless run that must not write
        self.notes.sidecar = path

    def _load_annotations(self, paths: list[str]) -> None:
        from ..model.layout import ViewState
        warning = self.notes.open_for(paths)
        if warning:
            self.statusBar().showMessage(warning, 10000)
        view = self.notes.doc.view or {}
        if view.get("lanes") and self.timeline.layout_model is not None:
            self.timeline.layout_model.state = ViewState.from_json(view["lanes"])
            self.timeline.layout_model.rebuild()
            self.timeline._relayout()
        rng = view.get("range")
        if isinstance(rng, list) and len(rng) == 2 and all(isinstance(x, int) for x in rng) and rng[1] > rng[0]:
            self.timeline.set_range(rng[0], rng[1])

    def load_annotation_file(self, path: str) -> None:
        """Annotations from a file (the CLI's --annotations) instead of the sidecar."""
        self.notes.open_file(path)

    def _apply_annotations(self) -> None:
        self.annotations.set_annotations(self.notes.doc.annotations, self.timeline.origin)
        if self.timeline.item is not None:
            self.timeline.item.annotations = self.notes.doc.annotations
            self.timeline.item.update()

    def _annotations_changed(self) -> None:
        self.notes.edited()
        self._save_timer.start()

    def _view_changed(self, *_a) -> None:
        if self.notes.save_on_view_change():
            self._save_timer.start()

    def view_state(self) -> dict:
        t0, t1 = self.timeline.visible_range()
        lm = self.timeline.layout_model
        return {"range": [int(t0), int(t1)], "lanes": lm.state.to_json() if lm else {}}

    def save_annotations(self) -> bool:
        """Autosave: the sidecar (atomically); never the trace."""
        if self.trace is None:
            return False
        ok, msg = self.notes.save(self.view_state())
        if msg:
            self.statusBar().showMessage(msg, 15000 if ok else 10000)
        return ok

    def add_annotation(self, a) -> None:
        self.notes.add(a)
        self._save_timer.start()

    def mark(self, region: bool = False, text: str | None = None):
        """M: a note at the selected event (or the middle of the view); Shift+M: a region."""
        if self.trace is None:
            return None
        if text is None:
            text = self.annotations.ask_text(self, "Region" if region else "Note", "")
            if text is None:
                return None
        a = self.notes.from_selection(self.trace, text, region=region, selected=self.timeline.selected,
                                      area=self.timeline.last_area if region else None,
                                      visible=self.timeline.visible_range())
        self.add_annotation(a)
        return a

    def arrow_to(self, j: int, text: str = ""):
        """An arrow from the selected event to event j."""
        i = self.timeline.selected
        if i is None or self.trace is None:
            return None
        a = self.notes.arrow(self.trace, i, j, text)
        self.add_annotation(a)
        return a

    def goto_annotation(self, a) -> None:
        self.timeline.set_range(*self.notes.range_of(a))
        self._scroll_to_rank(a.rank)

    def _scroll_to_rank(self, rank) -> None:
        lm = self.timeline.layout_model
        hdr = next((r for r in lm.rows if r.kind == "header" and r.rank == rank), None) if lm else None
        if hdr is not None:
            self.timeline.scroll.setValue(int(hdr.y * 10))

    def _timeline_menu(self, global_pos, x: float, y: float) -> None:
        from PySide6.QtWidgets import QMenu
        if self.trace is None:
            return
        m = QMenu(self)
        row = self.timeline.layout_model.row_at(y) if self.timeline.layout_model else None
        t = int(x) + self.timeline.origin

        def note_here():
            text = self.annotations.ask_text(self, "Note", "")
            if text is not None:
                self.add_annotation(self.notes.note_at(self.trace, text, t, row.rank if row is not None else None,
                                                       row.lane if row is not None and row.kind == "lane" else None))
        m.addAction("Add a note here", note_here)
        if self.timeline.last_area is not None:
            m.addAction("Make a region of the area selection", lambda: self.mark(region=True))
        j = self.timeline.item.pick(x, y, self.timeline._tol()) if self.timeline.item else None
        if self.timeline.selected is not None and j is not None and j != self.timeline.selected:
            m.addAction(f"Arrow from the selected event to {self.trace.name_of(j)[:40]}",
                        lambda: self.arrow_to(j, self.annotations.ask_text(self, "Arrow label", "") or ""))
        m.exec(global_pos)
