"""Open a session the way every front end does (window, command line, reports): read the files,
find which ranks share a clock (hosts), and align the hosts' clocks by their collectives.

Qt-free. The aligned trace carries metadata["alignment"] = {"method": "collectives" |
"same-host" | "none", "residual_ns", ...} and every RankInfo its host and clock_offset_ns.
"""

from __future__ import annotations

from collections.abc import Callable

from ..model.trace import Trace


def open_session(
    paths: list[str],
    *,
    use_cache: bool = True,
    align: bool = True,
    hosts: str | None = None,
    progress: Callable[[float, str], None] | None = None,
    cancelled: Callable[[], bool] | None = None,
) -> Trace:
    from ..io.session import load

    trace = load(paths, use_cache=use_cache, progress=progress, cancelled=cancelled)
    set_hosts(trace, hosts)
    if align:
        align_clocks(trace)
    else:
        trace.metadata["alignment"] = {"method": "none", "residual_ns": None, "why": "alignment turned off"}
    return trace


def read_into_cache(paths: list[str], progress: Callable[[float, str], None] | None = None) -> None:
    """Parse the files into the column cache (the window's loader process does this, then opens
    the cached session in the window's process)."""
    from ..io.session import load

    load(paths, use_cache=True, progress=progress)


def companion_of(path: str) -> str | None:
    """What a file would join a session as ("topology", "memory"), or None: a trace of its own."""
    from ..io.registry import companion_of as find

    return find(path)


def rank_gpus(trace: Trace) -> dict:
    """Each rank's GPUs as the topology names them ({rank: ["GPU0", ...]})."""
    from ..analysis.topology import rank_gpus as gpus

    return gpus(trace)


def set_hosts(trace: Trace, spec: str | None = None) -> None:
    from ..io.hosts import hosts_from_files, parse_hosts

    if spec:
        host_of, how = parse_hosts(spec, [r.rank for r in trace.ranks]), "given (--hosts)"
    else:
        host_of, how = hosts_from_files(trace)
    for r in trace.ranks:
        r.host = host_of.get(r.rank)
    trace.metadata["hosts_from"] = how


def align_clocks(trace: Trace) -> None:
    """Estimate each host's clock offset from the matched collectives and move its events."""
    from ..analysis.breakdown import breakdown
    from ..analysis.clocks import estimate
    from ..analysis.collectives import match
    from ..io.comm_args import collective_args
    from ..model.align import apply_offsets

    host_of = {r.rank: r.host or f"rank{r.rank}" for r in trace.ranks}
    if len(set(host_of.values())) < 2:
        trace.metadata["alignment"] = {"method": "same-host", "residual_ns": None}
        return
    rbs = breakdown(trace)
    al = estimate(match(trace, rbs, collective_args(trace)), host_of)
    if al.method != "collectives" or len(al.offsets) < 2:
        trace.metadata["alignment"] = {
            "method": "none",
            "residual_ns": None,
            "why": "no collective matched across hosts",
        }
        trace.warnings.append("hosts could not be aligned: no collective matched across them")
        return
    if al.before_ns is not None and al.residual_ns is not None and al.residual_ns >= al.before_ns:
        # the hosts already agree (one clock after all, or NTP did its job): keep the recording
        trace.metadata["alignment"] = {
            "method": "none",
            "residual_ns": al.before_ns,
            "why": "the recorded clocks already agree at the collectives",
        }
        return
    apply_offsets(trace, lambda rank, t: al.offset_at(host_of[rank], t))
    for r in trace.ranks:
        r.clock_offset_ns = int(round(float(al.offset_at(host_of[r.rank], trace.start_ns))))
    trace.metadata["alignment"] = al.record()
    if al.unaligned:
        trace.warnings.append(
            f"hosts {', '.join(al.unaligned)} share no collective with the others: their clocks are left as recorded"
        )


def alignment_text(trace: Trace) -> str:
    """One line for the status bar and `info`: how the hosts' clocks were put on one axis."""
    return alignment_line(
        trace.metadata.get("alignment") or {}, [r.host for r in trace.ranks], trace.metadata.get("hosts_from")
    )


def alignment_line(a: dict, hosts: list, hosts_from: str | None) -> str:
    """The same line from the alignment record itself (a summary's manifest keeps it)."""
    hosts = sorted({h for h in hosts if h})
    if a.get("method") == "collectives":
        moved = [f"{h} {v['offset_ns'] / 1e6:+.3f} ms" for h, v in a["hosts"].items() if h != a["reference_host"]]
        res = a.get("residual_ns")
        return (
            f"{len(hosts)} hosts aligned by {a['collectives']} collectives to {a['reference_host']}: "
            # only the residual of the corrected clocks: the spread before the fix read as
            # what is left of it
            + ", ".join(moved)
            + (f" (collective ends within {res / 1e3:.1f} µs of each other)" if res is not None else "")
        )
    if a.get("method") == "same-host":
        return f"one host ({hosts_from or 'one folder'}): no clock correction"
    return f"{len(hosts)} hosts, clocks as recorded ({a.get('why', 'not aligned')})"
