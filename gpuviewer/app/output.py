"""The command line's output helpers, shared by cli.py and the command modules (diff_cmd,
query_cmd, scale_cmd, whatif_cmd): one-line errors on stderr (exit 2), escaped lines and JSON on
stdout, and opening a session with the terminal's progress line."""

from __future__ import annotations

import sys


def fail(msg: str, debug: bool = False) -> int:
    from ..io.interrupts import interrupted
    from ..model.plain import line

    if interrupted():  # an error Ctrl+C caused on its way up (a broken wait): said as Ctrl+C
        raise KeyboardInterrupt

    if debug:
        import traceback

        traceback.print_exc()
    # line(): a newline in a file name is escaped too, so the message stays one line
    print(f"gpuviewer: {line(msg)}", file=sys.stderr)
    return 2


def warn(messages) -> None:
    """Each of the readers' warnings (a file cut short, events dropped, ranks left out) as one
    'gpuviewer: warning:' line on stderr: a command that prints numbers must not print them from
    a partly read trace without saying so (stdout stays the result alone)."""
    from ..model.plain import line

    for m in messages:
        print(f"gpuviewer: warning: {line(m)}", file=sys.stderr, flush=True)


def out(text: str = "") -> None:
    """Print one line that may carry names from a trace or file names: control characters are
    escaped (newlines too), so a kernel named with terminal escape sequences cannot drive the
    user's terminal and a file name cannot print a line of its own."""
    from ..model.plain import line

    print(line(text))


def json_out(obj) -> None:
    from ..model.plain import json_bytes

    sys.stdout.write(json_bytes(obj).decode() + "\n")


def session_name_of(paths: list[str]) -> str:
    from ..errors import session_name

    return session_name(paths)


def cannot_read(paths: list[str], e: BaseException, debug: bool) -> int:
    from ..errors import describe

    return fail(describe(e, paths), debug)


def load(paths: list[str], args) -> object:
    from ..session import open_session
    from .term_progress import of

    progress = of(args)  # "reading X: 41 of 166 MB, ..." on a terminal after a second
    progress.phase("opening " + session_name_of(paths))
    try:
        return open_session(
            paths,
            use_cache=not args.no_cache,
            align=not getattr(args, "no_align", False),
            hosts=getattr(args, "hosts", None),
            progress=progress,
        )
    finally:
        progress.pause()


def open_or_fail(paths: list[str], args, opener=None):
    """(what opener(paths, args) returned, None), or (None, exit code) after one line on stderr:
    a TraceError's own words, anything else as "cannot read" naming the session."""
    from ..io.errors import TraceError

    try:
        return (opener or load)(paths, args), None
    except TraceError as e:
        return None, fail(str(e), args.debug)
    except Exception as e:  # noqa: BLE001 - never a traceback for bad input
        return None, cannot_read(paths, e, args.debug)


def rank_line(r: dict, host: str | None = None) -> str:
    """One rank of `info`'s text: events, kernels, lanes, devices, steps, span (and host)."""
    steps = ",".join(map(str, r["steps"])) or "-"
    return (
        f"rank {r['rank']:<3}    {r['events']:,} events, {r['kernels']:,} kernels "
        f"({r['nccl_kernels']:,} NCCL), {r['lanes']} lanes, devices {r['devices']}, "
        f"steps {steps}, {(r['end_ns'] - r['start_ns']) / 1e6:.1f} ms from its first event to its last"
        + (f", host {host}" if host else "")
    )
