"""What the Chrome-trace-format readers (io/kineto.py, io/jax_trace.py) share: the worker pool
that decodes the pieces of big files on every core, and PieceReader, which hands each piece to it
(or decodes it here), keeps a few in flight and merges the results in the file's order."""

from __future__ import annotations

import mmap
import os
import queue
import threading
from collections.abc import Callable
from contextlib import contextmanager

import msgspec

from ..model.trace import Source
from .chrome_json import Fallback, Piece, joined
from .interrupts import held

_POOL = None
_IN_FLIGHT = 3  # pieces decoding at once: bounds the memory they hold
# Pieces reach the workers through slots of one shared mapping made before the workers are
# forked (they inherit it), not pickled through a pipe: pickling and writing 2 MB a piece cost
# the main process 0.3-0.4 s of CPU on a 288 MB trace, the workers 0.2 s. A slot is free again
# when its piece's decoding is done; a piece too large for one, or with none free (two files
# read at once), goes the pickled way.
_SLOT_BYTES = 4 << 20
_SLOTS: mmap.mmap | None = None
_FREE: queue.SimpleQueue = queue.SimpleQueue()
# the process that made the pool and the slots: a process forked from it later (a user's own
# fork) makes its own, rather than share the slots with it or use its dead pool's threads
_OWNER = 0
_START = threading.RLock()  # two loads in two threads make one pool
_USERS = 0  # loads under way (using_pool): the last one to end shuts the pool down


def _noop() -> int:
    return 0


def _adopt() -> None:
    """Under _START: a process forked from the owner starts afresh (no pool, slots or loads)."""
    global _POOL, _SLOTS, _OWNER, _USERS
    if _OWNER != os.getpid():
        _POOL, _SLOTS, _OWNER, _USERS = None, None, os.getpid(), 0


def worker_pool():
    """The one pool of worker processes, started on first use."""
    global _POOL
    with _START:
        _adopt()
        if _POOL is not None and getattr(_POOL, "_broken", False):
            # a worker was killed (out of memory): its load failed, saying to open the file
            # again; while another load keeps the pool in use, that must get a new pool
            shutdown_pool()
        if _POOL is None:
            _POOL = _start_pool()
    return _POOL


@contextmanager
def using_pool():
    """One load's use of the pool: loads at once in several threads (a notebook) share it, and
    it is shut down when the last of them ends, not under the others."""
    global _USERS
    with _START:
        _adopt()
        _USERS += 1
    try:
        yield
    finally:
        with _START:
            _USERS -= 1
            if _USERS == 0:
                shutdown_pool()


def _start_pool():
    import concurrent.futures as cf
    import multiprocessing as mp

    global _SLOTS, _FREE
    if _SLOTS is None:
        _SLOTS = mmap.mmap(-1, _SLOT_BYTES * (_IN_FLIGHT + 2))  # shared, anonymous
        _FREE = queue.SimpleQueue()
        for i in range(_IN_FLIGHT + 2):
            _FREE.put(i)

    n = min(4, os.cpu_count() or 1)
    # fork: workers inherit the imported modules (spawn would re-import for ~0.3 s). The pool
    # is started here, before the decompression thread exists, so no thread is forked.
    from .orphans import end_with_parent

    pool = cf.ProcessPoolExecutor(
        n, mp_context=mp.get_context("fork"), initializer=end_with_parent, initargs=(os.getpid(),)
    )
    try:
        with held():  # the first submit forks the workers: Ctrl+C waits for them to be known
            futures = [pool.submit(_noop) for _ in range(n)]
        for f in futures:
            f.result()
    except BaseException:
        with held():  # Ctrl+C while they start: stopped here, the join not interrupted
            pool.shutdown(wait=True, cancel_futures=True)
        raise
    return pool


def _from_slot(decode: Callable[..., dict], slot: int, n: int, chunk: int, *args) -> dict:
    """In a worker: decode the piece the main process wrote into a slot (copied out first, so
    nothing decoded keeps the slot's memory; 2 MB copy in about 0.1 ms)."""
    assert _SLOTS is not None
    at = slot * _SLOT_BYTES
    return decode(_SLOTS[at : at + n], chunk, *args)


def _submit(pool, decode: Callable[..., dict], buf: Piece, chunk: int, args: tuple):
    slots, slot = _SLOTS, None
    parts = (buf,) if isinstance(buf, bytes) else buf
    n = sum(map(len, parts))
    if slots is not None and n <= _SLOT_BYTES:
        try:
            slot = _FREE.get_nowait()
        except queue.Empty:
            pass
    if slots is None or slot is None:
        return pool.submit(decode, joined(buf), chunk, *args)
    at = slot * _SLOT_BYTES
    # held: an interrupt between submit and add_done_callback would leave the slot taken
    with held():
        try:
            for p in parts:  # the piece's parts copied once, straight into the slot
                slots[at : at + len(p)] = p
                at += len(p)
            fut = pool.submit(_from_slot, decode, slot, n, chunk, *args)
        except BaseException:
            _FREE.put(slot)
            raise
        fut.add_done_callback(lambda _f: _FREE.put(slot))  # done, failed or cancelled
    return fut


def shutdown_pool() -> None:
    """Stop the pool now (the last load ended, or Ctrl+C: app/cli.py)."""
    global _POOL
    with _START:
        if _POOL is not None and _OWNER == os.getpid():
            # wait=True: pieces still running end in milliseconds; with wait=False an exit soon
            # after (Ctrl+C during a load) raced the pool's own thread at interpreter exit
            # (CPython 3.11: "OSError: Bad file descriptor" traceback from concurrent.futures' exit hook)
            # held: Ctrl+C during the join would leave the pool's thread running into the exit
            # (CPython 3.11 marks a thread whose join was interrupted as ended)
            with held():
                _POOL.shutdown(wait=True, cancel_futures=True)
        _POOL = None


class PieceReader:
    """One file's pieces: decoded in the worker pool when `parallel` (and this process may start
    workers), merged in order by the subclass's merge_piece(result, ordinal of its first event).
    A decoder that raises msgspec.DecodeError sends the document to the exact walk (Fallback)."""

    def __init__(self, parallel: bool) -> None:
        import multiprocessing as mp

        # a daemonic process (someone else's worker) may not start children: decode in-process
        use = parallel and (os.cpu_count() or 1) > 1 and hasattr(os, "fork") and not mp.current_process().daemon
        self.pool = worker_pool() if use else None
        self.reset_pieces()

    def reset_pieces(self) -> None:
        """Forget the pieces (the document is read again from its start)."""
        self.pending: list = []
        self.next_ordinal = 0  # ordinal (position in traceEvents) of the next piece's first event
        self.chunk_first: dict[int, int] = {}

    def piece(self, decode: Callable[..., dict], buf: Piece, chunk: int, *args, here: bool = False) -> None:
        """decode(buf's bytes, chunk, *args) in a worker, or here when there is no pool or `here`."""
        if self.pool is not None and not here:
            self.pending.append(_submit(self.pool, decode, buf, chunk, args))
            while len(self.pending) > _IN_FLIGHT:
                self._merge(self._result(self.pending.pop(0)))
            return
        self.flush()
        try:
            res = decode(joined(buf), chunk, *args)
        except msgspec.DecodeError:
            raise Fallback() from None
        self._merge(res)

    @staticmethod
    def _result(fut) -> dict:
        try:
            return fut.result()
        except msgspec.DecodeError:
            raise Fallback() from None

    def flush(self) -> None:
        """Merge the pieces still decoding."""
        while self.pending:
            self._merge(self._result(self.pending.pop(0)))

    def _merge(self, r: dict) -> None:
        base = self.next_ordinal
        self.chunk_first[r["chunk"]] = base
        self.next_ordinal += r["n_events"]
        self.merge_piece(r, base)

    def merge_piece(self, r: dict, base: int) -> None:
        raise NotImplementedError

    def chunk_ordinals(self, chunks: list[list[int]]) -> None:
        """The chunk table's third entry becomes the ordinal of the chunk's first event (the
        arguments are fetched on demand by it)."""
        for c in chunks:
            c[2] = self.chunk_first.get(c[2], 0)


def record_file(b, path: str, chunks, gz: bool, warnings: list[str]) -> None:
    """A Chrome-format file read into builder b: its warnings, named by the file, and its Source
    (format "kineto": its arguments are fetched by event ordinal, as from any Chrome JSON file)."""
    for w in warnings:
        b.warnings.append(f"{os.path.basename(path)}: {w}")
    st = os.stat(path)
    b.sources.append(
        Source(
            path=os.path.abspath(path),
            format="kineto",
            size=st.st_size,
            mtime_ns=st.st_mtime_ns,
            chunks=chunks,
            gzip=gz,
        )
    )
