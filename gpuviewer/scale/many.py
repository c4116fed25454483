"""A session of many ranks analysed as one map per file and one reduce: what
`gpuviewer analyze PATHS --dask` runs.

files (folders expanded as a session would) -> work.map_file on each (on Dask, or here one after
the other) -> ranks numbered as one session numbers them -> hosts from the file names or
--hosts -> host clocks aligned from the collectives' ends (analysis.clocks.align_parts) ->
analysis.reduce. The answer is the one `gpuviewer analyze PATHS` gives from the whole trace.
A file that cannot be read is named in `failed` and the others are analysed; companion files
(topology, memory snapshots) are not used here and say so.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field

from ..errors import GpuviewerError


class NothingAnalysed(GpuviewerError, RuntimeError):
    """Every file failed (str: what went wrong, one line per file)."""


@dataclass
class ManyResult:
    analysis: dict  # reduce's output ("_"-keys included)
    parts: list  # the ranks' maps, on the aligned clock
    files: list[str]
    format: str
    hosts: dict[int, str]
    hosts_from: str
    alignment: dict
    offsets: dict[int, int]
    failed: list[dict] = field(default_factory=list)  # {"file", "error"}
    warnings: list[str] = field(default_factory=list)  # the readers' and the alignment's
    notes: list[str] = field(default_factory=list)  # files left out of the run: said on stderr
    map_seconds: list[float] = field(default_factory=list)


MAP_REDUCE_NOTE = (
    "a map/reduce run (--dask) computes no what-if savings, critical paths or kernel efficiency "
    "(MFU, and the findings made from it: elementwise_bound, fp32_simt_gemm, gemm_shape...): they need every "
    "rank's events in one process; analyze without --dask for them"
)


def analyze_many(
    paths: list[str],
    *,
    client=None,
    use_cache: bool = True,
    hosts: str | None = None,
    align: bool = True,
    progress: Callable[[int, int], None] | None = None,
) -> ManyResult:
    """client: a dask.distributed Client (None: map here, one file after the other). progress(
    ranks done, ranks expected). Raises io.errors.TraceError for paths that cannot be opened as
    one session, NothingAnalysed when no file could be read, dask_run.ClusterFailed when the
    cluster could not finish."""
    from ..analysis.clocks import align_parts
    from ..analysis.reduce import reduce
    from ..io.hosts import hosts_from_paths, parse_hosts
    from ..io.session import one_format, session_files
    from .work import session_ranks

    files, kinds, optional, warnings = session_files(paths)
    notes: list[str] = []
    companions = [f for f in files if kinds[f] is not None and kinds[f].companion is not None]
    for f in companions:
        notes.append(
            f"{f}: {kinds[f].companion.name} files are not used by a map/reduce run; "
            "analyze without --dask to include it"
        )
    # absolute: a worker of a running cluster reads the file by path from the shared file system
    files = [os.path.abspath(f) for f in files if f not in companions]
    kinds = {os.path.abspath(f): k for f, k in kinds.items()}
    optional = frozenset(os.path.abspath(f) for f in optional)
    if not files:
        raise NothingAnalysed("no trace among the files (only topology or memory files)")
    known = [f for f in files if kinds[f] is not None]
    if known:
        one_format(known, kinds)  # one session is one format, as when read whole

    state = {"done": 0, "files_left": len(files)}

    def tick(_i: int, res: dict) -> None:
        state["done"] += len(res["parts"])
        state["files_left"] -= 1
        if progress:
            progress(state["done"], state["done"] + state["files_left"])

    results = _run(client, [(f, {"use_cache": use_cache, "optional": f in optional}) for f in files], tick)
    failed = [{"file": r["path"], "error": r["error"]} for r in results if r["error"] and not r["skipped"]]
    notes += [f"{r['path']}: skipped ({r['error'].split(': ', 1)[-1]})" for r in results if r["skipped"]]
    ok = [r for r in results if r["parts"]]
    if not ok:
        raise NothingAnalysed("\n".join(f["error"] for f in failed) or "no trace in these files")
    fmt = ok[0]["format"]
    renumber, more = session_ranks(ok)
    warnings += more
    again = [(r["path"], {"use_cache": use_cache, "ranks": m}) for r, m in zip(ok, renumber) if m]
    if again:  # ranks that one session numbers otherwise: map those files again with their numbers
        redone = {r["path"]: r for r in _run(client, again, None)}
        ok = [redone.get(r["path"], r) for r in ok]
        failed += [{"file": r["path"], "error": r["error"]} for r in redone.values() if r["error"]]
        ok = [r for r in ok if r["parts"]]
    for r in ok:
        warnings += [w for w in r["warnings"] if w not in warnings]
    parts = [p for r in ok for p in r["parts"]]
    file_of = {p.rank: r["path"] for r in ok for p in r["parts"]}
    if hosts:
        host_of, how = parse_hosts(hosts, sorted(file_of)), "given (--hosts)"
    else:
        host_of, how = hosts_from_paths(file_of, fmt)
    if align:
        parts, alignment, offsets, more = align_parts(parts, host_of)
        warnings += more
    else:
        alignment = {"method": "none", "residual_ns": None, "why": "alignment turned off"}
        offsets = {p.rank: 0 for p in parts}
    analysis = reduce(parts, hosts=host_of, alignment=alignment)
    # what needs every rank's events in one process is not made from the maps: said, so a finding
    # without a saving ('-') or a run without efficiency lines is not read as 'nothing to gain'
    analysis.notes.append(MAP_REDUCE_NOTE)
    return ManyResult(
        analysis,
        sorted(parts, key=lambda p: p.rank),
        [r["path"] for r in ok],
        fmt,
        host_of,
        how,
        alignment,
        offsets,
        failed,
        warnings,
        notes,
        [r["seconds"] for r in ok],
    )


def _run(client, calls: list[tuple[str, dict]], done) -> list[dict]:
    if client is not None:
        from .dask_run import run

        return run(client, calls, done)
    from .work import map_file

    out = []
    for i, (path, kw) in enumerate(calls):
        out.append(map_file(path, **kw))
        if done:
            done(i, out[-1])
    return out
