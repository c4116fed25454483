"""Ctrl+C at a moment that can take it. The command line turns SIGINT into KeyboardInterrupt
(app/cli.py), which Python raises at whatever line the main thread is on. Two kinds of line lose
it: a weakref callback, a __del__ or a fork hook, where Python prints "Exception ignored" and goes
on (the command then ran to its end: 4 times in 600 interrupts on a busy machine); and the moment
between a worker's fork and its pool recording it, which leaves a worker the pool cannot stop. An
interrupt lost the first way is sent again; blocks that fork workers run `held()`, and an
interrupt that arrives meanwhile is raised when the block ends."""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager

_held = 0  # held() blocks open in the main thread (signal handlers run only there)
_pending = False  # an interrupt arrived while held


def catch_sigint() -> None:
    """Ctrl+C raises KeyboardInterrupt in this process only: forked workers inherit the handler
    and ignore the signal (the terminal sends it to the whole group; the parent stops them).
    Python swallows an exception raised in a weakref callback, a __del__ or a fork hook (it calls
    sys.unraisablehook): an interrupt lost there is sent again, to be raised at the next line."""
    import signal
    import sys

    me = os.getpid()

    def on_sigint(signum, frame) -> None:
        global _pending
        if os.getpid() != me:
            return
        if _held:
            _pending = True
            return
        raise KeyboardInterrupt

    before = sys.unraisablehook

    def on_unraisable(u) -> None:
        if u.exc_type is KeyboardInterrupt and os.getpid() == me:
            # sent from a thread a moment later: a signal sent here would be raised in here, and
            # lost again (ignored once the command's cleanup has begun)
            t = threading.Timer(0.01, os.kill, (me, signal.SIGINT))
            t.daemon = True
            t.start()
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
