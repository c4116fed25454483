"""The analysis of an opened session: the NCCL kernels' arguments fetched from the source files
(io) handed to the analysis (which never reads files). The window, the command line and reports
all analyse through here, so they agree."""
from __future__ import annotations

from typing import TYPE_CHECKING

from ..model.trace import Trace

if TYPE_CHECKING:
    from ..analysis.results import Analysis


def analyze_session(trace: Trace) -> "Analysis":
    from ..analysis.findings import analyze
    from ..io.args import event_args
    from ..io.comm_args import collective_args
    return analyze(trace, collective_args(trace), event_args)


def measure_for_diff(trace: Trace):
    """What `gpuviewer diff` and the Compare window compare (analysis.diff_tables.measure), and
    the NCCL kernels' arguments it used (the window finds a collective's kernels with them)."""
    from ..analysis.diff_tables import measure
    from ..io.comm_args import collective_args
    args = collective_args(trace)
    return measure(trace, args), args


def analyze_keeping_parts(trace: Trace) -> "Analysis":
    """analyze_session, also keeping the ranks' maps in Analysis.parts (`analyze --summary`
    writes them: the same tables a Dask run writes)."""
    from ..analysis.findings import analyze
    from ..io.args import event_args
    from ..io.comm_args import collective_args
    return analyze(trace, collective_args(trace), event_args, keep_parts=True)
