"""The window's navigation and housekeeping: recent sessions, drag and drop, steps, hosts and
clock alignment, the visible range in the status bar, and image and report export."""

from __future__ import annotations

import json
import os

from PySide6.QtWidgets import QApplication, QFileDialog, QInputDialog, QMessageBox

from ..model.fmt import format_duration, format_ns

MAX_RECENT = 10


class NavMixin:
    # -- recent sessions, drag and drop -------------------------------------------------
    def _recent(self) -> list[list[str]]:
        try:
            v = json.loads(self.settings.value("recent", "[]"))
            return [r for r in v if isinstance(r, list)]
        except (TypeError, ValueError):
            return []

    def _add_recent(self, paths: list[str]) -> None:
        r = [x for x in self._recent() if x != paths]
        r.insert(0, paths)
        self.settings.setValue("recent", json.dumps(r[:MAX_RECENT]))
        self._fill_recent()

    def _fill_recent(self) -> None:
        self.recent_menu.clear()
        for paths in self._recent():
            label = " + ".join(os.path.basename(p) for p in paths)
            self.recent_menu.addAction(label, lambda _=False, ps=paths: self.open_paths(ps))
        self.recent_menu.setEnabled(bool(self._recent()))

    def dragEnterEvent(self, ev) -> None:
        if ev.mimeData().hasUrls():
            ev.acceptProposedAction()

    def dropEvent(self, ev) -> None:
        paths = [u.toLocalFile() for u in ev.mimeData().urls() if u.isLocalFile()]
        if paths:
            self.open_paths(paths)
            ev.acceptProposedAction()

    # -- hosts and clocks ---------------------------------------------------------------
    def hosts_dialog(self) -> None:
        """Say which ranks share a host's clock ("0-3,4-7"; empty: from the files)."""
        text, ok = QInputDialog.getText(
            self, "Hosts", "Ranks per host, e.g. 0-3,4-7 (empty: found from the files):", text=self.loader.hosts or ""
        )
        if ok:
            self.set_hosts(text.strip() or None)

    def set_hosts(self, spec: str | None) -> None:
        self.loader.hosts = spec
        self.controller.reopen()

    def set_align(self, on: bool) -> None:
        """The switch for clock alignment: the open session is opened again with or without it."""
        self.loader.align = bool(on)
        self.controller.reopen()

    # -- steps --------------------------------------------------------------------------
    def goto_rank_step(self, rank: int, step: int) -> None:
        """From the rank overview: that step on the timeline, scrolled to that rank."""
        self.goto_step(step)
        self.timeline.scroll_to_rank(rank)

    def goto_step(self, n: int) -> None:
        if self.session is not None:
            self.session.goto_step(n)

    def step_nav(self, direction: int) -> None:
        n = self.session.step_nav(direction) if self.session is not None else None
        if n is not None and self.step_box.minimum() <= n <= self.step_box.maximum():
            self.step_box.blockSignals(True)
            self.step_box.setValue(n)
            self.step_box.blockSignals(False)

    # -- what the timeline shows ----------------------------------------------------------
    def _range_changed(self, t0: int, t1: int) -> None:
        if self.trace is None:
            return
        self.memory.follow(t0 - self.timeline.origin, t1 - self.timeline.origin)
        o = self.trace.start_ns
        # the ends told apart at any zoom ('1.019 s – 1.019 s (1.248 µs)' said nothing)
        sp = max((t1 - t0) / 10, 1)
        ref = max(abs(t0 - o), abs(t1 - o))
        self.status_range.setText(
            f"visible {format_ns(t0 - o, sp, ref)} – {format_ns(t1 - o, sp, ref)}  ({format_duration(t1 - t0)})"
        )
        self._step_box_follows(t0, t1)
        said = self._opening_said
        if said is not None and said[1] != (t0, t1):
            # 'opened on the steady steps ... left of the view' speaks of the opening view only: it
            # stayed beside a finding or a critical-path segment chosen after (an audit)
            self._opening_said = None
            if self.statusBar().currentMessage() == said[0]:
                self.statusBar().clearMessage()

    def _step_box_follows(self, t0: int, t1: int) -> None:
        """'go to step' names the step the view shows (model.view.step_shown), wherever the view
        was moved from (a finding, the critical path kept it at the number last typed)."""
        from ..model.view import step_shown

        best = step_shown(self.trace, t0, t1)
        box = self.step_box
        if best is not None and box.isEnabled() and box.minimum() <= best <= box.maximum() and box.value() != best:
            box.blockSignals(True)
            box.setValue(best)
            box.blockSignals(False)

    def _area(self, lanes: list[int], t0: int, t1: int) -> None:
        if self.trace is not None:
            self.area.show_area(self.trace, lanes, t0, t1)
            self.area_dock.show()
            self.area_dock.raise_()

    def _memory_cursor(self, t: int) -> None:
        item = self.timeline.item
        if item is not None:
            item.cursor_ns = t
            item.update()

    def _goto_event(self, i: int) -> None:
        self.timeline.show_event(i)

    def _toggle_steps(self, on: bool) -> None:
        if self.timeline.item is not None:
            self.timeline.item.show_steps = on
            self.timeline.item.update()

    def _set_renderer(self, mode: str) -> None:
        self.settings.setValue("renderer", mode)
        self.timeline.apply_renderer(mode)

    # -- export ---------------------------------------------------------------------------
    def export_image(self, path: str, scale: float = 1.0, whole_window: bool = False) -> bool:
        """The timeline as it is shown (its labels and lanes pixel for pixel: range, scroll,
        annotations, area selection; no search or scroll bar), or the whole window."""
        from ..export.image import save_widget

        if whole_window or self.session is None:
            return save_widget(self, path, scale)
        from .offscreen import dispose

        view = self._picture_view()
        try:
            return save_widget(view, path, scale)
        finally:
            dispose(view)

    def export_image_dialog(self) -> None:
        path, _filt = QFileDialog.getSaveFileName(
            self, "Export image", "gpuviewer.png", "PNG image (*.png);;SVG (text stays text) (*.svg)"
        )
        if not path:
            return
        what, ok = QInputDialog.getItem(
            self, "Export image", "Picture of:", ["The timeline", "The whole window"], 0, False
        )
        if not ok:
            return
        scale = 1.0
        if path.lower().endswith(".png"):
            s, ok = QInputDialog.getItem(self, "Scale", "Pixel scale (2x for slides):", ["1x", "2x", "3x"], 1, False)
            if not ok:
                return
            scale = float(s[0])
        if not self.export_image(path, scale, whole_window=what == "The whole window"):
            QMessageBox.warning(self, "Export image", f"Could not write {path}")

    def _picture_view(self):
        """A bare view of the session showing what the timeline's labels and lanes show: their
        size, the label column's width, the lanes' scroll, the critical path."""
        from .offscreen import bare_view

        tl = self.timeline
        view = bare_view(self.session, (tl.split.width(), tl.split.height()))
        view.split.setSizes(tl.split.sizes())
        if tl.item is not None and view.item is not None:
            view.item.critical_path = tl.item.critical_path
        QApplication.processEvents()  # laid out at those sizes before the scroll is set
        view.scroll.setValue(tl.scroll.value())
        QApplication.processEvents()
        return view

    def copy_image(self) -> None:
        if self.session is None:
            return
        from .offscreen import dispose

        view = self._picture_view()  # as exported
        try:
            QApplication.clipboard().setPixmap(view.grab())
        finally:
            dispose(view)
        self.statusBar().showMessage("Image copied to the clipboard", 3000)

    def export_report_dialog(self) -> None:
        if self.trace is None:
            return
        path, _ = QFileDialog.getSaveFileName(
            self, "Export report", "gpuviewer-report.html", "HTML (*.html);;Markdown (*.md)"
        )
        if not path:
            return
        from ..export.report import write_report
        from .offscreen import bare_view, dispose

        if self.session.analysis_ready is None:
            self.statusBar().showMessage("Analysing for the report…")
        self.controller.wait_for_analysis()  # before the view: it draws the communication waits
        view = bare_view(self.session)
        try:
            write_report(self.session, view, path)
        except OSError as e:
            QMessageBox.warning(self, "Export report", f"Could not write {path}: {e.strerror}")
            return
        finally:
            dispose(view)
        self.statusBar().showMessage(f"Report written to {path}", 5000)
