"""`gpuviewer sql` and `gpuviewer stats`: the query layer (gpuviewer.query) on the command line."""
from __future__ import annotations

import sys

TEXT_ROWS = 1000  # a terminal shows this many rows; --csv and --json write every row


def add_parsers(sub, common) -> None:
    from ..query.stats import REPORTS
    sq = sub.add_parser("sql", parents=[common], help="run DuckDB SQL over the session's tables",
                        description="Tables: slices, kernels, memops, steps, collectives, counters, "
                                    "findings, and the summaries kern_sum, api_sum, nvtx_sum, mem_sum, "
                                    "nccl_sum. Times are int64 ns. The last PATH is the query unless "
                                    "--query-file is given.")
    sq.add_argument("--query-file", metavar="FILE", help="read the query from FILE")
    _formats(sq)
    sq.set_defaults(func=cmd_sql)
    st = sub.add_parser("stats", parents=[common], help="summaries like nsys stats (kernels, API, NVTX, memory, NCCL)")
    st.add_argument("--report", default="kern", choices=list(REPORTS),
                    help="kern: GPU kernels, api: CUDA API, nvtx: NVTX ranges, mem: memcpy/memset, "
                         "nccl: collectives (default kern)")
    st.add_argument("--rank", type=int, help="one rank (default: every rank together)")
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
    from .cli import _fail, _open_or_fail
    from ..query.sql import ALL_TABLES, QueryError
    paths = list(args.paths)
    if args.query_file:
        try:
            with open(args.query_file, encoding="utf-8") as f:
                query = f.read()
        except (OSError, UnicodeDecodeError) as e:
            return _fail(f"{args.query_file}: cannot read the query: {getattr(e, 'strerror', None) or e}")
    elif len(paths) < 2:
        return _fail('give the query after the paths: gpuviewer sql TRACE "SELECT count(*) FROM kernels"')
    else:
        query = paths.pop()
    s, rc = _open_or_fail(paths, args, _open)
    if s is None:
        return rc
    try:
        df = s.sql(query)
    except QueryError as e:
        hint = f" (tables: {', '.join(ALL_TABLES)})" if "Catalog Error" in str(e) else ""
        return _fail(f"SQL: {e}{hint}", args.debug)
    return _write(df, args)


def cmd_stats(args) -> int:
    from .cli import _fail, _open_or_fail
    s, rc = _open_or_fail(args.paths, args, _open)
    if s is None:
        return rc
    if args.rank is not None and args.rank not in s.ranks:
        return _fail(f"no rank {args.rank} in this session (ranks: {', '.join(map(str, s.ranks))})")
    return _write(s.stats(args.report, rank=args.rank), args)


def _write(df, args) -> int:
    from .cli import _json, _out
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
        shown = df.head(TEXT_ROWS)
        _out(shown.to_string(index=False, max_colwidth=80, float_format=lambda x: f"{x:,.3f}"))
        if len(df) > TEXT_ROWS:
            print(f"... {len(df) - TEXT_ROWS:,} more rows: use --csv or --json for every row", file=sys.stderr)
    return 0


def records(df) -> list[dict]:
    """Rows as plain dicts: missing values (NaN, NA) as None."""
    obj = df.astype(object).where(df.notna(), None)
    return obj.to_dict("records")
