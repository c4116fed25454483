"""`gpuviewer whatif PATHS CHANGE`: re-time the session's steps with one change (analysis/whatif.py)
and print each step's time before and after, and the saving."""

from __future__ import annotations

import math


def add_parser(sub, common) -> None:
    w = sub.add_parser(
        "whatif",
        parents=[common],
        help="how much faster each step would be with one change",
        description="Replays the session's dependency model across ranks (host calls, "
        "launches, streams, syncs, collectives) with one change and prints each "
        "step's time before and after.",
    )
    ch = w.add_mutually_exclusive_group(required=True)
    ch.add_argument(
        "--remove-gap",
        metavar="RANK:STEP",
        help="remove the longest host gap (a stall) of RANK in STEP ('all': every step)",
    )
    ch.add_argument(
        "--rank-like-median",
        metavar="RANK[:host|gpu]",
        help="make RANK's host work and/or compute kernels as fast as the median rank's",
    )
    ch.add_argument(
        "--no-launch-overhead",
        action="store_true",
        help="no launch cost and no host time between launches, as CUDA graphs would",
    )
    ch.add_argument(
        "--comm-at-peak", action="store_true", help="collectives transfer at the peak bus bandwidth (--peak-busbw)"
    )
    ch.add_argument(
        "--no-copies",
        action="store_true",
        help="memory copies and sets take no time, nor the memcpy/memset calls that issued them: at most what "
        "keeping data on the GPU, or pinned asynchronous copies, would save",
    )
    ch.add_argument(
        "--no-syncs",
        metavar="RANK|all",
        help="the host does not wait in synchronize calls (stream, event, device syncs, JAX's block_until_ready) on RANK or "
        "every rank ('all'); blocking copies, and a sync right after an async copy (.item(), .cpu()), "
        "still wait for their data",
    )
    ch.add_argument("--faster", metavar="NAME_REGEX:PCT", help="GPU ops whose name matches take PCT%% less time")
    ch.add_argument(
        "--overlap-comm",
        metavar="all|NAME_REGEX",
        help="collectives ('all', or those whose kernel or collective name matches) overlapped with the "
        "compute before them on other streams: they stop waiting for it (the most overlapping could "
        "save; sends are left waiting)",
    )
    ch.add_argument(
        "--usual-op",
        metavar="RANK:STEP:NAME_REGEX",
        help="the host op matching NAME_REGEX that took longer in RANK's STEP than in its other steps "
        "(the one with the most extra time, when several match) at its usual time: what a stall's "
        "named op costs",
    )
    w.add_argument(
        "--peak-busbw",
        metavar="GBPS",
        type=str,
        default=None,
        help="peak bus bandwidth for --comm-at-peak, GB/s (default 450: NVLink 4, H100/H200)",
    )
    w.add_argument(
        "--fixed-us",
        metavar="US",
        type=str,
        default=None,
        help="with --faster: each op's first US µs are not shortened (a kernel's fixed cost), only its time past them",
    )
    w.add_argument(
        "--gap-us",
        metavar="US",
        type=str,
        default=None,
        help="with --no-launch-overhead: only host gaps between two launches shorter than US µs go "
        "(default 1000; 100 keeps the host's framework work and removes the launch path proper)",
    )
    w.add_argument("--json", action="store_true", help="one JSON object on stdout")
    w.set_defaults(func=cmd_whatif)


def _change(args):
    from ..analysis.whatif import parse_change

    if args.fixed_us is not None and args.faster is None:
        raise ValueError("--fixed-us goes with --faster: the ops' time it leaves unshortened")
    if args.gap_us is not None and not args.no_launch_overhead:
        raise ValueError("--gap-us goes with --no-launch-overhead: the host gaps between launches it removes")
    if args.remove_gap is not None:
        return parse_change("remove-gap", args.remove_gap)
    if args.rank_like_median is not None:
        return parse_change("rank-like-median", args.rank_like_median)
    if args.usual_op is not None:
        return parse_change("usual-op", args.usual_op)
    if args.overlap_comm is not None:
        return parse_change("overlap-comm", args.overlap_comm)
    if args.no_launch_overhead:
        ch = parse_change("no-launch-overhead")
        if args.gap_us is not None:
            ch.gap_ns = _micro(args.gap_us, "--gap-us", "100", lo=1.0, hi=1000.0)
        return ch
    if args.no_copies:
        return parse_change("no-copies")
    if args.no_syncs is not None:
        return parse_change("no-syncs", args.no_syncs)
    if args.comm_at_peak:
        peak = None
        if args.peak_busbw is not None:
            try:
                peak = float(args.peak_busbw)
            except ValueError:
                peak = -1.0
            if not (math.isfinite(peak) and 0 < peak <= 1e6):
                raise ValueError(f"--peak-busbw {args.peak_busbw}: give GB/s, a number above 0 (e.g. 450)")
        return parse_change("comm-at-peak", peak=peak)
    ch = parse_change("faster", args.faster)
    if args.fixed_us is not None:
        ch.fixed_ns = _micro(args.fixed_us, "--fixed-us", "3", lo=0.0, hi=1e9)
    return ch


def _micro(text: str, flag: str, example: str, lo: float, hi: float) -> int:
    """A flag's microseconds as ns, refused outside [lo, hi] with a one-line message."""
    try:
        us = float(text)
    except ValueError:
        us = -1.0
    if not (math.isfinite(us) and lo <= us <= hi):
        raise ValueError(f"{flag} {text}: give microseconds, a number from {lo:g} to {hi:g} (e.g. {example})")
    return int(round(us * 1e3))


def cmd_whatif(args) -> int:
    from .output import fail as _fail
    from .output import json_out as _json
    from .output import open_or_fail as _open_or_fail
    from .output import out as _out

    try:  # the change first: a bad value is refused before the trace is read
        change = _change(args)
    except ValueError as e:
        return _fail(str(e))
    trace, rc = _open_or_fail(args.paths, args)
    if trace is None:
        return rc
    from .output import session_name_of as _session_name
    from .output import warn

    warn(trace.warnings)  # a replay of a partly read trace says so

    name = _session_name(args.paths)
    if trace.format == "nvidia-smi-topo" or not len(trace):
        return _fail(f"{name}: holds no trace events to replay")
    from ..analysis.whatif import whatif
    from ..io.comm_args import collective_args

    try:
        res = whatif(trace, change, collective_args(trace))
    except ValueError as e:
        return _fail(f"{name}: {e}")
    except Exception as e:  # noqa: BLE001 - an analysis bug must not look like a crash
        return _fail(
            f"{name}: the what-if failed on this trace, a bug in gpuviewer ({type(e).__name__}); --debug shows where",
            args.debug,
        )
    if not res.steps:
        return _fail(f"{name}: no steps on record (ProfilerStep#N or NVTX 'step N' ranges) to re-time")
    if args.json:
        _json(res.to_json())
        return 0
    _out(f"change      {res.change.describe()}")
    for n in res.notes[:20]:
        _out(f"            {n}")
    _out(f"{'step':>6} {'before ms':>11} {'after ms':>11} {'saves ms':>10} {'saves':>7}")
    for s in res.steps:
        pct = s.saves_ns / s.before_ns if s.before_ns else 0.0
        _out(f"{s.step:>6} {s.before_ns / 1e6:11.3f} {s.after_ns / 1e6:11.3f} {s.saves_ns / 1e6:10.3f} {pct:7.1%}")
    before = sum(s.before_ns for s in res.steps)
    _out(
        f"{'all':>6} {before / 1e6:11.3f} {(before - res.saves_ns) / 1e6:11.3f} {res.saves_ns / 1e6:10.3f} "
        f"{(res.saves_ns / before if before else 0.0):7.1%}"
    )
    for a in res.assumptions:
        _out(f"assumed: {a}")
    return 0
