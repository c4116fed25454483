import numpy as np

from gpuviewer.analysis import intervals as iv


def _mask(ivs, n=1000):
    m = np.zeros(n, bool)
    for s, e in zip(*ivs):
        m[s:e] = True
    return m


def test_against_boolean_masks():
    rng = np.random.default_rng(0)
    for _ in range(50):
        a_s = rng.integers(0, 900, 40)
        a = iv.union(a_s, a_s + rng.integers(1, 60, 40))
        b_s = rng.integers(0, 900, 30)
        b = iv.union(b_s, b_s + rng.integers(1, 80, 30))
        ma, mb = _mask(a), _mask(b)
        assert iv.length(a) == ma.sum()
        assert np.array_equal(_mask(iv.intersect(a, b)), ma & mb)
        assert np.array_equal(_mask(iv.subtract(a, b)), ma & ~mb)
        c = iv.clip(a, 100, 700)
        want = ma.copy()
        want[:100] = False
        want[700:] = False
        assert np.array_equal(_mask(c), want)
        g = iv.gaps(a, 100, 700)
        want_g = ~ma
        want_g[:100] = False
        want_g[700:] = False
        assert np.array_equal(_mask(g), want_g)


def test_lengths_in_windows_against_boolean_masks():
    """lengths_in: an interval set's length inside each of many windows at once, windows that
    overlap each other, touch, hold nothing or have no length among them."""
    rng = np.random.default_rng(1)
    for _ in range(50):
        a_s = rng.integers(0, 900, 40)
        a = iv.union(a_s, a_s + rng.integers(1, 60, 40))
        ma = _mask(a)
        t0 = rng.integers(0, 1000, 25)
        t1 = np.minimum(1000, t0 + rng.integers(0, 200, 25))
        got = iv.lengths_in(a, t0, t1)
        assert got.tolist() == [int(ma[x:y].sum()) for x, y in zip(t0, t1)]
    assert iv.lengths_in(iv.EMPTY, np.array([0]), np.array([5])).tolist() == [0]
