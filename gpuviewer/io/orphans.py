"""Worker processes end with the process that made them. The window cancels a load by ending its
reader process (widgets/loader.py), and the kernel may end one that ran out of memory: neither can
shut its pools down, and a pool's workers would otherwise wait on their queue for ever (each
holding its memory)."""

from __future__ import annotations

import os
import threading


def end_with_parent(parent: int) -> None:
    """In a worker, at its start: exit as soon as process `parent` ends. A thread waits on a
    descriptor of the parent process (Linux 5.3+; the kernel's PR_SET_PDEATHSIG would fire when
    the parent's *thread* that forked the worker ends, and a notebook's loading thread can end
    while another thread's load still uses the pool). Without one, PR_SET_PDEATHSIG is the fallback;
    where neither exists (macOS), nothing is done: the worker ends only with its pool."""
    try:
        fd = os.pidfd_open(parent)
    except ProcessLookupError:
        os._exit(1)  # the parent ended before the worker started
    except (OSError, AttributeError):
        _death_signal(parent)
        return
    if os.getppid() != parent:  # it ended, and its number was given to another, before the open
        os._exit(1)

    def wait() -> None:
        import select

        p = select.poll()
        p.register(fd, select.POLLIN)
        p.poll()  # readable when the process ends
        os._exit(1)

    threading.Thread(target=wait, name="end-with-parent", daemon=True).start()


def _death_signal(parent: int) -> None:
    import signal

    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG (Linux)
    except (OSError, AttributeError):
        return
    if os.getppid() != parent:  # the parent ended before the request was made
        os._exit(1)
