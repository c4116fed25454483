"""Find events by name: a case-insensitive substring or a regular expression over the name
table (a few thousand strings), then one vectorised pass over the event column."""

from __future__ import annotations

import re

import numpy as np

from .trace import Trace


def find(trace: Trace, text: str, regex: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """(mask over events, matching event ids sorted by start). re.error for a bad pattern."""
    if regex:
        pat = re.compile(text)
        ids = [i for i, n in enumerate(trace.names) if pat.search(n)]
    else:
        low = text.lower()
        ids = [i for i, n in enumerate(trace.names) if low in n.lower()]
    names = np.asarray(trace.columns["name"])
    mask = np.isin(names, np.array(ids, np.int32)) if ids else np.zeros(len(names), bool)
    idx = np.flatnonzero(mask)
    return mask, idx[np.argsort(np.asarray(trace.columns["start"])[idx], kind="stable")]
