"""model.depth.lane_depth: each slice's row in its lane. Checked against the definitions, not the
code: for properly nested slices the depth is the number of slices that enclose it; for any
slices no two on one row overlap; a lane where no slice starts before the one before it ends (a
GPU stream) is all at depth 0 (its one-pass path)."""

from __future__ import annotations

import numpy as np

from gpuviewer.model.depth import lane_depth


def _sorted(start, dur):
    o = np.lexsort((-dur, start))
    return start[o], dur[o]


def _enclosing(start, dur):
    end = start + dur
    return np.array(
        [int(np.sum((start[:i] <= start[i]) & (end[:i] >= end[i]) & (end[:i] > start[i]))) for i in range(len(start))]
    )


def _nested(rng, n):
    """Properly nested slices: each child inside its parent."""
    out = []

    def grow(lo, hi, level):
        t = lo
        while t < hi and len(out) < n:
            d = int(rng.integers(0, max(1, (hi - t) // 2) + 1))
            out.append((t, d))
            if d > 2 and level < 5:
                grow(t + 1, t + d - 1, level + 1)
            t += d + int(rng.integers(0, 3))

    grow(0, 10_000, 0)
    a = np.array(out, np.int64).reshape(-1, 2)
    return _sorted(a[:, 0], a[:, 1])


def test_nested_slices_sit_at_the_number_of_slices_around_them():
    rng = np.random.default_rng(3)
    for _ in range(30):
        start, dur = _nested(rng, 200)
        np.testing.assert_array_equal(lane_depth(start, dur), _enclosing(start, dur))


def test_slices_one_after_another_are_all_at_depth_0():
    rng = np.random.default_rng(4)
    for _ in range(30):
        dur = rng.integers(0, 5, 300)
        gaps = rng.integers(1, 3, 300)
        start = np.cumsum(gaps + np.concatenate([[0], dur[:-1]]))  # each starts after the last's end
        d = lane_depth(start, dur)
        assert d.dtype == np.int64 and not d.any()
    # instants at one time, and a slice that starts as the one before it ends
    assert lane_depth(np.array([5, 5, 5], np.int64), np.array([0, 0, 2], np.int64)[::-1].copy()).tolist() == [0, 1, 1]
    assert lane_depth(np.array([5, 5, 7], np.int64), np.array([0, 0, 1], np.int64)).tolist() == [0, 0, 0]
    assert lane_depth(np.array([5], np.int64), np.array([3], np.int64)).tolist() == [0]
    assert len(lane_depth(np.zeros(0, np.int64), np.zeros(0, np.int64))) == 0


def test_no_two_slices_on_a_row_overlap_whatever_the_slices():
    rng = np.random.default_rng(6)
    for _ in range(30):
        start, dur = _sorted(rng.integers(0, 200, 150), rng.integers(0, 40, 150))
        d = lane_depth(start, dur)
        end = start + dur
        for row in np.unique(d):
            s, e = start[d == row], end[d == row]
            assert not np.any(e[:-1] > s[1:])
