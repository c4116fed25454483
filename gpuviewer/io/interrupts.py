"""Ctrl+C at a moment that can take it. The command line turns SIGINT into KeyboardInterrupt
(app/cli.py), which Python raises at whatever line the main thread is on. Some lines cannot take
it, each seen on a busy machine (a few in 600 interrupts):
- importlib's own code: raised right after its weakref callback took the global import lock, the
  lock was never released, and any other thread's first import of a module waits for ever (the
  decompression thread, while the main thread waits for its next block: a hang, as in CI);
- a weakref callback, a __del__ or a fork hook (logging's lock release), where Python prints
  "Exception ignored" and goes on: the command then ran to its end;
- the moment between a worker's fork and its pool recording it, which leaves a worker the pool
  cannot stop.
So an interrupt in importlib's code, or lost the second way, is sent again a moment later; blocks
that fork workers run `held()`, and an interrupt arriving meanwhile is raised at the block's end.
Whatever still hangs, the process gives up GIVE_UP_S after the first Ctrl+C."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

GIVE_UP_S = 10.0  # the cleanup after Ctrl+C (stopping workers, removing partial files) takes < 1 s
_held = 0  # held() blocks open in the main thread (signal handlers run only there)
_pending = False  # an interrupt arrived while held


def _later(pid: int, seconds: float = 0.01) -> None:
    """SIGINT to `pid` from a thread a moment from now (a signal sent from inside the handler or
    the unraisable hook would be handled right there again)."""
    import signal

    t = threading.Timer(seconds, os.kill, (pid, signal.SIGINT))
    t.daemon = True
    t.start()


def catch_sigint(give_up: Callable[[], None]) -> None:
    """Ctrl+C raises KeyboardInterrupt in this process only: forked workers inherit the handler
    and ignore the signal (the terminal sends it to the whole group; the parent stops them).
    `give_up` runs in a thread GIVE_UP_S after the first Ctrl+C if the process is still there."""
    import signal
    import sys

    me = os.getpid()
    first: list[bool] = []  # the give-up thread was started

    def on_sigint(signum, frame) -> None:
        global _pending
        if os.getpid() != me:
            return
        if not first:
            first.append(True)
            t = threading.Timer(GIVE_UP_S, give_up)
            t.daemon = True
            t.start()
        if _held:
            _pending = True
            return
        if frame is not None and frame.f_code.co_filename.startswith("<frozen importlib"):
            _later(me)
            return
        raise KeyboardInterrupt

    before = sys.unraisablehook

    def on_unraisable(u) -> None:
        if u.exc_type is KeyboardInterrupt and os.getpid() == me:
            _later(me)  # (ignored once the command's cleanup has begun)
            return
        before(u)

    try:
        signal.signal(signal.SIGINT, on_sigint)
    except ValueError:  # called off the main thread: signals are not ours to take
        return
    sys.unraisablehook = on_unraisable


@contextmanager
def held() -> Iterator[None]:
    """Ctrl+C waits until the block ends (blocks that fork workers; they take milliseconds)."""
    global _held, _pending
    mine = threading.current_thread() is threading.main_thread()
    if mine:
        _held += 1
    try:
        yield
    finally:
        if mine:
            _held -= 1
            if not _held and _pending:
                _pending = False
                raise KeyboardInterrupt
