"""A session summary (OUT.gvsum) opened as a Session: its trace a model.summary_rows.SummaryTrace
(the ranks' summary rows, and the events of the ranks expanded so far), its analysis the one the
summary keeps (scale.summary.open_trace reads both). The window's summary controller
(widgets/summary_window.py) swaps the trace as ranks load."""

from __future__ import annotations

from .session import Session


def summary_folder(path: str):
    """The summary folder `path` names (the folder or its manifest.json), or None."""
    from ..scale.summary import summary_folder as find

    return find(path)


def rank_files(trace, rank: int) -> list[str]:
    """The trace files a summary's rank was built from."""
    from ..scale.summary import rank_files as files

    return files(trace, rank)


def load_rank(trace, rank: int):
    """A summary's rank read from its files, on the summary's clock."""
    from ..scale.summary import load_rank as load

    return load(trace, rank)


def as_summary_rank(loaded, trace, rank: int):
    """A rank's trace loaded elsewhere (the window's loader), moved onto the summary's clock."""
    from ..scale.summary import as_summary_rank as move

    return move(loaded, trace, rank)


def open_summary(folder: str) -> SummarySession:
    """The summary in `folder` as a session (SummaryError when it cannot be read)."""
    from ..scale.summary import open_trace

    trace, analysis = open_trace(folder)
    return SummarySession(trace, [folder], analysis)


class SummarySession(Session):
    """A Session of a summary: its trace a SummaryTrace (replaced as ranks are expanded), its
    analysis the one the summary keeps (never run again on the few events loaded here)."""

    def __init__(self, trace, paths: list[str], analysis) -> None:
        super().__init__(trace, paths)
        self.summary_analysis = analysis
        self._analysis = analysis

    def compute_analysis(self):
        return self.summary_analysis

    def drop_analysis(self) -> None:
        pass  # a topology joining changes nothing the summary's analysis found

    def swap_trace(self, trace) -> None:
        """The same session with another rank's events: what pointed at events is let go."""
        self.trace = trace
        self._frames.clear()
        v = self.view
        v.selected, v.area, v.mask, v.match_pos = None, None, None, -1
        v.matches = v.matches[:0]
        v.highlight = None
        self.refind()  # the search, over the events there are now
