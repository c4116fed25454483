"""Progress of an open or an analysis on the terminal: one line on stderr, redrawn in place.

It takes the same callbacks the window's loader shows ("reading X: 41 of 166 MB, ..."): the
readers call progress(fraction, message) through Session.open / open_session. Nothing is drawn
when stderr is not a terminal (a pipe, a log file) or with --quiet, and nothing before the work
has taken DELAY_S: a quick command prints exactly what it printed before.

A phase that reports nothing while it runs (the analysis) still shows: an interval timer
(SIGALRM, main thread) redraws the latest message with the time spent. Not a thread: the Kineto
reader forks its decode pool mid-read, and a forked process must not inherit a running thread
(timers are not inherited by a fork).
"""

from __future__ import annotations

import os
import shutil
import signal
import sys
import time

DELAY_S = 1.0  # GPUVIEWER_PROGRESS_DELAY_S overrides (tests set 0: no test waits on the clock)
_TICK_S = 0.25


def _delay() -> float:
    try:
        return max(0.0, float(os.environ.get("GPUVIEWER_PROGRESS_DELAY_S", DELAY_S)))
    except ValueError:
        return DELAY_S


class TermProgress:
    """A progress(fraction, message) callback. phase(message) starts a piece of work (its own
    delay); pause() stops drawing and clears the line before anything else is printed."""

    def __init__(self, quiet: bool = False, stream=None) -> None:
        self.stream = sys.stderr if stream is None else stream
        try:
            tty = self.stream.isatty()
        except (AttributeError, ValueError):
            tty = False
        self.enabled = tty and not quiet
        self.delay = _delay()
        self._msg = ""
        self._drawn = ""  # what is on the line now ("" when clear)
        self._t0 = time.monotonic()
        self._active = False
        self._old_handler = None

    def __call__(self, fraction: float, message: str) -> None:
        if not self.enabled:
            return
        self._msg = message
        if self._active:
            self._draw()

    def phase(self, message: str) -> None:
        if not self.enabled:
            return
        self._msg = message
        self._t0 = time.monotonic()
        self._active = True
        self._arm()
        self._draw()

    def _arm(self) -> None:
        if self._old_handler is not None:
            return
        try:
            self._old_handler = signal.signal(signal.SIGALRM, self._tick)
            signal.setitimer(signal.ITIMER_REAL, _TICK_S, _TICK_S)
        except (ValueError, OSError, AttributeError):  # off the main thread, or no SIGALRM: callbacks only
            self._old_handler = None

    def _tick(self, signum, frame) -> None:
        try:
            self._draw()
        except RuntimeError:  # stderr was being written by the interrupted code: next tick
            pass

    def _draw(self) -> None:
        if not self._active:
            return
        elapsed = time.monotonic() - self._t0
        if elapsed < self.delay:
            return
        from ..model.plain import line

        text = line(self._msg) if self._msg else "working"
        if elapsed >= 1:
            text += f" ({elapsed:.0f} s)"
        width = shutil.get_terminal_size((80, 24)).columns
        text = text[: max(10, width - 1)]
        if text == self._drawn:
            return
        try:
            # \r and erase-to-end: the line is redrawn in place, never scrolled
            self.stream.write("\r" + text + "\x1b[K")
            self.stream.flush()
        except (OSError, ValueError):
            self.enabled = self._active = False
            return
        self._drawn = text

    def pause(self) -> None:
        self._active = False
        if self._old_handler is not None:
            try:
                signal.setitimer(signal.ITIMER_REAL, 0, 0)
                signal.signal(signal.SIGALRM, self._old_handler)
            except (ValueError, OSError):
                pass
            self._old_handler = None
        if self._drawn:
            try:
                self.stream.write("\r\x1b[K")
                self.stream.flush()
            except (OSError, ValueError):
                pass
            self._drawn = ""


class _Off:
    """Progress for a caller that set none up (cli functions called as a library)."""

    def __call__(self, fraction: float, message: str) -> None:
        pass

    def phase(self, message: str) -> None:
        pass

    def pause(self) -> None:
        pass


def of(args) -> TermProgress | _Off:
    """The command's progress line (made on first use), or one that draws nothing."""
    p = getattr(args, "_progress", None)
    if p is None:
        p = TermProgress(quiet=args.quiet) if hasattr(args, "quiet") else _Off()
        try:
            args._progress = p
        except AttributeError:
            pass
    return p
