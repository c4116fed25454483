"""torch.profiler memory-timeline exports (`prof.export_memory_timeline("x.raw.json.gz")` raw
form): a JSON list of [time_ns, action, bytes, category] rows. Time -1 marks memory that
existed before the profile; bytes are signed (a destroy is negative, a version change moves
bytes from one category to another). Categories are PyTorch's _memory_profiler ones in its
export order. This layout is read from PyTorch's source, not documented by it (formats.md D
marks it unverified); a file that does not fit is refused with a message.
"""

from __future__ import annotations

import os

import msgspec
import numpy as np

from ..model.memory import CategorySeries
from .errors import TraceError
from .streams import open_bytes

CATEGORIES = [
    "parameters",
    "optimizer state",
    "inputs",
    "temporaries",
    "activations",
    "gradients",
    "autograd detail",
    "unknown",
]


def looks_like(path: str) -> bool:
    from .streams import first_text_bytes

    head = first_text_bytes(path, 64).lstrip()
    return head.startswith(b"[[") and (head[2:3].isdigit() or head[2:4] == b"-1")


def read_memory_timeline(path: str) -> CategorySeries:
    try:
        with open_bytes(path) as f:
            rows = msgspec.json.decode(f.read())
    except (OSError, EOFError, msgspec.DecodeError) as e:
        raise TraceError(path, f"not a readable memory timeline ({e})") from None
    except RecursionError:  # msgspec stops at Python's recursion limit
        raise TraceError(path, "not a torch memory timeline (nested too deeply)") from None
    shape = "expected rows of [time, action, bytes, category]"
    if not isinstance(rows, list) or not rows or not all(isinstance(r, list) and len(r) == 4 for r in rows[:100]):
        raise TraceError(path, f"not a torch memory timeline ({shape})")
    try:  # every row, not only the first hundred checked above, must be four integers
        a = np.array(rows, dtype=np.int64)
    except (ValueError, TypeError, OverflowError):
        raise TraceError(path, f"not a torch memory timeline ({shape}, all integers)") from None
    if a.ndim != 2 or a.shape[1] != 4:
        raise TraceError(path, f"not a torch memory timeline ({shape})")
    t, nbytes, cat = a[:, 0], a[:, 2], a[:, 3]
    if (cat < 0).any() or (cat >= len(CATEGORIES)).any():
        raise TraceError(path, "unknown memory category numbers in the timeline")
    held = int(nbytes[t < 0].sum())
    t0 = int(t[t >= 0].min()) if (t >= 0).any() else 0
    t = np.where(t < 0, t0, t)  # memory that existed before the profile starts at its start
    o = np.argsort(t, kind="stable")
    t, nbytes, cat = t[o], nbytes[o], cat[o]
    present = sorted(set(cat.tolist()))
    names = [CATEGORIES[c] for c in present]
    vals = np.zeros((len(present), len(t)))
    for k, c in enumerate(present):
        vals[k] = np.cumsum(np.where(cat == c, nbytes, 0))
    return CategorySeries(
        device=0,
        t=t,
        allocated=vals.sum(axis=0),
        names=names,
        values=vals,
        source=os.path.abspath(path),
        held_before=max(0, held),
    )
