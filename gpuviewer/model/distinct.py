"""The distinct values of a column, sorted: np.unique's answer without its hash table. NumPy
2.3+ finds unique values with a hash table first, which on millions of distinct values is 5-20x
slower than sorting (6M ids with 1M distinct: 4.5 s against 0.56 s)."""

from __future__ import annotations

import numpy as np


def distinct(a) -> np.ndarray:
    """np.unique(a) for an array without NaN (flattened, as np.unique does), by sort."""
    s = np.sort(np.ravel(a))
    if len(s) < 2:
        return s
    keep = np.empty(len(s), bool)
    keep[0] = True
    np.not_equal(s[1:], s[:-1], out=keep[1:])
    return s[keep]
