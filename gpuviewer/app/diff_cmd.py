"""`gpuviewer diff A [B]`: compare two runs, or two ranks or steps of one run, as text, JSON,
Markdown or a self-contained HTML file. The comparison itself is analysis/diff.py; this module
opens the sessions, hands the NCCL arguments over, and renders the tables."""

from __future__ import annotations

import html
import os
import sys
import textwrap

from ..analysis.diff_text import collective_verdict, headline, size_text
from ..analysis.diff_text import cut as _cut
from ..analysis.diff_text import dms as _dms
from ..analysis.diff_text import ms as _ms
from ..analysis.diff_text import verdict as _verdict

USAGE_STEPS = "SA [SB]: all (default), median, a step N, a range 3-5 or a list 2,4; SB defaults to SA"


def add_parser(sub) -> None:
    d = sub.add_parser(
        "diff",
        help="compare two runs, or two ranks or steps of one run",
        description="Compare session A with session B (or, with one session, rank I with rank J, "
        "or steps with steps): step parts, GPU ops, host ops and collectives, "
        "sorted by impact, with deltas beyond the run's step-to-step noise marked.",
    )
    d.add_argument("a", metavar="A", help="trace file or folder (one session, any number of ranks)")
    d.add_argument("b", metavar="B", nargs="?", help="second session (default: A again, to compare ranks or steps)")
    d.add_argument(
        "--ranks",
        nargs=2,
        metavar=("I", "J"),
        help="rank I of A against rank J of B; J may be 'median' (the median of the other ranks)",
    )
    d.add_argument("--steps", nargs="+", metavar="S", help=USAGE_STEPS)
    fmt = d.add_mutually_exclusive_group()
    fmt.add_argument("--json", action="store_true", help="one JSON object on stdout")
    fmt.add_argument("--md", action="store_true", help="Markdown on stdout")
    fmt.add_argument("-o", "--output", metavar="OUT", help="write OUT.html (self-contained) or OUT.md")
    d.add_argument("--top", type=int, default=20, metavar="N", help="rows a table shows in text, Markdown, HTML (20)")
    d.add_argument("--no-cache", action="store_true", help="do not read or write the column cache")
    d.add_argument("--debug", action="store_true", help="show tracebacks")
    d.add_argument("--hosts", metavar="SPEC", help="ranks per host, e.g. 0-3,4-7 (default: from the files)")
    d.add_argument("--no-align", action="store_true", help="keep each host's clock as recorded")
    d.set_defaults(func=cmd_diff)


def _rank_arg(v: str):
    if v.lower() == "median":
        return "median"
    return int(v)


def _measure(path: str, args):
    """The session at path, measured for a diff; or the exit status after a one-line error."""
    from ..analysis.diff_tables import measure
    from ..io.comm_args import collective_args
    from ..io.errors import TraceError
    from .output import cannot_read as _cannot_read
    from .output import fail as _fail
    from .output import load as _load

    try:
        trace = _load([path], args)
    except TraceError as e:
        return _fail(str(e), args.debug)
    except Exception as e:  # noqa: BLE001 - never a traceback for bad input
        return _cannot_read([path], e, args.debug)
    if trace.format == "nvidia-smi-topo" or not len(trace):
        return _fail(f"{path}: holds no trace events to compare", args.debug)
    from .output import warn

    # a side read in part is said; a folder's side named by its path (its warnings name its files)
    warn(f"{path}: {w}" if os.path.isdir(path) else w for w in trace.warnings)
    try:
        return measure(trace, collective_args(trace))
    except Exception as e:  # noqa: BLE001 - an analysis bug must not look like a crash
        return _fail(
            f"{path}: the diff failed on this trace, a bug in gpuviewer ({type(e).__name__}); "
            "please report it with the output of --debug",
            args.debug,
        )


def cmd_diff(args) -> int:
    from ..analysis.diff import DiffError, diff, parse_steps
    from .output import fail as _fail
    from .output import json_out as _json
    from .output import out as _out

    try:
        ranks = None if args.ranks is None else (int(args.ranks[0]), _rank_arg(args.ranks[1]))
    except ValueError:
        return _fail(f"--ranks {' '.join(args.ranks)}: expected two rank numbers, or a rank and 'median'")
    if args.steps is not None and len(args.steps) > 2:
        return _fail(f"--steps takes one or two values ({USAGE_STEPS})")
    if args.top < 1:
        return _fail("--top must be 1 or more")
    if args.output and not args.output.lower().endswith((".html", ".htm", ".md")):
        return _fail(f"{args.output}: the output must end in .html or .md")
    if args.output:
        from ..io.outputs import refusal

        why = refusal(args.output)  # before the (long) measuring: never over someone else's file
        if why is not None:
            return _fail(why)
    try:
        spec = args.steps or ["all"]
        steps = (parse_steps(spec[0]), parse_steps(spec[-1]))
    except DiffError as e:
        return _fail(str(e))
    paths = {"a": args.a, "b": args.b or args.a}
    ma = _measure(paths["a"], args)
    if isinstance(ma, int):
        return ma
    mb = _measure(paths["b"], args) if args.b else ma  # one session: ranks or steps of it
    if isinstance(mb, int):
        return mb
    try:
        d = diff(ma, mb, ranks=ranks, steps=steps)
    except DiffError as e:
        where = paths[e.side] if e.side else paths["a"] if not args.b else f"{paths['a']} and {paths['b']}"
        return _fail(f"{where}: {e}", args.debug)
    except Exception as e:  # noqa: BLE001
        return _fail(
            f"{paths['a']} vs {paths['b']}: the diff failed, a bug in gpuviewer ({type(e).__name__}); "
            "please report it with the output of --debug",
            args.debug,
        )
    d["a"]["paths"], d["b"]["paths"] = [paths["a"]], [paths["b"]]
    if args.json:
        _json(d)
        return 0
    if args.md:
        from ..model.plain import term

        sys.stdout.write(term(to_markdown(d, args.top)))
        return 0
    if args.output:
        text = to_html(d, args.top) if args.output.lower().endswith((".html", ".htm")) else to_markdown(d, args.top)
        from ..io.outputs import OutputRefused

        try:
            _write(args.output, text)
        except OutputRefused as e:
            return _fail(str(e), args.debug)
        except OSError as e:
            return _fail(f"{args.output}: cannot write it ({e.strerror or type(e).__name__})", args.debug)
        _out(f"wrote {args.output}")
        return 0
    for line in to_text(d, args.top):
        _out(line)
    return 0


def _write(path: str, text: str) -> None:
    from ..io.atomic import write_text
    from ..io.outputs import check
    from ..model.plain import text as printable

    check(path)  # again: the file may have appeared during the diff
    write_text(path, printable(text))


# -- the tables, once for every output --------------------------------------------------------


def _us(ns) -> str:
    return "-" if ns is None else f"{ns / 1e3:.1f}"


def _pct(x) -> str:
    return "-" if x is None else f"{x:.1%}"


def _gbps(x) -> str:
    return "-" if x is None else f"{x:.1f}"


def _n(x) -> str:
    return f"{x:g}"


def _parts_rows(parts: list[dict]) -> list[list[str]]:
    return [
        [r["part"], _ms(r["a_ns"]), _ms(r["b_ns"]), _dms(r["delta_ns"]), _ms(r["noise_ns"]), _verdict(r["significant"])]
        for r in parts
    ]


PARTS_HEAD = ["part", "A ms", "B ms", "Δ ms", "noise ms", ""]
NAMED_HEAD = [
    "name",
    "kind",
    "count A",
    "count B",
    "A ms",
    "B ms",
    "Δ ms",
    "mean A µs",
    "mean B µs",
    "share A",
    "share B",
    "",
]
COLL_HEAD = [
    "group",
    "collective",
    "bytes",
    "count A",
    "count B",
    "wait A ms",
    "wait B ms",
    "transfer A ms",
    "transfer B ms",
    "busbw A GB/s",
    "busbw B GB/s",
    "Δ wait ms",
    "Δ transfer ms",
    "",
]


TEXT_COLUMNS = {"part", "name", "kind", "group", "collective", ""}


def _named_rows(rows: list[dict]) -> list[list[str]]:
    return [
        [
            r["name"],
            r["kind"],
            _n(r["a_count"]),
            _n(r["b_count"]),
            _ms(r["a_total_ns"]),
            _ms(r["b_total_ns"]),
            _dms(r["delta_ns"]),
            _us(r["a_mean_ns"]),
            _us(r["b_mean_ns"]),
            _pct(r["a_share"]),
            _pct(r["b_share"]),
            _verdict(r["significant"]),
        ]
        for r in rows
    ]


def _coll_rows(rows: list[dict]) -> list[list[str]]:
    return [
        [
            r["group"],
            r["name"],
            size_text(r["bytes"]),
            _n(r["a_count"]),
            _n(r["b_count"]),
            _ms(r["a_wait_ns"]),
            _ms(r["b_wait_ns"]),
            _ms(r["a_transfer_ns"]),
            _ms(r["b_transfer_ns"]),
            _gbps(r["a_busbw_gbps"]),
            _gbps(r["b_busbw_gbps"]),
            _dms(r["delta_wait_ns"]),
            _dms(r["delta_transfer_ns"]),
            collective_verdict(r),
        ]
        for r in rows
    ]


def tables(d: dict, top: int) -> list[tuple[str, str, list[str], list[list[str]]]]:
    """(title, note, header, rows) of every table, in the order shown."""
    out = [
        (
            "Step time and its parts (ms a step)",
            "step: the host's step range (ProfilerStep#N, an NVTX step; the GPU time where none); GPU time: the "
            "step's GPU window and the idle around it, which its parts less 'GPU overlap' (kinds of work at once: "
            "communication under compute) add up to; the host's parts add up to the step (not measured in a capture "
            "without steps).",
            PARTS_HEAD,
            _parts_rows(d["step_parts"]),
        )
    ]
    for p in d["step_parts_by_rank"]:
        b = ("median of ranks " if len(p["b_ranks"]) > 1 else "rank ") + ", ".join(map(str, p["b_ranks"]))
        who = f"rank {', '.join(map(str, p['a_ranks']))} vs {b}"
        out.append((f"Step parts, {who}", "", PARTS_HEAD, _parts_rows(p["parts"])))
    if d["collective_totals"]:
        note = "wait: for the last rank to arrive; transfer: from then to the end; busbw with NCCL's bus factors."
        if not all(r["matched"] for r in d["collective_totals"]):
            note += (
                " Some kernels were not matched with other ranks (a rank opened alone?): their wait "
                "is unknown and counted in the transfer."
            )
        out.append(
            ("Collectives (ms a step, every size together)", note, COLL_HEAD, _coll_rows(d["collective_totals"][:top]))
        )
        out.append(("Collectives by size", "", COLL_HEAD, _coll_rows(d["collectives"][:top])))
    for key, title in (("kernels", "GPU ops"), ("host_ops", "Host ops")):
        rows = d[key]
        more = f" ({len(rows) - top:,} more in --json)" if len(rows) > top else ""
        out.append(
            (
                f"{title} (ms a step){more}",
                "total: time a step spends in it; share: of the step"
                + (
                    "; inclusive: an op's time holds the ops it calls, so shares overlap." if key == "host_ops" else "."
                ),
                NAMED_HEAD,
                _named_rows(rows[:top]),
            )
        )
    for key, title in (("kernels", "GPU ops"), ("host_ops", "Host ops")):
        for side in ("a", "b"):
            only = [r for r in d[key] if r["only"] == side][:top]
            if only:
                out.append((f"{title} only in {side.upper()}", "", NAMED_HEAD, _named_rows(only)))
    return out


def to_text(d: dict, top: int = 20) -> list[str]:
    lines = headline(d)
    for title, note, head, rows in tables(d, top):
        rows = [[_cut(c, 60) for c in r] for r in rows]
        w = [max(len(x) for x in col) for col in zip(head, *rows)] if rows else [len(h) for h in head]
        lines += ["", title] + textwrap.wrap(note, 110)
        for r in [head] + rows:
            lines.append(
                "  ".join(c.ljust(w[i]) if head[i] in TEXT_COLUMNS else c.rjust(w[i]) for i, c in enumerate(r)).rstrip()
            )
    return lines


def to_markdown(d: dict, top: int = 20) -> str:
    """Markdown (model.markdown: every name escaped, so a kernel named <b>|x shows as written)."""
    from ..model.markdown import escape_cell, escape_line, table

    out = ["# gpuviewer diff", ""] + [
        ("  - " if x.startswith("  ") else "- ") + escape_line(x.strip(), 10_000) for x in headline(d)
    ]
    for title, note, head, rows in tables(d, top):
        out += ["", f"## {escape_cell(title, 120)}", ""] + ([escape_line(note, 10_000), ""] if note else [])
        out += table(head, rows, right=[h not in TEXT_COLUMNS for h in head], cut=120)
    return "\n".join(out) + "\n"


CSS = (
    "body{font-family:sans-serif;margin:24px;color:#1e293b}table{border-collapse:collapse;margin:8px 0}"
    "td,th{border:1px solid #e2e8f0;padding:2px 6px;font-size:13px;text-align:right}th{background:#f1f5f9}"
    "td:first-child,th:first-child,td.k{text-align:left}.sig{color:#b91c1c;font-weight:600}"
    ".noise{color:#64748b}.note{color:#475569;font-size:12px}"
)


def to_html(d: dict, top: int = 20) -> str:
    from ..model.plain import term

    def e(s: str, quote: bool = True) -> str:  # every string from a trace (names, groups, paths)
        return html.escape(term(s), quote=quote)

    out = [
        "<!DOCTYPE html><html><head><meta charset='utf-8'><title>gpuviewer diff</title>"
        f"<style>{CSS}</style></head><body><h1>gpuviewer diff</h1><ul>"
    ]
    out += [f"<li>{e(x)}</li>" for x in headline(d)]
    out.append("</ul>")
    for title, note, head, rows in tables(d, top):
        out.append(f"<h2>{e(title)}</h2>" + (f"<p class='note'>{e(note)}</p>" if note else ""))
        out.append("<table><tr>" + "".join(f"<th>{e(h)}</th>" for h in head) + "</tr>")
        for r in rows:
            cls = "sig" if r[-1].endswith("significant") else "noise"
            cells = [
                f"<td class='k' title='{e(c)}'>{e(_cut(c, 110))}</td>"
                if head[i] in TEXT_COLUMNS
                else f"<td>{e(c)}</td>"
                for i, c in enumerate(r[:-1])
            ]
            out.append("<tr>" + "".join(cells) + f"<td class='{cls}'>{e(r[-1])}</td></tr>")
        out.append("</table>")
    out.append("<p class='note'>Made by gpuviewer.</p></body></html>")
    return "\n".join(out) + "\n"
