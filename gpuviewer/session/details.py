"""What the Details panel shows of one event, Qt-free: its arguments as the file recorded them
(read back from the file on demand) and the events linked to it by flows (launch -> GPU work)."""

from __future__ import annotations

import numpy as np


def event_args(trace, i: int) -> dict:
    """The event's arguments from its file ({} when it has none)."""
    from ..io.args import event_args as read

    return read(trace, i)


def links(trace, i: int) -> list[tuple[int, str]]:
    """(event, how) for the GPU work event i launched and the launch that started it."""
    src, dst = trace.flows
    src, dst = np.asarray(src), np.asarray(dst)
    return [(int(d), "GPU work launched") for d in dst[src == i]] + [(int(s), "Launched by") for s in src[dst == i]]
