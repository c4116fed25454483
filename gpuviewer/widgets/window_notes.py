"""The window's side of annotations: the session's notes (gpuviewer.session.notes, kept by the
Qt-free Session) listed in the panel and made from the keyboard (M, Shift+M) and the
timeline's context menu. The session asks for autosaves; the controller's timer writes them."""

from __future__ import annotations


class NotesMixin:
    # the document and its file, as the window's callers name them
    @property
    def notes(self):
        return self.session.notes if self.session is not None else None

    @property
    def doc(self):
        return self.session.notes.doc if self.session is not None else None

    @property
    def sidecar(self) -> str | None:
        return self.session.notes.sidecar if self.session is not None else None

    @sidecar.setter
    def sidecar(self, path: str | None) -> None:  # None: a headless run that must not write
        self.session.keep_annotations_in(path)

    def load_annotation_file(self, path: str) -> None:
        """Annotations from a file (the CLI's --annotations) instead of the sidecar."""
        self.session.open_annotation_file(path)

    def _apply_annotations(self) -> None:
        if self.session is not None:
            self.annotations.set_annotations(self.session.notes.doc.annotations, self.timeline.origin)
            if self.session.notes.doc.annotations and not self.annotations_dock.isVisible():
                self.annotations_dock.show()  # the right column opens for saved notes

    def _edit_annotation(self, a, changes: dict) -> None:
        """The panel's edit (text, colour), made by the session."""
        if self.session is not None:
            self.session.edit_annotation(a, **changes)

    def _remove_annotation(self, a) -> None:
        if self.session is not None:
            self.session.remove_annotation(a)

    def save_annotations(self) -> bool:
        """Autosave: the sidecar (atomically); never the trace."""
        return self.controller.save()

    def mark(self, region: bool = False, text: str | None = None):
        """M: a note at the selected event (or the middle of the view); Shift+M: a region.
        Without text, a one-line editor opens in place on the timeline (Enter adds, Esc
        cancels) and the note is added when it is typed: None is returned now."""
        if self.session is None:
            return None
        if text is None:
            tv = self.timeline
            sel = self.session.view.selected
            at = tv.event_point(sel) if sel is not None else None
            tv.note_edit.ask(
                "Region: type its text, Enter adds, Esc cancels"
                if region
                else "Note: type it, Enter adds, Esc cancels",
                at if at is not None else tv.middle_point(),
                lambda t: self._marked(self.session.mark(t, region=region)),
            )
            return None
        return self.session.mark(text, region=region)

    def _marked(self, a) -> None:
        self.annotations_dock.show()  # the new note listed, editable there
        self.statusBar().showMessage("Note added (edit or remove it in the Annotations panel)", 5000)

    def arrow_to(self, j: int, text: str = ""):
        """An arrow from the selected event to event j."""
        if self.session is None or self.session.view.selected is None:
            return None
        return self.session.add_arrow(self.session.view.selected, j, text)

    def goto_annotation(self, a) -> None:
        self.session.goto_annotation(a)

    def _timeline_menu(self, global_pos, x: float, y: float) -> None:
        from PySide6.QtWidgets import QMenu

        if self.trace is None:
            return
        m = QMenu(self)
        row = self.timeline.layout_model.row_at(y) if self.timeline.layout_model else None
        t = int(x) + self.timeline.origin

        def note_here():
            self.timeline.note_edit.ask(
                "Note: type it, Enter adds, Esc cancels",
                self.timeline.mapFromGlobal(global_pos),
                lambda text: self._marked(
                    self.session.add_note(
                        text,
                        t,
                        row.rank if row is not None else None,
                        row.lane if row is not None and row.kind == "lane" else None,
                    )
                ),
            )

        m.addAction("Add a note here", note_here)
        if self.timeline.last_area is not None:
            m.addAction("Make a region of the area selection", lambda: self.mark(region=True))
        j = self.timeline.item.pick(x, y, self.timeline._tol()) if self.timeline.item else None
        if self.timeline.selected is not None and j is not None and j != self.timeline.selected:
            m.addAction(
                f"Arrow from the selected event to {self.trace.name_of(j)[:40]}",
                lambda: self.arrow_to(j, self.annotations.ask_text(self, "Arrow label", "") or ""),
            )
        m.exec(global_pos)
