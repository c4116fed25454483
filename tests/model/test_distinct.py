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
