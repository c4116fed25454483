"""Many ranks from the command line: `gpuviewer analyze PATHS --dask [ADDRESS]` (one map per
file on Dask workers, the reduce here), `--summary OUT.gvsum` (the session summary, also
without --dask), and `gpuviewer analyze|info OUT.gvsum` (open a summary: what the run that
wrote it found). cli.py dispatches here; the work is in gpuviewer/scale."""

from __future__ import annotations

import sys
import time

LOCAL = "local"  # --dask without an address: a LocalCluster of this machine


def add_options(an) -> None:
    an.add_argument(
        "--dask",
        nargs="?",
        const=LOCAL,
        metavar="ADDRESS",
        help="map each file on Dask workers and reduce here: a LocalCluster of this machine's cores "
        "(local:N for N workers), or the scheduler at ADDRESS (tcp://host:8786), whose workers "
        "read the files by path",
    )
    an.add_argument(
        "--summary",
        metavar="OUT.gvsum",
        help="also write the session summary (Parquet tables and a manifest) that "
        "`gpuviewer analyze OUT.gvsum` and `gpuviewer info OUT.gvsum` open",
    )


def is_summary_session(args) -> bool:
    from ..scale.summary import is_summary

    return len(args.paths) == 1 and is_summary(args.paths[0])


def wanted(args) -> bool:
    return getattr(args, "dask", None) is not None or bool(getattr(args, "summary", None)) or is_summary_session(args)


def _fail(msg: str, args, code: int = 2) -> int:
    from .output import fail

    fail(msg, args.debug)
    return code


def _warn(msg: str) -> None:
    from .output import warn

    warn([msg])


def cmd_analyze(args, show) -> int:
    """show(analysis, args): cli.show_analysis (text, --json or --md)."""
    from ..scale.summary import SummaryError, read_analysis

    if is_summary_session(args):
        if args.dask is not None or args.summary:
            return _fail(f"{args.paths[0]}: a summary is analysed already; open it without --dask or --summary", args)
        from ..scale.summary import read_manifest

        try:
            m = read_manifest(args.paths[0])  # read once: the analysis and its warnings
            a = read_analysis(args.paths[0], m)
            a.warnings = [str(w) for w in m.get("warnings") or []]
            for w in a.warnings:  # what the run that wrote it said, said again
                _warn(w)
            return show(a, args)
        except SummaryError as e:
            return _fail(str(e), args)
    if args.summary:
        from ..scale.summary import check_target

        try:
            check_target(args.summary)
        except SummaryError as e:
            return _fail(f"cannot write the summary: {e}", args)
    if args.dask is not None:
        return _on_dask(args, show)
    return _here(args, show)


def _here(args, show) -> int:
    """--summary without --dask: the ordinary analysis of the whole trace, and its summary."""
    from ..io.errors import TraceError
    from ..scale.summary import SummaryError, write
    from ..session.analysis import analyze_keeping_parts
    from .output import cannot_read as _cannot_read
    from .output import load as _load
    from .output import session_name_of as _session_name

    try:
        trace = _load(args.paths, args)
    except TraceError as e:
        return _fail(str(e), args)
    except Exception as e:  # noqa: BLE001 - never a traceback for bad input
        return _cannot_read(args.paths, e, args.debug)
    for w in trace.warnings:
        _warn(w)
    try:
        a = analyze_keeping_parts(trace)
    except Exception as e:  # noqa: BLE001
        return _fail(
            f"{_session_name(args.paths)}: the analysis failed on this trace, a bug in gpuviewer "
            f"({type(e).__name__}); please report it with the output of --debug",
            args,
        )
    try:
        write(
            args.summary,
            analysis=a,
            parts=a.parts,
            files=list(trace.metadata.get("files", [])),
            fmt=trace.format,
            hosts={r.rank: r.host for r in trace.ranks},
            hosts_from=trace.metadata.get("hosts_from", "one folder"),
            alignment=trace.metadata.get("alignment") or {"method": "same-host", "residual_ns": None},
            offsets={r.rank: r.clock_offset_ns for r in trace.ranks},
            warnings=trace.warnings,
            created_by=_me(),
        )
    except (SummaryError, OSError) as e:
        return _fail(f"cannot write the summary: {e}", args)
    return show(a, args)


class _Progress:
    """ "ranks done/total" on stderr: redrawn in place on a terminal, else a line every 5%."""

    def __init__(self) -> None:
        self.tty = sys.stderr.isatty()
        self.last = -1
        self.t0 = time.perf_counter()

    def __call__(self, done: int, total: int) -> None:
        step = done * 20 // max(total, 1)
        if not self.tty and step == self.last and done != total:
            return
        self.last = step
        line = f"ranks {done}/{total} ({time.perf_counter() - self.t0:.1f} s)"
        if self.tty:
            sys.stderr.write("\r" + line + ("\n" if done == total else ""))
        else:
            sys.stderr.write(line + "\n")
        sys.stderr.flush()


def _on_dask(args, show) -> int:
    from ..io.errors import TraceError
    from ..scale import dask_run
    from ..scale.many import NothingAnalysed, analyze_many
    from ..scale.summary import SummaryError, write

    try:
        client, cluster = dask_run.connect(args.dask, quiet=not args.debug)
    except dask_run.DaskMissing as e:
        return _fail(str(e), args)
    except dask_run.ClusterFailed as e:
        return _fail(str(e), args)
    try:
        res = analyze_many(
            args.paths,
            client=client,
            use_cache=not args.no_cache,
            hosts=args.hosts,
            align=not args.no_align,
            progress=None if getattr(args, "quiet", False) else _Progress(),
        )
    except TraceError as e:
        return _fail(str(e), args)
    except NothingAnalysed as e:
        for line in str(e).splitlines():
            _warn(f"not analysed: {line}")
        return _fail("no rank could be analysed", args, 1)
    except dask_run.ClusterFailed as e:
        return _fail(str(e), args, 1)
    finally:
        dask_run.close(client, cluster)
    for w in res.notes + res.warnings:  # the readers' and the alignment's, as without --dask
        _warn(w)
    for f in res.failed:  # named, and in the JSON: a run missing ranks never looks whole
        _warn(f"not analysed: {f['error']}")
    a = res.analysis
    a.failed_ranks = list(res.failed)
    a.warnings = list(res.notes + res.warnings)  # for the --md report, as printed above
    if args.summary:
        try:
            write(
                args.summary,
                analysis=a,
                parts=res.parts,
                files=res.files,
                fmt=res.format,
                hosts=res.hosts,
                hosts_from=res.hosts_from,
                alignment=res.alignment,
                offsets=res.offsets,
                failed=res.failed,
                warnings=res.warnings + res.notes,
                created_by=_me(),
            )
        except (SummaryError, OSError) as e:
            return _fail(f"cannot write the summary: {e}", args)
    return show(a, args)


def _me() -> str:
    from .. import __version__

    return f"gpuviewer {__version__}"


def cmd_info(args) -> int:
    from ..scale.summary import SummaryError, info
    from .output import json_out as _json
    from .output import out as _out

    try:
        s = info(args.paths[0])
    except SummaryError as e:
        return _fail(str(e), args)
    if args.json:
        _json(s)
        return 0
    _out(f"format      gvsum (a session summary of {s['source_format']} traces, {s['created_by']})")
    for f in s["files"][:20]:
        _out(f"file        {f}")
    if len(s["files"]) > 20:
        _out(f"file        ... and {len(s['files']) - 20} more")
    _out(f"events      {s['events']:,}")
    _out(f"kernels     {s['kernels']:,}")
    from .output import rank_line

    for r in s["ranks"]:
        _out(rank_line(r, r.get("host")))
    from ..session import alignment_line

    _out(
        f"clocks      {alignment_line(s.get('alignment') or {}, [r.get('host') for r in s['ranks']], s.get('hosts_from'))}"
    )
    _out(f"findings    {s['findings']} (gpuviewer analyze {args.paths[0]})")
    for f in s["failed_ranks"]:
        _out(f"failed      {f['error']}")
    for w in s["warnings"]:
        _out(f"warning     {w}")
    return 0
