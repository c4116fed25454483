"""model.distinct gives np.unique's answer (it exists because NumPy 2.3+'s hash-table unique is
slow on many distinct values)."""

import numpy as np
import pytest

from gpuviewer.model.distinct import distinct


@pytest.mark.parametrize("dtype", [np.int64, np.uint32, np.int32, np.float64, np.uint8])
@pytest.mark.parametrize("n, card", [(0, 1), (1, 1), (2, 1), (1000, 3), (50_000, 40_000)])
def test_distinct_equals_numpy_unique(dtype, n, card):
    rng = np.random.default_rng(n + card)
    a = rng.integers(0, min(card, np.iinfo(np.uint8).max if dtype is np.uint8 else card), n).astype(dtype)
    got = distinct(a)
    want = np.unique(a)
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(got, want)


def test_distinct_of_a_2d_array_is_of_its_values():
    a = np.array([[3, 1], [3, 2]])
    np.testing.assert_array_equal(distinct(a), [1, 2, 3])


def _check_narrowed(parts):
    from gpuviewer.model.distinct import narrow_ids

    out = narrow_ids(parts)
    assert [len(q) for q in out] == [len(p) for p in parts]
    assert all(q.dtype == np.uint32 for q in out)
    a = np.concatenate(parts)
    b = np.concatenate(out).astype(np.int64)
    np.testing.assert_array_equal(a == 0, b == 0)  # 0 ("no id") stays 0, no other id becomes 0
    o = np.argsort(a, kind="stable")
    # equal ids stay equal, different ones different, in the same order
    np.testing.assert_array_equal(np.sign(np.diff(a[o])), np.sign(np.diff(b[o])))
    return out


def test_narrow_ids_keep_which_are_equal_and_their_order():
    rng = np.random.default_rng(5)
    # ids as a tiled trace's (file ids + k * 10**9, past 32 bits from k = 5): by blocks
    tiles = [np.where(rng.random(3000) < 0.3, 0, k * 10**9 + rng.integers(1, 400_000, 3000)) for k in range(10)]
    _check_narrowed(tiles)
    # ids spread over more than 4,095 blocks of 2**20 (random 40-bit ids): the dense way
    spread = [rng.integers(0, 1 << 40, 5000) for _ in range(3)]
    spread[1][:100] = spread[0][:100]  # some shared between parts
    _check_narrowed(spread)
    # ids near 2**63 (HTA's large-integer trace) and ids that already fit
    _check_narrowed([np.array([2**63 - 5, 0, 2**63 - 1, 2**63 - 5], np.int64), np.array([7, 0], np.int64)])
    small = _check_narrowed([np.array([0, 5, 0xFFFFFFFF], np.int64)])
    np.testing.assert_array_equal(small[0], [0, 5, 0xFFFFFFFF])  # kept as they are
    assert _check_narrowed([np.zeros(0, np.int64)])[0].dtype == np.uint32
