"""The window opens a session summary (OUT.gvsum, written by `gpuviewer analyze --summary`):
the Ranks, Findings and Overview docks from the analysis the summary keeps, one summary row a
rank on the timeline from its binned GPU profile, the step lines from its steps table; no trace
file is read to show this. Expanding a rank (the click that unfolds a summary row) loads that
rank's file(s), listed in the manifest, in the background and shows its lanes under its row.

How: the window's session is a SummarySession (a gpuviewer.session.Session) whose trace is a
model.summary_rows.SummaryTrace: a Trace of every rank of the summary whose events are only
those of the expanded ranks (that module says why), and whose analysis is the summary's (the
controller "runs" it by handing that back, so panels fill as for any session). A rank's file is
read by a background loader of its own (widgets/loader.py: parsed in another process that
writes the column cache, then memory-mapped here; a second time it is a cache hit), numbered
and moved onto the summary's clock by scale.summary.as_summary_rank, and the session's trace
becomes a new SummaryTrace with that rank's events too (`with_rank`; the merge of two or more
ranks runs here, a copy of their columns), the view kept. Ranks load one at a time, in the
order they were expanded. A missing or broken file is one line in the status bar and the rank
stays a summary row. The summary keeps the hosts and alignment it was written with, so the
View menu's switches that reopen the traces with others are off while it is shown.

Why not a reader in io/registry.py: a reader turns files into a Trace that the loader caches
and that a session may mix with companions; a summary is a folder, is never cached nor mixed,
and opens without running the analysis. So main_window.open_paths asks is_summary_paths() first
and hands a summary here (the folder, its manifest.json, a recent entry or a drop alike).
"""

from __future__ import annotations

import os

from PySide6.QtCore import QEvent, QObject
from PySide6.QtGui import QAction

from ..model.layout import ViewState
from ..session.summary import SummarySession

_SAY_MS = 20000  # a message about a rank stays this long in the status bar


def is_summary_paths(paths: list[str]) -> bool:
    from ..session.summary import summary_folder

    return any(summary_folder(p) for p in paths)


def open_summary(win, paths, block: bool = False) -> bool:
    """Show the summary in `paths` (one folder or its manifest.json) in the window `win`.
    block: expansions load in this thread (headless renders, tests). False when it cannot be
    opened (win.last_error says why, as for a trace)."""
    from ..errors import GpuviewerError
    from ..session.summary import open_summary as summary_session
    from ..session.summary import summary_folder

    paths = [paths] if isinstance(paths, str) else list(paths)
    folder = next(filter(None, map(summary_folder, paths)), None)  # each path's manifest read once
    if len(paths) != 1 or folder is None:
        win._failed(f"{folder}: a summary opens alone, not with other files")
        return False
    try:
        session = summary_session(folder)
    except GpuviewerError as e:  # a SummaryError: one line naming the folder
        win._failed(str(e))
        return False
    except Exception as e:  # noqa: BLE001 - a damaged summary is a message, never a traceback
        from ..errors import unexpected_problem

        win._failed(f"{folder}: {unexpected_problem(e)}")
        return False
    old = getattr(win, "summary_session", None)
    if old is not None:
        old.stop()
    win.loader.cancel()  # a session still loading would replace the summary when it lands
    win.summary_session = SummaryController(win, session, block)
    win.summary_session.show()
    return True


class SummaryController(QObject):
    """The window's summary while it is shown: which ranks are expanded, loading or queued."""

    def __init__(self, win, session: SummarySession, block: bool) -> None:
        super().__init__(win)
        self.win, self.session, self.block = win, session, block
        self.folder = session.paths[0]
        self.queue: list[int] = []
        self.loading: int | None = None
        self.last_message = ""
        self.stopped = False
        from .loader import Loader

        self.loader = Loader(self)
        self.loader.align = False  # the summary's own clock offsets are applied instead
        self.loader.loaded.connect(self._files_loaded)
        self.loader.failed.connect(self._load_failed)
        self.loader.progress.connect(self._progress)
        win.timeline.labels.changed.connect(self._sync)
        win.controller.loaded.connect(self._session_changed)
        win.installEventFilter(self)
        # the summary keeps the hosts and clock alignment it was written with: opening it again
        # with others is `gpuviewer analyze --summary` again, not a switch here
        self._fixed = [
            a
            for a in win.findChildren(QAction)
            if a is getattr(win, "align_action", None) or a.text().startswith("Hosts (")
        ]
        for a in self._fixed:
            a.setEnabled(False)

    @property
    def trace(self):
        return self.session.trace

    # -- the first screen ------------------------------------------------------------------
    def show(self) -> None:
        """The window opens the session as any other (recent files, annotations and the view
        saved with them, the panels fed from the analysis), its analysis the summary's."""
        win, c = self.win, self.win.controller
        was = c.block_analysis
        c.block_analysis = True  # "runs" the analysis the summary brought, here and now
        try:
            c.set_session(self.session)
        finally:
            c.block_analysis = was
        from ..model.plain import line

        win.setWindowTitle(f"{line(os.path.basename(self.folder))} (summary) — gpuviewer")
        from ..model.fmt import esc

        win.status_files.setText(
            esc(self.status_line())
        )  # the label is rich text (its warnings link): host names escaped
        failed = self.trace.metadata.get("failed_ranks") or []
        win.status_files.setToolTip(
            "\n".join(
                [self.alignment()] + [f"not in the summary: {f['error']}" for f in failed] + list(self.trace.warnings)
            )
        )
        if win.debug:
            import sys

            print(
                f"gpuviewer: opened the summary {self.folder}: {len(self.trace.ranks)} ranks",
                file=sys.stderr,
                flush=True,
            )
        # every rank starts as a summary row (a few ranks too), unless the view saved with the
        # annotations says otherwise: the ranks it left expanded load now
        saved = (self.session.notes.doc.view or {}).get("lanes")
        if not (isinstance(saved, dict) and saved):
            self._set_collapsed({r.rank for r in self.trace.ranks})
        self._sync()

    def alignment(self) -> str:
        from ..session import alignment_line

        t = self.trace
        return alignment_line(
            t.metadata.get("alignment") or {}, [r.host for r in t.ranks], t.metadata.get("hosts_from")
        )

    def status_line(self) -> str:
        t = self.trace
        hosts = len({r.host for r in t.ranks if r.host}) or 1
        failed = len(t.metadata.get("failed_ranks") or [])
        return (
            f"Summary: {len(t.ranks)} ranks on {hosts} host{'s' if hosts != 1 else ''}"
            + (f" ({failed} not analysed)" if failed else "")
            + f" · {self.alignment()} · "
            "click a rank's row to load its timeline from its file"
        )

    def _panels_follow(self) -> None:
        """Details, SQL and statistics over the trace as it is now (the expanded ranks' events)."""
        win, trace = self.win, self.trace
        win.details.set_trace(trace)
        win.queries.set_session(self.session)

    # -- expanding ---------------------------------------------------------------------------
    def _session_changed(self, session) -> None:
        if session is not self.session:
            self.stop()

    def _active(self) -> bool:
        """Still the window's session; once another replaced it, this controller lets go."""
        if self.win.session is self.session:
            return True
        self.stop()
        return False

    def _set_collapsed(self, ranks: set[int]) -> None:
        """The lane layout with these ranks as summary rows (the session tells the timeline)."""
        state = ViewState.from_json(self.win.timeline.layout_model.state.to_json())  # a copy
        state.collapsed_ranks = set(ranks)
        self.session.set_lanes(state)

    def _sync(self) -> None:
        """After a click on the rank headers: a rank unfolded whose events are not here yet
        stays a summary row until they are, and is queued to load."""
        if not self._active():
            return
        lm = self.win.timeline.layout_model
        want = [
            r.rank
            for r in self.trace.ranks
            if r.rank not in lm.state.collapsed_ranks and r.rank not in self.trace.loaded
        ]
        if not want:
            return
        self._set_collapsed(set(lm.state.collapsed_ranks) | set(want))
        for r in want:
            self.expand(r)

    def expand(self, rank: int, block: bool | None = None) -> bool:
        """Load a rank's timeline (already there: unfold it). False when it cannot start (a
        missing file: said in the status bar)."""
        from ..session.summary import rank_files

        if rank in self.trace.loaded:
            self._unfold(rank)
            return True
        if rank == self.loading or rank in self.queue:
            return True
        files = rank_files(self.trace, rank)
        missing = [f for f in files if not os.path.isfile(f)]
        if not files or missing:
            self.say(
                f"Rank {rank}: its trace {missing[0] if missing else '(none listed)'} is missing (moved or "
                "deleted); it stays a summary row"
            )
            return False
        if self.block if block is None else block:
            from ..session.summary import load_rank

            try:
                self._add(rank, load_rank(self.trace, rank))
            except Exception as e:  # noqa: BLE001 - any failure is one line, never a traceback
                self.say(self._why(rank, files, e))
                return False
            return True
        self.queue.append(rank)
        self._next()
        return True

    def _next(self) -> None:
        if self.loading is not None or not self.queue:
            return
        from ..session.summary import rank_files

        self.loading = self.queue.pop(0)
        files = rank_files(self.trace, self.loading)
        self.say(f"Rank {self.loading}: loading its timeline from {', '.join(map(os.path.basename, files))}…", 0)
        self.loader.start(files)

    def _progress(self, frac: float, msg: str) -> None:
        if self.loading is not None:
            self.say(f"Rank {self.loading}: {msg} ({frac:.0%})", 0)

    def _files_loaded(self, loaded, paths: list[str]) -> None:
        rank, self.loading = self.loading, None
        if rank is None or not self._active():
            return
        from ..session.summary import as_summary_rank

        try:
            self._add(rank, as_summary_rank(loaded, self.trace, rank))
        except Exception as e:  # noqa: BLE001
            self.say(self._why(rank, paths, e))
        self._next()

    def _load_failed(self, msg: str) -> None:
        rank, self.loading = self.loading, None
        if rank is not None and self._active():
            self.say(f"Rank {rank}: cannot load its timeline: {msg.splitlines()[0] if msg else 'the reader failed'}")
            self._next()

    @staticmethod
    def _why(rank: int, files: list[str], e: Exception) -> str:
        text = str(e).splitlines()[0] if str(e) else type(e).__name__
        named = text if any(f in text for f in files) else f"{', '.join(files)}: {text}"
        return f"Rank {rank}: cannot load its timeline: {named}"

    def _add(self, rank: int, rank_trace) -> None:
        """The session's trace gets this rank's events too; the view stays where it was."""
        win, tv = self.win, self.win.timeline
        state = ViewState.from_json(tv.layout_model.state.to_json())  # a copy
        state.collapsed_ranks.discard(rank)
        rng, scroll = tv.visible_range(), tv.scroll.value()
        self.session.swap_trace(self.trace.with_rank(rank, rank_trace))
        tv.set_session(self.session, state)
        self.session.set_range(*rng)
        tv.scroll.setValue(scroll)
        tv.labels.update()
        if tv.item is not None:
            tv.item.show_steps = win.steps_action.isChecked()
        self._panels_follow()
        show_memory = getattr(win, "_show_memory", None)
        if show_memory is not None:  # the expanded ranks' memory curves, when their files have them
            show_memory(self.trace)
        info = next(r for r in self.trace.summary.ranks if r.rank == rank)
        self.say(
            f"Rank {rank}: {self.trace.rank_events(rank):,} events loaded from "
            f"{', '.join(os.path.basename(f) for f in info.files)}"
        )

    def _unfold(self, rank: int) -> None:
        lm = self.win.timeline.layout_model
        if rank in lm.state.collapsed_ranks:
            self._set_collapsed(set(lm.state.collapsed_ranks) - {rank})

    def say(self, text: str, ms: int = _SAY_MS) -> None:
        self.last_message = text
        self.win.statusBar().showMessage(text, ms)
        if self.win.debug:
            import sys

            print(f"gpuviewer: {text}", file=sys.stderr, flush=True)

    def busy(self) -> bool:
        return self.loading is not None or bool(self.queue)

    # -- letting go ----------------------------------------------------------------------------
    def stop(self) -> None:
        if self.stopped:
            return
        self.stopped = True
        self.queue.clear()
        self.loading = None
        self.loader.cancel()
        for signal, slot in (
            (self.win.timeline.labels.changed, self._sync),
            (self.win.controller.loaded, self._session_changed),
        ):
            try:
                signal.disconnect(slot)
            except (RuntimeError, TypeError):
                pass  # already disconnected
        for a in self._fixed:
            a.setEnabled(True)
        self._fixed = []
        self.win.removeEventFilter(self)
        if getattr(self.win, "summary_session", None) is self:
            self.win.summary_session = None

    def eventFilter(self, obj, ev) -> bool:  # noqa: N802 - Qt's name
        if obj is self.win and ev.type() == QEvent.Close:
            self.loader.cancel()  # the reader process ends with the window
        return False
