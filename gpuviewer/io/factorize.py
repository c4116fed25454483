"""Distinct values of a column of millions of rows with few distinct values (threads, names,
NVTX domains), without sorting the column: what np.unique(return_index, return_inverse) gives."""

from __future__ import annotations

import numpy as np

_FEW = 4096  # beyond this many distinct values, np.unique's sort is the better way
# Values within this span (processes, name ids) are looked up in a table of the span: a gather,
# 3-4x faster than the binary search on nsys_ddp_big x10's OSRT processes and names.
_SPAN = 1 << 20


def factorize(key: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(the distinct values, sorted; the row where each first appears; each row's index into
    them). Values of a narrow span by a table of the span (_by_table); others by a binary search
    of every row in the distinct values of a sample, then of the rows it missed: O(n log u)
    rather than a sort of the n rows."""
    n = len(key)
    if n == 0:
        return key[:0].copy(), np.zeros(0, np.intp), np.zeros(0, np.intp)
    lo, hi = int(key.min()), int(key.max())
    if hi - lo < min(_SPAN, 4 * n):
        return _by_table(key, lo, hi)
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


def _by_table(key: np.ndarray, lo: int, hi: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """factorize of values in [lo, hi]: a slot per value of the span, marked where one occurs."""
    off = key - lo
    seen = np.zeros(hi - lo + 1, bool)
    seen[off] = True
    present = np.flatnonzero(seen)
    slot = np.empty(hi - lo + 1, np.intp)
    slot[present] = np.arange(len(present))
    inv = slot[off]
    del off, slot
    return (present + lo).astype(key.dtype), _first_rows(inv, len(present)), inv


def _first_rows(inv: np.ndarray, u: int, chunk: int = 1 << 16) -> np.ndarray:
    """The row where each of the u codes first appears, from the rows' codes: a chunk at a time
    until every code was seen, which is mostly the first chunk (no index array of all the rows)."""
    first = np.full(u, -1, np.intp)
    left = u
    for lo in range(0, len(inv), chunk):
        codes, at = np.unique(inv[lo : lo + chunk], return_index=True)
        new = first[codes] < 0
        first[codes[new]] = at[new] + lo
        left -= int(new.sum())
        if not left:
            break
    return first
