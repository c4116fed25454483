"""`gpuviewer sql` and `gpuviewer stats`: the query layer (gpuviewer.query) on the command line."""

from __future__ import annotations

import sys

TEXT_ROWS = 1000  # a terminal shows this many rows; --csv and --json write every row
DEFAULT_TIMEOUT_S = 60.0
MAX_QUERY_FILE = 1 << 20  # a query longer than this is not a query someone wrote


def add_parsers(sub, common) -> None:
    from ..query.report_names import REPORTS  # not stats.py: a command other than stats needs no pandas

    sq = sub.add_parser(
        "sql",
        parents=[common],
        help="run DuckDB SQL over the session's tables",
        description="Tables: slices, kernels, memops, steps, collectives, counters, "
        "findings, and the summaries kern_sum, api_sum, nvtx_sum, mem_sum, "
        "nccl_sum. Times are int64 ns. The last PATH is the query unless "
        "--query-file is given.",
    )
    sq.add_argument("--query-file", metavar="FILE", help="read the query from FILE (a regular file of at most 1 MB)")
    sq.add_argument(
        "--timeout",
        metavar="S",
        default=str(DEFAULT_TIMEOUT_S),
        help=f"stop a query running longer than S seconds (default {DEFAULT_TIMEOUT_S:g})",
    )
    sq.add_argument(
        "--memory-limit",
        metavar="SIZE",
        help="the most memory DuckDB may use, e.g. 2GB (default a quarter of this machine's)",
    )
    _formats(sq)
    sq.set_defaults(func=cmd_sql)
    st = sub.add_parser("stats", parents=[common], help="summaries like nsys stats (kernels, API, NVTX, memory, NCCL)")
    st.add_argument(
        "--report",
        default="kern",
        choices=list(REPORTS),
        help="kern: GPU kernels, api: CUDA API, nvtx: NVTX ranges, mem: memcpy/memset, "
        "nccl: collectives, efficiency: kernel families' work and rates against the "
        "device's peaks (default kern)",
    )
    st.add_argument("--rank", type=int, help="one rank (default: every rank together)")
    from .peak_opts import add_options

    add_options(st)
    _formats(st)
    st.set_defaults(func=cmd_stats)


def _formats(p) -> None:
    g = p.add_mutually_exclusive_group()
    g.add_argument("--csv", action="store_true", help="CSV on stdout (every row)")
    g.add_argument("--json", action="store_true", help="a JSON array of row objects on stdout (every row)")


def _open(paths, args):
    from ..session import Session

    return Session.open(paths, use_cache=not args.no_cache, align=not args.no_align, hosts=args.hosts)


def cmd_sql(args) -> int:
    from ..query.sql import ALL_TABLES, QueryError, is_empty, parse_size, run
    from .output import fail as _fail
    from .output import open_or_fail as _open_or_fail

    paths = list(args.paths)
    try:  # options first: a bad value is refused before the trace is read
        timeout = float(args.timeout)
        if not 0 < timeout <= 1e6:  # also refuses nan and inf
            raise ValueError
    except ValueError:
        return _fail(
            f"--timeout {args.timeout}: give the seconds a query may run, a number above 0 and at most 1000000 (e.g. 60)"
        )
    try:
        memory_limit = parse_size(args.memory_limit) if args.memory_limit is not None else None
    except ValueError as e:
        return _fail(f"--memory-limit {args.memory_limit}: {e}")
    if args.query_file:
        query, err = read_query_file(args.query_file)
        if err:
            return _fail(err)
    elif len(paths) < 2:
        return _fail('give the query after the paths: gpuviewer sql TRACE "SELECT count(*) FROM kernels"')
    else:
        query = paths.pop()
    if is_empty(query):
        where = f"{args.query_file} holds no query" if args.query_file else "the query is empty"
        return _fail(f'{where}: give one, e.g. gpuviewer sql TRACE "SELECT count(*) FROM kernels"')
    s, rc = _open_or_fail(paths, args, _open)
    if s is None:
        return rc
    try:
        df = run(s, query, timeout=timeout, memory_limit=memory_limit)
    except QueryError as e:
        hint = f" (tables: {', '.join(ALL_TABLES)})" if "Catalog Error" in str(e) else ""
        return _fail(f"SQL: {e}{hint}", args.debug)
    return _write(df, args)


def read_query_file(path: str) -> tuple[str, str | None]:
    """(the query, None) or ("", one line saying why not). Only a regular file is opened, and
    without blocking: a FIFO would wait for a writer, /dev/zero never ends."""
    from ..io.bounded import NotRegular, TooLarge, read_regular

    try:
        data, _st = read_regular(path, MAX_QUERY_FILE)
        return data.decode("utf-8"), None
    except NotRegular as e:
        return "", f"{path}: cannot read the query: {'a folder' if e.folder else 'not a regular file'}"
    except TooLarge as e:
        if e.size is None:
            return "", f"{path}: cannot read the query: more than {MAX_QUERY_FILE:,} bytes"
        return "", f"{path}: cannot read the query: {e.size:,} bytes, more than {MAX_QUERY_FILE:,}"
    except UnicodeDecodeError:
        return "", f"{path}: cannot read the query: not UTF-8 text"
    except OSError as e:
        return "", f"{path}: cannot read the query: {e.strerror or e}"


def cmd_stats(args) -> int:
    from .output import fail as _fail
    from .output import open_or_fail as _open_or_fail
    from .peak_opts import values

    peaks, err = values(args)  # a bad value is refused before the trace is read
    if err:
        return _fail(err)
    s, rc = _open_or_fail(args.paths, args, _open)
    if s is None:
        return rc
    if args.rank is not None and args.rank not in s.ranks:
        return _fail(f"no rank {args.rank} in this session (ranks: {', '.join(map(str, s.ranks))})")
    from .output import warn

    warn(s.trace.warnings)  # tables of a trace read in part say so
    notes = []  # what a row means where another tool's same report differs (the text form only)
    if args.report == "kern" and "nsys" in str(s.trace.format):
        # the reader names an nsys kernel by its shortName: rows differ from nsys stats' default
        notes.append(
            "note: Nsight Systems kernels are grouped by their short name, as `nsys stats --report "
            "cuda_gpu_kern_sum:base` does (its default groups by the demangled name)"
        )
    if args.report == "nvtx" and s.trace.format == "kineto" and _has_comm_ops(s.trace):
        notes.append(
            "note: PyTorch's nccl:* ranges are kept as communication ops (SQL: slices), not counted here; "
            "the shares are of the other ranges' time"
        )
    return _write(s.stats(args.report, rank=args.rank, **peaks), args, notes)


def _has_comm_ops(trace) -> bool:
    import numpy as np

    from ..model.categories import Cat

    return bool(np.any(np.asarray(trace.columns["cat"]) == Cat.COMM_OP))


def _write(df, args, notes: list[str] | None = None) -> int:
    from .output import json_out as _json
    from .output import out as _out

    if args.json:
        _json(records(df))
    elif args.csv:
        from ..model.plain import term

        out = df.to_csv(index=False, lineterminator="\n")
        sys.stdout.write(term(out) if sys.stdout.isatty() else out)
    else:
        if df.empty:
            _out("(no rows)" if len(df.columns) else "(no result)")
            return 0
        for n in notes or []:
            _out(n)
        shown = df.head(TEXT_ROWS)
        # each cell made one line first (a newline in a kernel name cannot print a row of its
        # own), then the table printed line by line: _out escapes newlines, so the whole table
        # given to it at once came out as one line joined by \x0a
        from ..model.plain import line

        text_cols = [c for c in shown.columns if shown[c].dtype == object or str(shown[c].dtype) == "category"]
        shown = shown.assign(**{c: shown[c].astype(object).map(line, na_action="ignore") for c in text_cols})
        for row in shown.to_string(index=False, max_colwidth=80, float_format=lambda x: f"{x:,.3f}").splitlines():
            _out(row)
        if len(df) > TEXT_ROWS:
            print(f"... {len(df) - TEXT_ROWS:,} more rows: use --csv or --json for every row", file=sys.stderr)
    return 0


def records(df) -> list[dict]:
    """Rows as plain dicts: missing values (NaN, NA) as None."""
    obj = df.astype(object).where(df.notna(), None)
    return obj.to_dict("records")
