"""gpuviewer: a desktop trace explorer for GPU and distributed-training performance.

In a notebook: `s = gpuviewer.open("trace_dir")`, then `s.kernels`, `s.steps`, `s.sql(...)`;
`help(gpuviewer.Session)` lists what a session offers.
"""

__version__ = "0.1.0"


def open(paths, **kwargs):  # noqa: A001 - the notebook entry point, named as users expect
    """Open trace files or folders (one rank per file) as a Session (see gpuviewer.session)."""
    from .session import Session

    return Session.open(paths, **kwargs)


def __getattr__(name: str):
    # Session on first use: `import gpuviewer` (the CLI's first import) stays free of numpy
    if name == "Session":
        from .session import Session

        return Session
    raise AttributeError(f"module 'gpuviewer' has no attribute {name!r}")
