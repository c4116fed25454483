"""The analysis of an opened session: the NCCL kernels' arguments fetched from the source files
(io) handed to the analysis (which never reads files). The window, the command line and reports
all analyse through here, so they agree."""
from __future__ import annotations

from .model.trace import Trace


def analyze_session(trace: Trace) -> dict:
    from .analysis.findings import analyze
    from .io.comm_args import collective_args
    return analyze(trace, collective_args(trace))
