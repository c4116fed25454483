"""Ctrl+C at a moment that can take it. The command line turns SIGINT into KeyboardInterrupt
(app/cli.py), which Python raises at whatever line the main thread is on. Some lines cannot take
it (the first two seen on a busy machine, 4 times in about 900 interrupts):
- importlib's own code: raised right after its weakref callback took the global import lock, the
  lock was never released, and any other thread's first import of a module would wait for ever;
- a weakref callback, a __del__ or a fork hook (logging's lock release), where Python prints
  "Exception ignored" and goes on: the command then ran to its end;
- the moment between a worker's fork and its pool recording it, which leaves a worker the pool
  cannot stop.
So an interrupt that lands in importlib's code (anywhere on the stack: a SIGALRM handler may run on
top of it) waits until that code is left, one lost the second way is sent again, and blocks that
fork workers or stop a pool run `held()`: an interrupt arriving meanwhile is raised at the block's
end. An interrupt can still break a cleanup on its way up (threading's Condition.wait, interrupted
between releasing its lock and its `try`, makes the caller's `with` raise RuntimeError): the
command line's error paths ask `interrupted()` and end as an interrupt. Whatever still hangs, the
process gives up GIVE_UP_S after Ctrl+C, or after its cleanup began (give_up_later)."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

GIVE_UP_S = 10.0  # stopping workers and removing partial files took under 2 s in every case tried
_held = 0  # held() blocks open in the main thread (signal handlers run only there)
_pending = False  # an interrupt arrived while held
_raised = False  # a KeyboardInterrupt was raised for Ctrl+C
_in_hook = False  # the unraisable hook is sending a swallowed interrupt again
_give_up: Callable[[], None] | None = None
_timer: threading.Timer | None = None


def interrupted() -> bool:
    """Whether Ctrl+C was raised in this process (an error now on its way up is its after-effect)."""
    return _raised


def _later(pid: int, seconds: float = 0.01, *, until: Callable[[], bool] | None = None) -> None:
    """SIGINT to `pid` from a thread a moment from now (a signal sent from inside the handler or
    the unraisable hook would be handled right there again), and not while until() holds (the
    hook still running: on a loaded machine the thread outran the hook's own return)."""
    import signal
    import time

    def send() -> None:
        time.sleep(seconds)
        while until is not None and until():
            time.sleep(0.001)
        os.kill(pid, signal.SIGINT)

    threading.Thread(target=send, name="sigint-again", daemon=True).start()


def give_up_later(seconds: float | None = None) -> None:
    """(Re)start the countdown after which the process gives up (catch_sigint's give_up)."""
    global _timer
    if _give_up is None:
        return
    if _timer is not None:
        _timer.cancel()
    _timer = threading.Timer(GIVE_UP_S if seconds is None else seconds, _give_up)
    _timer.daemon = True
    _timer.start()


def _in_importlib(frame) -> bool:
    while frame is not None:
        if frame.f_code.co_filename.startswith("<frozen importlib"):
            return True
        frame = frame.f_back
    return False


def catch_sigint(give_up: Callable[[], None]) -> None:
    """Ctrl+C raises KeyboardInterrupt in this process only: forked workers inherit the handler
    and ignore the signal (the terminal sends it to the whole group; the parent stops them).
    `give_up` runs in a thread GIVE_UP_S after the first Ctrl+C, or after the cleanup began
    (give_up_later), if the process is still there. Nothing is changed off the main thread."""
    import signal
    import sys

    me = os.getpid()

    def on_sigint(signum, frame) -> None:
        global _pending, _raised
        if os.getpid() != me:
            return
        if _timer is None:
            give_up_later()
        if _held:
            _pending = True
            return
        if _in_hook:  # raised in the hook it would be swallowed again; the hook sends one again
            return
        if _in_importlib(frame):
            _later(me)
            return
        _raised = True
        raise KeyboardInterrupt

    before = sys.unraisablehook

    def on_unraisable(u) -> None:
        global _in_hook
        if u.exc_type is KeyboardInterrupt and os.getpid() == me:
            _in_hook = True
            try:  # sent once the hook has returned (ignored once the command's cleanup has begun)
                _later(me, until=lambda: _in_hook)
            finally:
                _in_hook = False  # (no check for signals between this and the return)
            return
        before(u)

    global _give_up
    try:
        signal.signal(signal.SIGINT, on_sigint)
    except ValueError:  # called off the main thread: signals are not ours to take
        return
    _give_up = give_up
    sys.unraisablehook = on_unraisable


@contextmanager
def held() -> Iterator[None]:
    """Ctrl+C waits until the block ends (short blocks: a pool's first submit, which forks its
    workers; a piece handed to a worker; stopping a pool, which waits for its running work)."""
    global _held, _pending, _raised
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
                _raised = True
                raise KeyboardInterrupt
