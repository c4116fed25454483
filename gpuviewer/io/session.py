"""Open a session: one or more files (or folders) -> one Trace on one time axis."""

from __future__ import annotations

import os
from collections.abc import Callable

from ..model.trace import Trace
from . import registry
from . import sniff as sn
from .errors import TraceError
from .reader import Job, Reader

Progress = Callable[[float, str], None]


def _check_readable(path: str) -> None:
    if not os.path.exists(path):
        raise TraceError(path, "no such file or folder")
    if os.path.isdir(path):
        return
    if not sn.is_regular(path):
        raise TraceError(path, "not a regular file (a pipe, socket or device); save the trace to a file first")
    if not os.access(path, os.R_OK):
        raise TraceError(path, "permission denied")
    if os.path.getsize(path) == 0:
        raise TraceError(path, "the file is empty")


def session_files(paths: list[str]) -> tuple[list[str], dict, frozenset, list[str]]:
    """What a session of `paths` reads: its files (folders expanded, each file once), each
    file's Reader (None: not a format we read), the files found in folders rather than named
    (optional: JSON there that is no trace is skipped), and warnings. Raises TraceError for a
    path that cannot be read or a folder without traces."""
    files, kinds, optional, unread, dups = _session_files(paths)
    return files, kinds, optional, unread + dups


def _session_files(paths: list[str]):
    """session_files, with the warnings of what could not be read apart from the others."""
    for p in paths:
        _check_readable(p)
    unread: list[str] = []
    files, dup_warnings = _dedupe(sn.expand(paths, unread))
    if not files:
        raise TraceError(", ".join(paths), "no trace files found in the folder" + (f" ({unread[0]})" if unread else ""))
    kinds = {f: registry.sniff(f) for f in files}  # each file's content is looked at once
    named = {os.path.abspath(p) for p in paths if not os.path.isdir(p)}
    optional = frozenset(f for f in files if os.path.abspath(f) not in named)
    return files, kinds, optional, unread, dup_warnings


def one_format(files: list[str], kinds: dict) -> Reader:
    """The reader of a session of these files; TraceError when they mix formats."""
    return _reader_for(files, kinds)


def load(
    paths: list[str],
    *,
    use_cache: bool = True,
    progress: Progress | None = None,
    cancelled: Callable[[], bool] | None = None,
) -> Trace:
    files, kinds, optional, unread, dups = _session_files(paths)
    trace = _load(files, kinds, use_cache, progress, cancelled, optional)
    from .one_job import not_one_job

    for w in unread + dups + [w for w in [not_one_job(trace)] if w]:
        if w not in trace.warnings:
            trace.warnings.append(w)
    # what the folder listing left out, for commands that print no other warnings (analyze) and
    # the window's status line: said again on every open, cached or not
    trace.metadata["unread"] = unread
    return trace


def _blank(path: str) -> bool:
    """Only whitespace in the first 64 KB (and nothing else in the file)."""
    try:
        if os.path.getsize(path) > 1 << 16:
            return False
        with open(path, "rb") as f:
            return not f.read().strip()
    except OSError:
        return False


def _dedupe(files: list[str]) -> tuple[list[str], list[str]]:
    """One file named twice (or by other spellings of its path, or through a link) is one
    rank, not several: keep its first mention and say so."""
    seen: dict[tuple, str] = {}
    out: list[str] = []
    warnings: list[str] = []
    for f in files:
        try:
            st = os.stat(f)
            ident: tuple = (st.st_dev, st.st_ino)
        except OSError:
            ident = ("path", os.path.realpath(f))
        if ident in seen:
            warnings.append(f"{f}: the same file as {seen[ident]}; read once")
            continue
        seen[ident] = f
        out.append(f)
    return out, warnings


def _load(
    files: list[str], kinds: dict, use_cache: bool, progress, cancelled, optional: frozenset = frozenset()
) -> Trace:
    """kinds: each file's Reader (None: not a format we read)."""
    for comp in registry.companions():  # topology and memory files join the traces beside them
        mine = [f for f in files if kinds[f] is not None and kinds[f].companion is comp]
        if mine:
            rest = [f for f in files if f not in mine]

            def load_rest() -> Trace:
                return _load(rest, kinds, use_cache, progress, cancelled, optional)

            return comp.join(mine, kinds, load_rest if rest else None)
    if use_cache:
        from . import cache_slice

        t = cache_slice.load(files)  # a file of an out-of-core session: its entry cut out of it
        if t is not None:
            if progress:
                progress(1.0, "opened from cache")
            return t
    for f in files:
        if kinds[f] is None:
            _refuse(f)
    reader = _reader_for(files, kinds)

    def open_more(more: list[str]) -> Trace:
        return _load(more, {f: registry.sniff(f) for f in more}, use_cache, progress, cancelled)

    job = Job(progress, cancelled, optional, open_more)
    if use_cache and reader.cached:
        from . import cache_join

        if cache_join.wanted(reader, files):
            # files already cached on their own (by --dask workers, the window): joined, not parsed
            t = cache_join.load(files, reader, job)
            if t is not None:
                return t
        from . import out_of_core

        if out_of_core.wanted(reader, files):
            # many big ranks: built rank by rank into the cache, never all in memory at once
            t = out_of_core.load(files, job)
            if t is not None:
                return t
    trace = reader.read(files, job)
    if use_cache and reader.cached:
        from . import cache

        cache.store(files, trace)
        t = cache.load(files)  # reopen memory-mapped so the parse buffers are released
        if t is not None:
            t.metadata["from_cache"] = False
            return t
    return trace


def _refuse(f: str) -> None:
    """Why no reader takes a file."""
    if sn.is_empty_gzip(f):
        from .streams import gzip_damage

        if gzip_damage(f):
            raise TraceError(f, "the compressed stream is cut short or damaged before any data; copy the file again")
        raise TraceError(f, "the file is empty (a gzip stream of nothing)")
    if _blank(f):
        raise TraceError(f, "the file holds only blank space, no trace")
    raise TraceError(
        f,
        "not a trace this program reads (expected PyTorch profiler / Chrome "
        "trace JSON, optionally gzipped, or an Nsight Systems SQLite export)",
    )


def _reader_for(files: list[str], kinds: dict) -> Reader:
    """One session is one format, or a format that converts and takes the others along."""
    readers = list(dict.fromkeys(kinds[f] for f in files))
    if len(readers) == 1:
        return readers[0]
    convert = next((r for r in readers if r.converts), None)
    if convert is not None:
        return convert
    from collections import Counter

    common = Counter(kinds[f].name for f in files).most_common(1)[0][0]
    odd = next(f for f in files if kinds[f].name != common)
    common_words = next(kinds[f].words or common for f in files if kinds[f].name == common)
    raise TraceError(
        odd,
        f"is {kinds[odd].words or 'another format'}, "
        f"but the other files are {common_words}: open them as separate sessions",
    )
