"""The map a worker runs on one file, and the rank numbering of a session of such files.

map_file(path) reads the file as a session of its own (io.session.load: the columns are cached
beside the user's other sessions, so a second run opens them memory-mapped) and maps each of
its ranks (analysis.rankmap.map_rank). It never raises for a bad file: the result says what was
wrong, so one broken rank costs that rank, not the run. A Kineto file is one rank; an Nsight
Systems report can hold several.

A session read as one trace numbers its ranks across files (a rank claimed twice, a report
without RANK); files read one by one cannot, so session_ranks() numbers them afterwards the way
the readers do, and a file whose ranks move is mapped again with the numbers it must carry.
"""

from __future__ import annotations

import os
import time
from typing import Any

NOT_A_TRACE = ("not a trace", "no trace events", "not a JSON trace", "no readable trace events")


def map_file(path: str, use_cache: bool = True, ranks: dict[int, int] | None = None, optional: bool = False) -> dict:
    """One file -> {"path", "format", "parts": [RankPart], "warnings", "env_rank", "seconds",
    "error": None | one line, "skipped": bool}. ranks: old -> new rank numbers to give its ranks
    (session_ranks); optional: the file was found in a folder (JSON that is not a trace is then
    skipped, as the folder's reader does)."""
    from ..analysis.rankmap import map_rank
    from ..io.comm_args import collective_args
    from ..io.errors import TraceError, unexpected
    from ..io.mem_args import memop_bytes
    from ..io.session import load

    t0 = time.perf_counter()
    out: dict[str, Any] = {
        "path": path,
        "format": None,
        "parts": [],
        "warnings": [],
        "env_rank": None,
        "error": None,
        "skipped": False,
        "seconds": 0.0,
        "pid": os.getpid(),
    }
    try:
        trace = load([path], use_cache=use_cache)
    except TraceError as e:
        out["error"] = str(e)
        out["skipped"] = optional and any(w in e.problem for w in NOT_A_TRACE)
        return out
    except Exception as e:  # noqa: BLE001 - a bad file costs its rank, named, never the run
        out["error"] = str(unexpected(path, e))
        return out
    out["format"] = trace.format
    out["warnings"] = list(trace.warnings)
    if trace.format.startswith("nsys") and len(trace.ranks) == 1:
        out["env_rank"] = _env_rank(path)
    try:
        if ranks:
            relabel(trace, ranks)
        args = collective_args(trace)
        # materialized: the parts leave this process without the trace
        out["parts"] = [map_rank(trace, r.rank, args, memop_bytes).materialize() for r in trace.ranks]
    except Exception as e:  # noqa: BLE001
        out["error"] = (
            f"{path}: the analysis failed on this file, a bug in gpuviewer ({type(e).__name__}: "
            f"{str(e)[:200]}); please report it"
        )
        out["parts"] = []
    out["seconds"] = time.perf_counter() - t0
    return out


def _env_rank(path: str) -> int | None:
    try:
        from ..io.nsys_report import captured_rank

        return captured_rank(path)
    except Exception:  # noqa: BLE001 - the file was just read; this is a best effort
        return None


def relabel(trace, ranks: dict[int, int]) -> None:
    """Give the trace's ranks other numbers (old -> new), everywhere a rank number is kept."""
    from ..model.trace import Counter, Step

    for r in trace.ranks:
        r.rank = ranks.get(r.rank, r.rank)
    trace.ranks.sort(key=lambda r: r.rank)
    for ln in trace.lanes:
        ln.rank = ranks.get(ln.rank, ln.rank)
    trace.steps = sorted(
        (Step(ranks.get(s.rank, s.rank), s.step, s.start, s.end) for s in trace.steps), key=lambda s: (s.rank, s.step)
    )
    trace.counters = [Counter(ranks.get(c.rank, c.rank), c.device, c.name, c.t, c.v) for c in trace.counters]


def session_ranks(results: list[dict]) -> tuple[list[dict[int, int]], list[str]]:
    """Per file (in session order), old -> new numbers for its ranks so that they are what one
    session of all the files would number them (io/formats/kineto_json._assign_ranks_and_clocks,
    io/nsys.load_nsys), and the warnings that go with it. A file read alone numbers a rank
    without a number 0, which the session rule treats like a 0 claimed twice."""
    used: set[int] = set()
    out: list[dict[int, int]] = []
    warnings: list[str] = []
    for res in results:
        parts = res["parts"]
        if not parts:
            out.append({})
            continue
        if (res["format"] or "").startswith("nsys"):
            base = max(used) + 1 if used else 0
            env = res.get("env_rank")
            if len(parts) == 1 and env is not None and env not in used:
                new = [env]
            else:
                new = [base + i for i in range(len(parts))]
        else:
            new = []
            for p in parts:
                r = p.rank
                if r in used:
                    warnings.append(f"{os.path.basename(res['path'])}: rank {r} appears twice; shown as another rank")
                    r = 0
                    while r in used:
                        r += 1
                new.append(r)
        used.update(new)
        out.append({p.rank: n for p, n in zip(parts, new) if p.rank != n})
    return out, warnings
