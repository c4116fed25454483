"""Distinct values of a column of millions of rows with few distinct values (threads, names,
NVTX domains), without sorting the column: what np.unique(return_index, return_inverse) gives."""

from __future__ import annotations

import numpy as np

_FEW = 4096  # beyond this many distinct values, np.unique's sort is the better way


def factorize(key: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(the distinct values, sorted; the row where each first appears; each row's index into
    them). A binary search of every row in the distinct values of a sample, then of the rows it
    missed: O(n log u) rather than a sort of the n rows."""
    n = len(key)
    if n == 0:
        return key[:0].copy(), np.zeros(0, np.intp), np.zeros(0, np.intp)
    uniq = np.unique(key[:: max(1, n // _FEW)])
    for _ in range(2):
        idx = np.searchsorted(uniq, key)
        np.minimum(idx, len(uniq) - 1, out=idx)
        miss = uniq[idx] != key
        if not miss.any():
            break
        uniq = np.union1d(uniq, key[miss])  # every missed value: the second search finds them all
        if len(uniq) > _FEW:
            uniq, first, inv = np.unique(key, return_index=True, return_inverse=True)
            return uniq, first, inv.reshape(-1)
    first = np.full(len(uniq), n, np.intp)
    np.minimum.at(first, idx, np.arange(n, dtype=np.intp))
    return uniq, first, idx
