"""What the window's table panels (SQL, Statistics, result tables) need from the core, through
the session package: the widgets import this, never query/ or io/ themselves (the forbidden
import contract in .importlinter)."""

from __future__ import annotations


def memory_peaks_per_step(trace, rank: int, device):
    """A device's allocated peak in each step of a rank (analysis.memory.peaks_per_step)."""
    from ..analysis.memory import peaks_per_step

    return peaks_per_step(trace, rank, device)


def memory_capacity(trace, rank: int, device):
    """A device's memory in bytes as the trace records it, or None."""
    from ..analysis.memory import capacity_bytes

    return capacity_bytes(trace, rank, device)


def stats_reports() -> dict[str, str]:
    """The summaries `gpuviewer stats --report` offers, by key (without importing pandas)."""
    from ..query.report_names import REPORTS

    return dict(REPORTS)


def longest(session, report: str, name: str, rank: int | None = None) -> int | None:
    """The longest event of a statistics row (a kernel, API call, range...), to go to it."""
    from ..query.stats import longest as find

    return find(session, report, name, rank)


def sql_query(session):
    """A cancellable SQL query runner over the session's tables (query.sql.Query)."""
    from ..query.sql import Query

    return Query(session)


def event_at(trace, rank: int, start: int) -> int | None:
    """The event of `rank` starting at `start` (a result row without an id), or None."""
    from ..query.tables import event_at as find

    return find(trace, rank, start)
