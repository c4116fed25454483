"""gpuviewer: a desktop trace explorer for GPU and distributed-training performance.

In a notebook: `s = gpuviewer.open("trace_dir")`, then `s.kernels`, `s.steps`, `s.sql(...)`.
"""

__version__ = "0.1.0"


def open(paths, **kwargs):  # noqa: A001 - the notebook entry point, named as users expect
    """Open trace files or folders (one rank per file) as a Session (see gpuviewer.session)."""
    from .session import Session

    return Session.open(paths, **kwargs)
