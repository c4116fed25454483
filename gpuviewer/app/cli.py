"""Command line: `gpuviewer [FILE...]` opens the window; subcommands work headless."""

from __future__ import annotations

import argparse
import os
import sys
import threading
import time

from .. import __version__

# the output helpers every command shares live in output.py (the commands import them there,
# so no command module imports cli back)
from .output import fail as _fail
from .output import json_out as _json
from .output import open_or_fail as _open_or_fail
from .output import out as _out
from .output import rank_line
from .output import session_name_of as _session_name
from .output import warn as _warn

SUBCOMMANDS = ("info", "screenshot", "analyze", "report", "sql", "stats", "diff", "whatif", "cache")


def cmd_info(args) -> int:
    from . import scale_cmd

    if scale_cmd.is_summary_session(args):  # OUT.gvsum: what the run that wrote it found
        return scale_cmd.cmd_info(args)
    from ..model.summary import summarize

    t0 = time.perf_counter()
    trace, rc = _open_or_fail(args.paths, args)
    if trace is None:
        return rc
    if trace.format == "nvidia-smi-topo" and trace.topology is not None:
        out = trace.topology.to_json()
        if args.json:
            _json(out)
        else:
            _out(f"format      {out['format']}")
            for g in out["gpus"]:
                _out(f"{g['name']:<11} {g['product'] or ''} NUMA {g['numa']} CPUs {g['cpu_affinity']}")
            for ln in out["links"]:
                _out(f"link        {ln['a']} - {ln['b']}: {ln['type']}")
            _out(f"islands     {out['islands']}")
        return 0
    s = summarize(trace)
    s["load_seconds"] = round(time.perf_counter() - t0, 4)
    s["warnings"] = list(trace.warnings)
    if "file_caches" in trace.metadata:  # built from the files' own cache entries (io/cache_join.py)
        s["file_caches"] = trace.metadata["file_caches"]
    s["alignment"] = trace.metadata.get("alignment", {"method": "same-host", "residual_ns": None})
    from ..model.view import initial_view

    v0, v1 = initial_view(trace)
    s["view"] = {"start_ns": v0, "end_ns": v1}  # the range the window opens on
    hosts = {r.rank: (r.host, r.clock_offset_ns) for r in trace.ranks}
    for r in s["ranks"]:
        r["host"], r["clock_offset_ns"] = hosts.get(r["rank"], (None, 0))
    try:
        from ..analysis.memory import peak_bytes_by_rank

        peaks = peak_bytes_by_rank(trace)
        for r in s["ranks"]:
            r["memory_peak_bytes"] = {str(d): v for d, v in peaks.get(r["rank"], {}).items()}
    except ImportError:
        pass
    if args.json:
        _json(s)
        return 0
    _out(f"format      {s['format']}")
    for f in s["files"]:
        _out(f"file        {f}")
    # what the count holds: a file's memory samples and flow arrows are not among them
    _out(f"events      {s['events']:,} (ranges, GPU ops and instant marks; memory samples and flows apart)")
    _out(f"kernels     {s['kernels']:,}")
    _out(f"load        {s['load_seconds']:.3f} s")
    for r in s["ranks"]:
        _out(rank_line(r))
    from ..session import alignment_text

    _out(f"clocks      {alignment_text(trace)}")
    for w in s["warnings"]:
        _out(f"warning     {w}")
    return 0


def cmd_analyze(args) -> int:
    from ..session.analysis import analyze_session
    from . import scale_cmd

    if scale_cmd.wanted(args):  # --dask, --summary, or a summary opened: many ranks (scale_cmd.py)
        return scale_cmd.cmd_analyze(args, show_analysis)
    from .peak_opts import values

    peaks, err = values(args)  # a bad value is refused before the trace is read
    if err:
        return _fail(err)
    trace, rc = _open_or_fail(args.paths, args)
    if trace is None:
        return rc
    _warn(trace.warnings)  # ranks left out, a file cut short: never unsaid under the findings
    from .term_progress import of

    progress = of(args)
    progress.phase(f"analysing {len(trace.ranks)} rank{'s' if len(trace.ranks) != 1 else ''}")
    try:
        a = analyze_session(trace, **peaks)
    except Exception as e:  # noqa: BLE001 - an analysis bug must not look like a crash
        progress.pause()
        return _fail(
            f"{_session_name(args.paths)}: the analysis failed on this trace, a bug in gpuviewer ({type(e).__name__}); "
            "please report it with the output of --debug",
            args.debug,
        )
    progress.pause()
    return show_analysis(a, args)


def show_analysis(a, args) -> int:
    """a: the Analysis (analysis.results)."""
    if args.md:
        from ..analysis.report_md import to_markdown
        from ..model.plain import line, term

        sys.stdout.write(
            term(to_markdown(a, "gpuviewer analysis: " + ", ".join(line(os.path.basename(p)) for p in args.paths)))
        )
        return 0
    if args.json:
        _json(a.to_json())
        return 0

    def show(f, depth=0):
        lead = "    " * depth + ("└ " if depth else "")
        # per step its cause acts in (the findings' order); the what-if line says which steps
        saves = f"{f.saves_column or '-':>12}"
        _out(f"{lead}[{f.severity:<6}] {saves}  {f.rule:<22} {f.title}")
        if f.saving_text:
            _out(f"{' ' * len(lead)}{'':>23}  {f.saving_text}")
        # what to change, under each cause (a symptom's own advice is in --json, the report and the window)
        if not depth and f.advice:
            _out(f"{'':>23}  to do: {f.advice}")
        for c in f.children:
            show(c, depth + 1)

    # a capture without steps: its one "step" is the capture, and no finding is rated high there
    # (said by its ranks' one unnumbered step, with or without a what-if among the findings)
    capture = any(f.capture_ms is not None for f in a.all_findings()) or (
        bool(a.ranks) and all(all(st.get("step") is None for st in r.get("steps") or [{}]) for r in a.ranks)
    )
    if a.findings:
        _out(
            f"severity   {'saves' if capture else 'saves/step':>10}  rule                   finding (symptoms "
            "indented under their cause)"
        )
    for f in a.findings:
        show(f)
    then = (
        "'then': what it saves once the findings above it are fixed, alone far less (its what-if line says); "
        if any(f.saves_once_above for f in a.all_findings())
        else ""
    )
    if a.findings and capture:
        _out(
            "(listed by saves, what fixing it saves of the capture in a what-if replay; severity: that as a share "
            "of the capture, medium >= 2%, none high (one capture without steps does not show a steady state); "
            f"{then}'-': no what-if, "
            "severity from the evidence; the medium of these listed after the medium savings, the low ones after "
            "the low savings (savings under 1% of their steps after these), the notes last)"
        )
    elif a.findings:
        # under the list (scripts read its first row): what its columns and order mean
        _out(
            "(listed by saves/step, what fixing it saves a step it acts in, in a what-if replay; severity: that as a "
            "share of the median step, high >= 10%, medium >= 2% (the what-if line's % is of the steps it acts in, "
            f"not the median step); {then}'-': no what-if, severity from the evidence; the medium and high of these "
            "listed after the medium and high savings, the low ones after the low savings (savings under 1% of their "
            "steps after these), the notes last)"
        )
    if not a.findings:
        # a session without GPU work has nothing to judge: not a clean bill of health (lighttransport's
        # gemm export: three driver calls, its CUDA trace lost)
        from ..model.fmt import gpu_on_record

        # ('see the warnings' only where there are some: a topology file alone has none)
        _out(
            "no findings"
            if not a.ranks or any(gpu_on_record(r) for r in a.ranks)
            else "no findings: no GPU work on record, so nothing to judge"
            + (" (see the warnings)" if a.warnings else "")
        )
    if a.bound_by:
        _out(f"bound by: {a.bound_by} (the critical path across ranks; each step's: analyze --json steps[])")
    from ..model.fmt import utilization_line

    for r in a.ranks:
        _out(f"rank {r['rank']}: {utilization_line(r)}")
    for n in a.notes:
        _out(f"note: {n}")
    if a.efficiency:
        from ..analysis.efficiency_text import summary_lines

        for ln in summary_lines(a.efficiency):
            _out(ln)
    return 0


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="gpuviewer", description="GPU and distributed-training trace explorer")
    p.add_argument("--version", action="version", version=f"gpuviewer {__version__}")
    sub = p.add_subparsers(dest="cmd")
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("paths", nargs="+", metavar="PATH", help="trace files or folders (one session)")
    common.add_argument("--no-cache", action="store_true", help="do not read or write the column cache")
    common.add_argument("--debug", action="store_true", help="show tracebacks")
    common.add_argument(
        "--quiet",
        action="store_true",
        help="no progress line on the terminal (it is never drawn when stderr is not a terminal)",
    )
    common.add_argument("--hosts", metavar="SPEC", help="ranks per host, e.g. 0-3,4-7 (default: from the files)")
    common.add_argument(
        "--no-align",
        action="store_true",
        help="keep each host's clock as recorded (default: align hosts by their collectives)",
    )
    info = sub.add_parser("info", parents=[common], help="summarise a trace")
    info.add_argument("--json", action="store_true", help="one JSON object on stdout")
    info.set_defaults(func=cmd_info)
    an = sub.add_parser("analyze", parents=[common], help="per-step breakdown and findings")
    an.add_argument("--json", action="store_true", help="one JSON object on stdout")
    an.add_argument("--md", action="store_true", help="a Markdown report on stdout")
    from .scale_cmd import add_options

    add_options(an)  # --dask, --summary
    from .peak_opts import add_options as add_peaks

    add_peaks(an)  # --peak-tflops, --peak-gbps
    an.set_defaults(func=cmd_analyze)
    shot = sub.add_parser("screenshot", parents=[common], help="render the window to PNG or SVG, headless")
    shot.add_argument("-o", "--output", required=True, help="OUT.png or OUT.svg")
    shot.add_argument(
        "--window",
        help="START_MS:END_MS, relative to the session start (default: all; write --window=-5:10 for a negative start)",
    )
    shot.add_argument("--size", default="1600x900", help="WxH in pixels, each side 200-8192 (default 1600x900)")
    shot.add_argument("--annotations", help="an annotations JSON file to draw")
    shot.add_argument(
        "--whole-window",
        action="store_true",
        help="the whole window (docks, findings, memory, menus) instead of the timeline alone",
    )
    shot.add_argument(
        "--timeline-only",
        action="store_true",
        help="only the timeline: lane names, events, steps, annotations (the default; "
        "for a session summary, refused rather than picturing its window)",
    )
    shot.set_defaults(func=_screenshot)
    rep = sub.add_parser("report", parents=[common], help="a self-contained HTML or Markdown report")
    rep.add_argument("-o", "--output", required=True, help="OUT.html or OUT.md")
    rep.add_argument("--annotations", help="an annotations JSON file to include")
    rep.set_defaults(func=_report)
    from .query_cmd import add_parsers

    add_parsers(sub, common)
    from .diff_cmd import add_parser as add_diff

    add_diff(sub)
    from .whatif_cmd import add_parser as add_whatif

    add_whatif(sub, common)
    from .cache_cmd import add_parser as add_cache

    add_cache(sub)
    return p


def _report(args) -> int:
    from .gui import cmd_report

    return cmd_report(args)


def _screenshot(args) -> int:
    from .gui import cmd_screenshot

    return cmd_screenshot(args)


def _catch_sigint() -> None:
    """Ctrl+C raises KeyboardInterrupt in this process only, and not where Python would lose it
    or leave a lock taken (io/interrupts.py)."""
    from ..io.interrupts import catch_sigint

    catch_sigint(_give_up)


_SAID = threading.Lock()  # taken by whoever prints the "interrupted" line: it is printed once


def _interrupted() -> int:
    """One line and exit 130 (128 + SIGINT, as shells report it) after Ctrl+C. Files being
    written were already removed by the atomic writers' cleanup on the way up."""
    import signal

    from ..io.interrupts import give_up_later

    try:
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # a second Ctrl+C must not break the cleanup
    except ValueError:
        pass
    _say_interrupted()
    give_up_later()  # the cleanup gets its own GIVE_UP_S
    kineto = sys.modules.get("gpuviewer.io.kineto")
    if kineto is not None:  # (the reader's own cleanup has usually done this already)
        kineto.shutdown_pool()  # queued pieces are dropped; running ones end in milliseconds
    return 130


def _say_interrupted() -> None:
    if _SAID.acquire(blocking=False):  # (the main thread and _give_up's may both get here)
        try:  # to the descriptor, not sys.stderr, whose lock the stuck main thread may hold
            os.write(2, b"gpuviewer: interrupted\n")
        except OSError:
            pass


def _give_up() -> None:
    """The process is still there GIVE_UP_S after Ctrl+C or after its cleanup began (something
    hangs): it ends now, with the same line and exit status. Workers end with it (io/orphans.py);
    a partial output file's temporary may be left beside it."""
    _say_interrupted()
    os._exit(130)


def main(argv: list[str] | None = None) -> int:
    import multiprocessing

    multiprocessing.freeze_support()  # the frozen app's loader process
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] in SUBCOMMANDS or any(a in ("-h", "--help", "--version") for a in argv[:1]):
        _catch_sigint()
        try:
            return _run_command(argv)
        except KeyboardInterrupt:
            return _interrupted()
        except Exception:
            from ..io.interrupts import interrupted

            if interrupted():  # an error Ctrl+C made on its way up, where nothing said it (fail() does)
                return _interrupted()
            raise
    from .gui import run_gui

    return run_gui(argv)


def _run_command(argv: list[str]) -> int:
    """Parse the subcommand's arguments and run it."""
    p = build_parser()
    args = p.parse_args(argv)
    if not getattr(args, "func", None):
        p.print_help()
        return 2
    if not getattr(args, "debug", False):
        # Python and numpy warnings are for developers; --debug shows them. The causes we
        # know of are fixed and tested (tests/app/test_hostile_cli.py) with warnings as errors.
        import warnings

        warnings.simplefilter("ignore")
    try:
        return args.func(args)
    except BrokenPipeError:  # `gpuviewer analyze ... | head`: the reader left, not an error
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    finally:
        progress = getattr(args, "_progress", None)
        if progress is not None:  # Ctrl+C or an error mid-open: the line is cleared, the timer stopped
            progress.pause()


if __name__ == "__main__":
    sys.exit(main())
